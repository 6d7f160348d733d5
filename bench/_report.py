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


def write_result(name, title, body):
    "Print `body` with the machine and load lines and write it to bench/results/{name}.md under `# {title}`."
    body = f'{body}\n\nMachine: {os.cpu_count()} cores; {time.strftime("%Y-%m-%d")}. {load_line()}'
    print(body)
    out = Path(__file__).parent / 'results'; out.mkdir(exist_ok=True)
    (out / f'{name}.md').write_text(f'# {title}\n\n{body}\n')


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
