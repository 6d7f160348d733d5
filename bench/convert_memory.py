"""Peak memory of converting SmolLM2-135M (HF safetensors, float32) to a MindSpore .ckpt.

Baseline, measured in the same run: the tutorial's approach — load the whole state dict with torch, convert every
tensor to a MindSpore Tensor, then save_checkpoint. Each approach runs in its own fresh process; peak RSS is that
process's own VmHWM (its peak resident set; ru_maxrss would include the parent's peak, which Linux carries across
exec). We also measure a process that only imports what each approach imports, so the table shows the conversion's
own memory beside the interpreter + framework baseline.

    python bench/convert_memory.py            # prints the table and writes bench/results/convert_memory.md
"""
import json, os, subprocess, sys, tempfile, textwrap, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from _report import write_result  # noqa: E402
ENV = {**os.environ, 'GLOG_v': '3'}

OURS = '''
from msllm_nb.model import convert_hf_to_ms
convert_hf_to_ms(SRC, DST)
'''
TUTORIAL = '''
import torch, mindspore as ms
from safetensors.torch import load_file
from msllm_nb.model import hf_to_ms_name
sd = load_file(SRC + '/model.safetensors')                      # the whole dict in memory
params = [{'name': hf_to_ms_name(k), 'data': ms.Tensor(v.float().numpy())} for k, v in sd.items()]  # a converted copy
ms.save_checkpoint(params, DST)
'''
IMPORTS_OURS = 'import mindspore, msllm_nb.model'
IMPORTS_TUTORIAL = 'import torch, mindspore, safetensors.torch, msllm_nb.model'


def peak_rss(code, src, dst):
    # VmHWM (this process's own peak), not ru_maxrss, which Linux carries over from the parent across exec
    prog = f'SRC, DST = {str(src)!r}, {str(dst)!r}\n' + textwrap.dedent(code) + \
        '\nimport re; print("RSS", int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024)'
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, '-c', prog], capture_output=True, text=True, env=ENV)
    if r.returncode: raise RuntimeError(r.stderr[-3000:])
    return int(r.stdout.split('RSS')[-1]), time.perf_counter() - t0


def main():
    from msllm_nb.env import run_reference
    import msllm_nb.model as M
    src = run_reference(M.build_smollm2_hf, str(M.fixture_dir() / 'smollm2-135m-instruct'))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, code, imports in (('msllm-convert (streamed)', OURS, IMPORTS_OURS),
                                    ('tutorial: load all, convert all, save', TUTORIAL, IMPORTS_TUTORIAL)):
            dst = Path(tmp) / 'out.ckpt'
            base, _ = peak_rss(imports, src, dst)
            peak, secs = peak_rss(code, src, dst)
            size = dst.stat().st_size
            rows.append({'approach': name, 'ckpt_MB': size / 2**20, 'import_baseline_MB': base / 2**20, 'peak_MB': peak / 2**20,
                         'peak/ckpt': peak / size, '(peak-baseline)/ckpt': (peak - base) / size, 'seconds': secs})
            dst.unlink()
    lines = ['| approach | ckpt MB | imports-only RSS MB | peak RSS MB | peak ÷ ckpt | (peak − imports) ÷ ckpt | s |',
             '|---|---|---|---|---|---|---|']
    for r in rows:
        lines.append(f"| {r['approach']} | {r['ckpt_MB']:.0f} | {r['import_baseline_MB']:.0f} | {r['peak_MB']:.0f} | "
                     f"{r['peak/ckpt']:.2f} | {r['(peak-baseline)/ckpt']:.2f} | {r['seconds']:.1f} |")
    ratio = rows[0]['peak_MB'] / rows[1]['peak_MB']
    lines.append(f'\nPeak RSS, streamed ÷ tutorial baseline: {ratio:.2f}×.')
    write_result('convert_memory', 'Conversion memory: SmolLM2-135M (float32)', '\n'.join(lines))


if __name__ == '__main__':
    main()
