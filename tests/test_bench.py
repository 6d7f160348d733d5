"""Benchmark levers that claim something about numbers, not speed: the claim is tested here; the speed is measured in
`bench/` (never timed in a test)."""
import sys
from pathlib import Path
from msllm_nb.course import run_reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'bench'))
import optimizer_flat  # noqa: E402

SMALL = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64)


def test_flat_adamw_gives_the_per_tensor_update():
    """Issue 24 item 3: one AdamW update over a flat buffer per decay group (`bench/optimizer_flat.py`, the row "fused flat
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
