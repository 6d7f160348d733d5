"""Two training processes side by side, as msllm-roadmap runs two chapters at once: MindSpore's kernel threads per process.

Each process builds the tiny course model (8 × 128 tokens a step, GRAPH mode), compiles its training step, takes 5
warm-up steps and then times 30. Two processes start together; each is timed on its own steady steps. Three settings:

- default: MindSpore's CPU kernel pool as it comes (every process uses every core);
- one core each: `mindspore.device_context.cpu.op_tuning.threads_num(cores // 2)` in each process, as a roadmap worker
  could set it;
- alone (default threads, one process): the reference for what a step costs on an idle machine.

Repeated `--reps` times in alternating order. The ratio is the step time with default threads over the step time with
one core each, both side by side: above 1.0 means sharing the cores is faster. The losses must be identical in every
setting (the thread count changes no number).

    python bench/side_by_side.py            # about 4 minutes on 2 cores
"""
import argparse, json, os, statistics, subprocess, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from _report import write_result

CHILD = r'''
import json, statistics, sys, time, numpy as np, mindspore as ms
n = int(sys.argv[1])
if n > 0: ms.device_context.cpu.op_tuning.threads_num(n)
ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
from dataclasses import asdict
from mindspore import Tensor
import msllm_nb.model.llama as msm, msllm_nb.train.step as ts
ms.set_seed(0)
model = msm.LlamaForCausalLM(msm.LlamaConfig(**{**asdict(msm.PRESETS['tiny']), 'vocab_size': 8192, 'max_position_embeddings': 256}))
ids = Tensor(np.random.default_rng(0).integers(0, 8192, (8, 129)).astype(np.int32))
step = ts.TrainStep(ts.LossCell(model), ts.make_optimizer(model, 1e-3, 1e-4, 2, 100))
t = time.perf_counter(); step(ids)[0].asnumpy(); compile_s = time.perf_counter() - t
for _ in range(5): step(ids)[0].asnumpy()
times, losses = [], []
for _ in range(30):
    t = time.perf_counter(); losses.append(float(step(ids)[0].asnumpy())); times.append(time.perf_counter() - t)
print(json.dumps({'compile_s': compile_s, 'step_ms': 1e3 * statistics.median(times), 'losses': losses}))
'''


def launch(threads, n):
    "Start n processes at once with `threads` kernel threads each (0: MindSpore's default); their results."
    env = {**os.environ, 'GLOG_v': '3'}
    ps = [subprocess.Popen([sys.executable, '-c', CHILD, str(threads)], stdout=subprocess.PIPE, text=True, env=env)
          for _ in range(n)]
    out = [p.communicate()[0] for p in ps]
    if any(p.returncode for p in ps): sys.exit('side_by_side: a child failed')
    return [json.loads(o.strip().splitlines()[-1]) for o in out]


def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--reps', type=int, default=3); a = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    share = max(1, cores // 2)
    settings = {'alone (default threads)': (0, 1), 'side by side, default threads': (0, 2),
                f'side by side, {share} thread(s) each': (share, 2)}
    res = {k: [] for k in settings}
    for r in range(a.reps):
        for k in (list(settings) if r % 2 == 0 else list(settings)[::-1]):
            res[k] += launch(*settings[k])
    losses = {json.dumps(x['losses']) for v in res.values() for x in v}
    med = {k: statistics.median(x['step_ms'] for x in v) for k, v in res.items()}
    rows = ['| setting | processes | step (ms, median of medians) | spread (ms) | compile (s, median) |', '|---|---:|---:|---|---:|']
    for k, v in res.items():
        ms_ = sorted(x['step_ms'] for x in v)
        rows.append(f"| {k} | {settings[k][1]} | {med[k]:.0f} | {ms_[0]:.0f}–{ms_[-1]:.0f} | {statistics.median(x['compile_s'] for x in v):.1f} |")
    ratio = med['side by side, default threads'] / med[f'side by side, {share} thread(s) each']
    body = (f'The tiny model (8 × 128 tokens a step), two training processes at once on {cores} cores, {a.reps} repetitions in '
            f'alternating order. **Default threads ÷ {share} thread(s) each, side by side: {ratio:.2f}×** '
            f'(above 1: sharing the cores is faster). Losses identical in every setting and process: {len(losses) == 1}.\n\n'
            + '\n'.join(rows) + '\n\nmsllm-roadmap runs two chapters at a time. It leaves MindSpore\'s default threads unless '
            'this ratio is clearly above 1.0, with the spreads apart.')
    write_result('side_by_side', 'Two training processes side by side: kernel threads per process', body)
    if len(losses) != 1: sys.exit('side_by_side: the losses differ between settings')


if __name__ == '__main__':
    main()
