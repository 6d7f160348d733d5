"""The package's import graph, function-level imports included, follows the course's layers: nothing imports upward.

The layers, lowest first, in the course's conceptual order:
- data: cli (00·0: how every command answers bad input) < procs (00·1: reference work in its own process, MindFormers
  imported quietly) < env (00) < clean_kernels (01 bonus: the cleaner's compiled loops) < clean (01) < bpe (02) < shards (03);
- model: model (04·0) < formats (04·1: checkpoint files) < convert (04) < fixtures (04·2: test models) < parity (05);
- training: train_config (06·5: the run's config, every field with its rules) < train_step (06·0: the loss, the
  optimizer, the one step cell) < plugins (06·6: the registry the loop
  asks by name) < launch (06·4) < checkpoints (06·2) < metrics (06·3) < batches (06·1: each rank's rows of a global batch)
  < zero (07: the strategies composed around the step);
- eval (09) and sft (10), plugged in: they fill the registry (settings.ini's `plugins`) and no library module imports them
  (sft reads eval's held-out split: the two are one layer);
- the loop and its script: train_llm (06);
- diagnosis: debug (08).
Beside the library, above it: the course tooling, ledger (00·2: the tutorial's claims checked) and course (00·1: the
notebook runner, the roadmap), which the library never imports. A module may import only modules of its own or a lower
layer, and no module but its plugged-in sibling imports a plugged-in one.
"""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / 'msllm_nb'
LAYERS = ['cli', 'procs', 'env', 'clean_kernels', 'clean', 'bpe', 'shards',  # data
          'model', 'formats', 'convert', 'fixtures', 'parity',  # model
          'train_config', 'train_step', 'plugins', 'launch', 'checkpoints', 'metrics', 'batches', 'zero',  # training
          'eval', 'sft',  # plugged in through `plugins`
          'train_llm',  # the loop and its script
          'debug',  # diagnosis
          'ledger', 'course']  # the course tooling: beside the library, never below it
PLUGGED_IN = {'eval', 'sft'}  # entered only through the registry: imported by no library module but each other
LIBRARY = set(LAYERS) - {'ledger', 'course'}


def imports_of(path):
    "The msllm_nb modules a file imports, at module level or inside functions: {module: first line}."
    out = {}
    for n in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(n, ast.Import): names = [a.name.split('.')[1] for a in n.names if a.name.startswith('msllm_nb.')]
        elif isinstance(n, ast.ImportFrom):
            if n.level: names = [n.module.split('.')[0]] if n.module else [a.name for a in n.names]
            elif n.module == 'msllm_nb': names = [a.name for a in n.names]
            elif n.module and n.module.startswith('msllm_nb.'): names = [n.module.split('.')[1]]
        for m in names: out.setdefault(m, n.lineno)
    return out


def graph():
    return {p.stem: imports_of(p) for p in sorted(PKG.glob('*.py')) if not p.stem.startswith('_')}


def test_every_module_has_a_layer():
    assert sorted(graph()) == sorted(LAYERS), 'a module was added or removed: give it its place in LAYERS'


def test_no_import_goes_upward_or_round():
    "No tolerated exception: an import from a lower layer to a higher one fails, and so does any circle."
    g, rank = graph(), {m: i for i, m in enumerate(LAYERS)}
    upward = sorted(f'msllm_nb/{a}.py:{line} imports {b}' for a, deps in g.items() for b, line in deps.items() if rank[b] > rank[a])
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
    direct = sorted(f'msllm_nb/{a}.py:{line} imports {b}' for a, deps in g.items() if a in LIBRARY - PLUGGED_IN
                    for b, line in deps.items() if b in PLUGGED_IN)
    assert not direct, f'import the plugin by name instead (msllm_nb.plugins.plugin): {direct}'


def test_the_graph_is_read_right(tmp_path):
    "The reader sees every form of import the package uses, inside functions too."
    f = tmp_path / 'x.py'
    f.write_text('import msllm_nb.model as msm\nfrom msllm_nb.clean import iter_files\nfrom . import shards\n'
                 'from .bpe import train_bpe\nfrom msllm_nb import env\ndef f():\n    import msllm_nb.zero\n    from msllm_nb.debug import x\n')
    assert imports_of(f) == {'model': 1, 'clean': 2, 'shards': 3, 'bpe': 4, 'env': 5, 'zero': 7, 'debug': 8}


def test_every_function_fits_on_a_screen():
    "Every function and method of the package is at most 60 lines (issue 19): long ones are split into named parts."
    long = [f'msllm_nb/{p.name}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)'
            for p in sorted(PKG.glob('*.py')) if not p.stem.startswith('_')
            for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > 60]
    assert not long, long
