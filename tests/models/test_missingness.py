"""Self-masking missingness: quadrature, the likelihood of what was observed, and imputation given missing."""

import math

import numpy as np
import pytest
import torch

from skmpt.models.missingness import SelfMaskingGaussian, gauss_hermite, log_expected_sigmoid, mean_given_missing

F64 = torch.float64


def _sigmoid_integral(mean, variance, slope, intercept):
    """``E[sigmoid(slope x + intercept)]`` and ``E[x sigmoid(...)]`` by a fine Riemann sum."""
    x = np.linspace(mean - 12 * math.sqrt(variance), mean + 12 * math.sqrt(variance), 200001)
    density = np.exp(-0.5 * (x - mean) ** 2 / variance) / math.sqrt(2 * math.pi * variance)
    weight = density / (1 + np.exp(-(slope * x + intercept)))
    step = x[1] - x[0]
    return weight.sum() * step, (x * weight).sum() * step


def test_gauss_hermite_integrates_normal_moments():
    nodes, weights = gauss_hermite(10)
    for power, moment in ((0, 1.0), (2, 1.0), (4, 3.0), (6, 15.0)):
        assert float((weights * nodes**power).sum()) == pytest.approx(moment, rel=1e-12)


@pytest.mark.parametrize(("mean", "variance", "slope", "intercept"),
                         [(0.0, 1.0, 2.0, -1.0), (1.5, 0.3, -3.0, 0.5), (-2.0, 4.0, 0.7, 2.0)])
def test_quadrature_matches_a_fine_sum(mean, variance, slope, intercept):
    probability, first = _sigmoid_integral(mean, variance, slope, intercept)
    args = [torch.tensor([value], dtype=F64) for value in (mean, variance, slope, intercept)]
    assert float(log_expected_sigmoid(*args, n_nodes=40).exp()) == pytest.approx(probability, rel=1e-6)
    assert float(mean_given_missing(*args, n_nodes=40)) == pytest.approx(first / probability, rel=1e-5, abs=1e-6)


def _model(d=3, seed=0):
    rng = np.random.default_rng(seed)
    factor = rng.normal(size=(d, d))
    return SelfMaskingGaussian(rng.normal(size=d), np.exp(rng.normal(size=d)), rng.normal(size=d),
                               factor @ factor.T + np.eye(d), rng.normal(size=d), rng.normal(size=d), n_nodes=40)


def test_likelihood_of_a_row_missing_one_entry_is_exact():
    model = _model()
    with torch.no_grad():
        covariance = (model.covariance() * torch.outer(model.scale, model.scale)).numpy()
        mean = (model.center + model.scale * model.mean).numpy()
        slope, intercept = (model.slope / model.scale).numpy(), (model.intercept - model.slope * model.center /
                                                                 model.scale).numpy()
    x = np.array([0.3, np.nan, -0.7])
    o, m = [0, 2], 1
    gain = covariance[m, o] @ np.linalg.inv(covariance[np.ix_(o, o)])
    conditional_mean = mean[m] + gain @ (x[o] - mean[o])
    conditional_variance = covariance[m, m] - gain @ covariance[o, m]
    missing, _ = _sigmoid_integral(conditional_mean, conditional_variance, slope[m], intercept[m])
    sub = covariance[np.ix_(o, o)]
    residual = x[o] - mean[o]
    log_normal = -0.5 * (residual @ np.linalg.solve(sub, residual) + np.log(np.linalg.det(sub)) + 2 * np.log(2 * np.pi))
    kept = sum(-np.log1p(np.exp(slope[j] * x[j] + intercept[j])) for j in o)
    expected = log_normal + kept + np.log(missing)
    assert float(model.log_likelihood(x[None])[0].detach()) == pytest.approx(expected, rel=1e-6)


def test_a_complete_row_scores_its_gaussian_density_and_kept_probabilities():
    model = _model(d=2, seed=1)
    x = np.array([[0.5, -0.2]])
    with torch.no_grad():
        covariance = model.covariance() * torch.outer(model.scale, model.scale)
        mean = model.center + model.scale * model.mean
        normal = torch.distributions.MultivariateNormal(mean, covariance).log_prob(torch.as_tensor(x[0]))
        logits = model.slope * (torch.as_tensor(x[0]) - model.center) / model.scale + model.intercept
        expected = normal + torch.nn.functional.logsigmoid(-logits).sum()
    assert float(model.log_likelihood(x)[0].detach()) == pytest.approx(float(expected), rel=1e-10)


def test_fit_recovers_the_mean_and_the_masking_a_mar_fit_misses():
    rng = np.random.default_rng(0)
    n = 3000
    X = rng.normal(size=(n, 2)) @ np.array([[1.0, 0.6], [0.0, 0.8]]) + [1.0, -1.0]
    logits = 3.0 * (X - [1.0, -1.0]) - 0.5
    X_missing = np.where(rng.random(X.shape) < 1 / (1 + np.exp(-logits)), np.nan, X)
    model = SelfMaskingGaussian.fit(X_missing)
    assert model.converged_ and model.n_iter_ > 0
    fitted_mean = (model.center + model.scale * model.mean).detach().numpy()
    # The observed entries' mean is far below the truth (the large values went missing); the fit's
    # error is less than half of that.
    observed_error = np.abs(np.nanmean(X_missing, 0) - [1.0, -1.0])
    assert (observed_error > 0.4).all()
    assert (np.abs(fitted_mean - [1.0, -1.0]) < 0.5 * observed_error).all()
    assert (model.slope.detach().numpy() > 1.0).all()
    hidden = np.isnan(X_missing)
    imputed = model.impute(X_missing)
    assert np.array_equal(imputed[~hidden], X[~hidden])
    # Imputations nearer the hidden values than the observed entries' mean is.
    assert abs(np.mean(imputed[hidden] - X[hidden])) < 0.5 * abs(np.mean(np.nanmean(X_missing, 0)[np.nonzero(hidden)[1]]
                                                                   - X[hidden]))


def test_fit_refuses_a_feature_without_two_observed_entries():
    X = np.random.default_rng(0).normal(size=(20, 3))
    X[1:, 2] = np.nan
    with pytest.raises(ValueError, match=r"feature\(s\) \[2\]"):
        SelfMaskingGaussian.fit(X)


def test_the_covariance_stays_positive_definite_where_its_factor_is_nearly_singular():
    model = SelfMaskingGaussian(np.zeros(2), np.ones(2), np.zeros(2), np.eye(2), np.zeros(2), np.zeros(2))
    with torch.no_grad():  # L = [[e^-50, 0], [1, e^-50]]: L L^T's second pivot is lost in floating point
        model.log_diagonal.fill_(-50.0)
        model.lower[1, 0] = 1.0
    torch.linalg.cholesky(model.covariance())
    assert np.isfinite(model.score(np.array([[0.5, np.nan], [0.1, 0.2]])))


def test_fit_reaches_torch_lbfgs_optimum_and_makes_no_torch_optimizer(monkeypatch):
    # A torch.optim optimizer imports torch._dynamo on its first call (about 0.9 s of a process's
    # first fit): the fit runs SciPy's L-BFGS-B and reaches the optimum torch's L-BFGS reached.
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3)) @ np.array([[1.0, 0.5, 0.2], [0.0, 0.8, 0.4], [0.0, 0.0, 0.6]])
    X_missing = np.where(rng.random(X.shape) < 1 / (1 + np.exp(-2.0 * X + 1.0)), np.nan, X)
    start = SelfMaskingGaussian.fit(X_missing, max_iter=1)  # one step from the fit's start, then torch's L-BFGS
    optimizer = torch.optim.LBFGS(start.parameters(), max_iter=500, tolerance_change=1e-12, tolerance_grad=1e-9,
                                  history_size=20, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = -start.log_likelihood(X_missing).mean()
        loss.backward()
        return loss

    optimizer.step(closure)

    def refuse(*args, **kwargs):
        raise AssertionError("a torch.optim optimizer was made")

    monkeypatch.setattr(torch.optim.Optimizer, "__init__", refuse)
    model = SelfMaskingGaussian.fit(X_missing)
    assert model.converged_ and 0 < model.n_iter_ < 200
    assert model.score(X_missing) == pytest.approx(start.score(X_missing), abs=1e-6)


def test_one_feature_leaves_the_stationary_point_of_zero_slope():
    # a zero slope is a stationary point of one feature's likelihood: the fit had stayed there (imputing the mean
    # of the observed values), after NumPy's cov of one column had failed first
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 1))
    x_missing = np.where(rng.random(x.shape) < 1 / (1 + np.exp(-(3 * x - 1))), np.nan, x)
    model = SelfMaskingGaussian.fit(x_missing)
    assert 2.5 < float(model.slope.detach()[0] / model.scale[0]) < 3.5  # the truth: 3 in the data's units
    hidden = np.isnan(x_missing)
    assert abs(model.impute(x_missing)[hidden].mean() - x[hidden].mean()) < 0.15


def test_likelihood_of_a_row_missing_two_entries_integrates_them_together():
    # each missing entry had been integrated against its own conditional alone, their correlation given
    # the observed entry left out
    model = _model(seed=2)
    with torch.no_grad():
        covariance = (model.covariance() * torch.outer(model.scale, model.scale)).numpy()
        mean = (model.center + model.scale * model.mean).numpy()
        slope, intercept = (model.slope / model.scale).numpy(), (model.intercept - model.slope * model.center /
                                                                 model.scale).numpy()
    x = np.array([np.nan, 0.4, np.nan])
    o, m = [1], [0, 2]
    gain = covariance[np.ix_(m, o)] / covariance[1, 1]
    conditional_mean = mean[m] + gain[:, 0] * (x[1] - mean[1])
    conditional = covariance[np.ix_(m, m)] - gain @ covariance[np.ix_(o, m)]
    # E[sigmoid(a_0 x_0 + b_0) sigmoid(a_2 x_2 + b_2)] over the conditional, by a fine grid in its whitened units
    grid = np.linspace(-9, 9, 1501)
    u, v = np.meshgrid(grid, grid)
    points = conditional_mean + np.stack([u, v], -1) @ np.linalg.cholesky(conditional).T
    density = np.exp(-0.5 * (u**2 + v**2)) / (2 * np.pi) * (grid[1] - grid[0]) ** 2
    missing = (density / (1 + np.exp(-(points * slope[m] + intercept[m]))).prod(-1)).sum()
    log_normal = -0.5 * ((x[1] - mean[1]) ** 2 / covariance[1, 1] + np.log(2 * np.pi * covariance[1, 1]))
    kept = -np.log1p(np.exp(slope[1] * x[1] + intercept[1]))
    expected = log_normal + kept + np.log(missing)
    assert float(model.log_likelihood(x[None])[0].detach()) == pytest.approx(expected, abs=1.5e-3)  # alone: 4.1e-3 off


def test_independent_columns_masked_by_their_values_get_slopes_of_the_right_sign():
    # the fit had ended at slopes of the wrong sign on independent columns (all three here), imputing worse
    # than the observed means: the likelihood with each entry integrated alone ranked them above the truth
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3))
    X_missing = np.where(np.random.default_rng(50).random(X.shape) < 1 / (1 + np.exp(-(3 * X - 1))), np.nan, X)
    model = SelfMaskingGaussian.fit(X_missing)
    assert (model.slope.detach().numpy() > 0).all()
    hidden = np.isnan(X_missing)
    error = np.sqrt(np.mean((model.impute(X_missing)[hidden] - X[hidden]) ** 2))
    means = np.sqrt(np.mean((np.nanmean(X_missing, 0)[np.nonzero(hidden)[1]] - X[hidden]) ** 2))
    assert error < 0.6 * means  # 0.71 against 1.57


class _PositiveDefiniteBelow(SelfMaskingGaussian):
    """A model whose likelihood cannot be evaluated beyond slopes of 1.5, as where a line search's step has
    taken the covariance past positive definiteness in floating point."""

    def _log_likelihood(self, X, joint):
        if (self.slope.detach().abs() > 1.5).any():
            raise torch.linalg.LinAlgError("linalg.cholesky: the input is not positive-definite")
        return super()._log_likelihood(X, joint)


def test_a_step_the_likelihood_cannot_be_evaluated_at_is_stepped_back_from():
    # the fit had failed on torch's LinAlgError (diabetes with 20 % self-masking holes)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 2)) @ np.array([[1.0, 0.6], [0.0, 0.8]])
    X_missing = np.where(rng.random(X.shape) < 1 / (1 + np.exp(-(3 * X - 1))), np.nan, X)
    model = _PositiveDefiniteBelow.fit(X_missing, max_iter=50)
    assert (model.slope.detach().abs() <= 1.5).all() and np.isfinite(model.score(X_missing))
