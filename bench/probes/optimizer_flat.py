"""One fused AdamW update over a flat buffer against train_llm's AdamWeightDecay, one kernel per parameter tensor (CPU).

Issue 24's lever: `AdamWeightDecay` took 12 % of a SmolLM2-shape step, one kernel launch per parameter tensor; would one
update over a flat parameter/gradient buffer, as ZeRO-1's bucket does, be faster? MindSpore's `nn.AdamWeightDecay`
already runs one fused C++ kernel per tensor on CPU (`P.AdamWeightDecay`: m, v, the decay and the parameter update in one
pass), so a flat buffer can only save the launches. Three update cells, on each model size's real parameters (the
decay groups and learning-rate table of `train_step.make_optimizer`) and the same random gradients:

- **per tensor**: `make_optimizer(model)`, what train_llm runs.
- **flat, with its copies**: what the DP path would run. The gradients concatenated into one buffer per decay group,
  one `AdamWeightDecay` call per group on flat parameter copies, and the updated parameters split back into the
  model's tensors (a flat buffer that the model's parameters are views of does not exist in MindSpore).
- **flat, no copies**: the same update on the flat buffers alone: the best a flat layout could do.

Each size runs in a fresh process; each cell is compiled (GRAPH mode), then the three take turns, `REPS` calls each. Before timing, `CHECK` updates of the
per-tensor and the flat cell from the same state are compared, parameter by parameter.

    python bench/probes/optimizer_flat.py [REPS]   # default 40; writes bench/results/optimizer_flat.md
"""
import os, statistics, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))  # bench/, for _report and the benchmarks it builds on
from _report import write_result  # noqa: E402
from train_throughput import SIZES  # noqa: E402  (the benchmark's model sizes)

CHECK = 3  # updates compared per-tensor against flat before timing


def lr_table(lr, min_lr, warmup_steps, total_steps):
    "`make_optimizer`'s per-step learning rates."
    import numpy as np, mindspore as ms
    from msllm_nb.train.step import lr_at
    return ms.Tensor(np.array([lr_at(s, lr, min_lr, warmup_steps, total_steps) for s in range(total_steps)], np.float32))


def flat_adamw(model, lr=1e-3, min_lr=1e-4, warmup_steps=10, total_steps=1000):
    """`train_step.make_optimizer`'s update, but over one flat buffer per decay group: a cell that takes the gradients in
    the order of its `parameters` (the model's, decayed ones first), concatenates them, runs one `AdamWeightDecay` call
    per group on flat copies of the parameters and splits the result back into the model's tensors. A step cell takes
    it where it takes the optimizer (`TrainStep(loss_cell, flat_adamw(model))`)."""
    import numpy as np, mindspore as ms
    from mindspore import nn, ops, Parameter, ParameterTuple
    from msllm_nb.train.step import decay_groups
    groups = [g for g in decay_groups(model.trainable_params()) if g]
    table = lr_table(lr, min_lr, warmup_steps, total_steps)

    class FlatAdamW(nn.Cell):
        def __init__(self):
            super().__init__(auto_prefix=False)
            self.parameters = ParameterTuple([p for g in groups for p in g])  # what a step cell differentiates
            flat = [Parameter(ms.Tensor(np.concatenate([p.asnumpy().ravel() for p in g])), name=f'flat_group{i}') for i, g in enumerate(groups)]
            self.opt = nn.AdamWeightDecay([{'params': [f], 'weight_decay': wd} for f, wd in zip(flat, (0.1, 0.0))],
                                          learning_rate=table, beta1=0.9, beta2=0.95, eps=1e-8)
            self.counts, self.marker = [len(g) for g in groups], Parameter(ms.Tensor([0.0], ms.float32), name='flat_marker', requires_grad=False)
            self.sizes = [[int(np.prod(p.shape)) for p in g] for g in groups]
        def construct(self, grads):
            flat_g, i = (), 0
            for n in self.counts:
                flat_g += (ops.concat([grads[i + j].reshape(-1) for j in range(n)]),); i += n
            self.opt(flat_g); i = 0
            for k, n in enumerate(self.counts):
                parts = ops.split(self.opt.parameters[k], self.sizes[k])  # read after the update (side effects run in program order)
                for j in range(n): ops.assign(self.parameters[i + j], parts[j].reshape(self.parameters[i + j].shape))
                i += n
            return self.marker * 1  # read after every copy back: waiting for this tensor waits for the whole update
    return FlatAdamW()


def cells(model, flat_lr=1e-3):
    """(per-tensor update, flat update with copies, flat update alone, the parameters in the order the updates take
    gradients). `flat_lr`: the flat update's peak learning rate (the per-tensor one's is 1e-3; another value is a wrong update)."""
    import mindspore as ms
    from mindspore import nn, ops, Parameter
    from msllm_nb.train.step import make_optimizer
    per = make_optimizer(model, lr=1e-3, min_lr=1e-4, warmup_steps=10, total_steps=1000)
    flat = flat_adamw(model, lr=flat_lr)
    alone = [Parameter(f.value().copy(), name=f'alone{i}') for i, f in enumerate(flat.opt.parameters)]
    class Alone(nn.Cell):  # the flat buffers' update with no copy in or out: the best a flat layout could do
        def __init__(self):
            super().__init__()
            self.opt = nn.AdamWeightDecay([{'params': [a], 'weight_decay': wd} for a, wd in zip(alone, (0.1, 0.0))],
                                          learning_rate=lr_table(1e-3, 1e-4, 10, 1000), beta1=0.9, beta2=0.95, eps=1e-8)
            self.marker = Parameter(ms.Tensor([0.0], ms.float32), name='alone_marker', requires_grad=False)
        def construct(self, flat_g): return ops.depend(self.marker, self.opt(flat_g)) * 1
    class Per(nn.Cell):
        def __init__(self):
            super().__init__(); self.opt = per
            self.marker = Parameter(ms.Tensor([0.0], ms.float32), name='per_marker', requires_grad=False)
        def construct(self, grads): return ops.depend(self.marker, self.opt(grads)) * 1
    return Per(), flat, Alone(), list(flat.parameters)


def wait(out):
    "Read the cell's output back: a tensor computed after the whole update, so the update has finished."
    out.asnumpy()


def compare(per, flat, params, updates=CHECK):
    """`updates` updates per tensor, then the same from the same start, flat (its own, fresh optimizer state), with the same
    random gradients: (bit for bit equal, the largest relative difference of a parameter, the gradients)."""
    import numpy as np, mindspore as ms
    rng = np.random.default_rng(0)
    start = {p.name: p.asnumpy().copy() for p in params}
    grads = [tuple(ms.Tensor(rng.standard_normal(p.shape, dtype=np.float32) * np.float32(1e-2)) for p in params) for _ in range(updates)]
    for g in grads: per(g)
    after_per = {p.name: p.asnumpy().copy() for p in params}
    for p in params: p.set_data(ms.Tensor(start[p.name]))
    for g in grads: flat(g)
    rel = max(float(np.max(np.abs(p.asnumpy() - after_per[p.name]) / np.maximum(np.abs(after_per[p.name]), 1e-30))) for p in params)
    return all(np.array_equal(p.asnumpy(), after_per[p.name]) for p in params), rel, grads


def agree(fields, updates=CHECK, lr=1e-3):
    """In a process of its own: does the flat update (peak learning rate `lr`) give `make_optimizer`'s numbers (1e-3) on a
    model of these fields? {'same': bit for bit, 'rel': the largest relative difference}"""
    os.environ.setdefault('GLOG_v', '3')
    import mindspore as ms
    ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
    from msllm_nb.model.llama import LlamaConfig, LlamaForCausalLM
    ms.set_seed(0)
    per, flat, _, params = cells(LlamaForCausalLM(LlamaConfig(**fields)), lr)
    same, rel, _ = compare(per, flat, params, updates)
    return {'same': same, 'rel': rel}


def measure(name, fields, reps):
    "One size, in a process of its own (the flat cell's compile holds about 5 GB at the SmolLM2 shape)."
    os.environ.setdefault('GLOG_v', '3')
    import numpy as np, mindspore as ms
    ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_recursion_limit(10000)  # the flat cell's loops over SmolLM2's 272 tensors unroll deeper than the default 1000
    from msllm_nb.model.llama import LlamaConfig, LlamaForCausalLM, param_count
    ms.set_seed(0)
    cfg = LlamaConfig(**fields)
    model = LlamaForCausalLM(cfg)
    per, flat, alone, params = cells(model)  # params: the optimizer's order, decayed parameters first (make_optimizer's groups)
    same, rel, grads = compare(per, flat, params)
    g = grads[0]
    bounds = np.cumsum([0] + flat.counts)
    flat_only = tuple(ms.Tensor(np.concatenate([x.asnumpy().ravel() for x in g[a:b]])) for a, b in zip(bounds[:-1], bounds[1:]))
    runs = {'per tensor': lambda: per(g), 'flat, with its copies': lambda: flat(g), 'flat, no copies': lambda: alone(flat_only)}
    for f in runs.values(): wait(f()); wait(f())  # compiled, then settled
    t = {k: [] for k in runs}
    for _ in range(reps):
        for k, f in runs.items():
            t0 = time.perf_counter(); wait(f()); t[k].append(time.perf_counter() - t0)
    return dict(name=name, params=param_count(cfg), tensors=len(params), rel=rel, same=same,
                ms={k: statistics.median(v) * 1e3 for k, v in t.items()}, spread={k: (min(v) * 1e3, max(v) * 1e3) for k, v in t.items()})


def main(reps=40):
    from msllm_nb.core.procs import run_reference
    import optimizer_flat as H  # this file as a module: the fresh processes import `measure` by name
    rows = ['| model | tensors | per tensor ms (train_llm) | flat, with its copies ms | flat, no copies ms | flat with copies ÷ per tensor | '
            f'flat alone ÷ per tensor | after {CHECK} updates: flat vs per tensor |', '|---|---|---|---|---|---|---|---|']
    results = []
    for name, (fields, _) in SIZES.items():
        r = run_reference(H.measure, name, fields, reps, timeout=1200); results.append(r)
        m, s = r['ms'], r['spread']
        cell = lambda k: f"{m[k]:.1f} ({s[k][0]:.1f}–{s[k][1]:.1f})"
        agree = 'bit for bit' if r['same'] else f"max relative difference {r['rel']:.1e}"
        rows.append(f"| {name}, {r['params'] / 1e6:.1f}M params | {r['tensors']} | {cell('per tensor')} | {cell('flat, with its copies')} "
                    f"| {cell('flat, no copies')} | {m['per tensor'] / m['flat, with its copies']:.2f}× | {m['per tensor'] / m['flat, no copies']:.2f}× | {agree} |")
        print(rows[-1], flush=True)
    faster = [r for r in results if r['ms']['per tensor'] > r['ms']['flat, with its copies']]
    verdict = (f"Here the flat update with its copies is faster at {len(faster)} of {len(results)} sizes"
               + (f" ({', '.join(r['name'] for r in faster)})" if faster else '') + '.')
    write_result('optimizer_flat', 'One AdamW update over a flat buffer against one per parameter tensor (CPU)',
                 '\n'.join(rows) + f'\n\nOne update of all the parameters (ms): median of {reps} calls per cell, the three cells taking turns, '
                 'after compiling (min–max in brackets); ratios above 1 mean the flat update is faster. The same learning-rate table, '
                 'betas, eps and decay groups as `train_step.make_optimizer`; float32; each size in a fresh process. MindSpore runs '
                 '`AdamWeightDecay` as one fused kernel per tensor on CPU, each reading a parameter, its gradient and its two moments '
                 'once, so a flat buffer can only save launches, and its copies in and out add a pass over every gradient and every '
                 f'parameter. {verdict} train_llm would switch only if the flat update with its copies were faster at every size and '
                 'the whole step faster in every repetition (row "fused flat AdamW" of `train_throughput_variants.md`).')


if __name__ == '__main__':
    main(*map(int, sys.argv[1:2]))
