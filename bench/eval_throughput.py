"""Log-likelihood scoring throughput (chapter 09): the harness's requests scored by `MsllmLM` (MindSpore, GRAPH mode) and
by the harness's own `hf` model (transformers, PyTorch eager), on SmolLM2-135M, fp32, CPU, in one run.

The same requests on both sides: the held-out English and Chinese continuation items of the course's tasks (context +
each of 4 choices) and 256-token rolling windows of held-out documents, both through the model's `_loglikelihood_tokens`,
which sorts and batches them as the harness does. Each side runs in a fresh process of its own, the two alternating,
REPS times; in each process the request set is scored once to warm up (MindSpore compiles a graph per padded length
there), then timed WARM times. Reported: scored tokens per second (context and continuation, every position the model
computes for), the median of the runs and their range.

    python bench/eval_throughput.py        # prints the table and writes bench/results/eval_throughput.md
"""
import os, statistics, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _report import write_result  # noqa: E402
REPS, WARM, BATCH, MAX_LEN = 2, 2, 8, 256


def requests(tok_path):
    "(None, context ids, continuation ids) requests of the course's tasks, tokenized once (the same lists go to both sides)."
    import json
    from msllm_nb.corpus.bpe import load_tokenizer
    from msllm_nb.eval.lm import heldout_documents
    from msllm_nb.eval.tasks import build_tasks
    from msllm_nb.corpus.shards import sample_tokens
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
    tok, clean = load_tokenizer(tok_path), sample_tokens().parent / 'clean'
    with tempfile.TemporaryDirectory() as d:
        build_tasks([clean], d, n=16)
        items = [json.loads(l) for t in ('msllm_cont_en', 'msllm_cont_zh') for l in (Path(d) / f'{t}.jsonl').read_text().splitlines()]
    reqs = []
    for it in items:
        ctx = tok.encode(it['context'])
        reqs += [(None, ctx, tok.encode(it['context'] + c)[len(ctx):]) for c in it['choices']]
    docs = [t for g in ('en_wiki', 'zh_news') for t in heldout_documents([clean])[g][:6]]
    for t in docs:
        reqs += [(None, *w) for w in map(make_disjoint_window, get_rolling_token_windows(tok.encode(t), tok.bos_id, MAX_LEN, 1))]
    return [r for r in reqs if r[2]]


def timed(lm, reqs):
    lm._loglikelihood_tokens(reqs, disable_tqdm=True)  # warm-up: MindSpore compiles one graph per padded length here
    times = []
    for _ in range(WARM):
        t0 = time.perf_counter(); lm._loglikelihood_tokens(reqs, disable_tqdm=True); times.append(time.perf_counter() - t0)
    return min(times)


def ms_side(hf_dir, reqs):
    os.environ.setdefault('GLOG_v', '3')
    import mindspore as ms
    ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
    from msllm_nb.eval.lm import MsllmLM
    return timed(MsllmLM(hf_dir, batch_size=BATCH, max_length=MAX_LEN, bucket=128), reqs)


def ms_modes(hf_dir, mode):
    "One padded batch per length, twice: the first call (GRAPH: the compile) and the next, and the process's memory after."
    os.environ.setdefault('GLOG_v', '3')
    import mindspore as ms
    ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE if mode == 'graph' else ms.PYNATIVE_MODE)
    from msllm_nb.eval.lm import MsllmLM, _logprobs
    lm, out = MsllmLM(hf_dir, batch_size=BATCH, max_length=MAX_LEN, bucket=128), {}
    rss = lambda: int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0]) / 2**20
    for L in (128, 256):
        rows = [(list(range(5, 5 + L - 3)), [7, 8])] * BATCH
        t0 = time.perf_counter(); _logprobs(lm, rows); first = time.perf_counter() - t0
        t0 = time.perf_counter(); _logprobs(lm, rows); out[L] = (first, time.perf_counter() - t0, rss())
    return out


def hf_side(hf_dir, reqs):
    from lm_eval.models.huggingface import HFLM
    return timed(HFLM(pretrained=hf_dir, dtype='float32', device='cpu', batch_size=BATCH, max_length=MAX_LEN, add_bos_token=False), reqs)


def main():
    import msllm_nb.model.fixtures as fx
    from msllm_nb.core.procs import run_reference
    import eval_throughput as H  # this file as a module: the child processes import the functions by name
    from msllm_nb.corpus.shards import sample_tokens
    sample_tokens()  # built once, here, before any timed process
    hf = run_reference(fx.build_smollm2_hf, str(fx.fixture_dir() / 'smollm2-135m-instruct'))
    reqs = H.requests(hf)
    ntok = sum(min(len(c) + len(x), MAX_LEN + 1) - 1 for _, c, x in reqs)
    runs = {'ms': [], 'pt': []}
    for _ in range(REPS):
        runs['pt'].append(run_reference(H.hf_side, hf, reqs, timeout=1800))
        runs['ms'].append(run_reference(H.ms_side, hf, reqs, timeout=1800))
    rate = {k: [ntok / t for t in v] for k, v in runs.items()}
    med = {k: statistics.median(v) for k, v in rate.items()}
    body = ['| side | scored tokens/s, median (range) |', '|---|---|',
            f"| harness `hf` model (transformers, PyTorch eager) | {med['pt']:.0f} ({min(rate['pt']):.0f}–{max(rate['pt']):.0f}) |",
            f"| `MsllmLM` (MindSpore GRAPH) | {med['ms']:.0f} ({min(rate['ms']):.0f}–{max(rate['ms']):.0f}) |",
            f"| ratio MindSpore ÷ PyTorch | {med['ms'] / med['pt']:.2f} |",
            '', f'{len(reqs)} requests ({ntok} scored token positions): 4-way continuation items of msllm_cont_en/zh (16 each) and '
            f'{MAX_LEN}-token rolling windows of 12 held-out documents; batch {BATCH}; SmolLM2-135M, fp32. Each side in a fresh process, '
            f'alternating, {REPS} processes each; per process one warm-up pass, then the best of {WARM} timed passes.']
    modes = {m: run_reference(H.ms_modes, hf, m, timeout=1800) for m in ('graph', 'pynative')}
    body += ['', '## MindSpore GRAPH against PyNative, SmolLM2-135M', '',
             '| mode | padded batch | first call, s | next call, s | process memory after, GB |', '|---|---|---|---|---|']
    body += [f'| {m} | {BATCH} × {L} | {a:.1f} | {b:.2f} | {r:.1f} |' for m, d in modes.items() for L, (a, b, r) in sorted(d.items())]
    body += ['', 'Each mode in a fresh process; the lengths in order, so the memory column is cumulative. In GRAPH mode the first '
             'call of a length compiles its graph.']
    write_result('eval_throughput', 'Evaluation throughput: log-likelihood scoring, SmolLM2-135M on CPU', '\n'.join(body))


if __name__ == '__main__':
    main()
