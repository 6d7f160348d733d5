"""MindSpore's compile cache on CPU: what a rerun saves, and which change it does not notice.

`MS_COMPILER_CACHE_ENABLE=1` with `MS_COMPILER_CACHE_PATH=DIR` makes MindSpore save each graph it compiles under
DIR/rank_N/graph_cache/compile_cache_K.mindir (K counts the graphs a process compiles, in order) and load it in the
next process instead of compiling. Each run here is a fresh process that trains the tiny course model for 4 steps
(8 × seq_len tokens, GRAPH mode) with `train_llm`'s `train()`, from the same entry script:

1. seq_len 128, no cache: the reference losses and the compile time;
2. seq_len 128, empty cache: it compiles and writes the cache;
3. seq_len 128, same cache: it loads the graphs;
4. seq_len 64, same cache, as a user who changed one setting would run it;
5. seq_len 64, no cache: the losses run 4 should give;
6. and 7. the same the other way round: a cache written at seq_len 64, read at 128;
8. run 3 again, its code given with `python -c` instead of as a script file.

Then the same runs through `train_llm --set compile_cache=DIR` (chapter 06·4: a folder per configuration), the
console script in a fresh process each time: an empty DIR (it compiles and publishes), the same DIR again, seq_len 64
with that DIR, and the first run's code through `python -c`.

A run is right when its losses equal the uncached run of the same config, bit for bit.

    python bench/compile_cache.py        # about 3 minutes on 2 cores
"""
import json, os, shutil, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from _report import write_result
TOKENS = None  # the bundled sample's token folder, set in main

CHILD = r'''
import json, sys, tempfile, time
import mindspore as ms
ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
import msllm_nb.train_llm as tl
seq = int(sys.argv[1])
with tempfile.TemporaryDirectory() as out:  # the run folder (checkpoints included) goes with the process
    cfg = tl.TrainConfig(token_dir=str(tl.sample_tokens()), steps=4, seq_len=seq, batch_size=8, warmup_steps=2, val_every=4, save_every=4,
                         model={'preset': 'tiny', 'vocab_size': 8192, 'max_position_embeddings': 256}, out_dir=out,
                         sample_prompts=[], log_every=50, progress=False)
    c = time.process_time(); tl.train(cfg, console=False); cpu = time.process_time() - c
    tr = tl.read_metrics(cfg.out_dir, 'train')
print(json.dumps({'cpu_s': cpu, 'first_step_s': tr[0]['step_s'], 'losses': [r['loss'] for r in tr]}))
'''


def run(script, seq, cache=None, inline=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith('MS_COMPILER_CACHE')}
    env['GLOG_v'] = '3'
    if cache: env.update(MS_COMPILER_CACHE_ENABLE='1', MS_COMPILER_CACHE_PATH=str(cache))
    how = ['-c', script.read_text()] if inline else [str(script)]
    r = subprocess.run([sys.executable, *how, str(seq)], capture_output=True, text=True, env=env)
    if r.returncode:  # a crash is a result here: its error line goes into the table
        err = [l for l in r.stderr.splitlines() if l.startswith(('RuntimeError', 'ValueError', 'TypeError', 'FileNotFoundError'))]
        return {'error': (err or r.stderr.strip().splitlines()[-1:] or ['exit %d' % r.returncode])[-1][:160]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_cli(seq, cache, inline=False):
    "train_llm's CLI with `compile_cache`: its CPU time (this process's children), first step and losses."
    import resource
    env = {k: v for k, v in os.environ.items() if not k.startswith('MS_COMPILER_CACHE')}; env['GLOG_v'] = '3'
    with tempfile.TemporaryDirectory() as out:
        sets = [f'token_dir={TOKENS}', 'steps=4', f'seq_len={seq}', 'batch_size=8', 'warmup_steps=2', 'val_every=4', 'save_every=4',
                'model.vocab_size=8192', 'model.max_position_embeddings=256', 'sample_prompts=[]', 'log_every=50', 'progress=false',
                f'compile_cache={cache}', f'out_dir={out}/run']
        cmd = ([sys.executable, '-c', "import runpy; runpy.run_module('msllm_nb.train_llm', run_name='__main__')"] if inline else [str(Path(sys.executable).parent/'train_llm')])
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run([*cmd, '--config', 'tiny', '--set', *sets], capture_output=True, text=True, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode: return {'error': (r.stderr.strip().splitlines() or ['exit %d' % r.returncode])[-1][:160]}
        tr = [json.loads(l) for l in open(f'{out}/run/metrics.jsonl') if '"kind": "train"' in l]
    return {'cpu_s': after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 'first_step_s': tr[0]['step_s'],
            'losses': [t['loss'] for t in tr]}


def main():
    global TOKENS
    from msllm_nb.corpus.shards import sample_tokens
    TOKENS = sample_tokens()
    work = Path(tempfile.mkdtemp())
    cache, script = work/'cache', work/'child.py'  # a script file: with `python -c` MindSpore's cache fails (it opens '-c' to hash it)
    script.write_text(CHILD)
    a, b = cache/'a', cache/'b'
    plan = [('seq_len 128, no cache', 128, None, 'ref128'), ('seq_len 128, empty cache A (writes it)', 128, a, 'ref128'),
            ('seq_len 128, cache A', 128, a, 'ref128'), ('seq_len 64, cache A (written at 128)', 64, a, 'ref64'),
            ('seq_len 64, no cache', 64, None, 'ref64'), ('seq_len 64, empty cache B (writes it)', 64, b, 'ref64'),
            ('seq_len 128, cache B (written at 64)', 128, b, 'ref128'), ('seq_len 128, cache A, the same code run with `python -c`', 128, a, 'ref128')]
    keyed = work/'keyed'
    cli = [('seq_len 128, compile_cache empty (writes its folder)', 128, False, 'ref128'), ('seq_len 128, compile_cache again', 128, False, 'ref128'),
           ('seq_len 64, the same compile_cache', 64, False, 'ref64'), ('seq_len 128, the same compile_cache, through `python -c`', 128, True, 'ref128')]
    try:
        res = [(name, ref, run(script, seq, c, inline='python -c' in name)) for name, seq, c, ref in plan]
        res_cli = [(name, ref, run_cli(seq, keyed, inline)) for name, seq, inline, ref in cli]
    finally: shutil.rmtree(work, ignore_errors=True)  # the script and the caches
    if 'error' in res[0][2] or 'error' in res[4][2]: sys.exit(f'compile_cache: an uncached run failed: {res[0][2]} {res[4][2]}')
    refs = {'ref128': res[0][2]['losses'], 'ref64': res[4][2]['losses']}
    rows = ['| run (each a fresh process; the same script file unless said) | first step (s) | CPU (s) | losses equal to the uncached run of its config |',
            '|---|---:|---:|---|']
    def verdict(r, ref):
        if 'error' in r: return f"crashed: `{r['error']}`"
        return 'yes' if r['losses'] == refs[ref] else f"NO: {r['losses'][0]:.4f} where {refs[ref][0]:.4f} is right"
    for name, ref, r in res:
        num = lambda k: f'{r[k]:.1f}' if k in r else '—'
        rows.append(f"| {name} | {num('first_step_s')} | {num('cpu_s')} | {verdict(r, ref)} |")
    rows += ['', "`train_llm`'s `compile_cache` (its CLI, the console script unless said; CPU of the whole process):", '',
             '| run (each a fresh process) | first step (s) | CPU (s) | losses equal to the uncached run of its config |', '|---|---:|---:|---|']
    for name, ref, r in res_cli:
        num = lambda k: f'{r[k]:.1f}' if k in r else '—'
        rows.append(f"| {name} | {num('first_step_s')} | {num('cpu_s')} | {verdict(r, ref)} |")
    right = all(verdict(r, rf) == 'yes' for _, rf, r in res_cli)
    c0, c1 = res_cli[0][2], res_cli[1][2]
    hit, ref = res[2][2], res[0][2]
    wrong = [name for name, rf, r in (res[3], res[6]) if verdict(r, rf) != 'yes']
    inline = verdict(res[7][2], 'ref128')
    body = (f"The tiny course model, 4 training steps per run, each run a fresh process. **A cache hit: first step "
            f"{ref['first_step_s']:.1f} → {hit['first_step_s']:.1f} s, the run's CPU {ref['cpu_s']:.0f} → {hit['cpu_s']:.0f} s.** "
            + (f"**Wrong with a cache written at another seq_len: {'; '.join(wrong)}** (a wrong loss means the run "
               'went on without a word). MindSpore recognises a cached graph by the source of the entry script and of the '
               'local modules it imports, not by the shapes or settings: give every configuration its own '
               'MS_COMPILER_CACHE_PATH, and empty it when the code or MindSpore changes.' if wrong else
               'Each run with a cache written at another seq_len computed its own losses.')
            + f" The same code given with `python -c`: {'right' if inline == 'yes' else inline}."
            + (f" **`train_llm`'s `compile_cache` (a folder per configuration): a hit's first step {c0['first_step_s']:.1f} → "
               f"{c1['first_step_s']:.1f} s, the process's CPU {c0['cpu_s']:.0f} → {c1['cpu_s']:.0f} s; every run right, seq_len 64 "
               'and `python -c` included.**' if right else " **`train_llm`'s `compile_cache`: NOT every run right (the second table).**")
            + '\n\n' + '\n'.join(rows))
    write_result('compile_cache', "MindSpore's compile cache: a rerun's compile saved, a changed setting not noticed", body)


if __name__ == '__main__':
    main()
