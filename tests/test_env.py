"""Integration checks for chapter 00 and 00·1: env_report on the real install, every failure of `msllm-env`, reference processes, the roadmap runner."""
import json, os, re, subprocess, sys, textwrap
from pathlib import Path
import importlib.metadata as md
import pytest
import msllm_nb.env as E
import msllm_nb.course as C

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
    code = ('import sys, msllm_nb.course as C; p = C.run_reference(C.torch_probe); '
            'assert "torch" not in sys.modules; print(p["installed"])')
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(E.dist_version('torch') is not None)
    with pytest.raises(RuntimeError, match='died without a result'):
        C.run_reference(os._exit, 3)


def test_reference_from_a_script_without_main_guard(tmp_path):
    "A plain script (no `if __name__ == '__main__':`) may call it: the child never re-imports the script."
    (tmp_path / 'plain.py').write_text('import os, msllm_nb.course as C\nprint("child", C.run_reference(os.getpid) != os.getpid())\n')
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


def test_roadmap_runs_chapters_in_order_and_skips_hardware_cells(tmp_path):
    nbs = tmp_path / 'nbs'; nbs.mkdir()
    (nbs / '00_a.ipynb').write_text(json.dumps(NB))
    bad = json.loads(json.dumps(NB)); bad['cells'][1]['source'] = "print('the log before the failure')\nraise ValueError('chapter bug')"
    (nbs / '01_b.ipynb').write_text(json.dumps(bad))
    (nbs / 'index.ipynb').write_text(json.dumps(NB))
    r = subprocess.run([BIN / 'msllm-roadmap', '--nbs', nbs, '--out', tmp_path / 'runs'], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode != 0
    assert '01_b.ipynb: cell 1 failed: ValueError: chapter bug' in r.stderr
    assert 'what it printed (last 40 lines) ---\nthe log before the failure' in r.stderr, r.stderr[-2000:]  # CI keeps no notebook
    assert (nbs / 'ran.txt').read_text() == 'yes'  # executed in the notebook's own folder
    done = json.loads((tmp_path / 'runs' / '00_a.ipynb').read_text())
    assert 'hello from the chapter' in ''.join(done['cells'][0]['outputs'][0]['text'])
    assert done['cells'][1]['outputs'] == []  # the gpu cell was skipped, not run
    assert (tmp_path / 'runs' / '01_b.ipynb').exists()  # the failing notebook is kept for inspection
    assert json.loads((tmp_path / 'runs' / 'env_report.json').read_text())['mindspore']['version']


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
    assert '| slowest cells |' in (tmp_path / 'runs' / 'report.md').read_text()
    assert 'skipped cells: 1 (slow)' in r.stdout and 'msllm-roadmap --slow' in r.stdout
    r = subprocess.run([BIN / 'msllm-roadmap', '--nbs', nbs, '--out', tmp_path / 'runs2', '--slow', '--workers', '1'], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and (nbs / 'slow.txt').read_text() == 'ran'
    assert json.loads((tmp_path / 'runs2' / 'summary.json').read_text())['00_a']['skipped_cells'] == []


@pytest.mark.slow
def test_main_job_runs_every_chapter(tmp_path):
    "The README's main-job command (after install): every chapter notebook executes, its cluster cells too (CI's only run of them)."
    r = subprocess.run([BIN / 'msllm-roadmap', '--nbs', ROOT / 'nbs', '--out', tmp_path / 'roadmap'],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-6000:]
    summary = json.loads((tmp_path / 'roadmap' / 'summary.json').read_text())
    assert list(summary) == [p.stem for p in C.chapter_notebooks(ROOT / 'nbs')]
    assert summary['05_parity']['skipped_cells']  # 05's SmolLM2 parity: --slow
    assert summary['06_train_dp']['skipped_cells'] == []  # SmolLM2's continued pretraining is chapter 09's (slow)
    assert not (ROOT / 'nbs' / 'output').exists()
    report = (tmp_path / 'roadmap' / 'report.md').read_text()
    # the tiny model trained with 2-process data parallel (msrun), its validation loss, samples and loss plots
    assert 'Training run `06_train_dp/msrun2`' in report and '20 steps on 2 rank(s)' in report, report
    assert '- sample:' in report and '.png)' in report
    assert (tmp_path / 'roadmap' / '06_train_dp' / 'msrun2' / 'checkpoints' / 'latest').exists()
    # chapter 07: ZeRO-1 on 2 msrun ranks ran (its memory measurements are `slow`)
    assert (tmp_path / 'roadmap' / '07_zero' / 'zero2' / 'checkpoints' / 'step_00000006' / 'optimizer.rank0001.ckpt').exists()
    assert [c.split(' ', 1)[1] for c in summary['07_zero']['skipped_cells']] == ['(slow)'] * 4  # memory measurements, IR count, calibration, recompute
    # chapter 08: every injected failure was run, and the commcheck measurement came out of 2 ranks
    assert {'healthy', 'lr_typo', 'unshifted', 'frozen_embedding', 'slow_data'} <= {p.name for p in (tmp_path / 'roadmap' / '08_debug').iterdir()}
    assert json.loads((tmp_path / 'roadmap' / '08_debug' / 'commcheck.json').read_text())['world'] == 2
    assert summary['08_debug']['skipped_cells'] == []
    # chapter 09: the report opens with what the tiny model learned (SmolLM2's continued pretraining and harness parity are `slow`)
    assert report.startswith('# Roadmap report\n\nWhat the tiny model learned'), report[:300]
    assert [c.split(' ', 1)[1] for c in summary['09_eval']['skipped_cells']] == ['(slow)'] * 4  # SmolLM2: continued pretraining, harness parity
    # chapter 10: SFT through train_llm from a base model the chapter pretrains (SmolLM2's chat template is `slow`)
    assert (tmp_path / 'roadmap' / '10_sft' / 'sft' / 'checkpoints' / 'latest').exists()
    assert [c.split(' ', 1)[1] for c in summary['10_sft']['skipped_cells']] == ['(slow)']
    # a quiet terminal: no MindSpore ERROR line per graph node of a notebook cell (cells get real source files), and
    # no notebook cell shows a stderr box: what the learner is told is prose, tables or plain output
    out = r.stdout + r.stderr
    assert 'GetRealPath' not in out and '[ERROR]' not in out, [l for l in out.splitlines() if 'ERROR' in l][:5]
    assert 'Parsing: [' not in out and 'handle is closed' not in out  # the profiler's parser bars; a TensorBoard writer left open
    def progress_bar(text):  # tqdm's text bars go to stderr here; in JupyterLab they are widgets, not stderr boxes
        return all(re.search(r'\[[\d:]+(<[\d:?]+)?, [^\]]*\]\s*$', seg) for seg in re.split(r'[\r\n]', text) if seg.strip())
    boxes = [(nb.name, i, ''.join(o['text'])[:120]) for nb in sorted((tmp_path / 'roadmap').glob('*.ipynb'))
             for i, c in enumerate(json.loads(nb.read_text())['cells']) for o in c.get('outputs', [])
             if o.get('name') == 'stderr' and not progress_bar(''.join(o['text']))]
    assert not boxes, boxes
