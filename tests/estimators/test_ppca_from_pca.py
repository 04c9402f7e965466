"""``MaskedPPCA.from_estimator(PCA)``: the PCA's explained variances, whitened or not, and its likelihood."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.decomposition import PCA

from skmpt import MaskedPPCA


def _data(seed, n_samples, n_features):
    rng = np.random.RandomState(seed)
    return rng.randn(n_samples, 2) @ rng.randn(2, n_features) + rng.randn(n_samples, n_features)


@pytest.mark.parametrize("whiten", [False, True])
def test_explained_variance_is_the_pcas(whiten):
    """With whiten=True the model's covariance (PCA.get_covariance) has another spectrum; the
    attributes are still the PCA's."""
    X = _data(0, 120, 6)
    pca = PCA(n_components=2, whiten=whiten).fit(X)
    ppca = MaskedPPCA.from_estimator(pca, device="cpu")
    np.testing.assert_array_equal(ppca.explained_variance_, pca.explained_variance_)
    np.testing.assert_array_equal(ppca.explained_variance_ratio_, pca.explained_variance_ratio_)
    np.testing.assert_allclose(ppca.log_marginal_likelihood(X), pca.score_samples(X), rtol=1e-9)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n_features=st.integers(2, 7),
    data=st.data(),
    whiten=st.booleans(),
    svd_solver=st.sampled_from(["full", "covariance_eigh", "randomized"]),
)
def test_from_pca_keeps_its_variances_and_likelihood(seed, n_features, data, whiten, svd_solver):
    n_components = data.draw(st.integers(1, n_features - 1), label="n_components")
    X = _data(seed, 3 * n_features + 5, n_features)
    pca = PCA(n_components=n_components, whiten=whiten, svd_solver=svd_solver, random_state=0).fit(X)
    ppca = MaskedPPCA.from_estimator(pca, device="cpu")
    np.testing.assert_array_equal(ppca.explained_variance_, pca.explained_variance_)
    np.testing.assert_array_equal(ppca.explained_variance_ratio_, pca.explained_variance_ratio_)
    np.testing.assert_allclose(ppca.log_marginal_likelihood(X), pca.score_samples(X), rtol=1e-8, atol=1e-8)
    if not whiten:  # then they are also the model's variances along its principal axes
        spectrum = np.linalg.eigvalsh(ppca.get_covariance())[::-1][:n_components]
        np.testing.assert_allclose(spectrum, pca.explained_variance_, rtol=1e-8, atol=1e-10)
