"""Installs msllm_nb from settings.ini (nbdev 2 layout). No pkg_resources: it is gone from current setuptools."""
from configparser import ConfigParser
from pathlib import Path
import setuptools

here = Path(__file__).parent
config = ConfigParser(delimiters=['='])
config.read(here/'settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

licenses = {'apache2': 'Apache-2.0'}  # SPDX expressions: setuptools deprecates the License :: classifiers
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
py_versions = '3.10 3.11 3.12'.split()

requirements = cfg.get('requirements', '').split()
dev_requirements = cfg.get('dev_requirements', '').split()
# The PyTorch reference side. torch==2.13.0 pins a CPU wheel; a bare `torch` pulls GBs of CUDA libraries.
hf_requirements = cfg.get('hf_requirements', 'torch==2.13.0 transformers accelerate').split()
plugins = {}  # the loop's plugins (06·6): settings.ini's `group: name = module:object` lines, as entry points
for line in filter(None, cfg.get('plugins', '').split('\n')):
    group, colon, spec = line.partition(':')
    if not colon or '=' not in spec: raise SystemExit(f'settings.ini: plugins: {line!r}: expected `group: name = module:object`')
    plugins.setdefault(group.strip(), []).append(spec.strip())
lic = licenses[cfg['license']]
min_python = cfg['min_python']

setuptools.setup(
    name=cfg['lib_name'],
    version=cfg['version'],
    license_expression=lic,
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])],
                 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title()]
                + ['Programming Language :: Python :: ' + o for o in py_versions[py_versions.index(min_python):]],
    url=cfg['git_url'],
    # the data folders (configs, data/sample/...) are listed too, so that setuptools does not warn that they look importable
    packages=setuptools.find_namespace_packages(include=['msllm_nb', 'msllm_nb.*'], exclude=['*.__pycache__']),
    include_package_data=True,
    package_data={'msllm_nb': ['data/**/*', 'configs/*.yaml']},
    install_requires=requirements,
    extras_require={'dev': dev_requirements, 'hf': hf_requirements},
    python_requires='>=' + min_python,
    long_description=(here/'README.md').read_text(encoding='utf-8'),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={'console_scripts': cfg.get('console_scripts', '').split('\n'),
                  'nbdev': [f'{cfg["lib_path"]}={cfg["lib_path"]}._modidx:d'], **plugins},
    author=cfg['author'], author_email=cfg['author_email'], description=cfg['description'],
    keywords=cfg['keywords'])
