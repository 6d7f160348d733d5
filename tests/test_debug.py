"""Chapters 08 and 08·0 from the outside: `msllm-doctor` on healthy and broken runs made with the train_llm CLI (failures the
notebook does not use: diverged ranks, a NaN from the command line, unreadable folders), and `msllm-commcheck` under
a plain mpirun and with an unreachable scheduler."""
import json, math, sys
from pathlib import Path
import pytest
from train_helpers import BIN, run, launch_report, launched, run_in_process
import msllm_nb.train_llm as tl

ROOT_OK = {'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1'}  # CI runs as root


def small(tokens, out, *extra):
    "train_llm arguments for a short run of a 1-layer model on 64-token windows."
    return ['--config', 'tiny', '--out', str(out), '--set', f'token_dir={tokens}', 'steps=8', 'batch_size=4', 'seq_len=64',
            'model.num_hidden_layers=1', 'warmup_steps=1', 'val_every=4', 'save_every=4', 'keep=2', 'progress=false',
            'sample_prompts=[]', *extra]


def doctor(run_dir, *extra, process=False):
    "msllm-doctor on `run_dir`: in this process (it reads files; a new process spends ~3 s importing), or a real one."
    r = run([BIN / 'msllm-doctor', run_dir, *extra]) if process else run_in_process('msllm-doctor', run_dir, *extra)
    return r.returncode, r.stdout, r.stderr


def test_healthy_runs_have_no_findings(reference, msrun_dp):
    for d in (reference, msrun_dp):
        code, out, err = doctor(d, process=d == reference)
        assert code == 0 and 'no findings' in out, out + err
    code, out, _ = doctor(msrun_dp, '--json_out')
    assert code == 0 and json.loads(out) == []


def test_the_readmes_one_process_command_checks_out(tokens, tmp_path):
    """README's one-process command (`train_llm --config tiny --set token_dir=... steps=200`), read from README.md, on the
    bundled sample: `--check` finds the config and the data sound and writes nothing. A healthy run that samples as it
    trains, doctored with no findings, is chapter 08's `samples` run (the main job runs it)."""
    line = next(l for l in (Path(__file__).parents[1] / 'README.md').read_text(encoding='utf-8').splitlines() if l.startswith('train_llm --config tiny'))
    argv = [f'token_dir={tokens}' if a.startswith('token_dir=') else a for a in line.split('#')[0].split()[1:]]
    r = run([BIN / 'train_llm', *argv, f'out_dir={tmp_path / "run"}', '--check'])
    assert r.returncode == 0, r.stderr[-2000:]
    checked, readme_set = json.loads(r.stdout), dict(a.split('=', 1) for a in argv if '=' in a)
    assert checked['config']['token_dir'] == str(tokens) and checked['config']['steps'] == int(readme_set['steps']), checked['config']
    assert (checked['config']['sample_prompts'], checked['model']['num_hidden_layers']) == (['The', '今天'], 4)  # the tiny config's defaults
    assert not (tmp_path / 'run').exists()  # a check writes nothing


def test_lr_typo_stops_the_run_and_is_found(tokens, tmp_path):
    r = run([BIN / 'train_llm', *small(tokens, tmp_path, 'lr=1e6', 'min_lr=1e6', 'grad_clip=0')])
    assert r.returncode == 1 and 'gradient norm nan: stopped (nan_policy: stop)' in r.stderr, r.stderr[-2000:]  # nan_policy: stop
    assert not list(tmp_path.glob('checkpoints/step_*'))  # nothing non-finite was saved
    code, out, _ = doctor(tmp_path, '--json_out')
    found = json.loads(out)
    assert code == 1 and [f['code'] for f in found] == ['non_finite_loss'] and found[0]['step'] <= 4, found
    assert 'nan' in found[0]['evidence']


def masked_token_folder(out, n_docs=40, doc_len=300):
    "A token folder whose every id reads as -100 (uint32 0xFFFFFF9C, as int32): every label of every window is masked."
    import numpy as np
    out.mkdir(parents=True)
    starts = np.arange(n_docs + 1, dtype=np.int64) * doc_len
    np.full(int(starts[-1]), 2**32 - 100, np.uint32).tofile(out / 'tokens-00000.bin')
    np.savez(out / 'tokens-00000.idx.npz', starts=starts, group=np.zeros(n_docs, np.int32), group_names=np.asarray(['text']))
    (out / 'meta.json').write_text(json.dumps({'shards': ['tokens-00000'], 'docs': n_docs, 'tokens': int(starts[-1]), 'dtype': 'uint32',
                                               'vocab_size': 8192, 'eos_id': 2, 'pad_id': -1}))
    return out


def test_a_folder_with_every_label_masked_is_refused_and_such_steps_are_named(tmp_path):
    "train_llm refuses a token folder whose every label is masked before it writes anything; the doctor names such steps in another trainer's records."
    tokens = masked_token_folder(tmp_path / 'tokens')
    for extra in (['val_fraction=0'], []):
        r = run([BIN / 'train_llm', *small(tokens, tmp_path / 'run', *extra)])
        last = r.stderr.strip().splitlines()[-1]
        assert r.returncode == 2 and 'Traceback' not in r.stderr and last.startswith('train_llm: ') and '-100 (masked)' in last, r.stderr[-2000:]
        assert not (tmp_path / 'run' / 'metrics.jsonl').exists()
    d = synthetic_run(tmp_path / 'other', [9.0, 8.8, 0.0, 0.0], val={0: 9.0}, grad_norms={3: 0.0, 4: 0.0})  # a mean over no labels
    code, found, _ = doctor_json(d)
    assert code == 1 and codes(found) == [('labels_all_masked', 'error', 3)], found


def test_a_divergence_is_found_where_it_starts_and_doctor_advises_a_healthy_checkpoint(tokens, tmp_path):
    "lr=1e3: the loss spikes long before any NaN; doctor names the spike's step and never a checkpoint written after it."
    run([BIN / 'train_llm', *small(tokens, tmp_path, 'lr=1e3', 'min_lr=1e3', 'save_every=1', 'keep=8', 'steps=12')])
    tr = tl.read_metrics(tmp_path, 'train')
    broke = tl.first_abnormal_step(tr, 8192)
    assert broke is not None and broke[0] <= 3, (broke, [(x['step'], x['loss'], x['grad_norm']) for x in tr])
    code, out, _ = doctor(tmp_path, '--json_out')
    found = json.loads(out)
    assert code == 1 and found[0]['code'] in ('non_finite_loss', 'diverged') and found[0]['step'] == broke[0], found
    ck = tl.Checkpoints(tmp_path / 'checkpoints')
    later = [f'step_{s:08d}' for s in ck.steps() if s >= broke[0]]
    assert later and not any(f'continue from {d}' in found[0]['remedy'] for d in later), found[0]['remedy']  # a wrecked one is never advised
    good = tl.healthy_checkpoint(ck, broke[0])
    assert (good is None and 'no healthy checkpoint' in found[0]['remedy']) or f'continue from {good[0].name}' in found[0]['remedy']


def test_a_single_batch_spike_is_a_warning_with_a_checkpoint_before_it(tmp_path):
    "An injected one-batch spike that the run recovers from: a warning at that step, advising the newest checkpoint before it."
    import numpy as np
    from msllm_nb.model.llama import LlamaConfig
    ck = tl.Checkpoints(tmp_path / 'checkpoints', keep=5)
    for s in (10, 20, 30):
        w = {'model.norm_out.weight': np.full(4, 1 + s / 100, np.float32)}  # weights that move, a little
        ck.save(s, {'model': w}, tl.weight_stats(w), LlamaConfig())
    recs = [{'kind': 'train', 'step': s, 'loss': 9.0 - 0.05 * s, 'grad_norm': 1.0} for s in range(1, 41)]
    recs[24] = {'kind': 'train', 'step': 25, 'loss': 80.0, 'grad_norm': 400.0}  # the bad batch
    recs += [{'kind': 'val', 'step': 0, 'loss': 9.0}, {'kind': 'val', 'step': 40, 'loss': 7.1}]
    (tmp_path / 'metrics.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    code, out, _ = doctor(tmp_path, '--json_out')
    found = json.loads(out)
    assert code == 0 and [(f['code'], f['severity'], f['step']) for f in found] == [('loss_spike', 'warning', 25)], found
    assert 'continue from step_00000020' in found[0]['remedy'] and 'step_00000030: written at or after step 25' in found[0]['remedy']


@pytest.mark.cluster
def test_unsynchronised_ranks_are_found(tokens, tmp_path):
    launched([BIN / 'msrun', '--worker_num=2', '--local_worker_num=2', f'--master_port={tl.free_port()}', f'--log_dir={tmp_path}/logs',
              '--join=True', tl.__file__, *small(tokens, tmp_path, 'sync_grads=false')], tmp_path, 2, timeout=600)
    code, out, _ = doctor(tmp_path)
    assert code == 1 and 'ranks_diverged' in out and '2 ranks end with 2 different parameter digests' in out, out


def test_unreadable_run_folders_exit_2_and_say_why(tmp_path):
    code, _, err = doctor(tmp_path)
    assert code == 2 and 'no metrics.jsonl' in err and str(tmp_path) in err
    (tmp_path / 'metrics.jsonl').write_text('{"kind": "train", "step": 1, "loss": 5.0}\n{"kind": "tr\n')
    code, out, err = doctor(tmp_path)  # a torn last line (killed while writing) is reported and skipped, not fatal
    assert code == 0 and "line(s) [2] are not metric records and were skipped (1 of 2)" in out, out + err


@pytest.mark.cluster
def test_commcheck_under_plain_mpirun(tmp_path):
    r = run([BIN / 'mpirun', '-n', '2', '--oversubscribe', BIN / 'msllm-commcheck', '--sizes', '4096,1048576', '--iters', '3',
             '--json_file', tmp_path / 'cc.json', '--status_dir', tmp_path / 'wd'],
            timeout=300, extra_env={**ROOT_OK, 'MS_SCHED_PORT': str(tl.free_port())})
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    res = json.loads((tmp_path / 'cc.json').read_text())
    assert res['world'] == 2 and [x['bytes'] for x in res['rows']] == [4096, 1048576]
    assert all(x['correct'] and x['bus_GBps'] > 0 for x in res['rows'])
    assert 'all-reduce across 2 ranks on CPU' in r.stdout


def test_commcheck_names_an_unreachable_scheduler():
    r = run([BIN / 'msllm-commcheck'], timeout=120)  # no launcher at all
    assert r.returncode == 2 and 'not started by a launcher' in r.stderr and 'msrun' in r.stderr, r.stderr[-2000:]
    r = run([BIN / 'msllm-commcheck', '--sched_wait', '2'], timeout=120,
            extra_env={'MS_SCHED_HOST': 'no-such-host.invalid', 'MS_SCHED_PORT': '8118', 'MS_ROLE': 'MS_WORKER'})
    assert r.returncode == 2 and 'MS_SCHED_HOST=no-such-host.invalid: cannot resolve the name' in r.stderr, r.stderr[-2000:]
    port = tl.free_port()
    r = run([BIN / 'msllm-commcheck', '--sched_wait', '2'], timeout=120,
            extra_env={'MS_SCHED_HOST': '127.0.0.1', 'MS_SCHED_PORT': str(port), 'MS_ROLE': 'MS_WORKER'})
    assert r.returncode == 2 and f'127.0.0.1:{port}: connection refused' in r.stderr, r.stderr[-2000:]


@pytest.mark.cluster
def test_commcheck_names_the_rank_that_never_arrives(tmp_path):
    r = run([BIN / 'mpirun', '-n', '2', '--oversubscribe', BIN / 'msllm-commcheck', '--sizes', '4096,65536', '--iters', '2',
             '--timeout', '6', '--hang_rank', '1', '--status_dir', tmp_path / 'wd'],
            timeout=300, extra_env={**ROOT_OK, 'MS_SCHED_PORT': str(tl.free_port())})
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert 'rank 0: all-reduce #1 (65536 bytes) did not finish within 6s; rank(s) [1] never reached it' in out, out[-3000:]


POISONED = '''import sys, numpy as np, mindspore as ms, msllm_nb.train_llm as tl
models = []
class Capture(tl.LossCell):
    def __init__(self, model):
        super().__init__(model); models.append(model)
BAD, CRASH, _batches = int(sys.argv[1]), int(sys.argv[2]), tl.step_batches
def batches(*a, **k):
    for i, x in _batches(*a, **k):
        if i + 1 == CRASH: raise SystemExit(9)  # the process dies before step CRASH
        if i + 1 == BAD:  # a corrupted weight (a flipped bit): the loss of step BAD is NaN
            w = models[-1].model.norm_out.weight; w.set_data(ms.Tensor(np.full(w.shape, np.nan, np.float32)))
        yield i, x
tl.LossCell, tl.step_batches = Capture, batches
sys.argv = ['train_llm'] + sys.argv[3:]
tl.main()
'''


def test_rollback_reloads_the_last_checkpoint_and_resumes_exactly(tokens, tmp_path):
    "nan_policy rollback: a NaN at step 5 reloads step 4 and goes on; a crash after the rollback resumes to the same weights."
    (tmp_path / 'poisoned.py').write_text(POISONED)
    def go(out, bad, crash, *extra):
        return run([sys.executable, tmp_path / 'poisoned.py', bad, crash, *small(tokens, out, 'nan_policy=rollback', 'save_every=2', 'keep=3'), *extra])
    r = go(tmp_path / 'a', 5, 0)
    assert r.returncode == 0, r.stderr[-3000:]
    ev = [e for e in tl.read_metrics(tmp_path / 'a', 'event') if e['event'].startswith('non-finite')]
    assert [(e['step'], e['event'], e['checkpoint'], e['batches_dropped']) for e in ev] == [(5, 'non-finite: rolled back', 'step_00000004', 1)]
    code, out, _ = doctor(tmp_path / 'a', '--json_out')
    assert [f['code'] for f in json.loads(out)] == ['non_finite_rolled_back'], out
    r = go(tmp_path / 'b', 5, 6)  # dies after the rollback, before the step-6 checkpoint ...
    assert r.returncode == 9 and tl.Checkpoints(tmp_path / 'b' / 'checkpoints').steps()[0] == 4, r.stderr[-3000:]
    r = go(tmp_path / 'b', 5, 0, '--resume')  # ... resumes from step 4, meets the bad batch again and rolls back again
    assert r.returncode == 0, r.stderr[-3000:]
    from msllm_nb.model.formats import load_ms_weights
    wa, wb = (load_ms_weights(tmp_path / x / 'checkpoints' / 'step_00000008' / 'model.ckpt') for x in 'ab')
    assert all((wa[k] == wb[k]).all() for k in wa)  # bitwise
    r = go(tmp_path / 'c', 1, 0)  # nothing saved yet: nothing to roll back to
    assert r.returncode == 1 and 'no healthy checkpoint before step 1 to roll back to: stopped' in r.stderr, r.stderr[-2000:]


def test_profile_steps_writes_top_operators_and_survives_a_missing_table(tokens, tmp_path):
    "train_llm --set profile_steps=2: top_ops.json and a `profiled` event; where no operator table is found (GPU), the run goes on."
    r = run([BIN / 'train_llm', *small(tokens, tmp_path / 'a', 'profile_steps=2', 'steps=6')])
    assert r.returncode == 0, r.stderr[-3000:]
    top = json.loads((tmp_path / 'a' / 'profile' / 'top_ops.json').read_text())
    assert abs(sum(p['share'] for p in top['phases']) - 1) < 1e-6 and top['ops'][0]['ms_per_step'] > 0
    assert [e['steps'] for e in tl.read_metrics(tmp_path / 'a', 'event') if e['event'] == 'profiled'] == ['3-4']
    (tmp_path / 'empty').mkdir()
    with pytest.raises(FileNotFoundError, match='no operator table from the profiler'): tl.top_operators(tmp_path / 'empty')
    (tmp_path / 'nosummary.py').write_text(  # the profiler's output without a table this module reads
        'import sys, msllm_nb.train_llm as tl\n'
        'def none(d, *a, **k): raise FileNotFoundError(f"{d}: no operator table from the profiler")\n'
        "tl.top_operators = none; sys.argv = ['train_llm'] + sys.argv[1:]; tl.main()\n")
    r = run([sys.executable, tmp_path / 'nosummary.py', *small(tokens, tmp_path / 'b', 'profile_steps=2', 'steps=6')])
    assert r.returncode == 0, r.stderr[-3000:]
    ev = [e for e in tl.read_metrics(tmp_path / 'b', 'event') if e['event'] == 'profiled']
    assert len(ev) == 1 and ev[0]['top'].startswith('no operator summary') and (tmp_path / 'b' / 'checkpoints' / 'step_00000006').is_dir()


# --- issue 56: divergence judged on the run's own loss, NaN/missing figures, bounds of every flag -------------------------------

def as_new_format(rec):
    "A record as the trainer writes it now (06·2's dumps_finite): a non-finite figure is null, named in `non_finite`."
    bad = {k: str(v) for k, v in rec.items() if isinstance(v, float) and not math.isfinite(v)}
    return {**rec, **{k: None for k in bad}, **({'non_finite': bad} if bad else {})}


def synthetic_run(path, losses, val=None, grad_norms=None, saves=(), extra=(), new_format=False):
    "A run folder from synthetic records: train losses for steps 1.., val {step: loss} (a loss may be nan/None), checkpoints at `saves`."
    import numpy as np
    from msllm_nb.model.llama import LlamaConfig
    path.mkdir(parents=True, exist_ok=True)
    ck = tl.Checkpoints(path / 'checkpoints', keep=len(saves) + 1)
    for s in saves:
        w = {'model.norm_out.weight': np.full(4, 1 + s / 1000, np.float32)}
        ck.save(s, {'model': w}, tl.weight_stats(w), LlamaConfig())
    recs = [{'kind': 'train', 'step': s, 'loss': l, 'grad_norm': (grad_norms or {}).get(s, 1.0), 'lr': 1e-3}
            for s, l in enumerate(losses, 1)]
    recs += [{'kind': 'val', 'step': s, 'loss': l, **({} if l is None else {'ppl': math.exp(min(l, 50))})}  # NaN stays NaN, None is null
             for s, l in (val or {}).items()]
    recs = sorted(recs, key=lambda r: (r['step'], r['kind'] == 'train')) + list(extra)
    recs = [as_new_format(r) for r in recs] if new_format else recs  # else json writes NaN, as the trainer did before
    (path / 'metrics.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    return path


def falling(n, start=9.0, end=5.0, noise=0.0, seed=0):
    "A healthy loss curve: exponential fall from `start` toward `end` over n steps, with Gaussian noise."
    import numpy as np
    rng = np.random.default_rng(seed)
    return [float(end + (start - end) * np.exp(-i / (n / 5)) + noise * rng.standard_normal()) for i in range(n)]


def strict_json(text):
    "json.loads that refuses NaN/Infinity (what a JSON reader outside Python does)."
    def no(c): raise ValueError(f'{c} in JSON output')
    return json.loads(text, parse_constant=no)


def doctor_json(run_dir):
    code, out, err = doctor(run_dir, '--json_out')
    return code, strict_json(out), err


def codes(found): return [(f['code'], f['severity'], f['step']) for f in found]


def test_a_too_high_lr_is_named_where_the_loss_starts_to_climb(tmp_path):
    "The loss climbs from step 6 with no gradient-norm spike: the first step of the climb, and a checkpoint before it."
    losses = [9.0, 8.8, 8.6, 8.5, 9.0, 9.8, 10.6, 11.8, 13.5, 15.6, 18.0, 21.0, 24.0, 28.0]
    d = synthetic_run(tmp_path, losses, val={0: 9.0, 14: 27.0}, grad_norms={s: 1.0 + 0.3 * s for s in range(1, 15)}, saves=(2, 4, 6, 8))
    code, found, _ = doctor_json(d)
    assert code == 1 and found[0]['code'] == 'diverged' and found[0]['step'] == 6, found
    assert 'continue from step_00000004' in found[0]['remedy'] and 'step_00000006: written at or after step 6' in found[0]['remedy'], found[0]


def test_a_validation_loss_above_its_start_is_named_at_that_evaluation(tmp_path):
    "Training loss that barely moves while the held-out loss rises above its step-0 value: named at that evaluation."
    losses = [9.0, 8.9, 8.8, 8.8, 8.9, 9.0, 9.1, 9.2, 9.3, 9.4, 9.5, 9.6]
    d = synthetic_run(tmp_path, losses, val={0: 9.0, 4: 9.4, 8: 10.2, 12: 11.5}, saves=(4, 8))
    code, found, _ = doctor_json(d)
    div = [f for f in found if f['code'] == 'diverged']
    assert code == 1 and div and div[0]['step'] == 8 and 'validation' in div[0]['evidence'], found
    assert 'continue from step_00000004' in div[0]['remedy'], div[0]


def test_a_slowly_creeping_loss_is_a_divergence(tmp_path):
    "The loss falls to 5, then creeps up 0.02 nats a step: named once it is clearly above its best, with a checkpoint before."
    losses = falling(40, noise=0.03) + [5.0 + 0.02 * i for i in range(1, 101)]
    d = synthetic_run(tmp_path, losses, saves=(40, 80, 120, 140))
    code, found, _ = doctor_json(d)
    div = [f for f in found if f['code'] == 'diverged']
    assert code == 1 and div and 40 < div[0]['step'] < 110, found
    good = int(div[0]['remedy'].split('continue from step_')[1][:8])
    assert good < div[0]['step'], div[0]


@pytest.mark.parametrize('noise', [0.05, 0.3])
def test_a_plateau_is_not_a_divergence(tmp_path, noise):
    "The loss falls, then stays flat with noise for 170 steps: nothing to report."
    losses = falling(30, end=6.0, noise=noise) + falling(170, start=6.0, end=6.0, noise=noise, seed=1)
    d = synthetic_run(tmp_path, losses, val={0: 9.0, 100: 6.1, 200: 6.1}, saves=(100, 200))
    code, found, err = doctor_json(d)
    assert code == 0 and found == [], found


@pytest.mark.parametrize('new_format', [False, True])
def test_one_nan_step_is_named_with_a_checkpoint_before_it(tmp_path, new_format):
    losses = falling(20)
    losses[9] = float('nan')
    d = synthetic_run(tmp_path, losses, val={0: 9.0, 20: 6.0}, grad_norms={10: float('nan')}, saves=(5, 10, 15), new_format=new_format)
    code, found, _ = doctor_json(d)
    assert code == 1 and codes(found) == [('non_finite_loss', 'error', 10)], found
    assert 'continue from step_00000005' in found[0]['remedy'], found[0]


def test_a_spike_that_recovers_is_a_warning(tmp_path):
    losses = falling(40)
    losses[19] = 40.0
    d = synthetic_run(tmp_path, losses, val={0: 9.0, 40: 5.5}, grad_norms={20: 300.0}, saves=(10, 20, 30))
    code, found, _ = doctor_json(d)
    assert code == 0 and codes(found) == [('loss_spike', 'warning', 20)], found
    assert 'continue from step_00000010' in found[0]['remedy'], found[0]


@pytest.mark.parametrize('val', [{0: float('nan'), 10: float('nan'), 20: float('nan')},  # the old trainer with val_fraction=0
                                 {0: None, 10: None, 20: None},  # the new one: null ...
                                 None])  # ... or no val records at all
@pytest.mark.parametrize('new_format', [False, True])
def test_a_run_without_a_validation_loss_is_not_called_healthy(tmp_path, val, new_format):
    d = synthetic_run(tmp_path, falling(20), val=val, saves=(10, 20), new_format=new_format)
    code, found, err = doctor_json(d)
    assert code == 0 and codes(found) == [('no_validation', 'warning', None)], found
    code, out, _ = doctor(d)
    assert 'looks healthy' not in out and 'val_fraction' in out, out


def test_a_non_finite_figure_anywhere_is_a_finding(tmp_path):
    "One NaN validation loss among finite ones is an error at its step; NaN in another field is a warning naming it."
    for fmt in (False, True):
        d = synthetic_run(tmp_path / f'a{fmt}', falling(20), val={0: 9.0, 10: float('nan'), 20: 6.0}, saves=(5, 10), new_format=fmt)
        code, found, _ = doctor_json(d)
        assert code == 1 and codes(found) == [('val_not_finite', 'error', 10)], found
    extra = [{'kind': 'eval', 'step': 20, 'acc/t': float('nan'), 'chance/t': 0.25, 'n/t': 40}]
    d = synthetic_run(tmp_path / 'b', falling(20), val={0: 9.0, 20: 6.0}, extra=extra)
    code, found, _ = doctor_json(d)
    assert codes(found) == [('metrics_not_finite', 'warning', 20)] and 'acc/t' in found[0]['evidence'], found


def test_a_real_run_at_lr_0_5_is_named_before_the_validation_loss_passes_its_start(tokens, tmp_path):
    "train_llm tiny at lr=0.5 for 15 steps: the doctor names a step no later than the first evaluation above the step-0 loss."
    r = run([BIN / 'train_llm', *small(tokens, tmp_path, 'lr=0.5', 'steps=15', 'warmup_steps=10', 'val_every=1', 'save_every=1', 'keep=16',
                                       'val_windows=32')])
    assert r.returncode == 0, r.stderr[-2000:]
    val = tl.read_metrics(tmp_path, 'val')
    above = next(v['step'] for v in val[1:] if v['loss'] > val[0]['loss'] + 0.5)
    code, found, _ = doctor_json(tmp_path)
    div = next(f for f in found if f['code'] == 'diverged')
    assert code == 1 and div['step'] <= above, (div, [(v['step'], round(v['loss'], 2)) for v in val])
    good = int(div['remedy'].split('continue from step_')[1][:8])
    assert good < div['step'] and tl.Checkpoints(tmp_path / 'checkpoints').verify(tmp_path / 'checkpoints' / f'step_{good:08d}') is None


def test_doctor_names_a_path_that_is_not_a_run_folder(tmp_path):
    (tmp_path / 'file.txt').write_text('x')
    (tmp_path / 'dir_metrics' / 'metrics.jsonl').mkdir(parents=True)
    (tmp_path / 'empty').mkdir(); (tmp_path / 'empty' / 'metrics.jsonl').write_text('')
    (tmp_path / 'junk').mkdir(); (tmp_path / 'junk' / 'metrics.jsonl').write_text('not json\nat all\n')
    for p, why in [(tmp_path / 'missing', 'no such folder'), (tmp_path / 'file.txt', 'not a folder'),
                   (tmp_path / 'dir_metrics', 'metrics.jsonl'), (tmp_path / 'empty', 'no metric records'),
                   (tmp_path / 'junk', 'no metric records')]:
        code, out, err = doctor(p, process=p.name == 'junk')  # one real process: what it prints outside Python counts too
        assert code == 2 and len(err.strip().splitlines()) == 1 and str(p) in err and why in err and 'Traceback' not in err, (p, err)


COMMCHECK_BAD = [('--iters', '0'), ('--iters', '-3'), ('--iters', 'abc'), ('--timeout', '0'), ('--timeout', 'nan'),
                 ('--sched_wait', '0'), ('--sched_wait', '-1'), ('--sizes', 'abc'), ('--sizes', '4096,-1'), ('--sizes', '0'),
                 ('--link_gbps', '0'), ('--link_gbps', 'inf'), ('--hang_rank', '-2'), ('--hang_rank', '1.5'), ('--device', 'TPU'),
                 ('--timeout', '1e308'), ('--sizes', str(2**35))]


@pytest.mark.parametrize('flag,value', COMMCHECK_BAD)
def test_commcheck_refuses_bad_flags_before_it_waits_for_anything(flag, value, tmp_path):
    "Outside a launcher, and as an msrun worker whose scheduler never answers: one line naming the flag, exit 2, at once."
    import time
    for env in ({}, {'MS_ROLE': 'MS_WORKER', 'MS_SCHED_HOST': '127.0.0.1', 'MS_SCHED_PORT': str(tl.free_port())}):
        t0 = time.time()
        r = run([BIN / 'msllm-commcheck', flag, value, '--json_file', tmp_path / 'cc.json'], timeout=60, extra_env=env)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and flag.lstrip('-') in r.stderr, (env, r.stderr)
        assert 'Traceback' not in r.stderr and time.time() - t0 < 30 and not (tmp_path / 'cc.json').exists()


def test_commcheck_refuses_unusable_paths_before_it_waits(tmp_path):
    (tmp_path / 'f').write_text('x')
    env = {'MS_ROLE': 'MS_WORKER', 'MS_SCHED_HOST': '127.0.0.1', 'MS_SCHED_PORT': str(tl.free_port())}
    for args, what in [(['--status_dir', tmp_path / 'f'], '--status_dir'), (['--json_file', tmp_path / 'nodir' / 'cc.json'], '--json_file'),
                       (['--json_file', tmp_path], '--json_file')]:
        r = run([BIN / 'msllm-commcheck', *args], timeout=60, extra_env=env)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and what in r.stderr and 'Traceback' not in r.stderr, r.stderr


@pytest.mark.cluster
def test_commcheck_bad_flags_under_msrun_fail_fast(tmp_path):
    "Under msrun every process (scheduler and workers) refuses the flag before init: the job ends in seconds, not at a timeout."
    import time
    t0 = time.time()
    r = run([BIN / 'msrun', '--worker_num=2', '--local_worker_num=2', f'--master_port={tl.free_port()}', f'--log_dir={tmp_path}/logs',
             '--join=True', BIN / 'msllm-commcheck', '--iters', '0'], timeout=300)
    logs = ''.join(p.read_text(errors='replace') for p in (tmp_path / 'logs').glob('*.log'))
    assert r.returncode != 0 and time.time() - t0 < 120 and "--iters" in logs and 'Traceback' not in logs, launch_report(r, tmp_path / 'logs')
