"""MaskedVAE's importance-sampling diagnostics against independent computations."""

import warnings

import numpy as np
import pytest
import torch
from scipy.stats import genpareto

from skmpt import MaskedVAE
from skmpt.datasets import make_ppca
from skmpt.models import VAEModule, importance_diagnostics
from skmpt.models.importance import pareto_khat


@pytest.fixture(scope="module")
def fitted():
    X = make_ppca(100, 4, 1, random_state=0).data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vae = MaskedVAE(1, hidden_layer_sizes=(8,), max_epochs=1, n_lml_samples=200, random_state=0,
                        device="cpu").fit(X)  # its module_ meets CPU tensors and generators
    return vae, X[:6]


def test_ess_and_standard_error_against_numpy():
    log_weights = np.random.RandomState(0).randn(5, 300) * 0.8 - 3.0
    d = importance_diagnostics(log_weights)
    w = np.exp(log_weights)
    np.testing.assert_allclose(d["log_mean"], np.log(w.mean(1)), rtol=1e-12)
    np.testing.assert_allclose(d["ess"], w.sum(1) ** 2 / (w**2).sum(1), rtol=1e-12)
    delta = w.std(1, ddof=1) / np.sqrt(300) / w.mean(1)  # sd of the mean over the mean
    np.testing.assert_allclose(d["standard_error"], delta, rtol=1e-12)


@pytest.mark.parametrize("shape", [0.2, 0.5, 0.9])
def test_pareto_khat_recovers_the_tail_shape(shape):
    w = genpareto.rvs(shape, size=(100, 4000), random_state=np.random.RandomState(1))
    khat = pareto_khat(np.log(w))
    # 100 fits of M = 190 tail draws each, with PSIS's prior (M k + 5) / (M + 10)
    assert abs(khat.mean() - (190 * shape + 5) / 200) < 0.05
    assert np.isinf(pareto_khat(np.zeros((2, 10)))).all()  # too few draws for a tail


def test_diagnostics_agree_with_log_marginal_likelihood(fitted):
    vae, X = fitted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lml, d = vae.log_marginal_likelihood(X, return_diagnostics=True)
    np.testing.assert_allclose(lml, vae.log_marginal_likelihood(X), rtol=1e-12)
    np.testing.assert_array_equal(lml, d.log_marginal)
    assert ((d.ess >= 1) & (d.ess <= 200)).all() and d.threshold == pytest.approx(1 - 1 / np.log10(200))
    np.testing.assert_array_equal(d.reliable, d.pareto_k <= d.threshold)


def test_a_sample_with_nothing_observed_scores_exactly_zero_on_both_paths(fitted):
    vae, X = fitted
    X = X.copy()
    X[1] = np.nan
    X[2, :2] = np.nan
    plain = vae.log_marginal_likelihood(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log_marginal, d = vae.log_marginal_likelihood(X, return_diagnostics=True)
    assert plain[1] == log_marginal[1] == 0.0
    assert d.ess[1] == 200 and d.standard_error[1] == 0.0
    assert d.pareto_k[1] == -np.inf and d.reliable[1]
    # The other samples, partly observed or not, keep their importance-sampled estimates.
    np.testing.assert_allclose(log_marginal, plain, rtol=1e-12)
    assert (log_marginal[[0, 2]] < 0).all()


def test_standard_error_matches_the_spread_of_repeats(fitted):
    vae, X = fitted
    module = vae.module_
    X_t = torch.as_tensor(X - vae.offset_)
    with torch.no_grad():
        repeats = np.stack([module.log_marginal(X_t, 200, generator=torch.Generator().manual_seed(s)).numpy()
                            for s in range(60)])
        log_weights = module.log_importance_weights(X_t, 200, generator=torch.Generator().manual_seed(99)).numpy()
    d = importance_diagnostics(log_weights)
    ratio = repeats.std(0, ddof=1) / d["standard_error"]
    # 60 repeats give the spread within about 10%; one set of 200 weights, the SE within ~20%
    assert ((ratio > 0.6) & (ratio < 1.6)).all(), ratio
    assert 0.8 < np.median(ratio) < 1.25
    print("repeat spread / delta-method SE:", np.round(ratio, 3), "pareto k:", np.round(d["pareto_k"], 2))


def test_unreliable_estimates_warn():
    X = make_ppca(50, 3, 1, random_state=0).data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vae = MaskedVAE(1, hidden_layer_sizes=(4,), max_epochs=1, n_lml_samples=10, random_state=0).fit(X)
    with pytest.warns(UserWarning, match=r"unreliable.*n_lml_samples=10.*inf: too few draws"):
        d = vae.importance_diagnostics(X[:3])
    assert not d.reliable.any()
    # A proposal far from the posterior: a degenerate encoder variance gives heavy-tailed weights.
    module = VAEModule(3, 1, (4,), "tanh", "gaussian", dtype=torch.float64)
    with torch.no_grad():
        module.encoder[-1].bias.fill_(-12.0)  # q(z | x) far too narrow
        log_weights = module.log_importance_weights(torch.randn(4, 3, dtype=torch.float64), 400,
                                                    generator=torch.Generator().manual_seed(0))
    assert (importance_diagnostics(log_weights.numpy())["pareto_k"] > 0.7).all()


def test_conditional_diagnostics_of_the_importance_sampled_conditionals(fitted):
    vae, X = fitted
    masks = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 1]], dtype=bool)
    with pytest.warns(UserWarning, match=r"conditionals of 18 of 18.*n_particles=16"):
        log_prob, d = vae.conditional_log_prob(X, masks, return_diagnostics=True)
    np.testing.assert_array_equal(log_prob, vae.conditional_log_prob(X, masks))  # the same draws
    assert d.ess.shape == d.pareto_k.shape == (6, 3) and d.standard_error.shape == (6, 3, 4)
    assert ((d.ess >= 1) & (d.ess <= 16)).all() and not d.reliable.any()  # S = 16 < 20: no tail fit
    assert (d.standard_error[:, ~masks] == 0).all() and (d.standard_error[:, masks] > 0).all()
    # The delta-method SE against the spread of 40 independent sets of 400 particles.
    module = VAEModule(4, 1, (8,), "relu", "gaussian", n_particles=400)
    module.load_state_dict(vae.module_.state_dict())
    X_t, mask_t = torch.as_tensor(X - vae.offset_), torch.as_tensor(masks)
    with torch.no_grad():
        repeats = np.stack([module.masked_log_prob(X_t, mask_t, generator=torch.Generator().manual_seed(s)).numpy()
                            for s in range(40)])
        generator = torch.Generator().manual_seed(99)
        log_w, token = module.masked_log_prob_weights(X_t, mask_t, generator=generator)
        estimate = module.masked_log_prob(X_t, mask_t, generator=torch.Generator().manual_seed(99))
    np.testing.assert_allclose(torch.logsumexp(log_w.unsqueeze(-1) + token, -2)[:, mask_t], estimate[:, mask_t])
    w, p = log_w.exp().numpy()[..., None], np.exp(token.numpy() - estimate.numpy()[:, :, None])
    se = np.sqrt((w**2 * (p - 1) ** 2).sum(2))[:, masks]
    ratio = repeats.std(0, ddof=1)[:, masks] / se
    assert 0.8 < np.median(ratio) < 1.25, ratio
