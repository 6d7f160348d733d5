"""Chapter 07 through train_llm: ZeRO-1 under msrun is bitwise equal to plain data parallel, its per-rank checkpoints
resume exactly (same or different rank count) and merge into the plain optimizer state; gradient accumulation equals
the big batch; an fp16 overflow skips the step and halves the loss scale; the memory estimator's formulas and CLI."""
import json, os, random, shutil, signal, subprocess, time
from pathlib import Path
import numpy as np
import pytest

import msllm_nb.model.llama as msm
import msllm_nb.model.formats as msf
import msllm_nb.train_llm as tl
import msllm_nb.train.zero as z
from train_helpers import BIN, STEPS, args, run, msrun, msrun_cmd, train_records, digests, check_dp, one_record_per_step, launched, run_in_process


# ---- the estimator (no compute)

def test_estimator_matches_the_formulas_for_7b():
    c = msm.PRESETS['7b']; P = msm.param_count(c)
    assert 6.7e9 < P < 6.8e9
    m = z.estimate_memory(c, 4096, 1, 'bf16')
    assert m['weights'] == 2 * P and m['gradients'] == 2 * P and m['optimizer'] == 12 * P  # 16 B/param: 7e9 → 112 GB
    assert (m['weights'] + m['gradients'] + m['optimizer']) / P == 16
    assert z.estimate_memory(c, 4096, 1, 'fp16') == m  # train_llm's spellings: fp16 and bf16 take the same bytes
    with pytest.raises(ValueError, match="precision 'mixed': fp32, fp16 or bf16"): z.estimate_memory(c, precision='mixed')
    assert z.estimate_memory(c, 4096, 1, 'fp32')['optimizer'] == 8 * P
    for stage, sharded in ((1, {'optimizer'}), (2, {'optimizer', 'gradients'}), (3, {'optimizer', 'gradients', 'weights'})):
        s = z.estimate_memory(c, 4096, 1, 'bf16', dp=8, zero=stage)
        for k in ('weights', 'gradients', 'optimizer'):
            assert s[k] == pytest.approx(m[k] / 8 if k in sharded else m[k]), (stage, k)
    # attention scores: heads × s² × 2 B per layer, gone with flash attention
    a, f = z.activation_bytes(c, 4096, 1, 2), z.activation_bytes(c, 4096, 1, 2, flash=True)
    assert a - f == c.num_hidden_layers * c.num_attention_heads * 4096 ** 2 * 2
    assert z.activation_bytes(c, 4096, 1, 2, recompute=True) < a / 10
    with pytest.raises(ValueError, match='zero 4'): z.estimate_memory(c, zero=4)


def test_advice_follows_the_memory():
    assert z.advise(msm.PRESETS['small'], 32, 8)['layout'] == 'DP×8'
    r = z.advise(msm.PRESETS['7b'], 64, 8, seq_len=4096)
    assert r['layout'].startswith('DP×8 + ZeRO') and r['per_device_gb'] <= 0.9 * 64
    assert all(t['GB per device'] > 0.9 * 64 for t in r['tried'][:-1])  # every simpler layout was over budget
    assert r['tutorial'].startswith('1B–13B')
    assert z.advise(msm.PRESETS['7b'], 24, 1)['layout'] is None


# a shape, batch (3) and sequence length (160) that neither chapter 07 nor bench/zero.py uses
HELD_OUT = msm.LlamaConfig(hidden_size=320, intermediate_size=864, num_hidden_layers=3, num_attention_heads=5, num_key_value_heads=5, vocab_size=6000)


def test_cpu_backend_estimate():
    "backend='cpu': same states, every intermediate the CPU graph keeps, plus the compiled graph; refuses what it does not model."
    c = HELD_OUT
    dev, cpu = z.estimate_memory(c, 160, 3, 'fp32'), z.estimate_memory(c, 160, 3, 'fp32', backend='cpu')
    for k in ('weights', 'gradients', 'optimizer'): assert cpu[k] == dev[k]
    k = z.CPU_KEPT
    per_token = 3 * (k['h'] * 320 + k['f'] * 864 + k['scores'] * 5 * 160) + k['outer_h'] * 320 + k['vocab'] * 6000
    assert cpu['activations'] == pytest.approx(4 * 3 * 160 * per_token)
    assert cpu['runtime'] == z.CPU_RUNTIME['fixed'] + 3 * z.CPU_RUNTIME['per_layer'] and dev['runtime'] == 0
    assert cpu['total'] == pytest.approx(sum(cpu[k] for k in ('weights', 'gradients', 'optimizer', 'activations', 'runtime')))
    assert cpu['activations'] > 3 * dev['activations']  # nothing reused on CPU
    for bad in (dict(precision='fp16'), dict(recompute=True), dict(flash=True), dict(tp=2)):
        with pytest.raises(ValueError, match='backend cpu models fp32'): z.estimate_memory(c, 160, 3, **{'precision': 'fp32', **bad}, backend='cpu')
    with pytest.raises(ValueError, match="backend 'tpu'"): z.estimate_memory(c, backend='tpu')


@pytest.mark.slow
def test_cpu_estimate_on_a_shape_nothing_else_measures():
    "Within the chapter's ±15 % on a model shape, batch and sequence length that neither 07 nor bench/zero.py uses."
    c = HELD_OUT
    measured = z.measure_train_memory(c, 160, 3)['delta_bytes']
    assert z.estimate_memory(c, 160, 3, 'fp32', backend='cpu')['total'] / measured == pytest.approx(1, abs=0.15), measured


def test_comm_volume():
    P = 1000
    assert z.comm_bytes_per_step(P, 2, 0)['total'] == 4000  # all-reduce: 2 (N-1)/N × 4 B × P
    assert z.comm_bytes_per_step(P, 8, 1)['total'] == z.comm_bytes_per_step(P, 8, 0)['total']
    assert z.comm_bytes_per_step(P, 2, 1, reduce_scatter=False)['total'] == 6000


def test_memory_cli(tmp_path):
    "The first case as a real process (what a user starts); the others run the same console script in this process."
    r = run([BIN / 'msllm-memory', '--config', 'llama_7b', '--devices', '8', '--device_gb', '64', '--json_out'])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out['seq_len'] == 4096 and out['gb_per_device']['DP']['total'] > out['gb_per_device']['ZeRO-1']['total']
    assert out['advice']['layout'].startswith('DP×8')
    r = run_in_process('msllm-memory', '--config', 'tiny', '--devices', '1', '--device_gb', '16')
    assert r.returncode == 0 and 'recommended on 1 × 16 GB' in r.stdout and 'ZeRO-1' not in r.stdout
    r = run_in_process('msllm-memory', '--config', 'tiny', '--devices', '2', '--cpu', '--json_out')
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out['backend'] == 'cpu' and out['precision'] == 'fp32' and out['advice'] is None
    assert out['gb_per_device']['DP']['runtime'] > 0 and out['gb_per_device']['ZeRO-1']['optimizer'] < out['gb_per_device']['DP']['optimizer']
    r = run_in_process('msllm-memory', '--config', tmp_path / 'nope.yaml')
    assert r.returncode == 2 and 'nope.yaml: no such file' in r.stderr
    r = run_in_process('msllm-memory', '--interconnect', 'carrier-pigeon')
    assert r.returncode == 2 and 'interconnect' in r.stderr
    for bad, msg in ((['--devices', '0'], "argument --devices: '0': expected a whole number ≥ 1 (--help lists the flags)"),
                     (['--device_gb', 'inf'], "argument --device_gb: 'inf': expected a finite number > 0 (--help lists the flags)"),
                     (['--precision', 'bf17'], "--precision must be fp32, fp16 or bf16, got 'bf17'")):
        r = run_in_process('msllm-memory', *bad)
        assert r.returncode == 2 and r.stderr.strip() == f'msllm-memory: {msg}', r.stderr[-1500:]  # one line, no traceback


@pytest.mark.parametrize('extra,message', [
    (['zero=2'], 'zero 2: expected a whole number ≥ 0 and ≤ 1'),
    (['precision=bf16'], 'bf16 matmul is not supported on CPU'),
    (['accum_steps=3'], 'accum_steps 3 must be ≥ 1 and divide batch_size 8'),
    (['zero_impl=mindspore', 'zero=1'], "parallel optimizer only supports Ascend/GPU"),
    (['precision=fp16', 'accum_steps=2'], 'fp16 with accum_steps > 1'),
])
def test_bad_settings_are_refused(tokens, tmp_path, extra, message):
    r = run([BIN / 'train_llm', *args(tokens, tmp_path / 'run'), *extra])
    assert r.returncode == 2 and message in r.stderr, r.stderr[-2000:]


# ---- ZeRO-1 under msrun

@pytest.fixture(scope='session')  # session: built once per pytest-xdist worker, however the worker interleaves files
def zero_run(tokens, tmp_path_factory):
    return msrun(tokens, tmp_path_factory.mktemp('zero'), 'zero=1')


@pytest.mark.cluster
def test_zero1_is_bitwise_equal_to_data_parallel(zero_run, msrun_dp):
    assert digests(zero_run, 2) == digests(msrun_dp, 2)  # all four replicas: identical bits
    assert train_records(zero_run) == train_records(msrun_dp)  # the same losses, exactly
    ranks = [json.loads((zero_run / 'ranks' / f'rank_{r}.json').read_text())['optimizer_bytes'] for r in range(2)]
    plain = json.loads((msrun_dp / 'ranks' / 'rank_0.json').read_text())['optimizer_bytes']
    assert all(r['adam_moments'] * 2 == plain['adam_moments'] for r in ranks)  # Adam's m and v: half per rank
    d, dz = msrun_dp / 'checkpoints' / f'step_{STEPS:08d}', zero_run / 'checkpoints' / f'step_{STEPS:08d}'
    shards = z.optimizer_files(dz)
    assert [p.name for p in shards] == ['optimizer.rank0000.ckpt', 'optimizer.rank0001.ckpt'] and not (dz / 'optimizer.ckpt').exists()
    assert all(0.49 < p.stat().st_size / (d / 'optimizer.ckpt').stat().st_size < 0.51 for p in shards)
    assert tl.Checkpoints(zero_run / 'checkpoints').verify(dz) is None  # the manifest covers every rank's file


@pytest.mark.cluster
def test_zero1_shards_merge_into_the_plain_state(zero_run, msrun_dp, tmp_path):
    dz = tmp_path / 'ck'; shutil.copytree(zero_run / 'checkpoints' / f'step_{STEPS:08d}', dz)
    merged = msf.load_ms_weights(z.merge_zero_checkpoint(dz))
    plain = msf.load_ms_weights(msrun_dp / 'checkpoints' / f'step_{STEPS:08d}' / 'optimizer.ckpt')
    assert sorted(merged) == sorted(plain) and all(np.array_equal(merged[k], plain[k]) for k in plain)


@pytest.mark.cluster
def test_zero1_over_a_meshs_data_parallel_groups_equals_2_rank_zero1(tokens, zero_run, tmp_path):
    """4 ranks as 2 data-parallel ranks × 2 replicas: ZeRO-1 shards over each data-parallel group (its all-gather built from
    all-reduce, 06·4) and computes, and saves, exactly what 2 ranks of ZeRO-1 do."""
    out = tmp_path / 'mesh_zero'
    launched([BIN / 'msrun', '--worker_num=4', '--local_worker_num=4', f'--master_port={tl.free_port()}', f'--log_dir={out}/logs',
              '--join=True', tl.__file__, *args(tokens, out, 'zero=1', 'replicas=2', batch=4)], out, 4)
    assert train_records(out) == train_records(zero_run)
    assert set(digests(out, 4)) == set(digests(zero_run, 2)) and len(set(digests(out, 4))) == 1
    dm, dz = (o / 'checkpoints' / f'step_{STEPS:08d}' for o in (out, zero_run))
    assert [p.name for p in z.optimizer_files(dm)] == [p.name for p in z.optimizer_files(dz)] == ['optimizer.rank0000.ckpt', 'optimizer.rank0001.ckpt']
    for a, b in zip(z.optimizer_files(dm), z.optimizer_files(dz)):
        wa, wb = msf.load_ms_weights(a), msf.load_ms_weights(b)
        assert sorted(wa) == sorted(wb) and all(np.array_equal(wa[k], wb[k]) for k in wb)  # each shard, bit for bit
    assert tl.Checkpoints(out / 'checkpoints').verify(dm) is None


def truncate_to(run_dir, out, step):
    "A copy of a run as if it had stopped right after checkpoint `step`."
    shutil.copytree(run_dir, out)
    for d in (out / 'checkpoints').glob('step_*'):
        if int(d.name[5:]) > step: shutil.rmtree(d)
    (out / 'checkpoints' / 'latest').write_text(f'step_{step:08d}\n')
    # metrics.jsonl keeps the records after `step`, as a crash between two checkpoints leaves them: the resume must supersede them


def processes_of(out):
    "Processes whose command line names the run folder `out` (msrun, its scheduler, the workers)."
    pids = []
    for d in Path('/proc').glob('[0-9]*'):
        try: cmd = (d / 'cmdline').read_bytes().replace(b'\0', b' ').decode(errors='replace')
        except OSError: continue
        if str(out) in cmd: pids.append(int(d.name))
    return pids


@pytest.mark.cluster
def test_zero1_sigkill_under_msrun_then_resume_is_exact(tokens, zero_run, tmp_path):
    "A real crash, as a node failure is: every process of the msrun job (launcher, scheduler, both ZeRO-1 workers) killed with SIGKILL between two checkpoints."
    out, kill_at = tmp_path / 'run', random.Random().choice([7, 8, 10, 11])  # a step after checkpoint 6 or 9: some records to supersede
    env = {**os.environ, 'GLOG_v': '3', 'PATH': f"{BIN}:{os.environ.get('PATH', '')}"}
    p = subprocess.Popen([str(c) for c in msrun_cmd(tokens, out, 'zero=1')], env=env, start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while p.poll() is None and not any(r['step'] >= kill_at for r in tl.read_metrics(out, 'train')): time.sleep(0.05)
    assert p.poll() is None, 'the run ended before the kill'
    os.killpg(p.pid, signal.SIGKILL); p.wait()  # the launcher and the scheduler
    for pid in processes_of(out): os.kill(pid, signal.SIGKILL)  # msrun starts each worker in a session of its own (setsid)
    time.sleep(1)
    assert processes_of(out) == [], 'processes of the killed job are still there'
    msrun(tokens, out, 'zero=1', '--resume')
    resumed = [e for e in tl.read_metrics(out, 'event') if e['event'] == 'resumed']
    assert len(resumed) == 1 and resumed[0]['checkpoint'] in ('step_00000006', 'step_00000009'), (kill_at, resumed)
    assert digests(out, 2) == digests(zero_run, 2) and train_records(out) == train_records(zero_run)  # bitwise; one record per step
    sup = [json.loads(l)['step'] for l in one_record_per_step(out) if json.loads(l)['kind'] == 'train']
    assert sorted(sup) == list(range(resumed[0]['step'] + 1, resumed[0]['step'] + 1 + len(sup))) and sup, (kill_at, sup)  # set aside


@pytest.mark.cluster
def test_zero1_checkpoint_resumes_on_another_rank_count(tokens, zero_run, reference, tmp_path):
    "Two ZeRO-1 shards, resumed by one process (with --zero 1: the merged state is re-sliced for one rank)."
    out = tmp_path / 'run'; truncate_to(zero_run, out, 6)
    r = run([BIN / 'train_llm', *args(tokens, out), '--zero', '1', '--resume'])
    assert r.returncode == 0, r.stderr[-3000:]
    check_dp(out, reference, world=1)  # as close to the single-process reference as 2 ranks are


# ---- accumulation and fp16 (one process)

def test_accumulation_equals_the_big_batch(tokens, reference, tmp_path):
    r = run([BIN / 'train_llm', *args(tokens, tmp_path, 'accum_steps=4')])
    assert r.returncode == 0, r.stderr[-3000:]
    check_dp(tmp_path, reference, world=1)  # 4 micro-batches of 2 rows ≈ one batch of 8, within float tolerance


def test_fp16_overflow_skips_the_step_and_halves_the_scale(tokens, tmp_path):
    a = [*args(tokens, tmp_path), 'steps=5', 'seq_len=64', 'model.num_hidden_layers=1', 'val_every=5', 'save_every=5',
         f'loss_scale={2.0 ** 24}', '--precision', 'fp16']
    r = run([BIN / 'train_llm', *a])
    assert r.returncode == 0, r.stderr[-3000:]
    scales = [t['loss_scale'] for t in tl.read_metrics(tmp_path, 'train')]
    ev = [e for e in tl.read_metrics(tmp_path, 'event') if e['event'].startswith('overflow')]
    assert scales[0] == 2.0 ** 24 and ev and ev[0]['step'] == 1 and ev[0]['loss_scale'] == 2.0 ** 23
    over = {e['step'] for e in ev}
    for s in range(1, len(scales)):  # an overflow at step s halves step s+1's scale; otherwise it stays (window 1000)
        assert scales[s] == scales[s - 1] / (2 if s in over else 1), (s, scales, over)
    meta = json.loads((tmp_path / 'checkpoints' / 'step_00000005' / 'meta.json').read_text())
    assert meta['loss_scale'] == scales[-1] / (2 if ev[-1]['step'] == 5 else 1)  # the scale after the last step is checkpointed
    from msllm_nb.debug.doctor import doctor
    assert 'non_finite_loss' not in [f.code for f in doctor(tmp_path)]  # overflows the scaler handled are not a broken run


def memory_main(capsys, *argv):
    "msllm-memory's parsing and body run here: (exit code, stderr lines); a traceback fails the test."
    from msllm_nb.core.cli import parser_of
    with pytest.raises(SystemExit) as e:
        ns = vars(parser_of(z.memory_cli).parse_args([str(a) for a in argv]))
        z.memory_cli.__wrapped__(**{k: v for k, v in ns.items() if k not in ('pdb', 'xtra')}); raise SystemExit(0)
    return e.value.code, capsys.readouterr().err.strip().splitlines()


def test_memory_cli_numeric_flags_declare_bounds():
    from msllm_nb.core.cli import parser_of
    nums = [a for a in parser_of(z.memory_cli)._actions if a.dest in ('devices', 'device_gb', 'devices_per_node', 'seq_len', 'micro_batch')]
    assert len(nums) == 5 and all(hasattr(a.type, 'bounds') for a in nums), [a.dest for a in nums if not hasattr(a.type, 'bounds')]


@pytest.mark.parametrize('flag,values', [('--devices', ['abc', '', 'nan', 'inf', '1.5', '0', '-1']),
                                         ('--device_gb', ['abc', '', 'nan', 'inf', '-inf', '0', '-1']),
                                         ('--devices_per_node', ['abc', 'nan', '1.5', '0']),
                                         ('--seq_len', ['abc', 'nan', 'inf', '0', '-5']),
                                         ('--micro_batch', ['abc', 'nan', '2.5', '0'])])
def test_memory_cli_refuses_bad_numbers(capsys, flag, values):
    for v in values:
        code, err = memory_main(capsys, '--config', 'tiny', flag, v)
        assert code == 2 and len(err) == 1 and flag in err[0], (v, err)


def test_memory_cli_names_the_bad_config(capsys, tmp_path):
    broken = tmp_path / 'broken.yaml'; broken.write_text('lr: [1, 2\nsteps: 3\n')
    latin = tmp_path / 'latin.yaml'; latin.write_bytes('lr: 0.001  # caf\xe9\n'.encode('latin-1'))
    listing = tmp_path / 'list.yaml'; listing.write_text('- 1\n- 2\n')
    for config, names in ((tmp_path, [str(tmp_path)]), (broken, [str(broken), 'YAML']), (latin, [str(latin), 'UTF-8']),
                          (listing, [str(listing)]), (tmp_path / 'nope.yaml', ['nope.yaml', 'no such file']), ('', ['--config'])):
        code, err = memory_main(capsys, '--config', config)
        assert code == 2 and len(err) == 1 and err[0].startswith('msllm-memory: ') and all(n in err[0] for n in names), (config, err)
