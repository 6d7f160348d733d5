"""Cleaning throughput: msllm-clean (every rule on, exact + near dedup, 2 processes) vs the tutorial's clean_text
applied line by line (one process), on the same generated input, in the same run, at two sizes: the difference of the
two sizes separates msllm-clean's per-MB rate (its steady state) from its fixed start-up (starting two workers). A
warm-up run first (the kernels compiled or loaded from their cache), then REPS alternating runs per size: medians,
and the spread.

The input is made from the bundled sample: seeded recombinations of its Chinese and English paragraphs into new
documents (so dedup has real work, not only copies), written as JSON lines.

    python bench/clean_throughput.py [SMALL_MB LARGE_MB REPS]   # default 40 160 5; prints the table, writes bench/results/clean_throughput.md
"""
import json, random, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from _report import write_result  # noqa: E402


def make_input(path, mb):
    import msllm_nb.corpus.clean as C
    paras = {'zh': [], 'en': []}
    for f, dom in (('zh_news.jsonl', 'zh'), ('zh_reviews.txt', 'zh'), ('en_wiki.jsonl', 'en')):
        for d in C.read_documents(C.SAMPLE_DIR / f, C.Tally()):
            paras[dom] += [p for p in d.text.split('\n') if len(p) > 20]
    rng = random.Random(0)
    n = 0
    with open(path / 'zh_gen.jsonl', 'w') as zf, open(path / 'en_gen.jsonl', 'w') as ef:
        while n < mb * 2**20:
            dom = rng.choice(['zh', 'en'])
            text = '\n'.join(rng.choice(paras[dom]) for _ in range(rng.randint(3, 12)))
            line = json.dumps({'text': text}, ensure_ascii=False) + '\n'
            (zf if dom == 'zh' else ef).write(line); n += len(line.encode())
    return n


def time_tutorial(inp, out_file):
    import msllm_nb.corpus.clean as C
    t0 = time.perf_counter()
    with open(out_file, 'w') as out:
        for f in sorted(inp.iterdir()):
            with open(f, encoding='utf-8') as fh:
                for line in fh: out.write(C.tutorial_clean_text(line) + '\n')
    return time.perf_counter() - t0


def time_ours(inp, out_dir):
    import msllm_nb.corpus.clean as C
    t0 = time.perf_counter()
    rep = C.clean_corpus([inp], out_dir, workers=2, progress=False)
    return time.perf_counter() - t0, rep


def main(small=40, large=160, reps=5):
    import statistics
    import msllm_nb.corpus.clean as C
    how = C.start_method()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        inputs = {}
        for mb in (small, large):
            inputs[mb] = tmp / f'in{mb}'; inputs[mb].mkdir()
            inputs[mb] = (inputs[mb], make_input(inputs[mb], mb) / 2**20)
        time_ours(inputs[small][0], tmp / 'warm')  # warm-up: kernels compiled or loaded from their cache, files in the page cache
        t = {(who, mb): [] for who in ('tut', 'ours') for mb in (small, large)}
        for r in range(reps):  # alternating, so that a slow moment of the machine hits both sides
            for mb in (small, large):
                t['tut', mb].append(time_tutorial(inputs[mb][0], tmp / 'tutorial.txt'))
                dt, rep = time_ours(inputs[mb][0], tmp / f'ours{mb}'); t['ours', mb].append(dt)
    med = {k: statistics.median(v) for k, v in t.items()}
    spread = lambda k, mb: f'{mb / max(t[k]):.1f}–{mb / min(t[k]):.1f}'
    (s, _), (l, _) = (inputs[small][1], 0), (inputs[large][1], 0)
    ts, os_, tl, ol = med['tut', small], med['ours', small], med['tut', large], med['ours', large]
    rate_t, rate_o = (l - s) / (tl - ts), (l - s) / (ol - os_)
    lines = ['| input | tutorial `clean_text`, line by line, 1 process (baseline), MB/s | `msllm-clean`, 2 processes, MB/s | ratio |',
             '|---|---|---|---|',
             f'| {s:.0f} MB | {s / ts:.1f} ({spread(("tut", small), s)}) | {s / os_:.1f} ({spread(("ours", small), s)}) | {ts / os_:.2f} |',
             f'| {l:.0f} MB | {l / tl:.1f} ({spread(("tut", large), l)}) | {l / ol:.1f} ({spread(("ours", large), l)}) | {tl / ol:.2f} |',
             f'| per-MB rate (the difference of the two sizes) | {rate_t:.1f} | {rate_o:.1f} | {rate_o / rate_t:.2f} |']
    up = os_ - s / rate_o
    startup = f'fixed start-up about {up:.1f} s' if up > 0.05 else 'fixed start-up within the spread (under 0.1 s)'
    lines.append(f"\nMedians of {reps} alternating runs per size after a warm-up run (min–max in brackets). "
                 f"The tutorial's `clean_text` exactly as written (`tutorial_clean_text`): five regex passes (control characters, "
                 f"full-width→ASCII, line ends, spaces, blank lines) and a strip; no rules, no dedup, no report. "
                 f"`msllm-clean`: decode, normalise with counted edits, markup, 8 rules, exact + MinHash near dedup, report; "
                 f"workers started by {how}; {startup}. Kept {rep['docs_out']} of "
                 f"{rep['docs_in']} documents of the {l:.0f} MB input (dropped: {rep['dropped_docs']}).")
    write_result('clean_throughput', 'Cleaning throughput', '\n'.join(lines))


if __name__ == '__main__':
    main(*map(int, sys.argv[1:4]))
