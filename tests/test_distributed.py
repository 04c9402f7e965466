"""Scaling past one process: GridSearchCV on dask and Ray workers, and torch.distributed helpers.

The cluster tests start a dask ``LocalCluster`` (2 worker processes, one thread each) and a local
Ray instance (2 CPUs) once per module and compare every search with the same search run with
``n_jobs=1``: the scores must be identical, not merely close. The torch.distributed tests spawn 2
gloo processes on the CPU and compare them with one process.
"""

import functools
import os
import sys

import joblib
import numpy as np
import pytest
import torch
from sklearn.model_selection import GridSearchCV

from skmpt import MaskedLinearVAE, MaskedPPCA, MaskedVAE

# ---------------------------------------------------------------------------------------------
# GridSearchCV on a cluster


def _score(estimator, X, y=None):
    return estimator.score(X)


def _threads_scorer(estimator, X, y=None):
    """Torch's intra-op threads in the process that just fitted ``estimator`` (as a 'score')."""
    return float(torch.get_num_threads())


def _pid_scorer(estimator, X, y=None):
    """The id of the process that just fitted ``estimator`` (as a 'score')."""
    return float(os.getpid())


def _search(estimator, grid, X, n_jobs):
    # The estimator's own score decides; two more 'metrics' record where each fit ran.
    scoring = {"score": _score, "threads": _threads_scorer, "pid": _pid_scorer}
    return GridSearchCV(estimator, grid, cv=2, n_jobs=n_jobs, scoring=scoring, refit="score").fit(X)


def _ppca_data(n_samples=40, n_features=4, seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(n_samples, 2) @ rng.randn(2, n_features) + 0.5 * rng.randn(n_samples, n_features)


def _binary_data(n_samples=40, n_features=5, seed=0):
    return (np.random.RandomState(seed).rand(n_samples, n_features) < 0.4).astype(float)


GRIDS = {
    "ppca": (
        MaskedPPCA(max_epochs=3, score_masks=3, random_state=0),
        {"n_components": [1, 2], "mask_rate": [0.25, "uniform"]},
        _ppca_data,
    ),
    "linear_vae": (
        MaskedLinearVAE(n_quadrature=6, max_epochs=3, random_state=0),
        {"n_components": [1, 2], "mask_rate": [0.2, "uniform"]},
        _binary_data,
    ),
    "vae": (
        MaskedVAE(hidden_layer_sizes=(4,), n_particles=3, score_masks=2, n_lml_samples=5, max_epochs=2, random_state=0),
        {"n_components": [1, 2], "mask_rate": [0.25, "uniform"]},
        _ppca_data,
    ),
}


def _mlm_case():
    """A one-layer BERT scored on a few WordNet sentences, pre-trained for two steps."""
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from transformers import BertConfig

    from skmpt import MLMCurveScorer
    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    texts = [t for t in load_wordnet_sentences()[:200] if len(t.split()) <= 6][:12]
    tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:200], vocab_size=200)
    # No dropout: MLMCurveScorer.fit draws dropout from torch's global generator, which
    # random_state does not seed (yet), so two fits with dropout differ even in one process.
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    scorer = MLMCurveScorer(
        config, tokenizer=tokenizer, n_masks=1, max_steps=2, batch_size=4, device="cpu", random_state=0
    )
    return scorer, {"mask_rate": [0.15, "uniform"], "learning_rate": [1e-3, 1e-2]}, texts


@functools.cache
def _sequential(name):
    """The reference: each search of GRIDS run in this process, with ``n_jobs=1``."""
    if name != "mlm":
        estimator, grid, make_data = GRIDS[name]
        X = make_data()
        return _search(estimator, grid, X, n_jobs=1), (estimator, grid, X)
    # The float32 encoder's sums depend on how torch splits them over threads (by ~1e-10
    # relative); the float64 array estimators give the same bits with any thread count.
    estimator, grid, X = _mlm_case()
    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in each worker
    try:
        return _search(estimator, grid, X, n_jobs=1), (estimator, grid, X)
    finally:
        torch.set_num_threads(n_threads)


def _assert_same_search(parallel, sequential):
    assert parallel.best_params_ == sequential.best_params_
    for key in ("params", "mean_test_score", "split0_test_score", "split1_test_score", "rank_test_score"):
        np.testing.assert_array_equal(parallel.cv_results_[key], sequential.cv_results_[key], err_msg=key)
    assert np.isfinite(parallel.cv_results_["mean_test_score"]).all()


def _assert_ran_in_workers(search, n_workers):
    pids = {int(p) for key in ("split0_test_pid", "split1_test_pid") for p in search.cv_results_[key]}
    assert os.getpid() not in pids
    assert len(pids) <= n_workers


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, death_timeout=60
        ) as cluster,
        distributed.Client(cluster, timeout=60) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def ray_backend():
    ray = pytest.importorskip("ray")
    from ray.util.joblib import register_ray

    # Ray's workers do not share this process's sys.path: ship this module's scorers by value.
    this_module = sys.modules[__name__]
    ray.cloudpickle.register_pickle_by_value(this_module)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    register_ray()
    try:
        yield
    finally:
        ray.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(this_module)


@pytest.mark.parametrize("name", [*GRIDS, "mlm"])
def test_grid_search_on_dask_equals_sequential(dask_client, name):
    sequential, (estimator, grid, X) = _sequential(name)
    with joblib.parallel_backend("dask"):
        parallel = _search(estimator, grid, X, n_jobs=-1)
    _assert_same_search(parallel, sequential)
    # The fits ran in the worker processes, each limited to its one thread (dask's nanny sets
    # OMP_NUM_THREADS=1 before it starts a worker), not with this process's thread count.
    assert set(parallel.cv_results_["mean_test_threads"]) == {1.0}
    _assert_ran_in_workers(parallel, n_workers=2)


@pytest.mark.parametrize("name", [*GRIDS, "mlm"])
def test_grid_search_on_ray_equals_sequential(ray_backend, name):
    sequential, (estimator, grid, X) = _sequential(name)
    with joblib.parallel_backend("ray"):
        parallel = _search(estimator, grid, X, n_jobs=2)
    _assert_same_search(parallel, sequential)
    # Ray sets OMP_NUM_THREADS to a task's CPUs (one) in its workers when it is not set.
    assert set(parallel.cv_results_["mean_test_threads"]) == {1.0}
    _assert_ran_in_workers(parallel, n_workers=2)
