"""Every command answers bad input the same way (chapter 00·0, `msllm_nb.core.cli`): one line naming the flag, key or file,
exit 2 for usage and config mistakes, no traceback, nothing written. And every chapter, test and benchmark that starts
one of the project's commands finds it through the running interpreter, never through the caller's PATH.

The flag fuzz reads each console script's parser: a number flag must declare its bounds (`cli.Bounds`), and each value
its bounds refuse is tried. The wrong-input cases run the installed commands on inputs of our own, each command at least once as a newcomer would.
"""
import configparser, contextlib, importlib, io, json, re, subprocess, sys
from pathlib import Path
import pytest
from msllm_nb.core.cli import parser_of
from train_helpers import run_in_process

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def console_scripts() -> dict:
    "name → the function behind it, from settings.ini (what `pip install` makes)."
    cfg = configparser.ConfigParser(delimiters=['=']); cfg.read(ROOT / 'settings.ini', encoding='utf-8')
    out = {}
    for line in cfg['DEFAULT']['console_scripts'].strip().split('\n'):
        name, spec = (x.strip() for x in line.split('=', 1)); mod, fn = spec.split(':')
        out[name] = getattr(importlib.import_module(mod), fn)
    return out


SCRIPTS = console_scripts()
LAUNCHERS = {'msrun', 'mpirun'}  # console scripts of mindspore and openmpi, in the same bin folder


def flags(name):
    """(parser, the actions a user sets) of a console script. msllm-lm-eval takes the harness's own command line, not
    `call_parse` arguments: its parser is `eval.lm_eval_parser()`'s `run` command."""
    if name == 'msllm-lm-eval':
        from msllm_nb.eval.harness import lm_eval_parser
        p = lm_eval_parser()._subparsers.choices['run']
    else: p = parser_of(SCRIPTS[name])
    return p, [a for a in p._actions if a.dest not in ('help', 'pdb', 'xtra')]


def parse(p, argv):
    "(exit status, stderr) of parsing argv: 0 when it parses."
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try: p.parse_args(argv); return 0, err.getvalue()
        except SystemExit as e: return e.code, err.getvalue()


def positionals(acts, skip=None):
    "Placeholder values for the positional arguments (not `skip`)."
    return [x for a in acts if not a.option_strings and a is not skip for x in (['x'] if a.nargs in (None, '+') else [])]


@pytest.mark.parametrize('name', sorted(SCRIPTS))
def test_every_number_flag_declares_its_bounds(name):
    "A flag of type int or float with no bounds would take 0, -1, nan or inf: each number flag's type is a `cli.bounded`."
    _, acts = flags(name)
    loose = [a.option_strings[0] if a.option_strings else a.dest for a in acts if a.type in (int, float)]
    assert not loose, f'{name}: number flags without bounds: {loose}'


@pytest.mark.parametrize('name', sorted(SCRIPTS))
def test_every_flag_refuses_what_its_bounds_or_choices_refuse(name):
    p, acts = flags(name)
    tried = 0
    for a in acts:
        b = getattr(a.type, 'bounds', None)
        bad = b.outside() if b is not None else (['no-such-choice'] if a.choices else [])
        for v in bad:
            argv = positionals(acts, a) + ([a.option_strings[0], v] if a.option_strings else [v])
            code, err = parse(p, argv)
            flag = a.option_strings[0] if a.option_strings else a.dest
            assert code == 2, f'{name} {flag} {v!r}: exit {code}'
            assert err.count('\n') == 1 and flag in err and 'Traceback' not in err, f'{name} {flag} {v!r}: {err!r}'
            tried += 1
    code, err = parse(p, positionals(acts) + ['--no-such-flag'])
    assert code == 2 and err.count('\n') == 1 and '--no-such-flag' in err, err
    assert tried or not any(getattr(a.type, 'bounds', None) or a.choices for a in acts)
    assert acts, f'{name}: no flags read: the fuzz would test nothing'


def run(name, argv, cwd, **kw):
    "The console script `name` from the interpreter's own bin folder, in a newcomer's environment (no venv on PATH)."
    return subprocess.run([str(BIN / name), *map(str, argv)], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={'PATH': '/usr/bin:/bin', 'HOME': str(cwd), 'GLOG_v': '3', 'LANG': 'C.UTF-8'}, **kw)


# one wrong input per command, in a folder of its own: (command, its arguments, expected exit status, text the line must hold)
CASES = [
    ('msllm-env', ['--device', 'TPU'], 2, '--device'),
    ('msllm-clean', ['missing.txt', '--out', 'out.txt'], 2, 'missing.txt'),
    ('msllm-clean', ['corpus.txt', '--out', 'out.txt', '--workers', '0'], 2, '--workers'),
    ('msllm-bpe', ['missing.txt', '--out', 'tok'], 2, 'missing.txt'),
    ('msllm-bpe', ['corpus.txt', '--out', 'tok', '--vocab_size', 'nan'], 2, '--vocab_size'),
    ('msllm-shard', ['corpus.txt', '--tokenizer', 'corpus.txt', '--out', 'shards'], 2, 'corpus.txt'),
    ('msllm-shard', ['corpus.txt', '--tokenizer', 'missing.model', '--out', 'shards', '--shard_mb', '0'], 2, '--shard_mb'),
    ('msllm-convert', ['missing_hf', 'out'], 2, 'missing_hf'),
    ('msllm-parity', ['missing_hf', '--ckpt', 'missing.ckpt'], 2, 'missing'),
    ('msllm-roadmap', ['--nbs', 'missing'], 2, '--nbs'),
    ('msllm-roadmap', ['--workers', '0'], 2, '--workers'),
    ('msllm-outputs', ['--run', 'missing_run'], 2, 'missing_run'),
    ('msllm-outputs', ['--max_lines', '0'], 2, '--max_lines'),
    ('train_llm', ['--config', 'missing.yaml'], 2, 'missing.yaml'),
    ('train_llm', ['--config', 'broken.yaml', '--check'], 2, 'broken.yaml'),
    ('train_llm', ['--set', 'lr=inf', '--check'], 2, 'lr'),
    ('train_llm', ['--set', 'grad_clip=nan', '--check'], 2, 'grad_clip'),
    ('train_llm', ['--set', 'seq_len=1', '--check'], 2, 'seq_len'),
    ('train_llm', ['--set', 'steps=abc', '--check'], 2, 'steps'),
    ('msllm-memory', ['--config', 'missing.yaml'], 2, 'missing.yaml'),
    ('msllm-memory', ['--devices', '-1'], 2, '--devices'),
    ('msllm-doctor', ['missing_run'], 2, 'missing_run'),
    ('msllm-doctor', ['corpus.txt'], 2, 'corpus.txt'),
    ('msllm-commcheck', ['--iters', '0'], 2, '--iters'),
    ('msllm-commcheck', ['--sizes', 'abc'], 2, '--sizes'),
    ('msllm-commcheck', ['--timeout', '0'], 2, '--timeout'),
    ('msllm-eval', ['missing_run'], 2, 'missing_run'),
    ('msllm-eval', ['missing_run', '--limit', '0'], 2, '--limit'),
    ('msllm-lm-eval', [], 2, 'msllm-lm-eval'),
    ('msllm-lm-eval', ['--model', 'msllm', '--model_args', 'ckpt=missing_run', '--tasks', 'msllm_cont_en', '--limit', '0'], 2, '--limit'),
    ('msllm-sft', ['missing.jsonl', '--tokenizer', 'missing.model'], 2, 'missing'),
    ('msllm-sft', ['chats.jsonl', '--tokenizer', 'corpus.txt'], 2, 'corpus.txt'),
]


# Each command's first case runs as a real process in a newcomer's environment (what the C++ side prints included); its
# other cases run in this process (`run_in_process`: the same console script, without ~3-15 s of start-up and imports each).
IN_PROCESS = {i for i, c in enumerate(CASES) if any(d[0] == c[0] for d in CASES[:i])}


@pytest.mark.parametrize('name,argv,code,names,in_process', [(*c, i in IN_PROCESS) for i, c in enumerate(CASES)],
                         ids=[' '.join([c[0], *c[1]]) for c in CASES])
def test_a_wrong_input_gets_one_line_and_writes_nothing(tmp_path, name, argv, code, names, in_process):
    (tmp_path / 'corpus.txt').write_text('one line of text\nanother line\n', encoding='utf-8')
    (tmp_path / 'broken.yaml').write_text('steps: 10\nmodel: {preset: tiny\n', encoding='utf-8')
    (tmp_path / 'chats.jsonl').write_text(json.dumps({'messages': [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'hello'}]}) + '\n')
    before = sorted(p.name for p in tmp_path.iterdir())
    r = run_in_process(name, *argv, cwd=tmp_path) if in_process else run(name, argv, tmp_path)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == code, f'exit {r.returncode}: {r.stderr[-1500:]}'
    assert 'Traceback' not in r.stderr + r.stdout, r.stderr[-3000:]
    assert len(lines) == 1 and names in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == before, 'a refused command wrote files'


def test_every_command_has_a_case():
    assert {c[0] for c in CASES} == set(SCRIPTS)


# Where the project starts one of its own commands: a list whose first item is a bare command name, or `which(name)`.
BARE = re.compile(r"""(\[\s*|which\(\s*|Popen\(\s*|run\(\s*)['"](%s)['"]""" % '|'.join(map(re.escape, sorted(set(SCRIPTS) | LAUNCHERS))))


def sources():
    "Every code cell of every notebook, and every Python file of the package, the tests and the benchmarks."
    for nb in sorted((ROOT / 'nbs').glob('*.ipynb')):
        for i, c in enumerate(json.loads(nb.read_text(encoding='utf-8'))['cells']):
            if c['cell_type'] == 'code': yield f'{nb.name} cell {i}', ''.join(c['source'])
    for d in ('msllm_nb', 'tests', 'bench'):
        for f in sorted((ROOT / d).rglob('*.py')):
            if f.name != '_modidx.py':
                yield str(f.relative_to(ROOT)), f.read_text(encoding='utf-8')


def test_commands_are_found_through_the_interpreter_not_the_path():
    """A newcomer's shell has no venv on PATH: `msllm-sft` started by its bare name fails there (FileNotFoundError).
    Commands are started as `Path(sys.executable).parent/'msllm-sft'` (or `python -m`)."""
    found = [f'{where}: {m.group(0)}' for where, text in sources() for m in BARE.finditer(text)
             if "sys.argv" not in text[max(0, m.start() - 40):m.start()]]  # setting argv[0] for an in-process call is not a launch
    assert not found, found


def test_the_check_finds_a_bare_command():
    launch = 'subprocess.run(['  # split from the names, so that this file's own source holds no bare launch
    assert BARE.search("r = " + launch + "'msllm-sft', str(user_file)])")
    assert BARE.search(launch + "'msrun', '--worker_num=2', f'--log_dir={logs}'])")
    assert not BARE.search("subprocess.run([str(Path(sys.executable).parent/'msllm-sft'), x])")


def config_fields():
    import dataclasses
    from msllm_nb.train.config import TrainConfig
    return dataclasses.fields(TrainConfig)


def wrong_values(f) -> list:
    "Values a config field must refuse, from what it declares: its bounds, its choices, or its kind."
    m = f.metadata
    if m.get('bounds') is not None: return m['bounds'].outside()
    if m.get('choices') is not None: return ['no-such-choice']
    return {'bool': ['maybe', '3'], 'list': ['notalist', '3'], 'dict': ['notamapping', '3']}.get(f.type, [])


@pytest.mark.parametrize('f', config_fields(), ids=lambda f: f.name)
def test_every_config_field_refuses_wrong_values_naming_the_key(f):
    "`--set key=value` (and the same key in a YAML file) with a value the field refuses: an error naming the key and where it came from."
    from msllm_nb.train.config import load_config
    from msllm_nb.core.cli import UsageError
    bad = wrong_values(f)
    if f.type in ('int', 'float'): assert f.metadata.get('bounds') is not None, f'{f.name}: a number field with no bounds'
    for v in bad:
        with pytest.raises(UsageError) as e: load_config(None, [f'{f.name}={v}'])
        msg = str(e.value)
        assert f.name in msg and f'--set {f.name}=' in msg and '\n' not in msg, msg


def test_a_config_file_mistake_names_the_file(tmp_path):
    from msllm_nb.train.config import load_config
    from msllm_nb.core.cli import UsageError
    p = tmp_path / 'run.yaml'; p.write_text('steps: 10\nlr: .inf\n')
    with pytest.raises(UsageError, match=r'run\.yaml.*lr'): load_config(p)
    p.write_text('steps: [1, 2\n')
    with pytest.raises(UsageError, match=r'run\.yaml'): load_config(p)
