"""Integration checks for chapter 03 (msllm-shard): determinism, nothing lost, exact multi-rank resume, clear errors."""
import json, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
import msllm_nb.corpus.shards as S
from msllm_nb.corpus.clean import clean_corpus, SAMPLE_DIR
from msllm_nb.corpus.bpe import train_bpe

BIN = Path(sys.executable).parent


@pytest.fixture(scope='session')  # session: built once per pytest-xdist worker, however the worker interleaves files
def prepared(tmp_path_factory):
    d = tmp_path_factory.mktemp('prep')
    clean_corpus([SAMPLE_DIR], d / 'clean', workers=2, progress=False)
    tok = train_bpe([d / 'clean'], d / 'tok', vocab_size=8192)['model']
    r = subprocess.run([BIN / 'msllm-shard', d / 'clean', '--tokenizer', tok, '--out', d / 'shards', '--shard_mb', '0.5'], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return d, tok


def test_cli_loses_nothing_and_is_deterministic(prepared, tmp_path):
    d, tok = prepared
    meta = json.loads((d / 'shards' / 'tokens' / 'meta.json').read_text())
    n_clean = sum(1 for p in (d / 'clean').glob('clean-*.jsonl') for _ in open(p))
    assert meta['docs'] == n_clean and len(meta['shards']) > 5
    texts = sorted((d / 'shards' / 'text').glob('text-*.jsonl'))
    again = S.shuffle_and_shard([d / 'clean'], tmp_path / 'text', int(0.5 * 2**20), seed=0)
    assert [p.read_bytes() for p in texts] == [p.read_bytes() for p in again]
    m1 = S.tokenize_shards(again, tok, tmp_path / 'tok1', workers=1)
    assert m1['tokens'] == meta['tokens']
    for name in meta['shards']:
        assert (tmp_path / 'tok1' / f'{name}.bin').read_bytes() == (d / 'shards' / 'tokens' / f'{name}.bin').read_bytes()


def test_every_window_once_per_epoch_across_ranks_and_resume(prepared):
    "The trainer's loader (GlobalBatches + step_batches): 2 ranks of 4 rows read each window at most once an epoch, and each resumes exactly."
    d, _ = prepared
    store = S.TokenStore(d / 'shards' / 'tokens')
    windows = S.PackedWindows(store, 128, ['code'])

    class Tagged:  # each window carries its index in front: identity by position (a corpus may repeat 128 tokens)
        def __len__(self): return len(windows) - (len(windows) - 7) % 8  # 8k + 7: MindSpore's own sharding would read one window twice
        def __getitem__(self, i): return (np.concatenate([[i], windows[i][0]]).astype(windows[i][0].dtype),)
    src = Tagged()
    ids = lambda x: [int(r[0]) for r in x]
    spe = len(src) // 8
    total = 2 * spe
    runs = {r: [(s, ids(x)) for s, x in S.step_batches(S.GlobalBatches(src, 8, r, 2, total, seed=3))] for r in (0, 1)}
    epoch0 = [w for r in (0, 1) for s, b in runs[r] if s < spe for w in b]
    assert len(epoch0) == len(set(epoch0)) == spe * 4 * 2  # no window twice within an epoch, across both ranks
    for r in (0, 1):
        k = spe + 2
        resumed = [(s, ids(x)) for s, x in S.step_batches(S.GlobalBatches(src, 8, r, 2, total, seed=3), k)]
        assert resumed == runs[r][k:]
    with pytest.raises(ValueError, match='start_step 7 is not before the 5 steps'):
        list(S.step_batches(S.GlobalBatches(src, 8, steps=5), 7))


def test_mixed_batches_are_a_pure_function_of_the_step(prepared):
    d, _ = prepared
    store = S.TokenStore(d / 'shards' / 'tokens')
    w = {'zh_news': 1, 'en_wiki': 1, 'code': 2}
    windows = S.GroupedWindows({g: S.PackedWindows(store, 64, [g]) for g in w})
    a, b = (S.GlobalBatches(windows, 8, steps=50, sampler=S.MixedSampler(windows, w, 8, seed=5)) for _ in range(2))
    assert np.array_equal(a[37][0], b[37][0]) and a[37][0].shape == (8, 65)
    assert all(a.sampler.counts(t).tolist() == [2, 2, 4] for t in range(50))  # 8 × (¼, ¼, ½): exact every batch
    with pytest.raises(ValueError, match=r"unknown groups \['wiki'\]; the groups of"):
        S.PackedWindows(store, 64, ['wiki'])
    with pytest.raises(ValueError, match='one weight per group'):
        S.MixedSampler(windows, {'zh_news': 1}, 8)


def test_errors_are_clear(prepared, tmp_path):
    d, tok = prepared
    r = subprocess.run([BIN / 'msllm-shard', d / 'clean', '--tokenizer', tmp_path / 'nope.model', '--out', tmp_path / 'o'], capture_output=True, text=True)
    assert r.returncode == 2 and 'nope.model: no such tokenizer' in r.stderr
    # a tokenizer trained elsewhere without </s>: every document ends with it here, so it is refused by name
    import sentencepiece as spm
    text = tmp_path / 'train.txt'; text.write_text('\n'.join(f'line {i} of some text, 文本 {i}' for i in range(300)), encoding='utf-8')
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / 'noeos'), vocab_size=100, eos_id=-1, minloglevel=2)
    r = subprocess.run([BIN / 'msllm-shard', d / 'clean', '--tokenizer', tmp_path / 'noeos.model', '--out', tmp_path / 'o2'], capture_output=True, text=True)
    assert r.returncode == 2 and 'noeos.model: the tokenizer has no </s> piece' in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / 'o2').exists()  # refused before anything is written
    store = S.TokenStore(d / 'shards' / 'tokens')
    with pytest.raises(ValueError, match='longer than the .* tokens available'):
        S.PackedWindows(store, 10**9)
    import shutil
    cut = tmp_path / 'cut'; shutil.copytree(d / 'shards' / 'tokens', cut)
    b = cut / 'tokens-00001.bin'; b.write_bytes(b.read_bytes()[:-100])
    with pytest.raises(ValueError, match='tokens-00001.idx.npz does not match tokens-00001.bin'):
        S.TokenStore(cut)
    with pytest.raises(FileNotFoundError, match='not a token folder'):
        S.TokenStore(tmp_path)


def test_bundled_sample_same_bytes_in_any_folder(tmp_path, monkeypatch):
    "The bundled sample built from copies in two folders: the same cleaned text, tokenizer and token shards, byte for byte."
    import shutil, msllm_nb.corpus.clean as C
    builds = []
    for where in ('a', 'much/deeper/b'):
        copy = tmp_path / where / 'sample'; shutil.copytree(SAMPLE_DIR, copy)
        monkeypatch.setattr(C, 'SAMPLE_DIR', copy)  # sample_tokens reads it when called
        tok = S.sample_tokens(cache=tmp_path / where / 'cache')
        files = sorted(tok.rglob('*')) + sorted((tok.parent / 'clean').glob('*.jsonl'))
        builds.append({p.relative_to(tok.parent): p.read_bytes() for p in files if p.is_file()})
    assert builds[0].keys() == builds[1].keys() and len(builds[0]) > 4
    assert [k for k in builds[0] if builds[0][k] != builds[1][k]] == []
    assert str(tmp_path) not in builds[0][Path('clean/clean-00000.jsonl')].decode('utf-8')


def test_same_input_same_bytes_in_any_folder(prepared, tmp_path):
    "meta.json holds paths relative to its folder, and the folder carries its tokenizer: two folders, identical bytes."
    d, tok = prepared
    outs = []
    for where in (tmp_path / 'a', tmp_path / 'deeper' / 'b'):
        r = subprocess.run([BIN / 'msllm-shard', d / 'clean', '--tokenizer', tok, '--out', where, '--shard_mb', '0.5'], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append({p.relative_to(where): p.read_bytes() for p in sorted(where.rglob('*')) if p.is_file()})
    assert outs[0].keys() == outs[1].keys() and all(outs[0][k] == outs[1][k] for k in outs[0])
    meta = json.loads(outs[0][Path('tokens/meta.json')])
    assert meta['tokenizer'] == 'tokenizer.model' and str(tmp_path) not in json.dumps(meta)
    assert S.TokenStore(tmp_path / 'a' / 'tokens').meta['tokenizer'] == str(tmp_path / 'a' / 'tokens' / 'tokenizer.model')


def test_a_script_without_main_guard_gets_an_error_not_a_hang(tmp_path):
    "tokenize_shards with workers=2 from a script whose code is not under `if __name__ == '__main__':` (each spawned worker imports the script)."
    shard = tmp_path / 'text-00000.jsonl'
    shard.write_text(''.join(json.dumps({'text': f'hello world {i}', 'source': 'en_x.txt'}) + '\n' for i in range(20)))
    call = f"S.tokenize_shards([{str(shard)!r}], {str(S.sample_tokens() / 'tokenizer.model')!r}, {str(tmp_path / 'tok')!r}, workers=2, progress=False)"
    (tmp_path / 'bare.py').write_text(f'import msllm_nb.corpus.shards as S\n{call}\nprint("done")\n')
    r = subprocess.run([sys.executable, tmp_path / 'bare.py'], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 1 and "needs its code under `if __name__ == '__main__':`" in r.stderr.strip().splitlines()[-1], r.stderr[-2000:]
    (tmp_path / 'guarded.py').write_text(f'import msllm_nb.corpus.shards as S\nif __name__ == "__main__":\n    {call}\n    print("done")\n')
    r = subprocess.run([sys.executable, tmp_path / 'guarded.py'], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == 'done', r.stderr[-2000:]
    assert json.loads((tmp_path / 'tok' / 'meta.json').read_text())['docs'] == 20


# ---- bad input: one line naming the flag or file, exit 2 (usage) or 1 (the data), nothing written (issue 56)

from train_helpers import run_raw as _raw, one_line as _one_line  # noqa: E402  (shared by the CLI tests)


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    "A small cleaned corpus and a SentencePiece tokenizer trained on it."
    d = tmp_path_factory.mktemp('tiny')
    (d / 'clean').mkdir()
    (d / 'clean' / 'clean-00000.jsonl').write_text(''.join(json.dumps({'text': f'document {i} about the weather, the cats and the dogs {i * 7}',
                                                                        'source': f'en_x.txt:{i}'}) + '\n' for i in range(40)))
    return d / 'clean', train_bpe([d / 'clean'], d / 'tok', vocab_size=300, progress=False)['model']


@pytest.mark.parametrize('kind', ['text', 'empty', 'folder', 'json', 'hf'])
def test_a_tokenizer_that_is_not_a_sentencepiece_model(tiny, tmp_path, kind):
    clean, _ = tiny
    p = {'text': tmp_path / 'notes.txt', 'empty': tmp_path / 'empty.model', 'folder': tmp_path / 'folder', 'json': tmp_path / 'x.json',
         'hf': tmp_path / 'hf' / 'tokenizer.json'}[kind]
    if kind == 'text': p.write_text('just some notes\n')
    elif kind == 'empty': p.write_bytes(b'')
    elif kind == 'folder': p.mkdir()
    elif kind == 'json': p.write_text('{"not": "a tokenizer"}')
    else:
        from tokenizers import Tokenizer, models
        p.parent.mkdir(); Tokenizer(models.BPE()).save(str(p))
    _one_line(_raw(BIN / 'msllm-shard', clean, '--tokenizer', p, '--out', tmp_path / 'o'), 2, '--tokenizer', p)
    assert not (tmp_path / 'o').exists()


@pytest.mark.parametrize('flag, value', [('--workers', '0'), ('--workers', '-1'), ('--workers', 'nan'), ('--shard_mb', '0'), ('--shard_mb', '-1'),
                                         ('--shard_mb', 'inf'), ('--shard_mb', 'abc'), ('--seed', '-1'), ('--seed', '1.5')])
def test_out_of_range_flags_are_one_line(tiny, tmp_path, flag, value):
    clean, tok = tiny
    _one_line(_raw(BIN / 'msllm-shard', clean, '--tokenizer', tok, '--out', tmp_path / 'o', flag, value), 2, flag)
    assert not (tmp_path / 'o').exists()


def test_odd_paths_are_one_line(tiny, tmp_path):
    clean, tok = tiny
    (tmp_path / 'f').write_text('x'); (tmp_path / 'plain').mkdir(); (tmp_path / 'plain' / 'a.txt').write_text('not cleaned output')
    o = ('--out', tmp_path / 'o')
    for args, names in [((tmp_path / 'nope', '--tokenizer', tok, *o), ['nope: no such file or directory']),
                        ((tmp_path / 'plain', '--tokenizer', tok, *o), ['plain', 'no .jsonl files']),
                        ((clean, '--tokenizer', tok, '--out', tmp_path / 'f'), ['--out', 'a file, not a folder']),
                        ((clean, *o), ['--tokenizer is required'])]:
        _one_line(_raw(BIN / 'msllm-shard', *args), 2, *names)
    bad = tmp_path / 'bad'; bad.mkdir(); (bad / 'x.jsonl').write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')  # Latin-1: the data
    _one_line(_raw(BIN / 'msllm-shard', bad, '--tokenizer', tok, '--out', tmp_path / 'o'), 1, 'x.jsonl:2: not UTF-8')
    assert sorted(p.name for p in tmp_path.iterdir()) == ['bad', 'f', 'plain']  # no half-made output folder
