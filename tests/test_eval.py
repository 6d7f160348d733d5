"""msllm-eval tried as a new user would (chapter 09): a run trained by train_llm, the same model converted to a Hugging
Face folder with msllm-convert, text files of one's own, and bad input that must fail in one line before any compute."""
import json
from pathlib import Path
import pytest
import msllm_nb.train_llm as tl
from train_helpers import BIN, args, run, STEPS

EVAL = ['eval_every=6', 'eval_limit=8', 'eval_tasks=[msllm_cont_en,msllm_bpb_en_wiki]']


@pytest.fixture(scope='session')  # session: built once per pytest-xdist worker, however the worker interleaves files
def trained(tmp_path_factory):
    from msllm_nb.shards import sample_tokens
    d = tmp_path_factory.mktemp('eval')
    p = run([BIN / 'train_llm', *args(sample_tokens(), d / 'run', *EVAL)])
    assert p.returncode == 0, p.stderr[-2000:]
    return d


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
             ([trained / 'run', '--limit', '0'], '--limit 0: must be at least 1'),
             ([trained / 'run', '--batch_size', '0'], '--batch_size 0: must be at least 1')]  # 0 once put every request in one pass: out of memory
    for a, says in cases:
        p = run([BIN / 'msllm-eval', *a])
        assert p.returncode == 2 and says in p.stderr and len(p.stderr.strip().splitlines()) == 1, (a, p.stderr[-1500:])


def test_the_harness_model_refuses_a_batch_size_below_one(trained):
    from msllm_nb.eval import MsllmLM
    with pytest.raises(ValueError, match='batch_size 0: must be at least 1'):
        MsllmLM(str(trained / 'run'), batch_size=0)  # the harness's --model_args batch_size=0, or its --batch_size 0


def test_the_harness_cli_names_a_bad_model_arg_in_one_line(trained):
    "msllm-lm-eval (the harness's own CLI): a typo'd key, a missing file or a bad number in --model_args ends in one line, exit 2."
    tasks = ['--tasks', 'msllm_cont_en', '--include_path', trained / 'run' / 'eval_tasks', '--limit', '2']
    for margs, says in [(f'ckp={trained / "run"}', "unknown key 'ckp' for --model msllm"), ('ckpt=/no/such/run', 'no such checkpoint')]:
        p = run([BIN / 'msllm-lm-eval', '--model', 'msllm', '--model_args', margs, *tasks])
        last = p.stderr.strip().splitlines()[-1]  # (after the harness's own INFO lines)
        assert p.returncode == 2 and last.startswith('msllm-lm-eval: ') and says in last and 'Traceback' not in p.stderr, (margs, p.stderr[-1500:])
    from msllm_nb.eval import MsllmLM, ModelArgsError
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
    from msllm_nb.shards import sample_tokens
    p = run([BIN / 'train_llm', *args(sample_tokens(), tmp_path / 'run', 'eval_every=5', 'eval_tasks=[no_such_task]')])
    assert p.returncode == 2 and "eval_tasks: unknown task 'no_such_task'" in p.stderr, p.stderr[-1500:]
