"""Integration checks for chapter 00 and 00·1: env_report on the real install, every failure of `msllm-env`, reference processes, the roadmap runner."""
import json, os, re, subprocess, sys
from pathlib import Path
import importlib.metadata as md
import pytest
import msllm_nb.core.env as E
import msllm_nb.course.runner as C
import msllm_nb.core.procs as P

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_report_reads_the_real_install():
    r = E.env_report()
    assert r['mindspore']['version'] == md.version('mindspore')
    assert r['numpy']['version'] == md.version('numpy') and r['numpy']['major'] < 2
    assert r['mindspore']['plugins']['cpu'] and r['devices']['CPU']
    assert r['mindformers']['pairing']['ok'] is True
    assert r['python']['version'] == '.'.join(map(str, sys.version_info[:3]))
    assert E.env_problems(r) == []


def run_cli(capsys, *args, **kw):
    "Call env_cli in-process; return (exit code, stdout, stderr)."
    code = 0
    try: E.env_cli(*args, **kw)
    except SystemExit as e: code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def fake_versions(monkeypatch, **over):
    real = E.dist_version
    monkeypatch.setattr(E, 'dist_version', lambda n: over[n] if n in over else real(n))


def test_cli_ok(capsys):
    code, out, err = run_cli(capsys, json_out=False, device='CPU', smoke=False)
    assert code == 0 and 'OK: this environment can run the course on CPU' in out and err == ''


def test_cli_missing_mindspore(capsys, monkeypatch):
    fake_versions(monkeypatch, mindspore=None)
    code, out, err = run_cli(capsys, json_out=False, device=None, smoke=False)
    assert code == 1
    assert err.strip().splitlines() == ["msllm-env: mindspore is not installed: pip install 'mindspore==2.9.0' 'numpy<2'"]


def test_cli_numpy2(capsys, monkeypatch):
    fake_versions(monkeypatch, numpy='2.0.1')
    code, _, err = run_cli(capsys, json_out=False, device=None, smoke=False)
    assert code == 1 and 'numpy 2.0.1 is installed but mindspore needs numpy<2' in err


def test_cli_pairing_mismatch(capsys, monkeypatch):
    fake_versions(monkeypatch, mindspore='2.7.2')
    code, _, err = run_cli(capsys, json_out=False, device=None, smoke=False)
    assert code == 1
    assert f"mindformers {md.version('mindformers')} is declared for mindspore 2.9.0 but mindspore 2.7.2 is installed" in err


@pytest.mark.parametrize('cuda,why', [
    ({'runtime': '11.6', 'cudnn': '8', 'driver': None, 'libcuda': None}, 'no NVIDIA driver found'),
    ({'runtime': None, 'cudnn': None, 'driver': '550.1', 'libcuda': '1'}, 'no CUDA runtime found'),
    ({'runtime': '11.6', 'cudnn': None, 'driver': '550.1', 'libcuda': '1'}, 'no cuDNN library found'),
    ({'runtime': '12.4', 'cudnn': '9', 'driver': '550.1', 'libcuda': '1'}, 'CUDA runtime 12.4 does not match'),
])
def test_cli_gpu_unavailable(capsys, monkeypatch, cuda, why):
    monkeypatch.setattr(E, 'cuda_info', lambda: cuda)
    code, _, err = run_cli(capsys, json_out=False, device='GPU', smoke=False)
    assert code == 1 and err.startswith('msllm-env: device GPU requested but not available') and why in err


def test_gpu_available_when_everything_fits(monkeypatch):
    monkeypatch.setattr(E, 'cuda_info', lambda: {'runtime': '11.6', 'cudnn': '8', 'driver': '550.1', 'libcuda': '1'})
    r = E.env_report()
    assert r['devices']['GPU'] is True and E.env_problems(r, 'gpu') == []


def test_cli_ascend_unavailable(capsys, monkeypatch):
    monkeypatch.setattr(E, 'ascend_info', lambda: {'toolkit': None, 'path': None})
    code, _, err = run_cli(capsys, json_out=False, device='Ascend', smoke=False)
    assert code == 1 and 'no Ascend CANN toolkit found' in err


def test_cli_unknown_device(capsys):
    code, _, err = run_cli(capsys, json_out=False, device='TPU', smoke=False)
    assert code == 1 and "unknown device 'TPU'" in err


def test_installed_console_script_json_and_smoke(tmp_path):
    r = subprocess.run([BIN / 'msllm-env', '--json', '--smoke'], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep['problems'] == [] and rep['smoke']['ok'] and rep['run_check']['ok']
    assert rep['smoke']['loss_after'] < rep['smoke']['loss_before']
    assert not (tmp_path / 'output').exists(), 'mindformers was imported: it wrote ./output/log'


def test_console_script_gpu_missing_is_one_line(tmp_path):
    if E.env_report()['devices']['GPU']: pytest.skip('this machine has a usable GPU')
    r = subprocess.run([BIN / 'msllm-env', '--device', 'GPU'], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith('msllm-env: device GPU requested')


def test_reference_runs_in_a_child_process():
    code = ('import sys, msllm_nb.core.procs as C; p = C.run_reference(C.torch_probe); '
            'assert "torch" not in sys.modules; print(p["installed"])')
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(E.dist_version('torch') is not None)
    with pytest.raises(RuntimeError, match='died without a result'):
        P.run_reference(os._exit, 3)


def test_reference_from_a_script_without_main_guard(tmp_path):
    "A plain script (no `if __name__ == '__main__':`) may call it: the child never re-imports the script."
    (tmp_path / 'plain.py').write_text('import os, msllm_nb.core.procs as C\nprint("child", C.run_reference(os.getpid) != os.getpid())\n')
    r = subprocess.run([sys.executable, tmp_path / 'plain.py'], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.splitlines() == ['child True'], (r.stdout, r.stderr[-2000:])  # printed once: not re-run


def test_the_tutorials_version_table_is_checked_cell_by_cell():
    "Four rows, five columns, each with a verdict and evidence from the installed software; the wheel's CUDA 11 builds decide the CUDA 12 rows."
    rows = E.check_version_table()
    assert len(rows) == 20 and all(r['evidence'] and r['verdict'] in ('holds', 'wrong', 'partly', 'not checkable here') for r in rows)
    by = {(r['mindspore'], r['column']): r for r in rows}
    assert by['2.3.0', 'cuda']['verdict'] == 'wrong' and 'libcudart.so.11' in by['2.3.0', 'cuda']['evidence']
    assert by['2.4.0', 'cuda']['verdict'] == 'wrong' and 'CANN 8.0.RC3' in by['2.4.0', 'cuda']['evidence']  # MindFormers' own map
    assert by['2.3.0', 'mindspore']['verdict'] == 'holds' and by['2.2.0', 'mindspore']['verdict'] == 'not checkable here'
    assert by['2.3.0', 'hardware']['verdict'] == 'partly' and 'H800' in by['2.3.0', 'hardware']['evidence']  # Hopper needs CUDA >= 11.8


def test_wheel_facts_come_from_the_wheel():
    facts = {f['fact']: f['value'] for f in E.wheel_facts()}
    assert '<2' in facts['NumPy'] and facts['PyTorch'] == 'no requirement'
    assert all('libcudart.so.11' in v for v in facts['GPU plugins link'].split('; '))


NB = {'cells': [
    {'cell_type': 'code', 'metadata': {}, 'outputs': [], 'execution_count': None,
     'source': "from pathlib import Path\nPath('ran.txt').write_text('yes')\nprint('hello from the chapter')"},
    {'cell_type': 'code', 'metadata': {}, 'outputs': [], 'execution_count': None,
     'source': "#| gpu\nraise SystemError('must not run without a GPU')"},
], 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}


def test_a_failing_chapter_is_one_line_and_the_others_still_run(tmp_path):
    """A chapter made to fail (the way chapter 10 failed in a newcomer's shell: a command not found) does not stop the
    roadmap: the chapters beside and after it run, every executed notebook and the report are written, and the terminal
    gets one line for the failed chapter, no traceback, exit 1. Two workers, as the README's command runs it."""
    nbs = tmp_path / 'nbs'; nbs.mkdir()
    (nbs / '00_a.ipynb').write_text(json.dumps(NB))
    bad = json.loads(json.dumps(NB)); bad['cells'][1]['source'] = "print('the log before the failure')\nimport subprocess\nsubprocess.run(['surely-not-a-command-xyz'])"
    (nbs / '01_b.ipynb').write_text(json.dumps(bad))
    (nbs / '02_c.ipynb').write_text(json.dumps(NB))
    (nbs / 'index.ipynb').write_text(json.dumps(NB))
    r = subprocess.run([BIN / 'msllm-roadmap', '--nbs', nbs, '--out', tmp_path / 'runs'], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-2000:]
    assert 'Traceback' not in r.stdout + r.stderr, r.stderr[-3000:]
    failed = [l for l in r.stderr.splitlines() if l.startswith('FAILED')]
    assert len(failed) == 1 and failed[0].startswith("FAILED 01_b cell 1: FileNotFoundError: [Errno 2] No such file or directory: 'surely-not-a-command-xyz'"), r.stderr
    assert failed[0].endswith(f"(traceback: {tmp_path / 'runs' / '01_b.ipynb'})")
    assert (nbs / 'ran.txt').read_text() == 'yes'  # executed in the notebook's own folder
    for n in ('00_a', '01_b', '02_c'): assert (tmp_path / 'runs' / f'{n}.ipynb').exists(), n  # every executed notebook is kept
    done = json.loads((tmp_path / 'runs' / '02_c.ipynb').read_text())
    assert 'hello from the chapter' in ''.join(done['cells'][0]['outputs'][0]['text'])  # the chapter after the failure ran
    assert done['cells'][1]['outputs'] == []  # the gpu cell was skipped, not run
    report = (tmp_path / 'runs' / 'report.md').read_text()
    assert '**Chapters that failed:**' in report and '| [02_c](02_c.ipynb) |' in report
    assert json.loads((tmp_path / 'runs' / 'env_report.json').read_text())['mindspore']['version']
    summary = json.loads((tmp_path / 'runs' / 'summary.json').read_text())
    pids = [summary[n]['pid'] for n in ('00_a', '01_b', '02_c')]
    assert len(set(pids)) == 3, summary  # each chapter in a fresh process: nothing of one (memory, context) carries into the next
    assert all(summary[n]['peak_mb'] > 0 for n in ('00_a', '02_c')), summary


def test_roadmap_skips_slow_cells_unless_asked(tmp_path):
    nbs = tmp_path / 'nbs'; nbs.mkdir()
    nb = json.loads(json.dumps(NB)); nb['cells'][1]['source'] = "#| slow\nPath('slow.txt').write_text('ran')"
    (nbs / '00_a.ipynb').write_text(json.dumps(nb))
    r = subprocess.run([BIN / 'msllm-roadmap', '--nbs', nbs, '--out', tmp_path / 'runs'], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not (nbs / 'slow.txt').exists() and (nbs / 'ran.txt').exists()
    summary = json.loads((tmp_path / 'runs' / 'summary.json').read_text())['00_a']
    assert summary['skipped_cells'] == ['1 (slow)']
    test_cells = sorted(c.split(' ')[0] for c in summary['slowest_cells']); assert test_cells == ['0', '1'], summary  # both code cells timed
    assert all(re.fullmatch(r'\d+ \(\d+\.\ds\)', c) for c in summary['slowest_cells']), summary  # where the chapter's time went
    assert summary['cpu_s'] > 0 and all(re.fullmatch(r'\d+ \(\d+\.\ds CPU\)', c) for c in summary['busiest_cells']), summary  # and its CPU
    assert '| slowest cells |' in (tmp_path / 'runs' / 'report.md').read_text()
    assert 'skipped cells: 1 (slow)' in r.stdout and 'msllm-roadmap --slow' in r.stdout
    r = subprocess.run([BIN / 'msllm-roadmap', '--nbs', nbs, '--out', tmp_path / 'runs2', '--slow', '--workers', '1'], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and (nbs / 'slow.txt').read_text() == 'ran'
    assert json.loads((tmp_path / 'runs2' / 'summary.json').read_text())['00_a']['skipped_cells'] == []


def test_a_chapters_checkpoints_go_when_it_ends_unless_kept(tmp_path):
    "The main job's disk is the chapters running, not all of them: each chapter's run checkpoints are deleted as it ends."
    nbs = tmp_path / 'nbs'; nbs.mkdir()
    nb = json.loads(json.dumps(NB)); nb['cells'][1]['source'] = (
        "import os\nrun = Path(os.environ['MSLLM_RUNS']) / 'run'; (run / 'checkpoints' / 'step_00000004').mkdir(parents=True)\n"
        "(run / 'checkpoints' / 'step_00000004' / 'model.ckpt').write_bytes(bytes(3 << 20)); (run / 'metrics.jsonl').write_text('')")
    (nbs / '00_a.ipynb').write_text(json.dumps(nb))
    r = subprocess.run([BIN / 'msllm-roadmap', '--nbs', nbs, '--out', tmp_path / 'runs', '--workers', '1'], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / 'runs' / '00_a' / 'run' / 'metrics.jsonl').exists() and not (tmp_path / 'runs' / '00_a' / 'run' / 'checkpoints').exists()
    assert json.loads((tmp_path / 'runs' / 'summary.json').read_text())['00_a']['checkpoints_mb'] == 3
    assert 'Training checkpoints deleted as each chapter ended: 3 MB' in (tmp_path / 'runs' / 'report.md').read_text()
    r = subprocess.run([BIN / 'msllm-roadmap', '--nbs', nbs, '--out', tmp_path / 'kept', '--keep_checkpoints'], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / 'kept' / '00_a' / 'run' / 'checkpoints' / 'step_00000004' / 'model.ckpt').stat().st_size == 3 << 20


def test_outputs_of_the_main_job_go_into_the_chapters_and_stay_clean(tmp_path):
    "msllm-outputs after msllm-roadmap: a reader sees the figure and the printout; nbdev_clean leaves them; a failed chapter is left alone."
    nbs = tmp_path / 'nbs'; nbs.mkdir()
    nb = json.loads(json.dumps(NB))
    nb['cells'][1]['source'] = ("import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt\n"
                                "from IPython.display import display\nfig, ax = plt.subplots(); ax.plot([1, 2]); display(fig)")
    (nbs / '00_a.ipynb').write_text(json.dumps(nb))
    broken = json.loads(json.dumps(NB)); broken['cells'][1]['source'] = "raise ValueError('broken')"
    broken['cells'][0]['outputs'] = [{'output_type': 'stream', 'name': 'stdout', 'text': 'kept from before\n'}]
    (nbs / '01_b.ipynb').write_text(json.dumps(broken))
    r = subprocess.run([BIN / 'msllm-roadmap', '--nbs', nbs, '--out', tmp_path / 'runs'], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1 and 'FAILED 01_b' in r.stderr, r.stderr[-2000:]
    r = subprocess.run([BIN / 'msllm-outputs', '--run', tmp_path / 'runs', '--nbs', nbs], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [f'msllm-outputs: 01_b failed in {tmp_path / "runs"}: their notebooks keep the outputs they had'], r.stderr
    assert '00_a               2 cells with outputs' in r.stdout, r.stdout
    cells = json.loads((nbs / '00_a.ipynb').read_text())['cells']
    assert cells[0]['outputs'] == [{'name': 'stdout', 'output_type': 'stream', 'text': 'hello from the chapter\n'}]
    assert [sorted(o['data']) for o in cells[1]['outputs']] == [['image/png', 'text/plain']]
    assert json.loads((nbs / '01_b.ipynb').read_text())['cells'][0]['outputs'][0]['text'] == 'kept from before\n'
    before = (nbs / '00_a.ipynb').read_text()
    subprocess.run([BIN / 'nbdev_clean', '--fname', nbs / '00_a.ipynb'], check=True, capture_output=True, cwd=ROOT)
    after = json.loads((nbs / '00_a.ipynb').read_text())['cells']
    assert [c['outputs'] for c in after] == [c['outputs'] for c in json.loads(before)['cells']]  # CI's clean check keeps them


def test_the_report_opens_with_what_was_learned_and_lists_each_run(tmp_path):
    "roadmap_report on a folder laid out as the main job leaves it: chapter 09's table first, each run's losses and samples, the plots."
    run = tmp_path / '06_train_dp' / 'msrun2'; run.mkdir(parents=True)
    (run / 'summary.json').write_text(json.dumps({'steps': 20, 'world': 2}))
    recs = [{'kind': 'val', 'step': 0, 'loss': 9.0}, {'kind': 'val', 'step': 20, 'loss': 6.5}, {'kind': 'sample', 'step': 20, 'text': 'The cat'}]
    (run / 'metrics.jsonl').write_text(''.join(json.dumps(x) + '\n' for x in recs))
    (tmp_path / '09_eval').mkdir(); (tmp_path / '09_eval' / 'learned.md').write_text('What the tiny model learned in 120 steps\n')
    (tmp_path / '06_train_dp' / 'msrun2_curves.png').write_bytes(b'png')
    report = C.roadmap_report(tmp_path, {'06_train_dp': {'seconds': 12.5, 'cpu_s': 11.0, 'peak_mb': 900, 'skipped_cells': [], 'slowest_cells': ['20 (9.0s)']}})
    assert report.startswith('# Roadmap report\n\nWhat the tiny model learned'), report
    assert '| [06_train_dp](06_train_dp.ipynb) | 12.5 | 11.0 | 900 | 20 (9.0s) |  |' in report  # seconds, CPU seconds, peak MB
    assert 'Training run `06_train_dp/msrun2`\n\n20 steps on 2 rank(s); validation loss 9.000 → 6.500.' in report
    assert "- sample at step 20: 'The cat'" in report and '![msrun2_curves](06_train_dp/msrun2_curves.png)' in report


def test_use_device_after_kernels_have_run_on_that_device():
    """In a process whose kernels already run on the CPU (a notebook, a test worker), choosing the CPU again changes nothing
    (MindSpore refuses any set_device once its runtime started: msllm-eval run in-process after another test's kernels
    failed that way); asking for another device is still an error."""
    code = ('import numpy as np, mindspore as ms\n(ms.Tensor(np.ones(3, np.float32)) * 2).asnumpy()\n'
            'from msllm_nb.core.env import use_device\nfrom msllm_nb.eval.harness import set_device\n'
            "use_device('CPU'); set_device('cpu', 'pynative'); set_device('cpu', 'graph')\n"
            "try: use_device('GPU')\nexcept RuntimeError: print('GPU refused')\n")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env={**os.environ, 'GLOG_v': '3'})
    assert r.returncode == 0 and r.stdout.strip() == 'GPU refused', r.stderr[-2000:]
