"""msllm-eval tried as a new user would (chapter 09): a run trained by train_llm, the same model converted to a Hugging
Face folder with msllm-convert, text files of one's own, and bad input that must fail in one line before any compute."""
import json, re
from pathlib import Path
import pytest
import msllm_nb.train_llm as tl
from train_helpers import BIN, args, run, STEPS, run_in_process

EVAL = ['eval_every=6', 'eval_limit=8', 'eval_tasks=[msllm_cont_en,msllm_bpb_en_wiki]']


@pytest.fixture(scope='session')  # session: built once per pytest-xdist worker, however the worker interleaves files
def trained(tmp_path_factory):
    from msllm_nb.corpus.shards import sample_tokens
    d = tmp_path_factory.mktemp('eval')
    p = run([BIN / 'train_llm', *args(sample_tokens(), d / 'run', *EVAL)])
    assert p.returncode == 0, p.stderr[-2000:]
    (d / 'stderr.txt').write_text(p.stderr)
    return d


def test_a_training_runs_evaluation_draws_no_progress_bars(trained):
    "`eval_every` runs the harness inside train_llm: with `progress: false` its per-task and per-request bars stay off too."
    from msllm_nb.course.runner import _FRAME  # a bar's frame, `[00:03<00:10, 2.1it/s]`, as the course runner knows it
    err = (trained / 'stderr.txt').read_text()
    assert not any(_FRAME.search(seg) for seg in re.split(r'[\r\n]', err)), err[-2000:]


def test_a_run_folder_and_its_hugging_face_conversion_score_the_same(trained, tmp_path):
    ck = trained / 'run' / 'checkpoints' / f'step_{STEPS:08d}' / 'model.ckpt'
    p = run([BIN / 'msllm-convert', ck, tmp_path / 'hf', '--reverse'])
    assert p.returncode == 0, p.stderr[-2000:]
    (tmp_path / 'mine.txt').write_text('The quick brown fox jumps over the lazy dog.\n今天天气很好，我们去公园散步。\n', encoding='utf-8')
    common = ['--texts', tmp_path / 'mine.txt', '--tasks', 'msllm_cont_en', '--limit', '12', '--json_out']
    a = run([BIN / 'msllm-eval', trained / 'run', *common], cwd=tmp_path)  # outside a git checkout: the harness asks git for a commit
    tok = json.loads((trained / 'run' / 'checkpoints' / f'step_{STEPS:08d}' / 'meta.json').read_text())['config']['token_dir']
    b = run([BIN / 'msllm-eval', tmp_path / 'hf', '--tokenizer', Path(tok) / 'tokenizer.model', *common])
    assert a.returncode == 0 and b.returncode == 0, (a.stderr[-1500:], b.stderr[-1500:])
    assert 'not a git repository' not in a.stderr, a.stderr[-1500:]  # git's complaint stays off the terminal
    ra, rb = json.loads(a.stdout), json.loads(b.stdout)
    assert [r['group'] for r in ra['bits_per_byte']] == ['mine']
    assert abs(ra['bits_per_byte'][0]['bits_per_byte'] - rb['bits_per_byte'][0]['bits_per_byte']) < 1e-5
    assert ra['tasks'] == rb['tasks'] and 0 <= ra['tasks']['msllm_cont_en'] <= 1


def test_bad_input_is_one_line_and_exit_2(trained, tmp_path):
    (tmp_path / 'empty.txt').write_text('')
    (tmp_path / 'notes.md').write_text('not a format msllm-eval reads')
    (tmp_path / 'latin1.txt').write_bytes('café au lait'.encode('latin-1'))
    (tmp_path / 'damaged.jsonl').write_bytes(b'{"text": "fine"}\n{"text": "caf\xe9"}\n')
    gone = tmp_path / 'gone_tokens'; gone.mkdir()  # a checkpoint folder whose run's token folder was deleted since
    (gone / 'model.ckpt').touch(); (gone / 'meta.json').write_text(json.dumps({'config': {'token_dir': str(tmp_path / 'tokens')}}))
    cases = [([tmp_path / 'missing'], 'no such checkpoint'),
             ([gone], f'its run read tokens from {tmp_path / "tokens"}, which is gone'),
             ([trained / 'run', '--tokenizer', tmp_path / 'no.model'], 'no such tokenizer'),
             ([trained / 'run', '--tasks', 'arc_easy'], "unknown task 'arc_easy'"),
             ([trained / 'run', '--texts', tmp_path / 'empty.txt'], 'empty file'),
             ([trained / 'run', '--texts', tmp_path / 'notes.md'], 'no text to score'),
             ([trained / 'run', '--texts', tmp_path / 'latin1.txt'], 'latin1.txt: not UTF-8 (invalid continuation byte at byte 3)'),
             ([trained / 'run', '--texts', tmp_path / 'damaged.jsonl'], 'damaged.jsonl:2: not UTF-8'),
             ([trained / 'run', '--task_dir', tmp_path / 'no_tasks'], f'--task_dir {tmp_path / "no_tasks"}: no such folder'),
             ([trained / 'run', '--texts', tmp_path / 'no.txt'], 'no.txt: no such file'),
             ([trained / 'run', '--limit', '0'], "argument --limit: '0': expected a whole number ≥ 1"),
             ([trained / 'run', '--batch_size', '0'], "argument --batch_size: '0': expected a whole number ≥ 1")]  # 0 once put every request in one pass: out of memory
    for i, (a, says) in enumerate(cases):
        p = run([BIN / 'msllm-eval', *a]) if i == 0 else run_in_process('msllm-eval', *a)  # one real process
        assert p.returncode == 2 and says in p.stderr and len(p.stderr.strip().splitlines()) == 1, (a, p.stderr[-1500:])


def test_the_harness_model_refuses_a_batch_size_below_one(trained):
    from msllm_nb.eval.lm import MsllmLM
    with pytest.raises(ValueError, match='batch_size 0: must be at least 1'):
        MsllmLM(str(trained / 'run'), batch_size=0)  # the harness's --model_args batch_size=0, or its --batch_size 0


def test_the_harness_cli_names_a_bad_model_arg_in_one_line(trained):
    "msllm-lm-eval (the harness's own CLI): a typo'd key, a missing file or a bad number in --model_args ends in one line, exit 2."
    tasks = ['--tasks', 'msllm_cont_en', '--include_path', trained / 'run' / 'eval_tasks', '--limit', '2']
    for margs, says in [(f'ckp={trained / "run"}', "unknown key 'ckp' for --model msllm"), ('ckpt=/no/such/run', 'no such checkpoint')]:
        p = run([BIN / 'msllm-lm-eval', '--model', 'msllm', '--model_args', margs, *tasks])
        err = p.stderr.strip().splitlines()  # checked before the harness logs a line
        assert p.returncode == 2 and len(err) == 1 and err[0].startswith('msllm-lm-eval: ') and says in err[0], (margs, p.stderr[-1500:])
    from msllm_nb.eval.lm import MsllmLM, ModelArgsError
    lm = MsllmLM.create_from_arg_string(f'ckpt={trained / "run"},batch_size=4', {'batch_size': 1, 'device': 'cpu'})
    assert lm.batch_size == 4  # --model_args' batch_size wins over the --batch_size the harness always passes (it said: multiple values)
    for margs, says in [(f'ckpt={trained / "run"},batch_size=abc', "batch_size 'abc'"), (f'ckpt={trained / "run"},max_length=0', 'max_length=0')]:
        with pytest.raises(ModelArgsError, match=says): MsllmLM.create_from_arg_string(margs, {'batch_size': 1})


def test_train_llm_evaluates_while_it_trains_and_doctor_reads_the_scores(trained):
    ev = tl.read_metrics(trained / 'run', 'eval')
    assert [r['step'] for r in ev] == [0, 6, 12]
    for r in ev:
        assert 0 <= r['acc/msllm_cont_en'] <= 1 and r['chance/msllm_cont_en'] == 0.25 and r['n/msllm_cont_en'] == 8
        assert 2 < r['bpb/msllm_bpb_en_wiki'] < 20
    assert ev[-1]['bpb/msllm_bpb_en_wiki'] < ev[0]['bpb/msllm_bpb_en_wiki']  # 12 steps already lower the held-out bits per byte
    assert list((trained / 'run' / 'tb').glob('events.*'))
    p = run([BIN / 'msllm-doctor', trained / 'run', '--json_out'])
    found = {f['code']: f for f in json.loads(p.stdout)}
    assert 'eval_at_chance' in found and 'msllm_cont_en' in found['eval_at_chance']['evidence'], p.stdout[-2000:]


def test_a_bad_eval_task_stops_train_llm_with_exit_2(tmp_path):
    from msllm_nb.corpus.shards import sample_tokens
    p = run([BIN / 'train_llm', *args(sample_tokens(), tmp_path / 'run', 'eval_every=5', 'eval_tasks=[no_such_task]')])
    assert p.returncode == 2 and "eval_tasks: unknown task 'no_such_task'" in p.stderr, p.stderr[-1500:]


# ---- issue 56: what a new user met (console scripts, one-line answers, broken task files, things that do not travel)
import re, shutil, sys
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LM_EVAL = 'msllm-lm-eval'


def test_chapter_09_runs_console_scripts_through_the_interpreter():
    "A newcomer's shell has no venv on PATH: the chapter finds every console script beside its interpreter."
    nb = json.loads((ROOT / 'nbs' / '09_eval.ipynb').read_text(encoding='utf-8'))
    src = '\n'.join(''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'code')
    bare = re.findall(r"""\[\s*['"](msllm-[\w-]+|train_llm|msrun|mpirun)['"]""", src)  # a command line that starts with a bare name
    assert not bare, f'bare console-script names in nbs/09_eval.ipynb: {bare}'


@pytest.fixture(scope='session')
def course_tasks(tmp_path_factory):
    "The course's harness tasks, built small from the bundled corpus (no model needed)."
    from msllm_nb.eval.tasks import build_tasks
    from msllm_nb.corpus.shards import sample_tokens
    d = tmp_path_factory.mktemp('course_tasks')
    build_tasks([sample_tokens().parent / 'clean'], d, n=20, bpb_docs=4)
    return d


def broken_task(course_tasks, d, kind):
    "A copy of the course's msllm_cont_en task in `d`, broken one way; returns what the one-line answer must say."
    src = (course_tasks / 'msllm_cont_en.yaml').read_text(encoding='utf-8')
    data = str(course_tasks / 'msllm_cont_en.jsonl')
    d.mkdir(parents=True, exist_ok=True)
    if kind == 'output_type': src, says = src.replace('output_type: multiple_choice', 'output_type: multiple_choise'), "invalid output_type 'multiple_choise'"
    elif kind == 'doc_to_text': src, says = src.replace('doc_to_text: context', "doc_to_text: '{{contxt}}'"), "doc_to_text: 'contxt' is undefined"
    elif kind == 'doc_to_target': src, says = src.replace('doc_to_target: label', "doc_to_target: '{{lable}}'"), "doc_to_target: 'lable' is undefined"
    elif kind == 'data_files': src, says = src.replace(data, data.replace('.jsonl', '_typo.jsonl')), 'msllm_cont_en_typo.jsonl'
    elif kind == 'empty':
        (d / 'empty.jsonl').write_text('')
        src, says = src.replace(data, str(d / 'empty.jsonl')), 'holds no documents'
    (d / 'msllm_cont_en.yaml').write_text(src, encoding='utf-8')
    return says


BROKEN = ['output_type', 'doc_to_text', 'doc_to_target', 'data_files', 'empty']
# msllm-lm-eval checks task files with the same checker (`CheckedTaskManager`) as msllm-eval; each of its runs first indexes the
# harness's own tasks (~10 s), so it is tried on one broken config and one broken data file, msllm-eval on every kind
HARNESS_CLI_KINDS = {'doc_to_text', 'data_files'}


def in_process(argv):
    "msllm-lm-eval run in this process (`train_helpers.run_in_process`): (exit code, stderr lines, stdout)."
    r = run_in_process(LM_EVAL, *argv)
    return r.returncode, r.stderr.strip().splitlines(), r.stdout


def test_msllm_lm_eval_checks_its_arguments_in_one_line(course_tasks, tmp_path):
    base = ['--model', 'msllm', '--model_args', f'ckpt={tmp_path}', '--tasks', 'msllm_cont_en', '--include_path', course_tasks]
    cases = [([], '--tasks'), (base + ['--limit', '0'], '--limit'), (base + ['--limit', 'abc'], '--limit'), (base + ['--limit', 'nan'], '--limit'),
             (base + ['--limit', '2.5'], '--limit'), (base + ['--num_fewshot', '-1'], '--num_fewshot'), (base + ['--batch_size', '0'], '--batch_size'),
             (base + ['--batch_size', 'auto:0'], '--batch_size'), (base + ['--max_batch_size', 'inf'], '--max_batch_size'), (base + ['--seed', '-1'], '--seed'),
             (base[:-1] + [tmp_path / 'no_such_folder'], '--include_path'), (base + ['--config', tmp_path / 'no.yaml'], 'no.yaml'),
             (base + ['--device', 'tpu'], '--device'), (base + ['--output_path', tmp_path / 'out', '--limit', '-1'], '--limit')]
    for argv, says in cases:
        code, err, out = in_process(argv)
        assert code == 2 and len(err) == 1 and err[0].startswith(f'{LM_EVAL}: ') and says in err[0], (argv, err)
    assert not (tmp_path / 'out').exists()  # nothing written


def test_msllm_lm_eval_names_an_unknown_task_in_one_line(course_tasks, tmp_path):
    from msllm_nb.corpus.shards import sample_tokens
    ck = tmp_path / 'model.ckpt'; ck.write_bytes(b'')  # never loaded: the tasks are checked first
    p = run([BIN / LM_EVAL, '--model', 'msllm', '--model_args', f'ckpt={ck},tokenizer={sample_tokens() / "tokenizer.model"}', '--tasks', 'nope',
             '--include_path', course_tasks], cwd=tmp_path)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(err) == 1 and "'nope'" in err[0] and 'Traceback' not in p.stderr, p.stderr[-2000:]


def test_numeric_flags_declare_bounds_and_refuse_what_is_outside():
    from msllm_nb.core.cli import parser_of, UsageError
    from msllm_nb.eval.harness import eval_cli, lm_eval_parser
    run_p = lm_eval_parser()._subparsers.choices['run']
    for parser, flags in [(parser_of(eval_cli), ['--limit', '--bpb_docs', '--batch_size']),
                          (run_p, ['--limit', '--num_fewshot', '--batch_size', '--max_batch_size', '--seed'])]:
        by_flag = {o: a for a in parser._actions for o in a.option_strings}
        for f in flags:
            t = by_flag[f].type
            assert hasattr(t, 'bounds'), (f, t)
            for bad in t.bounds.outside():
                with pytest.raises((SystemExit, UsageError)): parser.parse_args(([] if parser is run_p else ['model']) + [f, bad])
        assert not [a.option_strings for a in parser._actions if a.type in (int, float)]  # no number without bounds


def test_msllm_eval_flags_and_paths_are_one_line(tmp_path):
    cases = [(['--limit', 'nan'], '--limit'), (['--bpb_docs', '-1'], '--bpb_docs'), (['--batch_size', 'inf'], '--batch_size'),
             (['--mode', 'fast'], '--mode'), (['--device', 'tpu'], '--device'), ([], 'no_model')]
    for i, (a, says) in enumerate(cases):
        argv = [tmp_path / 'no_model', *a, '--out', tmp_path / 'out']
        p = run([BIN / 'msllm-eval', *argv]) if i == 0 else run_in_process('msllm-eval', *argv)  # one real process
        err = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(err) == 1 and says in err[0], (a, p.stderr[-1500:])
    assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('kind', BROKEN)
def test_a_broken_task_file_is_one_line_naming_it_before_any_scoring(course_tasks, tmp_path, kind, capsys):
    from msllm_nb.eval.harness import eval_cli
    from msllm_nb.corpus.shards import sample_tokens
    d = tmp_path / 'tasks'
    says = broken_task(course_tasks, d, kind)
    ck = tmp_path / 'model.ckpt'; ck.write_bytes(b'')  # never loaded: the task files are checked first
    (tmp_path / 'mine.txt').write_text('The quick brown fox jumps over the lazy dog.', encoding='utf-8')
    with pytest.raises(SystemExit) as e:
        eval_cli(model=str(ck), tokenizer=str(sample_tokens() / 'tokenizer.model'), tasks='msllm_cont_en', texts=[str(tmp_path / 'mine.txt')], task_dir=str(d))
    out, err = capsys.readouterr()
    err = err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and str(d / 'msllm_cont_en.yaml') in err[0] and says in err[0] and not out, err
    if kind not in HARNESS_CLI_KINDS: return
    code, err, out = in_process(['--model', 'msllm', '--model_args', f'ckpt={ck},tokenizer={sample_tokens() / "tokenizer.model"}',
                                 '--tasks', 'msllm_cont_en', '--include_path', d])
    assert code == 2 and len(err) == 1 and str(d / 'msllm_cont_en.yaml') in err[0] and says in err[0], err


def test_a_task_failing_while_scoring_keeps_the_scores_before_it(trained, course_tasks, tmp_path):
    d = tmp_path / 'tasks'; d.mkdir()
    for name in ('msllm_cont_en', 'msllm_late'):  # msllm_late: its first document is fine, its third has no choices
        rows = [json.loads(l) for l in (course_tasks / 'msllm_cont_en.jsonl').read_text(encoding='utf-8').splitlines()[:4]]
        if name == 'msllm_late': rows[2]['choices'] = []
        (d / f'{name}.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows), encoding='utf-8')
        y = (course_tasks / 'msllm_cont_en.yaml').read_text(encoding='utf-8').replace(str(course_tasks / 'msllm_cont_en.jsonl'), str(d / f'{name}.jsonl'))
        (d / f'{name}.yaml').write_text(y.replace('task: msllm_cont_en', f'task: {name}'), encoding='utf-8')
    (tmp_path / 'mine.txt').write_text('The quick brown fox jumps over the lazy dog.', encoding='utf-8')
    p = run([BIN / 'msllm-eval', trained / 'run', '--texts', tmp_path / 'mine.txt', '--task_dir', d, '--tasks', 'msllm_cont_en,msllm_late',
             '--out', tmp_path / 'res', '--json_out'], cwd=tmp_path)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 1 and 'msllm_late' in err[-1] and 'Traceback' not in p.stderr, p.stderr[-2000:]
    rep = json.loads(p.stdout)
    assert [r['group'] for r in rep['bits_per_byte']] == ['mine'] and set(rep['tasks']) == {'msllm_cont_en'}
    saved = json.loads(next((tmp_path / 'res').rglob('results_*.json')).read_text())
    assert set(saved['results']) == {'msllm_cont_en'}


def test_a_tokenizer_travels_beside_its_checkpoint(tmp_path):
    from msllm_nb.eval.lm import _resolve
    def ckpt(d, name='model.ckpt'):
        d.mkdir(parents=True, exist_ok=True); (d / name).write_bytes(b''); return d / name
    a = ckpt(tmp_path / 'gguf'); (tmp_path / 'gguf' / 'model_tokenizer').mkdir()  # msllm-convert model.gguf gguf/model.ckpt
    assert _resolve(a)[1] == tmp_path / 'gguf' / 'model_tokenizer'
    b = ckpt(tmp_path / 'smol', 'smollm2.ckpt'); (tmp_path / 'smol' / 'smollm2_tokenizer').mkdir()
    assert _resolve(b)[1] == tmp_path / 'smol' / 'smollm2_tokenizer'
    step = tmp_path / 'run' / 'checkpoints' / 'step_00000004'  # beside the checkpoint first, then the run's token folder
    ckpt(step); (step / 'tokenizer.model').write_bytes(b'x'); (tmp_path / 'run' / 'checkpoints' / 'latest').write_text('step_00000004')
    (step / 'meta.json').write_text(json.dumps({'config': {'token_dir': str(tmp_path / 'tokens')}}))
    (tmp_path / 'tokens').mkdir(); (tmp_path / 'tokens' / 'meta.json').write_text(json.dumps({'tokenizer': 'tok.model'}))
    assert _resolve(tmp_path / 'run')[1] == step / 'tokenizer.model'
    (step / 'tokenizer.model').unlink()
    assert _resolve(tmp_path / 'run')[1] == tmp_path / 'tokens' / 'tok.model'
    ckpt(tmp_path / 'run' / 'merged'); (tmp_path / 'run' / 'merged' / 'model_tokenizer').mkdir()  # a LoRA run's merged model
    assert _resolve(tmp_path / 'run') == (tmp_path / 'run' / 'merged' / 'model.ckpt', tmp_path / 'run' / 'merged' / 'model_tokenizer')


def test_a_lora_adapter_checkpoint_points_to_merged(tmp_path, capsys):
    import msllm_nb.model.llama as msm
    from msllm_nb.model.formats import save_ms_weights
    from msllm_nb.eval.harness import eval_cli
    from msllm_nb.eval.lm import load_eval_model
    from msllm_nb.corpus.shards import sample_tokens
    cfg = msm.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=32)
    run_dir = tmp_path / 'lora_run'
    step = run_dir / 'checkpoints' / 'step_00000012'
    save_ms_weights({'model.layers.0.attention.wq.mindpet_delta_lora_a': np.zeros((4, 16), np.float32)}, step / 'model.ckpt', cfg)
    (run_dir / 'checkpoints' / 'latest').write_text(step.name)
    with pytest.raises(ValueError, match=f'is a LoRA adapter checkpoint.*evaluate {run_dir}/merged'):
        load_eval_model(step / 'model.ckpt')  # known by its tensor names
    (step / 'meta.json').write_text(json.dumps({'config': {'lora_rank': 4, 'token_dir': str(sample_tokens())}}))
    merged = run_dir / 'merged'; merged.mkdir(); (merged / 'model.ckpt').write_bytes(b'')
    (merged / 'meta.json').write_text((step / 'meta.json').read_text())  # the last step's meta.json, lora_rank and all
    from msllm_nb.eval.lm import _resolve
    assert _resolve(run_dir)[0] == merged / 'model.ckpt'  # the run folder: its merged model, which is no adapter
    for given in (run_dir / 'checkpoints', step, step / 'model.ckpt'):  # known by its meta.json, before anything is read
        with pytest.raises(SystemExit) as e: eval_cli(model=str(given), tasks='none')
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and f'is a LoRA adapter checkpoint (its adapters alone): evaluate {run_dir}/merged' in err[0], err


def test_results_are_filed_under_the_checkpoint_name_and_git_stays_quiet(trained, course_tasks, tmp_path):
    "From a folder outside any git checkout: no 'fatal: not a git repository'; results under <run>__<step>, not a random name."
    from msllm_nb.eval.lm import result_name
    assert result_name(trained / 'run') == f'run/step_{STEPS:08d}' and result_name(tmp_path / 'x.ckpt') == 'x.ckpt'
    p = run([BIN / LM_EVAL, '--model', 'msllm', '--model_args', f'ckpt={trained / "run"}', '--batch_size', '4', '--tasks', 'msllm_cont_en',
             '--include_path', course_tasks, '--limit', '3', '--output_path', tmp_path / 'h'], cwd=tmp_path)
    assert p.returncode == 0 and 'not a git repository' not in p.stderr and 'fatal' not in p.stderr, p.stderr[-2000:]
    assert [q.parent.name for q in (tmp_path / 'h').rglob('results_*.json')] == [f'run__step_{STEPS:08d}'], list((tmp_path / 'h').rglob('*'))
    conv = tmp_path / 'converted'; conv.mkdir()  # a checkpoint with msllm-convert's model_tokenizer/ beside it, copied elsewhere
    ck = trained / 'run' / 'checkpoints' / f'step_{STEPS:08d}'
    for f in ('model.ckpt', 'model.yaml'): shutil.copy(ck / f, conv / f)
    tok = json.loads((ck / 'meta.json').read_text())['config']['token_dir']
    (conv / 'model_tokenizer').mkdir(); shutil.copy(Path(tok) / 'tokenizer.model', conv / 'model_tokenizer' / 'tokenizer.model')
    (tmp_path / 'mine.txt').write_text('The quick brown fox jumps over the lazy dog.', encoding='utf-8')
    p = run([BIN / 'msllm-eval', conv / 'model.ckpt', '--texts', tmp_path / 'mine.txt', '--tasks', 'msllm_cont_en', '--task_dir', course_tasks,
             '--limit', '3', '--out', tmp_path / 'e'], cwd=tmp_path)
    assert p.returncode == 0 and 'fatal' not in p.stderr, p.stderr[-2000:]
    assert [q.parent.name for q in (tmp_path / 'e').rglob('results_*.json')] == ['converted']
