"""train_llm end to end: entry points, config errors, data parallel under msrun / mpirun / two msrun "nodes",
exact resume after SIGKILL, corrupt-checkpoint fallback, SIGTERM checkpointing.

Every run uses the same global batch (8 rows × 64 tokens, a 2-layer tiny model) and 12 steps, so one single-process run is the reference
for all of them."""
import json, os, random, shutil, signal, subprocess, sys, time
from pathlib import Path
import numpy as np
import pytest

import msllm_nb.train_llm as tl

from train_helpers import (BIN, COMPILE_CACHE, STEPS, args, run, run_in_process, train_records, final_weights, check_dp, one_record_per_step, quick, one_line_error,
                           strict_json, sft_folder, digests, msrun, msrun_cmd, launched)


# ---- entry points and errors before compute

def test_module_console_script_and_copied_file(tokens, tmp_path):
    "`python -m`, the console script and a copy of train_llm.py elsewhere all validate the same plan (main returns None: exit 0)."
    shutil.copy(tl.__file__, tmp_path / 'train_llm.py')
    plans = []
    for cmd in ([sys.executable, '-m', 'msllm_nb.train_llm'], [BIN / 'train_llm'], [sys.executable, tmp_path / 'train_llm.py']):
        r = run([*cmd, '--check', *args(tokens, tmp_path / 'x')], cwd=tmp_path)
        assert r.returncode == 0, (cmd, r.stderr[-2000:])
        plans.append(json.loads(r.stdout))
    assert plans[0] == plans[1] == plans[2]
    assert plans[0]['params'] == tl.msm.param_count(tl.model_config(tl.load_config('tiny', ['model.num_hidden_layers=1']))) and plans[0]['train_windows'] > 10_000
    assert tl.msm.param_count(tl.model_config(tl.load_config('tiny'))) == 7_358_720  # the course model, as its config's header says
    assert not (tmp_path / 'x').exists()  # --check computes nothing and writes nothing


@pytest.mark.parametrize('extra,message', [
    (['stepz=5'], "unknown config keys ['stepz']"),
    (['model.vocab_size=1000'], "model.vocab_size 1000 is smaller than the tokenizer's 8192"),
    (['seq_len=1024'], 'seq_len 1024 exceeds model.max_position_embeddings 256'),
    (['token_dir=/nonexistent/tokens'], 'token_dir /nonexistent/tokens: no such folder'),
    (['batch_size=200000'], 'needs 200000 windows'),
    (['lr=fast'], "--set lr=fast: lr 'fast': expected a finite number > 0"),
    (['nan_policy=ignore'], "--set nan_policy=ignore: nan_policy must be stop, skip or rollback, got 'ignore'"),
    (['profile_steps=-1'], '--set profile_steps=-1: profile_steps -1: expected a whole number ≥ 0'),
    (['profile_steps=11'], 'profile_steps must be between 0 and steps - 2 = 10 (2 steps run unprofiled first), got 11'),
    (['lr=-1'], '--set lr=-1: lr -1: expected a finite number > 0'),
    (['beta1=1.5'], 'beta1 1.5: expected a finite number ≥ 0 and < 1'),
    (['grad_clip=nan'], "--set grad_clip=nan: grad_clip 'nan': expected a finite number ≥ 0 (nan and inf are refused)"),  # nan used to switch clipping off
    (['lr=inf'], "--set lr=inf: lr 'inf': expected a finite number > 0 (nan and inf are refused)"),  # inf used to die at step 2
    (['steps=abc'], "--set steps=abc: steps 'abc': expected a whole number ≥ 1"),
    (['seq_len=1.5'], '--set seq_len=1.5: seq_len 1.5: expected a whole number ≥ 2'),
    (['seq_len=1'], '--set seq_len=1: seq_len 1: expected a whole number ≥ 2'),  # a window of one token has no label
    (['lr=[1]'], '--set lr=[1]: lr [1]: expected a finite number > 0'),
    (['seed=-1'], '--set seed=-1: seed -1: expected a whole number ≥ 0'),
    (['token_dir=[a]'], "--set token_dir=[a]: token_dir ['a']: expected text"),
    (['model.rms_norm_eps=nan'], "--set model.rms_norm_eps=nan: model.rms_norm_eps 'nan': expected a finite number > 0"),
    (['sample_prompts=[The'], '--set sample_prompts=[The: not a YAML value'),
    (['stepz=5'], "--set stepz=5: unknown config keys ['stepz']"),
    (['sample_prompts=["The", ""]'], "sample_prompts must be a list of non-empty strings (or [] for no samples), got ['The', '']"),
    (['lora_rank=8'], '--set lora_rank=8 / defaults: lora_rank adapts a trained model: set init_from'),
    (['lora_rank=8', 'init_from=/nonexistent/model.ckpt', 'zero=1'], '--set lora_rank=8 / --set zero=1: lora_rank with zero 1 is not supported'),  # LoRA with ZeRO-1: refused, not half-sharded
    (['--set', 'profile_steps=11'], 'profile_steps must be between 0 and steps - 2 = 10'),  # a second --set adds to the first
    (['replicas=3'], 'replicas 3: groups of 3 ranks do not divide a job of 1'),  # the mesh (06·4): replicas × data parallel = the ranks
    (['init_from=/nonexistent/model.ckpt'], 'init_from /nonexistent/model.ckpt: no such checkpoint (msllm-convert writes one'),  # not 'its config is missing'
])
def test_bad_config_is_refused_before_compute(tokens, tmp_path, extra, message):
    a = args(tokens, tmp_path / 'run')
    r = run([BIN / 'train_llm', *a, *extra]) if extra == ['stepz=5'] else run_in_process('train_llm', *a, *extra)  # one real process
    one_line_error(r, 2, message)
    assert not (tmp_path / 'run').exists()


def test_unknown_config_file_names_it(tmp_path):
    r = run([BIN / 'train_llm', '--config', tmp_path / 'nope.yaml', '--check'])
    assert r.returncode == 2 and 'nope.yaml: no such file' in r.stderr


def test_config_file_mistakes_are_one_line_naming_the_file(tokens, tmp_path):
    "A YAML syntax error names the file and its line; a non-finite value in the file names the file and the key; exit 2, nothing written."
    broken = tmp_path / 'broken.yaml'
    broken.write_text('steps: 10\nlr: [1.0e-3\nseq_len: 64\n')  # an unclosed bracket
    r = run([BIN / 'train_llm', '--config', broken, '--out', tmp_path / 'run', '--set', f'token_dir={tokens}'])
    line = one_line_error(r, 2, f'{broken}:', 'YAML')
    assert line.split(f'{broken}:')[1].split(':')[0].isdigit(), line  # file:line
    nan = tmp_path / 'nan.yaml'
    nan.write_text('grad_clip: .nan\nlr: 1.0e-3\n')
    r = run([BIN / 'train_llm', '--config', nan, '--out', tmp_path / 'run', '--check', '--set', f'token_dir={tokens}'])
    one_line_error(r, 2, f'{nan}: grad_clip nan: expected a finite number ≥ 0')
    assert not (tmp_path / 'run').exists()


def test_out_dir_that_is_a_file_is_refused_before_writing(tokens, tmp_path):
    f = tmp_path / 'notes.txt'; f.write_text('mine')
    for extra in ([], ['--check']):
        r = run([BIN / 'train_llm', *quick(tokens, f), *extra])
        one_line_error(r, 2, f'out_dir {f}', 'not a folder')
    r = run([BIN / 'train_llm', *quick(tokens, f / 'run')])  # a folder inside the file
    one_line_error(r, 2, f'out_dir {f / "run"}', f'{f} is a file')
    assert f.read_text() == 'mine' and sorted(p.name for p in tmp_path.iterdir()) == ['notes.txt']


def test_every_numeric_flag_declares_its_bounds(tokens, tmp_path):
    from msllm_nb.core.cli import parser_of
    loose = [a.dest for a in parser_of(tl.main)._actions if a.type in (int, float)]
    assert loose == [], loose
    r = run([BIN / 'train_llm', '--check', *args(tokens, tmp_path / 'x'), '--zero', '2'])
    one_line_error(r, 2, '--zero')


def test_zero1_on_one_process_says_it_has_nothing_to_shard(tokens, tmp_path, capsys):
    "--zero 1 on one process: one line saying so, and the run is plain data parallel (zero 0: the same numbers)."
    r = run([BIN / 'train_llm', '--check', *args(tokens, tmp_path / 'x'), '--zero', '1'])
    assert r.returncode == 0 and json.loads(r.stdout)['config']['zero'] == 0, r.stderr[-2000:]
    one_line_error(r, 0, 'zero 1 on one process: nothing to shard')
    cfg = tl.load_config('tiny', [f'token_dir={tokens}', 'zero=1'])
    tl.check_config(cfg, 2); assert cfg.zero == 1 and capsys.readouterr().err == ''  # two ranks: sharded
    tl.check_config(cfg, 1); assert cfg.zero == 0 and 'nothing to shard' in capsys.readouterr().err
    assert not (tmp_path / 'x').exists()


# ---- the reference run's outputs

def test_reference_run_outputs(reference):
    recs = train_records(reference)
    assert sorted(recs) == list(range(1, STEPS + 1))
    val = tl.read_metrics(reference, 'val')
    assert [v['step'] for v in val] == [0, 6, 12] and val[-1]['loss'] < val[0]['loss'] - 0.5
    tr = tl.read_metrics(reference, 'train')
    for k in ('lr', 'grad_norm', 'tokens_per_s', 'mfu', 'step_s', 'data_wait_s', 'rss_mb'):
        assert all(np.isfinite(r[k]) for r in tr), k
    busy = [e for e in tl.read_metrics(reference, 'event') if e['event'] == 'MFU peak measured on a busy machine']
    mfu = np.median([r['mfu'] for r in tr])
    assert 0 < mfu < (10 if busy else 1), mfu  # a peak measured under load can be too low: the run then says so in an event
    ck = tl.Checkpoints(Path(reference) / 'checkpoints')
    assert ck.steps() == [12, 9, 6] and (Path(reference) / 'checkpoints' / 'latest').read_text().strip() == 'step_00000012'
    ev = list((Path(reference) / 'tb').glob('events.out.tfevents.*'))
    assert ev and b'train/loss' in ev[0].read_bytes() and b'val/loss' in ev[0].read_bytes()
    from msllm_nb.model.formats import load_model
    load_model(Path(reference) / 'checkpoints' / 'step_00000012' / 'model.ckpt')  # a plain model checkpoint, strict load


def test_existing_run_needs_resume(tokens, reference):
    r = run([BIN / 'train_llm', *args(tokens, reference)])
    assert r.returncode == 2 and 'pass --resume' in r.stderr


# ---- exact resume

@pytest.mark.slow
def test_sigkill_then_resume_is_bitwise_identical(tokens, reference, tmp_path):
    kill_at = random.Random().randint(4, 10)  # a random step, as a crash would pick
    p = subprocess.Popen([str(BIN / 'train_llm'), *args(tokens, tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while p.poll() is None and not any(r['step'] >= kill_at for r in tl.read_metrics(tmp_path, 'train')): time.sleep(0.05)
    p.send_signal(signal.SIGKILL); p.wait()
    assert p.returncode == -signal.SIGKILL
    r = run([BIN / 'train_llm', *args(tokens, tmp_path), '--resume'])
    assert r.returncode == 0, r.stderr[-3000:]
    resumed = [e for e in tl.read_metrics(tmp_path, 'event') if e['event'] == 'resumed']
    assert len(resumed) == 1 and resumed[0]['step'] % 3 == 0  # from the last checkpoint written before the kill
    assert train_records(tmp_path) == train_records(reference), f'killed at step {kill_at}'  # one record per step
    superseded = one_record_per_step(tmp_path)  # the steps redone after the checkpoint: set aside, not counted twice
    sup = sorted(json.loads(l)['step'] for l in superseded if json.loads(l)['kind'] == 'train')
    assert sup == list(range(resumed[0]['step'] + 1, resumed[0]['step'] + 1 + len(sup))) and resumed[0]['step'] + len(sup) >= kill_at, sup
    assert resumed[0]['superseded_records'] == len(superseded)
    tb = sorted((tmp_path / 'tb').glob('events.out.tfevents.*'))
    assert len(tb) == 2  # the resumed writer starts a new event file that purges the superseded steps (TensorBoard's purge_step)
    seen = [i for s in sorted(train_records(tmp_path)) for i in train_records(tmp_path)[s][1]]
    assert len(seen) == len(set(seen)) == STEPS * 8  # no window twice (12 steps are well inside one epoch)
    ref_w, w = final_weights(reference), final_weights(tmp_path)
    assert all(np.array_equal(ref_w[k], w[k]) for k in ref_w)


@pytest.mark.slow
def test_corrupt_latest_checkpoint_falls_back(tokens, reference, tmp_path):
    shutil.copytree(reference, tmp_path / 'run')
    out = tmp_path / 'run'
    ck = out / 'checkpoints' / f'step_{STEPS:08d}' / 'model.ckpt'
    data = bytearray(ck.read_bytes()); data[len(data) // 2] ^= 0xFF; ck.write_bytes(bytes(data))  # one flipped byte
    (out / 'metrics.jsonl').write_text('')
    r = run([BIN / 'train_llm', *args(tokens, out), '--resume'])
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'step_00000012 is not usable' in r.stdout and 'CRC mismatch' in r.stdout, r.stdout[-2000:]
    assert [e['checkpoint'] for e in tl.read_metrics(out, 'event') if e['event'] == 'resumed'] == ['step_00000009']
    ref = train_records(reference)
    assert train_records(out) == {s: ref[s] for s in (10, 11, 12)}


def test_resume_with_no_usable_checkpoint_refuses_to_restart(tokens, reference, tmp_path):
    "--resume never silently trains from scratch: each checkpoint is named with its reason, exit 1; --allow_restart does restart."
    out = tmp_path / 'run'; shutil.copytree(reference, out)
    for d in (out / 'checkpoints').glob('step_*'): (d / 'model.ckpt').write_bytes(b'garbage')
    r = run([BIN / 'train_llm', *args(tokens, out), '--resume'])
    assert r.returncode == 1, r.stderr[-2000:]
    msg = r.stderr.strip().splitlines()[-1]
    assert 'no usable checkpoint' in msg and all(f'step_{s:08d}' in msg for s in (6, 9, 12)) and 'bytes, expected' in msg, msg
    assert 'Traceback' not in r.stderr and 'resumed' not in [e['event'] for e in tl.read_metrics(out, 'event')]
    r = run([BIN / 'train_llm', *args(tokens, out), '--resume', '--allow_restart'])  # said explicitly: trains from step 0
    assert r.returncode == 0, r.stderr[-2000:]
    ev = [e['event'] for e in tl.read_metrics(out, 'event')]
    assert 'restarted: no usable checkpoint' in ev and 'resumed' not in ev
    assert train_records(out).keys() == set(range(1, STEPS + 1))  # the old run's records were set aside, not doubled
    assert tl.Checkpoints(out / 'checkpoints').steps() == [12, 9, 6] and sorted(p.name for p in (out / 'checkpoints.unusable').iterdir()) == \
        ['step_00000006', 'step_00000009', 'step_00000012']


def test_resume_with_another_numbers_changing_value_is_refused(tokens, reference, tmp_path):
    "A field that changes the numbers (here one the hash used to miss) must agree: the message names it with both values."
    out = tmp_path / 'run'; shutil.copytree(reference, out)
    r = run([BIN / 'train_llm', *args(tokens, out, 'loss_scale_window=500'), '--resume'])
    assert r.returncode == 2 and 'loss_scale_window: checkpoint 1000, this run 500' in r.stderr, r.stderr[-2000:]


@pytest.mark.slow
def test_sigterm_writes_a_checkpoint_and_resume_continues(tokens, reference, tmp_path):
    p = subprocess.Popen([str(BIN / 'train_llm'), *args(tokens, tmp_path, 'save_every=100')], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    while p.poll() is None and not any(r['step'] >= 4 for r in tl.read_metrics(tmp_path, 'train')): time.sleep(0.05)
    p.send_signal(signal.SIGTERM); out, _ = p.communicate(timeout=120)
    assert p.returncode == 128 + signal.SIGTERM, out[-2000:]
    steps = tl.Checkpoints(tmp_path / 'checkpoints').steps()
    assert len(steps) == 1 and 4 <= steps[0] < STEPS and 'stopped by signal 15' in out
    r = run([BIN / 'train_llm', *args(tokens, tmp_path, 'save_every=100'), '--resume'])
    assert r.returncode == 0, r.stderr[-3000:]
    assert train_records(tmp_path) == train_records(reference)


# ---- data parallel

@pytest.mark.cluster
def test_msrun_two_ranks_equal_one_process(msrun_dp, reference):
    check_dp(msrun_dp, reference)
    assert json.loads((msrun_dp / 'summary.json').read_text())['world'] == 2


@pytest.mark.cluster
def test_mpirun_two_ranks_equal_one_process(tokens, reference, tmp_path):
    root_ok = {'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1'}  # CI runs as root
    launched([BIN / 'mpirun', '-n', '2', '--oversubscribe', sys.executable, tl.__file__,
              *args(tokens, tmp_path, f'sched_port={tl.free_port()}', batch=4)], tmp_path, 2, env=root_ok)
    check_dp(tmp_path, reference)


@pytest.fixture
def second_host():
    """A second "host": a network namespace joined to this one by a veth pair (10.213.N.1 here, 10.213.N.2 there).

    msrun starts a scheduler on every node whose own addresses include --master_addr, so two msrun invocations that
    both use 127.0.0.1 would both start one; with the second node in its own namespace, only node 0 is the master,
    as on a real cluster."""
    n = os.getpid() % 200 + 20
    ns, a, b = f'msllm{os.getpid()}', f'msa{os.getpid()}', f'msb{os.getpid()}'
    cmds = [f'ip netns add {ns}', f'ip link add {a} type veth peer name {b}', f'ip link set {b} netns {ns}',
            f'ip addr add 10.213.{n}.1/24 dev {a}', f'ip link set {a} up', f'ip netns exec {ns} ip addr add 10.213.{n}.2/24 dev {b}',
            f'ip netns exec {ns} ip link set {b} up', f'ip netns exec {ns} ip link set lo up']
    try:
        for c in cmds:
            r = subprocess.run(c.split(), capture_output=True, text=True)
            assert r.returncode == 0, f'{c}: {r.stderr} (the two-node test needs root and iproute2 for a network namespace)'
        yield ns, f'10.213.{n}.1'
    finally:
        subprocess.run(['ip', 'link', 'del', a], capture_output=True)
        subprocess.run(['ip', 'netns', 'del', ns], capture_output=True)


@pytest.mark.cluster
def test_two_msrun_nodes_form_one_job(tokens, reference, tmp_path, second_host):
    "Two msrun invocations, one worker each, --node_rank 0 and 1 with the same --master_addr: one 2-rank job."
    ns, master = second_host
    port = tl.free_port()
    env = {**os.environ, 'PATH': f"{BIN}:{os.environ.get('PATH', '')}"}
    def node(n):
        cmd = [str(BIN / 'msrun'), '--worker_num=2', '--local_worker_num=1', f'--node_rank={n}', f'--master_addr={master}',
               f'--master_port={port}', f'--log_dir={tmp_path}/logs{n}', '--join=True', tl.__file__, *args(tokens, tmp_path, batch=4)]
        return subprocess.Popen((['ip', 'netns', 'exec', ns] if n else []) + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    procs = [node(0), node(1)]
    codes = [p.wait(timeout=900) for p in procs]
    assert codes == [0, 0], (codes, [(tmp_path / f'logs{n}' / f'worker_{n}.log').read_text()[-2000:] for n in (0, 1)])
    assert not (tmp_path / 'logs1' / 'scheduler.log').exists()  # only node 0 ran a scheduler
    check_dp(tmp_path, reference)


# ---- a new user's mistakes (issue 56): data without labels, no validation, non-finite numbers, finished runs, LoRA, MFU

def test_sft_folder_without_labels_is_refused_before_step_1(tmp_path):
    "SFT batches are [B, 4, L] (ids, labels, segment, position): a folder whose labels are all −100 is refused naming it, before anything is written."
    d = sft_folder(tmp_path / 'sft', masked=True)
    for extra in ([], ['--check']):
        r = run([BIN / 'train_llm', *quick(d, tmp_path / 'run'), *extra])
        one_line_error(r, 2, f'token_dir {d}', '-100', 'training windows')
    assert not (tmp_path / 'run').exists()


def test_data_folder_of_a_format_no_plugin_reads_is_refused(tmp_path):
    "A meta.json `format` no installed plugin answers to (06·6) is one line naming the file and the formats there are; nothing written."
    d = sft_folder(tmp_path / 'data', masked=False)
    meta = json.loads((d / 'meta.json').read_text()); meta['format'] = 'parquet'
    (d / 'meta.json').write_text(json.dumps(meta))
    for extra in ([], ['--check']):
        r = run_in_process('train_llm', *quick(d, tmp_path / 'run'), *extra)
        one_line_error(r, 2, f"{d}/meta.json: format: no format plugin named 'parquet'", 'installed: sft')
    assert not (tmp_path / 'run').exists()


@pytest.mark.parametrize('text, says', [
    ('{"format": ["sft"]}', "format ['sft']: expected the name of a format"),
    ('[1, 2]', 'expected a JSON object, got list'),
    ('{"vocab_size": 100', ':1: not valid JSON'),
    ('{"vocab_size": 100}', "no 'shards': not a token folder"),
])
def test_a_malformed_meta_json_is_one_line_naming_it(tmp_path, text, says):
    d = tmp_path / 'data'; d.mkdir(); (d / 'meta.json').write_text(text)
    r = run_in_process('train_llm', *quick(d, tmp_path / 'run'), '--check')
    one_line_error(r, 2, f'{d}/meta.json', says)
    assert not (tmp_path / 'run').exists()


def test_a_format_plugin_is_read_through_its_own_windows_and_meta(tmp_path):
    "A format plugged in by name (06·6) is read through its own windows and meta: the vocabulary may live there, not in the file."
    import msllm_nb.train.plugins as P
    ones = lambda folder, seq_len, vocab=100: ([(np.ones(seq_len, np.int32),)] * 50, {'format': 'ones', 'vocab_size': vocab})
    P.register('format', 'ones', P.DataFormat(ones, lambda model, world, group: tl.LossCell(model)))
    P.register('format', 'ones_novocab', P.DataFormat(lambda f, n: ones(f, n, None), lambda model, world, group: tl.LossCell(model)))
    try:
        d = tmp_path / 'data'; d.mkdir(); (d / 'meta.json').write_text('{"format": "ones"}')
        r = run_in_process('train_llm', *quick(d, tmp_path / 'run'), '--check')
        assert r.returncode == 0 and json.loads(r.stdout)['train_windows'] == 49, r.stderr
        (d / 'meta.json').write_text('{"format": "ones_novocab"}')
        one_line_error(run_in_process('train_llm', *quick(d, tmp_path / 'run'), '--check'), 2, f'{d}/meta.json: vocab_size None')
    finally:
        for n in ('ones', 'ones_novocab'): P._local['format'].pop(n)


def test_check_labels_reads_the_labels_of_the_data_format(tmp_path):
    "The per-step check reads the labels where the format keeps them: row 1 of an SFT window, the shifted tokens of a chapter 03 window."
    d = sft_folder(tmp_path / 'sft', masked=False)
    read = tl.label_reader(d)
    win, _ = tl.data_format(d).windows(d, 64)
    src = tl.GlobalBatches(win, 4, steps=2)
    x = src[0][0].copy()
    log = tl.MetricsLog(tmp_path, console=False, tensorboard=False)
    tl.check_labels(x, -100, 1, src, log, read)  # answers to learn from: goes on
    x[:, 1] = -100  # ids, segments and positions stay: the old check looked at rows 1..3 and let this batch train at loss 0
    with pytest.raises(tl.DataError, match='every label of the batch is -100'): tl.check_labels(x, -100, 1, src, log, read)
    tokens_read = tl.label_reader(tl.sample_tokens())
    assert np.array_equal(tokens_read(np.arange(12).reshape(2, 6)), np.arange(12).reshape(2, 6)[:, 1:])


def test_no_validation_windows_no_validation_figure(tokens, tmp_path):
    "val_fraction 0: no 'val' record and final_val_loss null (it was a NaN written as bare NaN); every file is strict JSON; the peak's source is recorded."
    r = run([BIN / 'train_llm', *quick(tokens, tmp_path, 'val_fraction=0')])
    assert r.returncode == 0, r.stderr[-3000:]
    s = strict_json((tmp_path / 'summary.json').read_text())
    assert s['final_val_loss'] is None and s['val_windows'] == 0 and tl.read_metrics(tmp_path, 'val') == []
    for line in (tmp_path / 'metrics.jsonl').read_text().splitlines(): strict_json(line)
    strict_json((tmp_path / 'checkpoints' / 'step_00000002' / 'meta.json').read_text())
    assert s['peak_source'] == 'measured' and isinstance(s['peak_busy'], bool) and s['peak_flops'] > 0, s
    busy = [l for l in r.stdout.splitlines() if 'MFU: peak measured on a busy machine' in l]  # a caveat, not an error: stdout
    assert len(busy) == int(s['peak_busy']) and 'busy machine' not in r.stderr, r.stdout[-2000:]


def test_non_finite_numbers_are_never_written_as_json(tmp_path):
    "A NaN loss (logged before nan_policy acts) and an Inf weight norm are null in the files, with a field saying what they were; read back, they are numbers again."
    log = tl.MetricsLog(tmp_path, console=False, tensorboard=False)
    log('train', 3, loss=float('nan'), grad_norm=float('inf'), lr=1e-3)
    log.close()
    rec = strict_json((tmp_path / 'metrics.jsonl').read_text())
    assert rec['loss'] is None and rec['grad_norm'] is None and rec['non_finite'] == {'loss': 'nan', 'grad_norm': 'inf'}
    back = tl.read_metrics(tmp_path, 'train')[0]
    assert np.isnan(back['loss']) and back['grad_norm'] == float('inf') and back['lr'] == 1e-3 and 'non_finite' not in back
    assert tl.first_abnormal_step(tl.read_metrics(tmp_path, 'train')) == (3, 'loss nan, gradient norm inf')
    text = tl.dumps_finite({'final_val_loss': float('nan'), 'w': [1.0, float('-inf')], 'ok': 2.5})
    assert strict_json(text) == {'final_val_loss': None, 'w': [1.0, None], 'ok': 2.5, 'non_finite': {'final_val_loss': 'nan', 'w[1]': '-inf'}}


def test_resume_of_a_finished_run_writes_what_was_missing(tokens, reference, tmp_path):
    "--resume of a finished run, or of one killed after its last save: one line, the summary and rank digests written, exit 0, nothing trained."
    out = tmp_path / 'run'; shutil.copytree(reference, out)
    want = json.loads((Path(reference) / 'summary.json').read_text())
    for case in ('finished', 'killed before summary.json'):
        if case != 'finished': (out / 'summary.json').unlink(); shutil.rmtree(out / 'ranks')
        r = run([BIN / 'train_llm', *args(tokens, out), '--resume'])
        assert r.returncode == 0 and 'Traceback' not in r.stderr, (case, r.stderr[-3000:])
        assert f'{out}: already trained to step {STEPS}; summary written' in r.stdout, (case, r.stdout[-2000:])
        s = strict_json((out / 'summary.json').read_text())
        assert s['params_sha256'] == want['params_sha256'] and s['final_val_loss'] == want['final_val_loss'] and s['steps'] == STEPS, case
        assert digests(out, 1) == [want['params_sha256']], case
    assert train_records(out) == train_records(reference)  # nothing trained, no step logged twice
    one_record_per_step(out)


@pytest.mark.cluster
def test_mesh_of_2_data_ranks_by_2_replicas_equals_2_rank_dp_bitwise(tokens, msrun_dp, tmp_path):
    "4 ranks as Mesh(dp=2, tp=2) with replicas in the tp groups: each replica pair computes what 2 ranks of data parallel compute, bit for bit."
    out = tmp_path / 'mesh'
    cmd = [BIN / 'msrun', '--worker_num=4', '--local_worker_num=4', f'--master_port={tl.free_port()}', f'--log_dir={out}/logs',
           '--join=True', tl.__file__, *args(tokens, out, 'replicas=2', batch=4)]
    launched(cmd, out, 4)
    assert json.loads((out / 'summary.json').read_text())['mesh'] == {'dp': 2, 'tp': 2, 'pp': 1}
    assert train_records(out) == train_records(msrun_dp)  # every step's loss and global batch, exactly
    w, ref = final_weights(out), final_weights(msrun_dp)
    assert all(np.array_equal(w[k], ref[k]) for k in ref)
    ranks = [json.loads((out / 'ranks' / f'rank_{k}.json').read_text()) for k in range(4)]
    assert [(q['tp'], q['dp']) for q in ranks] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert {q['params_sha256'] for q in ranks} == set(digests(msrun_dp, 2))  # one digest: the 2-rank run's
    from msllm_nb.debug.doctor import check_ranks  # msllm-doctor compares replicas too: all four ranks must agree
    assert check_ranks(out) == [] and all(q['tp_replicas'] for q in ranks)
    (out / 'ranks' / 'rank_1.json').write_text(json.dumps({**ranks[1], 'params_sha256': 'f' * 64}))  # one replica drifts
    assert [f.code for f in check_ranks(out)] == ['ranks_diverged']


def test_resume_of_a_finished_msrun_run(tokens, msrun_dp, tmp_path):
    "The same under msrun: every rank sees the finished run, writes its digest, and exits 0."
    out = tmp_path / 'run'; shutil.copytree(msrun_dp, out)
    want = json.loads((out / 'summary.json').read_text())
    (out / 'summary.json').unlink(); shutil.rmtree(out / 'ranks'); shutil.rmtree(out / 'logs')
    msrun(tokens, out, '--resume')
    assert strict_json((out / 'summary.json').read_text())['params_sha256'] == want['params_sha256']
    assert digests(out, 2) == [want['params_sha256']] * 2
    assert 'already trained to step' in (out / 'logs' / 'worker_0.log').read_text()


def test_copy_tokenizer_takes_the_tokenizer_files_only(tmp_path):
    "A SentencePiece file is copied as tokenizer.model; a Hugging Face folder's tokenizer files go to model_tokenizer/ (msllm-convert's name), its weights do not."
    sp = tmp_path / 'bpe.model'; sp.write_bytes(b'sp')
    assert tl.copy_tokenizer(sp, tmp_path / 'a') == 'tokenizer.model' and (tmp_path / 'a' / 'tokenizer.model').read_bytes() == b'sp'
    hf = tmp_path / 'hf'; hf.mkdir()
    for name in ('tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'chat_template.jinja', 'model.safetensors'): (hf / name).write_text(name)
    for src in (hf, hf / 'tokenizer.json'):
        dst = tmp_path / ('b' if src == hf else 'c')
        assert tl.copy_tokenizer(src, dst) == 'model_tokenizer'
        assert sorted(p.name for p in (dst / 'model_tokenizer').iterdir()) == ['chat_template.jinja', 'special_tokens_map.json', 'tokenizer.json', 'tokenizer_config.json']


def test_lora_merged_folder_carries_its_tokenizer(tokens, tmp_path):
    "merged/ of a LoRA run holds the tokenizer and names it in its meta.json: moved elsewhere, it is still whole."
    from msllm_nb.model.formats import save_ms_weights
    from msllm_nb.corpus.bpe import load_tokenizer
    cfg = tl.msm.LlamaConfig(**{**tl.msm.PRESETS['tiny'].__dict__, 'vocab_size': 8192, 'max_position_embeddings': 256, 'num_hidden_layers': 1})
    save_ms_weights({p.name: p.asnumpy() for p in tl.msm.LlamaForCausalLM(cfg).get_parameters()}, tmp_path / 'base' / 'model.ckpt', cfg)
    r = run([BIN / 'train_llm', *quick(tokens, tmp_path / 'run', f'init_from={tmp_path / "base" / "model.ckpt"}', 'lora_rank=2')])
    assert r.returncode == 0, r.stderr[-3000:]
    moved = tmp_path / 'elsewhere'; shutil.copytree(tmp_path / 'run' / 'merged', moved)
    meta = strict_json((moved / 'meta.json').read_text())
    assert meta['tokenizer'] == 'tokenizer.model' and (moved / 'tokenizer.model').exists(), meta
    assert meta['files']['model.ckpt']['bytes'] == (moved / 'model.ckpt').stat().st_size  # the merged weights, not the adapters
    assert load_tokenizer(moved / meta['tokenizer']).encode('The cat') == load_tokenizer(Path(tokens) / 'tokenizer.model').encode('The cat')


def test_mfu_peak_says_where_it_came_from(monkeypatch):
    "A peak measured on a busy CPU is too low, so MFU is too high: the summary records where the peak came from, and one line warns."
    monkeypatch.setattr(tl.os, 'getloadavg', lambda: (3.1, 1.0, 1.0))
    monkeypatch.setattr(tl.os, 'cpu_count', lambda: 2)
    p = tl.job_peak(0.0, 1, 'CPU', measure=lambda: 5e10)
    assert p == {'peak_flops': 5e10, 'peak_source': 'measured', 'peak_busy': True, 'load': 3.1, 'cores': 2}
    assert tl.peak_warning(p) == 'MFU: peak measured on a busy machine (load 3.1 on 2 cores): set peak_tflops for stable figures'
    monkeypatch.setattr(tl.os, 'getloadavg', lambda: (0.4, 1.0, 1.0))
    assert tl.job_peak(0.0, 1, 'CPU', measure=lambda: 5e10)['peak_busy'] is False and tl.peak_warning(tl.job_peak(0.0, 1, 'CPU', measure=lambda: 5e10)) is None
    assert tl.job_peak(2.0, 2, 'GPU') == {'peak_flops': 4e12, 'peak_source': 'peak_tflops', 'peak_busy': False}


@pytest.mark.parametrize('var,value', [('OMPI_COMM_WORLD_SIZE', 'abc'), ('MS_WORKER_NUM', '2.5')])
def test_a_launcher_variable_that_is_not_a_number_is_named(tokens, tmp_path, var, value):
    "A job script that sets a launcher's variable wrongly gets one line naming the variable, exit 2, nothing written."
    extra = {var: value, 'OMPI_COMM_WORLD_RANK': '0'} if var.startswith('OMPI') else {var: value, 'MS_ROLE': 'MS_WORKER', 'MS_NODE_ID': '0'}
    r = run([BIN / 'train_llm', '--check', *args(tokens, tmp_path / 'run')], extra_env=extra)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and err[0].startswith(f"train_llm: {var}={value!r}: not a whole number"), r.stderr[-2000:]
    assert not (tmp_path / 'run').exists()


# ---- the compile cache (06·4)

HIT = 'Use the compilation cache'  # what MindSpore 2.9 logs (a warning) when it loads a cached graph


def _cache_folders(cache):
    "The published folders of a compile cache, and the private work folders left behind (none, unless a run was killed)."
    kids = sorted(Path(cache).iterdir()) if Path(cache).exists() else []
    return [k.name for k in kids if not k.name.startswith('.')], [k.name for k in kids if k.name.startswith('.')]


def test_compile_cache_runs_equal_the_compiled_run_and_each_configuration_has_its_folder(tokens, reference, tmp_path):
    """The first run with compile_cache writes its configuration's folder, the second reads it: both equal the run that
    compiled without a cache, bit for bit (06·4's cells show that another seq_len, model or schedule is another key). A
    resume uses no folder; a cache path that is a file is one line, exit 2."""
    cache = tmp_path / 'cache'
    for i in range(2):
        out = tmp_path / f'r{i}'
        r = run([BIN / 'train_llm', *args(tokens, out, f'compile_cache={cache}')], extra_env={'GLOG_v': '2'})
        assert r.returncode == 0, r.stderr[-3000:]
        assert (HIT in r.stderr) == (i == 1), (i, r.stderr[-3000:])  # MindSpore's own line: the second run read the cache
        assert train_records(out) == train_records(reference) and digests(out, 1) == digests(reference, 1), i
        val = lambda o: [(v['step'], v['loss']) for v in tl.read_metrics(o, 'val')]
        assert val(out) == val(reference), i
        published, work = _cache_folders(cache)
        assert len(published) == 1 and work == [], (published, work)
        assert sorted(p.name for p in (cache / published[0]).rglob('*.mindir'))[:1] == ['compile_cache_0.mindir']
    r = run([BIN / 'train_llm', *args(tokens, tmp_path / 'r1', f'compile_cache={cache}'), '--resume'])  # a finished run: its summary again
    assert r.returncode == 0 and _cache_folders(cache) == (published, []), r.stderr[-3000:]
    (tmp_path / 'a_file').write_text('')
    one_line_error(run([BIN / 'train_llm', *args(tokens, tmp_path / 'x', f'compile_cache={tmp_path / "a_file"}')]), 2, 'compile_cache')


@pytest.mark.cluster
def test_compile_cache_under_msrun_gives_each_rank_its_folder_and_the_same_numbers(tokens, msrun_dp, tmp_path):
    "`msrun_dp` published a folder per rank in the session's cache; the same launch again reads them and equals it bit for bit."
    cache = os.environ.get(COMPILE_CACHE)
    if not cache: pytest.skip(f'{COMPILE_CACHE} is empty: the runs share no compile cache')
    ranks = lambda: {p.name for f in Path(cache).iterdir() if not f.name.startswith('.') for p in f.iterdir() if p.is_dir()}
    assert {'rank_0', 'rank_1'} <= ranks(), ranks()
    out = tmp_path / 'again'
    launched(msrun_cmd(tokens, out), out, 2, env={'GLOG_v': '2'})
    assert train_records(out) == train_records(msrun_dp) and digests(out, 2) == digests(msrun_dp, 2)
    for r in range(2): assert HIT in (out / 'logs' / f'worker_{r}.log').read_text(), r


def test_a_killed_runs_private_copy_is_swept_and_a_live_ones_kept(tmp_path):
    "compile_cache's sweep removes work folders whose process on this host is gone, and keeps those of live processes."
    import socket
    from msllm_nb.train.launch import _sweep
    dead = subprocess.Popen([sys.executable, '-c', 'pass']); dead.wait()
    host = socket.gethostname()
    for pid in (dead.pid, os.getpid()): (tmp_path / f'.k{pid}.{pid}.{host}.x1').mkdir()
    (tmp_path / f'.other.{dead.pid}.elsewhere.x1').mkdir()  # another host's: its process is not ours to look for
    (tmp_path / 'published').mkdir()
    _sweep(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f'.k{os.getpid()}.{os.getpid()}.{host}.x1', f'.other.{dead.pid}.elsewhere.x1', 'published'])
