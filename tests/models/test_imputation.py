"""The pieces of imputation against dense Gaussian conditioning and counted draws."""


import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from skmpt.models import imputation
from skmpt.models.imputation import (
    decoupled_covariance,
    expected_scatter,
    gaussian_conditional,
    hole_patterns,
    mixture_mean,
    pattern_conditional,
    pattern_covariance,
    per_pattern,
    pick_components,
)


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


@pytest.mark.parametrize("grouped", [False, True])
def test_the_conditional_by_pattern_of_holes_is_the_rowwise_one(grouped, monkeypatch):
    # Rows of three patterns (and a complete one): Cholesky factors per pattern, the rest per row; each
    # pattern's rows multiplied at once (grouped) or each row's matrix gathered.
    monkeypatch.setattr(imputation, "_ROWS_PER_PATTERN", 1 if grouped else 1000)
    rng = np.random.RandomState(0)
    X = torch.as_tensor(rng.randn(30, 4))
    patterns = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 1, 1]], dtype=bool)
    observed = torch.as_tensor(patterns[rng.randint(3, size=30)])
    factor = torch.as_tensor(rng.randn(2, 4, 4))
    means, covariances = torch.as_tensor(rng.randn(2, 4)), factor @ factor.mT + torch.eye(4, dtype=torch.float64)
    holes = hole_patterns(observed)
    assert len(holes.patterns) == 3 and hole_patterns(holes) is holes and sum(holes.sizes) == 30
    assert torch.equal(holes.patterns[holes.index], observed)
    mean, precision, log_density = pattern_conditional(X, holes, means, covariances)
    expected_mean, expected_cov, expected_log_density = gaussian_conditional(X, observed, means.unsqueeze(1),
                                                                             covariances)
    np.testing.assert_allclose(mean.numpy(), expected_mean.numpy(), rtol=0, atol=1e-13)
    np.testing.assert_allclose(log_density.numpy(), expected_log_density.numpy(), rtol=0, atol=1e-13)
    covariance = pattern_covariance(covariances, precision, holes)[:, holes.index]
    np.testing.assert_allclose(covariance.numpy(), expected_cov.numpy(), rtol=0, atol=1e-13)
    assert not covariance[:, observed].any()  # exact zeros in the observed rows
    resp = torch.as_tensor(rng.rand(2, 30))
    np.testing.assert_allclose(expected_scatter(resp, holes, covariances, precision).numpy(),
                               torch.einsum("kn,knde->kde", resp, expected_cov).numpy(), rtol=0, atol=1e-12)


def test_per_pattern_multiplies_each_row_by_its_pattern_s_matrix():
    g = torch.Generator().manual_seed(3)
    holes = hole_patterns(torch.rand(200, 3, generator=g) < 0.5)
    matrices = torch.randn(2, len(holes.patterns), 3, 3, generator=g, dtype=torch.float64)
    vectors = torch.randn(2, 200, 3, generator=g, dtype=torch.float64)
    expected = torch.stack([torch.stack([matrices[k, u] @ vectors[k, i] for i, u in enumerate(holes.index)])
                            for k in range(2)])
    torch.testing.assert_close(per_pattern(matrices, vectors, holes), expected, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("bits", [62, 0])
def test_hole_patterns_are_the_distinct_rows_in_torch_unique_s_order(bits, monkeypatch):
    monkeypatch.setattr(imputation, "_PATTERN_BITS", bits)  # 0: every width by torch.unique(dim=0)
    observed = torch.rand(300, 7, generator=torch.Generator().manual_seed(4)) < 0.7
    holes = hole_patterns(observed)
    patterns, index = torch.unique(observed, dim=0, return_inverse=True)
    assert torch.equal(holes.patterns, patterns) and torch.equal(holes.index, index)
    assert holes.sizes == torch.bincount(index).tolist() and torch.equal(holes.order, torch.argsort(index, stable=True))
    assert torch.equal(holes.patterns[holes.index], observed)


def test_hole_patterns_of_rows_without_columns_is_one_empty_pattern():
    holes = hole_patterns(torch.zeros(3, 0, dtype=torch.bool))
    assert holes.patterns.shape == (1, 0) and holes.index.tolist() == [0, 0, 0] and holes.sizes == [3]
    f64 = dict(dtype=torch.float64)
    mean, precision, log_density = pattern_conditional(torch.zeros(3, 0, **f64), holes, torch.zeros(2, 0, **f64),
                                                       torch.zeros(2, 0, 0, **f64))
    assert mean.shape == (2, 3, 0) and precision.shape == (2, 1, 0, 0) and not log_density.any()


def test_the_conditional_without_gradients_is_the_one_with_them_bit_for_bit():
    # EM's steps run without gradients, and there the diagonals are written in place (no batch of
    # diag_embed): the same numbers, to the last bit, and the covariances given are left untouched.
    rng = np.random.RandomState(1)
    X = torch.as_tensor(rng.randn(40, 5))
    observed = torch.as_tensor(rng.rand(40, 5) < 0.6)
    factor = torch.as_tensor(rng.randn(3, 5, 5))
    means, covariances = torch.as_tensor(rng.randn(3, 5)), factor @ factor.mT + torch.eye(5, dtype=torch.float64)
    before = covariances.clone()
    with torch.no_grad():
        plain = pattern_conditional(X, observed, means, covariances)
        decoupled = decoupled_covariance(covariances.unsqueeze(1), observed)
    tracked = covariances.clone().requires_grad_(True)
    differentiable = pattern_conditional(X, observed, means, tracked)
    assert all(torch.equal(a, b.detach()) for a, b in zip(plain, differentiable, strict=True))
    assert torch.equal(decoupled, decoupled_covariance(tracked.unsqueeze(1), observed).detach())
    assert torch.equal(covariances, before)


@pytest.mark.parametrize("shape", [(3,), (4, 1), (2, 5, 7)])
def test_the_inverse_from_a_cholesky_factor_is_torchs_with_its_gradient(shape):
    # pattern_conditional and factor analysis' EM with holes invert batches of factors this way.
    from skmpt._utils import inverse_from_cholesky

    g = torch.Generator().manual_seed(len(shape))
    A = torch.randn(*shape[:-1], shape[-1], shape[-1] + 2, generator=g, dtype=torch.float64)
    factor = torch.linalg.cholesky(A @ A.mT + 0.1 * torch.eye(shape[-1], dtype=torch.float64)).requires_grad_()
    ours, theirs = inverse_from_cholesky(factor), torch.cholesky_inverse(factor)
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)
    weights = torch.randn(ours.shape, generator=g, dtype=torch.float64)
    (ours_grad,), (theirs_grad,) = (torch.autograd.grad((m * weights).sum(), factor) for m in (ours, theirs))
    torch.testing.assert_close(ours_grad.tril(), theirs_grad.tril(), rtol=1e-8, atol=1e-10)


def test_mixture_mean_is_a_value_the_components_share_exactly():
    # Summed as sum_k p(k) v_k, a column every component holds at 7.7 came back 7.700000000000001 (and the
    # mixed mixture's constant column of 5.0 as 4.999999999999999): the probabilities sum to one only nearly.
    generator = torch.Generator().manual_seed(0)
    log_resp = torch.randn(500, 3, dtype=torch.float64, generator=generator) * 3
    values = torch.randn(3, 500, 2, dtype=torch.float64, generator=generator)
    values[..., 0] = 7.7
    mean = mixture_mean(log_resp, values)
    assert (mean[:, 0] == 7.7).all()
    torch.testing.assert_close(mean[:, 1], torch.einsum("nk,kn->n", torch.softmax(log_resp, -1), values[..., 1]))
    shared = values[:, 0]  # (K, D): one value per component for every sample
    expanded = shared.unsqueeze(1).expand(-1, 500, -1)
    torch.testing.assert_close(mixture_mean(log_resp, shared), mixture_mean(log_resp, expanded))
