"""Cleaning throughput: msllm-clean (every rule on, exact + near dedup, 2 processes) vs the tutorial's clean_text
applied line by line (one process), on the same generated input, in the same run.

The input is made from the bundled sample: seeded recombinations of its Chinese and English paragraphs into new
documents (so dedup has real work, not only copies), written as JSON lines.

    python bench/clean_throughput.py [MB]    # default 40 MB; prints the table, writes bench/results/clean_throughput.md
"""
import json, os, random, sys, tempfile, time
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


def main(mb=40):
    import msllm_nb.clean as C
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp); inp = tmp / 'in'; inp.mkdir()
        size = make_input(inp, mb)
        t0 = time.perf_counter()
        with open(tmp / 'tutorial.txt', 'w') as out:
            for f in sorted(inp.iterdir()):
                with open(f, encoding='utf-8') as fh:
                    for line in fh: out.write(C.tutorial_clean_text(line) + '\n')
        t_tut = time.perf_counter() - t0
        t0 = time.perf_counter()
        rep = C.clean_corpus([inp], tmp / 'ours', workers=2, progress=False)
        t_ours = time.perf_counter() - t0
    mbs = size / 2**20
    lines = ['| pipeline | what it does | processes | MB/s | ratio |', '|---|---|---|---|---|',
             f'| tutorial `clean_text`, line by line (baseline) | URL/tag regex, full-width→ASCII, whitespace | 1 | {mbs / t_tut:.1f} | 1.00 |',
             f'| `msllm-clean` | decode, normalise, markup, 8 rules, exact + MinHash near dedup, report | 2 | {mbs / t_ours:.1f} | {t_tut / t_ours:.2f} |']
    lines.append(f"\n{mbs:.0f} MB of generated zh/en documents; msllm-clean kept {rep['docs_out']} of {rep['docs_in']} "
                 f"(dropped: {rep['dropped_docs']}).")
    write_result('clean_throughput', 'Cleaning throughput', '\n'.join(lines))


if __name__ == '__main__':
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
