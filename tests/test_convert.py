"""Integration checks for chapters 04/05: conversion in every input layout, CLI errors, round trip, MindFormers names, parity."""
import json, shutil, subprocess, sys, textwrap
from pathlib import Path
import numpy as np
import pytest
import msllm_nb.model.llama as M
import msllm_nb.model.formats as msf
import msllm_nb.model.fixtures as mfx
import msllm_nb.model.convert as cv
from msllm_nb.core.procs import run_reference
from train_helpers import run_in_process, make_tiny_hfs

BIN = Path(sys.executable).parent


@pytest.fixture(scope='session')  # session: built once per pytest-xdist worker, however the worker interleaves files
def fx(tmp_path_factory):
    "Tiny HF fixtures built by transformers, all five in one child process (each child imports torch and MindSpore)."
    d = tmp_path_factory.mktemp('fx')
    specs = {'llama': (d / 'llama', 'llama'), 'qwen2': (d / 'qwen2', 'qwen2'), 'sharded': (d / 'sharded', 'qwen2', 0, 'float32', '100KB'),
             'bin': (d / 'bin', 'qwen2', 0, 'float32', None, False), 'mistral': (d / 'mistral', 'mistral')}
    return dict(zip(specs, map(Path, run_reference(make_tiny_hfs, list(specs.values())))))


def test_mistral_layout_converts_and_matches(fx, tmp_path):
    "Mistral: same tensors; its sliding window (128) caps the context, below which full attention is identical."
    with pytest.warns(UserWarning, match='sliding-window attention \\(128\\) is not implemented: max_position_embeddings capped from 256 to 128'):
        cfg = cv.from_hf_config(fx['mistral'] / 'config.json')
    assert cfg.architecture == 'mistral' and cfg.max_position_embeddings == 128
    from msllm_nb.model.parity import check_parity
    r = check_parity(fx['mistral'], n_gen=32)
    assert r['passed'] and r['greedy_identical'], r


def cli(*args, cwd=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd)


def test_every_input_layout_gives_the_same_weights(fx, tmp_path):
    assert (fx['sharded'] / 'model.safetensors.index.json').exists() and len(list(fx['sharded'].glob('*.safetensors'))) > 1
    assert (fx['bin'] / 'pytorch_model.bin').exists()
    ref = cv.convert_hf_to_ms(fx['qwen2'], tmp_path / 'ref.ckpt')
    w_ref = msf.load_ms_weights(tmp_path / 'ref.ckpt')
    for kind in ('sharded', 'bin'):
        rep = cv.convert_hf_to_ms(fx[kind], tmp_path / f'{kind}.safetensors')
        assert rep['mapped'] == ref['mapped'] and not (rep['missing'] or rep['unexpected'] or rep['mismatched'])
        w = msf.load_ms_weights(tmp_path / f'{kind}.safetensors')
        assert w.keys() == w_ref.keys() and all(np.array_equal(w[k], w_ref[k]) for k in w)


def test_cli_round_trip_is_bit_identical(fx, tmp_path):
    r = cli(BIN / 'msllm-convert', fx['qwen2'], tmp_path / 'q.ckpt')
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)['mapped'] == len(M.param_shapes(cv.from_hf_config(fx['qwen2'] / 'config.json')))
    r = cli(BIN / 'msllm-convert', '--reverse', tmp_path / 'q.ckpt', tmp_path / 'back')
    assert r.returncode == 0, r.stderr
    a, b = msf.SafetensorsFile(fx['qwen2'] / 'model.safetensors'), msf.SafetensorsFile(tmp_path / 'back' / 'model.safetensors')
    assert sorted(a.keys()) == sorted(b.keys())
    assert all(a.get(k).tobytes() == b.get(k).tobytes() for k in a.keys())


@pytest.mark.parametrize('arch', ['llama', 'qwen2', 'mistral'])
def test_reverse_conversion_keeps_the_config(fx, tmp_path, arch):
    "HF → MindSpore → HF: config.json comes back with every key it had (token ids, Mistral's sliding_window and full window)."
    src = json.loads((fx[arch] / 'config.json').read_text())
    assert (arch == 'qwen2' or {'bos_token_id', 'eos_token_id'} <= set(src)) and (arch != 'mistral' or src['sliding_window'] == 128)
    r = cli(BIN / 'msllm-convert', fx[arch], tmp_path / 'm.ckpt')
    assert r.returncode == 0, r.stderr
    r = cli(BIN / 'msllm-convert', '--reverse', tmp_path / 'm.ckpt', tmp_path / 'back')
    assert r.returncode == 0, r.stderr
    back = json.loads((tmp_path / 'back' / 'config.json').read_text())
    lost = {k: (v, back.get(k, '(missing)')) for k, v in src.items() if k not in ('transformers_version', '_name_or_path') and back.get(k, '(missing)') != v}
    assert not lost, lost


def test_transformers_loads_the_reverse_conversion(fx, tmp_path):
    cv.convert_hf_to_ms(fx['llama'], tmp_path / 'l.ckpt')
    cv.convert_ms_to_hf(tmp_path / 'l.ckpt', tmp_path / 'hf')
    from msllm_nb.model.parity import check_parity
    r = check_parity(tmp_path / 'hf', tmp_path / 'l.ckpt', n_gen=8)  # transformers loads our export and agrees with it
    assert r['passed'], r


def test_cli_errors_name_file_and_key(fx, tmp_path):
    cut = tmp_path / 'cut'; shutil.copytree(fx['qwen2'], cut)
    blob = (cut / 'model.safetensors').read_bytes(); (cut / 'model.safetensors').write_bytes(blob[:len(blob) - 1000])
    r = cli(BIN / 'msllm-convert', cut, tmp_path / 'x.ckpt')
    assert r.returncode == 1 and 'cut/model.safetensors: truncated: tensor' in r.stderr and "'" in r.stderr
    bad = tmp_path / 'bad'; shutil.copytree(fx['qwen2'], bad)
    c = json.loads((bad / 'config.json').read_text()); c['hidden_size'] = 32; c['num_attention_heads'] = 2
    c['num_key_value_heads'] = 1; (bad / 'config.json').write_text(json.dumps(c))
    r = run_in_process('msllm-convert', bad, tmp_path / 'x.ckpt')
    assert r.returncode == 1 and 'does not match its config' in r.stderr
    assert 'model.embed_tokens.weight has shape (512, 64), config implies (512, 32)' in r.stderr
    c['architectures'] = ['GPTNeoXForCausalLM']; c['model_type'] = 'gpt_neox'; (bad / 'config.json').write_text(json.dumps(c))
    r = run_in_process('msllm-convert', bad, tmp_path / 'x.ckpt')
    assert r.returncode == 1 and "config.json: unknown architecture ['GPTNeoXForCausalLM']" in r.stderr
    r = run_in_process('msllm-convert', tmp_path / 'nowhere', tmp_path / 'x.ckpt')
    assert r.returncode == 2 and 'nowhere: no such file or folder' in r.stderr
    (tmp_path / 'nocfg').mkdir()
    r = run_in_process('msllm-convert', tmp_path / 'nocfg', tmp_path / 'x.ckpt')
    assert r.returncode == 2 and 'nocfg/config.json: missing' in r.stderr
    assert not (tmp_path / 'x.ckpt').exists()
    r = run_in_process('msllm-convert', fx['qwen2'], tmp_path / 'b.ckpt', '--dtype', 'bfloat16')  # refused up front, exit 2
    assert r.returncode == 2 and r.stderr.strip() == 'msllm-convert: --dtype bfloat16: choose float32 or float16 (bf16 sources are widened to float32 exactly)'
    assert not list(tmp_path.glob('b.ckpt*')), list(tmp_path.glob('b.ckpt*'))  # no .partial left
    c['architectures'] = ['Qwen2ForCausalLM']; c['model_type'] = 'qwen2'; (bad / 'config.json').write_text(json.dumps(c))
    r = run_in_process('msllm-convert', bad, tmp_path / 'x.ckpt')
    assert r.returncode == 1 and 'does not match its config' in r.stderr and 'msllm-convert --force' in r.stderr  # the CLI's flag


def test_a_failed_write_leaves_no_partial_file(tmp_path):
    def items():
        yield 'model.norm_out.weight', np.ones(4, np.float32)
        raise OSError('disk full')
    with pytest.raises(OSError, match='disk full'):
        msf.save_ms_weights(items(), tmp_path / 'w.ckpt', M.LlamaConfig())
    assert list(tmp_path.iterdir()) == []


def test_missing_shard_and_force(fx, tmp_path):
    sh = tmp_path / 'sh'; shutil.copytree(fx['sharded'], sh)
    victim = sorted(sh.glob('model-*.safetensors'))[0]; victim.unlink()
    with pytest.raises(FileNotFoundError, match='lists shards that are missing'):
        cv.convert_hf_to_ms(sh, tmp_path / 'x.ckpt')
    extra = tmp_path / 'extra'; shutil.copytree(fx['llama'], extra)
    import safetensors.numpy as stn
    w = {k: msf.SafetensorsFile(extra / 'model.safetensors').get(k) for k in msf.SafetensorsFile(extra / 'model.safetensors').keys()}
    w['model.layers.0.self_attn.q_norm.weight'] = np.ones(16, np.float32)
    stn.save_file(w, str(extra / 'model.safetensors'))
    with pytest.raises(cv.ConversionError, match="unexpected: \\['model.safetensors:model.layers.0.self_attn.q_norm.weight'\\]"):
        cv.convert_hf_to_ms(extra, tmp_path / 'x.ckpt')
    rep = cv.convert_hf_to_ms(extra, tmp_path / 'forced.ckpt', force=True)
    assert rep['unexpected'] == ['model.safetensors:model.layers.0.self_attn.q_norm.weight']
    assert msf.load_model(tmp_path / 'forced.ckpt').config.tie_word_embeddings is True


MF_PROBE = textwrap.dedent('''
    import json, sys, mindspore as ms
    ms.set_device('CPU')
    from mindformers import LlamaConfig, LlamaForCausalLM
    c = json.loads(sys.argv[1])
    m = LlamaForCausalLM(LlamaConfig(vocab_size=c['vocab_size'], hidden_size=c['hidden_size'], intermediate_size=c['intermediate_size'],
        num_layers=c['num_hidden_layers'], num_heads=c['num_attention_heads'], n_kv_heads=c['num_key_value_heads'],
        seq_length=32, use_past=False, qkv_has_bias=c['attention_bias']))
    print('PARAMS' + json.dumps({p.name: list(p.shape) for p in m.get_parameters()}))
''')


@pytest.mark.parametrize('cfg', [M.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                                               num_attention_heads=4, num_key_value_heads=2, attention_bias=True),
                                 M.LlamaConfig(num_hidden_layers=2)])
def test_names_and_shapes_match_mindformers(cfg, tmp_path):
    "MindFormers' LlamaForCausalLM constructs on CPU (only its forward is Ascend-only): same names, same shapes."
    import dataclasses
    r = subprocess.run([sys.executable, '-c', MF_PROBE, json.dumps(dataclasses.asdict(cfg))], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    mf = json.loads(r.stdout.split('PARAMS', 1)[1])
    ours = {k: list(v) for k, v in M.param_shapes(cfg).items()}
    assert mf == ours


def test_parity_cli_passes_and_catches_a_broken_conversion(fx, tmp_path):
    r = cli(BIN / 'msllm-parity', fx['qwen2'], '--n_gen', '32', '--json_file', tmp_path / 'p.json')
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads((tmp_path / 'p.json').read_text())
    assert rep['passed'] and rep['greedy_identical'] and rep['n_gen'] == 32 and rep['logits']['rel'] <= 1e-4
    from msllm_nb.model.parity import break_checkpoint
    cv.convert_hf_to_ms(fx['qwen2'], tmp_path / 'good.ckpt')
    break_checkpoint(tmp_path / 'good.ckpt', tmp_path / 'rot.ckpt', 'rotary')
    r = cli(BIN / 'msllm-parity', fx['qwen2'], '--ckpt', tmp_path / 'rot.ckpt', '--n_gen', '8')
    assert r.returncode == 1 and 'PARITY FAILED' in r.stdout
    # swapped k/v biases and swapped norms (caught because the fixtures' biases and norms are random) fail the same
    # check_parity that this command runs: chapter 05 checks both on a qwen2 fixture like this one, in every notebook run
    cv.convert_hf_to_ms(fx['llama'], tmp_path / 'llama.ckpt')  # another model's checkpoint: one line, before any compute
    r = cli(BIN / 'msllm-parity', fx['qwen2'], '--ckpt', tmp_path / 'llama.ckpt', '--n_gen', '8')
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and 'is not a conversion of' in r.stderr, r.stderr[-2000:]
    assert 'tie_word_embeddings False vs True' in r.stderr and 'Traceback' not in r.stderr


def test_check_parity_from_a_script_without_main_guard(fx, tmp_path):
    "check_parity from a plain script: the reference process does not re-run the script (no multiprocessing bootstrap error)."
    (tmp_path / 'plain.py').write_text(f'from msllm_nb.model.parity import check_parity\nprint("passed", check_parity({str(fx["llama"])!r}, n_gen=4)["passed"])\n')
    r = cli(sys.executable, tmp_path / 'plain.py', cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.splitlines() == ['passed True'], (r.stdout, r.stderr[-2000:])


def test_generation_rejects_bad_arguments():
    m = M.LlamaForCausalLM(M.LlamaConfig(num_hidden_layers=1, max_position_embeddings=16))
    with pytest.raises(ValueError, match='exceeds max_position_embeddings 16'):
        M.generate(m, [1, 2, 3], 20)
    with pytest.raises(ValueError, match='prompt_ids is empty'):
        M.generate(m, [], 2)


def test_config_yaml_round_trip_and_unknown_key(tmp_path):
    c = M.PRESETS['small']
    c.to_yaml(tmp_path / 'c.yaml')
    assert M.LlamaConfig.from_yaml(tmp_path / 'c.yaml') == c
    (tmp_path / 'bad.yaml').write_text('hidden_size: 64\nnum_heads: 4\n')
    with pytest.raises(ValueError, match=r"bad.yaml: unknown model config keys \['num_heads'\]"):
        M.LlamaConfig.from_yaml(tmp_path / 'bad.yaml')


# ---- tokenizers rebuilt from a GGUF's vocabulary (no model tensors needed: a tokenizer-only file)

DATA = Path(M.__file__).parents[1] / 'data' / 'sample'
TEXTS = ['Hello, world! 2024-12-01: 12345 apples', "It's   here\n\n\tdon't  ", '机器学习是人工智能的一个分支。', 'e\u0301t\u00e9 café',
         '    for i in range(10):\n        print(i)\r\n', '😀 ÿ ~~~>>> x²']


def _smollm2_vocab():
    from gguf import GGUFReader
    r = GGUFReader(str(mfx.smollm2_gguf()))
    return [cv.gguf_field(r, f'tokenizer.ggml.{k}') for k in ('tokens', 'token_type', 'merges')]


def _rebuilt_bpe(tmp_path, pre):
    "SmolLM2's byte-level vocabulary in a tokenizer-only GGUF that says `tokenizer.ggml.pre = pre`, rebuilt: (tokens, merges, Tokenizer)."
    from tokenizers import Tokenizer
    tokens, types, merges = _smollm2_vocab()
    reader = mfx.write_tokenizer_gguf(tmp_path / f'{pre}.gguf', 'gpt2', tokens, types, pre=pre, merges=merges)
    out = cv.gguf_tokenizer(reader, tmp_path / f'{pre}_tok', M.LlamaConfig(vocab_size=len(tokens)), f'{pre}.gguf')
    return tokens, merges, Tokenizer.from_file(str(out / 'tokenizer.json'))


def test_gguf_sentencepiece_tokenizer_encodes_as_the_original(tmp_path):
    "A LLaMA-2-style GGUF (tokenizer.ggml.model llama): pieces, scores and types rebuild the SentencePiece model exactly."
    import sentencepiece as spm
    text = (DATA / 'en_literature' / 'tempest_gut.txt').read_text(errors='ignore')[:200_000] + \
           ''.join(json.loads(l)['text'] for l in (DATA / 'zh_news.jsonl').read_text().splitlines()[:200])
    (tmp_path / 'train.txt').write_text(text)
    spm.SentencePieceTrainer.train(input=str(tmp_path / 'train.txt'), model_prefix=str(tmp_path / 'orig'), vocab_size=4000, model_type='bpe',
                                   byte_fallback=True, character_coverage=0.995, normalization_rule_name='identity',
                                   remove_extra_whitespaces=False, split_digits=False, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / 'orig.model'))
    toks = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    types = [2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 1 for i in range(len(toks))]
    reader = mfx.write_tokenizer_gguf(tmp_path / 'spm.gguf', 'llama', toks, types, scores=[sp.get_score(i) for i in range(len(toks))],
                             space_prefix=True, unk=sp.unk_id(), bos=sp.bos_id(), eos=sp.eos_id())
    cfg = M.LlamaConfig(vocab_size=len(toks), hf_extra={'bos_token_id': sp.bos_id(), 'eos_token_id': sp.eos_id()})
    out = cv.gguf_tokenizer(reader, tmp_path / 'tok', cfg, 'spm.gguf')
    ours = spm.SentencePieceProcessor(model_file=str(out / 'tokenizer.model'))
    held_out = TEXTS + [(DATA / 'en_literature' / 'hamlet_gut.txt').read_text(errors='ignore')[:20_000]]
    assert [ours.encode(t) for t in held_out] == [sp.encode(t) for t in held_out]
    assert ours.encode('x²😀')[-1] != ours.unk_id() and any(sp.is_byte(i) for i in ours.encode('😀'))  # byte fallback kept
    assert json.loads((out / 'tokenizer_config.json').read_text())['eos_token'] == '</s>'
    from msllm_nb.corpus.bpe import load_tokenizer
    tk = load_tokenizer(out)
    enc, dec, eos = tk.encode, tk.decode, tk.eos_id
    assert enc(TEXTS[0]) == sp.encode(TEXTS[0]) and dec(enc(TEXTS[2])) == TEXTS[2] and eos == sp.eos_id()
    # a vocabulary SentencePiece cannot load (no unknown piece) is a one-line ConversionError naming the file
    bad = mfx.write_tokenizer_gguf(tmp_path / 'bad.gguf', 'llama', toks, [1] * len(toks), scores=[0.0] * len(toks))
    with pytest.raises(cv.ConversionError, match='bad.gguf: its SentencePiece vocabulary does not load'):
        cv.gguf_tokenizer(bad, tmp_path / 'tok2', cfg, 'bad.gguf')


def test_gguf_qwen2_tokenizer_splits_as_qwen2(tmp_path):
    "pre qwen2: the rebuilt tokenizer encodes as transformers' slow Qwen2Tokenizer (Python `regex` + NFC) on the same vocabulary."
    from transformers import Qwen2Tokenizer
    tokens, merges, ours = _rebuilt_bpe(tmp_path, 'qwen2')
    (tmp_path / 'vocab.json').write_text(json.dumps({t: i for i, t in enumerate(tokens)}))
    (tmp_path / 'merges.txt').write_text('#version: 0.2\n' + '\n'.join(merges) + '\n')
    slow = Qwen2Tokenizer(str(tmp_path / 'vocab.json'), str(tmp_path / 'merges.txt'), errors='replace', unk_token=None,
                          bos_token=None, eos_token=None, pad_token=None)
    for t in TEXTS:
        assert ours.encode(t, add_special_tokens=False).ids == slow.convert_tokens_to_ids(slow.tokenize(t)), t
    # Qwen2's split gives single digits (GPT-2's keeps '12345' in one piece)
    assert len(ours.encode('12345').ids) == 5


def test_gguf_llama3_tokenizer_splits_by_its_regex(tmp_path):
    "pre llama-bpe (Llama 3): the pre-tokenizer's pieces are exactly Python `regex`'s findall of Llama 3's pattern."
    import regex
    tokens, merges, tk = _rebuilt_bpe(tmp_path, 'llama-bpe')
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode
    byte_dec = {v: k for k, v in bytes_to_unicode().items()}  # byte-level symbols back to bytes
    for t in TEXTS:
        pieces = [bytes(byte_dec[ch] for ch in p).decode() for p, _ in tk.pre_tokenizer.pre_tokenize_str(t)]
        assert pieces == regex.findall(cv._LLAMA3_SPLIT, t), t
        assert tk.decode(tk.encode(t).ids) == t
    assert [p for p, _ in tk.pre_tokenizer.pre_tokenize_str('12345')] == ['123', '45']
    # a pre-tokenizer whose split we do not reproduce gets no tokenizer (rather than one that splits differently)
    assert cv.gguf_tokenizer(mfx.write_tokenizer_gguf(tmp_path / 'x.gguf', 'gpt2', tokens, [1] * len(tokens), pre='deepseek-llm', merges=merges),
                            tmp_path / 'tok2', M.LlamaConfig(vocab_size=len(tokens))) is None


def test_two_processes_building_one_gguf_cache_at_once_both_succeed(tmp_path):
    "`msllm-roadmap --slow` runs chapters side by side, and several dequantise SmolLM2 into one cache folder: the second to finish keeps the first's."
    import concurrent.futures as cf
    tiny = run_reference(mfx.make_tiny_hf, tmp_path / 'tiny', 'llama', 0, 'float32', None, True, hidden_size=256, intermediate_size=512)
    gg = mfx.write_gguf_fixture(tiny, tmp_path / 'tiny.gguf', types={})
    with cf.ThreadPoolExecutor(2) as ex:  # two child processes (run_reference), started together
        got = list(ex.map(lambda _: run_reference(mfx.build_hf_from_gguf, str(gg), str(tmp_path / 'cache'), False), range(2)))
    assert got == [str(tmp_path / 'cache')] * 2
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith('cache')) == ['cache']  # no .tmp folder left behind
    from safetensors.numpy import load_file
    a, b = load_file(tmp_path / 'cache' / 'model.safetensors'), load_file(Path(tiny) / 'model.safetensors')
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)


# ---- the reverse conversion carries the tokenizer; bad input is one line, nothing written (issue 56)

TOK_TEXTS = ['Hello, world! 2024-12-01', "The king's ship, in the deep nook.", '  two  spaces\tand\nlines  ', '机器学习 café']


@pytest.mark.parametrize('kind', ['gpt2', 'llama'])
def test_reverse_carries_a_gguf_tokenizer(fx, tmp_path, kind):
    "GGUF → MindSpore writes model_tokenizer/ beside the checkpoint; MindSpore → HF carries it: transformers' AutoTokenizer loads it and encodes as the rebuilt tokenizer."
    if kind == 'gpt2': vocab = mfx.tiny_bpe_vocab()  # byte-level BPE (SmolLM2's kind)
    else:  # SentencePiece (LLaMA 2's kind), 512 pieces as the tiny model has
        import sentencepiece as spm
        (tmp_path / 't.txt').write_text((DATA / 'en_literature' / 'tempest_gut.txt').read_text(errors='ignore')[:100_000])
        spm.SentencePieceTrainer.train(input=str(tmp_path / 't.txt'), model_prefix=str(tmp_path / 'sp'), vocab_size=512, model_type='bpe',
                                       byte_fallback=True, minloglevel=2)
        sp = spm.SentencePieceProcessor(model_file=str(tmp_path / 'sp.model'))
        vocab = dict(model='llama', tokens=[sp.id_to_piece(i) for i in range(512)], scores=[sp.get_score(i) for i in range(512)],
                     types=[2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 1 for i in range(512)],
                     space_prefix=True, unk=sp.unk_id(), bos=sp.bos_id(), eos=sp.eos_id())
    gg = mfx.write_gguf_fixture(fx['llama'], tmp_path / 'tiny.gguf', types={}, tokenizer=vocab)
    r = cli(BIN / 'msllm-convert', gg, tmp_path / 'model.ckpt')
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)['tokenizer'] == str(tmp_path / 'model_tokenizer')
    r = cli(BIN / 'msllm-convert', '--reverse', tmp_path / 'model.ckpt', tmp_path / 'hf')
    assert r.returncode == 0 and 'model_tokenizer' in r.stdout, r.stderr[-2000:]
    from msllm_nb.corpus.bpe import load_tokenizer
    rebuilt = load_tokenizer(tmp_path / 'model_tokenizer')  # what the forward conversion made, as the course reads it
    assert run_reference(mfx.auto_tokenizer_ids, tmp_path / 'hf', TOK_TEXTS) == [rebuilt.encode(t) for t in TOK_TEXTS]


def test_reverse_carries_a_sentencepiece_tokenizer(fx, tmp_path):
    """A checkpoint with tokenizer.model beside it (a LoRA run's merged/), a train_llm checkpoint whose meta.json names its
    token folder, or --tokenizer: the HF folder gets a tokenizer transformers loads, encoding as SentencePiece does.
    Without one, a one-line warning."""
    import sentencepiece as spm
    from msllm_nb.corpus.bpe import train_bpe
    (tmp_path / 'clean').mkdir()
    (tmp_path / 'clean' / 'clean-00000.jsonl').write_text(''.join(json.dumps({'text': f'document {i} about the weather, the cats and the dogs {i * 7}',
                                                                              'source': f'en_x.txt:{i}'}) + '\n' for i in range(40)))
    model = train_bpe([tmp_path / 'clean'], tmp_path / 'tok' / 'bpe', vocab_size=300, progress=False)['model']
    sp = spm.SentencePieceProcessor(model_file=model)
    merged, step, bare = tmp_path / 'merged', tmp_path / 'run' / 'checkpoints' / 'step_00000010', tmp_path / 'bare'
    for d in (merged, step, bare): cv.convert_hf_to_ms(fx['llama'], d / 'model.ckpt')
    shutil.copyfile(model, merged / 'tokenizer.model')
    tokens = tmp_path / 'tokens'; tokens.mkdir(); shutil.copyfile(model, tokens / 'tokenizer.model')
    (tokens / 'meta.json').write_text(json.dumps({'tokenizer': 'tokenizer.model'}))
    (step / 'meta.json').write_text(json.dumps({'step': 10, 'config': {'token_dir': str(tokens)}}))
    for ck, extra in ((merged, ()), (step, ()), (bare, ('--tokenizer', model))):  # in this process; the warning below, in one of its own
        r = run_in_process('msllm-convert', '--reverse', ck / 'model.ckpt', ck / 'hf', *extra)
        assert r.returncode == 0 and str(model if extra else ck / 'tokenizer.model' if ck == merged else tokens / 'tokenizer.model') in r.stdout, r.stdout + r.stderr[-2000:]
    assert run_reference(mfx.auto_tokenizer_ids, merged / 'hf', TOK_TEXTS) == [sp.encode(t) for t in TOK_TEXTS]
    assert (step / 'hf' / 'tokenizer.json').read_bytes() == (bare / 'hf' / 'tokenizer.json').read_bytes() == (merged / 'hf' / 'tokenizer.json').read_bytes()
    r = cli(BIN / 'msllm-convert', '--reverse', bare / 'model.ckpt', tmp_path / 'no_tok')  # a real process: all it prints, the C++ side's included
    assert r.returncode == 0 and len(r.stderr.strip().splitlines()) == 1 and 'no tokenizer' in r.stderr, r.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / 'no_tok').iterdir()) == ['config.json', 'model.safetensors']


def test_odd_paths_are_one_line(fx, tmp_path):
    "Wrong paths and flags: exit 2 (or 1 for a file that cannot be read), one line naming what is wrong, nothing written."
    cv.convert_hf_to_ms(fx['llama'], tmp_path / 'ck' / 'model.ckpt')
    (tmp_path / 'f.txt').write_text('x'); (tmp_path / 'notes.txt').write_text('not a tokenizer')
    (tmp_path / 'outdir').mkdir(); (tmp_path / 'out.ckpt').mkdir()
    latin = tmp_path / 'latin'; shutil.copytree(fx['llama'], latin); (latin / 'config.json').write_bytes(b'{"model_type": "caf\xe9"}')
    before = sorted(p.name for p in tmp_path.iterdir())
    ck = tmp_path / 'ck' / 'model.ckpt'
    for args, code, names in [((tmp_path / 'f.txt', tmp_path / 'x.ckpt'), 2, ['f.txt', 'Hugging Face model folder']),
                              ((fx['llama'], tmp_path / 'out.ckpt'), 2, ['out.ckpt', 'a folder, not a file name']),
                              ((fx['llama'], tmp_path / 'x.bin'), 2, ['x.bin', '.ckpt or .safetensors']),
                              ((fx['llama'], tmp_path / 'f.txt' / 'x.ckpt'), 2, ['f.txt is a file, not a folder']),
                              ((fx['llama'], tmp_path / 'x.ckpt', '--tokenizer', tmp_path / 'notes.txt'), 2, ['--tokenizer', '--reverse']),
                              ((latin, tmp_path / 'x.ckpt'), 1, ['latin/config.json']),
                              (('--reverse', ck, tmp_path / 'f.txt'), 2, ['f.txt', 'a file, not a folder']),
                              (('--reverse', tmp_path / 'ck', tmp_path / 'y'), 2, ['ck', 'not a MindSpore checkpoint']),
                              (('--reverse', tmp_path / 'nope.ckpt', tmp_path / 'y'), 2, ['nope.ckpt', 'no such']),
                              (('--reverse', fx['llama'] / 'model.safetensors', tmp_path / 'y'), 2, ['model.yaml', 'missing']),
                              (('--reverse', ck, tmp_path / 'y', '--tokenizer', tmp_path / 'notes.txt'), 2, ['--tokenizer', 'notes.txt']),
                              (('--reverse', ck, tmp_path / 'y', '--tokenizer', tmp_path / 'nope.model'), 2, ['--tokenizer', 'nope.model'])]:
        r = cli(BIN / 'msllm-convert', *args) if args[0] == tmp_path / 'f.txt' else run_in_process('msllm-convert', *args)  # one real process
        lines = r.stderr.strip().splitlines()
        assert r.returncode == code and len(lines) == 1 and 'Traceback' not in r.stderr, (args, r.returncode, r.stderr[-2000:])
        assert all(str(n) in lines[0] for n in names), (args, lines[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == before and list((tmp_path / 'outdir').iterdir()) == []


def test_parity_cli_refuses_bad_input_before_any_compute(fx, tmp_path):
    "msllm-parity: wrong numbers and paths are one line, exit 2, before either model runs; nothing written."
    cv.convert_hf_to_ms(fx['llama'], tmp_path / 'l.ckpt')
    (tmp_path / 'f.txt').write_text('x'); (tmp_path / 'out').mkdir()
    for args, names in [(('--n_gen', '0'), ['--n_gen']), (('--n_gen', '-1'), ['--n_gen']), (('--n_gen', 'nan'), ['--n_gen']),
                        (('--n_gen', '1000'), ['--n_gen 1000', 'max_position_embeddings 256']),
                        (('--json_file', tmp_path / 'out'), ['--json_file', 'a folder']),
                        (('--ckpt', tmp_path / 'nope.ckpt'), ['--ckpt', 'nope.ckpt']), (('--ckpt', tmp_path / 'f.txt'), ['--ckpt', 'f.txt'])]:
        argv = (fx['llama'], '--ckpt', tmp_path / 'l.ckpt', *args) if '--ckpt' not in args else (fx['llama'], *args)
        r = cli(BIN / 'msllm-parity', *argv) if args == ('--n_gen', '0') else run_in_process('msllm-parity', *argv)  # one real process
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and 'Traceback' not in r.stderr, (args, r.returncode, r.stderr[-2000:])
        assert all(str(n) in lines[0] for n in names), (args, lines[0])
    for hf in (tmp_path / 'nope', tmp_path / 'f.txt'):
        r = run_in_process('msllm-parity', hf)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and str(hf) in r.stderr, r.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ['f.txt', 'l.ckpt', 'l.yaml', 'out'] and not list((tmp_path / 'out').iterdir())
