"""Peak memory of a parity check on SmolLM2-135M (chapter 05): the MindSpore process and the PyTorch reference process.

`check_parity` runs the reference first, in its own fresh process, and loads the MindSpore model only once that process
has exited with its outputs, so the two models are never in memory together. Baseline, measured in the same run: the
same check with the two models held at once (the MindSpore model loaded, then the reference started), the order
`check_parity` used before. Each process's peak is its own VmHWM; the two are added when they overlap.

    python bench/parity_memory.py            # prints the table and writes bench/results/parity_memory.md
"""
import json, os, subprocess, sys, tempfile, textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _report import write_result  # noqa: E402
ENV = {**os.environ, 'GLOG_v': '3'}

PROG = '''
import json, re, resource, sys
from pathlib import Path
import msllm_nb.model.parity as P
from msllm_nb.model.formats import load_model
sys.path.insert(0, BENCH)
import parity_memory as PM
HF, CKPT, HELD = sys.argv[1], sys.argv[2], sys.argv[3] == 'held'
ids = [[5, 17, 300, 1200, 42, 9, 77, 512] * 3] * 2
model = load_model(CKPT) if HELD else None  # the baseline holds the MindSpore model while the reference runs
ref = P.run_reference(PM.reference_with_peak, HF, ids, 8)
child = ref.pop('peak_rss')
model = model or load_model(CKPT)
r = P.compare(ref, P.ms_outputs(model, ids, 8))
print('RESULT' + json.dumps({'passed': r['passed'], 'parent': PM._hwm(), 'child': child}))
'''


def _hwm():
    import re
    return int(re.search(r'VmHWM:\s+(\d+) kB', open('/proc/self/status').read()).group(1)) * 1024


def reference_with_peak(hf, ids, n_gen):
    "chapter 05's reference outputs, plus this (reference) process's own peak RSS."
    import msllm_nb.model.parity as P
    out = P.hf_reference(hf, ids, n_gen)
    out['peak_rss'] = _hwm()
    return out


def main():
    from msllm_nb.core.procs import run_reference
    import msllm_nb.model.fixtures as fx
    import msllm_nb.model.convert as cv
    hf = run_reference(fx.build_smollm2_hf, str(fx.fixture_dir() / 'smollm2-135m-instruct'))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / 'smol.ckpt'
        cv.convert_gguf_to_ms(fx.smollm2_gguf(), ckpt)
        size = ckpt.stat().st_size
        for name, mode in (('check_parity: the reference first, then the MindSpore model', 'seq'),
                           ('baseline: both models held at once', 'held')):
            r = subprocess.run([sys.executable, '-c', f'BENCH = {str(Path(__file__).parent)!r}\n' + textwrap.dedent(PROG), hf, str(ckpt), mode], capture_output=True, text=True, env=ENV)
            if r.returncode: raise RuntimeError(r.stderr[-3000:])
            m = json.loads(r.stdout.split('RESULT')[-1])
            together = m['parent'] + m['child'] if mode == 'held' else max(m['parent'], m['child'])
            rows.append((name, m, together))
    lines = ['| approach | MindSpore process peak MB | reference process peak MB | peak at once MB | ÷ fp32 ckpt | parity |', '|---|---|---|---|---|---|']
    for name, m, t in rows:
        lines.append(f"| {name} | {m['parent'] / 2**20:.0f} | {m['child'] / 2**20:.0f} | {t / 2**20:.0f} | {t / size:.2f} | {'passed' if m['passed'] else 'FAILED'} |")
    lines.append(f'\nfp32 checkpoint: {size / 2**20:.0f} MB. Peak at once, check_parity ÷ baseline: {rows[0][2] / rows[1][2]:.2f}× '
                 f'(goal: ≤ 2.5× the checkpoint; measured {rows[0][2] / size:.2f}×).')
    write_result('parity_memory', 'Parity-check memory: SmolLM2-135M (float32)', '\n'.join(lines))


if __name__ == '__main__':
    main()
