"""The package's import graph, function-level imports included, follows the chapters' layers: nothing imports upward.

Layers, lowest first: cli (00·0: how every command answers bad input) < procs (00·1: reference work in its own process,
MindFormers imported quietly) < env (00) < clean_kernels (01 bonus: the cleaner's compiled loops) < clean (01) < bpe (02) < shards (03)
< model (04·0) < formats (04·1: checkpoint files) < convert (04) < fixtures (04·2: test models) < parity (05) < eval (09: what a
model learned; the trainer calls it) < train_step (06·0: the loss, the optimizer, the one step cell, the config) < sft (10:
conversations, packed windows and their loss, LoRA; a data format the loop reads) < launch (06·4: msrun, mpirun, the
collectives) < checkpoints (06·2) < metrics (06·3: the log, MFU, the profiler) < batches (06·1: each rank's rows of a global
batch) < zero (07: the strategies composed around the step) < train_llm (06: the loop and the script) < debug (08). Beside the
library, above it: the course tooling, ledger (00·2: the tutorial's claims checked) and course (00·1: the notebook runner,
the roadmap), which the library never imports. A module may import only modules of its own or a lower layer.
KNOWN_UPWARD lists upward imports tolerated for now, each with the issue that removes it: the test fails on any
other, and on a listed one that has gone (so that the list cannot go stale). Today it is empty.
"""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / 'msllm_nb'
LAYERS = ['cli', 'procs', 'env', 'clean_kernels', 'clean', 'bpe', 'shards', 'model', 'formats', 'convert', 'fixtures', 'parity', 'eval', 'train_step', 'sft',
          'launch', 'checkpoints', 'metrics', 'batches', 'zero', 'train_llm', 'debug',
          'ledger', 'course']  # the course tooling: beside the library, never below it
KNOWN_UPWARD = {}  # (importer, imported) → the issue that removes it


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
    g, rank = graph(), {m: i for i, m in enumerate(LAYERS)}
    upward = {(a, b): line for a, deps in g.items() for b, line in deps.items() if b != a and rank[b] > rank[a]}
    new = {f'msllm_nb/{a}.py:{line} imports {b}' for (a, b), line in upward.items() if (a, b) not in KNOWN_UPWARD}
    assert not new, f'imports from a lower layer to a higher one: {sorted(new)}'
    gone = set(KNOWN_UPWARD) - set(upward)
    assert not gone, f'these upward imports are gone: remove them from KNOWN_UPWARD: {sorted(gone)}'
    # and no circle other than the known upward edges close: with those edges removed, the graph is acyclic
    edges = {a: {b for b in deps if b != a and (a, b) not in KNOWN_UPWARD} for a, deps in g.items()}
    seen, stack = set(), []
    def visit(m):
        if m in stack: raise AssertionError(f'import circle: {" -> ".join(stack[stack.index(m):] + [m])}')
        if m in seen: return
        stack.append(m)
        for d in sorted(edges[m]): visit(d)
        stack.pop(); seen.add(m)
    for m in sorted(edges): visit(m)


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
