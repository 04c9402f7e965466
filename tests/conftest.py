import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import settings
from threadpoolctl import threadpool_limits

# The tests run torch and the BLAS on one thread, before skmpt is imported (so that it takes one
# thread as torch's own number): their arrays are tiny, and two threads made them slower -- on a
# loaded 2-core machine scikit-learn's dtype check on MaskedGaussianMixture took 1.7 s of CPU with
# two and 0.1 s with one. tests/estimators/test_threads.py sets the threads it checks itself.
torch.set_num_threads(1)
threadpool_limits(1)

# tests/datasets and tests/distributed mirror skmpt's packages, and tests/ is on sys.path: where
# Hugging Face's datasets or dask's distributed is not installed, "import datasets" finds the folder
# (a namespace package) and pytest.importorskip does not skip. None in sys.modules makes the import
# fail as it does for a package not installed.
for _name in ("datasets", "distributed"):
    _spec = importlib.util.find_spec(_name)
    if _spec is not None and _spec.origin is None and all(
            Path(folder).parent == Path(__file__).parent for folder in _spec.submodule_search_locations):
        sys.modules[_name] = None

from support.text import model_dir  # noqa: E402, F401 (a fixture: a tiny saved BERT, for the text and CLI tests)

# Property tests run a bounded number of examples with no per-example deadline: the
# examples do real linear algebra, whose first call (torch's warm-up) can be slow.
settings.register_profile("skmpt", max_examples=40, deadline=None, derandomize=True)
settings.load_profile("skmpt")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (setup.cfg): one worker per core this process may use, at most four.

    Each worker imports torch, transformers and lm-eval (about 380 MB before its first test), and the
    multi-process tests start two more processes each; beyond four workers the suite gains little
    (its longest tests take 10-30 s). PYTEST_XDIST_AUTO_NUM_WORKERS, where set, decides instead.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cores, 4)


@pytest.fixture
def seed():
    return 0


@pytest.fixture
def ppca_data(seed):
    """Data drawn from a PPCA with D=10, K=2 (the paper's Fig. 2 setting), N=2000."""
    rng = np.random.RandomState(seed)
    n_samples, n_features, n_components = 2000, 10, 2
    components = rng.randn(n_components, n_features)
    mean = rng.randn(n_features)
    X = rng.randn(n_samples, n_components) @ components + mean + np.sqrt(0.5) * rng.randn(n_samples, n_features)
    return X
