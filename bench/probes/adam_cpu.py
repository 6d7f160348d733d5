"""Is MindSpore's CPU `AdamWeightDecay` kernel slow? A standalone check at the parameter shapes of the 27M training size.

`nn.AdamWeightDecay` launches one fused `AdamWeightDecay` kernel per parameter tensor. In the committed training profile
(`train_throughput_fresh.md`, 27M size, 4 × 256) those kernels take about 53 ms a step, 5 % of it. MindSpore's `Adam`
kernel does the same moment updates and the same m / (√v + ε) step, without the decoupled weight decay; here both are
timed on one tensor, with PyTorch's AdamW (its default multi-tensor form, and `fused=True`) and NumPy beside them:

- MindSpore: a GRAPH-mode cell that applies the update once, its parameter read back, minus the same cell that reads
  the parameter back without updating it (the fixed cost of calling a graph);
- "decay, then Adam": AdamW's update from MindSpore kernels that are not `AdamWeightDecay`: p ← p·(1 − lr·wd) (`Mul`
  and `Assign`), then `Adam` with its bias corrections switched off (β powers 0, as `AdamWeightDecay` has none);
- PyTorch: `optimizer.step()` on one parameter; NumPy: the update written out, in place where NumPy allows.

Each framework runs in a process of its own, float32, all cores; median of REPS updates after WARMUP. The last column
checks "decay, then Adam" against `AdamWeightDecay` after one update: its largest difference divided by the largest
change of a parameter (the same update up to float32 rounding, not bit for bit).

    python bench/probes/adam_cpu.py    # prints the table and writes bench/results/adam_cpu.md
"""
import os, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))  # bench/, for _report and the benchmarks it builds on
from _report import each_framework, median_ms, versions, write_result  # noqa: E402

# name → parameter shape (the 27M size: hidden 512, feed-forward 1376, vocabulary 8192)
CASES = {'attention projection': (512, 512), 'feed-forward matrix': (1376, 512), 'embedding table': (8192, 512)}
LR, BETA1, BETA2, EPS, WD = 1e-3, 0.9, 0.95, 1e-8, 0.1
WARMUP, REPS = 3, 20


def _inputs(shape):
    "(parameter, m, v, gradient) after a few steps of training: moments that are not zero."
    import numpy as np
    rng = np.random.default_rng(0)
    g = (1e-3 * rng.standard_normal(shape)).astype(np.float32)
    return (0.02 * rng.standard_normal(shape)).astype(np.float32), (0.1 * g).astype(np.float32), (1e-2 * g * g).astype(np.float32), g


def _median_ms(fn): return median_ms(fn, WARMUP, REPS)


def _ms_cells():
    "Three cells over (p, m, v) Parameters: AdamWeightDecay, decay-then-Adam, and a no-op that only reads p back."
    import mindspore as ms
    from mindspore import nn, ops
    class Update(nn.Cell):
        def __init__(self, p, m, v, how):
            super().__init__()
            self.p, self.m, self.v = (ms.Parameter(ms.Tensor(a.copy()), name=n) for a, n in ((p, 'p'), (m, 'm'), (v, 'v')))
            self.how = how
            self.awd, self.adam, self.zero = ops.AdamWeightDecay(), ops.Adam(), ms.Tensor(0.0, ms.float32)
            self.lr, self.b1, self.b2, self.eps, self.wd = (ms.Tensor(x, ms.float32) for x in (LR, BETA1, BETA2, EPS, WD))
        def construct(self, g):
            if self.how == 'AdamWeightDecay':
                self.awd(self.p, self.m, self.v, self.lr, self.b1, self.b2, self.eps, self.wd, g)
            elif self.how == 'decay, then Adam':
                ops.assign(self.p, self.p * (1.0 - self.lr * self.wd))
                self.adam(self.p, self.m, self.v, self.zero, self.zero, self.lr, self.b1, self.b2, self.eps, g)
            return self.p[0, 0]
    return Update


def adamw_by_adam(model, **kw):
    """`train_step.make_optimizer(model, **kw)` (same decay groups, learning-rate table and state names), its update done
    by the kernels of the "decay, then Adam" column instead of `AdamWeightDecay`: the `--variants` row of
    `train_throughput.py` that measures this lever in a training step."""
    from mindspore import ops
    from mindspore.ops import functional as F
    from msllm_nb.train.step import make_optimizer
    base = make_optimizer(model, **kw)
    update = ops.MultitypeFuncGraph('adamw_by_adam')

    @update.register('Function', 'Tensor', 'Tensor', 'Tensor', 'Tensor', 'Tensor', 'Tensor', 'Tensor', 'Tensor', 'Tensor', 'Bool', 'Bool')
    def _one(adam, beta1, beta2, eps, lr, wd, param, m, v, g, decay_flag, optim_filter):
        if not optim_filter: return g
        zero = ops.zeros((), g.dtype)
        if decay_flag: param = F.depend(param, F.assign(param, param * (1.0 - lr * wd)))  # p·(1 − lr·wd) first
        return F.depend(g, adam(param, m, v, zero, zero, lr, beta1, beta2, eps, g))  # β powers 0: no bias correction

    class AdamWByAdam(type(base)):
        def construct(self, gradients):
            wd, lr = self.get_weight_decay(), self.get_lr()
            self.assignadd(self.global_step, self.global_step_increase_tensor)
            return self.hyper_map(F.partial(update, self.adam, self.beta1, self.beta2, self.eps, lr), wd, self._parameters,
                                  self.moments1, self.moments2, gradients, self.decay_flags, self.optim_filter)
    base.__class__, base.adam = AdamWByAdam, ops.Adam()  # the same object (its state Parameters), another update
    return base


def _mindspore():
    import numpy as np, mindspore as ms
    ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
    Update, out = _ms_cells(), {'version': ms.__version__}
    for name, shape in CASES.items():
        p, m, v, g = _inputs(shape); gt = ms.Tensor(g)
        cells = {how: Update(p, m, v, how) for how in ('read only', 'AdamWeightDecay', 'decay, then Adam')}
        once = {}
        for how in ('AdamWeightDecay', 'decay, then Adam'):  # one update from the same state, for the numbers check
            c = Update(p, m, v, how); c(gt).asnumpy(); once[how] = c.p.asnumpy()
        t = {how: _median_ms(lambda c=c: c(gt).asnumpy()) for how, c in cells.items()}
        ref = once['AdamWeightDecay']
        out[name] = {**{k: max(t[k] - t['read only'], 0) for k in ('AdamWeightDecay', 'decay, then Adam')}, 'call': t['read only'],
                     'diff': float(np.max(np.abs(once['decay, then Adam'] - ref)) / np.max(np.abs(ref - p)))}  # ÷ the largest update
    return out


def _numpy_adamw(p, m, v, g):
    import numpy as np
    def run():
        m[...] += (g - m) * (1 - BETA1); v[...] += (g * g - v) * (1 - BETA2)
        p[...] -= LR * (m / (np.sqrt(v) + EPS) + WD * p)
    return run


def _torch():
    import torch
    torch.set_num_threads(os.cpu_count())
    out = {'version': torch.__version__}
    for name, shape in CASES.items():
        p, m, v, g = _inputs(shape)
        row = {}
        for label, kw in (('torch foreach', {}), ('torch fused', {'fused': True})):
            w = torch.nn.Parameter(torch.from_numpy(p.copy())); w.grad = torch.from_numpy(g)
            opt = torch.optim.AdamW([w], lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WD, **kw)
            row[label] = _median_ms(opt.step)
        row['numpy'] = _median_ms(_numpy_adamw(p.copy(), m.copy(), v.copy(), g))
        out[name] = row
    return out


def main():
    os.environ.setdefault('GLOG_v', '3')
    if (got := each_framework(__file__, _mindspore, _torch)) is None: return  # (a child: it printed its side)
    m, t = got
    calls = ', '.join(f"{m[n]['call']:.2f}" for n in CASES)
    rows = ['| parameter | shape | MindSpore AdamWeightDecay ms | MindSpore decay, then Adam ms | PyTorch AdamW (foreach) ms '
            '| PyTorch AdamW (fused) ms | NumPy ms | AdamWeightDecay ÷ PyTorch fused | decay-then-Adam minus AdamWeightDecay, largest ÷ largest update |',
            '|---|---|---|---|---|---|---|---|---|']
    for name, shape in CASES.items():
        a, b = m[name], t[name]
        ratio = f"{a['AdamWeightDecay'] / b['torch fused']:.1f}" if b['torch fused'] > 0 else '—'
        rows.append(f"| {name} | {list(shape)} | {a['AdamWeightDecay']:.2f} | {a['decay, then Adam']:.2f} | {b['torch foreach']:.2f} "
                    f"| {b['torch fused']:.2f} | {b['numpy']:.2f} | {ratio} | {a['diff']:.1e} |")
    write_result('adam_cpu', "MindSpore's CPU AdamWeightDecay against its Adam kernel, PyTorch and NumPy, at the 27M size's shapes",
                 '\n'.join(rows) + f'\n\n{versions(m, t)}; '
                 f'float32; lr {LR}, betas {BETA1}/{BETA2}, eps {EPS}, weight decay {WD}; per update: the median '
                 f'of {REPS} updates after {WARMUP}; MindSpore: the update cell minus a cell that only reads the parameter back '
                 f'({calls} ms); each framework in a process of its own.')


if __name__ == '__main__':
    main()
