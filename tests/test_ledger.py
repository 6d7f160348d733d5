"""The tutorial's claims ledger (00·2): every record is made by a cell that checks it, the README's table is the one the
records give, and the items no chapter checks yet are exactly those listed in UNCHECKED, which only ever shrinks."""
import json
from pathlib import Path
import msllm_nb.course.ledger as L

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / 'nbs'

# items of the tutorial that no chapter checks yet (issue 21): none are left. The test fails when an item gains a check
# and is still listed, and when an item not listed here has no check, so the list can only stay empty
UNCHECKED = set()


def test_every_record_is_made_by_a_cell_that_checks_it():
    assert L.ledger_problems(NBS) == []


def test_records_are_well_formed():
    for f in sorted((NBS / 'ledger').glob('*.json')):
        assert (NBS / f'{f.stem}.ipynb').exists(), f'{f}: no notebook {f.stem}.ipynb'
        for fid, e in json.loads(f.read_text(encoding='utf-8')).items():
            assert fid in L.tutorial_ids() and e['verdict'] in L.VERDICTS and e['evidence'].strip(), (f.name, fid, e)


def test_unchecked_items_are_exactly_the_listed_ones():
    checked = {r['id'] for r in L.ledger_entries(NBS)}
    assert UNCHECKED <= set(L.tutorial_ids())
    assert not (checked & UNCHECKED), f'now checked: take them off UNCHECKED: {sorted(checked & UNCHECKED, key=L._key)}'
    missing = set(L.tutorial_ids()) - checked - UNCHECKED
    assert not missing, f'items with no check: {sorted(missing, key=L._key)}'


def test_readme_shows_the_current_ledger():
    text = (ROOT / 'README.md').read_text(encoding='utf-8')
    want = L.ledger_markdown(NBS)
    assert want in text, 'the README\'s ledger is older than nbs/ledger/*.json: run python tests/test_readme.py --write'
