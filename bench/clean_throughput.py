"""Cleaning throughput: msllm-clean (every rule on, exact + near dedup, 2 processes) vs the tutorial's clean_text
applied line by line (one process), on the same generated input, in the same run, at two sizes: the difference of the
two runs separates msllm-clean's per-MB rate from its fixed start-up (starting two workers, loading the kernels).

The input is made from the bundled sample: seeded recombinations of its Chinese and English paragraphs into new
documents (so dedup has real work, not only copies), written as JSON lines.

    python bench/clean_throughput.py [SMALL_MB LARGE_MB]   # default 40 160; prints the table, writes bench/results/clean_throughput.md
"""
import json, random, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from _report import write_result  # noqa: E402


def make_input(path, mb):
    import msllm_nb.clean as C
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


def one_size(tmp, mb):
    "Seconds of the tutorial's function and of msllm-clean on `mb` MB of generated input, and msllm-clean's report."
    import msllm_nb.clean as C
    inp = tmp / f'in{mb}'; inp.mkdir()
    size = make_input(inp, mb) / 2**20
    t0 = time.perf_counter()
    with open(tmp / 'tutorial.txt', 'w') as out:
        for f in sorted(inp.iterdir()):
            with open(f, encoding='utf-8') as fh:
                for line in fh: out.write(C.tutorial_clean_text(line) + '\n')
    t_tut = time.perf_counter() - t0
    t0 = time.perf_counter()
    rep = C.clean_corpus([inp], tmp / f'ours{mb}', workers=2, progress=False)
    t_ours = time.perf_counter() - t0
    return size, t_tut, t_ours, rep


def main(small=40, large=160):
    import msllm_nb.clean as C
    how = C.start_method()
    with tempfile.TemporaryDirectory() as tmp:
        (s, ts, os_, rep_s), (l, tl, ol, rep_l) = one_size(Path(tmp), small), one_size(Path(tmp), large)
    rate_t, rate_o = (l - s) / (tl - ts), (l - s) / (ol - os_)
    lines = ['| input | tutorial `clean_text`, line by line, 1 process (baseline), MB/s | `msllm-clean`, 2 processes, MB/s | ratio |',
             '|---|---|---|---|',
             f'| {s:.0f} MB | {s / ts:.1f} | {s / os_:.1f} | {ts / os_:.2f} |',
             f'| {l:.0f} MB | {l / tl:.1f} | {l / ol:.1f} | {tl / ol:.2f} |',
             f'| per-MB rate (the difference of the two runs) | {rate_t:.1f} | {rate_o:.1f} | {rate_o / rate_t:.2f} |']
    lines.append(f"\nThe tutorial's function: URL/tag regex, full-width→ASCII, whitespace; no rules, no dedup, no report. "
                 f"`msllm-clean`: decode, normalise, markup, 8 rules, exact + MinHash near dedup, report; workers started by "
                 f"{how}; fixed start-up about {os_ - s / rate_o:.1f} s. Kept {rep_l['docs_out']} of {rep_l['docs_in']} "
                 f"documents of the {l:.0f} MB input (dropped: {rep_l['dropped_docs']}).")
    write_result('clean_throughput', 'Cleaning throughput', '\n'.join(lines))


if __name__ == '__main__':
    main(*map(int, sys.argv[1:3]))
