"""Benchmark levers that claim something about numbers, not speed: the claim is tested here; the speed is measured in
`bench/` (never timed in a test)."""
import json, subprocess, sys
from pathlib import Path
from msllm_nb.core.procs import run_reference

BENCH = Path(__file__).resolve().parents[1] / 'bench'
sys.path[:0] = [str(BENCH), str(BENCH / 'probes')]
import optimizer_flat  # noqa: E402

SMALL = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64)


def test_flat_adamw_gives_the_per_tensor_update():
    """Issue 24 item 3: one AdamW update over a flat buffer per decay group (`bench/probes/optimizer_flat.py`, the row "fused flat
    AdamW" of `train_throughput_variants.md`) gives `make_optimizer`'s per-tensor numbers, within 1e-7 relative after
    3 updates from the same state and gradients. In a fresh process: GRAPH mode, one framework."""
    r = run_reference(optimizer_flat.agree, SMALL, timeout=300)
    assert r['rel'] <= 1e-7, r


def test_flat_adamw_check_can_fail():
    "The comparison sees a real difference: a flat update with another learning rate is not within 1e-7."
    r = run_reference(optimizer_flat.agree, SMALL, lr=2e-3, timeout=300)
    assert r['rel'] > 1e-7, r


def test_a_benchmark_records_the_load_and_warns_when_the_machine_was_busy(monkeypatch, capsys):
    "Every result table carries the load average at its start and end; above the core count it says the figures are suspect."
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'bench'))
    import _report
    monkeypatch.setattr(_report, 'LOAD_AT_START', (0.5, 0.5, 0.5))
    monkeypatch.setattr(_report.os, 'getloadavg', lambda: (0.7, 0.6, 0.5))
    quiet = _report.load_line()
    assert quiet.startswith('Load average (1 min): 0.50 at the start, 0.70 at the end') and 'WARNING' not in quiet
    assert capsys.readouterr().err == ''
    monkeypatch.setattr(_report.os, 'getloadavg', lambda: (_report.os.cpu_count() + 1.5, 1.0, 1.0))
    busy = _report.load_line()
    assert 'WARNING: the load exceeded' in busy and 'WARNING' in capsys.readouterr().err


def test_a_result_is_written_as_json_beside_its_table_with_the_load(monkeypatch, tmp_path):
    "write_result: the Markdown table, and a JSON copy with its rows, the load average at the start and the end, and the data given."
    import _report
    monkeypatch.setattr(_report, 'LOAD_AT_START', (0.25, 0.5, 0.75))
    monkeypatch.setattr(_report.os, 'getloadavg', lambda: (0.5, 0.5, 0.5))
    _report.write_result('demo', 'Demo', '| run | s |\n|---|---:|\n| baseline | 1.5 |\n| lever | 0.75 |', data={'reps': 3}, out=tmp_path)
    rec = json.loads((tmp_path / 'demo.json').read_text())
    assert rec['tables'] == [[{'run': 'baseline', 's': '1.5'}, {'run': 'lever', 's': '0.75'}]]
    assert rec['load_average'] == {'start': [0.25, 0.5, 0.75], 'end': [0.5, 0.5, 0.5], 'busy': False}
    assert rec['data'] == {'reps': 3} and (tmp_path / 'demo.md').read_text().startswith('# Demo\n')


def test_the_suite_index_is_current_and_every_result_has_its_json():
    """bench/README.md is what bench/run.py writes from the scripts; every benchmark asks a question, writes a table and is
    cited by a chapter or the README; every table in results/ belongs to one benchmark and has its JSON, with the same rows."""
    import run, _report
    assert (BENCH / 'README.md').read_text(encoding='utf-8') == run.readme(), 'run `python bench/run.py --readme`'
    rows = run.index()
    for r in rows:
        assert r['question'] and r['results'] and r['cited_by'], r
    owned = [p for r in rows for p in r['results']]
    tables = sorted(p.relative_to(BENCH).as_posix() for p in (BENCH / 'results').glob('*.md'))
    assert sorted(owned) == tables
    for md in (BENCH / 'results').glob('*.md'):
        rec = json.loads(md.with_suffix('.json').read_text(encoding='utf-8'))
        assert rec['tables'] == _report.markdown_tables(md.read_text(encoding='utf-8')), md.name


def test_the_runner_names_a_missing_benchmark_in_one_line():
    r = subprocess.run([sys.executable, str(BENCH / 'run.py'), 'no_such_bench'], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and 'no_such_bench' in r.stderr and 'zero' in r.stderr
