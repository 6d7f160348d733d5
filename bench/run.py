"""The benchmark suite's runner and index.

    python bench/run.py                 # the index: each question, its script, its result tables, the chapters that cite it
    python bench/run.py NAME [ARGS]     # run one benchmark (bench/NAME.py or bench/probes/NAME.py) with this interpreter
    python bench/run.py --readme        # rewrite bench/README.md from the index

The index is read from the files themselves, so it cannot drift: a benchmark's question is the first line of its
docstring, its results are `results/NAME.md` and `results/NAME_*.md` (with a `.json` beside each), and the chapters
citing it are the notebooks that link its script or one of its tables. `bench/` holds the questions the course's
chapters and README state figures for; `bench/probes/` holds standalone probes of single MindSpore CPU kernels and of
the training levers built on them (kept because a chapter cites their tables).
"""
import ast, json, re, subprocess, sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
HIDDEN = {'run', '_report'}


def scripts():
    "Every benchmark script: name → path, the questions first, then the probes."
    found = [p for p in sorted(BENCH.glob('*.py')) if p.stem not in HIDDEN] + sorted((BENCH / 'probes').glob('*.py'))
    return {p.stem: p for p in found}


def question(path):
    "The first sentence of a script's docstring: the question it answers."
    doc = ast.get_docstring(ast.parse(path.read_text(encoding='utf-8'))) or ''
    para = ' '.join(doc.strip().split('\n\n')[0].split())
    return re.split(r'(?<=[.?])\s', para, maxsplit=1)[0]


def results_of(name, names):
    "The result tables a script writes: results/NAME.md and results/NAME_*.md, less those of a longer script name."
    mine = [p for p in sorted((BENCH / 'results').glob('*.md')) if p.stem == name or p.stem.startswith(name + '_')]
    return [p for p in mine if not any(o != name and o.startswith(name + '_') and (p.stem == o or p.stem.startswith(o + '_'))
                                       for o in names)]


def citing(script, results):
    "The chapters (notebooks) and README that name the script or one of its tables."
    keys = [script.relative_to(ROOT).as_posix()] + [f'results/{p.name}' for p in results]
    docs = sorted(ROOT.glob('nbs/*.ipynb')) + [ROOT / 'README.md']
    return [d.stem if d.suffix == '.ipynb' else d.name for d in docs if d.exists()
            and any(k in d.read_text(encoding='utf-8') for k in keys)]


def index():
    "One row per benchmark: name, kind, question, script, results, citing."
    found = scripts()
    rows = []
    for name, path in found.items():
        res = results_of(name, found)
        rows.append({'name': name, 'kind': 'probe' if path.parent.name == 'probes' else 'question', 'question': question(path),
                     'script': path.relative_to(BENCH).as_posix(), 'results': [p.relative_to(BENCH).as_posix() for p in res],
                     'cited_by': citing(path, res)})
    return rows


def readme():
    "bench/README.md: the index as two tables (questions, probes), and how to run one."
    head = ('# Benchmarks\n\nSpeed and memory targets of the course, each measured as a ratio against a named baseline in '
            'the same run. Each result is a Markdown table in `results/` with a JSON copy beside it (its tables as rows, and '
            'the load average at the start and the end: a result measured while other work shared the machine says so).\n\n'
            '    .venv/bin/python bench/run.py             # this index\n'
            '    .venv/bin/python bench/run.py NAME [ARGS] # run one; it prints its table and rewrites results/NAME.md and .json\n\n'
            'This file is written by `bench/run.py --readme` from the scripts themselves (tests/test_bench.py checks it is '
            'current).\n')
    out = [head]
    for kind, title in (('question', 'Questions the chapters state figures for'),
                        ('probe', 'Probes: single MindSpore CPU kernels and the training levers built on them (`probes/`)')):
        out += [f'\n## {title}\n', '| benchmark | question | results | cited by |', '|---|---|---|---|']
        for r in (r for r in index() if r['kind'] == kind):
            res = ', '.join(f'[{Path(p).stem}]({p})' for p in r['results']) or '—'
            q = r['question'].replace('|', '\\|')
            out.append(f"| [{r['name']}]({r['script']}) | {q} | {res} | {', '.join(r['cited_by']) or '—'} |")
    return '\n'.join(out) + '\n'


def run(name, args):
    "Run one benchmark with this interpreter; its exit status is the runner's."
    found = scripts()
    if name not in found:
        print(f'bench/run.py: no benchmark {name!r}; choose one of: {", ".join(found)}', file=sys.stderr)
        return 2
    return subprocess.run([sys.executable, str(found[name]), *args], cwd=ROOT).returncode


def main(argv):
    if not argv:
        for r in index(): print(f"{r['name']:20} {r['kind']:8} {r['question'][:90]}")
        return 0
    if argv[0] == '--readme':
        (BENCH / 'README.md').write_text(readme(), encoding='utf-8'); return 0
    if argv[0].startswith('-'):
        print(f'bench/run.py: unknown flag {argv[0]} (usage: bench/run.py [NAME [ARGS] | --readme])', file=sys.stderr)
        return 2
    return run(argv[0], argv[1:])


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
