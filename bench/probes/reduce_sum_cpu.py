"""A standalone reproduction, fit to file upstream: MindSpore's CPU ReduceSum is slow on 3-D and 4-D float32 tensors.

The same sums, at the shapes a LLaMA training step makes, timed four ways:
- MindSpore `ReduceSum` (`x.sum(axis)`, a GRAPH-mode function), as autodiff emits it;
- MindSpore, the same sum as a matrix product with a ones vector (what msllm_nb.model.llama's `row_sum` does);
- MindSpore, a graph that only slices the tensor: the fixed cost of calling a graph on it, no reduction;
- PyTorch (`torch.sum`) and NumPy (`np.sum`).
Each framework runs in a process of its own (MindSpore and PyTorch in one process slow each other down), median of
REPS calls after WARMUP calls, float32, all cores. Needs only mindspore, numpy and torch (CPU wheel).

    python bench/probes/reduce_sum_cpu.py    # prints the table and writes bench/results/reduce_sum_cpu.md
"""
import os, statistics, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))  # bench/, for _report and the benchmarks it builds on
from _report import each_framework, versions, write_result  # noqa: E402

# name → (shape, axis summed, where a training step makes it)
CASES = {
    'softmax backward, SmolLM2 shape': ((1, 9, 256, 256), (-1,), 'Σ over keys of dy·y, [batch, heads, T, T]'),
    'softmax backward, tiny model': ((8, 4, 256, 256), (-1,), 'the same at the course model\'s training shape'),
    'RMSNorm mean': ((8, 256, 256), (-1,), 'mean of x² over the hidden size (forward), its gradient (backward)'),
    'RMSNorm weight gradient': ((8, 256, 256), (0, 1), 'Σ over batch and positions of dy·x̂'),
    'clipping norm, one matrix': ((688, 256), (0, 1), 'Σ g² over a whole gradient'),
    'loss log-softmax, 2-D': ((2048, 4096), (-1,), 'Σ over the vocabulary, [tokens, vocab]: 2-D, for contrast'),
}
WARMUP, REPS = 5, 30


def _time(fn, x):
    for _ in range(WARMUP): fn(x)
    t = []
    for _ in range(REPS):
        t0 = time.perf_counter(); fn(x); t.append(time.perf_counter() - t0)
    return statistics.median(t) * 1e3


def _mindspore():
    import numpy as np, mindspore as ms
    from mindspore import ops
    ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
    out = {'version': ms.__version__}
    for name, (shape, axis, _) in CASES.items():
        x = ms.Tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
        keep = axis == (-1,)
        @ms.jit
        def reduce_sum(x): return x.sum(axis, keepdims=keep)
        if keep:
            ones = ms.Tensor(np.ones((shape[-1], 1), np.float32))
            @ms.jit
            def as_matmul(x): return ops.matmul(x, ones)
        else:  # a row of ones times the tensor flattened to 2-D: the sum over every row, [1, d]
            n, d = int(np.prod(shape[:-1])), shape[-1]
            ones = ms.Tensor(np.ones((1, n), np.float32))
            if len(axis) < len(shape):
                @ms.jit
                def as_matmul(x): return ops.matmul(ones, x.reshape(n, d))
            else:  # a sum over every axis: then the d column sums, a 1-D ReduceSum
                @ms.jit
                def as_matmul(x): return ops.matmul(ones, x.reshape(n, d)).sum()
        @ms.jit
        def slice_only(x): return x[..., :1] * 1.0
        row = {}
        for k, f in (('ReduceSum', reduce_sum), ('as matmul', as_matmul), ('slice only', slice_only)):
            row[k] = _time(lambda x: f(x).asnumpy(), x)
        want = np.asarray(x.asnumpy().astype(np.float64).sum(axis, keepdims=keep))
        row['matmul max rel. error'] = float(np.abs(as_matmul(x).asnumpy().reshape(want.shape) - want).max() / np.abs(want).max())
        out[name] = row
    return out


def _torch():
    import numpy as np, torch
    torch.set_num_threads(os.cpu_count())
    out = {'version': torch.__version__}
    for name, (shape, axis, _) in CASES.items():
        a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        x, keep = torch.from_numpy(a), axis == (-1,)
        out[name] = {'torch.sum': _time(lambda x: x.sum(axis, keepdim=keep), x),
                     'np.sum': _time(lambda a: a.sum(axis, keepdims=keep), a)}
    return out


def main():
    os.environ.setdefault('GLOG_v', '3')
    if (got := each_framework(__file__, _mindspore, _torch)) is None: return  # (a child: it printed its side)
    m, t = got
    alone = lambda ms_, a, b: f"{max(ms_ - a['slice only'], 0) / b['torch.sum']:.0f}"  # MindSpore's time less its graph-call cost
    rows = ['| sum | shape | axis | MindSpore ReduceSum ms | MindSpore as matmul ms | MindSpore slice only ms | PyTorch ms | NumPy ms '
            '| kernel alone: ReduceSum ÷ PyTorch | kernel alone: matmul ÷ PyTorch | matmul\'s max rel. error | where |', '|---|---|---|---|---|---|---|---|---|---|---|---|']
    for name, (shape, axis, where) in CASES.items():
        a, b = m[name], t[name]
        rows.append(f"| {name} | {list(shape)} | {axis} | {a['ReduceSum']:.2f} | {a['as matmul']:.2f} | {a['slice only']:.2f} "
                    f"| {b['torch.sum']:.2f} | {b['np.sum']:.2f} | {alone(a['ReduceSum'], a, b)} | {alone(a['as matmul'], a, b)} "
                    f"| {a['matmul max rel. error']:.1e} | {where} |")
    write_result('reduce_sum_cpu', 'MindSpore CPU ReduceSum against PyTorch and NumPy, and the matmul that routes around it',
                 '\n'.join(rows) + f'\n\n{versions(m, t)}; '
                 f'float32; median of {REPS} calls after {WARMUP}, each framework in a process of its own. '
                 'MindSpore times include the fixed cost of calling a compiled graph and copying the result out '
                 '(`asnumpy`); "slice only" is that cost for a graph that reads the same tensor and sums nothing, and the "kernel alone" '
                 'ratios subtract it before dividing by PyTorch\'s time. '
                 'msllm_nb routes the softmax\'s and RMSNorm\'s sums through matmuls (chapter 04·0, `row_sum`) and the clipping '
                 'norm through row sums of each gradient and then the sum of those (chapter 06·0); the 2-D row is for contrast: '
                 'there ReduceSum over the last axis is faster than the matmul, and the loss keeps it.')


if __name__ == '__main__':
    main()
