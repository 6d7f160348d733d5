import os
os.environ.setdefault('GLOG_v', '3')
import pytest
from train_helpers import BIN, args, run, msrun
import msllm_nb.train_llm as tl


def pytest_configure(config):
    for m in ('slow: takes minutes', 'cluster: launches several processes (msrun/mpirun)',
              'gpu: needs an NVIDIA GPU', 'ascend: needs an Ascend NPU'):
        config.addinivalue_line('markers', m)


@pytest.fixture(scope='session')
def tokens():
    "The bundled sample's token folder (built once, cached)."
    return tl.sample_tokens()


@pytest.fixture(scope='session')
def reference(tokens, tmp_path_factory):
    "One uninterrupted single-process run: 12 steps of 8 × 256 tokens."
    out = tmp_path_factory.mktemp('ref')
    r = run([BIN / 'train_llm', *args(tokens, out)])
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.fixture(scope='session')
def msrun_dp(tokens, tmp_path_factory):
    "Plain data parallel on 2 msrun ranks, the reference's global batch."
    return msrun(tokens, tmp_path_factory.mktemp('msrun_dp'))


# Under pytest-xdist (`.ci/run` runs `pytest -n 2 --dist loadgroup`): every test that launches several processes (marked
# `cluster`, or using a fixture that does) shares one group, so two multi-process jobs never run side by side (on 2 cores
# a CPU all-reduce then timed out); a single-process test on the other worker runs beside them. The other tests of a
# file share a worker, so that most fixtures are built once (one used by both groups is built on both workers).
MULTI_PROCESS_FIXTURES = {'msrun_dp', 'zero_run'}


def pytest_collection_modifyitems(config, items):
    for item in items:
        multi = item.get_closest_marker('cluster') or MULTI_PROCESS_FIXTURES & set(getattr(item, 'fixturenames', ()))
        item.add_marker(pytest.mark.xdist_group('cluster' if multi else item.path.stem))
