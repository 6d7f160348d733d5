"""Training tokens/s: the project's MindSpore training step vs PyTorch eager on the identical model, CPU, fp32.

Both sides run the same thing: a LLaMA (RMSNorm, rotary, SwiGLU, causal attention with an additive mask), the shifted
causal-LM loss, global-norm clipping at 1.0 and AdamW (β 0.9/0.95, weight decay 0.1 on matrices only), from the SAME
initial weights on the SAME batch; the first-step losses of the two sides are printed to show the models agree.

MindSpore side: `msllm_nb.train_llm.TrainStep` in GRAPH mode, exactly what `train_llm` runs.
PyTorch side: an eager `nn.Module` written op for op like `msllm_nb.model.llama` (plus `F.cross_entropy`, `clip_grad_norm_`,
`torch.optim.AdamW`), i.e. how a PyTorch user writes it.

Each framework lives in its own persistent process (chapter 00's rule: one framework per process); after warm-up
(compilation included) the two take turns running STEPS steps, REPS times, and the table reports medians of the per-step
times and their ratio. While one side is timed the other is stopped with SIGSTOP: measured here, an idle MindSpore or
PyTorch process left running halves the other's throughput on 2 cores (spinning thread pools). MFU = model FLOPs per token × tokens/s ÷ the machine's peak:
the best FLOP/s either framework reaches on a 1024³ float32 matmul, each measured in a fresh process of its own at
the start of the run (a probe inside a worker that holds a 135M-parameter model read 74 GFLOP/s instead of ~220).

    python bench/train_throughput.py --profile   # the committed table: all sizes, every turn a fresh process (compile,
                                                 # WARMUP steps shown as a curve, then the timed steps), plus each side's
                                                 # top operators; writes bench/results/train_throughput_fresh.md
    python bench/train_throughput.py --quick     # the tiny size only
    python bench/train_throughput.py --variants  # MindSpore settings tried, each against the shipped one
    python bench/train_throughput.py --methods   # the same step measured four ways: do the steady-state methods agree?
    python bench/train_throughput.py --live      # two live processes taking turns (SIGSTOP): faster, but biased:
                                                 # the variants run found the first-started process slowed 1.1-1.7x
"""
import argparse, math, multiprocessing as mp, os, re, signal, statistics, sys, tempfile, time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent/'probes')]  # the levers' code lives in bench/probes
from _report import torch_kernels, write_result  # noqa: E402

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
# Caps on (turns, timed steps, warm-up steps) per size: a SmolLM2-shape step takes 1-2 s and its compile over a minute,
# so the default run of all three sizes fits in about 25 minutes with --profile (21 on 2026-12-04).
BUDGET = {'SmolLM2-135M shape': (2, 6, 6)}
# Steps run after compiling and before timing. MindSpore's first steps after compiling run up to 1.4x slower than
# its steady state (the warm-up curve in the committed table shows where it settles). Timing 3 steps in a fresh
# process mostly measures those: measured that way on 2026-12-01 (another machine, the step before its sums were
# routed around), MindSpore ÷ PyTorch read 0.48-0.52 where live processes read 0.63-0.79.
WARMUP = 8


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


def _peak_worker(fw, conn):
    "A fresh process that only measures `fw`'s matmul peak."
    os.environ.setdefault('GLOG_v', '3')
    if fw == 'ms':
        import mindspore as ms
        ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
    else:
        import torch; torch.set_num_threads(os.cpu_count())
    conn.send(_matmul_peak(fw))


def machine_peaks():
    "Each framework's 1024³ fp32 matmul FLOP/s, measured in a fresh process of its own, one after the other."
    import train_throughput as H
    ctx, out = mp.get_context('spawn'), {}
    for fw in ('ms', 'torch'):
        a, b = ctx.Pipe(); p = ctx.Process(target=H._peak_worker, args=(fw, b)); p.start(); b.close()
        out[fw] = a.recv(); p.join(60)
    return out


def _torch_model(cfg):
    import torch, torch.nn as nn, torch.nn.functional as F
    from msllm_nb.model.llama import rope_tables

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
        def forward(s, ids):  # like train_llm.LossCell: the model sees ids[:, :-1], scored against ids[:, 1:]
            x_ids, labels, T = ids[:, :-1], ids[:, 1:], ids.shape[1] - 1
            x = s.tok_embeddings(x_ids)
            mask = torch.triu(torch.full((T, T), -1e9), 1)
            for l in s.layers: x = l(x, s.cos[:T], s.sin[:T], mask)
            x = s.norm_out(x)
            logits = x @ s.tok_embeddings.weight.t() if s.lm_head is None else s.lm_head(x)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)

    return Model(cfg)


def _ms_to_torch_name(n):
    return {'model.tok_embeddings.embedding_weight': 'tok_embeddings.weight', 'lm_head.weight': 'lm_head.weight',
            'model.norm_out.weight': 'norm_out.weight'}.get(n, n.removeprefix('model.'))


# MindSpore settings tried on the tiny size (the `--variants` table): name → what it changes
VARIANTS = {
    'baseline': 'train_llm as shipped: GRAPH mode, jit_level default (O0), log_softmax + gather loss, model on ids[:, :-1]',
    'jit_level O1': "ms.set_context(jit_config={'jit_level': 'O1'})",
    'runtime threads 1': 'ms.set_context(runtime_num_threads=1)',
    'loss: ops.cross_entropy': 'train_llm.causal_nll computed with ops.cross_entropy(ignore_index=-100)',
    'rope as matmul': 'rotate_half(x) as x @ R (R a fixed signed permutation) instead of two slices, a negation and a concat',
    'scale q before QKᵀ': 'q * (1/√d) on [B, heads, T, d] before the score matmul, instead of the scores [B, heads, T, T] after it',
    'fused QKV and gate/up': 'one matmul for wq/wk/wv and one for w1/w3 (weights concatenated in the step, outputs split)',
    'mask: masked_fill': 'the causal mask applied with ops.masked_fill(scores, k > q, -1e9) instead of adding a [T, T] float mask',
    'compile cache': 'ms.set_context(enable_compile_cache=True, compile_cache_path=...): the second and later processes load the compiled graph',
    'data sink': 'batches fed through ms.data_sink(step, dataset) from a GeneratorDataset, instead of a Tensor passed to the step cell',
    'logits for every position (before)': 'the model runs on all of ids and the loss drops the last position (logits[:, :-1]); shipped until 2026-11-30',
    'reductions by autodiff (before)': "RMSNorm's mean with ops.mean, the softmax's and RMSNorm's gradients by autodiff (ReduceSum), the clipping norm as "
                                       'ops.square(g).sum(), instead of sums as matmuls with a ones vector; shipped until 2026-12-02',
    'fused flat AdamW': 'one AdamWeightDecay call per decay group over a flat buffer (gradients concatenated, parameters split back: '
                        'bench/probes/optimizer_flat.py) instead of one per parameter tensor',
    'AdamW through the Adam kernel': "each matrix scaled by 1 − lr·wd (Mul, Assign), then MindSpore's Adam kernel with bias correction off, instead of "
                                 'AdamWeightDecay, whose CPU kernel takes about 4x as long (bench/probes/adam_cpu.py); the same update up to rounding',
    'fused RMSNorm (ops.Custom)': "RMSNorm's forward and its gradient each one C++ kernel (ops.Custom, CPU AOT, built with g++: "
                                  'bench/probes/rmsnorm_custom.py) instead of about 7 and 13 MindSpore kernels',
    'operands broadcast first': "ops.broadcast_to before each Mul/Add/Sub whose other operand is broadcast (RMSNorm's weight and 1/rms, the "
                                "rotary tables, the causal mask, the softmax gradient's row sums): bench/probes/mul_cpu.py's slow broadcast Mul",
}


def _training_attention(scores, ops, M):
    "model.Attention.construct's training path (no cache, no GQA), its pre-softmax scores from scores(self, q, k, mask)."
    def attention(self, x, cos, sin, mask, past_k=None, past_v=None):
        B, T, _ = x.shape
        q = self.wq(x).reshape(B, T, self.nh, self.hd).swapaxes(1, 2)
        k = self.wk(x).reshape(B, T, self.nkv, self.hd).swapaxes(1, 2)
        v = self.wv(x).reshape(B, T, self.nkv, self.hd).swapaxes(1, 2)
        q, k = q * cos + M.rotate_half(q) * sin, k * cos + M.rotate_half(k) * sin
        y = ops.matmul(ops.softmax(scores(self, q, k, mask), -1), v).swapaxes(1, 2).reshape(B, T, self.nh * self.hd)
        return self.wo(y), k, v
    return attention


def _broadcast_first(ms, ops):
    "The `operands broadcast first` variant: model/llama.py's RMSNorm, softmax gradient and attention with every broadcast operand expanded first."
    import msllm_nb.model.llama as M
    ex = lambda t, like: ops.broadcast_to(t, like.shape)
    def norm(self, x):
        r = ops.rsqrt(M.row_sum(ops.square(x)) / x.shape[-1] + self.eps)
        return x * ex(r, x), r
    def rms(self, x, w):
        xn = self._norm(x)[0].astype(w.dtype)
        return ex(w, xn) * xn
    def rms_bprop(self, x, w, out, dout):
        D = x.shape[-1]; n = x.size // D
        xn, r = self._norm(x.astype(ms.float32)); d = dout.astype(ms.float32)
        dw = ops.matmul(ops.ones((1, n), ms.float32), (d * xn).reshape(n, D)).reshape(D)
        g = d * ex(w.astype(ms.float32), d)
        return ex(r, g) * (g - xn * ex(M.row_sum(g * xn) / D, g)), dw.astype(self.w_dtype)
    def softmax_bprop(self, x, out, dout): return ((out * (dout - ex(M.row_sum(dout * out), out))).astype(self.dtype),)
    def attention(self, x, cos, sin, mask, past_k=None, past_v=None):  # the training path (no cache, no GQA)
        B, T, _ = x.shape
        q = self.wq(x).reshape(B, T, self.nh, self.hd).swapaxes(1, 2)
        k = self.wk(x).reshape(B, T, self.nkv, self.hd).swapaxes(1, 2)
        v = self.wv(x).reshape(B, T, self.nkv, self.hd).swapaxes(1, 2)
        q = q * ex(cos, q) + M.rotate_half(q) * ex(sin, q)
        k = k * ex(cos, k) + M.rotate_half(k) * ex(sin, k)
        att = self.qk(q, k) * self.scale
        att = self.softmax(att + ex(mask, att))
        return self.wo(ops.matmul(att, v).swapaxes(1, 2).reshape(B, T, self.nh * self.hd)), k, v
    M._RMSNormCore._norm, M._RMSNormCore.construct, M._RMSNormCore.bprop = norm, rms, rms_bprop
    M.Softmax.bprop, M.Attention.construct = softmax_bprop, attention


def _apply_variant(variant):
    if ' + ' in variant:  # a combination: each part in turn
        for v in variant.split(' + '): _apply_variant(v)
        return
    import mindspore as ms
    from mindspore import ops
    import msllm_nb.train_llm as T
    if variant == 'jit_level O1': ms.set_context(jit_config={'jit_level': 'O1'})
    elif variant == 'graph kernel fusion': ms.set_context(enable_graph_kernel=True)
    elif variant.startswith('runtime threads'): ms.set_context(runtime_num_threads=int(variant.split()[-1]))
    elif variant == 'loss: ops.cross_entropy':
        def causal_nll(logits, labels, ignore_index=-100):
            return ops.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=ignore_index)
        T.causal_nll = causal_nll  # what LossCell and CausalLMLoss call
    elif variant == 'rope as matmul':
        import numpy as np, msllm_nb.model.llama as M
        def rotation(hd):  # x @ R == cat(-x[..., h:], x[..., :h])
            h = hd // 2; R = np.zeros((hd, hd), np.float32)
            R[np.arange(h) + h, np.arange(h)] = -1; R[np.arange(h), np.arange(h) + h] = 1
            return ms.Tensor(R)
        M._ROT = rotation(64)  # the head_dim of the tiny size
        def rotate_half(x): return ops.matmul(x, M._ROT)
        M.rotate_half = rotate_half
    elif variant == 'scale q before QKᵀ':
        import msllm_nb.model.llama as M
        def scores(self, q, k, mask): return self.qk(q * self.scale, k) + mask
        M.Attention.construct = _training_attention(scores, ops, M)
    elif variant == 'fused QKV and gate/up':
        import msllm_nb.model.llama as M
        def attention(self, x, cos, sin, mask, past_k=None, past_v=None):
            B, T, _ = x.shape
            w = ops.cat((self.wq.weight, self.wk.weight, self.wv.weight), 0)
            q, k, v = ops.split(ops.matmul(x, w.T), [self.nh * self.hd, self.nkv * self.hd, self.nkv * self.hd], -1)
            q = q.reshape(B, T, self.nh, self.hd).swapaxes(1, 2)
            k = k.reshape(B, T, self.nkv, self.hd).swapaxes(1, 2)
            v = v.reshape(B, T, self.nkv, self.hd).swapaxes(1, 2)
            q, k = q * cos + M.rotate_half(q) * sin, k * cos + M.rotate_half(k) * sin
            att = self.qk(q, k) * self.scale + mask
            y = ops.matmul(ops.softmax(att, -1), v).swapaxes(1, 2).reshape(B, T, self.nh * self.hd)
            return self.wo(y), k, v
        def ffn(self, x):
            g, u = ops.split(ops.matmul(x, ops.cat((self.w1.weight, self.w3.weight), 0).T), [self.w1.weight.shape[0]] * 2, -1)
            return self.w2(ops.silu(g) * u)
        M.Attention.construct, M.FeedForward.construct = attention, ffn
    elif variant == 'mask: masked_fill':
        import msllm_nb.model.llama as M
        def scores(self, q, k, mask): return ops.masked_fill(self.qk(q, k) * self.scale, mask < 0, -1e9)
        M.Attention.construct = _training_attention(scores, ops, M)
    elif variant == 'compile cache':  # measure_variants names a folder shared by the repetitions
        ms.set_context(enable_compile_cache=True, compile_cache_path=os.environ['MSLLM_BENCH_COMPILE_CACHE'])
    elif variant == 'reductions by autodiff (before)':
        import msllm_nb.model.llama as M, msllm_nb.train.step as TS
        def rms(self, x):
            xf = x.astype(ms.float32)
            return self.weight * (xf * ops.rsqrt(ops.mean(ops.square(xf), -1, keep_dims=True) + self.eps)).astype(x.dtype)
        def clip_by_global_norm(grads, clip):
            norm = ops.sqrt(ops.addn([ops.square(g).sum() for g in grads]))
            scale = clip / ops.maximum(norm, clip) if clip > 0 else ops.ones_like(norm)
            return tuple([g * scale.astype(g.dtype) for g in grads]), norm
        M.RMSNorm.construct, TS.clip_by_global_norm = rms, clip_by_global_norm
        del M.Softmax.bprop  # autodiff differentiates ops.softmax
    elif variant == 'fused flat AdamW':
        from optimizer_flat import flat_adamw  # (bench/probes is on the spawned worker's path)
        T.make_optimizer = lambda model, **kw: flat_adamw(model, **kw)
    elif variant == 'AdamW through the Adam kernel':
        from adam_cpu import adamw_by_adam  # (bench/probes is on the spawned worker's path)
        T.make_optimizer = lambda model, **kw: adamw_by_adam(model, **kw)
    elif variant == 'fused RMSNorm (ops.Custom)':
        import msllm_nb.model.llama as M
        from rmsnorm_custom import fused_core  # (bench/probes is on the spawned worker's path)
        M._RMSNormCore = fused_core  # what RMSNorm.__init__ builds its core with
    elif variant == 'operands broadcast first':
        _broadcast_first(ms, ops)
    elif variant == 'logits for every position (before)':
        def construct(self, ids): return self.loss_fn(self.model(ids), ids)  # CausalLMLoss slices the last position off
        T.LossCell.construct = construct


def worker(fw, fields, batch, seq, weights, conn, variant='baseline', warmup=WARMUP):
    """One framework's training step on one size: compiles (the first step), runs `warmup` timed warm-up steps, then
    waits for 'run n' commands and answers with the per-step seconds."""
    os.environ.setdefault('GLOG_v', '3')
    import numpy as np
    from msllm_nb.model.llama import LlamaConfig
    from msllm_nb.train_llm import flops_per_token
    cfg = LlamaConfig(**fields, max_position_embeddings=max(SEQS))
    ids = np.random.default_rng(1).integers(3, cfg.vocab_size, (batch, seq)).astype(np.int32)
    def setup():
        if fw == 'ms':
            import mindspore as ms
            ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE); ms.set_seed(0)
            _apply_variant(variant)
            model, step_cell, step = _ms_step(cfg, ids)
            init = {p.name: p.asnumpy() for p in model.get_parameters()}
            np.savez(weights, **{_ms_to_torch_name(k): v for k, v in init.items()})
            if 'data sink' in variant.split(' + '):
                import mindspore.dataset as ds
                class Same:  # the same batch every step, as a random-access source of known length
                    def __len__(self): return 10 ** 4
                    def __getitem__(self, i): return (ids,)
                data = ds.GeneratorDataset(Same(), ['input_ids'], shuffle=False)
                sink = ms.data_sink(step_cell, data, sink_size=1)
                def step(): return float(sink()[0].asnumpy())
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
        return step, first, warm
    try: step, first, warm = setup()
    except Exception as e:  # e.g. a setting this backend refuses: the table shows the message
        conn.send({'error': f'{type(e).__name__}: {e}'.splitlines()[0][:300]}); return
    curve = []
    for _ in range(warmup):
        t0 = time.perf_counter(); step(); curve.append(time.perf_counter() - t0)
    conn.send({'first_loss': first, 'warmup_s': warm, 'warmup_times': curve, 'threads': _threads(fw),
               'flops_per_token': flops_per_token(cfg, seq)})
    while True:
        cmd = conn.recv()
        if cmd == 'profile': conn.send(_profile(fw, step)); continue
        if cmd == 'stop': break
        times, c0 = [], _cpu_s()
        for _ in range(cmd):
            t0 = time.perf_counter(); last = step(); times.append(time.perf_counter() - t0)
        conn.send({'times': times, 'cpu_s': _cpu_s() - c0, 'last_loss': last})  # CPU seconds of all the process's threads over these steps


def _ms_step(cfg, ids):
    "A shipped MindSpore training step (`TrainStep`, GRAPH mode) on a fresh model seeded 0: (model, step cell, step function)."
    import mindspore as ms
    from msllm_nb.model.llama import LlamaForCausalLM
    from msllm_nb.train_llm import LossCell, TrainStep, make_optimizer
    ms.set_seed(0)
    model = LlamaForCausalLM(cfg)
    step_cell = TrainStep(LossCell(model), make_optimizer(model, lr=1e-3, min_lr=1e-4, warmup_steps=10, total_steps=100000))
    step_cell.set_train(); x = ms.Tensor(ids)
    return model, step_cell, lambda: float(step_cell(x)[0].asnumpy())


def pair_worker(fields, batch, seq, warmup, steps, reps, conn):
    """Method 3 of `--methods`: two MindSpore step cells compiled side by side in ONE process, their turns alternating
    (no process start, no other framework on the machine); answers each cell's per-step seconds."""
    os.environ.setdefault('GLOG_v', '3')
    import numpy as np, mindspore as ms
    from msllm_nb.model.llama import LlamaConfig
    ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
    cfg = LlamaConfig(**fields, max_position_embeddings=max(SEQS))
    ids = np.random.default_rng(1).integers(3, cfg.vocab_size, (batch, seq)).astype(np.int32)
    cells = [_ms_step(cfg, ids)[2], _ms_step(cfg, ids)[2]]
    for c in cells: c()  # compile
    for _ in range(warmup):
        for c in cells: c()
    times = [[], []]
    for r in range(reps):
        for k in ((0, 1) if r % 2 == 0 else (1, 0)):
            for _ in range(steps):
                t0 = time.perf_counter(); cells[k](); times[k].append(time.perf_counter() - t0)
    conn.send(times)


def measure_methods(steps, reps, warmup=WARMUP):
    """The same step (tiny size, 8 × 256) measured four ways, one after the other: (1) the committed method, each turn a
    fresh process with warm-up; (2) two live processes taking turns (SIGSTOP); (3) one process holding two MindSpore
    step cells; (4) for contrast, fresh processes timing 3 steps right after compiling (no warm-up)."""
    import train_throughput as H
    (fields, batch), seq = SIZES[next(iter(SIZES))], max(SEQS)
    out = {'fresh processes, after warm-up (the committed method)': measure('tiny', fields, batch, seq, steps, reps, fresh=True, warmup=warmup),
           'two live processes taking turns (SIGSTOP)': measure('tiny', fields, batch, seq, steps, reps, fresh=False, warmup=warmup)}
    ctx = mp.get_context('spawn'); a, b = ctx.Pipe()
    p = ctx.Process(target=H.pair_worker, args=(fields, batch, seq, warmup, steps, reps, b)); p.start(); b.close()
    times = a.recv(); p.join(60)
    out['one process, two MindSpore step cells alternating'] = {'ms': {'times': times[0]}, 'ms2': {'times': times[1]}}
    out['fresh processes, 3 steps right after compiling (no warm-up)'] = measure('tiny', fields, batch, seq, 3, reps, fresh=True, warmup=0)
    return out, batch, seq


def methods_table(out, batch, seq, reps):
    "The methods' MindSpore and PyTorch ms per step with the spread of their turns, and whether the steady-state ones agree."
    rows = ['| method | MindSpore ms/step (turns) | PyTorch ms/step (turns) | MS ÷ PT (turns) |', '|---|---|---|---|']
    spans = {}
    for name, r in out.items():
        med = {fw: [statistics.median(x) * 1e3 for x in _reps(v['times'], reps)] for fw, v in r.items()}
        ms_all = med['ms'] + med.get('ms2', [])
        spans[name] = (min(ms_all), max(ms_all))
        cell = lambda xs: f"{statistics.median(xs):.0f} ({min(xs):.0f}–{max(xs):.0f})"
        ratio = [t / m for t, m in zip(med['torch'], med['ms'])] if 'torch' in med else []
        rows.append(f"| {name} | {cell(ms_all)} | {cell(med['torch']) if 'torch' in med else '—'} | "
                    f"{f'{statistics.median(ratio):.2f} (' + ' / '.join(f'{x:.2f}' for x in ratio) + ')' if ratio else '—'} |")
    steady = list(spans.values())[:3]
    agree = max(lo for lo, _ in steady) <= min(hi for _, hi in steady)
    return '\n'.join(rows) + (f"\n\nTiny size, {batch} × {seq}; medians of each turn's steps ({reps} turns per side; the one-process method "
                              "counts each of its two cells' turns). The steady-state methods (the first three) "
                              + ('agree: their MindSpore turn ranges overlap.' if agree else 'do not agree: their MindSpore turn ranges do not all overlap.')
                              + ' The last row is what timing a fresh process without warm-up reads.')


def _cpu_s():
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime


# the matrix-multiply kernels of each side's profile (the rest is elementwise, reductions, layout, softmax, optimizer)
MATMUL_OPS = {'ms': {'MatMul', 'BatchMatMul', 'MatMulExt', 'BatchMatMulExt', 'Dense'},
              'torch': {'aten::mm', 'aten::bmm', 'aten::addmm', 'aten::baddbmm'}}


def _profile(fw, step, steps=3):
    """Operator time per step by operator type: MindSpore's profiler (train_llm.profile_steps) or torch.profiler (self CPU
    time); the top 10, the total and the matmul kernels' part of it."""
    if fw == 'ms':
        from msllm_nb.train_llm import profile_steps
        with tempfile.TemporaryDirectory() as d:
            r = profile_steps(step, d, steps=steps, warmup=0, top=10 ** 6)
        ev, total = [(o['op'], o['ms_per_step']) for o in r['ops']], r['op_ms_per_step']
        kernels = sum(o['kernels_per_step'] for o in r['ops'])
    else:
        import torch
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(steps): step()
        ev = sorted(((e.key, e.self_cpu_time_total / 1e3 / steps) for e in prof.key_averages() if not e.key.startswith('ProfilerStep')),
                    key=lambda kv: -kv[1])
        total = sum(t for _, t in ev)
        kernels = torch_kernels(prof, steps)
    out = {'ops': [(k, t, t / total) for k, t in ev[:10]], 'total_ms': total, 'kernels': kernels, 'by_op': dict(ev),
           'matmul_ms': sum(t for k, t in ev if k in MATMUL_OPS[fw])}
    if fw != 'ms':  # PyTorch's whole AdamW update: the record around it, its operators included (total, not self, time)
        out['by_op']['AdamW update'] = sum(e.cpu_time_total for e in prof.key_averages() if e.key.startswith('Optimizer.step')) / 1e3 / steps
    return out


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


def _reps(times, reps):
    "The per-step times split back into their repetitions."
    n = len(times) // reps
    return [times[i * n:(i + 1) * n] for i in range(reps)]


def measure_variants(steps, reps, only=None, warmup=WARMUP, size=None):
    """MindSpore tok/s of each VARIANTS entry on the tiny size (or `size`) at seq 256. Each turn is a fresh process, alone on the
    machine (compile, 2 warm-up steps, then `steps` timed steps); the order is reversed every other repetition.
    An earlier version kept all variants alive and took turns with SIGSTOP, like `measure`: there the first-started
    process (the baseline) came out 1.1-1.7x slower than every variant, while fresh processes ranked it first."""
    (fields, batch), seq = SIZES[size or next(iter(SIZES))], max(SEQS)
    names = ['baseline', *[v for v in only if v != 'baseline']] if only else list(VARIANTS)
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ['MSLLM_BENCH_COMPILE_CACHE'] = str(Path(tmp) / 'compile_cache')  # spawned workers inherit it
        for r in range(reps):
            for v in (names if r % 2 == 0 else names[::-1]):
                if 'error' in res.get(v, {}): continue
                try: info = _fresh_turn('ms', fields, batch, seq, str(Path(tmp) / 'w.npz'), steps, variant=v, warmup=warmup)
                except RuntimeError as e: res[v] = {'error': str(e)}; continue
                got = res.setdefault(v, {**info, 'times': [], 'warmups': []})
                got['times'] += info['times']; got['warmups'].append(info['warmup_s'])
    return res, batch * seq


def _fresh_turn(fw, fields, batch, seq, weights, steps, extra=(), variant='baseline', warmup=WARMUP):
    "One fresh worker process, alone on the machine: compile and warm up, time `steps` steps, answer `extra` commands, stop."
    import train_throughput as H
    ctx = mp.get_context('spawn')
    a, b = ctx.Pipe()
    p = ctx.Process(target=H.worker, args=(fw, fields, batch, seq, weights, b, variant, warmup))  # not daemonic: the profiler's analysis starts children
    p.start(); b.close()  # only the child holds its end: a dead child is an EOFError here
    try: info = a.recv()
    except EOFError:
        p.join(30); raise RuntimeError(f'the process died during compile/warm-up (exit code {p.exitcode})') from None
    if 'error' in info: p.join(30); raise RuntimeError(info['error'])
    a.send(steps); info.update(a.recv())
    for cmd in extra: a.send(cmd); info[cmd] = a.recv()
    a.send('stop'); p.join(60)
    return info


def measure(name, fields, batch, seq, steps, reps, profile=False, fresh=False, warmup=WARMUP):
    import train_throughput as H  # this file as a module: spawned children import `worker` by name
    ctx = mp.get_context('spawn')
    with tempfile.TemporaryDirectory() as tmp:
        weights = str(Path(tmp) / 'init.npz')
        if fresh:  # every turn a new process; MindSpore first: it writes the initial weights the PyTorch side loads
            res = {}
            for r in range(reps):
                for fw in (('ms', 'torch') if r % 2 == 0 else ('torch', 'ms')):
                    info = _fresh_turn(fw, fields, batch, seq, weights, steps, ('profile',) if r == 0 and profile else (), warmup=warmup)
                    got = res.setdefault(fw, {**info, 'times': [], 'cpu_s': 0.0, 'curves': []})
                    got['times'] += info['times']; got['cpu_s'] += info['cpu_s']; got['curves'].append(info['warmup_times'])
            return res
        res, procs, conns = {}, {}, {}
        for fw in ('ms', 'torch'):  # MindSpore first: it writes the initial weights the PyTorch side loads
            a, b = ctx.Pipe()
            procs[fw] = ctx.Process(target=H.worker, args=(fw, fields, batch, seq, weights, b, 'baseline', warmup), daemon=True)
            procs[fw].start(); conns[fw] = a; b.close()
            res[fw] = conns[fw].recv(); res[fw].update(times=[], cpu_s=0.0, curves=[res[fw]['warmup_times']])
        for r in range(reps):  # alternate, starting side swapped each repetition
            for fw in (('ms', 'torch') if r % 2 == 0 else ('torch', 'ms')):
                got = _turn(conns, procs, fw, steps)
                res[fw]['times'] += got['times']; res[fw]['cpu_s'] += got['cpu_s']
        for fw in ('ms', 'torch'):
            if profile: res[fw]['profile'] = _turn(conns, procs, fw, 'profile')
            conns[fw].send('stop'); procs[fw].join(60)
    return res


def _gap(split, least=0.05):
    "MindSpore minus PyTorch per part of the step; each part's share of the whole gap only where that gap is at least `least` of PyTorch's step."
    whole = split['ms'][0] - split['torch'][0]
    share = (lambda d: f' ({d / whole:.0%})') if abs(whole) >= least * split['torch'][0] else (lambda d: '')
    return ' / '.join(f'{m - t:+.0f} ms{share(m - t)}' for m, t in zip(split['ms'][1:], split['torch'][1:]))


def time_split(profiles):
    """Each side's step (median wall time) split into matmul kernels, other kernels and time
    outside any kernel (wall minus the profiler's operator total), and how many cores its threads kept busy."""
    rows = ['### Where a step\'s time goes, side by side', '',
            '| model | batch × seq | side | step ms | kernels per step | matmul kernels ms | other kernels ms | outside kernels ms | cores busy | '
            'MindSpore minus PyTorch per step: matmul / other kernels / outside kernels |', '|---|---|---|---|---|---|---|---|---|---|']
    for label, batch, seq, r in profiles:
        split = {}
        for fw in ('torch', 'ms'):
            wall = statistics.median(r[fw]['times']) * 1e3
            pr = r[fw]['profile']
            split[fw] = (wall, pr['matmul_ms'], pr['total_ms'] - pr['matmul_ms'], wall - pr['total_ms'])
            busy = r[fw]['cpu_s'] / sum(r[fw]['times'])
            gap = '' if fw == 'torch' else _gap(split)
            rows.append(f"| {label} | {batch} × {seq} | {'PyTorch' if fw == 'torch' else 'MindSpore'} | {wall:.0f} | {pr['kernels']:.0f} | {split[fw][1]:.0f} "
                        f"| {split[fw][2]:.0f} | {split[fw][3]:.0f} | {busy:.2f} | {gap} |")
    return '\n'.join(rows) + ('\n\nstep ms: median wall time of the timed steps; kernels: the profiler\'s operator time per step over 3 '
                               'profiled steps (MindSpore: its profiler\'s host kernels; PyTorch: torch.profiler self CPU time); kernels per step: '
                               'the operators launched per step (MindSpore: its profiler\'s kernel count; PyTorch: the profiler\'s leaf '
                               'operators, those that call no other operator); matmul = '
                               f"{', '.join(sorted(MATMUL_OPS['ms']))} / {', '.join(sorted(MATMUL_OPS['torch']))}; outside kernels: step minus "
                               'kernels (graph executor, launches, memory management; negative when profiled kernels ran slower than the '
                               'timed steps); cores busy: CPU time of all the process\'s threads ÷ wall time over the timed steps '
                               f'({os.cpu_count()} cores; spinning pool threads count as busy). The last column splits MindSpore\'s step '
                               'minus PyTorch\'s into the three parts (in brackets, each part\'s share of the gap, where the gap is at least 5 % of PyTorch\'s step).')


# MindSpore CPU kernels found slower than PyTorch's: operator, its PyTorch counterpart(s) in the profile, where it is reproduced alone
SLOW_KERNELS = [
    ('Mul', ('aten::mul',), '`bench/probes/mul_cpu.py` (`bench/results/mul_cpu.md`): slow where one operand is broadcast (the RMSNorm '
                            'weight and 1/rms, the rotary tables); a same-shape Mul is within 2-3x'),
    ('AdamWeightDecay', ('AdamW update',), '`bench/probes/adam_cpu.py` (`bench/results/adam_cpu.md`): one kernel per tensor, many times '
                                           'PyTorch\'s AdamW; MindSpore\'s own Adam kernel does the same update faster. PyTorch\'s side '
                                           'is its whole update, every operator inside `optimizer.step()` (its in-place mul_, sqrt, div...)'),
    ('ReduceSum', ('aten::sum',), '`bench/probes/reduce_sum_cpu.py` (`bench/results/reduce_sum_cpu.md`): the step already routes its hot sums '
                                  'through a matmul with a ones vector; what is left is the loss and small sums'),
    ('Square', ('aten::pow', 'aten::_foreach_norm', 'aten::linalg_vector_norm'),
     'no script of its own: x² in every RMSNorm, and every gradient squared for the clipping norm, where PyTorch squares and '
     'sums each gradient in one kernel (`_foreach_norm`)'),
    ('Transpose', ('aten::copy_', 'aten::clone'), 'no script of its own: PyTorch\'s transposes are views, copied only where an operator '
                                                  'needs contiguous memory (aten::copy_/clone, which also count other copies)'),
]


def why_below(profiles):
    """For each profiled size where MindSpore is below PyTorch: the known slow kernels beside their PyTorch counterparts,
    the matmuls and the time outside kernels, so that the gap is explained kernel by kernel."""
    rows = ['### Why a size stays below 1.0, kernel by kernel', '']
    for label, batch, seq, r in profiles:
        wall = {fw: statistics.median(r[fw]['times']) * 1e3 for fw in ('ms', 'torch')}
        if wall['ms'] <= wall['torch']: continue
        ms_op, pt_op = r['ms']['profile']['by_op'], r['torch']['profile']['by_op']
        rows += [f"{label}, {batch} × {seq}: MindSpore {wall['ms']:.0f} ms per step, PyTorch {wall['torch']:.0f} ms "
                 f"(MindSpore {wall['ms'] - wall['torch']:+.0f} ms).", '',
                 '| MindSpore kernel | ms/step | PyTorch counterpart | ms/step | MindSpore minus PyTorch | reproduced alone |',
                 '|---|---:|---|---:|---:|---|']
        parts = [(k, ms_op.get(k, 0.0), ', '.join(t), sum(pt_op.get(x, 0.0) for x in t), why) for k, t, why in SLOW_KERNELS]
        parts.append(('matmuls', r['ms']['profile']['matmul_ms'], 'matmuls', r['torch']['profile']['matmul_ms'], 'the 1024³ matmul peaks above'))
        rest = {fw: r[fw]['profile']['total_ms'] - sum(x[1 if fw == 'ms' else 3] for x in parts) for fw in ('ms', 'torch')}
        parts.append(('every other kernel', rest['ms'], 'every other operator', rest['torch'], 'StridedSliceGrad, AddN, Add, Sub, the softmax, the loss...: see the top operators below'))
        outside = {fw: wall[fw] - r[fw]['profile']['total_ms'] for fw in ('ms', 'torch')}
        parts.append(('outside kernels', outside['ms'], 'outside kernels', outside['torch'], 'the graph executor launching kernels one by one'))
        rows += [f'| {k} | {m:.1f} | {t} | {p:.1f} | {m - p:+.1f} | {why} |' for k, m, t, p, why in parts] + ['']
    if len(rows) == 2: rows += ['MindSpore is at or above PyTorch at every profiled size: nothing to explain.', '']
    return '\n'.join(rows) + ('\nFrom the same profiled steps as the table above; the rows add up to the whole difference. Every lever that routes '
                              'around these kernels is measured in `bench/results/train_throughput_variants.md` with its steady-state ratio.')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='the tiny size only')
    ap.add_argument('--steps', type=int, default=10, help='timed steps per turn')
    ap.add_argument('--warmup', type=int, default=WARMUP, help='steps after compiling and before timing (their times are the warm-up curve)')
    ap.add_argument('--reps', type=int, default=4, help='turns per framework')
    ap.add_argument('--variants', action='store_true', help='only the table of MindSpore settings tried (tiny size)')
    ap.add_argument('--live', action='store_true', help='two live processes taking turns, instead of every turn in a new process')
    ap.add_argument('--only', default='', help='with --variants: these variants (comma separated) against the baseline, printed only')
    ap.add_argument('--out', default='', help='with --only: also write the table to bench/results/OUT.md')
    ap.add_argument('--sizes', default='', help='comma-separated starts of size names, e.g. tiny,~100M (default: all; --quick: the first; with --variants --only: the one size measured)')
    ap.add_argument('--methods', action='store_true', help='only the table of measuring methods compared (tiny size, 8 × 256)')
    ap.add_argument('--profile', action='store_true', help="also each side's operators (MindSpore profiler, torch.profiler) and where a step's time goes")
    a = ap.parse_args()
    if a.methods:
        out, batch, seq = measure_methods(a.steps, a.reps, a.warmup)
        write_result('train_throughput_methods', 'Training throughput: one step, four ways of measuring it (CPU)', methods_table(out, batch, seq, a.reps)
                     + f' Timed: {a.steps} steps per turn after compiling and {a.warmup} warm-up steps (the last row: 3 steps, none).')
        return
    if a.variants:
        only = [v for v in a.only.split(',') if v]
        unknown = [v for v in only if any(part not in VARIANTS for part in v.split(' + '))]
        if unknown: ap.error(f'--only: unknown variant(s) {unknown}; known: {list(VARIANTS)}')
        size = next((n for n in SIZES if any(n.startswith(w.strip()) for w in a.sizes.split(',') if w.strip())), None)
        if a.sizes and (size is None or not only): ap.error('--sizes with --variants: one known size, and --only (the committed table is the tiny size)')
        res, tok = measure_variants(a.steps, a.reps, only, a.warmup, size)
        base = tok / statistics.median(res['baseline']['times'])
        rows = ['| MindSpore setting | what changes | tok/s | vs baseline | each repetition vs baseline | first-step loss | last step\'s loss | warm-up (compile) s, each repetition |',
                '|---|---|---|---|---|---|---|---|']
        for v in [v for v in VARIANTS if v in res] + [v for v in res if v not in VARIANTS]:
            r, what = res[v], VARIANTS.get(v, 'all of: ' + '; '.join(v.split(' + ')))
            if 'error' in r: rows.append(f'| {v} | {what} | fails: {r["error"]} | | | | | |'); continue
            tps = tok / statistics.median(r['times'])
            per = [statistics.median(b) / statistics.median(t) for b, t in zip(_reps(res['baseline']['times'], a.reps), _reps(r['times'], a.reps))]
            rows.append(f"| {v} | {what} | {tps:.0f} | {tps / base:.2f} | {' / '.join(f'{x:.2f}' for x in per)} | {r['first_loss']:.5f} | {r['last_loss']:.5f} "
                        f"| {' / '.join(f'{w:.0f}' for w in r['warmups'])} |")
        if only and not a.out: print('\n'.join(rows)); return  # a partial table is not the committed one
        if only:
            shape = f'{size or next(iter(SIZES))}, {SIZES[size or next(iter(SIZES))][1]} × {max(SEQS)}'
            write_result(a.out, f'Training throughput: {", ".join(only)} against the shipped step ({shape}, CPU)',
                         '\n'.join(rows) + f'\n\nEach variant in a fresh process, alone on the machine, order reversed every other repetition: '
                         f'median of {a.reps} repetitions × {a.steps} steps each, after compile and {a.warmup} warm-up steps.')
            return
        write_result('train_throughput_variants', 'Training throughput: MindSpore settings tried (tiny size, 8 × 256, CPU)',
                     '\n'.join(rows) + f'\n\nEach variant in a fresh process, alone on the machine, order reversed every other repetition: median of {a.reps} repetitions × {a.steps} steps each, after compile and {a.warmup} warm-up steps. '
                     f'Every step trains on the same batch; the last step\'s loss is that of step {1 + a.warmup + a.steps} of the first repetition (a setting that changes what is computed shows there). '
                     'A repetition\'s ratio moves by up to ±0.2 between repetitions and runs on this machine, so a '
                     'setting counts as a win only if every repetition of every run shows one. Rotary as a matmul, which won three earlier runs (1.09, '
                     '1.09, 1.18), was then timed against the slices inside one process, both step cells compiled side by side and their steps '
                     'alternating (20 each, tiny size, 8 × 256, 2026-12-01): slices 515 ms per step, matmul 518, no difference, so it is not shipped.'
                     '\n\nNot in the table: graph kernel fusion (`enable_graph_kernel=True`). Its AKG kernel compiler imports `decorator`, '
                     'which the mindspore wheel does not install, and the process dies in compile. With `decorator` on the path it compiles and runs, '
                     'but slower than the baseline (2.26 s against 1.55 s per step, one after the other while another job ran, 2026-11-30).')
        return
    rows = ['| model | batch × seq | PyTorch eager tok/s | MindSpore GRAPH tok/s | ratio MS ÷ PT | ratio, each repetition | MFU PT | MFU MS '
            '| first-step loss PT / MS | MS compile s |', '|---|---|---|---|---|---|---|---|---|---|']
    curves = ['### Warm-up: step time after compiling', '', 'Median over the turns of each warm-up step\'s time (ms), then the '
              'timed steps\' median (the steady state the table reports).', '',
              '| model | batch × seq | side | warm-up steps, ms | steady ms |', '|---|---|---|---|---|']
    want = [w.strip() for w in a.sizes.split(',') if w.strip()]
    if unknown := [w for w in want if not any(n.startswith(w) for n in SIZES)]: ap.error(f'--sizes: no size starts with {unknown}; sizes: {list(SIZES)}')
    sizes = ([(n, f) for n, f in SIZES.items() if any(n.startswith(w) for w in want)] if want else
             list(SIZES.items())[:1] if a.quick else list(SIZES.items()))
    profiles, capped = [], []
    from msllm_nb.model.llama import LlamaConfig, param_count
    peak = machine_peaks(); top = max(peak.values())
    for name, (fields, batch) in sizes:
        label = f'{name}, {param_count(LlamaConfig(**fields)) / 1e6:.1f}M params'
        reps, steps, warmup = (min(x, cap) for x, cap in zip((a.reps, a.steps, a.warmup), BUDGET.get(name, (math.inf,) * 3)))
        if (reps, steps, warmup) != (a.reps, a.steps, a.warmup): capped.append(f'{name}: {reps} turns × {steps} steps after {warmup} warm-up steps')
        for seq in SEQS:
            r = measure(name, fields, batch, seq, steps, reps, a.profile, not a.live, warmup)
            if 'profile' in r['ms']: profiles.append((label, batch, seq, r))
            tok = batch * seq
            tps = {fw: tok / statistics.median(r[fw]['times']) for fw in r}
            mfu = {fw: r[fw]['flops_per_token'] * tps[fw] / top for fw in r}
            per = [statistics.median(p) / statistics.median(m) for p, m in zip(_reps(r['torch']['times'], reps), _reps(r['ms']['times'], reps))]
            rows.append(f"| {label} | {batch} × {seq} | {tps['torch']:.0f} | {tps['ms']:.0f} | {tps['ms'] / tps['torch']:.2f} "
                        f"| {' / '.join(f'{x:.2f}' for x in per)} | {mfu['torch']:.1%} | {mfu['ms']:.1%} "
                        f"| {r['torch']['first_loss']:.5f} / {r['ms']['first_loss']:.5f} | {r['ms']['warmup_s']:.0f} |")
            for fw in ('torch', 'ms'):
                curve = [statistics.median(c) * 1e3 for c in zip(*r[fw]['curves'])]
                curves.append(f"| {label} | {batch} × {seq} | {'PyTorch' if fw == 'torch' else 'MindSpore'} | "
                              f"{' '.join(f'{c:.0f}' for c in curve)} | {statistics.median(r[fw]['times']) * 1e3:.0f} |")
            print(rows[-1], flush=True)
    peaks = (f"MFU against the machine's peak, {top / 1e9:.0f} GFLOP/s: the better of the two frameworks' 1024³ fp32 matmul "
             f"(PyTorch {peak['torch'] / 1e9:.0f}, MindSpore {peak['ms'] / 1e9:.0f} GFLOP/s, each in a fresh process)")
    threads = f"threads: PyTorch {r['torch']['threads']}, MindSpore runtime_num_threads {r['ms']['threads']}"
    how = 'two live processes, the idle one stopped with SIGSTOP' if a.live else 'each turn a fresh process'
    body = '\n'.join(rows) + (f'\n\nMedian of {a.reps} turns × {a.steps} steps per side, alternating ({how}), after compiling and '
                              f'{a.warmup} warm-up steps{" (" + "; ".join(capped) + ")" if capped else ""}; "each repetition" is the ratio '
                              'of each turn pair\'s medians (the spread). fp32; '
                              f'same initial weights and batch. {peaks}; {threads}.\n\n' + '\n'.join(curves))
    if profiles: body += '\n\n' + time_split(profiles) + '\n\n' + why_below(profiles)
    for label, batch, seq, r in profiles:  # where each framework spends the step, by operator type
        if seq != max(SEQS): continue
        body += (f"\n\n### Top operators: {label}, {batch} × {seq}\n\nOperator time per step: MindSpore {r['ms']['profile']['total_ms']:.0f} ms "
                 f"(its profiler, host kernels), PyTorch {r['torch']['profile']['total_ms']:.0f} ms (torch.profiler, self CPU time).\n\n"
                 '| # | MindSpore operator | ms/step | share | PyTorch operator | ms/step | share |\n|---|---|---|---|---|---|---|\n')
        body += '\n'.join(f'| {i + 1} | {m[0]} | {m[1]:.1f} | {m[2]:.1%} | {t[0]} | {t[1]:.1f} | {t[2]:.1%} |'
                           for i, (m, t) in enumerate(zip(r['ms']['profile']['ops'], r['torch']['profile']['ops'])))
    part = ('_' + '_'.join(re.sub(r'[^a-z0-9]+', '', n.split()[0].lower()) for n, _ in sizes)) if want else ''  # a partial table of its own
    write_result('train_throughput' + ('_quick' if a.quick else '') + ('_live' if a.live else '_fresh') + part,
                 'Training throughput: MindSpore vs PyTorch eager on CPU', body)


if __name__ == '__main__':
    main()
