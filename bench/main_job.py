"""The README's main job, run as a newcomer runs it, timed and checked.

The README's first bash block is run verbatim, in a fresh copy of this working tree, in a newcomer's shell: `env -i`
with an empty HOME (no cache) and the system PATH, no venv activated (CI's first step does the same, and its run stands for the chapters'
non-slow cells there). The block creates `.venv`, installs the package, and runs `msllm-roadmap` over every chapter on
the bundled corpus. The README promises that the roadmap runs in under fifteen minutes on two cores after the install:
the table gives the install and the roadmap apart (the roadmap from its environment report to its report.md), and
checks what it leaves behind: every chapter executed, the cluster cells' msrun runs, no checkpoint left, the report opening
with what the tiny model learned, and no traceback or framework noise in the terminal or a notebook.

The ratio is against the course's target of 900 s, not against a measured baseline: the job is the thing promised.
The same machine is not the same speed every day (the job has taken 588 s on one day and 932 s on another with the
same chapters), so the table also gives the machine's speed in this run: the course's tiny model trained alone in a
fresh process, before and after the job (`--speed`: 8 × 256 tokens a step, GRAPH mode, the median of steps 11-30).
Compare two runs of the job by that figure before comparing their seconds.
Each chapter's time is measured while another chapter runs beside it (the roadmap runs two at a time), so the
per-chapter seconds add up to about twice the wall time. A chapter's CPU seconds (its process's threads and the child
processes it waited for) are what it costs the machine, whatever ran beside it: the column to cut when the job is over
its target.

    python bench/main_job.py            # about 15 minutes with the install; prints the table, writes bench/results/main_job.md
    python bench/main_job.py --speed    # the machine's speed alone: the tiny model's steady training tokens/s
"""
import json, os, re, shutil, subprocess, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from _report import write_result
import msllm_nb.course.runner as C

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 900
SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'


def speed():
    "The tiny course model's steady training throughput in this process (tokens/s): the machine's speed, for comparing runs."
    os.environ.setdefault('GLOG_v', '3')
    import mindspore as ms
    ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
    import msllm_nb.train_llm as tl
    with tempfile.TemporaryDirectory() as d:
        cfg = tl.load_config('tiny', [f'token_dir={tl.sample_tokens()}', f'out_dir={d}', 'steps=30', 'warmup_steps=2', 'val_every=100',
                                      'save_every=100', 'sample_prompts=[]', 'progress=false'])
        tl.train(cfg, console=False)
        steady = [r['tokens_per_s'] for r in tl.read_metrics(d, 'train')][10:]
    return sorted(steady)[len(steady) // 2]


def measure_speed():
    "`speed()` in a fresh process, alone on the machine, with a cache of its own (the job builds its corpus itself)."
    with tempfile.TemporaryDirectory() as cache:
        r = subprocess.run([sys.executable, __file__, '--speed'], capture_output=True, text=True, env={**os.environ, 'MSLLM_CACHE': cache})
    if r.returncode: sys.exit(f'main_job --speed failed ({r.returncode}):\n' + r.stderr[-2000:])
    return float(r.stdout.split()[-1])


def check(out, summary, report, terminal, clone=ROOT):
    "What the whole roadmap must leave behind; one line per failed check."
    bad = []
    def need(ok, what):
        if not ok: bad.append(what)
    need(list(summary) == [p.stem for p in C.chapter_notebooks(clone / 'nbs')], 'every chapter notebook, in roadmap order')
    need(not C.failures(summary), 'no chapter failed')
    need('Training run `06_train_dp/msrun2`' in report and '20 steps on 2 rank(s)' in report, '06: the 2-rank msrun run in the report')
    need('- sample at step' in report and '.png)' in report, 'samples and loss plots in the report')
    need((out / '06_train_dp' / 'msrun2' / 'summary.json').exists(), '06: the msrun2 run finished')
    need((out / '07_zero' / 'zero2' / 'summary.json').exists(), '07: the ZeRO-1 run finished')
    need({'healthy', 'lr_typo', 'unshifted', 'frozen_embedding', 'slow_data'} <= {p.name for p in (out / '08_debug').iterdir()}, '08: every injected failure ran')
    need(json.loads((out / '08_0_comm' / 'commcheck.json').read_text())['world'] == 2, '08·0: commcheck on 2 ranks')
    need(report.startswith('# Roadmap report\n\nWhat the tiny model learned'), "the report opens with chapter 09's table")
    need('SmolLM2-135M before and after' in report, "09: SmolLM2's continued pretraining in the report")
    need((out / '10_sft' / 'sft' / 'summary.json').exists(), '10: the SFT run finished')
    need(not list(out.rglob('checkpoints/step_*')) and summary['06_train_dp'].get('checkpoints_mb', 0) > 0,
         "the chapters' checkpoints deleted as each ended (the disk the job needs is one chapter's)")
    need(summary['08_0_comm']['skipped_cells'] == [] and summary['06_train_dp']['skipped_cells'] == [], 'cluster cells ran')
    return bad + C.roadmap_problems(out, terminal)


def fresh_copy(dest):
    "This working tree as a fresh clone would hold it, plus uncommitted changes: the files git tracks or would track."
    files = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard', '-z'], cwd=ROOT, capture_output=True, check=True).stdout
    for f in filter(None, files.decode().split('\0')):
        if (ROOT / f).is_file(): (dest / f).parent.mkdir(parents=True, exist_ok=True); shutil.copy2(ROOT / f, dest / f)


def readme_main_job():
    "The README's first bash block: the main-job command, exactly as a reader copies it."
    return re.findall(r'```bash\n(.*?)```', (ROOT / 'README.md').read_text(encoding='utf-8'), re.S)[0].strip()


def run_verbatim(clone, home):
    """(exit status, terminal text, seconds) of the README's main job in `clone`, in a newcomer's shell whose HOME is
    `home`: an empty folder, so no cache of an earlier run (built fixtures, pip's wheels) is there."""
    t0 = time.perf_counter()
    r = subprocess.run(['bash', '-c', readme_main_job()], cwd=clone, capture_output=True, text=True,
                       env={'HOME': str(home), 'PATH': SYSTEM_PATH, 'LANG': 'C.UTF-8'})
    return r.returncode, r.stdout + r.stderr, time.perf_counter() - t0


def table(summary, wall, install, before, after, problems):
    rows = ['| chapter | seconds | CPU seconds | peak MB | slowest cells | most CPU |', '|---|---:|---:|---:|---|---|']
    rows += [f"| {k} | {v['seconds']:.0f} | {v['cpu_s']:.0f} | {v.get('peak_mb', '')} | {', '.join(v['slowest_cells'])} | {', '.join(v['busiest_cells'])} |"
             for k, v in sorted(summary.items(), key=lambda kv: -kv[1]['cpu_s'])]
    total, cpu = sum(v['seconds'] for v in summary.values()), sum(v['cpu_s'] for v in summary.values())
    return (f"The README's main-job command, verbatim, in a newcomer's shell (`env -i`, system PATH, an empty HOME: no cache, "
            f"a fresh copy of the tree): the install took {install:.0f} s, then `msllm-roadmap` (slow cells skipped, cluster cells run, two chapters at a "
            f"time) **{wall:.0f} s wall ({wall / 60:.1f} min), {wall / TARGET_S:.2f}× the {TARGET_S} s target**. Chapter seconds "
            f"add up to {total:.0f} s; CPU seconds to {cpu:.0f} s, {cpu / (2 * wall):.0%} of what 2 cores give in the wall time "
            "(the rest: the machine idle, or CPU that no chapter's accounting sees, such as a child process not waited for).\n\n"
            f"The machine's speed in this run (`--speed`, the tiny model's steady training step alone): {before:,.0f} tokens/s "
            f"before the job, {after:,.0f} after.\n\n" + '\n'.join(rows) + '\n\n'
            + ('Checks: all passed (chapters, runs, checkpoints, report, no traceback, quiet terminal and notebooks).' if not problems
               else 'Checks FAILED:\n' + '\n'.join(f'- {p}' for p in problems)))


def main():
    with tempfile.TemporaryDirectory() as d:
        clone, home = Path(d) / 'msllm_nb', Path(d) / 'home'; fresh_copy(clone); home.mkdir()
        before = measure_speed()
        code, terminal, seconds = run_verbatim(clone, home)
        after = measure_speed()
        out = clone / 'runs' / 'roadmap'
        if not (out / 'summary.json').exists(): sys.exit(f'main_job: the README command exited {code} before the roadmap ran:\n' + terminal[-4000:])
        wall = (out / 'report.md').stat().st_mtime - (out / 'env_report.json').stat().st_mtime
        summary = json.loads((out / 'summary.json').read_text())
        problems = check(out, summary, (out / 'report.md').read_text(), terminal, clone)
        if code: problems.append(f'the README command exited {code}: ' + '; '.join(C.failures(summary)))
        if 'Traceback (most recent call last)' in terminal: problems.append('a traceback reached the terminal')
        if (clone / 'nbs' / 'output').exists(): problems.append('a chapter wrote a folder into nbs/ (MindFormers log?)')
    write_result('main_job', 'Main job: the whole roadmap on 2 cores', table(summary, wall, seconds - wall, before, after, problems))
    if problems: sys.exit(1)


if __name__ == '__main__':
    if sys.argv[1:] == ['--speed']: print(speed())
    else: main()
