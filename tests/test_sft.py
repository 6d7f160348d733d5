"""Chapter 10 from the outside: SFT folders through the same `train_llm` (one process, 2 msrun ranks, `msllm-doctor`),
LoRA runs (adapters-only checkpoints, the merged model, 2 msrun ranks, kill -9 and a bitwise resume), and `msllm-sft` on a conversation
file that no other test uses."""
import json, random, signal, subprocess, time
from pathlib import Path
import numpy as np
import pytest
import msllm_nb.sft.finetune as S
import msllm_nb.model.llama as msm
import msllm_nb.train_llm as tl
from msllm_nb.model.formats import save_ms_weights, load_ms_weights
from train_helpers import BIN, run, launched, run_in_process

STEPS = 8


@pytest.fixture(scope='session')
def sft_data(tmp_path_factory):
    "An SFT folder of 400 built conversations (windows of 128) and a freshly initialised 1-layer tiny model to start from."
    d = tmp_path_factory.mktemp('sft_data')
    S.build_instructions([tl.sample_tokens().parent / 'clean'], d / 'instr')
    conv = S.read_conversations([d / 'instr' / 'train.jsonl'])
    items = conv.items[:]; random.Random(0).shuffle(items)
    S.write_sft_folder(S.Conversations(items[:400], conv.dropped, conv.examples), tl.sample_tokens() / 'tokenizer.model', d / 'sft', 128)
    cfg = msm.LlamaConfig(**{**msm.PRESETS['tiny'].__dict__, 'vocab_size': 8192, 'max_position_embeddings': 256, 'num_hidden_layers': 1})
    save_ms_weights({p.name: p.asnumpy() for p in msm.LlamaForCausalLM(cfg).get_parameters()}, d / 'base' / 'model.ckpt', cfg)
    return d


def sft_args(d, out, *extra, batch=4):
    return ['--config', 'sft_tiny', '--out', str(out), '--set', f'token_dir={d / "sft"}', f'init_from={d / "base" / "model.ckpt"}',
            'seq_len=128', f'steps={STEPS}', f'batch_size={batch}', 'warmup_steps=2', 'val_every=4', 'val_windows=8', 'save_every=2',
            'log_every=2', 'progress=false', *extra]


@pytest.fixture(scope='session')
def sft_reference(sft_data, tmp_path_factory):
    out = tmp_path_factory.mktemp('sft_ref')
    r = run([BIN / 'train_llm', *sft_args(sft_data, out)])
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def records(out):
    recs = tl.read_metrics(out, 'train')
    assert len({r['step'] for r in recs}) == len(recs), 'a step logged twice'
    return {r['step']: (r['loss'], r['sample_ids']) for r in recs}


def weights(out):
    return load_ms_weights(Path(out) / 'checkpoints' / f'step_{STEPS:08d}' / 'model.ckpt')


def test_sft_run_trains_on_answers(sft_reference):
    val = {v['step']: v['loss'] for v in tl.read_metrics(sft_reference, 'val')}
    assert sorted(records(sft_reference)) == list(range(1, STEPS + 1)) and val[STEPS] < val[0], val


@pytest.mark.cluster
def test_sft_msrun_two_ranks_accumulating_equal_one_process(sft_data, sft_reference, tmp_path):
    "2 ranks, each accumulating 2 micro-batches of 1 window, train as one process with the whole batch of 4."
    cmd = [BIN / 'msrun', '--worker_num=2', '--local_worker_num=2', f'--master_port={tl.free_port()}', f'--log_dir={tmp_path}/logs',
           '--join=True', tl.__file__, *sft_args(sft_data, tmp_path, 'accum_steps=2', batch=2)]
    launched(cmd, tmp_path, 2)
    ref, got = records(sft_reference), records(tmp_path)
    assert ref.keys() == got.keys() and all(ref[s][1] == got[s][1] for s in ref)  # the same packed windows in every global batch
    assert max(abs(ref[s][0] - got[s][0]) for s in ref) < 1e-4
    rw, w = weights(sft_reference), weights(tmp_path)
    assert max(float(np.abs(rw[k] - w[k]).max()) for k in rw) <= 1e-4


def test_sft_accumulation_equals_one_big_batch(sft_data, sft_reference, tmp_path):
    "accum_steps=2: micro-batches hold different numbers of answer tokens, and each weighs by them, as in the big batch."
    r = run([BIN / 'train_llm', *sft_args(sft_data, tmp_path, 'accum_steps=2')])
    assert r.returncode == 0, r.stderr[-3000:]
    ref, got = records(sft_reference), records(tmp_path)
    assert ref.keys() == got.keys() and all(ref[s][1] == got[s][1] for s in ref)
    assert max(abs(ref[s][0] - got[s][0]) for s in ref) < 1e-4
    rw, w = weights(sft_reference), weights(tmp_path)
    assert max(float(np.abs(rw[k] - w[k]).max()) for k in rw) <= 1e-4


@pytest.fixture(scope='session')
def lora_reference(sft_data, tmp_path_factory):
    out = tmp_path_factory.mktemp('lora_ref')
    r = run([BIN / 'train_llm', *sft_args(sft_data, out, 'lora_rank=4', 'lora_alpha=8')])
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_lora_run_keeps_adapters_and_writes_the_merged_model(sft_data, lora_reference):
    names = set(load_ms_weights(Path(lora_reference) / 'checkpoints' / f'step_{STEPS:08d}' / 'model.ckpt'))
    assert names and all('mindpet_delta_lora' in k for k in names), sorted(names)[:4]
    merged = load_ms_weights(Path(lora_reference) / 'merged' / 'model.ckpt')
    base = load_ms_weights(sft_data / 'base' / 'model.ckpt')
    assert merged.keys() == base.keys()  # the plain model's names: convertible and loadable as any checkpoint
    changed = {k for k in base if not np.array_equal(base[k], merged[k])}
    assert changed and all(k.rsplit('.', 2)[-2] in S.LORA_TARGETS for k in changed), sorted(changed)[:4]  # only the adapted projections moved
    from msllm_nb.eval.lm import _resolve  # msllm-eval RUN_DIR of a LoRA run scores its merged model, with the run's tokenizer
    ckpt, tok = _resolve(lora_reference)
    assert ckpt == Path(lora_reference) / 'merged' / 'model.ckpt' and tok is not None and Path(tok).exists(), (ckpt, tok)


@pytest.mark.cluster
def test_lora_msrun_two_ranks_equal_one_process(sft_data, lora_reference, tmp_path):
    "LoRA under data parallelism: 2 msrun ranks of 2 windows each train the adapters as one process with the batch of 4, and write the same merged model."
    cmd = [BIN / 'msrun', '--worker_num=2', '--local_worker_num=2', f'--master_port={tl.free_port()}', f'--log_dir={tmp_path}/logs',
           '--join=True', tl.__file__, *sft_args(sft_data, tmp_path, 'lora_rank=4', 'lora_alpha=8', batch=2)]
    launched(cmd, tmp_path, 2)
    ref, got = records(lora_reference), records(tmp_path)
    assert ref.keys() == got.keys() and all(ref[s][1] == got[s][1] for s in ref)
    assert max(abs(ref[s][0] - got[s][0]) for s in ref) < 1e-4
    assert set(weights(tmp_path)) == set(weights(lora_reference))  # the checkpoint holds the adapters only, as in one process
    rm, m = (load_ms_weights(Path(d) / 'merged' / 'model.ckpt') for d in (lora_reference, tmp_path))
    assert max(float(np.abs(rm[k] - m[k]).max()) for k in rm) <= 1e-4


@pytest.mark.slow
def test_lora_sigkill_then_resume_is_bitwise_identical(sft_data, lora_reference, tmp_path):
    a = sft_args(sft_data, tmp_path, 'lora_rank=4', 'lora_alpha=8')
    kill_at = random.Random().randint(3, STEPS - 1)
    p = subprocess.Popen([str(BIN / 'train_llm'), *a], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while p.poll() is None and not any(r['step'] >= kill_at for r in tl.read_metrics(tmp_path, 'train')): time.sleep(0.05)
    p.send_signal(signal.SIGKILL); p.wait()
    r = run([BIN / 'train_llm', *a, '--resume'])
    assert r.returncode == 0, r.stderr[-3000:]
    assert records(tmp_path) == records(lora_reference), f'killed at step {kill_at}'
    ref, got = (load_ms_weights(Path(d) / 'merged' / 'model.ckpt') for d in (lora_reference, tmp_path))
    assert all(np.array_equal(ref[k], got[k]) for k in ref)


def test_doctor_reads_an_sft_run(sft_reference):
    r = run([BIN / 'msllm-doctor', sft_reference])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_msllm_sft_on_a_new_users_file(tmp_path):
    "A conversation file in the common shape with the usual damage: usable lines packed, the rest counted by line (the console script run in this process; chapter 10 runs it as a process of its own)."
    f = tmp_path / 'chats.jsonl'
    good = {'messages': [{'role': 'system', 'content': 'You translate.'}, {'role': 'user', 'content': 'Bonjour ?'},
                         {'role': 'assistant', 'content': 'Hello?'}, {'role': 'user', 'content': '谢谢'}, {'role': 'assistant', 'content': 'Thank you.'}]}
    f.write_text('\n'.join([json.dumps(good, ensure_ascii=False), '',
                            json.dumps({'messages': [{'role': 'user', 'content': 'q'}, {'role': 'assistant', 'content': None}]}),
                            json.dumps({'conversations': [{'from': 'human', 'value': 'sharegpt shape'}]}),
                            '{"messages": [{"role": "user"', json.dumps(good, ensure_ascii=False)]) + '\n', encoding='utf-8')
    r = run_in_process('msllm-sft', f, '--tokenizer', tl.sample_tokens() / 'tokenizer.model', '--out_dir', tmp_path / 'out', '--seq_len', '64')
    assert r.returncode == 0, r.stderr
    meta = json.loads((tmp_path / 'out' / 'meta.json').read_text())
    assert meta['conversations'] == 2 and meta['dropped'] == {'non_string_content': 1, 'no_messages': 1, 'bad_json': 1}
    assert f'{f}:3' in r.stdout and f'{f}:4' in r.stdout and f'{f}:5' in r.stdout
    win = np.load(tmp_path / 'out' / 'windows.npy')
    assert win.shape[1:] == (4, 64) and (win[:, 1] != -100).sum() == meta['answer_tokens']
    r = run_in_process('msllm-sft', f, '--tokenizer', tl.sample_tokens() / 'tokenizer.model', '--seq_len', '16')
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [r.stderr.strip()] and 'too_long' in r.stderr, r.stderr


# ---- msllm-sft on bad input: one line naming the flag or file, exit 2, nothing written (in this process: fast)

def sft_main(capsys, *argv):
    "msllm-sft's parsing and body run here: (exit code, stderr lines); a traceback fails the test."
    from msllm_nb.core.cli import parser_of
    with pytest.raises(SystemExit) as e:
        ns = vars(parser_of(S.sft_cli).parse_args([str(a) for a in argv]))
        S.sft_cli.__wrapped__(**{k: v for k, v in ns.items() if k not in ('pdb', 'xtra')}); raise SystemExit(0)
    return e.value.code, capsys.readouterr().err.strip().splitlines()


GOOD = json.dumps({'messages': [{'role': 'user', 'content': 'Bonjour ?'}, {'role': 'assistant', 'content': 'Hello?'}]}) + '\n'


def test_msllm_sft_numeric_flags_declare_bounds():
    from msllm_nb.core.cli import parser_of
    for a in parser_of(S.sft_cli)._actions:
        if a.dest in ('seq_len', 'seed'): assert hasattr(a.type, 'bounds'), a.dest


@pytest.mark.parametrize('flag,values', [('--seq_len', ['abc', '', 'nan', 'inf', '-inf', '1.5', '0', '-1', '7']),
                                         ('--seed', ['abc', '', 'nan', 'inf', '1.5', '-1'])])
def test_msllm_sft_refuses_bad_numbers(capsys, tmp_path, flag, values):
    f = tmp_path / 'chats.jsonl'; f.write_text(GOOD, encoding='utf-8')
    for v in values:
        code, err = sft_main(capsys, f, '--tokenizer', tl.sample_tokens() / 'tokenizer.model', '--out_dir', tmp_path / 'out', flag, v)
        assert code == 2 and len(err) == 1 and flag in err[0], (v, err)
        assert not (tmp_path / 'out').exists(), v


def test_msllm_sft_names_the_bad_file(capsys, tmp_path):
    "Each path the user gives that is wrong: one line naming it (file:line for a bad byte), exit 2, nothing written, no half-built tokenizer left."
    sp = tl.sample_tokens() / 'tokenizer.model'
    ok = tmp_path / 'chats.jsonl'; ok.write_text(GOOD, encoding='utf-8')
    latin = tmp_path / 'latin1.jsonl'; latin.write_bytes(GOOD.encode() + GOOD.replace('Bonjour', 'Caf\xe9').encode('latin-1'))
    text = tmp_path / 'notes.txt'; text.write_text('not a tokenizer\n')
    fake = tmp_path / 'fake.model'; fake.write_text('not a SentencePiece model\n')
    empty = tmp_path / 'empty_folder'; empty.mkdir()
    out = tmp_path / 'out'
    cases = [([latin, '--tokenizer', sp, '--out_dir', out], [f'{latin}:2', 'UTF-8', 'byte']),
             ([empty, '--tokenizer', sp, '--out_dir', out], [str(empty)]),
             ([tmp_path / 'nope.jsonl', '--tokenizer', sp, '--out_dir', out], [str(tmp_path / 'nope.jsonl')]),
             (['', '--tokenizer', sp, '--out_dir', out], ['conversation file']),
             ([ok, '--tokenizer', text, '--out_dir', out], [str(text), 'not a tokenizer']),
             ([ok, '--tokenizer', fake, '--out_dir', out], [str(fake)]),
             ([ok, '--tokenizer', empty, '--out_dir', out], [str(empty)]),
             ([ok, '--tokenizer', '', '--out_dir', out], ['--tokenizer']),
             ([ok, '--out_dir', out], ['--tokenizer']),
             ([ok, '--tokenizer', sp, '--out_dir', text], ['--out_dir', str(text)]),
             ([ok, '--tokenizer', sp, '--out_dir', text / 'sub'], ['--out_dir', str(text)]),
             ([ok, '--tokenizer', sp, '--out_dir', ''], ['--out_dir'])]
    before = sorted(tmp_path.iterdir())
    for argv, names in cases:
        code, err = sft_main(capsys, *argv)
        assert code == 2 and len(err) == 1 and err[0].startswith('msllm-sft: ') and all(n in err[0] for n in names), (argv, err)
        assert len(err[0]) < 400, err  # one readable line, not a library's list of every model type
        assert sorted(tmp_path.iterdir()) == before, argv  # no output folder, no leftover tokenizer export


def test_labels_of_is_what_the_loss_scores(tmp_path):
    f = tmp_path / 'chats.jsonl'; f.write_text(GOOD * 3, encoding='utf-8')
    meta = S.write_sft_folder(S.read_conversations([f]), tl.sample_tokens() / 'tokenizer.model', tmp_path / 'out', 32)
    rows, _ = S.windows(tmp_path / 'out', 32)
    lab = S.labels_of(np.stack([r[0] for r in rows]))
    assert lab.shape == (meta['windows'], 31) and int((lab != -100).sum()) == meta['answer_tokens']
    assert np.array_equal(S.labels_of(rows[0][0]), lab[0])  # one window [4, T] too


def test_chapters_call_console_scripts_through_the_interpreter():
    "A newcomer's shell has no venv on PATH: chapters 07 and 10 start msllm-*, train_llm, msrun and mpirun by their path."
    import re
    for nb in ('07_zero', '10_sft'):
        cells = json.loads((Path(__file__).parents[1] / 'nbs' / f'{nb}.ipynb').read_text(encoding='utf-8'))['cells']
        code = '\n'.join(''.join(c['source']) for c in cells if c['cell_type'] == 'code')
        bare = re.findall(r"""\[\s*['"](msllm-[\w-]+|train_llm|msrun|mpirun)['"]""", code)
        assert not bare, (nb, bare)
