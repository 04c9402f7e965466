"""The shared pieces of imputation: the decoupled covariance, the Gaussian conditional and component draws."""

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from skmpt.models.imputation import decoupled_covariance, gaussian_conditional, pick_components


def random_covariance(D, seed, batch=()):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(*batch, D, D, generator=g, dtype=torch.float64)
    return A @ A.mT / D + 0.5 * torch.eye(D, dtype=torch.float64)


def test_decoupled_covariance_keeps_the_observed_block_and_puts_the_identity_elsewhere():
    cov = random_covariance(5, 0)
    observed = torch.tensor([True, False, True, True, False])
    got = decoupled_covariance(cov, observed)
    o, m = observed.nonzero().squeeze(-1), (~observed).nonzero().squeeze(-1)
    assert torch.equal(got[o][:, o], cov[o][:, o])
    assert torch.equal(got[m][:, m], torch.eye(2, dtype=torch.float64))
    assert not got[o][:, m].any() and not got[m][:, o].any()
    # 0/1 weights give the same as booleans, and the determinant is that of the observed block
    assert torch.equal(decoupled_covariance(cov, observed.double()), got)
    torch.testing.assert_close(torch.linalg.det(got), torch.linalg.det(cov[o][:, o]))


def test_decoupled_covariance_broadcasts_patterns_against_covariances():
    cov = random_covariance(4, 1, batch=(3,))  # (K, D, D)
    patterns = torch.tensor([[True, True, False, False], [False, True, True, True]])  # (U, D)
    got = decoupled_covariance(cov, patterns[:, None, :])  # (U, K, D, D)
    assert got.shape == (2, 3, 4, 4)
    for u in range(2):
        for k in range(3):
            assert torch.equal(got[u, k], decoupled_covariance(cov[k], patterns[u]))


def schur(x, seen, mean, cov):
    o, m = np.flatnonzero(seen), np.flatnonzero(~seen)
    conditional_mean, conditional_cov = x.copy(), np.zeros((len(x), len(x)))
    if len(o) == 0:
        return mean.copy(), cov.copy(), 0.0
    gain = np.linalg.solve(cov[np.ix_(o, o)], cov[np.ix_(o, m)])
    conditional_mean[m] = mean[m] + gain.T @ (x[o] - mean[o])
    conditional_cov[np.ix_(m, m)] = cov[np.ix_(m, m)] - cov[np.ix_(m, o)] @ gain
    return conditional_mean, conditional_cov, multivariate_normal(mean[o], cov[np.ix_(o, o)]).logpdf(x[o])


def test_gaussian_conditional_is_the_schur_complement():
    D = 5
    g = torch.Generator().manual_seed(2)
    cov = random_covariance(D, 2)
    mean = torch.randn(D, generator=g, dtype=torch.float64)
    X = torch.randn(6, D, generator=g, dtype=torch.float64)
    observed = torch.rand(6, D, generator=g) < 0.6
    observed[0], observed[1] = True, False  # a complete row and an empty one
    got_mean, got_cov, got_log = gaussian_conditional(X, observed, mean, cov)
    assert got_mean.shape == (6, D) and got_cov.shape == (6, D, D) and got_log.shape == (6,)
    assert got_mean.dtype == torch.float64
    for n in range(6):
        expected_mean, expected_cov, expected_log = schur(X[n].numpy(), observed[n].numpy(), mean.numpy(), cov.numpy())
        np.testing.assert_allclose(got_mean[n].numpy(), expected_mean, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got_cov[n].numpy(), expected_cov, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(float(got_log[n]), expected_log, rtol=1e-10, atol=1e-12)
    # complete row: X itself, no covariance left; empty row: the prior, density log 1
    assert torch.equal(got_mean[0], X[0]) and not got_cov[0].any()
    torch.testing.assert_close(got_mean[1], mean)
    torch.testing.assert_close(got_cov[1], cov)
    assert float(got_log[1]) == 0.0


def test_gaussian_conditional_broadcasts_over_components():
    K, D = 3, 4
    g = torch.Generator().manual_seed(3)
    cov = random_covariance(D, 3, batch=(K,))
    means = torch.randn(K, D, generator=g, dtype=torch.float64)
    X = torch.randn(5, D, generator=g, dtype=torch.float64)
    observed = torch.rand(5, D, generator=g) < 0.5
    got_mean, got_cov, got_log = gaussian_conditional(X, observed, means.unsqueeze(1), cov)
    assert got_mean.shape == (K, 5, D) and got_cov.shape == (K, 5, D, D) and got_log.shape == (K, 5)
    for k in range(K):
        one = gaussian_conditional(X, observed, means[k], cov[k])
        for batched, single in zip((got_mean[k], got_cov[k], got_log[k]), one, strict=True):
            torch.testing.assert_close(batched, single, rtol=1e-12, atol=1e-12)


def test_gaussian_conditional_ignores_the_values_at_missing_entries():
    cov = random_covariance(3, 4)
    X = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    observed = torch.tensor([[True, False, True]])
    changed = X.clone()
    changed[0, 1] = 1e6
    first, second = gaussian_conditional(X, observed, torch.zeros(3, dtype=torch.float64), cov), gaussian_conditional(
        changed, observed, torch.zeros(3, dtype=torch.float64), cov
    )
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_pick_components_draws_from_the_softmax_of_the_log_weights():
    log_weights = torch.log(torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]], dtype=torch.float64)) + 3.0
    picks = pick_components(log_weights, 20000, torch.Generator().manual_seed(0))
    assert picks.shape == (20000, 2) and picks.dtype == torch.long
    np.testing.assert_allclose(np.bincount(picks[:, 0].numpy(), minlength=3) / 20000, [0.1, 0.2, 0.7], atol=0.015)
    assert int(picks[:, 1].max()) <= 1  # a zero weight is never drawn
    np.testing.assert_allclose(np.mean(picks[:, 1].numpy()), 0.5, atol=0.015)


def test_pick_components_is_reproducible_and_unaffected_by_a_constant_shift():
    g = torch.Generator().manual_seed(5)
    log_weights = torch.randn(4, 6, generator=g, dtype=torch.float64)
    first = pick_components(log_weights, 7, torch.Generator().manual_seed(1))
    assert torch.equal(first, pick_components(log_weights, 7, torch.Generator().manual_seed(1)))
    shifted = log_weights + torch.arange(4, dtype=torch.float64).unsqueeze(-1) * 100
    assert torch.equal(first, pick_components(shifted, 7, torch.Generator().manual_seed(1)))
    assert not torch.equal(first, pick_components(log_weights, 7, torch.Generator().manual_seed(2)))


def test_pick_components_does_not_backpropagate():
    log_weights = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    picks = pick_components(log_weights, 3, torch.Generator().manual_seed(0))
    assert not picks.requires_grad


@pytest.mark.parametrize("n_draws", [1, 4])
def test_pick_components_shape(n_draws):
    assert pick_components(torch.zeros(5, 2), n_draws, None).shape == (n_draws, 5)
