import os, shutil, tempfile
os.environ.setdefault('GLOG_v', '3')
import pytest
from train_helpers import BIN, COMPILE_CACHE, args, run, msrun
import msllm_nb.train_llm as tl


def pytest_configure(config):
    for m in ('slow: takes minutes', 'cluster: launches several processes (msrun/mpirun)',
              'gpu: needs an NVIDIA GPU', 'ascend: needs an Ascend NPU'):
        config.addinivalue_line('markers', m)
    if getattr(config.option, 'dist', None) == 'loadgroup': config.option.loadscopereorder = False  # the controller: keep `longest_first`'s order
    if not hasattr(config, 'workerinput') and COMPILE_CACHE not in os.environ:  # the controller, before it starts the workers
        os.environ[COMPILE_CACHE] = config._msllm_cache = tempfile.mkdtemp(prefix='msllm_test_compile_cache_')


def pytest_unconfigure(config):
    if getattr(config, '_msllm_cache', None): shutil.rmtree(config._msllm_cache, ignore_errors=True)


@pytest.fixture(scope='session')
def tokens():
    "The bundled sample's token folder (built once, cached)."
    return tl.sample_tokens()


@pytest.fixture(scope='session')
def reference(tokens, tmp_path_factory):
    "One uninterrupted single-process run: 12 steps of 8 × 64 tokens (`train_helpers.args`)."
    out = tmp_path_factory.mktemp('ref')
    r = run([BIN / 'train_llm', *args(tokens, out, 'compile_cache=null')])  # compiled here: what the cached runs are compared with
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.fixture(scope='session')
def msrun_dp(tokens, tmp_path_factory):
    "Plain data parallel on 2 msrun ranks, the reference's global batch."
    return msrun(tokens, tmp_path_factory.mktemp('msrun_dp'))


# Under pytest-xdist (`.ci/run` runs `pytest -n 2 --dist loadgroup`): every test that launches several processes (marked
# `cluster`, or using a fixture that does) shares one group, so two multi-process jobs never run side by side (on 2 cores
# a CPU all-reduce then timed out); a single-process test on the other worker runs beside them. The other tests of a
# file share a worker, so that most fixtures are built once (one used by both groups is built on both workers); a `slow`
# test is a group of its own, so that the scheduler can put it beside its file's other tests.
# xdist 3.8 writes the group into each test's id through `item._nodeid`, which pytest 9 no longer reads: the dev extra
# pins pytest<9, and `pytest_collection_finish` below fails the run if the groups did not reach the ids.
MULTI_PROCESS_FIXTURES = {'msrun_dp', 'zero_run'}


# Longest first: xdist hands out groups in the order of their first test (its own reordering, by number of tests, would
# start a one-test group that takes minutes last, with the other worker idle meanwhile). So the `slow` tests come first,
# then the multi-process group, then the files with the most tests.
def group_of(item):
    multi = item.get_closest_marker('cluster') or MULTI_PROCESS_FIXTURES & set(getattr(item, 'fixturenames', ()))
    return 'cluster' if multi else f'{item.path.stem}.{item.name}' if item.get_closest_marker('slow') else item.path.stem


def longest_first(items, groups):
    "items reordered group by group: slow groups, then 'cluster', then the groups with the most tests; stable within a group."
    size = {g: groups.count(g) for g in groups}
    rank = lambda g: (0 if '.' in g else 1 if g == 'cluster' else 2, -size[g])
    order = sorted(range(len(items)), key=lambda i: (rank(groups[i]), groups.index(groups[i]), i))
    return [items[i] for i in order]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into each test's id
def pytest_collection_modifyitems(config, items):
    groups = [group_of(item) for item in items]
    for item, group in zip(items, groups): item.add_marker(pytest.mark.xdist_group(group))
    if getattr(config.option, 'loadgroup', False): items[:] = longest_first(items, groups)


def pytest_collection_finish(session):
    if getattr(session.config.option, 'loadgroup', False) and session.items and not all('@' in i.nodeid for i in session.items):
        raise pytest.UsageError(f'pytest-xdist did not put the groups into the test ids (pytest {pytest.__version__}): '
                                'two multi-process tests could run side by side; install the dev extra (pytest<9)')
