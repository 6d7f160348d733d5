"""Training tokens/s: the project's MindSpore training step vs PyTorch eager on the identical model, CPU, fp32.

Both sides run the same thing: a LLaMA (RMSNorm, rotary, SwiGLU, causal attention with an additive mask), the shifted
causal-LM loss, global-norm clipping at 1.0 and AdamW (β 0.9/0.95, weight decay 0.1 on matrices only), from the SAME
initial weights on the SAME batch; the first-step losses of the two sides are printed to show the models agree.

MindSpore side: `msllm_nb.train_llm.TrainStep` in GRAPH mode, exactly what `train_llm` runs.
PyTorch side: an eager `nn.Module` written op for op like `msllm_nb.model` (plus `F.cross_entropy`, `clip_grad_norm_`,
`torch.optim.AdamW`), i.e. how a PyTorch user writes it.

Each framework lives in its own persistent process (chapter 00's rule: one framework per process); after warm-up
(compilation included) the two take turns running STEPS steps, REPS times, and the table reports medians of the per-step
times and their ratio. While one side is timed the other is stopped with SIGSTOP: measured here, an idle MindSpore or
PyTorch process left running halves the other's throughput on 2 cores (spinning thread pools). MFU = model FLOPs per token × tokens/s ÷ the peak FLOP/s that framework reaches on a 1024³
float32 matmul in its own process.

    python bench/train_throughput.py            # all sizes; writes bench/results/train_throughput.md
    python bench/train_throughput.py --quick    # the tiny size only (a minute or two)
    python bench/train_throughput.py --variants # MindSpore settings tried, each against the shipped one
"""
import argparse, math, multiprocessing as mp, os, signal, statistics, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _report import write_result  # noqa: E402

# name → (LlamaConfig fields, batch size); seq lengths below. Batches are scaled so a step takes seconds on 2 cores.
SIZES = {
    'tiny (issue 8 shape)': (dict(vocab_size=4096, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                                       num_attention_heads=4), 8),
    '~100M class, scaled': (dict(vocab_size=8192, hidden_size=512, intermediate_size=1376, num_hidden_layers=6,
                                      num_attention_heads=8), 4),
    'SmolLM2-135M shape': (dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                                num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True,
                                rms_norm_eps=1e-5, rope_theta=100000.0), 1),
}
SEQS = (128, 256)


def _matmul_peak(fw, n=1024, reps=10):
    if fw == 'ms':
        from msllm_nb.train_llm import measure_peak_flops  # the peak train_llm's MFU uses
        return measure_peak_flops(n, reps)
    import numpy as np, torch
    t = torch.from_numpy(np.random.default_rng(0).standard_normal((n, n)).astype(np.float32))
    run = lambda: torch.mm(t, t)
    run(); best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter(); run(); best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def _torch_model(cfg):
    import torch, torch.nn as nn, torch.nn.functional as F
    from msllm_nb.model import rope_tables

    class RMSNorm(nn.Module):
        def __init__(s, d, eps): super().__init__(); s.eps, s.weight = eps, nn.Parameter(torch.ones(d))
        def forward(s, x): return s.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + s.eps))

    def rot(x): h = x.shape[-1] // 2; return torch.cat((-x[..., h:], x[..., :h]), -1)

    class Attention(nn.Module):
        def __init__(s, c):
            super().__init__()
            s.nh, s.nkv, s.hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
            s.wq = nn.Linear(c.hidden_size, s.nh * s.hd, bias=False); s.wk = nn.Linear(c.hidden_size, s.nkv * s.hd, bias=False)
            s.wv = nn.Linear(c.hidden_size, s.nkv * s.hd, bias=False); s.wo = nn.Linear(s.nh * s.hd, c.hidden_size, bias=False)
        def forward(s, x, cos, sin, mask):
            B, T, _ = x.shape
            q = s.wq(x).view(B, T, s.nh, s.hd).transpose(1, 2)
            k = s.wk(x).view(B, T, s.nkv, s.hd).transpose(1, 2)
            v = s.wv(x).view(B, T, s.nkv, s.hd).transpose(1, 2)
            q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
            if s.nkv != s.nh: k, v = k.repeat_interleave(s.nh // s.nkv, 1), v.repeat_interleave(s.nh // s.nkv, 1)
            att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(s.hd) + mask, -1)
            return s.wo((att @ v).transpose(1, 2).reshape(B, T, -1))

    class FeedForward(nn.Module):
        def __init__(s, c):
            super().__init__()
            s.w1 = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
            s.w2 = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)
            s.w3 = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        def forward(s, x): return s.w2(F.silu(s.w1(x)) * s.w3(x))

    class Layer(nn.Module):
        def __init__(s, c):
            super().__init__()
            s.attention_norm, s.attention = RMSNorm(c.hidden_size, c.rms_norm_eps), Attention(c)
            s.ffn_norm, s.feed_forward = RMSNorm(c.hidden_size, c.rms_norm_eps), FeedForward(c)
        def forward(s, x, cos, sin, mask):
            x = x + s.attention(s.attention_norm(x), cos, sin, mask)
            return x + s.feed_forward(s.ffn_norm(x))

    class Model(nn.Module):
        def __init__(s, c):
            super().__init__()
            s.c = c
            s.tok_embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
            s.layers = nn.ModuleList([Layer(c) for _ in range(c.num_hidden_layers)])
            s.norm_out = RMSNorm(c.hidden_size, c.rms_norm_eps)
            s.lm_head = None if c.tie_word_embeddings else nn.Linear(c.hidden_size, c.vocab_size, bias=False)
            cos, sin = rope_tables(c.head_dim, c.max_position_embeddings, c.rope_theta)
            s.register_buffer('cos', torch.from_numpy(cos)); s.register_buffer('sin', torch.from_numpy(sin))
        def forward(s, ids):
            T = ids.shape[1]
            x = s.tok_embeddings(ids)
            mask = torch.triu(torch.full((T, T), -1e9), 1)
            for l in s.layers: x = l(x, s.cos[:T], s.sin[:T], mask)
            x = s.norm_out(x)
            logits = x @ s.tok_embeddings.weight.t() if s.lm_head is None else s.lm_head(x)
            return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), ignore_index=-100)

    return Model(cfg)


def _ms_to_torch_name(n):
    return {'model.tok_embeddings.embedding_weight': 'tok_embeddings.weight', 'lm_head.weight': 'lm_head.weight',
            'model.norm_out.weight': 'norm_out.weight'}.get(n, n.removeprefix('model.'))


# MindSpore settings tried on the tiny size (the `--variants` table): name → what it changes
VARIANTS = {
    'baseline': 'train_llm as shipped: GRAPH mode, jit_level default (O0), log_softmax + gather loss',
    'jit_level O1': "ms.set_context(jit_config={'jit_level': 'O1'})",
    'graph kernel fusion': 'ms.set_context(enable_graph_kernel=True); its AKG kernel compiler imports `decorator`, which the wheel does not install',
    'runtime threads 1': 'ms.set_context(runtime_num_threads=1)',
    'loss: ops.cross_entropy': 'CausalLMLoss computed with ops.cross_entropy(ignore_index=-100)',
}


def _apply_variant(variant):
    import mindspore as ms
    from mindspore import ops
    import msllm_nb.train_llm as T
    if variant == 'jit_level O1': ms.set_context(jit_config={'jit_level': 'O1'})
    elif variant == 'graph kernel fusion': ms.set_context(enable_graph_kernel=True)
    elif variant.startswith('runtime threads'): ms.set_context(runtime_num_threads=int(variant.split()[-1]))
    elif variant == 'loss: ops.cross_entropy':
        def construct(self, logits, labels):
            lg, lb = logits[:, :-1], labels[:, 1:]
            return ops.cross_entropy(lg.reshape(-1, lg.shape[-1]), lb.reshape(-1), ignore_index=self.ignore_index)
        T.CausalLMLoss.construct = construct


def worker(fw, fields, batch, seq, weights, conn, variant='baseline'):
    "One framework's training step on one size; waits for 'run n' commands and answers with the per-step seconds."
    os.environ.setdefault('GLOG_v', '3')
    import numpy as np
    from msllm_nb.model import LlamaConfig
    from msllm_nb.train_llm import flops_per_token
    cfg = LlamaConfig(**fields, max_position_embeddings=max(SEQS))
    ids = np.random.default_rng(1).integers(3, cfg.vocab_size, (batch, seq)).astype(np.int32)
    if fw == 'ms':
        import mindspore as ms
        ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE); ms.set_seed(0)
        _apply_variant(variant)
        from msllm_nb.model import LlamaForCausalLM
        from msllm_nb.train_llm import LossCell, TrainStep, make_optimizer
        model = LlamaForCausalLM(cfg)
        init = {p.name: p.asnumpy() for p in model.get_parameters()}
        np.savez(weights, **{_ms_to_torch_name(k): v for k, v in init.items()})
        step_cell = TrainStep(LossCell(model), make_optimizer(model, lr=1e-3, min_lr=1e-4, warmup_steps=10, total_steps=100000))
        step_cell.set_train(); x = ms.Tensor(ids)
        def step(): return float(step_cell(x)[0].asnumpy())
    else:
        import torch
        torch.set_num_threads(os.cpu_count())  # its default varied between runs here (1 or 2): pin it to MindSpore's
        torch.manual_seed(0)
        model = _torch_model(cfg)
        w = np.load(weights)
        model.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files}, strict=False)  # buffers cos/sin stay
        decay = [p for p in model.parameters() if p.dim() >= 2]; no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.1}, {'params': no_decay, 'weight_decay': 0.0}],
                                lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
        from msllm_nb.train_llm import lr_at
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, 1e-3, 1e-4, 10, 100000) / 1e-3)
        x = torch.from_numpy(ids.astype(np.int64))
        def step():
            opt.zero_grad(set_to_none=True)
            loss = model(x); loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step(); sched.step()
            return float(loss.detach())
    t0 = time.perf_counter(); first = step(); warm = time.perf_counter() - t0
    step()
    conn.send({'first_loss': first, 'warmup_s': warm, 'threads': _threads(fw), 'flops_per_token': flops_per_token(cfg, seq)})
    while True:
        cmd = conn.recv()
        if cmd == 'peak': conn.send(_matmul_peak(fw)); continue
        if cmd == 'stop': break
        times = []
        for _ in range(cmd):
            t0 = time.perf_counter(); step(); times.append(time.perf_counter() - t0)
        conn.send(times)


def _threads(fw):
    if fw == 'torch':
        import torch; return torch.get_num_threads()
    import mindspore as ms
    return ms.get_context('runtime_num_threads')


def _turn(conns, procs, who, steps):
    """Run `steps` steps in process `who` while every other worker is stopped (SIGSTOP): an idle framework's spinning
    thread pools would otherwise take CPU from the one being timed."""
    others = [p for k, p in procs.items() if k != who and p.is_alive()]
    for p in others: os.kill(p.pid, signal.SIGSTOP)
    try:
        conns[who].send(steps); return conns[who].recv()
    finally:
        for p in others: os.kill(p.pid, signal.SIGCONT)


def measure_variants(steps, reps):
    "MindSpore tok/s of each VARIANTS entry on the tiny size at seq 256, all alive at once and taking turns."
    import train_throughput as H
    (fields, batch), seq = SIZES[next(iter(SIZES))], 256
    ctx = mp.get_context('spawn')
    with tempfile.TemporaryDirectory() as tmp:
        res, procs, conns = {}, {}, {}
        for v in VARIANTS:  # one at a time while compiling, so compile times do not overlap
            a, b = ctx.Pipe()
            procs[v] = ctx.Process(target=H.worker, args=('ms', fields, batch, seq, str(Path(tmp) / f'{len(res)}.npz'), b, v), daemon=True)
            procs[v].start(); conns[v] = a; b.close()  # only the child holds its end: a dead child is an EOFError here
            try: res[v] = conns[v].recv(); res[v]['times'] = []
            except EOFError:
                procs[v].join(30); res[v] = {'error': f'the process died during compile/warm-up (exit code {procs[v].exitcode})'}
        live = [v for v in VARIANTS if 'error' not in res[v]]
        for r in range(reps):
            for v in (live if r % 2 == 0 else live[::-1]):
                res[v]['times'] += _turn(conns, {k: procs[k] for k in live}, v, steps)
        for v in live: conns[v].send('stop'); procs[v].join(60)
    return res, batch * seq


def measure(name, fields, batch, seq, steps, reps):
    import train_throughput as H  # this file as a module: spawned children import `worker` by name
    ctx = mp.get_context('spawn')
    with tempfile.TemporaryDirectory() as tmp:
        weights = str(Path(tmp) / 'init.npz')
        res, procs, conns = {}, {}, {}
        for fw in ('ms', 'torch'):  # MindSpore first: it writes the initial weights the PyTorch side loads
            a, b = ctx.Pipe()
            procs[fw] = ctx.Process(target=H.worker, args=(fw, fields, batch, seq, weights, b), daemon=True)
            procs[fw].start(); conns[fw] = a; b.close()
            res[fw] = conns[fw].recv(); res[fw]['times'] = []
        for r in range(reps):  # alternate, starting side swapped each repetition
            for fw in (('ms', 'torch') if r % 2 == 0 else ('torch', 'ms')):
                res[fw]['times'] += _turn(conns, procs, fw, steps)
        for fw in ('ms', 'torch'):
            res[fw]['peak'] = _turn(conns, procs, fw, 'peak')
            conns[fw].send('stop'); procs[fw].join(60)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='the tiny size only')
    ap.add_argument('--steps', type=int, default=3, help='steps per turn')
    ap.add_argument('--reps', type=int, default=4, help='turns per framework')
    ap.add_argument('--variants', action='store_true', help='only the table of MindSpore settings tried (tiny size)')
    a = ap.parse_args()
    if a.variants:
        res, tok = measure_variants(a.steps, a.reps)
        base = tok / statistics.median(res['baseline']['times'])
        rows = ['| MindSpore setting | what changes | tok/s | vs baseline | first-step loss | warm-up (compile) s |', '|---|---|---|---|---|---|']
        for v, what in VARIANTS.items():
            r = res[v]
            if 'error' in r: rows.append(f'| {v} | {what} | fails: {r["error"]} | | | |'); continue
            tps = tok / statistics.median(r['times'])
            rows.append(f"| {v} | {what} | {tps:.0f} | {tps / base:.2f} | {r['first_loss']:.5f} | {r['warmup_s']:.0f} |")
        write_result('train_throughput_variants', 'Training throughput: MindSpore settings tried (tiny size, 8 × 256, CPU)',
                     '\n'.join(rows) + f'\n\nAll variants alive at once, taking turns (the others stopped with SIGSTOP): median of {a.reps} turns × {a.steps} steps each.')
        return
    rows = ['| model | batch × seq | PyTorch eager tok/s | MindSpore GRAPH tok/s | ratio MS ÷ PT | MFU PT | MFU MS '
            '| first-step loss PT / MS | MS warm-up (compile) s |', '|---|---|---|---|---|---|---|---|---|']
    sizes = list(SIZES.items())[:1] if a.quick else list(SIZES.items())
    from msllm_nb.model import LlamaConfig, param_count
    for name, (fields, batch) in sizes:
        label = f'{name}, {param_count(LlamaConfig(**fields)) / 1e6:.1f}M params'
        for seq in SEQS:
            r = measure(name, fields, batch, seq, a.steps, a.reps)
            tok = batch * seq
            tps = {fw: tok / statistics.median(r[fw]['times']) for fw in r}
            mfu = {fw: r[fw]['flops_per_token'] * tps[fw] / r[fw]['peak'] for fw in r}
            rows.append(f"| {label} | {batch} × {seq} | {tps['torch']:.0f} | {tps['ms']:.0f} | {tps['ms'] / tps['torch']:.2f} "
                        f"| {mfu['torch']:.1%} | {mfu['ms']:.1%} | {r['torch']['first_loss']:.5f} / {r['ms']['first_loss']:.5f} "
                        f"| {r['ms']['warmup_s']:.0f} |")
            print(rows[-1], flush=True)
    peaks = f"matmul peak (1024³ fp32): PyTorch {r['torch']['peak'] / 1e9:.0f} GFLOP/s, MindSpore {r['ms']['peak'] / 1e9:.0f} GFLOP/s"
    threads = f"threads: PyTorch {r['torch']['threads']}, MindSpore runtime_num_threads {r['ms']['threads']}"
    body = '\n'.join(rows) + (f'\n\nMedian of {a.reps} turns × {a.steps} steps per side, alternating, after warm-up; '
                              f'fp32; same initial weights and batch. {peaks}; {threads}.')
    write_result('train_throughput' + ('_quick' if a.quick else ''), 'Training throughput: MindSpore vs PyTorch eager on CPU', body)


if __name__ == '__main__':
    main()
