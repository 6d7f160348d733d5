"""The lessons' exercises: every `### Exercise N` has its `# Solution N` after it, and every solution cell is collapsed."""
import json, re
from pathlib import Path
import pytest

NBS = sorted((Path(__file__).resolve().parents[1] / 'nbs').glob('*.ipynb'))


def cells(p): return json.loads(p.read_text(encoding='utf-8'))['cells']


@pytest.mark.parametrize('nb', [p for p in NBS if '# Solution' in p.read_text(encoding='utf-8') or '### Exercise' in p.read_text(encoding='utf-8')], ids=lambda p: p.stem)
def test_each_exercise_has_its_solution_collapsed_after_it(nb):
    cs = cells(nb)
    asked = [(i, m.group(1)) for i, c in enumerate(cs) if c['cell_type'] == 'markdown'
             for m in re.finditer(r'^### Exercise (\d+)', ''.join(c['source']), re.M)]
    solved = {m.group(1): i for i, c in enumerate(cs) if c['cell_type'] == 'code' and (m := re.match(r'# Solution (\d+)', ''.join(c['source'])))}
    assert asked and sorted(n for _, n in asked) == sorted(solved), (asked, solved)
    assert all(solved[n] > i for i, n in asked), 'a solution comes before its exercise'
    hidden = [cs[i].get('metadata', {}).get('jupyter', {}).get('source_hidden') for i in solved.values()]
    assert all(hidden), f'solutions not collapsed: {hidden}'
