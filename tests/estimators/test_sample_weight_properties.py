"""``sample_weight`` over its space: only relative weights matter, and integer weights are repeated rows.

Weights whose sum overflowed gave a ``ZeroDivisionError`` at fit and NaN at score, and
``n_components="mle"`` or a variance fraction ignored the weights.
"""

import warnings

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedPPCA


def _data(seed, n_samples=30, n_features=5):
    rng = np.random.RandomState(seed)
    return rng.randn(n_samples, 2) @ rng.randn(2, n_features) * 2 + rng.randn(n_samples, n_features)


def _fit(n_components, X, weights):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return MaskedPPCA(n_components, max_epochs=1, random_state=0, device="cpu").fit(X, sample_weight=weights)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000), exponent=st.integers(-1000, 1000), n_components=st.sampled_from([1, 0.7, "mle"]),
       integer_weights=st.lists(st.integers(1, 4), min_size=30, max_size=30))
def test_scaling_the_weights_by_any_power_of_two_changes_nothing(seed, exponent, n_components, integer_weights):
    X = _data(seed)
    weights = np.asarray(integer_weights, dtype=float)
    scaled = weights * 2.0**exponent  # exact; the sum overflows for the largest exponents
    plain, rescaled = _fit(n_components, X, weights), _fit(n_components, X, scaled)
    assert rescaled.n_components_ == plain.n_components_
    np.testing.assert_array_equal(rescaled.components_, plain.components_)
    assert rescaled.score(X, sample_weight=scaled) == plain.score(X, sample_weight=weights)
    assert np.isfinite(rescaled.score(X, sample_weight=scaled))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000), fraction=st.floats(0.3, 0.95),
       integer_weights=st.lists(st.integers(1, 5), min_size=30, max_size=30))
def test_a_variance_fraction_with_integer_weights_is_pcas_on_repeated_rows(seed, fraction, integer_weights):
    X = _data(seed)
    weights = np.asarray(integer_weights)
    repeated = PCA(fraction).fit(np.repeat(X, weights, axis=0))
    shares = np.cumsum(PCA().fit(np.repeat(X, weights, axis=0)).explained_variance_ratio_)
    assume(np.min(np.abs(shares - fraction)) > 1e-6)  # no tie at the threshold
    assert _fit(fraction, X, weights).n_components_ == repeated.n_components_
