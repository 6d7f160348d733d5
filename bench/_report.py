"""Shared by the benchmarks: print a result table and commit-ready copy under bench/results/; run each framework alone."""
import json, os, platform, statistics, subprocess, sys, time
from pathlib import Path


LOAD_AT_START = os.getloadavg()  # the benchmark's start: this module is imported before anything is measured


def load_line():
    """The load average (1 minute) at the start and at the end of the benchmark against the cores; a warning when either
    exceeds the core count: other work shared the machine, and every figure in the table is suspect."""
    cores, start, end = os.cpu_count(), LOAD_AT_START[0], os.getloadavg()[0]
    line = f'Load average (1 min): {start:.2f} at the start, {end:.2f} at the end, on {cores} cores.'
    if max(start, end) > cores:
        warn = f'WARNING: the load exceeded the {cores} cores: other work shared the machine; re-run before relying on these figures.'
        print(warn, file=sys.stderr)
        line += f' **{warn}**'
    return line


def markdown_tables(text):
    "Every Markdown table in `text`, as a list of rows, each row a dict from the table's header cells to its own cells."
    tables, rows = [], []
    for line in text.splitlines() + ['']:
        if line.startswith('|') and line.rstrip().endswith('|'): rows.append([c.strip() for c in line.strip()[1:-1].split('|')])
        else:
            if len(rows) > 2 and set(''.join(rows[1])) <= set('-: '):
                tables.append([dict(zip(rows[0], r)) for r in rows[2:]])
            rows = []
    return tables


def result_json(name, title, body, load_start, load_end, date, data=None):
    "The JSON written beside a result's Markdown: its tables as rows, the load average at the start and end (None: not recorded)."
    cores = os.cpu_count()
    busy = None if load_start is None else max(load_start[0], load_end[0]) > cores
    return {'name': name, 'title': title, 'date': date, 'cores': cores, 'python': platform.python_version(),
            'load_average': {'start': load_start, 'end': load_end, 'busy': busy}, 'tables': markdown_tables(body),
            'data': data, 'text': body}


def write_result(name, title, body, data=None, out=None):
    """Print `body` with the machine and load lines and write it to bench/results/{name}.md under `# {title}`, and beside it
    {name}.json: the same tables as rows, the load average (1, 5, 15 min) at the start and end, and `data` if given."""
    end, date = os.getloadavg(), time.strftime("%Y-%m-%d")
    body = f'{body}\n\nMachine: {os.cpu_count()} cores; {date}. {load_line()}'
    print(body)
    out = Path(out or Path(__file__).parent / 'results'); out.mkdir(exist_ok=True)
    (out / f'{name}.md').write_text(f'# {title}\n\n{body}\n')
    rec = result_json(name, title, body, list(LOAD_AT_START), list(end), date, data)
    (out / f'{name}.json').write_text(json.dumps(rec, indent=1, ensure_ascii=False, allow_nan=False) + '\n')


def each_framework(script, mindspore, torch):
    """MindSpore's and PyTorch's results, each measured in a fresh process of its own: `script` (the calling benchmark)
    runs again with --ms and with --torch, and prints `mindspore()` or `torch()` as JSON. In those children this returns
    None after printing: the caller's `main` then stops."""
    if len(sys.argv) > 1 and sys.argv[1] in ('--ms', '--torch'):
        print(json.dumps(mindspore() if sys.argv[1] == '--ms' else torch())); return None
    run = lambda flag: json.loads(subprocess.run([sys.executable, script, flag], capture_output=True, text=True,
                                                 check=True).stdout.strip().splitlines()[-1])
    return run('--ms'), run('--torch')


def median_ms(fn, warmup, reps):
    "Median wall time of `reps` calls of `fn` after `warmup` untimed ones, in milliseconds (`fn` must wait for its result)."
    for _ in range(warmup): fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def versions(m, t):
    "The line naming what `each_framework` measured: MindSpore's and PyTorch's versions (their results' 'version'), Python, the machine."
    return f"MindSpore {m['version']}, PyTorch {t['version']}, Python {platform.python_version()}, {platform.machine()}"


def torch_kernels(prof, steps):
    "PyTorch's operators run per step in a torch.profiler trace: its leaf operators, those that call no other operator."
    return sum(1 for e in prof.events() if not e.cpu_children and not e.name.startswith('ProfilerStep')) / steps
