"""PyNative on a small CPU: MindSpore's asynchronous kernel dispatch against `ms.runtime.launch_blocking()`.

By default MindSpore launches kernels from dispatch threads of its own (5 by default), so that Python runs ahead of
the device. On a 2-core machine those threads compete with the kernels' own threads for the same cores. This
benchmark trains the tiny course model (8 × 128 tokens a step, the bundled corpus) in fresh processes: PyNative and
GRAPH mode, each with the default dispatch and with `launch_blocking()` called before the first kernel, and PyNative
with `launch_blocking()` called after one small kernel has run (why it must come first). PyNative is also run as two
processes side by side, as `msllm-roadmap` runs two chapters at once. The baseline of each ratio is the default dispatch in the same mode, measured in the same run, in
alternating order. Losses must be identical: the setting changes when kernels run, not what they compute.

    python bench/pynative_dispatch.py    # about 10 minutes; prints the table, writes bench/results/pynative_dispatch.md
"""
import json, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from _report import write_result

STEPS = {'pynative': 10, 'graph': 30}  # steady state: PyNative from step 3, GRAPH (compiled at step 1) from step 6
SKIP = {'pynative': 2, 'graph': 5}
REPS = 2


def child(mode, blocking):
    "blocking: 0 the default dispatch, 1 launch_blocking before the first kernel, 'late' launch_blocking after one kernel."
    os.environ.setdefault('GLOG_v', '3')
    import mindspore as ms
    ms.set_device('CPU')
    if blocking == 'late': (ms.Tensor([1.0]) + 1).asnumpy()  # one kernel first
    if blocking: ms.runtime.launch_blocking()
    import msllm_nb.train_llm as tl
    with tempfile.TemporaryDirectory() as d:
        cfg = tl.TrainConfig(token_dir=str(tl.sample_tokens()), steps=STEPS[mode], seq_len=128, batch_size=8, warmup_steps=2,
                             val_every=1000, save_every=1000, mode=mode, out_dir=d, sample_prompts=[], progress=False,
                             model={'preset': 'tiny', 'vocab_size': 8192, 'max_position_embeddings': 256})
        t0 = time.perf_counter(); tl.train(cfg, console=False); total = time.perf_counter() - t0
        tr = tl.read_metrics(d, 'train')
    print(json.dumps({'step_s': statistics.median(r['step_s'] for r in tr[SKIP[mode]:]), 'total_s': total, 'loss': tr[-1]['loss']}))


def launch(mode, blocking, n=1):
    "n processes at once; their results."
    ps = [subprocess.Popen([sys.executable, __file__, '--child', mode, str(blocking if blocking == 'late' else int(blocking))], stdout=subprocess.PIPE, text=True)
          for _ in range(n)]
    outs = [p.communicate()[0] for p in ps]
    assert all(p.returncode == 0 for p in ps), outs
    return [json.loads(o.strip().splitlines()[-1]) for o in outs]


def main():
    cases = [('pynative', 1), ('graph', 1), ('pynative', 2)]
    ways = lambda m, n: (False, True, 'late') if (m, n) == ('pynative', 1) else (False, True)
    res = {(m, n, b): [] for m, n in cases for b in ways(m, n)}
    for rep in range(REPS):
        for m, n in cases:
            for b in (ways(m, n) if rep % 2 == 0 else ways(m, n)[::-1]):  # alternating order
                r = launch(m, b, n); res[m, n, b] += r
                print(f'{m} ×{n} blocking={b}: ' + ', '.join(f"{x['step_s'] * 1e3:.0f} ms/step" for x in r), flush=True)
    losses = {x['loss'] for (m, n, b), rs in res.items() if m == 'pynative' for x in rs}
    losses_g = {x['loss'] for (m, n, b), rs in res.items() if m == 'graph' for x in rs}
    rows = ['| mode | processes at once | dispatch | ms per step (median, range) | speed-up over the default |', '|---|---:|---|---:|---:|']
    for m, n in cases:
        base = statistics.median(x['step_s'] for x in res[m, n, False])
        for b in ways(m, n):
            xs = [x['step_s'] for x in res[m, n, b]]
            how = {False: 'default (async)', True: 'launch_blocking', 'late': 'launch_blocking after one kernel'}[b]
            rows.append(f"| {m} | {n} | {how} | {statistics.median(xs) * 1e3:,.0f} "
                        f"({min(xs) * 1e3:,.0f}–{max(xs) * 1e3:,.0f}) | {base / statistics.median(xs):.2f}× |")
    body = '\n'.join(rows) + (
        f"\n\nTiny model, 8 × 128 tokens a step, fp32; {STEPS['pynative']} PyNative steps (median from step {SKIP['pynative'] + 1}) and "
        f"{STEPS['graph']} GRAPH steps (median from step {SKIP['graph'] + 1}) per process, {REPS} repetitions in alternating order, "
        f"each row over {REPS} × its process count. Final losses: PyNative {sorted(losses)}, GRAPH {sorted(losses_g)} "
        f"({'identical' if len(losses) == 1 and len(losses_g) == 1 else 'NOT identical'} across dispatch settings).")
    write_result('pynative_dispatch', 'PyNative on CPU: asynchronous dispatch against launch_blocking', body)


if __name__ == '__main__':
    if sys.argv[1:2] == ['--child']: child(sys.argv[2], 'late' if sys.argv[3] == 'late' else sys.argv[3] == '1')
    else: main()
