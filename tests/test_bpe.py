"""Integration checks for chapter 02 (msllm-bpe): determinism, exact round trips on unseen text, coverage, errors, HF export."""
import json, random, re, subprocess, sys
from pathlib import Path
import pytest
import msllm_nb.corpus.bpe as B
from msllm_nb.corpus.clean import clean_corpus, SAMPLE_DIR

BIN = Path(sys.executable).parent


@pytest.fixture(scope='session')  # session: built once per pytest-xdist worker, however the worker interleaves files
def cleaned(tmp_path_factory):
    d = tmp_path_factory.mktemp('clean')
    clean_corpus([SAMPLE_DIR], d, workers=2, progress=False)
    return d


def test_cli_trains_reports_coverage_and_exports_hf(cleaned, tmp_path):
    r = subprocess.run([BIN / 'msllm-bpe', cleaned, '--out', tmp_path / 'tok', '--vocab_size', '8192', '--hf'], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads((tmp_path / 'tok.json').read_text())
    assert rep['vocab_size'] == 8192 and rep['heldout_documents'] > 0 and rep['training_documents'] > 10 * rep['heldout_documents']
    assert set(rep['coverage']) >= {'zh', 'en', 'code', 'web'}
    assert all(v['unk_rate'] == 0 and v['tokens'] > 0 for v in rep['coverage'].values())
    assert rep['hf']['class'] == 'LlamaTokenizerFast' and (tmp_path / 'tok_hf' / 'tokenizer.json').exists()
    assert rep['hf']['checked'] == 200 and rep['hf']['mismatches'] == 0 and rep['hf']['checked_on'] == 'held-out documents'


def test_hf_export_check_compares_text(cleaned, tmp_path):
    "The check is real: a tokenizer that splits differently (here, with a dummy prefix) is caught on the same documents."
    import sentencepiece as spm
    from msllm_nb.core.procs import run_reference
    texts, what = B.check_texts([cleaned], n=20)
    assert len(texts) == 20 and what == 'held-out documents' and all(texts)
    (tmp_path / 'c.txt').write_text('\n'.join(texts), encoding='utf-8')
    spm.SentencePieceTrainer.train(input=str(tmp_path / 'c.txt'), model_prefix=str(tmp_path / 'other'), vocab_size=800, minloglevel=2,
                                   model_type='bpe', byte_fallback=True, character_coverage=0.98)
    rep = run_reference(B.export_hf_tokenizer, str(tmp_path / 'other.model'), str(tmp_path / 'other_hf'), texts)
    assert rep['checked'] == 20 and rep['mismatches'] > 0 and rep['mismatch_examples']


def test_same_corpus_same_model(cleaned, tmp_path):
    a = B.train_bpe([cleaned], tmp_path / 'a', vocab_size=8192, input_sentence_size=3000)  # sampled: the seed matters
    b = B.train_bpe([cleaned], tmp_path / 'b', vocab_size=8192, input_sentence_size=3000)
    assert a['sampled'] and Path(a['model']).read_bytes() == Path(b['model']).read_bytes()


def test_round_trip_on_unseen_text(cleaned, tmp_path):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=B.train_bpe([cleaned], tmp_path / 'm', vocab_size=8192)['model'])
    rng = random.Random(0)
    pool = list('abcXYZ019 \t\n，。！？“”《》中文字符測試繁體😀𝔘ßéñ{}()[];:=<>+-*/\\\'"#$%&|~`') + ['    ', '\n\n', '  \t']
    for _ in range(300):
        x = ''.join(rng.choice(pool) for _ in range(rng.randint(0, 60)))
        assert sp.decode(sp.encode(x)) == x, repr(x)


def test_errors_are_clear(cleaned, tmp_path):
    r = subprocess.run([BIN / 'msllm-bpe', cleaned, '--out', tmp_path / 't', '--vocab_size', '500'], capture_output=True, text=True)
    assert r.returncode == 2 and "vocab_size 500 is too small for this corpus" in r.stderr and "--vocab_size" in r.stderr
    (tmp_path / 'bad').mkdir(); (tmp_path / 'bad' / 'x.jsonl').write_text('{"text": "ok"}\nnot json\n')
    r = subprocess.run([BIN / 'msllm-bpe', tmp_path / 'bad', '--out', tmp_path / 't'], capture_output=True, text=True)
    assert r.returncode == 1 and 'x.jsonl:2: not a JSON line' in r.stderr
    (tmp_path / 'bad' / 'x.jsonl').write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')  # Latin-1 where UTF-8 belongs
    r = subprocess.run([BIN / 'msllm-bpe', tmp_path / 'bad', '--out', tmp_path / 't'], capture_output=True, text=True)
    assert r.returncode == 1 and 'x.jsonl:2: not UTF-8 (invalid continuation byte at byte 13)' in r.stderr, r.stderr[-500:]
    (tmp_path / 'none').mkdir(); (tmp_path / 'none' / 'a.txt').write_text('plain text is not cleaned output')
    r = subprocess.run([BIN / 'msllm-bpe', tmp_path / 'none', '--out', tmp_path / 't'], capture_output=True, text=True)
    assert r.returncode == 2 and 'none: no training documents' in r.stderr  # the folder named holds no cleaned output


def test_heldout_split_does_not_depend_on_the_folder(cleaned, tmp_path):
    "The same corpus cleaned from another folder holds out the same documents, whole-file ones (.eml) included."
    import shutil
    shutil.copytree(SAMPLE_DIR, tmp_path / 'elsewhere' / 'deeper' / 'sample')
    clean_corpus([tmp_path / 'elsewhere' / 'deeper' / 'sample'], tmp_path / 'clean2', workers=2, progress=False)
    def held(d): return sorted((t, s.rsplit('/', 1)[-1]) for t, _, s in B.iter_clean_texts([d]) if B.is_heldout(s))
    a, b = held(cleaned), held(tmp_path / 'clean2')
    assert a == b and len(a) > 10
    assert any(s.endswith('.eml') for _, s in a), 'no whole-file document is held out: the test would not catch a folder-dependent key'


# ---- bad input: one line naming the flag or file, exit 2, nothing written (issue 56)

def _tiny_corpus(d):
    d.mkdir(parents=True, exist_ok=True)
    (d / 'clean-00000.jsonl').write_text(''.join(json.dumps({'text': f'document {i} about the weather, the cats and the dogs {i * 7}',
                                                             'source': f'en_x.txt:{i}'}) + '\n' for i in range(40)))
    return d


from train_helpers import run_raw as _raw, one_line as _one_line  # noqa: E402  (shared by the CLI tests)


@pytest.mark.parametrize('flag, value', [('--vocab_size', '0'), ('--vocab_size', '-5'), ('--vocab_size', str(10**9)),
                                         ('--vocab_size', 'abc'), ('--character_coverage', '2'), ('--character_coverage', 'nan'),
                                         ('--character_coverage', '0'), ('--input_sentence_size', '0'), ('--input_sentence_size', 'inf')])
def test_out_of_range_flags_are_one_line(tmp_path, flag, value):
    corpus = _tiny_corpus(tmp_path / 'c')
    r = _raw(BIN / 'msllm-bpe', corpus, '--out', tmp_path / 'o' / 't', flag, value)
    _one_line(r, 2, flag)
    assert not (tmp_path / 'o').exists()


def test_a_corpus_too_small_for_the_vocabulary(tmp_path):
    "More pieces asked than the text holds: one line naming the corpus and the largest size it supports; then that size trains."
    corpus = _tiny_corpus(tmp_path / 'c')
    r = _raw(BIN / 'msllm-bpe', corpus, '--out', tmp_path / 'o' / 't', '--vocab_size', '5000')
    line = _one_line(r, 2, str(corpus), '--vocab_size 5000')
    assert not (tmp_path / 'o').exists()
    most = int(re.search(r'at most (\d+)', line).group(1))
    assert B.train_bpe([corpus], tmp_path / 'o' / 't', vocab_size=most, progress=False)['vocab_size'] == most
    (tmp_path / 'e').mkdir(); (tmp_path / 'e' / 'clean-00000.jsonl').write_text('\n')  # cleaned output with no text at all
    r = _raw(BIN / 'msllm-bpe', tmp_path / 'e', '--out', tmp_path / 'o2' / 't')
    _one_line(r, 2, str(tmp_path / 'e'), 'no training documents')
    assert not (tmp_path / 'o2').exists()


def test_odd_paths_are_one_line(tmp_path):
    corpus = _tiny_corpus(tmp_path / 'c')
    (tmp_path / 'f').write_text('x')
    for args, code, names in [([tmp_path / 'missing'], 2, ['missing']),
                              ([corpus, '--out', tmp_path / 'f' / 't'], 2, ['--out', str(tmp_path / 'f')]),  # a file where a folder is
                              ([corpus, '--out', corpus], 2, ['--out', str(corpus)])]:  # a folder where a prefix is
        r = _raw(BIN / 'msllm-bpe', *args, cwd=tmp_path)
        _one_line(r, code, *names)
    assert not (tmp_path / 'runs').exists() and sorted(p.name for p in corpus.iterdir()) == ['clean-00000.jsonl']


@pytest.mark.parametrize('kind', ['text', 'empty', 'folder', 'json', 'bad_model', 'missing'])
def test_load_tokenizer_names_a_file_that_is_not_a_tokenizer(tmp_path, kind):
    p = {'text': tmp_path / 'notes.txt', 'empty': tmp_path / 'empty.model', 'folder': tmp_path / 'folder', 'json': tmp_path / 'tokenizer.json',
         'bad_model': tmp_path / 'bad.model', 'missing': tmp_path / 'nope.model'}[kind]
    if kind == 'text': p.write_text('just some notes\n')
    elif kind == 'empty': p.write_bytes(b'')
    elif kind == 'folder': p.mkdir(); (p / 'readme.md').write_text('hi')
    elif kind == 'json': p.write_text('{"not": "a tokenizer"}')
    elif kind == 'bad_model': p.write_bytes(b'\x00\x01garbage' * 10)
    with pytest.raises((ValueError, FileNotFoundError)) as e:
        B.load_tokenizer(p)
    assert str(p) in str(e.value) and '\n' not in str(e.value), str(e.value)
