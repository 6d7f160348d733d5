"""What fresh memory costs on the course's CI machine: a page touched for the first time since the host took it back.

That machine is a VM that reports free guest memory to its host (virtio-balloon free page reporting; the table records
the setting). Memory left free hands its pages back, and the next touch of them faults through to the host. This probe
times, each in a fresh process:
- filling REGION_MB of new anonymous memory (a NumPy array) after PAUSE_S seconds with nothing running, then the same
  size again at once (the pages the first fill just freed, not yet handed back): once in NumPy's default transparent
  huge pages (it asks for them for every large array), once in small pages (`np.core.multiarray._set_madvise_hugepage(False)`,
  what `msllm_nb.core.env.use_device` sets);
- writing a file of CKPT_MB (a checkpoint of the tests' one-layer tiny model: model and Adam moments, 58 MB) into new
  page cache, then rewriting it within a second of deleting the first.
It also runs one test-sized `train_llm` run and records its user and kernel CPU seconds, without attributing them.

    python bench/first_touch.py    # prints the table and writes bench/results/first_touch.md
"""
import json, os, resource, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # bench/, for _report
from _report import write_result  # noqa: E402

REGION_MB, CKPT_MB, PAUSE_S, REPS = 512, 58, 8, 3


def _child(kind):
    "Run in a fresh process: (seconds, kernel seconds) of the first and the second fill or write."
    import numpy as np
    def timed(fn):
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(); fn()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        return time.perf_counter() - t0, r1.ru_stime - r0.ru_stime
    if kind in ('anon', 'anon_small'):
        np.core.multiarray._set_madvise_hugepage(kind == 'anon')
        def fill(): a = np.ones(REGION_MB << 18, np.float32); a[::1024] += 1; del a
        return [timed(fill), timed(fill)]
    data = np.random.default_rng(0).standard_normal(CKPT_MB << 18, dtype=np.float32)
    d = Path(tempfile.mkdtemp(prefix='first_touch_'))
    time.sleep(PAUSE_S)  # whatever the start freed goes back to the host first: the write's page cache is then new memory
    def write():
        with open(d / 'x.ckpt', 'wb') as f: f.write(data.data); f.flush(); os.fsync(f.fileno())
    out = [timed(write)]
    (d / 'x.ckpt').unlink(); out.append(timed(write)); (d / 'x.ckpt').unlink(); d.rmdir()
    return out


def _train_run():
    "User and kernel CPU seconds of one test-sized train_llm run (tests/train_helpers.args) in a fresh process."
    import msllm_nb.train_llm as tl
    time.sleep(PAUSE_S)
    with tempfile.TemporaryDirectory() as d:
        cmd = [Path(sys.executable).parent / 'train_llm', '--config', 'tiny', '--out', d, '--set', f'token_dir={tl.sample_tokens()}',
               'steps=12', 'batch_size=8', 'seq_len=64', 'model.num_hidden_layers=1', 'warmup_steps=2', 'val_every=6', 'save_every=3',
               'keep=3', 'log_every=4', 'progress=false', 'sample_prompts=[]']
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True, env={**os.environ, 'GLOG_v': '3'})
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {'wall_s': time.perf_counter() - t0, 'user_s': r1.ru_utime - r0.ru_utime, 'sys_s': r1.ru_stime - r0.ru_stime, 'maxrss_mb': r1.ru_maxrss / 1024}


def page_reporting()->dict:
    "What the guest says about its memory: free page reporting (the module's order, whether virtio_balloon is loaded) and the kernel's transparent-huge-page mode."
    order = Path('/sys/module/page_reporting/parameters/page_reporting_order')
    thp = Path('/sys/kernel/mm/transparent_hugepage/enabled')  # e.g. 'always [madvise] never': NumPy's request counts under madvise
    return {'page_reporting_order': order.read_text().strip() if order.exists() else None,
            'virtio_balloon': Path('/sys/bus/virtio/drivers/virtio_balloon').exists(),
            'transparent_hugepage': next((w.strip('[]') for w in thp.read_text().split() if w.startswith('[')), None) if thp.exists() else None}


def main():
    if len(sys.argv) > 2 and sys.argv[1] == '--child': print(json.dumps(_child(sys.argv[2]))); return
    tr = _train_run()  # first: RUSAGE_CHILDREN's peak RSS is then its own
    runs = {'anon': [], 'anon_small': [], 'file': []}
    for _ in range(REPS):
        for kind in runs:
            time.sleep(PAUSE_S)  # what the last process freed goes back to the host
            p = subprocess.run([sys.executable, __file__, '--child', kind], capture_output=True, text=True, check=True)
            runs[kind].append(json.loads(p.stdout.strip().splitlines()[-1]))
    med = lambda xs: sorted(xs)[len(xs) // 2]
    rows, data = [], {}
    for kind, mb, what in (('anon', REGION_MB, f'{REGION_MB} MB of new memory (NumPy array, huge pages: NumPy\'s default)'),
                           ('anon_small', REGION_MB, f'{REGION_MB} MB of new memory (NumPy array, small pages)'),
                           ('file', CKPT_MB, f'{CKPT_MB} MB file written and fsynced')):
        for i, when in enumerate((f'first, after {PAUSE_S} s with nothing running', 'again at once')):
            s, k = med([r[i][0] for r in runs[kind]]), med([r[i][1] for r in runs[kind]])
            data[f'{kind}_{i}'] = {'s': s, 'kernel_s': k, 'mb': mb}
            rows.append(f'| {what} | {when} | {s:.2f} | {k:.2f} | {1e3 * s / mb:.1f} |')
    data['train_run'], data['host'] = tr, page_reporting()
    ms_mb = lambda k: 1e3 * data[k]['s'] / REGION_MB
    body = (f'**Fresh memory in huge pages: {ms_mb("anon_0"):.1f} ms per MB; in small pages: {ms_mb("anon_small_0"):.1f} ms per MB '
            f'({ms_mb("anon_0") / ms_mb("anon_small_0"):.0f}× the time); reused at once: {ms_mb("anon_1"):.2f} ms per MB in huge pages, '
            f'{ms_mb("anon_small_1"):.2f} in small pages.** '
            f'Each row: the median of {REPS} fresh processes, '
            f'{PAUSE_S} s apart. Free page reporting: virtio_balloon loaded {data["host"]["virtio_balloon"]}, '
            f'page_reporting_order {data["host"]["page_reporting_order"]}; transparent huge pages: {data["host"]["transparent_hugepage"]} '
            f'(under madvise, only memory that asks for them, as NumPy does, gets them).\n\n| what | when | seconds | OS kernel seconds | ms per MB |\n|---|---|---:|---:|---:|\n' + '\n'.join(rows) +
            f'\n\nFor scale, not attributed to the rows above: a test run of `train_llm` (`tests/train_helpers.args`: one layer, 12 steps, a checkpoint every 3, peak RSS '
            f'{tr["maxrss_mb"]:.0f} MB) in a fresh process: {tr["user_s"]:.1f} s of user and {tr["sys_s"]:.1f} s of operating-system kernel CPU '
            f'({100 * tr["sys_s"] / (tr["user_s"] + tr["sys_s"]):.0f} % in the OS kernel), {tr["wall_s"]:.1f} s wall.')
    write_result('first_touch', 'Fresh memory on this VM: the first touch of a page faults through to the host', body, data)


if __name__ == '__main__':
    main()
