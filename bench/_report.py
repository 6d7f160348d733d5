"""Shared by the benchmarks: print a result table and commit-ready copy under bench/results/."""
import os, time
from pathlib import Path


def write_result(name, title, body):
    "Print `body` with the machine line and write it to bench/results/{name}.md under `# {title}`."
    body = f'{body}\n\nMachine: {os.cpu_count()} cores; {time.strftime("%Y-%m-%d")}.'
    print(body)
    out = Path(__file__).parent / 'results'; out.mkdir(exist_ok=True)
    (out / f'{name}.md').write_text(f'# {title}\n\n{body}\n')
