"""Issue 57, part 3: one data path, with mixing in training. `train_llm`'s `mix:` draws every global batch with chapter 03's
`MixedSampler` (the same loader chapter 03 teaches): each batch holds each group's quota, a resume is bitwise, a bad mix
is one line naming `mix` (exit 2, nothing written), and without a mix every batch is the one it always was."""
import json, shutil
from pathlib import Path
import numpy as np
import pytest

import msllm_nb.train_llm as tl
import msllm_nb.corpus.shards as S
from msllm_nb.core.cli import UsageError

from train_helpers import BIN, run, run_in_process, quick, one_line_error, sft_folder, train_records, digests

MIX = {'zh_news': 0.3, 'code': 0.25, 'en_wiki': 0.45}
MIX_SET = 'mix={zh_news: 0.3, code: 0.25, en_wiki: 0.45}'
G, SEQ, STEPS = 8, 64, 6


def mixed_args(tokens, out, *extra):
    "A small run with a mix: one layer, 6 steps of 8 × 64 tokens, a checkpoint every 3 steps."
    return quick(tokens, out, f'steps={STEPS}', f'batch_size={G}', f'seq_len={SEQ}', 'warmup_steps=1', 'save_every=3',
                 'val_every=3', 'val_windows=8', MIX_SET, *extra)


@pytest.fixture(scope='module')
def mixed_run(tokens, tmp_path_factory):
    out = tmp_path_factory.mktemp('mixed') / 'run'
    r = run([BIN / 'train_llm', *mixed_args(tokens, out)])
    assert r.returncode == 0, r.stderr[-3000:]
    return out


# ---- without a mix: the batches it always had

def test_without_mix_every_batch_is_the_one_it_was():
    "The uniform sampler is the old GlobalBatches formula: a permutation seeded by (seed, epoch), cut into batches of G."
    class Ids:
        def __init__(self, n): self.n = n
        def __len__(self): return self.n
        def __getitem__(self, i): return (np.array([i]),)
    for n, g, seed in ((37, 4, 0), (100, 8, 1234), (9, 3, 5)):
        gb = tl.GlobalBatches(Ids(n), g, steps=50, seed=seed)
        spe = n // g
        for t in range(50):
            e, k = divmod(t, spe)
            assert gb.ids(t).tolist() == np.random.default_rng([seed, e]).permutation(n)[k * g:(k + 1) * g].tolist()
    assert tl.GlobalBatches(Ids(37), 4).sampler.__class__ is S.UniformSampler
    assert tl.load_config('tiny').mix is None and 'mix' in tl.hashed_fields()


# ---- the quota rule

def test_each_batch_holds_each_group_s_quota():
    "For any weights: G rows a batch, ⌊G·w⌋ or ⌈G·w⌉ of each group, never negative; the running count stays near the target."
    rng = np.random.default_rng(0)
    for _ in range(200):
        k, g = int(rng.integers(2, 8)), int(rng.integers(1, 65))
        w = rng.random(k) ** 3 + 1e-3
        gw = S.GroupedWindows({str(j): [(np.zeros(1),)] * 5 for j in range(k)})
        s = S.MixedSampler(gw, {str(j): w[j] for j in range(k)}, g, seed=1)
        c = np.array([s.counts(t) for t in range(300)])
        wn = w / w.sum()
        assert (c.sum(1) == g).all() and set(np.unique(c - np.floor(g * wn)).tolist()) <= {0, 1}
        assert np.abs(c.cumsum(0) - np.outer(np.arange(1, 301), g * wn)).max() < 2  # within 2 rows: shares over T batches within 2/(T·G)


def test_mixed_batches_are_a_pure_function_of_the_step(tokens):
    "Batch t computed cold (a resume) equals batch t computed after all the ones before it; every row is from its quota's group."
    train_w = tl.split_windows(tokens, SEQ, 0.02, MIX)[0]
    warm = tl.MixedSampler(train_w, MIX, G, seed=7)
    seq = [warm.ids(t).tolist() for t in range(40)]
    cold = tl.MixedSampler(train_w, MIX, G, seed=7)
    assert cold.ids(39).tolist() == seq[39] and cold.ids(3).tolist() == seq[3]
    for t in range(40):
        assert np.bincount(train_w.group_of(seq[t]), minlength=3).tolist() == warm.counts(t).tolist()


# ---- training with a mix

def test_training_with_a_mix_gives_each_batch_its_quota(tokens, mixed_run):
    recs = tl.read_metrics(mixed_run, 'train')
    assert [r['step'] for r in recs] == list(range(1, STEPS + 1))
    train_w = tl.split_windows(tokens, SEQ, 0.02, MIX)[0]
    names = train_w.names
    sampler = tl.MixedSampler(train_w, MIX, G, seed=tl.load_config('tiny').seed)
    w = np.array([MIX[g] for g in names]) / sum(MIX.values())
    total = np.zeros(len(names), int)
    for r in recs:
        rows = [r['group_rows'][g] for g in names]
        from_ids = np.bincount(train_w.group_of(r['sample_ids']), minlength=len(names)).tolist()  # which group each row came from
        assert rows == from_ids == sampler.counts(r['step'] - 1).tolist(), r
        assert sum(rows) == G and all(np.floor(G * w[k]) <= rows[k] <= np.ceil(G * w[k]) for k in range(len(names)))
        total += rows
    tokens_by_group = total * SEQ  # every row is one window of seq_len tokens of one group
    assert np.abs(tokens_by_group / tokens_by_group.sum() - w).max() <= 1 / G
    val = tl.read_metrics(mixed_run, 'val')
    assert [v['step'] for v in val] == [0, 3, 6] and all(np.isfinite(v['loss']) for v in val)
    hashed = json.loads((mixed_run / 'checkpoints' / f'step_{STEPS:08d}' / 'meta.json').read_text())['config']
    assert hashed['mix'] == dict(sorted(MIX.items()))


def test_mixed_resume_is_bitwise(tokens, mixed_run, tmp_path):
    "Stopped after step 5 with the last checkpoint at 3, then --resume: the same records and bitwise the same parameters."
    out = tmp_path / 'run'; shutil.copytree(mixed_run, out)
    shutil.rmtree(out / 'checkpoints' / f'step_{STEPS:08d}'); shutil.rmtree(out / 'ranks'); (out / 'summary.json').unlink()
    m = out / 'metrics.jsonl'
    m.write_text(''.join(l + '\n' for l in m.read_text().splitlines() if json.loads(l)['step'] <= 5))  # what a crash at step 5 leaves
    r = run([BIN / 'train_llm', *mixed_args(tokens, out), '--resume'])
    assert r.returncode == 0, r.stderr[-3000:]
    assert [e['step'] for e in tl.read_metrics(out, 'event') if e['event'] == 'resumed'] == [3]
    assert train_records(out) == train_records(mixed_run)
    assert [r['group_rows'] for r in tl.read_metrics(out, 'train')] == [r['group_rows'] for r in tl.read_metrics(mixed_run, 'train')]
    assert digests(out, 1) == digests(mixed_run, 1)


def test_resume_with_another_mix_is_refused_naming_it(tokens, mixed_run, tmp_path):
    out = tmp_path / 'run'; shutil.copytree(mixed_run, out)
    r = run([BIN / 'train_llm', *mixed_args(tokens, out, 'mix.code=0.5'), '--resume'])
    one_line_error(r, 2, 'mix: checkpoint', "'code': 0.25", "'code': 0.5", 'resume needs the same values')


# ---- a mix given wrong: one line naming mix, exit 2, nothing written

@pytest.mark.parametrize('extra,message', [
    (['mix={wiki: 1, code: 1}'], ["mix: unknown group 'wiki'; the groups of", 'code, en_literature, en_wiki']),
    (['mix={code: 0}'], ['mix.code 0: expected a finite number > 0']),
    (['mix={code: -1, zh_news: 1}'], ['mix.code -1: expected a finite number > 0']),
    (['mix={code: .nan}'], ['mix.code nan: expected a finite number > 0 (nan and inf are refused)']),
    (['mix.code=inf'], ["--set mix.code=inf: mix.code 'inf': expected a finite number > 0 (nan and inf are refused)"]),
    (['mix.code=abc'], ["mix.code 'abc': expected a finite number > 0"]),
    (['mix={code: true}'], ['mix.code True: expected a finite number > 0']),
    (['mix={}'], ['--set mix={}: mix {}: expected a mapping of groups to weights']),
    (['mix=[code]'], ["mix ['code']: expected a mapping of groups to weights"]),
])
def test_a_bad_mix_is_one_line_naming_mix(tokens, tmp_path, extra, message):
    a = quick(tokens, tmp_path / 'run', *extra)
    r = run([BIN / 'train_llm', *a]) if extra == ['mix={wiki: 1, code: 1}'] else run_in_process('train_llm', *a)  # one real process
    one_line_error(r, 2, *message)
    assert not (tmp_path / 'run').exists()


def test_a_mix_on_a_folder_without_groups_is_refused(tmp_path):
    "Chapter 10's packed conversations (format: sft) have no groups to weigh."
    d = sft_folder(tmp_path / 'sft', masked=False)
    r = run([BIN / 'train_llm', *quick(d, tmp_path / 'run', 'mix={code: 1}')])
    one_line_error(r, 2, f"mix: {d} holds format 'sft'", 'no groups to weigh')
    assert not (tmp_path / 'run').exists()


def test_a_group_too_small_for_a_window_is_refused(tokens, tmp_path):
    with pytest.raises(UsageError, match='mix: group code of .* has 0 windows of 1000000 tokens'):
        tl.split_windows(tokens, 10**6, 0.02, {'code': 1})


# ---- the config key

def test_mix_from_yaml_and_both_command_line_forms(tmp_path):
    y = tmp_path / 'mixed.yaml'
    y.write_text('mix: {zh_news: 0.3, code: 0.25, en_wiki: 0.45}\n')
    want = {'code': 0.25, 'en_wiki': 0.45, 'zh_news': 0.3}
    assert tl.load_config(y).mix == want
    assert list(tl.load_config(y).mix) == sorted(want)  # one order for one mix: the same batches, the same hash
    assert tl.load_config('tiny', [MIX_SET]).mix == want
    assert tl.load_config('tiny', ['mix.code=0.25', 'mix.en_wiki=0.45', 'mix.zh_news=0.3']).mix == want
    assert tl.load_config(y, ['mix.code=1']).mix == {**want, 'code': 1.0}  # one weight changed, the others kept
    assert tl.load_config(y, ['mix=null']).mix is None
    assert tl.config_hash(tl.load_config(y), 1)[0] != tl.config_hash(tl.load_config('tiny'), 1)[0]
    with pytest.raises(UsageError, match=r'--set mix\.code=0: mix\.code 0: expected a finite number > 0'):
        tl.load_config(y, ['mix.code=0'])
