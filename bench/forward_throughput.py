"""Forward tokens/s of the MindSpore model vs Hugging Face PyTorch on SmolLM2-135M, same weights and inputs, CPU, fp32.

Each framework runs in its own process (chapter 00's rule). MindSpore is measured in GRAPH mode (the compiled Cell,
what training uses) and in PyNative (what generation and the notebooks use). Median of REPS timed runs after warm-up.
Then each side's forward at the larger shape under its profiler (MindSpore's, torch.profiler): the top operators, the
kernels launched per forward, and what is left of MindSpore's slow CPU `ReduceSum` (issue 24: the training step routes
the RMSNorm and softmax sums through matmuls; the forward pass shares the model's RMSNorm, so it shares the fix).

    python bench/forward_throughput.py        # prints the table and writes bench/results/forward_throughput.md
"""
import os, statistics, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from _report import torch_kernels, write_result  # noqa: E402
SHAPES = [(1, 128), (4, 256)]
REPS = 5


PROFILED = 3  # forwards profiled, at the last shape


def torch_forward(hf_dir, shapes, reps):
    import torch, transformers, numpy as np
    torch.manual_seed(0)
    m = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, local_files_only=True).eval()
    out = {}
    for b, t in shapes:
        ids = torch.from_numpy(np.random.default_rng(0).integers(3, m.config.vocab_size, (b, t)))
        with torch.no_grad():
            m(ids)
            times = []
            for _ in range(reps):
                t0 = time.perf_counter(); m(ids); times.append(time.perf_counter() - t0)
        out[(b, t)] = statistics.median(times)
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(PROFILED): m(ids)
    ops = sorted(((e.key, e.self_cpu_time_total / 1e3 / PROFILED) for e in prof.key_averages()), key=lambda kv: -kv[1])
    out['profile'] = {'ops': ops[:8], 'total_ms': sum(v for _, v in ops),
                      'kernels': torch_kernels(prof, PROFILED)}
    return out


def ms_forward(ckpt, shapes, reps, mode):
    import numpy as np, mindspore as ms
    from msllm_nb.model.formats import load_model
    ms.set_device('CPU'); ms.set_context(mode=mode)
    model = load_model(ckpt); model.set_train(False)
    out = {}
    for b, t in shapes:
        ids = ms.Tensor(np.random.default_rng(0).integers(3, model.config.vocab_size, (b, t)), ms.int32)
        model(ids).asnumpy()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter(); model(ids).asnumpy(); times.append(time.perf_counter() - t0)
        out[(b, t)] = statistics.median(times)
    if mode == ms.GRAPH_MODE:
        from msllm_nb.train.metrics import profile_steps
        with tempfile.TemporaryDirectory() as d:
            r = profile_steps(lambda: model(ids).asnumpy(), d, steps=PROFILED, warmup=0, top=10 ** 6)
        out['profile'] = {'ops': [(o['op'], o['ms_per_step']) for o in r['ops'][:8]], 'total_ms': r['op_ms_per_step'],
                          'kernels': sum(o['kernels_per_step'] for o in r['ops']),
                          'reduce_sum_ms': sum(o['ms_per_step'] for o in r['ops'] if o['op'] == 'ReduceSum')}
    return out


def profile_table(pt, graph):
    "Each side's top operators per forward, side by side."
    b, t = SHAPES[-1]
    rows = [f'### Where a forward\'s time goes: {b} × {t}', '',
            f"Operator time per forward: MindSpore {graph['total_ms']:.0f} ms in {graph['kernels']:.0f} kernels (its profiler, host kernels), "
            f"PyTorch {pt['total_ms']:.0f} ms in {pt['kernels']:.0f} leaf operators (torch.profiler, self CPU time). MindSpore's `ReduceSum`: "
            f"{graph['reduce_sum_ms']:.1f} ms per forward.", '',
            '| # | MindSpore operator | ms/forward | PyTorch operator | ms/forward |', '|---|---|---|---|---|']
    rows += [f'| {i + 1} | {m[0]} | {m[1]:.1f} | {p[0]} | {p[1]:.1f} |' for i, (m, p) in enumerate(zip(graph['ops'], pt['ops']))]
    return '\n'.join(rows)


def main():
    os.environ.setdefault('GLOG_v', '3')
    import mindspore as ms
    import msllm_nb.model.fixtures as fx
    import msllm_nb.model.convert as cv
    from msllm_nb.core.procs import run_reference
    import forward_throughput as H  # this file as a module: spawned children import the functions by name
    hf = run_reference(fx.build_smollm2_hf, str(fx.fixture_dir() / 'smollm2-135m-instruct'))
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / 'smol.ckpt'; cv.convert_hf_to_ms(hf, ckpt)
        pt = run_reference(H.torch_forward, hf, SHAPES, REPS)
        graph = run_reference(H.ms_forward, str(ckpt), SHAPES, REPS, ms.GRAPH_MODE)
        pyn = run_reference(H.ms_forward, str(ckpt), SHAPES, REPS, ms.PYNATIVE_MODE)
    lines = ['| batch × seq | PyTorch eager tok/s | MindSpore GRAPH tok/s | ratio | MindSpore PyNative tok/s | ratio |',
             '|---|---|---|---|---|---|']
    for s in SHAPES:
        n = s[0] * s[1]
        lines.append(f'| {s[0]} × {s[1]} | {n / pt[s]:.0f} | {n / graph[s]:.0f} | {pt[s] / graph[s]:.2f} | {n / pyn[s]:.0f} | {pt[s] / pyn[s]:.2f} |')
    lines.append(f'\nratio = MindSpore ÷ PyTorch tokens/s (same model, weights, inputs; fp32; median of {REPS}).\n\n' + profile_table(pt['profile'], graph['profile']))
    write_result('forward_throughput', 'Forward throughput: SmolLM2-135M on CPU', '\n'.join(lines))


if __name__ == '__main__':
    sys.path.insert(0, str(Path(__file__).parent))
    main()
