"""The pieces of imputation against dense Gaussian conditioning and counted draws."""

import torch

from skmpt.models.imputation import decoupled_covariance, gaussian_conditional, pick_components


def _problem(seed=0, n=6, D=5):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(D, D, generator=g, dtype=torch.float64)
    covariance = A @ A.T + 0.5 * torch.eye(D, dtype=torch.float64)
    mean = torch.randn(D, generator=g, dtype=torch.float64)
    X = torch.randn(n, D, generator=g, dtype=torch.float64)
    observed = torch.rand(n, D, generator=g) < 0.6
    observed[0], observed[1] = True, False
    return X, observed, mean, covariance


def test_decoupled_covariance_keeps_the_observed_block_and_the_identity_elsewhere():
    _, observed, _, covariance = _problem()
    decoupled = decoupled_covariance(covariance, observed)
    assert decoupled.shape == (6, 5, 5)
    for o, d in zip(observed, decoupled, strict=True):
        torch.testing.assert_close(d[o][:, o], covariance[o][:, o], rtol=0, atol=0)
        torch.testing.assert_close(d[~o][:, ~o], torch.eye(int((~o).sum()), dtype=torch.float64), rtol=0, atol=0)
        assert not d[o][:, ~o].any()


def test_gaussian_conditional_is_the_schur_complement_and_the_marginal_density():
    X, observed, mean, covariance = _problem()
    conditional_mean, conditional_covariance, log_density = gaussian_conditional(X, observed, mean, covariance)
    for x, o, m, c, density in zip(X, observed, conditional_mean, conditional_covariance, log_density, strict=True):
        u = ~o
        gain = torch.linalg.solve(covariance[o][:, o], covariance[o][:, u]) if o.any() else None
        expected_mean = mean[u] + ((x[o] - mean[o]) @ gain if o.any() else 0)
        expected_cov = covariance[u][:, u] - (covariance[u][:, o] @ gain if o.any() else 0)
        torch.testing.assert_close(m[u], expected_mean, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(c[u][:, u], expected_cov, rtol=1e-10, atol=1e-12)
        assert torch.equal(m[o], x[o]) and not c[o].any() and not c[:, o].any()
        expected = (torch.distributions.MultivariateNormal(mean[o], covariance[o][:, o]).log_prob(x[o])
                    if o.any() else torch.zeros((), dtype=torch.float64))
        torch.testing.assert_close(density, expected, rtol=1e-10, atol=1e-12)


def test_gaussian_conditional_broadcasts_over_components():
    X, observed, mean, covariance = _problem()
    means = torch.stack([mean, mean + 1.0]).unsqueeze(1)  # (K, 1, D)
    covariances = torch.stack([covariance, 2 * covariance])
    batched = gaussian_conditional(X, observed, means, covariances)
    assert batched[0].shape == (2, 6, 5) and batched[1].shape == (2, 6, 5, 5) and batched[2].shape == (2, 6)
    for k in range(2):
        one = gaussian_conditional(X, observed, means[k, 0], covariances[k])
        for a, b in zip(batched, one, strict=True):
            torch.testing.assert_close(a[k], b, rtol=1e-12, atol=1e-12)


def test_components_are_drawn_in_proportion_to_their_weights():
    log_weights = torch.log(torch.tensor([[0.2, 0.8], [0.5, 0.5], [1.0, 1e-300]], dtype=torch.float64))
    picks = pick_components(log_weights, 20000, torch.Generator().manual_seed(0))
    assert picks.shape == (20000, 3) and picks.dtype == torch.long
    frequencies = picks.double().mean(0)  # the share of component 1
    torch.testing.assert_close(frequencies, torch.tensor([0.8, 0.5, 0.0], dtype=torch.float64), rtol=0, atol=0.015)
    assert torch.equal(pick_components(log_weights, 5, torch.Generator().manual_seed(1)),
                       pick_components(log_weights, 5, torch.Generator().manual_seed(1)))
