"""RMSNorm as one MindSpore custom operator (`ops.Custom`, CPU AOT: C++ compiled with the system's g++), against the model's.

Issue 24 item 4: fewer, larger kernels. The model's RMSNorm (chapter 04·0, `_RMSNormCore`) is about 7 kernels forward
and 13 backward, each a pass over the activations. `rmsnorm_custom.cc` does the forward in one kernel and the
gradient in one more, a row at a time. The model's cell is the reference: values and gradients are compared with it
before anything is timed.

- `fused_core(eps, dtype)`: a cell with `_RMSNormCore`'s interface (`(x, w)`, a `bprop`) that runs the two custom kernels;
  `train_throughput.py --variants` puts it in the model (the variant "fused RMSNorm (ops.Custom)").
- `build()`: compiles the .so once per source version into a cache folder, and says in one line why when it cannot
  (no g++, a compile error). MindSpore only loads custom libraries from the folders named in `MS_CUSTOM_AOT_WHITE_LIST`.
- `main`: one norm at the 27M size's shape (4 × 256 × 512), forward and backward, the custom cell against the model's:
  the largest differences, and the median time of each.

    python bench/probes/rmsnorm_custom.py    # prints the table and writes bench/results/rmsnorm_custom.md
"""
import hashlib, os, shutil, subprocess, sys, tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))  # bench/, for _report and the benchmarks it builds on
from _report import median_ms, write_result  # noqa: E402

SRC = Path(__file__).with_suffix('.cc')
SHAPE, EPS, WARMUP, REPS = (4, 256, 512), 1e-5, 5, 30


def build()->Path:
    "The compiled library (cached by the source's hash); RuntimeError with the reason in one line if it cannot be built."
    cxx = shutil.which(os.environ.get('CXX', 'g++'))
    if cxx is None: raise RuntimeError('no C++ compiler (g++, or $CXX) on PATH: the custom RMSNorm cannot be built')
    out = Path(tempfile.gettempdir()) / 'msllm_custom' / hashlib.sha256(SRC.read_bytes()).hexdigest()[:16] / 'librmsnorm.so'
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([cxx, '-O3', '-march=native', '-fopenmp-simd', '-shared', '-fPIC', '-o', str(out), str(SRC)], capture_output=True, text=True)
        if r.returncode: raise RuntimeError(f'{SRC.name}: {cxx} failed: ' + (r.stderr.strip().splitlines() or ['no message'])[0])
    os.environ['MS_CUSTOM_AOT_WHITE_LIST'] = str(out.parent.parent)  # read when MindSpore loads the library
    return out


def fused_core(eps, dtype=None):
    "A cell like the model's `_RMSNormCore(eps, dtype)`, float32 only: forward and gradient each one custom kernel."
    import mindspore as ms
    from mindspore import nn, ops
    lib = build()
    fwd = ops.Custom(f'{lib}:RmsFwd', out_shape=lambda x, w, e: x, out_dtype=lambda x, w, e: x, func_type='aot')
    bwd = ops.Custom(f'{lib}:RmsBwd', out_shape=lambda x, w, g, e: (x, w), out_dtype=lambda x, w, g, e: (x, w), func_type='aot')

    class FusedRMSNormCore(nn.Cell):
        def __init__(self):
            super().__init__(); self.eps = ms.Tensor([eps], ms.float32)
        def construct(self, x, w): return fwd(x, w, self.eps)
        def bprop(self, x, w, out, dout): return bwd(x, w, dout, self.eps)
    return FusedRMSNormCore()


def _median_ms(fn): return median_ms(fn, WARMUP, REPS)


def compare():
    "{'model'|'custom': {'forward ms', 'forward and backward ms'}, 'diff': largest |difference| ÷ largest |value| of y, dx, dw}."
    import numpy as np, mindspore as ms
    ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
    from msllm_nb.model.llama import _RMSNormCore
    rng = np.random.default_rng(0)
    x, w = ms.Tensor(rng.standard_normal(SHAPE).astype(np.float32)), ms.Tensor((1 + 0.1 * rng.standard_normal(SHAPE[-1])).astype(np.float32))
    dy = ms.Tensor(rng.standard_normal(SHAPE).astype(np.float32))
    class Loss(ms.nn.Cell):
        def __init__(self, core): super().__init__(); self.core = core
        def construct(self, a, b, d): return (self.core(a, b) * d).sum()
    out, res = {}, {}
    for name, core in (('model', _RMSNormCore(EPS)), ('custom', fused_core(EPS))):
        g = ms.value_and_grad(Loss(core), grad_position=(0, 1))
        res[name] = [core(x, w).asnumpy(), *(t.asnumpy() for t in g(x, w, dy)[1])]
        out[name] = {'forward ms': _median_ms(lambda: core(x, w).asnumpy()), 'forward and backward ms': _median_ms(lambda: g(x, w, dy)[0].asnumpy())}
    out['diff'] = {k: float(np.abs(a - b).max() / np.abs(a).max()) for k, a, b in zip(('y', 'dx', 'dw'), res['model'], res['custom'])}
    return out


def main():
    os.environ.setdefault('GLOG_v', '3')
    try: r = compare()
    except RuntimeError as e: print(f'rmsnorm_custom: {e}', file=sys.stderr); sys.exit(1)
    rows = ['| RMSNorm cell | forward ms | forward and backward ms |', '|---|---:|---:|']
    rows += [f"| {name} | {r[k]['forward ms']:.2f} | {r[k]['forward and backward ms']:.2f} |"
             for name, k in (('the model\'s `_RMSNormCore` (about 7 kernels forward, 13 backward)', 'model'), ('`ops.Custom`: one C++ kernel each way', 'custom'))]
    diff = ', '.join(f'{k} {v:.1e}' for k, v in r['diff'].items())
    write_result('rmsnorm_custom', 'RMSNorm as one custom CPU kernel each way (ops.Custom, AOT) against the model\'s',
                 '\n'.join(rows) + f'\n\nx {list(SHAPE)} float32 (the 27M size, 4 × 256), eps {EPS}; the backward of sum(y · dy) for a fixed random dy; '
                 f'median of {REPS} calls after {WARMUP}, each a GRAPH-mode call with its result copied out. Largest difference ÷ largest '
                 f'value, custom against the model: {diff} (float32 sums in another order). The library: `{SRC.name}`, built with g++ '
                 '-O3 -march=native.')


if __name__ == '__main__':
    main()
