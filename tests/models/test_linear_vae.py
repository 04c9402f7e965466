"""LinearVAEModule: its Gauss-Hermite grid, its joint summed over the grid by brute force, and PPCA's density."""


import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from scipy.special import expit

from skmpt.models import PPCAModule
from skmpt.models.linear_vae import LinearVAEModule, gauss_hermite_grid


def test_the_grid_integrates_the_standard_normal_s_moments():
    nodes, log_weights = gauss_hermite_grid(2, 5)
    weights = log_weights.exp()
    assert nodes.shape == (25, 2) and log_weights.shape == (25,)
    torch.testing.assert_close(weights.sum(), torch.tensor(1.0, dtype=torch.float64), rtol=1e-12, atol=1e-12)
    # exact up to degree 2Q - 1 = 9: E[z] = 0, E[z^2] = 1, E[z^4] = 3, E[z_1^2 z_2^2] = 1
    moments = [weights @ nodes[:, 0], weights @ nodes[:, 0] ** 2, weights @ nodes[:, 0] ** 4,
               weights @ (nodes[:, 0] ** 2 * nodes[:, 1] ** 2)]
    torch.testing.assert_close(torch.stack(moments), torch.tensor([0.0, 1.0, 3.0, 1.0], dtype=torch.float64),
                               rtol=1e-12, atol=1e-12)


def _bernoulli(seed=0, D=4):
    g = torch.Generator().manual_seed(seed)
    W, b = torch.randn(2, D, generator=g, dtype=torch.float64), torch.randn(D, generator=g, dtype=torch.float64)
    X = torch.randint(0, 2, (6, D), generator=g).double()
    return LinearVAEModule(W, b, n_quadrature=6), X, W, b


def _grid_log_density(x, keep, W, b, n_quadrature=6):
    """``log sum_g v_g prod_{d in keep} p(x_d | z_g)`` written out."""
    nodes, log_weights = gauss_hermite_grid(W.shape[0], n_quadrature)
    logits = nodes @ W + b  # (G, D)
    token = x * torch.nn.functional.logsigmoid(logits) + (1 - x) * torch.nn.functional.logsigmoid(-logits)
    return torch.logsumexp(log_weights + (token * keep).sum(-1), 0)


def test_the_bernoulli_model_is_the_grid_s_joint():
    module, X, W, b = _bernoulli()
    everything = torch.ones(4, dtype=torch.double)
    expected = torch.stack([_grid_log_density(x, everything, W, b) for x in X])
    torch.testing.assert_close(module.log_marginal(X), expected, rtol=1e-10, atol=1e-10)
    masks = torch.tensor([[True, False, True, False], [False, True, True, True]])
    log_prob = module.masked_log_prob(X, masks)
    for n, x in enumerate(X):
        for p, masked in enumerate(masks):
            rest = (~masked).double()
            for j in torch.nonzero(masked).flatten().tolist():
                with_j = rest.clone()
                with_j[j] = 1.0
                conditional = _grid_log_density(x, with_j, W, b) - _grid_log_density(x, rest, W, b)
                torch.testing.assert_close(log_prob[n, p, j], conditional, rtol=1e-9, atol=1e-10)
            assert not log_prob[n, p, ~masked].any()


def test_the_gaussian_model_on_a_fine_grid_is_ppca():
    g = torch.Generator().manual_seed(1)
    W, b = torch.randn(1, 4, generator=g, dtype=torch.float64), torch.randn(4, generator=g, dtype=torch.float64)
    module = LinearVAEModule(W, b, n_quadrature=60, likelihood="gaussian", noise_variance=0.5)
    X = torch.randn(5, 4, generator=g, dtype=torch.float64) + b
    torch.testing.assert_close(module.log_marginal(X), PPCAModule(W, b, 0.5).log_marginal(X), rtol=1e-7, atol=1e-7)
    assert float(module.noise_variance.detach()) == pytest.approx(0.5)


def test_unstandardize_maps_the_gaussian_density_back():
    g = torch.Generator().manual_seed(2)
    W, b = torch.randn(1, 3, generator=g, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    module = LinearVAEModule(W, b, n_quadrature=20, likelihood="gaussian", noise_variance=0.7)
    X = torch.randn(4, 3, generator=g, dtype=torch.float64)
    center, scale = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64), torch.tensor(3.0, dtype=torch.float64)
    standardized = module.log_marginal((X - center) / scale).detach()
    with torch.no_grad():
        module.unstandardize_(center, scale)
    torch.testing.assert_close(module.log_marginal(X), standardized - 3 * math.log(3.0), rtol=1e-10, atol=1e-10)


def make_module(K=1, D=4, likelihood="bernoulli", n_quadrature=80, seed=0, encoder=False):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(K, D, generator=g, dtype=torch.float64)
    b = torch.randn(D, generator=g, dtype=torch.float64)
    module = LinearVAEModule(W, b, n_quadrature, likelihood=likelihood, noise_variance=0.6, encoder=encoder)
    return module.requires_grad_(False), g


def quad_marginal(x, w, b, seen=None):
    """``p(x_o) = int N(z; 0, 1) prod_{d in o} sigmoid(+-(w_d z + b_d)) dz`` by adaptive quadrature (K=1)."""
    seen = np.ones_like(x, dtype=bool) if seen is None else seen

    def integrand(z):
        p = expit(w * z + b)
        return stats.norm.pdf(z) * np.prod(np.where(x == 1, p, 1 - p)[seen])

    return integrate.quad(integrand, -12, 12, epsabs=0, epsrel=1e-12, limit=200)[0]


@pytest.mark.parametrize(("n_components", "n_points"), [(1, 5), (2, 4), (3, 3)])
def test_grid_integrates_gaussian_moments_exactly(n_components, n_points):
    nodes, log_weights = gauss_hermite_grid(n_components, n_points)
    assert nodes.shape == (n_points**n_components, n_components) and log_weights.shape == (n_points**n_components,)
    assert nodes.dtype == log_weights.dtype == torch.float64
    weights = log_weights.exp()
    np.testing.assert_allclose(float(weights.sum()), 1.0, rtol=1e-14)
    # Q nodes integrate polynomials of degree up to 2Q - 1 exactly: E[z] = 0, E[z z^T] = I, E[z^4] = 3
    np.testing.assert_allclose((weights @ nodes).numpy(), 0.0, atol=1e-14)
    np.testing.assert_allclose((nodes.T * weights @ nodes).numpy(), np.eye(n_components), atol=1e-13)
    if 2 * n_points - 1 >= 4:
        np.testing.assert_allclose(float(weights @ nodes[:, 0] ** 4), 3.0, rtol=1e-12)


def test_grid_takes_dtype():
    nodes, log_weights = gauss_hermite_grid(2, 3, dtype=torch.float32)
    assert nodes.dtype == log_weights.dtype == torch.float32


def test_bernoulli_grid_marginal_converges_to_adaptive_quadrature():
    module, g = make_module()
    X = torch.randint(0, 2, (5, 4), generator=g).double()
    w, b = module.components[0].numpy(), module.intercept.numpy()
    expected = np.log([quad_marginal(x, w, b) for x in X.numpy()])
    got = module.log_marginal(X)
    assert got.shape == (5,) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-8)
    # a coarser grid is a different (exactly consistent) model, off the integral by an error that
    # falls geometrically with the nodes (measured: 2.5e-3, 7.3e-5, 3.6e-7, 2.1e-10 nats)
    errors = [np.abs(make_module(n_quadrature=q)[0].log_marginal(X).numpy() - expected).max() for q in (10, 20, 40)]
    assert errors[0] > 1e-3 and errors[0] > 10 * errors[1] > 100 * errors[2] > 1e-6


def test_observed_marginal_converges_to_the_quadrature_over_the_observed_entries():
    module, g = make_module()
    X = torch.randint(0, 2, (4, 4), generator=g).double()
    observed = torch.tensor([[True, False, True, True], [False, False, True, False], [True] * 4, [False] * 4])
    w, b = module.components[0].numpy(), module.intercept.numpy()
    expected = np.log([quad_marginal(x, w, b, seen) for x, seen in zip(X.numpy(), observed.numpy(), strict=True)])
    np.testing.assert_allclose(module.log_marginal(X, observed=observed).numpy(), expected, rtol=1e-8, atol=1e-12)


def test_masked_conditional_converges_to_a_ratio_of_integrals():
    module, g = make_module()
    X = torch.randint(0, 2, (3, 4), generator=g).double()
    masks = torch.tensor([[True, False, False, True]])
    w, b = module.components[0].numpy(), module.intercept.numpy()
    got = module.masked_log_prob(X, masks)
    assert got.shape == (3, 1, 4)
    for n, x in enumerate(X.numpy()):
        rest = quad_marginal(x, w, b, np.array([False, True, True, False]))
        for j in (0, 3):
            joint = quad_marginal(x, w, b, np.array([j == 0, True, True, j == 3]))
            np.testing.assert_allclose(float(got[n, 0, j]), np.log(joint / rest), rtol=1e-8)
        assert float(got[n, 0, 1]) == float(got[n, 0, 2]) == 0.0


@pytest.mark.parametrize("likelihood", ["bernoulli", "gaussian"])
def test_chain_terms_sum_to_the_grid_marginal(likelihood):
    module, g = make_module(K=2, D=5, likelihood=likelihood, n_quadrature=6, seed=1)
    X = torch.randint(0, 2, (4, 5), generator=g).double() if likelihood == "bernoulli" else torch.randn(
        4, 5, generator=g, dtype=torch.float64)
    orderings = torch.stack([torch.randperm(5, generator=g) for _ in range(3)])
    terms = module.chain_log_prob(X, orderings)
    assert terms.shape == (4, 3, 5)
    np.testing.assert_allclose(terms.sum(-1).numpy(), module.log_marginal(X).unsqueeze(-1).expand(4, 3).numpy(),
                               rtol=1e-10)
    observed = torch.rand(4, 5, generator=g) < 0.6
    terms = module.chain_log_prob(X, orderings, observed=observed)
    assert not terms[~observed.unsqueeze(1).expand(4, 3, 5).gather(-1, orderings.expand(4, 3, 5))].any()
    np.testing.assert_allclose(terms.sum(-1).numpy(),
                               module.log_marginal(X, observed=observed).unsqueeze(-1).expand(4, 3).numpy(), rtol=1e-10)


def test_posterior_mean_converges_to_the_quadrature_posterior_mean():
    module, g = make_module()
    X = torch.randint(0, 2, (3, 4), generator=g).double()
    w, b = module.components[0].numpy(), module.intercept.numpy()
    mean, cov = module.posterior(X)
    assert mean.shape == (3, 1) and cov.shape == (3, 1, 1)
    for n, x in enumerate(X.numpy()):
        def moment(power, x=x):
            def integrand(z):
                p = expit(w * z + b)
                return z**power * stats.norm.pdf(z) * np.prod(np.where(x == 1, p, 1 - p))
            return integrate.quad(integrand, -12, 12, epsabs=0, epsrel=1e-12, limit=200)[0]
        first, second = moment(1) / moment(0), moment(2) / moment(0)
        np.testing.assert_allclose(float(mean[n, 0]), first, rtol=1e-7)
        np.testing.assert_allclose(float(cov[n, 0, 0]), second - first**2, rtol=1e-7)


def test_impute_is_the_grid_posterior_weighted_decoder_mean():
    module, g = make_module(K=2, D=5, n_quadrature=5, seed=2)
    X = torch.randint(0, 2, (4, 5), generator=g).double()
    observed = torch.rand(4, 5, generator=g) < 0.5
    got = module.impute(X, observed)
    for n in range(4):
        o = observed[n]
        log_post = module.log_weights + torch.stack(
            [torch.distributions.Bernoulli(logits=module.nodes[i] @ module.components[:, o] + module.intercept[o])
             .log_prob(X[n, o]).sum() for i in range(len(module.nodes))]
        )
        expected = torch.softmax(log_post, 0) @ torch.sigmoid(module.nodes @ module.components + module.intercept)
        torch.testing.assert_close(got[n, ~o], expected[~o], rtol=1e-10, atol=1e-12)
        assert torch.equal(got[n, o], X[n, o])


@pytest.mark.parametrize("likelihood", ["bernoulli", "gaussian"])
def test_sample_missing_is_reproducible_and_keeps_the_observed_entries(likelihood):
    module, g = make_module(K=2, D=5, likelihood=likelihood, n_quadrature=5, seed=3)
    X = torch.randint(0, 2, (4, 5), generator=g).double()
    observed = torch.rand(4, 5, generator=g) < 0.5
    draws = module.sample_missing(X, observed, 6, generator=torch.Generator().manual_seed(0))
    again = module.sample_missing(X, observed, 6, generator=torch.Generator().manual_seed(0))
    assert draws.shape == (6, 4, 5) and draws.dtype == torch.float64
    assert torch.equal(draws, again)
    assert torch.equal(draws[:, observed], X[observed].expand(6, -1))
    if likelihood == "bernoulli":
        assert set(draws.unique().tolist()) <= {0.0, 1.0}


def test_log_likelihood_decode_and_encode():
    module, g = make_module(K=2, D=3, likelihood="gaussian", n_quadrature=3, encoder=True)
    X = torch.randn(4, 3, generator=g, dtype=torch.float64)
    Z = torch.randn(4, 7, 2, generator=g, dtype=torch.float64)
    out = Z @ module.components + module.intercept
    expected = torch.distributions.Normal(out, 0.6**0.5).log_prob(X.unsqueeze(1)).sum(-1)
    torch.testing.assert_close(module.log_likelihood(X, Z), expected, rtol=1e-12, atol=1e-12)
    assert module.log_likelihood(X, Z[:, 0]).shape == (4,)
    observed = torch.tensor([True, False, True]).expand(4, 3)
    partial = torch.distributions.Normal(out, 0.6**0.5).log_prob(X.unsqueeze(1))[..., observed[0]].sum(-1)
    torch.testing.assert_close(module.log_likelihood(X, Z, observed=observed), partial, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(module.decode(Z[:, 0]), out[:, 0])
    np.testing.assert_allclose(float(module.noise_variance), 0.6, rtol=1e-12)
    with torch.no_grad():
        module.encoder_weight.normal_(generator=g)
    mean, log_var = module.encode(X, observed=observed)
    assert mean.shape == log_var.shape == (4, 2)
    changed = X.clone()
    changed[:, 1] = 100.0  # an unobserved entry: the encoder does not see it
    torch.testing.assert_close(module.encode(changed, observed=observed)[0], mean)


def test_unstandardize_is_the_change_of_variables():
    module, g = make_module(K=2, D=3, likelihood="gaussian", n_quadrature=8)
    X = torch.randn(5, 3, generator=g, dtype=torch.float64)
    center = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    scale = torch.tensor(2.5, dtype=torch.float64)
    before = module.log_marginal(X)
    assert module.unstandardize_(center, scale) is module
    after = module.log_marginal(center + scale * X)
    torch.testing.assert_close(after, before - 3 * scale.log(), rtol=1e-10, atol=1e-10)
    bernoulli, _ = make_module(n_quadrature=3)
    with pytest.raises(ValueError, match="bernoulli likelihood is not closed under rescaling"):
        bernoulli.unstandardize_(center[:1].expand(4), scale)
