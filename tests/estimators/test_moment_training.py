"""Training the linear-Gaussian estimators from the data's moments (``solver="moments"``): the
optimum of training on rows, from one pass over the data, with weights, missing-data patterns
and ``partial_fit``."""

import numpy as np
import pytest
from sklearn.decomposition import PCA

from skmpt import MaskedFactorAnalysis, MaskedPPCA


def _data(n=3000, n_features=8, rank=2, seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(n, rank) @ rng.randn(rank, n_features) + 0.5 * rng.randn(n, n_features) + 3.0


def test_ppca_from_moments_reaches_the_maximum_likelihood():
    X = _data()
    ppca = MaskedPPCA(2, solver="moments", random_state=0, device="cpu").fit(X)
    assert ppca.converged_
    assert abs(ppca.log_marginal_likelihood(X).mean() - PCA(2).fit(X).score(X)) < 0.002


@pytest.mark.parametrize("estimator", [MaskedPPCA, MaskedFactorAnalysis])
def test_moments_and_minibatches_reach_the_same_optimum(estimator):
    X = _data(n=1500)
    params = {"random_state": 0, "device": "cpu", "mask_rate": 0.3}
    rows = estimator(2, solver="minibatch", **params).fit(X)
    moments = estimator(2, solver="moments", **params).fit(X)
    assert abs(rows.log_marginal_likelihood(X).mean() - moments.log_marginal_likelihood(X).mean()) < 0.01


def test_auto_trains_from_moments_from_a_thousand_rows():
    small, large = _data(n=400), _data(n=1000)
    auto = MaskedPPCA(2, random_state=0, device="cpu").fit(large)
    forced = MaskedPPCA(2, solver="moments", random_state=0, device="cpu").fit(large)
    np.testing.assert_array_equal(auto.components_, forced.components_)
    rows = MaskedPPCA(2, solver="minibatch", random_state=0, device="cpu").fit(small)
    np.testing.assert_array_equal(MaskedPPCA(2, random_state=0, device="cpu").fit(small).components_, rows.components_)


def test_integer_weights_are_repeated_rows():
    X = _data(n=1200)
    weights = np.random.RandomState(1).randint(0, 3, len(X))
    params = {"solver": "moments", "random_state": 0, "device": "cpu"}
    weighted = MaskedFactorAnalysis(2, **params).fit(X, sample_weight=weights)
    repeated = MaskedFactorAnalysis(2, **params).fit(np.repeat(X, weights, axis=0))
    np.testing.assert_allclose(weighted.score(X), repeated.score(X), rtol=1e-6)


def test_missing_entries_are_grouped_by_pattern():
    X = _data(n=2000)
    X[:500, 0] = np.nan
    X[500:900, [2, 5]] = np.nan
    params = {"random_state": 0, "device": "cpu"}
    moments = MaskedPPCA(2, solver="moments", **params).fit(X)
    rows = MaskedPPCA(2, solver="minibatch", **params).fit(X)
    assert abs(moments.score(X) - rows.score(X)) < 0.01


def test_partial_fit_accumulates_the_moments_of_every_chunk():
    X = _data(n=3000)
    params = {"solver": "moments", "random_state": 0, "device": "cpu"}
    streamed = MaskedPPCA(2, **params)
    for chunk in np.array_split(X, 3):
        streamed.partial_fit(chunk)
    assert streamed.n_iter_ == 3 and len(streamed.history_) == 3
    assert abs(streamed.score(X) - PCA(2).fit(X).score(X)) < 0.002
