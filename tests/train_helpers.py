"""Helpers shared by the train_llm tests (chapter 06 and 07): the common arguments, running a command, reading a run."""
import json, os, subprocess, sys, warnings
from pathlib import Path
import numpy as np
import msllm_nb.train_llm as tl
from msllm_nb.course.runner import launch_job, launch_report  # launch_report: what a failed launch left

BIN = Path(sys.executable).parent
STEPS = 12
COMPILE_CACHE = 'MSLLM_TEST_COMPILE_CACHE'  # the session's compile_cache folder (conftest sets it; every xdist worker inherits it)


def args(tokens, out, *extra, batch=8):
    """The tiny config cut to one layer and 64-token windows: 12 steps of 8 × 64. What these runs check (resume, layouts,
    launchers, refusals) holds at any depth; a run's time is mostly the process start and the graph compile, which grow with it.
    The runs share the session's compile cache (06·4: a folder per configuration, bitwise equal to compiling; the
    `reference` run compiles for itself), so a configuration run again skips its compile."""
    cache = [f'compile_cache={os.environ[COMPILE_CACHE]}'] if os.environ.get(COMPILE_CACHE) else []
    return ['--config', 'tiny', '--out', str(out), '--set', f'token_dir={tokens}', f'steps={STEPS}', f'batch_size={batch}',
            'seq_len=64', 'model.num_hidden_layers=1', 'warmup_steps=2', 'val_every=6', 'save_every=3', 'keep=3', 'log_every=4', 'progress=false',
            'sample_prompts=[]', *cache, *extra]


def run(cmd, timeout=600, extra_env=None, **kw):
    env = {**os.environ, 'GLOG_v': '3', 'PATH': f"{BIN}:{os.environ.get('PATH', '')}", **(extra_env or {})}  # msrun/mpirun start `python` from PATH
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env, **kw)


def train_records(out):
    "step → (loss, sample ids) of each step's record; a step logged twice (a resume that did not supersede) fails."
    recs = tl.read_metrics(out, 'train')
    steps = [r['step'] for r in recs]
    assert len(steps) == len(set(steps)), f'{out}/metrics.jsonl: steps logged twice: {sorted({s for s in steps if steps.count(s) > 1})}'
    return {r['step']: (r['loss'], r['sample_ids']) for r in recs}


def one_record_per_step(out):
    "Every kind of record (train, val, sample) has at most one per step; the superseded ones were set aside."
    for kind in ('train', 'val'):
        steps = [r['step'] for r in tl.read_metrics(out, kind)]
        assert len(steps) == len(set(steps)), (kind, steps)
    return [l for l in (Path(out) / 'metrics.superseded.jsonl').read_text().splitlines()] if (Path(out) / 'metrics.superseded.jsonl').exists() else []


def final_weights(out):
    from msllm_nb.model.formats import load_ms_weights
    return load_ms_weights(Path(out) / 'checkpoints' / f'step_{STEPS:08d}' / 'model.ckpt')


def digests(out, world):
    return [json.loads((Path(out) / 'ranks' / f'rank_{r}.json').read_text())['params_sha256'] for r in range(world)]


def msrun_cmd(tokens, out, *extra):
    "The msrun command line: 2 local workers of 4 rows each (the reference's global batch)."
    return [BIN / 'msrun', '--worker_num=2', '--local_worker_num=2', f'--master_port={tl.free_port()}', f'--log_dir={out}/logs',
            '--join=True', tl.__file__, *args(tokens, out, *extra, batch=4)]


def msrun(tokens, out, *extra):
    """train_llm under msrun with 2 local workers of 4 rows each (the reference's global batch). A failed launch fails with
    every log's end; one whose teardown failed after both ranks wrote their results is a warning line (course.runner.launch_job)."""
    launched(msrun_cmd(tokens, out, *extra), out, 2)
    return out


def launched(cmd, out, world, timeout=900, env=None):
    "Launch train_llm's ranks (msrun, mpirun) and require their results: `summary.json` and every rank's file, written by this launch."
    out = Path(out)
    r = launch_job(cmd, out / 'logs', outputs=[out / 'summary.json', *(out / 'ranks' / f'rank_{r}.json' for r in range(world))], timeout=timeout, env=env)
    if r.returncode:  # the ranks finished, the launcher's teardown failed: in pytest's warnings summary, not silent
        warnings.warn(f'{Path(cmd[0]).name} exited {r.returncode} after every rank wrote its results:\n' + launch_report(r, out / 'logs'))
    return r


def check_dp(out, reference, world=2):
    ref_w, w = final_weights(reference), final_weights(out)
    diff = max(float(np.abs(ref_w[k] - w[k]).max()) for k in ref_w)
    assert diff <= 1e-4, diff
    d = digests(out, world)
    assert len(set(d)) == 1, d  # the ranks hold bitwise identical parameters
    ref, got = train_records(reference), train_records(out)
    assert ref.keys() == got.keys() and all(ref[s][1] == got[s][1] for s in ref)  # the same global batches
    assert max(abs(ref[s][0] - got[s][0]) for s in ref) < 1e-4
    vref, vgot = ({v['step']: v['loss'] for v in tl.read_metrics(o, 'val')} for o in (reference, out))
    assert vref.keys() == vgot.keys() and abs(vref[0] - vgot[0]) < 1e-5, (vref, vgot)  # the same validation windows, whatever the layout
    assert max(abs(vref[s] - vgot[s]) for s in vref) < 1e-3


def quick(tokens, out, *extra):
    "A small, quick train_llm run: one layer, 2 steps of 2 × 64 tokens, validation after each."
    return ['--config', 'tiny', '--out', str(out), '--set', f'token_dir={tokens}', 'steps=2', 'batch_size=2', 'seq_len=64',
            'warmup_steps=0', 'model.num_hidden_layers=1', 'val_every=1', 'val_windows=2', 'save_every=2', 'log_every=1',
            'progress=false', 'sample_prompts=[]', *extra]


def one_line_error(r, code, *words):
    "The command failed with `code` and one stderr line holding every one of `words`, no traceback; returns the line."
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code and len(lines) == 1 and 'Traceback' not in r.stderr, (r.returncode, r.stderr[-3000:])
    assert all(str(w) in lines[0] for w in words), (words, lines[0])
    return lines[0]


def strict_json(text):
    "json.loads that refuses NaN and Infinity (not JSON, though Python's json reads them)."
    def refuse(c): raise ValueError(f'{c} is not JSON')
    return json.loads(text, parse_constant=refuse)


def sft_folder(d, masked=True, n=48, seq_len=64, vocab=8192):
    """An SFT folder as msllm-sft lays it out (windows.npy [N, 4, seq_len]: ids, labels, segment, position; meta.json with
    `format: sft`), of random ids; `masked`: every label is −100 (a folder whose conversations lost their answers)."""
    d = Path(d); d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    ids = rng.integers(4, vocab, (n, seq_len)).astype(np.int32)
    labels = np.full_like(ids, -100) if masked else ids.copy()
    win = np.stack([ids, labels, np.ones_like(ids), np.broadcast_to(np.arange(seq_len, dtype=np.int32), ids.shape)], 1)
    np.save(d / 'windows.npy', win)
    (d / 'meta.json').write_text(json.dumps({'format': 'sft', 'seq_len': seq_len, 'vocab_size': vocab, 'tokenizer': 'tokenizer/tokenizer.json',
                                             'windows': n, 'answer_tokens': int((labels != -100).sum())}))
    return d


def run_raw(*args, **kw):
    "Run a command; stdout and stderr decoded with their \\r kept (text=True would turn a progress bar's \\r into a line end)."
    r = subprocess.run([str(a) for a in args], capture_output=True, **kw)
    r.stdout, r.stderr = r.stdout.decode(errors='replace'), r.stderr.decode(errors='replace')
    return r


def one_line(r, code, *names):
    "Exit `code` and one line on stderr (a progress bar, redrawn with \\r, may come before it) naming each of `names`, no traceback."
    lines = [l.rsplit('\r', 1)[-1] for l in r.stderr.strip().split('\n')]
    assert r.returncode == code and len(lines) == 1 and 'Traceback' not in r.stderr, (r.returncode, r.stderr[-2000:])
    assert all(str(n) in lines[0] for n in names), lines[0]
    return lines[0]


def make_tiny_hfs(specs):
    "`fixtures.make_tiny_hf(*spec)` for each spec, in this process (meant for one `run_reference` child for them all)."
    from msllm_nb.model.fixtures import make_tiny_hf
    return [make_tiny_hf(*spec) for spec in specs]


def run_in_process(name, *argv, cwd=None):
    """Console script `name` (the file pip wrote into the interpreter's bin folder) run in this process on `argv`, as a
    CompletedProcess (exit code, stdout, stderr). For the many refusal cases of a test, which end before any compute: a
    subprocess would spend ~3 s of each case starting Python and importing MindSpore. Each such test keeps one case as a
    real subprocess, which also sees what the C++ side prints."""
    import contextlib, io, runpy
    out, err, argv0, cwd0 = io.StringIO(), io.StringIO(), sys.argv, os.getcwd()
    sys.argv = [str(BIN / name), *map(str, argv)]
    try:
        if cwd: os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try: runpy.run_path(str(BIN / name), run_name='__main__'); code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
                if isinstance(e.code, str): print(e.code, file=sys.stderr)
    finally: sys.argv = argv0; os.chdir(cwd0)
    return subprocess.CompletedProcess([name, *argv], code, out.getvalue(), err.getvalue())
