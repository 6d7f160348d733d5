import os
os.environ.setdefault('GLOG_v', '3')


def pytest_configure(config):
    for m in ('slow: takes minutes', 'cluster: launches several processes (msrun/mpirun)',
              'gpu: needs an NVIDIA GPU', 'ascend: needs an Ascend NPU'):
        config.addinivalue_line('markers', m)
