"""The package's import graph, function-level imports included, follows the course's layers: nothing imports upward.

The package is a subpackage per layer, lowest first, in the course's conceptual order (the modules of a layer in order too):
- core: cli (00·0: how every command answers bad input) < procs (00·1: reference work in its own process, MindFormers
  imported quietly) < env (00: the environment report);
- corpus (the data): kernels (01 bonus: the cleaner's compiled loops) < read (01·0) < normalise (01·1) < rules (01·2)
  < dedup (01·3) < clean (01: the pipeline, and the cleaner's whole API) < bpe (02) < shards (03);
- model: llama (04·0) < formats (04·1: checkpoint files) < convert (04) < fixtures (04·2: test models) < parity (05);
- train: config (06·5: the run's config, every field with its rules) < step (06·0: the loss, the optimizer, the one step
  cell) < plugins (06·6: the registry the loop asks by name) < launch (06·4) < checkpoints (06·2) < metrics (06·3)
  < batches (06·1: each rank's rows of a global batch) < zero (07: the strategies composed around the step);
- eval (09) and sft (10), plugged in: they fill the registry (settings.ini's `plugins`) and no library module imports them
  (sft reads eval's held-out split: the two are one layer);
- the loop and its script: train_llm (06), at the top of the package so that msrun and mpirun can run it as a file;
- diagnosis: debug (08).
Beside the library, above it: the course tooling, course.ledger (00·2: the tutorial's claims checked) and course.runner
(00·1: the notebook runner, the roadmap), which the library never imports. A module may import only modules of its own
or a lower layer, and no module but its plugged-in sibling imports a plugged-in one.
"""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / 'msllm_nb'
LOOP = 'train_llm'  # the one module at the package's top
LAYERS = {'core': ['core.cli', 'core.procs', 'core.env'],
          'corpus': ['corpus.kernels', 'corpus.read', 'corpus.normalise', 'corpus.rules', 'corpus.dedup', 'corpus.clean',
                     'corpus.bpe', 'corpus.shards'],
          'model': ['model.llama', 'model.formats', 'model.convert', 'model.fixtures', 'model.parity'],
          'train': ['train.config', 'train.step', 'train.plugins', 'train.launch', 'train.checkpoints', 'train.metrics',
                    'train.batches', 'train.zero'],
          'eval and sft': ['eval.lm', 'eval.tasks', 'eval.harness', 'sft.finetune'],  # plugged in through `train.plugins`
          'the loop': [LOOP],  # the loop and its script
          'diagnosis': ['debug.commcheck', 'debug.doctor'],
          'course': ['course.ledger', 'course.runner']}  # the course tooling: beside the library, never below it
ORDER = [m for ms in LAYERS.values() for m in ms]
PLUGGED_IN = set(LAYERS['eval and sft'])  # entered only through the registry: imported by no library module but each other
LIBRARY = set(ORDER) - set(LAYERS['course'])


def module_of(path):
    "A file's dotted name in the package: msllm_nb/corpus/clean.py -> 'corpus.clean'."
    return '.'.join(path.relative_to(PKG).with_suffix('').parts)


def resolve(name, here, level):
    "The module an import names, as a dotted name in the package (or None: not the package's), `here` importing it."
    if level: base = here.split('.')[:len(here.split('.')) - level]; name = '.'.join(base + ([name] if name else []))
    elif name == 'msllm_nb' or name.startswith('msllm_nb.'): name = name[len('msllm_nb.'):] if '.' in name else ''
    else: return None
    return name


def known(name):
    "The longest module of the package a dotted name starts with (an import of a package's object names its module)."
    parts = name.split('.')
    for k in range(len(parts), 0, -1):
        if '.'.join(parts[:k]) in ORDER: return '.'.join(parts[:k])
    return name


def imports_of(path, here=None):
    "The msllm_nb modules a file imports, at module level or inside functions: {module: first line}."
    here, out = here or module_of(path), {}
    for n in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(n, ast.Import): names = [resolve(a.name, here, 0) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            m = resolve(n.module or '', here, n.level)
            if m is not None: names = [known(f'{m}.{a.name}' if m else a.name) if known(m) not in ORDER else m for a in n.names]
        for m in names:
            if m: out.setdefault(known(m), n.lineno)
    return out


def graph():
    return {module_of(p): imports_of(p) for p in sorted(PKG.rglob('*.py')) if not p.stem.startswith('_') and p.parent.name != 'data'}


def test_every_module_has_a_layer():
    assert sorted(graph()) == sorted(ORDER), 'a module was added or removed: give it its place in LAYERS'


def test_no_import_goes_upward_or_round():
    "No tolerated exception: an import from a lower layer to a higher one fails, and so does any circle."
    g, rank = graph(), {m: i for i, m in enumerate(ORDER)}
    upward = sorted(f'msllm_nb.{a}:{line} imports {b}' for a, deps in g.items() for b, line in deps.items() if rank[b] > rank[a])
    assert not upward, f'imports from a lower layer to a higher one: {upward}'
    edges = {a: {b for b in deps if b != a} for a, deps in g.items()}  # within a layer's module order, no circle either
    seen, stack = set(), []
    def visit(m):
        if m in stack: raise AssertionError(f'import circle: {" -> ".join(stack[stack.index(m):] + [m])}')
        if m in seen: return
        stack.append(m)
        for d in sorted(edges[m]): visit(d)
        stack.pop(); seen.add(m)
    for m in sorted(edges): visit(m)


def test_plugged_in_chapters_are_entered_by_name_only():
    "Eval and SFT are reached through `plugins` (entry points), never imported by the library they plug into."
    g = graph()
    direct = sorted(f'msllm_nb.{a}:{line} imports {b}' for a, deps in g.items() if a in LIBRARY - PLUGGED_IN
                    for b, line in deps.items() if b in PLUGGED_IN)
    assert not direct, f'import the plugin by name instead (msllm_nb.train.plugins.plugin): {direct}'


def test_the_graph_is_read_right(tmp_path):
    "The reader sees every form of import the package uses, inside functions too, absolute and relative."
    f = tmp_path / 'x.py'
    f.write_text('import msllm_nb.model.llama as msm\nfrom msllm_nb.corpus.clean import iter_files\nfrom . import shards\n'
                 'from .bpe import train_bpe\nfrom ..core import env\nfrom ..train.step import x\ndef f():\n'
                 '    import msllm_nb.train.zero\n    from msllm_nb.debug.doctor import x\n')
    assert imports_of(f, 'corpus.clean') == {'model.llama': 1, 'corpus.clean': 2, 'corpus.shards': 3, 'corpus.bpe': 4,
                                             'core.env': 5, 'train.step': 6, 'train.zero': 8, 'debug.doctor': 9}
    g = tmp_path / 'y.py'; g.write_text('from .train.step import *\nfrom .corpus.bpe import load_tokenizer\n')
    assert imports_of(g, 'train_llm') == {'train.step': 1, 'corpus.bpe': 2}


def test_every_function_fits_on_a_screen():
    "Every function and method of the package is at most 60 lines (issue 19): long ones are split into named parts."
    long = [f'{p.relative_to(PKG.parent)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)'
            for p in sorted(PKG.rglob('*.py')) if not p.stem.startswith('_')
            for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > 60]
    assert not long, long


TRACE = '''
import json, sys
import msllm_nb.train_llm as tl
cfg = tl.load_config('tiny', sys.argv[2:])
calls = []
def receives_cfg(frame, event, arg):
    "A call of the package's code that is handed the run's config itself, or an object holding it (the loop's Run)."
    if event == 'call' and frame.f_globals.get('__name__', '').startswith('msllm_nb.'):
        if any(v is cfg or getattr(v, 'cfg', None) is cfg for v in frame.f_locals.values()):
            caller = frame.f_back.f_globals.get('__name__', '') if frame.f_back else ''
            calls.append((caller[len('msllm_nb.'):] if caller.startswith('msllm_nb.') else None, frame.f_globals['__name__'][len('msllm_nb.'):]))
sys.setprofile(receives_cfg)
try: tl.train(cfg, console=False)
finally: sys.setprofile(None)
json.dump({'calls': calls, 'loaded': sorted(m for m in sys.modules if m.startswith('msllm_nb.'))}, open(sys.argv[1], 'w'))
'''


def test_a_runs_config_goes_down_the_layers_once(tokens, tmp_path):
    """Followed from `train` through every call it is handed to, a pretraining run's config only goes down: each module
    that receives it (its own module, train.config, and the strategies around the step, train.zero) gets it from its own
    layer or a higher one, and a run that names neither evaluation nor SFT never even imports them."""
    import subprocess, sys, json
    (tmp_path / 'trace.py').write_text(TRACE)  # a file: MindSpore's compiler reads the source of what it compiles
    r = subprocess.run([sys.executable, tmp_path / 'trace.py', tmp_path / 'trace.json', f'token_dir={tokens}', f'out_dir={tmp_path / "run"}',
                        'steps=2', 'warmup_steps=1', 'seq_len=32', 'model.num_hidden_layers=1', 'val_every=2', 'save_every=2',
                        'progress=false', 'sample_prompts=[]'], capture_output=True, text=True, env={**__import__('os').environ, 'GLOG_v': '3'})
    assert r.returncode == 0, r.stderr[-2000:]
    t = json.loads((tmp_path / 'trace.json').read_text())
    rank = {m: i for i, m in enumerate(ORDER)}
    up = sorted({f'{a} -> {b}' for a, b in t['calls'] if a in rank and rank[b] > rank[a]})
    assert not up, f'the config is handed up a layer: {up}'  # every hand-over goes to the caller's layer or below
    stops = {b for _, b in t['calls']} - {LOOP}
    assert stops == {'train.config', 'train.zero'}, stops  # the config's own module, then the strategies around the step
    loaded = {known(m[len('msllm_nb.'):]) for m in t['loaded']}
    assert not loaded & (PLUGGED_IN | set(LAYERS['course'])), sorted(loaded & (PLUGGED_IN | set(LAYERS['course'])))
