"""The linear-Gaussian modules against the closed forms of ``N(mu, W W^T + Psi)``, in float64.

Every number is checked against a dense computation made here from the covariance: the
Gaussian's density, its conditionals ``S_MM - S_MR S_RR^{-1} S_RM`` and its marginals, the
posterior of ``z``, and the inverse covariance.
"""

import math

import pytest
import torch

from skmpt.models import FactorAnalysisModule, LinearGaussianModule, PPCAModule


def _module(isotropic, D=5, K=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(K, D, generator=g, dtype=torch.float64)
    mean = torch.randn(D, generator=g, dtype=torch.float64)
    if isotropic:
        return PPCAModule(W, mean, torch.tensor(0.6, dtype=torch.float64))
    return FactorAnalysisModule(W, mean, torch.rand(D, generator=g, dtype=torch.float64) + 0.2)


def _data(module, n=7, seed=1):
    return torch.randn(n, module.n_features, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _dense(module):
    W, mean = module.components.detach(), module.mean.detach()
    return mean, W.T @ W + torch.diag(module.noise_variance.detach().expand(W.shape[1]))


def _conditional(module, x, masked):
    """``log p(x_j | x_rest)`` for each masked ``j``, from the dense covariance (Schur complement)."""
    mean, S = _dense(module)
    given = ~masked
    out = torch.zeros(len(x), dtype=torch.float64)
    for j in torch.nonzero(masked).flatten().tolist():
        gain = torch.linalg.solve(S[given][:, given], S[given, j])
        variance = S[j, j] - S[j, given] @ gain
        predicted = mean[j] + (x[given] - mean[given]) @ gain
        out[j] = -0.5 * (math.log(2 * math.pi * variance) + (x[j] - predicted) ** 2 / variance)
    return out


@pytest.fixture(params=[True, False], ids=["ppca", "factor_analysis"])
def module(request):
    return _module(request.param)


def test_log_marginal_is_the_gaussian_density(module):
    X = _data(module)
    mean, S = _dense(module)
    expected = torch.distributions.MultivariateNormal(mean, S).log_prob(X)
    torch.testing.assert_close(module.log_marginal(X), expected, rtol=1e-12, atol=1e-12)


def test_log_marginal_of_observed_entries_is_the_marginal_density(module):
    X = _data(module)
    observed = torch.rand(X.shape, generator=torch.Generator().manual_seed(2)) < 0.6
    observed[0] = False  # nothing observed: log p of the empty vector is 0
    mean, S = _dense(module)
    expected = torch.stack([
        torch.distributions.MultivariateNormal(mean[o], S[o][:, o]).log_prob(x[o]) if o.any() else torch.tensor(0.0)
        for x, o in zip(X, observed, strict=True)
    ]).double()
    torch.testing.assert_close(module.log_marginal(X, observed=observed), expected, rtol=1e-10, atol=1e-12)


def test_masked_conditionals_are_the_schur_complement(module):
    X = _data(module, n=3)
    masks = torch.tensor([[True, False, True, False, False], [False, True, True, True, True]])
    log_prob = module.masked_log_prob(X, masks)
    assert log_prob.shape == (3, 2, 5)
    for n, x in enumerate(X):
        for p, masked in enumerate(masks):
            torch.testing.assert_close(log_prob[n, p], _conditional(module, x, masked), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(module.masked_log_prob_sum(X, masks), log_prob.sum(-1), rtol=1e-10, atol=1e-12)


def test_weighted_sum_takes_the_same_value_by_either_path(module):
    """Few samples sum mask by mask, many form one quadratic: both are the weighted per-mask sums."""
    masks = torch.tensor([[True, False, True, False, False], [False, True, True, True, True], [True] * 5])
    weights = torch.tensor([1.0, 0.25, 2.0], dtype=torch.float64)
    for n in (1, 400):
        X = _data(module, n=n)
        direct = module.masked_log_prob(X, masks).sum(-1) @ weights
        torch.testing.assert_close(module.weighted_log_prob_sum(X, masks, weights), direct, rtol=1e-10, atol=1e-10)


def test_one_chain_ordering_sums_to_the_log_marginal(module):
    X = _data(module)
    orderings = torch.stack([torch.randperm(5, generator=torch.Generator().manual_seed(s)) for s in range(3)])
    terms = module.chain_log_prob(X, orderings)
    assert terms.shape == (7, 3, 5)
    torch.testing.assert_close(terms.sum(-1), module.log_marginal(X).unsqueeze(1).expand(7, 3), rtol=1e-10,
                               atol=1e-10)


def test_moment_log_marginal_is_the_mean_log_marginal(module):
    X = _data(module, n=50)
    centred = X - X.mean(0)
    from_moments = module.moment_log_marginal(X.mean(0), centred.T @ centred / len(X))
    torch.testing.assert_close(from_moments, module.log_marginal(X).mean(), rtol=1e-10, atol=1e-10)
    observed = torch.tensor([True, False, True, True, False])
    mean, S = _dense(module)
    expected = torch.distributions.MultivariateNormal(mean[observed], S[observed][:, observed]).log_prob(
        X[:, observed]).mean()
    from_moments = module.moment_log_marginal(X.mean(0), centred.T @ centred / len(X), observed=observed)
    torch.testing.assert_close(from_moments, expected, rtol=1e-10, atol=1e-10)


def test_posterior_and_imputation_are_the_gaussian_conditionals(module):
    X = _data(module, n=4)
    W, psi = module.components.detach(), module.noise_variance.detach().expand(5)
    # z | x ~ N(A^{-1} W Psi^{-1} (x - mu), A^{-1}) with A = I + W Psi^{-1} W^T
    A = torch.eye(2, dtype=torch.float64) + (W / psi) @ W.T
    mean, cov = module.posterior(X)
    torch.testing.assert_close(cov, torch.linalg.inv(A), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(mean, ((X - module.mean.detach()) / psi) @ W.T @ torch.linalg.inv(A), rtol=1e-10,
                               atol=1e-12)
    observed = torch.tensor([[True, False, True, False, True]] * 4)
    mu, S = _dense(module)
    o, m = observed[0], ~observed[0]
    expected = mu[m] + (X[:, o] - mu[o]) @ torch.linalg.solve(S[o][:, o], S[o][:, m])
    imputed = module.impute(X, observed)
    torch.testing.assert_close(imputed[:, m], expected, rtol=1e-10, atol=1e-12)
    assert torch.equal(imputed[:, o], X[:, o])


def test_draws_of_missing_entries_keep_the_observed_ones_and_vary(module):
    X = _data(module, n=3)
    observed = torch.tensor([True, False, True, False, True]).expand(3, 5)
    draws = module.sample_missing(X, observed, 4, generator=torch.Generator().manual_seed(0))
    assert draws.shape == (4, 3, 5)
    assert torch.equal(draws[:, observed], X[observed].expand(4, -1))
    assert draws[:, ~observed].std(0).min() > 0


def test_precision_is_the_inverse_covariance(module):
    torch.testing.assert_close(module.precision() @ module.covariance(), torch.eye(5, dtype=torch.float64),
                               rtol=1e-10, atol=1e-10)


def test_unstandardize_maps_the_density_back_to_the_original_units():
    """A model of ``(x - c) / s`` mapped back gives ``log p(x) = log p_std((x - c) / s) - sum log s``."""
    for isotropic, scale in ((True, torch.tensor(2.5, dtype=torch.float64)),
                             (False, torch.tensor([0.5, 1.0, 2.0, 3.0, 4.0], dtype=torch.float64))):
        module = _module(isotropic)
        center = torch.linspace(-1, 1, 5, dtype=torch.float64)
        X = _data(module)
        standardized = module.log_marginal((X - center) / scale).detach()
        with torch.no_grad():
            assert module.unstandardize_(center, scale) is module
        log_det = scale.log().sum() * (5 if scale.ndim == 0 else 1)
        torch.testing.assert_close(module.log_marginal(X), standardized - log_det, rtol=1e-10, atol=1e-10)


def test_isotropic_noise_refuses_a_scale_per_feature():
    module = _module(True)
    with torch.no_grad(), pytest.raises(ValueError, match="Isotropic noise is not closed under scaling"):
        module.unstandardize_(torch.zeros(5, dtype=torch.float64), torch.arange(1.0, 6.0, dtype=torch.float64))


def test_noise_shapes_choose_the_case_and_bad_ones_are_refused():
    W, mean = torch.ones(1, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    assert LinearGaussianModule(W, mean, 0.5).isotropic
    assert not LinearGaussianModule(W, mean, torch.ones(3, dtype=torch.float64)).isotropic
    factor_analysis = FactorAnalysisModule(W, mean, 0.5)  # a number: one per feature, all equal
    assert factor_analysis.noise_variance.shape == (3,)
    torch.testing.assert_close(factor_analysis.noise_variance, torch.full((3,), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"noise_variance must be one number or one per feature \(3\); "
                                         r"got shape \(2,\)"):
        LinearGaussianModule(W, mean, torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"PPCAModule has one noise variance; got shape \(3,\)"):
        PPCAModule(W, mean, torch.ones(3, dtype=torch.float64))


def test_factor_analysis_noise_below_its_floor_reads_as_the_floor_and_still_gets_a_gradient():
    W = torch.tensor([[3.0, 1.0]], dtype=torch.float64)
    psi = torch.tensor([1e-3, 1.0], dtype=torch.float64)  # 1e-3 of 9.001: below a floor of 1e-2
    free = FactorAnalysisModule(W, torch.zeros(2, dtype=torch.float64), psi)
    floored = FactorAnalysisModule(W, torch.zeros(2, dtype=torch.float64), psi, noise_floor=1e-2)
    assert torch.equal(free.noise_floors(), torch.zeros(2, dtype=torch.float64))
    assert torch.allclose(free.noise_variance, psi, rtol=1e-14)  # no floor by default: the parameters as given
    assert torch.allclose(floored.noise_floors(), 1e-2 * (W.square().sum(0) + psi))
    assert torch.allclose(floored.noise_variance, torch.tensor([1e-2 * 9.001, 1.0], dtype=torch.float64))
    x = torch.tensor([[3.0, 0.0]], dtype=torch.float64)
    dense = torch.distributions.MultivariateNormal(torch.zeros(2, dtype=torch.float64), floored.covariance())
    assert torch.allclose(floored.log_marginal(x), dense.log_prob(x))  # every path reads the floored variance
    floored.log_marginal(x).sum().backward()
    assert floored.log_scaled_noise.grad[0] != 0  # a variance at the floor can rise again
    with torch.no_grad():  # the floor follows each feature's units
        floored.unstandardize_(torch.zeros(2, dtype=torch.float64), torch.tensor([10.0, 0.1], dtype=torch.float64))
    assert torch.allclose(floored.noise_variance, torch.tensor([1e-2 * 9.001 * 100, 0.01], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"noise_floor is a fraction .* in \[0, 1\); got 1.5"):
        FactorAnalysisModule(W, torch.zeros(2, dtype=torch.float64), psi, noise_floor=1.5)


def test_set_parameters_stores_in_feature_units_and_refuses_other_shapes():
    W = torch.tensor([[3.0, 1.0, -2.0]], dtype=torch.float64)
    psi = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    module = FactorAnalysisModule(W, torch.zeros(3, dtype=torch.float64), psi)
    scales = torch.tensor([10.0, 1.0, 0.1], dtype=torch.float64)
    module.set_parameters_(2 * W, torch.ones(3, dtype=torch.float64), 3 * psi, feature_scales=scales)
    torch.testing.assert_close(module.components.detach(), 2 * W)
    torch.testing.assert_close(module.mean.detach(), torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(module.noise_variance.detach(), 3 * psi)
    torch.testing.assert_close(module.scaled_components.detach(), 2 * W / scales)
    before = [p.detach().clone() for p in module.parameters()]
    with pytest.raises(ValueError, match=r"mean must have shape \(3,\)"):
        module.set_parameters_(W, torch.zeros(4, dtype=torch.float64), psi)
    with pytest.raises(ValueError, match=r"noise_variance must have shape \(3,\)"):
        module.set_parameters_(W, torch.zeros(3, dtype=torch.float64), psi[:2])
    for old, new in zip(before, module.parameters(), strict=True):  # nothing set by a refused call
        torch.testing.assert_close(old, new.detach())
    ppca = PPCAModule(W, torch.zeros(3, dtype=torch.float64), 0.5)
    ppca.set_parameters_(W, torch.zeros(3, dtype=torch.float64), torch.tensor(0.7, dtype=torch.float64))
    assert float(ppca.noise_variance) == pytest.approx(0.7)
    with pytest.raises(ValueError, match=r"noise_variance must have shape \(\)"):
        ppca.set_parameters_(W, torch.zeros(3, dtype=torch.float64), psi)
    with pytest.raises(ValueError, match="feature_scales must be positive"):
        module.set_parameters_(W, torch.zeros(3, dtype=torch.float64), psi, feature_scales=torch.zeros(3))
    with pytest.raises(ValueError, match="one scale for every feature"):
        ppca.set_parameters_(W, torch.zeros(3, dtype=torch.float64), torch.tensor(0.5), feature_scales=scales)
