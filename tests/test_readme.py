"""README.md is generated from nbs/index.ipynb (Quarto, which nbdev_readme needs, cannot be installed here).

`python tests/test_readme.py --write` regenerates it (first putting the claims ledger of nbs/ledger/ into index.ipynb); the tests below fail when the two drift apart, and check that
the chapter table matches the notebooks that exist and that the README's two commands are the ones CI runs.
"""
import json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_from_index(index=ROOT / 'nbs' / 'index.ipynb') -> str:
    "The README text: index.ipynb's markdown cells, in order, separated by blank lines."
    nb = json.loads(Path(index).read_text(encoding='utf-8'))
    cells = [''.join(c['source']).strip() for c in nb['cells'] if c['cell_type'] == 'markdown']
    return '\n\n'.join(cells) + '\n'


def readme_commands(text: str) -> list[str]:
    "The shell commands in ```bash blocks."
    return [b.strip() for b in re.findall(r'```bash\n(.*?)```', text, flags=re.S)]


def test_readme_matches_index():
    assert (ROOT / 'README.md').read_text(encoding='utf-8') == readme_from_index(), \
        'README.md is out of step with nbs/index.ipynb: run `python tests/test_readme.py --write`'


def test_two_commands_and_ci_runs_the_test_command():
    cmds = readme_commands((ROOT / 'README.md').read_text(encoding='utf-8'))
    assert len(cmds) == 2, cmds
    main, tests = cmds
    assert 'msllm-roadmap' in main and 'pip install' in main
    assert tests == 'bash .ci/run'
    ci = (ROOT / '.ci' / 'run').read_text()
    assert 'nbdev_test' in ci and 'pytest' in ci
    # pytest's closing line must be the last thing CI prints
    assert ci.rstrip().splitlines()[-1].lstrip().startswith(('pytest', '.venv/bin/pytest', '"$VENV"/bin/pytest', 'python -m pytest')), ci.rstrip().splitlines()[-1]


def test_chapter_table_matches_notebooks():
    text = (ROOT / 'README.md').read_text(encoding='utf-8')
    rows = re.findall(r'^\| (\d\d) \| `nbs/(\d\d_\w+)\.ipynb` \|.*\| (ready|planned) \|$', text, flags=re.M)
    nums = [r[0] for r in rows]  # a chapter may have parts (06_0_step, then 06_train_dp): rows in order, each number present
    assert nums == sorted(nums) and sorted(set(nums)) == [f'{i:02d}' for i in range(11)], rows
    assert [r[1] for r in rows] == sorted(r[1] for r in rows), 'the table lists the notebooks in file order'
    existing = {p.stem for p in (ROOT / 'nbs').glob('[0-9][0-9]_*.ipynb')}
    for num, stem, status in rows:
        assert (status == 'ready') == (stem in existing), f'{stem}: README says {status}, notebook exists: {stem in existing}'
    assert existing <= {r[1] for r in rows}, f'notebooks missing from the README table: {existing - {r[1] for r in rows}}'


def write_ledger_into_index(index=ROOT / 'nbs' / 'index.ipynb'):
    "Put the current claims ledger (00·2, from nbs/ledger/*.json) into index.ipynb, after the chapter table."
    from msllm_nb.course.ledger import ledger_markdown, LEDGER_HEADING
    nb = json.loads(Path(index).read_text(encoding='utf-8'))
    src = ledger_markdown(index.parent).splitlines(keepends=True)
    cells = nb['cells']
    at = next((i for i, c in enumerate(cells) if ''.join(c['source']).startswith(LEDGER_HEADING)), None)
    if at is None:
        at = next(i for i, c in enumerate(cells) if ''.join(c['source']).startswith('## Chapters')) + 1
        cells.insert(at, {'cell_type': 'markdown', 'id': 'a7e1d9c0', 'metadata': {}, 'source': []})
    cells[at]['source'] = src
    Path(index).write_text(json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + '\n', encoding='utf-8')  # as nbdev_clean writes it


if __name__ == '__main__':
    if sys.argv[1:] == ['--write']:
        write_ledger_into_index()
        (ROOT / 'README.md').write_text(readme_from_index(), encoding='utf-8')
        print('README.md regenerated from nbs/index.ipynb (with the claims ledger from nbs/ledger/)')
    else:
        print(readme_from_index())
