import copy
import importlib.util
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.stats import multivariate_normal
from sklearn.base import clone
from sklearn.decomposition import PCA, FactorAnalysis
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from support.helpers import make_ppca_module
from support.references import dense_conditionals, generic_chain, one_thread  # noqa: F401 (fixture)
from skmpt import MaskedFactorAnalysis, MaskedPPCA, objectives
from skmpt.masks import all_masks, random_orderings
from skmpt.models import FactorAnalysisModule



def fa_parameters(max_features=6, max_components=3):
    """Factor-analysis parameters (components, mean, noise_variance) with per-feature noise."""
    value = st.floats(-3.0, 3.0, allow_nan=False, allow_subnormal=False)

    @st.composite
    def build(draw):
        n_features = draw(st.integers(1, max_features))
        n_components = draw(st.integers(1, min(max_components, n_features)))
        components = draw(hnp.arrays(np.float64, (n_components, n_features), elements=value))
        mean = draw(hnp.arrays(np.float64, (n_features,), elements=value))
        noise = draw(hnp.arrays(np.float64, (n_features,), elements=st.floats(0.05, 5.0)))
        return components, mean, noise

    return build()


def make_fa_module(components, mean, noise_variance):
    return FactorAnalysisModule(*(torch.as_tensor(a, dtype=torch.float64) for a in (components, mean, noise_variance)))


def sklearn_fa(components, mean, noise_variance):
    """A FactorAnalysis holding the given parameters, as if fitted."""
    fa = FactorAnalysis(n_components=components.shape[0])
    fa.components_, fa.mean_, fa.noise_variance_ = components, mean, noise_variance
    fa.n_features_in_ = len(mean)
    return fa


@given(params=fa_parameters(), seed=st.integers(0, 2**16))
def test_identity_and_every_path_agree_with_dense_gaussian(params, seed):
    components, mean, noise = params
    module = make_fa_module(*params)
    rng = np.random.RandomState(seed)
    X = rng.randn(4, len(mean)) * 2 + mean
    X_t = torch.as_tensor(X)
    masks = all_masks(len(mean))
    orderings = random_orderings(3, len(mean), random_state=seed)
    with torch.no_grad():
        lml = module.log_marginal(X_t).numpy()
        exhaustive = objectives.cumulative_score(module, X_t, score_method="exhaustive").numpy()
        per_token = module.masked_log_prob(X_t, masks).numpy()
        sums = module.masked_log_prob_sum(X_t, masks).numpy()
        per_sample = module.masked_log_prob_sum(X_t, masks.expand(4, -1, -1)).numpy()
        chain = module.chain_log_prob(X_t, orderings).numpy()
        reference_chain = generic_chain(module, X_t, orderings).numpy()
    cov = components.T @ components + np.diag(noise)
    # the closed form is FactorAnalysis's log-likelihood and the Gaussian density
    np.testing.assert_allclose(lml, sklearn_fa(*params).score_samples(X), rtol=1e-9)
    np.testing.assert_allclose(lml, np.atleast_1d(multivariate_normal(mean, cov).logpdf(X)), rtol=1e-9)
    # the identity, exhaustively and along single orderings
    np.testing.assert_allclose(exhaustive, lml, rtol=1e-9)
    np.testing.assert_allclose(chain.sum(-1), np.repeat(lml[:, None], 3, 1), rtol=1e-9)
    # the reference against dense conditioning, the fast paths against the reference
    dense, _ = dense_conditionals(mean, cov, X, masks.numpy())
    np.testing.assert_allclose(per_token, dense, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(sums, per_token.sum(-1), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(per_sample, sums, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(chain, reference_chain, rtol=1e-9, atol=1e-10)


def test_equal_noise_is_ppca():
    """With one noise variance for every feature, FA's every method is PPCA's."""
    rng = np.random.RandomState(0)
    components, mean, X = rng.randn(2, 5), rng.randn(5), torch.as_tensor(rng.randn(6, 5))
    fa, ppca = make_fa_module(components, mean, np.full(5, 0.7)), make_ppca_module(components, mean, 0.7)
    masks, orderings = all_masks(5), random_orderings(4, 5, random_state=0)
    with torch.no_grad():
        for name, args in [("masked_log_prob", (X, masks)), ("masked_log_prob_sum", (X, masks)),
                           ("chain_log_prob", (X, orderings)), ("log_marginal", (X,)), ("posterior", (X,))]:
            ours, theirs = getattr(fa, name)(*args), getattr(ppca, name)(*args)
            for a, b in zip(*((out,) if torch.is_tensor(out) else out for out in (ours, theirs)), strict=True):
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_ppca_rank_one_chain_is_wrong_for_per_feature_noise():
    """The chain derived for per-feature noise is exact; PPCA's isotropic one is not."""
    rng = np.random.RandomState(1)
    components, mean, noise = rng.randn(2, 6), rng.randn(6), np.array([0.05, 0.1, 0.5, 1.0, 2.0, 4.0])
    X = torch.as_tensor(rng.randn(5, 6) + mean)
    orderings = random_orderings(2, 6, random_state=0)
    fa = make_fa_module(components, mean, noise)
    isotropic = make_ppca_module(components, mean, noise.mean())
    with torch.no_grad():
        lml = fa.log_marginal(X).numpy()
        np.testing.assert_allclose(fa.chain_log_prob(X, orderings).sum(-1).numpy(), lml[:, None].repeat(2, 1))
        assert np.abs(isotropic.chain_log_prob(X, orderings).sum(-1).numpy() - lml[:, None]).max() > 0.1


def test_unstandardize_with_per_feature_scale_is_exact():
    rng = np.random.RandomState(2)
    module = make_fa_module(rng.randn(2, 4), rng.randn(4), rng.uniform(0.1, 2, 4))
    center, scale = torch.as_tensor(rng.randn(4)), torch.as_tensor(rng.uniform(0.5, 3, 4))
    X = torch.as_tensor(rng.randn(7, 4))
    with torch.no_grad():
        before = module.log_marginal(X)
        mapped = copy.deepcopy(module).unstandardize_(center, scale)
        after = mapped.log_marginal(center + scale * X)
        np.testing.assert_allclose(after.numpy(), (before - scale.log().sum()).numpy(), rtol=1e-12)
        masks = all_masks(4)
        np.testing.assert_allclose(
            mapped.masked_log_prob(center + scale * X, masks).numpy(),
            (module.masked_log_prob(X, masks) - torch.where(masks, scale.log(), 0.0)).numpy(),
            rtol=1e-10, atol=1e-12,
        )


def test_from_estimator_matches_factor_analysis():
    rng = np.random.RandomState(0)
    X = rng.randn(200, 2) @ rng.randn(2, 7) + rng.randn(200, 7) * rng.uniform(0.2, 2, 7)
    em = FactorAnalysis(n_components=2, random_state=0).fit(X)
    fa = MaskedFactorAnalysis.from_estimator(em, device="cpu", random_state=0)
    assert fa.n_components == 2 and fa.history_ == [] and fa.n_iter_ == 0
    np.testing.assert_allclose(fa.log_marginal_likelihood(X), em.score_samples(X), rtol=1e-9)
    np.testing.assert_allclose(fa.score_samples(X), em.score_samples(X), rtol=1e-9)  # chain: exact
    np.testing.assert_allclose(fa.transform(X), em.transform(X), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fa.get_covariance(), em.get_covariance(), rtol=1e-12)
    np.testing.assert_allclose(fa.get_precision(), em.get_precision(), rtol=1e-9, atol=1e-12)
    for name in ("components_", "mean_", "noise_variance_"):
        np.testing.assert_allclose(getattr(fa, name), getattr(em, name), rtol=1e-14)  # psi via exp(log psi)
    restored = pickle.loads(pickle.dumps(fa))
    np.testing.assert_array_equal(restored.score_samples(X[:5]), fa.score_samples(X[:5]))


def test_from_estimator_refuses_bad_sources():
    with pytest.raises(NotFittedError):
        MaskedFactorAnalysis.from_estimator(FactorAnalysis(2))
    with pytest.raises(TypeError, match="takes a fitted FactorAnalysis; got PCA"):
        MaskedFactorAnalysis.from_estimator(PCA(2).fit(np.eye(4)))
    em = FactorAnalysis(1).fit(np.random.RandomState(0).randn(20, 3))
    with pytest.raises(ValueError, match="n_components is taken from the FactorAnalysis"):
        MaskedFactorAnalysis.from_estimator(em, n_components=3)
    with pytest.raises(ValueError, match="score_method"):
        MaskedFactorAnalysis.from_estimator(em, score_method="exact")


@pytest.mark.parametrize("whiten", [False, True])
def test_ppca_from_pca(whiten):
    rng = np.random.RandomState(0)
    X = rng.randn(150, 3) @ rng.randn(3, 6) + rng.randn(150, 6)
    pca = PCA(n_components=2, whiten=whiten).fit(X)
    ppca = MaskedPPCA.from_estimator(pca, device="cpu", score_method="chain", score_masks=1)
    np.testing.assert_allclose(ppca.log_marginal_likelihood(X), pca.score_samples(X), rtol=1e-9)
    np.testing.assert_allclose(ppca.score_samples(X), pca.score_samples(X), rtol=1e-9)
    np.testing.assert_allclose(ppca.get_covariance(), pca.get_covariance(), rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="noise_variance_ is 0.0: it keeps 6 components of 6 features"):
        MaskedPPCA.from_estimator(PCA().fit(X))
    with pytest.raises(TypeError, match="takes a fitted PCA"):
        MaskedPPCA.from_estimator(FactorAnalysis(2).fit(X))


def heteroscedastic_data(n_samples=2000, n_features=10, n_components=2, seed=0):
    rng = np.random.RandomState(seed)
    noise = np.exp(rng.uniform(np.log(0.05), np.log(2.0), n_features))
    loadings, mean = rng.randn(n_components, n_features), rng.randn(n_features)
    return rng.randn(n_samples, n_components) @ loadings + mean + rng.randn(n_samples, n_features) * np.sqrt(noise)


@pytest.mark.slow
def test_mpt_training_reaches_factor_analysis_optimum():
    """N=2000, D=10, K=2 with noise variances from 0.05 to 2: MPT lands next to EM's optimum."""
    X = heteroscedastic_data()
    optimum = FactorAnalysis(2).fit(X).score(X)
    fa = MaskedFactorAnalysis(2, random_state=0, monitor="lml").fit(X)
    lml = fa.log_marginal_likelihood(X).mean()
    assert optimum - 0.02 < lml < optimum + 1e-9
    assert fa.history_[-1]["lml"] > fa.history_[0]["lml"]
    np.testing.assert_allclose(fa.score(X), lml, rtol=1e-9)  # the chain score is exact


def test_fit_transform_clone_pickle():
    X = heteroscedastic_data(n_samples=150, n_features=5)
    fa = MaskedFactorAnalysis(2, max_epochs=5, random_state=0, monitor="lml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fa.fit(X)
    assert fa.noise_variance_.shape == (5,) and fa.components_.shape == (2, 5)
    W, psi = fa.components_, fa.noise_variance_
    cov_z = np.linalg.inv(np.eye(2) + (W / psi) @ W.T)
    np.testing.assert_allclose(fa.transform(X[:4]), (X[:4] - fa.mean_) / psi @ W.T @ cov_z, rtol=1e-9)
    np.testing.assert_allclose(fa.get_precision() @ fa.get_covariance(), np.eye(5), atol=1e-9)
    np.testing.assert_allclose(fa.score(X), fa.log_marginal_likelihood(X).mean(), rtol=1e-9)
    restored = pickle.loads(pickle.dumps(fa))
    np.testing.assert_array_equal(restored.transform(X[:3]), fa.transform(X[:3]))
    assert clone(fa).get_params() == fa.get_params()


@pytest.mark.parametrize(
    "params, X, message",
    [
        ({"n_components": 0}, np.ones((5, 3)), "n_components"),
        ({"n_components": 4}, np.random.RandomState(0).randn(10, 3), r"n_components=4 .* 3 feature\(s\)"),
        ({}, np.full((10, 3), np.nan), "NaN"),
    ],
)
def test_bad_input(params, X, message):
    with pytest.raises(ValueError, match=message):
        MaskedFactorAnalysis(**params).fit(X)


def test_gallery_example_runs_small(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = Path(__file__).resolve().parents[2] / "examples" / "plot_mpt_vs_em.py"
    spec = importlib.util.spec_from_file_location("plot_mpt_vs_em", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    output = tmp_path / "mpt_vs_em.png"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        example.main(["--n-samples", "150", "--max-epochs", "3", "--output", str(output)])
    printed = capsys.readouterr().out
    assert "FactorAnalysis" in printed and "GaussianMixture" in printed
    assert output.stat().st_size > 10_000


def _scaled_with_holes(n_samples=500, seed=0):
    """Two factors of six features on scales e^-3 ... e^3, a fifth of the entries missing."""
    rng = np.random.RandomState(seed)
    noise = np.exp(rng.uniform(np.log(0.1), np.log(1.0), 6))
    X = rng.randn(n_samples, 2) @ rng.randn(2, 6) + rng.randn(n_samples, 6) * np.sqrt(noise)
    X = X * np.exp(rng.uniform(-3, 3, 6))
    X[rng.rand(*X.shape) < 0.2] = np.nan
    return X


def test_warm_start_continues_a_fit_to_fewer_rows_by_em_with_holes_to_the_optimum():
    X = _scaled_with_holes()
    # Nothing fitted yet: warm_start=True is the fit from the start.
    first = MaskedFactorAnalysis(2, random_state=0, warm_start=True).fit(X[:250])
    assert first.n_iter_ > 0 and first.warm_start
    cold = MaskedFactorAnalysis(2, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warm = copy.deepcopy(first).set_params(warm_start=True).fit(X)
    # EM with holes climbed from the fit to half the rows: no epoch of MPT was needed.
    assert warm.converged_ and warm.n_iter_ == 0 and warm.history_ == []
    assert warm._optimality_gap(X, None) <= warm.tol
    lml = warm.log_marginal_likelihood(X).mean()
    assert lml >= cold.log_marginal_likelihood(X).mean() - 1e-4  # at the cold fit's optimum, or above
    assert lml > first.log_marginal_likelihood(X).mean() + 0.01  # it moved from where it started


def test_warm_start_on_complete_data_from_a_moment_fit_is_checked_not_retrained():
    X = heteroscedastic_data(n_samples=400, n_features=6)
    source = MaskedFactorAnalysis.from_estimator(FactorAnalysis(2, tol=1e-6, max_iter=3000).fit(X))
    warm = copy.deepcopy(source).set_params(warm_start=True).fit(X)
    assert warm.converged_ and warm.n_iter_ == 0  # at the optimum already: the check passes
    np.testing.assert_allclose(warm.log_marginal_likelihood(X), source.log_marginal_likelihood(X), atol=1e-4)


def test_warm_start_refuses_what_no_longer_fits_the_fitted_model_before_it_changes():
    X = _scaled_with_holes(n_samples=200)
    fitted = MaskedFactorAnalysis(2, max_epochs=3, random_state=0, warm_start=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted.fit(X)
    components = fitted.components_.copy()
    changed = r"whose n_components is 2; n_components is now 3\. Refit with warm_start=False"
    with pytest.raises(ValueError, match=changed):
        copy.deepcopy(fitted).set_params(n_components=3).fit(X)
    with pytest.raises(ValueError, match="continues the fitted MaskedFactorAnalysis of 6 features; X has 5"):
        fitted.fit(X[:, :5])
    np.testing.assert_array_equal(fitted.components_, components)
    with pytest.raises(ValueError, match="warm_start"):
        MaskedFactorAnalysis(warm_start="yes").fit(X)


def test_warm_start_does_not_continue_a_dask_collection():
    dask_array = pytest.importorskip("dask.array")
    X = heteroscedastic_data(n_samples=200, n_features=5)
    fitted = MaskedFactorAnalysis(2, random_state=0).fit(X).set_params(warm_start=True)
    with pytest.raises(ValueError, match="X is a dask collection.*partial_fit"):
        fitted.fit(dask_array.from_array(X, chunks=100))


def _heywood_rows(n_samples=80, holes=0.1, seed=0):
    """Rows of a one-factor model whose last column is twice the first (plus 1e-4 of noise): the
    likelihood peaks where the noise of those columns nearly vanishes (a Heywood case); ``holes``
    of the entries NaN."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n_samples, 1) @ rng.randn(1, 4) + 0.5 * rng.randn(n_samples, 4)
    X[:, 3] = 2 * X[:, 0] + 1e-4 * rng.randn(n_samples)
    X[rng.rand(*X.shape) < holes] = np.nan
    return X


def _floored_em_gain(fa, X):
    from support.em_missing import linear_gaussian_em_gain

    start = (fa.components_.T, fa.mean_, fa.noise_variance_)
    return linear_gaussian_em_gain(X, start, isotropic=False, floor=fa.module_.noise_floors().detach().double())


def test_a_heywood_feature_keeps_its_noise_at_the_floor_and_the_fit_at_that_optimum():
    X = _heywood_rows()
    fa = MaskedFactorAnalysis(1, random_state=0).fit(X)
    floors = fa.module_.noise_floors().detach().numpy()
    relative = fa.noise_variance_ / np.nanvar(X, 0)
    assert np.all(fa.noise_variance_ >= floors * (1 - 1e-9))
    assert 5e-3 < relative.min() < 2e-2  # held at the floor, about 1e-2 of the feature's variance
    assert fa.converged_ and _floored_em_gain(fa, X) <= fa.tol  # at the optimum with the floor


def test_a_warm_start_from_an_exact_moment_fit_holds_the_noise_at_the_floor():
    X = _heywood_rows(n_samples=120, holes=0.0, seed=2)
    em = FactorAnalysis(1).fit(X)
    source = MaskedFactorAnalysis.from_estimator(em)
    assert em.noise_variance_.min() / X.var(0).min() < 1e-4  # scikit-learn's fit: at the Heywood point
    np.testing.assert_allclose(source.noise_variance_, em.noise_variance_, rtol=1e-12)  # kept exactly
    X_holes = X.copy()
    X_holes[np.random.RandomState(2).rand(*X.shape) < 0.15] = np.nan
    warm = copy.deepcopy(source).set_params(warm_start=True).fit(X_holes)
    floors = warm.module_.noise_floors().detach().numpy()
    assert np.all(warm.noise_variance_ >= floors * (1 - 1e-9)) and np.any(warm.noise_variance_ < 1.01 * floors)
    assert warm.converged_ and _floored_em_gain(warm, X_holes) <= warm.tol


def test_on_complete_data_the_floor_binds_only_where_scikit_learns_fit_is_heywood():
    X = _heywood_rows(n_samples=120, holes=0.0, seed=2)
    em = FactorAnalysis(1, tol=1e-8, max_iter=10_000).fit(X)
    fa = MaskedFactorAnalysis(1, random_state=0).fit(X)
    floors = fa.module_.noise_floors().detach().numpy()
    at_floor = fa.noise_variance_ < 1.01 * floors
    np.testing.assert_array_equal(at_floor, em.noise_variance_ < floors)  # columns 0 and 3
    assert fa.converged_ and _floored_em_gain(fa, X) <= fa.tol
    # scikit-learn's noise of 1e-9 of the variance scores the near-copied column as almost certain; bounded, it is not.
    assert fa.score(X) < em.score(X) - 1


def test_converged_is_the_datas_optimum_from_every_start():
    # Four factors of five features, 40 % of entries missing: most noises sit at the floor, so the
    # optimum the check of converged_ judges moves with it. A floor of the start's variances (here those
    # of scikit-learn's fit to the complete rows, 1 / 0.6 times the rows' with their holes at the mean)
    # said converged 0.011 nats per sample below the fit from the random start.
    rng = np.random.RandomState(1)
    X = rng.randn(200, 2) @ rng.randn(2, 5) + 0.3 * rng.randn(200, 5) * rng.uniform(0.2, 1, 5)
    X_holes = np.where(rng.rand(*X.shape) < 0.4, np.nan, X)
    source = MaskedFactorAnalysis.from_estimator(FactorAnalysis(4).fit(X), random_state=0)
    warm = source.set_params(warm_start=True).fit(X_holes)
    cold = MaskedFactorAnalysis(4, random_state=0).fit(X_holes)
    assert warm.converged_ and cold.converged_ and warm.n_iter_ == 0
    np.testing.assert_allclose(warm.module_.noise_floors().numpy(), cold.module_.noise_floors().numpy(), rtol=1e-12)
    lml = [fit.log_marginal_likelihood(X_holes).mean() for fit in (warm, cold)]
    assert abs(lml[0] - lml[1]) < warm.tol
    assert _floored_em_gain(warm, X_holes) <= warm.tol and _floored_em_gain(cold, X_holes) <= cold.tol


def test_where_em_with_holes_crawls_the_climb_still_reaches_the_optimum():
    # Four factors of six features, 40 % of entries missing: the noise nears its floor at a rate near
    # one, and 500 accelerated EM steps from scikit-learn's fit to the rows filled with their means stopped
    # 0.002 nats per sample short (then MPT trained 11 epochs and stopped short too, with a warning);
    # quasi-Newton steps then took it to 1e-6 of the optimum. SQUAREM now hands over to the check of
    # converged_ when it crawls, which passes within tol (0.0005 short), without them.
    rng = np.random.RandomState(4)
    X = rng.randn(150, 2) @ rng.randn(2, 6) + 0.3 * rng.randn(150, 6) * rng.uniform(0.2, 1, 6)
    X_holes = np.where(rng.rand(*X.shape) < 0.4, np.nan, X)
    filled = np.where(np.isnan(X_holes), np.nanmean(X_holes, 0), X_holes)
    source = MaskedFactorAnalysis.from_estimator(FactorAnalysis(4).fit(filled), random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warnings.simplefilter("error", UserWarning)
        fa = source.set_params(warm_start=True).fit(X_holes)
    assert fa.converged_ and fa.n_iter_ == 0  # climbed to the optimum, no epoch of MPT
    assert _floored_em_gain(fa, X_holes) <= fa.tol


def test_noise_floor_is_a_parameter_that_zero_switches_off():
    rng = np.random.RandomState(0)
    z = rng.randn(300, 1)
    # two columns are the factor itself, with noise far below 1e-2 of their variance: a Heywood case
    X = np.c_[z + 0.5 * rng.randn(300, 2), z + 1e-3 * rng.randn(300, 2)]
    floored = MaskedFactorAnalysis(1, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # EM's slow climb to the Heywood case
        free = MaskedFactorAnalysis(1, noise_floor=0.0, random_state=0).fit(X)
    share = floored.noise_variance_ / X.var(0)
    assert floored.converged_ and np.all(share[2:] > 0.9e-2) and np.all(share[2:] < 1.1e-2)
    assert np.all(free.noise_variance_[2:] / X.var(0)[2:] < 1e-4)
    assert free.score(X) > floored.score(X) + 1.0
    with pytest.raises(ValueError, match="noise_floor"):
        MaskedFactorAnalysis(1, noise_floor=1.0).fit(X)


@pytest.mark.parametrize("isotropic", [False, True])
def test_quasi_newton_gradient_with_holes_is_autograds(isotropic):
    # The quasi-Newton steps take the gradient of log p(x_o) in closed form (Fisher's identity: the
    # posterior mean of the complete-data gradient); it must be the derivative of the value they climb.
    import skmpt.estimators._linear_gaussian as linear_gaussian

    rng = np.random.RandomState(0)
    X = torch.as_tensor(rng.randn(40, 5) @ rng.randn(5, 5))
    seen = torch.as_tensor(rng.rand(40, 5) > 0.3, dtype=torch.float64)
    X = X * seen  # values at the holes must not matter
    weights = torch.as_tensor(rng.dirichlet(np.ones(40)))
    components, mean = torch.as_tensor(rng.randn(2, 5)), torch.as_tensor(rng.randn(5))
    noise = torch.as_tensor(rng.uniform(0.5, 2, () if isotropic else 5))
    leaves = [p.clone().requires_grad_() for p in (components, mean, noise.log())]
    value = linear_gaussian._posterior_with_holes(X, seen, weights, leaves[0], leaves[1], leaves[2].exp())[0]
    value.backward()
    closed, gradients = linear_gaussian._gradient_with_holes(X, seen, weights, components, mean, noise)
    assert float(closed) == pytest.approx(float(value.detach()), abs=1e-12)
    for leaf, gradient in zip(leaves, gradients, strict=True):
        assert gradient.shape == leaf.shape
        np.testing.assert_allclose(gradient.numpy(), leaf.grad.numpy(), rtol=1e-10, atol=1e-12)
