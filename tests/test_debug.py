"""Chapter 08 from the outside: `msllm-doctor` on healthy and broken runs made with the train_llm CLI (failures the
notebook does not use: diverged ranks, a NaN from the command line, unreadable folders), and `msllm-commcheck` under
a plain mpirun and with an unreachable scheduler."""
import json, sys
import pytest
from train_helpers import BIN, run, launch_report
import msllm_nb.train_llm as tl

ROOT_OK = {'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1'}  # CI runs as root


def small(tokens, out, *extra):
    "train_llm arguments for a short run of a 2-layer model on 64-token windows."
    return ['--config', 'tiny', '--out', str(out), '--set', f'token_dir={tokens}', 'steps=8', 'batch_size=4', 'seq_len=64',
            'model.num_hidden_layers=2', 'warmup_steps=1', 'val_every=4', 'save_every=4', 'keep=2', 'progress=false',
            'sample_prompts=[]', *extra]


def doctor(run_dir, *extra):
    r = run([BIN / 'msllm-doctor', run_dir, *extra])
    return r.returncode, r.stdout, r.stderr


def test_healthy_runs_have_no_findings(reference, msrun_dp):
    for d in (reference, msrun_dp):
        code, out, err = doctor(d)
        assert code == 0 and 'no findings' in out, out + err
    code, out, _ = doctor(msrun_dp, '--json_out')
    assert code == 0 and json.loads(out) == []


@pytest.mark.slow
def test_the_readmes_tiny_run_with_samples_comes_out_clean(tokens, tmp_path):
    "README: `train_llm --config tiny --set token_dir=... steps=200` (it samples at the end): doctor finds nothing."
    r = run([BIN / 'train_llm', '--config', 'tiny', '--set', f'token_dir={tokens}', 'steps=200', f'out_dir={tmp_path}', 'progress=false'])
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(tl.read_metrics(tmp_path, 'sample')) == 2  # the two default prompts, greedy
    code, out, err = doctor(tmp_path)
    assert code == 0 and 'no findings' in out, out + err


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


def test_a_batch_with_every_label_masked_stops_the_run_and_is_named(tmp_path):
    tokens = masked_token_folder(tmp_path / 'tokens')
    r = run([BIN / 'train_llm', *small(tokens, tmp_path / 'run', 'val_fraction=0')])
    assert r.returncode == 1 and 'Traceback' not in r.stderr, r.stderr[-2000:]
    assert 'train_llm: step 1: every label of the batch is -100 (masked), windows [' in r.stderr.strip().splitlines()[-1]
    code, out, _ = doctor(tmp_path / 'run', '--json_out')
    found = json.loads(out)
    assert code == 1 and [(f['code'], f['step']) for f in found] == [('labels_all_masked', 1)], found
    r = run([BIN / 'train_llm', *small(tokens, tmp_path / 'run2')])  # the validation windows are checked too, before step 1
    assert r.returncode == 1 and 'validation windows is -100 (masked)' in r.stderr, r.stderr[-2000:]


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
    from msllm_nb.model import LlamaConfig
    ck = tl.Checkpoints(tmp_path / 'checkpoints', keep=5)
    for s in (10, 20, 30):
        w = {'model.norm_out.weight': np.full(4, 1 + s / 100, np.float32)}  # weights that move, a little
        ck.save(s, {'model': w}, tl.weight_stats(w), LlamaConfig())
    recs = [{'kind': 'train', 'step': s, 'loss': 9.0 - 0.05 * s, 'grad_norm': 1.0} for s in range(1, 41)]
    recs[24] = {'kind': 'train', 'step': 25, 'loss': 80.0, 'grad_norm': 400.0}  # the bad batch
    (tmp_path / 'metrics.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    code, out, _ = doctor(tmp_path, '--json_out')
    found = json.loads(out)
    assert code == 0 and [(f['code'], f['severity'], f['step']) for f in found] == [('loss_spike', 'warning', 25)], found
    assert 'continue from step_00000020' in found[0]['remedy'] and 'step_00000030: written at or after step 25' in found[0]['remedy']


@pytest.mark.cluster
def test_unsynchronised_ranks_are_found(tokens, tmp_path):
    r = run([BIN / 'msrun', '--worker_num=2', '--local_worker_num=2', f'--master_port={tl.free_port()}', f'--log_dir={tmp_path}/logs',
             '--join=True', tl.__file__, *small(tokens, tmp_path, 'sync_grads=false')], timeout=600)
    assert r.returncode == 0, launch_report(r, tmp_path / 'logs')
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
    from msllm_nb.formats import load_ms_weights
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
