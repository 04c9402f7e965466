"""Incomplete data: exact scores of the observed sub-vector, the contract on
incomplete rows, and the estimators' handling of NaN."""

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp
from scipy.stats import multivariate_normal, norm
from sklearn.base import clone

from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedLinearVAE, MaskedPPCA, MaskedVAE
from skmpt.models import (
    FactorAnalysisModule,
    GaussianMixtureModule,
    LinearVAEModule,
    PPCAModule,
    VAEModule,
)
from skmpt.models.contract import conditioning_set
from skmpt.objectives import cumulative_score, log_marginal, mpt_curve
from skmpt.testing import check_masked_model

F64 = torch.float64


def _random_model(kind, n_features, n_components, generator):
    def randn(*shape):
        return torch.randn(*shape, generator=generator, dtype=F64)

    def positive(*shape):
        return torch.rand(*shape, generator=generator, dtype=F64) + 0.2

    W, mu = randn(n_components, n_features), randn(n_features)
    if kind == "ppca":
        return PPCAModule(W, mu, float(positive(())))
    if kind == "fa":
        return FactorAnalysisModule(W, mu, positive(n_features))
    if kind == "linear_vae":
        return LinearVAEModule(W, mu, 5, likelihood="gaussian", noise_variance=float(positive(())))
    weights = torch.softmax(randn(n_components), 0)
    means = 2 * randn(n_components, n_features)
    if kind == "gmm_diag":
        return GaussianMixtureModule(weights, means, positive(n_components, n_features), "diag")
    if kind == "gmm_spherical":
        return GaussianMixtureModule(weights, means, positive(n_components), "spherical")
    if kind == "gmm_tied":
        A = randn(n_features, n_features)
        tied = A @ A.mT / n_features + 0.3 * torch.eye(n_features, dtype=F64)
        return GaussianMixtureModule(weights, means, tied, "tied")
    A = randn(n_components, n_features, n_features)
    return GaussianMixtureModule(weights, means, A @ A.mT / n_features + 0.3 * torch.eye(n_features, dtype=F64))


def _direct_log_density(model, X, observed):
    """The density of each row's observed sub-vector, computed without skmpt's code paths."""
    X, observed = X.numpy(), observed.numpy()
    out = np.zeros(len(X))
    with torch.no_grad():
        for i, (x, o) in enumerate(zip(X, observed, strict=True)):
            if not o.any():
                continue
            if isinstance(model, GaussianMixtureModule):
                covariances = model.covariances().numpy()
                if model.covariance_type in ("diag", "spherical"):
                    covariances = np.stack([np.diag(c) for c in covariances])
                terms = [
                    math.log(w) + multivariate_normal(m[o], c[np.ix_(o, o)]).logpdf(x[o])
                    for w, m, c in zip(model.log_weights.exp().numpy(), model.means.numpy(), covariances, strict=True)
                ]
                out[i] = logsumexp(terms)
            elif isinstance(model, LinearVAEModule):
                # The grid's joint, by brute force: sum_g v_g prod_{d in o} N(x_d | w_d z_g + b_d, sigma^2).
                activations = (model.nodes @ model.components + model.intercept).numpy()
                sd = math.sqrt(float(model.noise_variance))
                per_node = norm(activations[:, o], sd).logpdf(x[o]).sum(1)
                out[i] = logsumexp(model.log_weights.numpy() + per_node)
            else:
                covariance = model.covariance().numpy()
                out[i] = multivariate_normal(model.mean.numpy()[o], covariance[np.ix_(o, o)]).logpdf(x[o])
    return out


KINDS = ["ppca", "fa", "gmm_full", "gmm_diag", "gmm_tied", "gmm_spherical", "linear_vae"]


@settings(max_examples=25)
@given(
    kind=st.sampled_from(KINDS),
    n_features=st.integers(2, 6),
    n_components=st.integers(1, 2),
    seed=st.integers(0, 2**31 - 1),
    rate=st.floats(0.1, 0.9),
)
def test_exact_scores_of_the_observed_sub_vector(kind, n_features, n_components, seed, rate):
    generator = torch.Generator().manual_seed(seed)
    model = _random_model(kind, n_features, n_components, generator)
    X = 2 * torch.randn(7, n_features, generator=generator, dtype=F64)
    observed = torch.rand(7, n_features, generator=generator) < rate
    observed[0] = True  # one complete row, one empty row, the rest random holes
    observed[1] = False
    direct = _direct_log_density(model, X, observed)
    with torch.no_grad():
        exact = log_marginal(model, X, observed=observed).numpy()
        exhaustive = cumulative_score(model, X, score_method="exhaustive", observed=observed).numpy()
        chain = cumulative_score(model, X, score_method="chain", score_masks=2, random_state=seed,
                                 observed=observed).numpy()
        curve = mpt_curve(model, X, score_method="exhaustive", observed=observed).numpy()
    np.testing.assert_allclose(exact, direct, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(exhaustive, direct, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(chain, direct, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(curve.sum(1), direct, rtol=1e-9, atol=1e-12)
    # The curve stops at the number of observed entries; a complete row scores as complete data.
    counts = observed.sum(1).numpy()
    for row, count in enumerate(counts):
        assert np.all(curve[row, count:] == 0)
    with torch.no_grad():
        complete = cumulative_score(model, X[:1], score_method="exhaustive").numpy()
    # equal up to rounding: the quadratic form's path is chosen by cost, which depends on n
    np.testing.assert_allclose(exhaustive[0], complete[0], rtol=1e-13, atol=0)


@pytest.mark.parametrize("kind", [*KINDS, "linear_vae_bernoulli", "vae"])
def test_check_masked_model_on_incomplete_rows(kind):
    generator = torch.Generator().manual_seed(1)
    if kind == "vae":
        torch.manual_seed(0)
        model, X = VAEModule(4, 2, (6,), "tanh", "gaussian", n_particles=4), torch.randn(5, 4, dtype=F64)
    elif kind == "linear_vae_bernoulli":
        model = LinearVAEModule(torch.randn(2, 4, generator=generator, dtype=F64), torch.zeros(4, dtype=F64), 5)
        X = torch.randint(0, 2, (5, 4), generator=generator).to(F64)
    else:
        model, X = _random_model(kind, 4, 2, generator), torch.randn(5, 4, generator=generator, dtype=F64)
    report = check_masked_model(model, X)
    assert isinstance(report["incomplete rows"], float)
    assert report["incomplete rows"] < 1e-9


def test_masks_must_lie_among_the_observed_entries():
    observed = torch.tensor([[True, False, True]])
    with pytest.raises(ValueError, match="not observed"):
        conditioning_set(torch.tensor([[False, True, False]]), observed)
    module = PPCAModule(torch.ones(1, 3, dtype=F64), torch.zeros(3, dtype=F64), 0.5)
    with pytest.raises(ValueError, match="not observed"):
        module.masked_log_prob(torch.zeros(1, 3, dtype=F64), torch.tensor([[True, True, False]]), observed=observed)


def _holes(X, rate, seed):
    X = X.copy()
    X[np.random.default_rng(seed).random(X.shape) < rate] = np.nan
    return X


ESTIMATORS = [
    ("ppca", lambda: MaskedPPCA(2, max_epochs=3, random_state=0)),
    ("fa", lambda: MaskedFactorAnalysis(2, max_epochs=3, random_state=0)),
    ("gmm_full", lambda: MaskedGaussianMixture(2, max_epochs=3, random_state=0)),
    ("gmm_diag", lambda: MaskedGaussianMixture(2, covariance_type="diag", max_epochs=3, random_state=0)),
    ("gmm_tied", lambda: MaskedGaussianMixture(2, covariance_type="tied", max_epochs=3, random_state=0)),
    ("gmm_spherical", lambda: MaskedGaussianMixture(2, covariance_type="spherical", max_epochs=3, random_state=0)),
    ("linear_vae", lambda: MaskedLinearVAE(1, likelihood="gaussian", n_quadrature=6, max_epochs=2, random_state=0)),
]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("name, make", ESTIMATORS, ids=[name for name, _ in ESTIMATORS])
def test_estimators_score_incomplete_rows_exactly(name, make):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5)) @ rng.normal(size=(5, 5)) + 3
    X_missing = _holes(X, 0.3, 1)
    X_missing[0] = np.nan  # nothing observed: log p = 0
    estimator = make().set_params(device="cpu").fit(X_missing)  # its module_ meets CPU tensors below
    observed = torch.as_tensor(~np.isnan(X_missing))
    lml = estimator.log_marginal_likelihood(X_missing)
    # The module works on data less offset_ (zero in float64): the direct density of each
    # observed sub-vector under the fitted model.
    shifted = torch.as_tensor(np.nan_to_num(X_missing - estimator.offset_))
    direct = _direct_log_density(estimator.module_, shifted, observed)
    np.testing.assert_allclose(lml, direct, rtol=1e-9, atol=1e-12)
    assert lml[0] == 0
    for method in ("exhaustive", "chain"):
        scores = clone(estimator).set_params(score_method=method).fit(X_missing).score_samples(X_missing)
        np.testing.assert_allclose(scores, direct, rtol=1e-9, atol=1e-12)
    mask_rates, curve = estimator.mpt_curve(X_missing[:5])
    np.testing.assert_allclose(curve.sum(1), direct[:5], rtol=1e-9, atol=1e-12)
    assert estimator.transform(X_missing).shape == (60, estimator.n_components_)
    assert np.isfinite(estimator.score(X_missing))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_vae_scores_incomplete_rows():
    rng = np.random.default_rng(0)
    X_missing = _holes(rng.normal(size=(40, 4)), 0.3, 2)
    X_missing[0] = np.nan
    vae = MaskedVAE(2, hidden_layer_sizes=(6,), max_epochs=2, n_lml_samples=20, score_masks=2, random_state=0)
    vae.fit(X_missing)
    scores, lml = vae.score_samples(X_missing), vae.log_marginal_likelihood(X_missing)
    assert scores[0] == 0 and lml[0] == 0
    assert np.isfinite(scores).all() and np.isfinite(lml).all()


def test_bad_incomplete_input_is_rejected_clearly():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    X_inf = X.copy()
    X_inf[3, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        MaskedPPCA(1, max_epochs=1).fit(X_inf)
    X_never = X.copy()
    X_never[:, 2] = np.nan
    with pytest.raises(ValueError, match=r"Feature\(s\) \[2\] are missing \(NaN\) in every training sample"):
        MaskedPPCA(1, max_epochs=1).fit(X_never)
    fitted = MaskedPPCA(1, max_epochs=1).fit(X)
    with pytest.raises(ValueError, match="infinity"):
        fitted.score_samples(X_inf)
    # Scoring a column missing everywhere is fine: it is marginalised out.
    assert np.isfinite(fitted.score_samples(X_never)).all()
    assert MaskedPPCA().__sklearn_tags__().input_tags.allow_nan


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_partial_fit_on_incomplete_chunks_and_complete_only_methods():
    rng = np.random.default_rng(0)
    X_missing = _holes(rng.normal(size=(100, 4)), 0.2, 4)
    estimator = MaskedPPCA(1, max_epochs=2, random_state=0)
    estimator.partial_fit(X_missing[:50]).partial_fit(X_missing[50:])
    assert np.isfinite(estimator.score_samples(X_missing)).all()
    with pytest.raises(ValueError, match="complete rows"):
        estimator.fixed_rate_bias(X_missing, 0.5)
    with pytest.raises(ValueError, match="not observed"):
        estimator.conditional_log_prob(X_missing[np.isnan(X_missing[:, 0])][:2], [[True, False, False, False]])
    # After fit, a chunk may miss a feature entirely: the model already knows it.
    chunk = X_missing[:30].copy()
    chunk[:, 2] = np.nan
    fitted = MaskedPPCA(1, max_epochs=2, random_state=0).fit(X_missing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the chunk sets units with feature 2 "constant"
        fitted.partial_fit(chunk)
    assert np.isfinite(fitted.score_samples(X_missing)).all()


def test_nan_aware_standardisation_and_offset():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)) * [1.0, 5.0, 0.2] + [1e6, -3.0, 2.0]
    X_missing = _holes(X, 0.25, 3)
    estimator = MaskedFactorAnalysis(1, dtype="float32", max_epochs=2, random_state=0)
    with pytest.warns(Warning):
        estimator.fit(X_missing)
    np.testing.assert_allclose(estimator.offset_, np.nanmean(X_missing, 0))
    assert np.isfinite(estimator.mean_).all()
    np.testing.assert_allclose(estimator.mean_, np.nanmean(X_missing, 0), rtol=1e-3, atol=0.5)
