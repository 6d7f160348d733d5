"""Peak memory of converting SmolLM2-135M to a float32 MindSpore .ckpt: from HF safetensors, and from its GGUF file.

Baselines, measured in the same run: for safetensors, the tutorial's approach — load the whole state dict with torch,
convert every tensor to a MindSpore Tensor, then save_checkpoint; for GGUF, the transformers route — let
transformers read the GGUF (`from_pretrained(gguf_file=...)`, a whole PyTorch model) and save it as safetensors, the
step before a safetensors conversion. Each approach runs in its own fresh process; peak RSS is that
process's own VmHWM (its peak resident set; ru_maxrss would include the parent's peak, which Linux carries across
exec). We also measure a process that only imports what each approach imports, so the table shows the conversion's
own memory beside the interpreter + framework baseline.

    python bench/convert_memory.py            # prints the table and writes bench/results/convert_memory.md
"""
import os, subprocess, sys, tempfile, textwrap, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from _report import write_result  # noqa: E402
ENV = {**os.environ, 'GLOG_v': '3'}

OURS = '''
from msllm_nb.model.convert import convert_hf_to_ms
convert_hf_to_ms(SRC, DST)
'''
TUTORIAL = '''
import torch, mindspore as ms
from safetensors.torch import load_file
from msllm_nb.model.convert import hf_to_ms_name
sd = load_file(SRC + '/model.safetensors')                      # the whole dict in memory
params = [{'name': hf_to_ms_name(k), 'data': ms.Tensor(v.float().numpy())} for k, v in sd.items()]  # a converted copy
ms.save_checkpoint(params, DST)
'''
GGUF_OURS = '''
from msllm_nb.model.convert import convert_gguf_to_ms
convert_gguf_to_ms(SRC, DST)
'''
GGUF_TRANSFORMERS = '''
from msllm_nb.model.fixtures import build_hf_from_gguf
import tempfile, os
out = tempfile.mkdtemp()
build_hf_from_gguf(SRC, out + '/hf')
os.replace(out + '/hf/model.safetensors', DST)
'''
IMPORTS_OURS = 'import mindspore, msllm_nb.model.convert'
IMPORTS_GGUF_OURS = "import mindspore, gguf, msllm_nb.model.convert"
IMPORTS_GGUF_TRANSFORMERS = 'import torch, transformers, gguf, msllm_nb.model.fixtures'
IMPORTS_TUTORIAL = 'import torch, mindspore, safetensors.torch, msllm_nb.model.convert'


def peak_rss(code, src, dst):
    # VmHWM (this process's own peak), not ru_maxrss, which Linux carries over from the parent across exec
    prog = f'SRC, DST = {str(src)!r}, {str(dst)!r}\n' + textwrap.dedent(code) + \
        '\nimport re; print("RSS", int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024)'
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, '-c', prog], capture_output=True, text=True, env=ENV)
    if r.returncode: raise RuntimeError(r.stderr[-3000:])
    return int(r.stdout.split('RSS')[-1]), time.perf_counter() - t0


def main():
    from msllm_nb.core.procs import run_reference
    import msllm_nb.model.fixtures as fx
    hf = run_reference(fx.build_smollm2_hf, str(fx.fixture_dir() / 'smollm2-135m-instruct'))
    gg = str(fx.smollm2_gguf())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, code, imports, src in (('msllm-convert, HF safetensors (streamed)', OURS, IMPORTS_OURS, hf),
                                         ('tutorial: load all, convert all, save', TUTORIAL, IMPORTS_TUTORIAL, hf),
                                         ('msllm-convert, GGUF (streamed)', GGUF_OURS, IMPORTS_GGUF_OURS, gg),
                                         ('transformers reads the GGUF, saves safetensors', GGUF_TRANSFORMERS, IMPORTS_GGUF_TRANSFORMERS, gg)):
            dst = Path(tmp) / 'out.ckpt'
            base, _ = peak_rss(imports, src, dst)
            peak, secs = peak_rss(code, src, dst)
            size = (Path(tmp) / 'ref.ckpt').stat().st_size if src == gg and (Path(tmp) / 'ref.ckpt').exists() else dst.stat().st_size
            if name.startswith('msllm-convert, HF'): dst.rename(Path(tmp) / 'ref.ckpt')  # the float32 checkpoint every row is measured against
            rows.append({'approach': name, 'ckpt_MB': size / 2**20, 'import_baseline_MB': base / 2**20, 'peak_MB': peak / 2**20,
                         'peak/ckpt': peak / size, '(peak-baseline)/ckpt': (peak - base) / size, 'seconds': secs})
            dst.unlink(missing_ok=True)
    lines = ['| approach | fp32 ckpt MB | imports-only RSS MB | peak RSS MB | peak ÷ ckpt | (peak − imports) ÷ ckpt | s |',
             '|---|---|---|---|---|---|---|']
    for r in rows:
        lines.append(f"| {r['approach']} | {r['ckpt_MB']:.0f} | {r['import_baseline_MB']:.0f} | {r['peak_MB']:.0f} | "
                     f"{r['peak/ckpt']:.2f} | {r['(peak-baseline)/ckpt']:.2f} | {r['seconds']:.1f} |")
    lines.append(f"\nPeak RSS, streamed ÷ baseline: safetensors {rows[0]['peak_MB'] / rows[1]['peak_MB']:.2f}× (tutorial), "
                 f"GGUF {rows[2]['peak_MB'] / rows[3]['peak_MB']:.2f}× (transformers). GGUF peak ÷ the fp32 checkpoint: {rows[2]['peak/ckpt']:.2f} "
                 '(goal ≤ 1.5).')
    write_result('convert_memory', 'Conversion memory: SmolLM2-135M to a float32 checkpoint', '\n'.join(lines))


if __name__ == '__main__':
    main()
