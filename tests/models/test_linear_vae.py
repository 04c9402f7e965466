"""LinearVAEModule: its Gauss-Hermite grid, its joint summed over the grid by brute force, and PPCA's density."""

import math

import pytest
import torch

from skmpt.models import LinearVAEModule, PPCAModule
from skmpt.models.linear_vae import gauss_hermite_grid


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
