"""What the scikit-learn counterparts have: information criteria, sample weights, PCA's and
FactorAnalysis's attributes, and GaussianMixture's initialisation parameters."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.decomposition import PCA, FactorAnalysis
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedLinearVAE, MaskedPPCA


def blobs(n_samples=120, n_features=3, seed=0):
    rng = np.random.RandomState(seed)
    half = n_samples // 2
    return np.vstack([rng.randn(half, n_features), rng.randn(n_samples - half, n_features) @ rng.randn(3, 3) + 5])


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_mixture_bic_aic_match_gaussian_mixture(covariance_type):
    X = blobs()
    em = GaussianMixture(2, covariance_type=covariance_type, random_state=0).fit(X)
    gmm = MaskedGaussianMixture.from_estimator(em, device="cpu")
    assert gmm._n_parameters() == em._n_parameters()
    np.testing.assert_allclose(gmm.bic(X), em.bic(X), rtol=1e-10)
    np.testing.assert_allclose(gmm.aic(X), em.aic(X), rtol=1e-10)


def test_linear_gaussian_parameter_counts_and_criteria():
    X = blobs(n_features=3) @ np.random.RandomState(1).randn(3, 5)
    X = X + 0.3 * np.random.RandomState(2).randn(*X.shape)
    n, D, K = X.shape[0], 5, 2
    pca = PCA(K).fit(X)
    ppca = MaskedPPCA.from_estimator(pca, device="cpu")
    n_ppca = D * K - K * (K - 1) // 2 + D + 1  # loadings up to a rotation, mean, one noise variance
    assert ppca._n_parameters() == n_ppca == 15
    np.testing.assert_allclose(ppca.bic(X), -2 * pca.score(X) * n + n_ppca * np.log(n), rtol=1e-10)
    np.testing.assert_allclose(ppca.aic(X), -2 * pca.score(X) * n + 2 * n_ppca, rtol=1e-10)
    fa = FactorAnalysis(K, random_state=0).fit(X)
    mfa = MaskedFactorAnalysis.from_estimator(fa, device="cpu")
    assert mfa._n_parameters() == D * K - K * (K - 1) // 2 + 2 * D == 19
    np.testing.assert_allclose(mfa.bic(X), -2 * fa.score(X) * n + 19 * np.log(n), rtol=1e-10)


def test_linear_vae_criteria_use_its_exact_likelihood():
    X = (np.random.RandomState(0).rand(40, 4) > 0.5).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        vae = MaskedLinearVAE(1, n_quadrature=6, max_epochs=2, random_state=0).fit(X)
    assert vae._n_parameters() == 4 * 1 + 4  # loadings and intercepts
    lml = vae.log_marginal_likelihood(X).sum()
    np.testing.assert_allclose(vae.bic(X), -2 * lml + 8 * np.log(40), rtol=1e-12)
    np.testing.assert_allclose(vae.aic(X), -2 * vae.score(X) * 40 + 16, rtol=1e-9)  # chain: exact score


def weighted_data(seed=0, clustered=False):
    rng = np.random.RandomState(seed)
    X = rng.randn(150, 2) @ rng.randn(2, 4) + 0.5 * rng.randn(150, 4) + [1.0, -2.0, 0.5, 3.0]
    if clustered:
        X[::2] += 6
    weights = rng.randint(0, 4, 150)
    return X, weights, np.repeat(X, weights, axis=0)


@pytest.mark.parametrize("estimator", [MaskedPPCA(1, random_state=0), MaskedGaussianMixture(2, random_state=0)])
def test_weighted_training_reaches_the_repeated_rows_optimum(estimator):
    X, weights, repeated = weighted_data(clustered=isinstance(estimator, MaskedGaussianMixture))
    weighted = clone(estimator).fit(X, sample_weight=weights)
    plain = clone(estimator).fit(repeated)
    # The exact log-likelihood of the repeated data, per row, of each fit.
    lml_weighted = weighted.log_marginal_likelihood(repeated).mean()
    lml_repeated = plain.log_marginal_likelihood(repeated).mean()
    assert abs(lml_weighted - lml_repeated) < 0.02
    if isinstance(estimator, MaskedPPCA):  # the maximum-likelihood PPCA is PCA's
        optimum = PCA(1).fit(repeated).score(repeated)
    else:
        optimum = GaussianMixture(2, random_state=0).fit(repeated).score(repeated)
    assert optimum - 0.02 < lml_weighted < optimum + 1e-9
    # Weighted scoring is the mean over repeated rows.
    np.testing.assert_allclose(weighted.score(X, sample_weight=weights), weighted.score(repeated), rtol=1e-10)


def test_sample_weight_validation_and_zero_weights():
    X, weights, _ = weighted_data()
    ppca = MaskedPPCA(1, max_epochs=2, random_state=0)
    for bad, message in [(-weights, "non-negative"), (weights[:-1], r"shape \(150,\)"), (0 * weights, "sums to zero"),
                         (np.where(weights == 0, np.nan, weights), "NaN")]:
        with pytest.raises(ValueError, match=message):
            ppca.fit(X, sample_weight=bad)
        with pytest.raises(ValueError, match=message):
            ppca.partial_fit(X, sample_weight=bad)
    # A zero weight is a removed row: the same fit, to the bit.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        kept = weights > 0
        a = clone(ppca).fit(X, sample_weight=kept.astype(float))
        b = clone(ppca).fit(X[kept], sample_weight=np.ones(kept.sum()))
        c = clone(ppca).partial_fit(X, sample_weight=kept)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert c.n_iter_ == 1


def low_rank(n_samples=300, n_features=6, rank=2, seed=0):
    rng = np.random.RandomState(seed)
    return 2 * rng.randn(n_samples, rank) @ rng.randn(rank, n_features) + 0.5 * rng.randn(n_samples, n_features)


def test_explained_variance_as_pca():
    X = low_rank()
    pca = PCA(2).fit(X)
    ppca = MaskedPPCA.from_estimator(pca, device="cpu")
    np.testing.assert_allclose(ppca.explained_variance_, pca.explained_variance_, rtol=1e-10)
    np.testing.assert_allclose(ppca.explained_variance_ratio_, pca.explained_variance_ratio_, rtol=1e-10)
    fa = MaskedFactorAnalysis.from_estimator(FactorAnalysis(2, random_state=0).fit(X), device="cpu")
    W, psi = fa.components_.T, fa.noise_variance_
    shared = np.sort(np.linalg.eigvalsh(W @ W.T))[::-1][:2]  # the factors' variance, in D x D
    np.testing.assert_allclose(fa.explained_variance_, shared, rtol=1e-10)
    np.testing.assert_allclose(fa.explained_variance_ratio_, shared / np.trace(W @ W.T + np.diag(psi)), rtol=1e-10)


@pytest.mark.parametrize("n_components", ["mle", 0.5, 0.9, 0.995])
def test_n_components_chosen_as_pca(n_components):
    X = low_rank(n_features=8, rank=3, seed=1)
    expected = PCA(n_components).fit(X).n_components_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ppca = MaskedPPCA(n_components, max_epochs=2, random_state=0).fit(X)
        streamed = MaskedPPCA(n_components, random_state=0).partial_fit(X).partial_fit(X)
    assert ppca.n_components_ == streamed.n_components_ == expected
    assert ppca.components_.shape == (expected, 8) and ppca.n_components == n_components


@pytest.mark.parametrize("n_components", [1.0, 0.0, "auto", -0.5])
def test_bad_n_components(n_components):
    with pytest.raises(ValueError, match="n_components"):
        MaskedPPCA(n_components).fit(low_rank())
    with pytest.raises(ValueError, match="'mle' needs at least as many samples as features"):
        MaskedPPCA("mle").fit(low_rank(n_samples=5))


@pytest.mark.parametrize("init_params", ["kmeans", "k-means++", "random", "random_from_data"])
def test_mixture_init_params_reach_em(init_params):
    X, _, _ = weighted_data(clustered=True)
    best = GaussianMixture(2, random_state=0).fit(X).score(X)
    # EM from the same kind of start: "random" puts every mean at the data's mean, a saddle
    # point that EM, too, leaves only slowly (on these data both stop near it).
    em = GaussianMixture(2, init_params=init_params, random_state=0).fit(X).score(X)
    # Random samples as centres can both lie in one cluster, a start that gradient steps
    # leave slowly or not at all (EM's steps sometimes do): three starts, as a user would.
    n_init = 3 if init_params == "random_from_data" else 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gmm = MaskedGaussianMixture(2, init_params=init_params, n_init=n_init, max_epochs=100, random_state=0)
        gmm.fit(X)
    assert em - 0.05 < gmm.log_marginal_likelihood(X).mean() < best + 1e-9


def test_mixture_n_init_keeps_the_best_start():
    X, _, _ = weighted_data(clustered=True)
    params = {"init_params": "random", "max_epochs": 3, "random_state": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        single = MaskedGaussianMixture(2, **params).fit(X)
        best = MaskedGaussianMixture(2, n_init=3, **params).fit(X)
        # the other starts' seeds, drawn from random_state as n_init draws them
        drawn = torch.randint(2**31 - 1, (2,), generator=torch.Generator().manual_seed(0)).tolist()
        seeds = [MaskedGaussianMixture(2, **{**params, "random_state": s}).fit(X) for s in drawn]
    lmls = [m.log_marginal_likelihood(X).mean() for m in [single, *seeds]]
    assert best.log_marginal_likelihood(X).mean() == max(lmls)
    assert best.get_params() == MaskedGaussianMixture(2, n_init=3, **params).get_params()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_mixture_warm_start_continues(dtype):
    X, _, _ = weighted_data(clustered=True)
    gmm = MaskedGaussianMixture(2, covariance_type="spherical", dtype=dtype, random_state=0).fit(X)
    before = gmm.log_marginal_likelihood(X + 1.0)
    # Steps too small to move: a warm start begins exactly at the previous fit, a cold one at k-means.
    frozen = {"max_epochs": 1, "learning_rate": 1e-12}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gmm.set_params(warm_start=True, **frozen).fit(X + 1.0)  # new data, new units: mapped exactly
        cold = MaskedGaussianMixture(2, covariance_type="spherical", dtype=dtype, random_state=0, **frozen)
        cold.fit(X + 1.0)
    rtol = 1e-10 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(gmm.log_marginal_likelihood(X + 1.0), before, rtol=rtol)
    assert np.abs(cold.log_marginal_likelihood(X + 1.0) - before).max() > 1e-3
    with pytest.raises(ValueError, match="whose covariance_type is 'spherical'; covariance_type is now 'diag'"):
        gmm.set_params(covariance_type="diag").fit(X)


def test_mixture_warm_start_that_no_longer_matches_is_refused_before_anything_changes():
    """A warm start continues the fitted parameters, so a new n_components (which kept the old model
    while n_components_ and bic counted the new one) or a new width (a raw broadcast error) is refused."""
    X, _, _ = weighted_data(clustered=True)
    gmm = MaskedGaussianMixture(2, warm_start=True, max_epochs=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gmm.fit(X)
    before = gmm.bic(X)
    with pytest.raises(ValueError, match="whose n_components is 2; n_components is now 3"):
        gmm.set_params(n_components=3).fit(X)
    gmm.set_params(n_components=2)
    with pytest.raises(ValueError, match=f"mixture of {X.shape[1]} features; X has {X.shape[1] + 1}"):
        gmm.fit(np.hstack([X, X[:, :1]]))
    assert gmm.n_components_ == 2 and gmm.n_features_in_ == X.shape[1] and gmm.bic(X) == before


def test_factor_analysis_noise_variance_init():
    X = low_rank() * [1.0, 2.0, 3.0, 1.0, 0.5, 1.0]
    init = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]) * X.var(0)
    # Steps too small to move, from the random start (moments would start at PCA's solution).
    frozen = {"max_epochs": 1, "learning_rate": 1e-12, "random_state": 0, "solver": "minibatch"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fa = MaskedFactorAnalysis(2, noise_variance_init=init, **frozen).fit(X)
        default = MaskedFactorAnalysis(2, **frozen).fit(X)
    np.testing.assert_allclose(fa.noise_variance_, init, rtol=1e-8)  # in the data's units
    # the default: each feature's own variance (equivariant to its scale)
    np.testing.assert_allclose(default.noise_variance_, X.var(0), rtol=1e-8)
    # the floor is 1e-2 of each feature's variance in the data, whatever the start: a variance below it reads as it
    low = MaskedFactorAnalysis(2, noise_variance_init=init * 1e-3, **frozen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        low.fit(X)
    np.testing.assert_allclose(low.noise_variance_, 1e-2 * X.var(0), rtol=1e-8)
    for bad in (init[:-1], -init, np.full(6, np.nan)):
        with pytest.raises(ValueError, match="noise_variance_init must hold one positive"):
            MaskedFactorAnalysis(2, noise_variance_init=bad).fit(X)


def test_a_feature_observed_only_in_rows_of_zero_weight_is_refused_by_name():
    X, weights, _ = weighted_data()
    X[weights > 0, 2] = np.nan  # feature 2 is observed only where the weight is zero
    with pytest.raises(ValueError, match=r"Feature\(s\) \[2\] are observed only in samples of zero sample_weight"):
        MaskedPPCA(1, max_epochs=2, random_state=0).fit(X, sample_weight=weights)
    with pytest.raises(ValueError, match=r"Feature\(s\) \[2\] are observed only in samples of zero sample_weight"):
        MaskedPPCA(1, random_state=0).partial_fit(X, sample_weight=weights)


def test_weights_whose_sum_overflows_are_rescaled_as_relative_weights():
    X, _, _ = weighted_data()
    huge = np.full(len(X), 1e308)
    with np.errstate(over="ignore"):
        assert np.isinf(huge.sum())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ppca = MaskedPPCA(1, max_epochs=3, random_state=0).fit(X, sample_weight=huge)
        ones = MaskedPPCA(1, max_epochs=3, random_state=0).fit(X, sample_weight=np.ones(len(X)))
    np.testing.assert_array_equal(ppca.components_, ones.components_)
    assert ppca.score(X, sample_weight=huge) == ppca.score(X)
    assert np.isfinite(ppca.score(X, sample_weight=huge))


def test_mixture_n_init_compares_starts_under_weights_whose_sum_overflows():
    X, _, _ = weighted_data(clustered=True)
    params = {"init_params": "random", "max_epochs": 3, "n_init": 3, "random_state": 1}  # a later start wins
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        huge = MaskedGaussianMixture(2, **params).fit(X, sample_weight=np.full(len(X), 1e308))
        plain = MaskedGaussianMixture(2, **params).fit(X)
    np.testing.assert_array_equal(huge.means_, plain.means_)


def weighted_low_rank(rank_of_the_rest):
    """Rank-one rows, then rows of rank ``rank_of_the_rest``: weighting the first up changes the spectrum."""
    rng = np.random.RandomState(1)
    signal = 3 * rng.randn(100, 1) @ rng.randn(1, 6) + 0.1 * rng.randn(100, 6)
    rest = rng.randn(100, rank_of_the_rest) @ rng.randn(rank_of_the_rest, 6) + 0.1 * rng.randn(100, 6)
    return signal, np.vstack([signal, rest])


def test_a_variance_fraction_is_chosen_on_the_weighted_spectrum():
    signal, X = weighted_low_rank(2)
    weights = np.r_[np.full(100, 10), np.ones(100, dtype=int)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weighted = MaskedPPCA(0.8, max_epochs=2, random_state=0).fit(X, sample_weight=weights)
        plain = MaskedPPCA(0.8, max_epochs=2, random_state=0).fit(X)
    # Integer weights are repeated rows, whose PCA spectrum has the weighted spectrum's shares.
    assert weighted.n_components_ == PCA(0.8).fit(np.repeat(X, weights, axis=0)).n_components_ == 1
    assert plain.n_components_ == PCA(0.8).fit(X).n_components_ == 2


def test_mle_n_components_is_chosen_on_the_weighted_spectrum():
    signal, X = weighted_low_rank(3)
    weights = np.r_[np.ones(100), np.full(100, 1e-6)]  # the rank-three rows all but left out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weighted = MaskedPPCA("mle", max_epochs=2, random_state=0).fit(X, sample_weight=weights)
        plain = MaskedPPCA("mle", max_epochs=2, random_state=0).fit(X)
    assert weighted.n_components_ == PCA("mle").fit(signal).n_components_ == 1
    assert plain.n_components_ == PCA("mle").fit(X).n_components_ == 4
