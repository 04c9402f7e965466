"""``sample_weight`` over its space: only relative weights matter, and integer weights are repeated rows.

Weights whose sum overflowed gave a ``ZeroDivisionError`` at fit and NaN at score, and
``n_components="mle"`` or a variance fraction ignored the weights. ``"mle"`` then chose from the
weighted spectrum but counted the rows, not the samples the weights count (4 components where
the repeated rows give 5): Minka's evidence depends on the number of samples, so for ``"mle"``
the weights' scale matters, as repeated rows do.
"""

import warnings

import numpy as np
import pytest
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
@given(seed=st.integers(0, 1000), exponent=st.integers(-1000, 1000), n_components=st.sampled_from([1, 0.7]),
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


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 1000), n_features=st.integers(3, 8), solver=st.sampled_from(["moments", "minibatch"]),
       integer_weights=st.lists(st.integers(0, 5), min_size=30, max_size=30))
def test_mle_with_integer_weights_is_pcas_on_repeated_rows(seed, n_features, solver, integer_weights):
    rng = np.random.RandomState(seed)
    X = rng.randn(30, 3) @ rng.randn(3, n_features) + rng.randn(30, n_features) * rng.uniform(0.05, 1, n_features)
    weights = np.asarray(integer_weights)
    assume(weights.sum() >= n_features and (weights > 0).sum() >= 2)
    repeated = PCA("mle").fit(np.repeat(X, weights, axis=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted = MaskedPPCA("mle", solver=solver, max_epochs=1, random_state=0, device="cpu").fit(
            X, sample_weight=weights)
    assert fitted.n_components_ == repeated.n_components_


def test_mle_counts_the_samples_the_weights_count():
    """The reproducer: weights 1..4 on 42 rows of six features (105 samples) choose 5 as their
    repeated rows do, where the 42 rows alone give 4; the weights' sum must reach the features."""
    rng = np.random.RandomState(24)
    n_samples, n_features = int(rng.randint(8, 60)), int(rng.randint(3, 9))
    X = rng.randn(n_samples, 3) @ rng.randn(3, n_features) + rng.randn(n_samples, n_features) * rng.uniform(
        0.05, 1, size=n_features)
    weights = rng.randint(1, 5, size=n_samples)
    assert (n_samples, n_features) == (42, 6)
    repeated = PCA("mle").fit(np.repeat(X, weights, axis=0)).n_components_
    assert repeated == 5 and PCA("mle").fit(X).n_components_ == 4
    assert _fit("mle", X, weights).n_components_ == repeated
    doubled = PCA("mle").fit(np.repeat(X, 2 * weights, axis=0)).n_components_
    assert _fit("mle", X, weights * 2.0).n_components_ == doubled
    for few in (np.full(n_samples, 0.1), np.full(n_samples, 1e307)):  # 4.2 samples; a sum that overflows
        with pytest.raises(ValueError, match="n_components='mle' needs at least as many samples as features.*"
                                             "counts sum\\(sample_weight\\) samples"):
            _fit("mle", X, few)
