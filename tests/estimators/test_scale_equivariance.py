"""The Gaussian mixtures are equivariant to each feature's scale, and so are their fits: ``score(X * s) == score(X) - sum(log s)`` for any positive per-feature ``s``, on
complete data, and with holes less the log-scales of the missing entries (issue 42: a factor analysis with one column at 1e-2 and one at 1e2
scored -6.42 where the optimum is about -4.47, and -21.7 at scales 1e-4 ... 1e4). PPCA's
isotropic noise is equivariant to one scale shared by every feature."""

import warnings

import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedGaussianMixture, MaskedPPCA

N_FEATURES = 4


def _data(missing):
    rng = np.random.RandomState(0)
    X = rng.randn(150, 2) @ rng.randn(2, N_FEATURES) + 0.5 * rng.randn(150, N_FEATURES)
    X[:60] += 3.0  # two clusters, for the mixtures
    if missing:
        X[rng.rand(*X.shape) < 0.2] = np.nan
    return X


_SCALES = st.lists(st.floats(-6, 6), min_size=N_FEATURES, max_size=N_FEATURES).map(lambda e: 10.0 ** np.array(e))

_ESTIMATORS = {
    "gmm_full": lambda: MaskedGaussianMixture(2),
    "gmm_diag": lambda: MaskedGaussianMixture(2, covariance_type="diag"),
    "gmm_tied": lambda: MaskedGaussianMixture(2, covariance_type="tied"),
    "gmm_em": lambda: MaskedGaussianMixture(2, init_params="em"),
}


def _score(estimator, X):
    estimator.set_params(max_epochs=8, random_state=0, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        estimator.fit(X)
    return estimator.score(X)


@pytest.mark.parametrize("missing", [False, True])
@pytest.mark.parametrize("name", sorted(_ESTIMATORS))
@hypothesis.settings(max_examples=4, deadline=None)
@hypothesis.given(scales=_SCALES)
def test_a_fit_is_equivariant_to_each_features_scale(name, missing, scales):
    X = _data(missing)
    reference = _score(_ESTIMATORS[name](), X)
    scaled = _score(_ESTIMATORS[name](), X * scales)
    # log p(x_o) moves by the log-scales of the observed entries
    log_scales = np.mean(~np.isnan(X) @ np.log(scales))
    assert scaled == pytest.approx(reference - log_scales, abs=1e-6 * (1 + abs(reference)))


@pytest.mark.parametrize("missing", [False, True])
@hypothesis.settings(max_examples=4, deadline=None)
@hypothesis.given(exponent=st.floats(-6, 6))
def test_ppca_is_equivariant_to_one_shared_scale(missing, exponent):
    X, scale = _data(missing), 10.0**exponent
    reference = _score(MaskedPPCA(2, solver="minibatch"), X)
    scaled = _score(MaskedPPCA(2, solver="minibatch"), X * scale)
    log_scales = np.mean((~np.isnan(X)).sum(1)) * np.log(scale)
    assert scaled == pytest.approx(reference - log_scales, abs=1e-6 * (1 + abs(reference)))
