"""Is MindSpore's CPU `Mul` kernel slow? A standalone check at the shapes of a LLaMA training step, fit to file upstream.

In the committed training profile (`train_throughput_fresh.md`, 27M size, 4 × 256) MindSpore's `Mul` takes about three
times PyTorch's `aten::mul`. That comparison is not like for like: PyTorch spreads the same work over `mul`, `mul_`,
the SiLU backward and others. Here each multiply is timed alone, the way `reduce_sum_cpu.py` times sums:

- MindSpore: a GRAPH-mode function that multiplies CHAIN times (`y = y * a`), minus the same function with one
  multiply, divided by CHAIN - 1: the kernel's time, without the fixed cost of calling a graph and copying out;
- PyTorch eager and NumPy: the same chain, the same subtraction.

Each framework runs in a process of its own, float32, all cores; median of REPS calls after WARMUP.

    python bench/probes/mul_cpu.py    # prints the table and writes bench/results/mul_cpu.md
"""
import os, statistics, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))  # bench/, for _report and the benchmarks it builds on
from _report import each_framework, versions, write_result  # noqa: E402

# name → (shape of x, shape of the other factor (() for a scalar), where a training step makes it): the 27M size, 4 × 256
CASES = {
    'SwiGLU: silu(gate) × up': ((4, 256, 1376), (4, 256, 1376), 'the feed-forward product, and its two gradients'),
    'RMSNorm weight': ((4, 256, 512), (512,), 'x̂ × weight, broadcast over batch and positions'),
    'same size, no broadcast': ((4, 256, 512), (4, 256, 512), 'x̂ times a tensor of its own shape: the RMSNorm row without the broadcast'),
    'rotary: q × cos': ((4, 8, 256, 64), (256, 64), 'q and k times the cos and sin tables, broadcast over batch and heads'),
    'attention scores × scale': ((4, 8, 256, 256), (), 'the scores times 1/√d'),
    'gradient × clip scale': ((1376, 512), (), 'every gradient times the clipping factor'),
}
CHAIN, WARMUP, REPS = 11, 3, 20


def _kernel_ms(run1, run_chain):
    "Median time of the CHAIN-multiply call minus the one-multiply call, per extra multiply (ms)."
    for _ in range(WARMUP): run1(); run_chain()
    one, many = [], []
    for _ in range(REPS):
        t0 = time.perf_counter(); run1(); one.append(time.perf_counter() - t0)
        t0 = time.perf_counter(); run_chain(); many.append(time.perf_counter() - t0)
    return max(statistics.median(many) - statistics.median(one), 0) / (CHAIN - 1) * 1e3, statistics.median(one) * 1e3


def _inputs(shape, other):
    import numpy as np
    rng = np.random.default_rng(0)
    return rng.standard_normal(shape).astype(np.float32), np.asarray(1 + 1e-4 * rng.standard_normal(other), np.float32)


def _mindspore():
    import mindspore as ms
    ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
    out = {'version': ms.__version__}
    for name, (shape, other, _) in CASES.items():
        x, a = (ms.Tensor(v) for v in _inputs(shape, other))
        @ms.jit
        def one(x, a): return x * a
        @ms.jit
        def chain(x, a):
            y = x
            for _ in range(CHAIN): y = y * a
            return y
        k, call = _kernel_ms(lambda: one(x, a).asnumpy(), lambda: chain(x, a).asnumpy())
        out[name] = {'kernel': k, 'one call': call}
    return out


def _chain(x, a, n):
    "A function that multiplies `x` by `a` n times, eagerly (PyTorch tensors or NumPy arrays)."
    def run():
        y = x
        for _ in range(n): y = y * a
        return y
    return run


def _torch():
    import torch
    torch.set_num_threads(os.cpu_count())
    out = {'version': torch.__version__}
    for name, (shape, other, _) in CASES.items():
        xn, an = _inputs(shape, other)
        x, a = torch.from_numpy(xn), torch.from_numpy(an)
        out[name] = {'torch': _kernel_ms(_chain(x, a, 1), _chain(x, a, CHAIN))[0], 'numpy': _kernel_ms(_chain(xn, an, 1), _chain(xn, an, CHAIN))[0]}
    return out


def main():
    os.environ.setdefault('GLOG_v', '3')
    if (got := each_framework(__file__, _mindspore, _torch)) is None: return  # (a child: it printed its side)
    m, t = got
    rows = ['| multiply | x | other factor | MindSpore Mul ms | PyTorch ms | NumPy ms | MindSpore ÷ PyTorch | MindSpore one call ms (for scale) | where |',
            '|---|---|---|---|---|---|---|---|---|']
    for name, (shape, other, where) in CASES.items():
        a, b = m[name], t[name]
        ratio = f"{a['kernel'] / b['torch']:.1f}" if b['torch'] > 0 else '—'
        rows.append(f"| {name} | {list(shape)} | {list(other) or 'scalar'} | {a['kernel']:.2f} | {b['torch']:.2f} | {b['numpy']:.2f} "
                    f"| {ratio} | {a['one call']:.2f} | {where} |")
    write_result('mul_cpu', "MindSpore's CPU Mul against PyTorch and NumPy, at a training step's shapes",
                 '\n'.join(rows) + f'\n\n{versions(m, t)}; '
                 f'float32; per multiply: the median time of a chain of {CHAIN} multiplies minus that of one, '
                 f'÷ {CHAIN - 1} ({REPS} calls each after {WARMUP}); each framework in a process of its own. "One call" is '
                 "MindSpore's whole call of the one-multiply graph, result copied out: the fixed cost the subtraction removes.")


if __name__ == '__main__':
    main()
