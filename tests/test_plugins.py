"""The loop's plugins (06·6): what settings.ini declares is what the installed package's metadata holds, and each loads as
the kind it is declared as. A stale install (settings.ini changed, `pip install -e .` not rerun) fails here, by name."""
from configparser import ConfigParser
from pathlib import Path
from msllm_nb.train.plugins import KINDS, DataFormat, Adapter, installed, plugin

ROOT = Path(__file__).resolve().parents[1]


def declared():
    "{(group, name): target} from settings.ini's `plugins`."
    c = ConfigParser(delimiters=['=']); c.read(ROOT / 'settings.ini', encoding='utf-8')
    out = {}
    for line in filter(None, c['DEFAULT']['plugins'].split('\n')):
        group, spec = line.split(':', 1)
        name, target = (x.strip() for x in spec.split('='))
        out[group.strip(), name] = target
    return out


def test_installed_plugins_are_the_declared_ones():
    kind_of = {g: k for k, g in KINDS.items()}
    have = {(KINDS[k], n): e.value for k in KINDS for n, e in installed(k).items()}
    assert have == declared(), 'settings.ini and the installed metadata differ: rerun pip install -e .'
    assert set(kind_of) >= {g for g, _ in declared()}, 'a plugin group no kind reads'


def test_each_plugin_loads_as_its_kind():
    shape = {'format': DataFormat, 'adapter': Adapter}
    for k in KINDS:
        for n in installed(k):
            obj = plugin(k, n, 'test')
            assert isinstance(obj, shape[k]) if k in shape else callable(obj), (k, n, obj)
