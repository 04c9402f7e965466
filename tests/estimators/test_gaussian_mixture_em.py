"""MaskedGaussianMixture(init_params="em"): EM steps on the observed entries, then MPT."""

import copy
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from support.em_missing import gmm_em, incomplete_data

from skmpt import MaskedGaussianMixture
from skmpt.estimators.gaussian_mixture import (
    em_climb,
    em_parameters,
    em_start,
    em_step,
    expected_log_likelihood,
    expected_statistics,
    initial_parameters,
    module_of,
    observed_log_likelihood,
    quasi_newton,
)
from skmpt.models import GaussianMixtureModule

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _observed_log_likelihood(X, observed, parameters):
    module = GaussianMixtureModule(*parameters)
    with torch.no_grad():
        return float(module.log_marginal(X, observed=observed).mean())


def _gain_from(X, observed, weights, params, floor, n_steps, covariance_type="full"):
    """What ``n_steps`` EM steps from ``params`` gain in mean ``log p(x_o)``."""
    values = []
    with torch.no_grad():
        for _ in range(n_steps):
            value, params = em_step(X, observed, weights, *params, floor, covariance_type)
            values.append(value)
    return max(values) - values[0]


def _em_gain(estimator, X, n_steps):
    """:func:`_gain_from` the fitted mixture, on ``X`` standardised as the estimator's check does."""
    X_t, observed, weights, center, scale = estimator._standardized(X, None)
    module = copy.deepcopy(estimator.module_).cpu().double()  # EM runs on the host, as the estimator's check does
    with torch.no_grad():
        module.unstandardize_(torch.as_tensor((estimator.offset_ - center) / scale), torch.as_tensor(1 / scale))
        params = tuple(p.detach() for p in em_parameters(module))
    return _gain_from(X_t, observed, weights, params, module.variance_floor, n_steps, estimator.covariance_type)


def test_an_em_start_at_its_optimum_runs_no_mpt_epoch():
    # MPT with uniform mask sizes aims at EM's optimum: from there it has nothing to learn.
    X = incomplete_data("gmm", 120)
    estimator = MaskedGaussianMixture(2, init_params="em", random_state=0).fit(X)
    assert estimator.n_iter_ == 0 and estimator.history_ == [] and estimator.converged_
    assert _em_gain(estimator, X, 200) <= estimator.tol



@pytest.mark.parametrize("warm", [False, True])
def test_an_em_start_is_judged_by_ems_own_verdict_not_measured_again(monkeypatch, warm):
    # EM stops where its rule and the saddle probe say less than tol is left: the check of converged_
    # takes that verdict (it had run ten more EM steps and a second probe to learn the same).
    X = incomplete_data("gmm", 120)
    fitted = MaskedGaussianMixture(2, init_params="em", random_state=0).fit(X[:80])
    checks = []
    measured = MaskedGaussianMixture._optimality_gap
    monkeypatch.setattr(MaskedGaussianMixture, "_optimality_gap",
                        lambda self, *args: checks.append(1) or measured(self, *args))
    estimator = copy.deepcopy(fitted).set_params(warm_start=True) if warm else MaskedGaussianMixture(
        2, init_params="em", random_state=0)
    estimator.fit(X)
    assert checks == [] and estimator.converged_ and estimator.n_iter_ == 0
    assert _em_gain(estimator, X, 200) <= estimator.tol
    estimator.set_params(warm_start=False, mask_rate=0.5).fit(X)  # EM's target is not MPT's: its verdict is not
    assert checks == [1]  # taken for the check's (which has none to give)

def test_an_em_start_short_of_its_optimum_is_climbed_then_trained(monkeypatch):
    # The check judges the start: one short of the optimum is climbed by EM, and where that does not get
    # there either, trained by MPT from the full learning rate (no epoch has run to say otherwise).
    import skmpt.estimators.gaussian_mixture as gaussian_mixture

    X = incomplete_data("gmm", 120)
    start = gaussian_mixture.em_start
    monkeypatch.setattr(gaussian_mixture, "em_start", lambda *args: start(*args[:-3], 10.0, *args[-2:]))
    climbed = MaskedGaussianMixture(2, init_params="em", random_state=0).fit(X)
    assert climbed.n_iter_ == 0 and climbed.converged_ and _em_gain(climbed, X, 200) <= climbed.tol
    monkeypatch.setattr(MaskedGaussianMixture, "_climb_to_optimum", MaskedGaussianMixture._optimality_gap)
    trained = MaskedGaussianMixture(2, init_params="em", random_state=0).fit(X)
    assert trained.n_iter_ == len(trained.history_) > 0
    assert trained.history_[0]["learning_rate"] == trained.learning_rate


def test_em_start_on_complete_data_is_the_sample_mean_and_covariance():
    X = torch.as_tensor(np.random.default_rng(0).normal(size=(200, 4)) @ np.diag([1.0, 2.0, 0.5, 3.0]))
    weights, means, covariances, _ = em_start(X, torch.ones_like(X, dtype=torch.bool), torch.ones(200), 1, 0, 1e-3,
                                              torch.full((4,), 1e-6, dtype=X.dtype))
    np.testing.assert_allclose(means[0].numpy(), X.mean(0).numpy(), atol=1e-12)
    np.testing.assert_allclose(covariances[0].numpy(), np.cov(X.numpy().T, bias=True), atol=1e-12)
    assert float(weights[0]) == pytest.approx(1.0)


def test_em_start_raises_the_observed_likelihood_of_its_kmeans_start():
    X = incomplete_data("gmm", 300)
    observed = torch.as_tensor(~np.isnan(X))
    X_t = torch.as_tensor(np.nan_to_num(X))
    start = initial_parameters(X_t, 2, "full", "kmeans", 0)
    floor = torch.full((X.shape[1],), 1e-6, dtype=X_t.dtype)
    *reached, _ = em_start(X_t, observed, torch.ones(len(X)), 2, 0, 1e-3, floor)
    assert _observed_log_likelihood(X_t, observed, reached) > _observed_log_likelihood(X_t, observed, start) + 0.1


def test_em_started_fit_is_near_the_em_optimum_on_incomplete_data():
    # The bound of the MPT fit of tests/estimators/test_missing_em.py, at a fraction of its epochs.
    X = incomplete_data("gmm", 500)
    reference = gmm_em(X, 2)[-1]
    estimator = MaskedGaussianMixture(2, init_params="em", learning_rate=1e-3, n_iter_no_change=1,
                                      random_state=0).fit(X)
    assert abs(reference - float(estimator.log_marginal_likelihood(X).mean())) < 0.05
    assert estimator.n_iter_ < 20


@pytest.mark.parametrize("covariance_type", ["tied", "diag", "spherical"])
def test_em_start_serves_every_covariance_type_and_ends_at_em_optimum(covariance_type):
    # init_params="em" was for full covariances only (a ValueError); EM's M-step has every type.
    X = incomplete_data("gmm", 120)
    estimator = MaskedGaussianMixture(2, covariance_type=covariance_type, init_params="em", learning_rate=1e-3,
                                      n_iter_no_change=1, random_state=0).fit(X)
    assert estimator.converged_
    assert _em_gain(estimator, X, 200) <= estimator.tol


def _collinear_with_holes(n_samples, n_free, seed):
    """``(X, observed, weights, floor, start)``: ``n_free`` standard columns and their sum plus noise
    of variance 1e-5, 40 % of the entries missing, standardised; a one-component start at zero."""
    rng = np.random.RandomState(seed)
    base = rng.randn(n_samples, n_free)
    X = np.column_stack([base, base[:, 0] + base[:, 1] + 0.003 * rng.randn(n_samples)])
    X[rng.rand(*X.shape) < 0.4] = np.nan
    observed = torch.as_tensor(~np.isnan(X))
    X_t = torch.as_tensor(np.where(observed, (X - np.nanmean(X, 0)) / np.nanstd(X, 0), 0.0))
    n_features = n_free + 1
    weights = torch.full((n_samples,), 1 / n_samples, dtype=torch.float64)
    floor = torch.full((n_features,), 1e-6, dtype=torch.float64)
    start = tuple(torch.as_tensor(a) for a in (np.zeros(1), np.zeros((1, n_features)), np.eye(n_features)[None]))
    return X_t, observed, weights, floor, start


def test_em_climb_on_nearly_collinear_columns_with_holes_beats_plain_em():
    # A direction of variance 1e-5 that the holes say little about: EM's rate there is near one.
    X_t, observed, weights, floor, start = _collinear_with_holes(80, 5, seed=0)
    climbed, steps, _ = em_climb(X_t, observed, weights, start, floor, "full", 1e-5)
    params, plain = start, []
    with torch.no_grad():
        for _ in range(steps):
            value, params = em_step(X_t, observed, weights, *params, floor)
            plain.append(value)
        reached = float(observed_log_likelihood(X_t, observed, weights, *climbed))
    assert steps < 300  # EM steps, an evaluation of L-BFGS counting for two
    assert plain[-1] - plain[-2] > 1e-6  # plain EM, as many steps, still climbing
    assert reached > plain[-1] + 1e-3
    assert _gain_from(X_t, observed, weights, climbed, floor, 300) < 1e-4


def test_the_quasi_newton_climb_makes_no_torch_optimizer(monkeypatch):
    # A torch.optim optimizer imports torch._dynamo on its first call: about 1 s of a process's first fit.
    import skmpt.estimators.gaussian_mixture as module

    def refuse(*args, **kwargs):
        raise AssertionError("a torch.optim optimizer was made")

    monkeypatch.setattr(torch.optim.Optimizer, "__init__", refuse)
    calls = []
    original = module.quasi_newton
    monkeypatch.setattr(module, "quasi_newton", lambda *a: calls.append(a[-1]) or original(*a))
    X_t, observed, weights, floor, start = _collinear_with_holes(60, 3, seed=1)
    climbed, _, _ = em_climb(X_t, observed, weights, start, floor, "full", 1e-5)
    with torch.no_grad():
        assert observed_log_likelihood(X_t, observed, weights, *climbed) > observed_log_likelihood(
            X_t, observed, weights, *start) + 0.1
    assert calls  # the climb went through L-BFGS


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_the_gradient_of_em_q_at_its_parameters_is_the_observed_likelihood_gradient(covariance_type):
    # Fisher's identity: L-BFGS gets log p(x_o)'s gradient for the price of an E-step.
    rng = np.random.RandomState(0)
    X, observed = torch.as_tensor(rng.randn(50, 4)), torch.as_tensor(rng.rand(50, 4) > 0.3)
    weights = torch.full((50,), 1 / 50, dtype=torch.float64)
    factor = torch.as_tensor(rng.randn(2, 4, 4))
    params = (torch.tensor([0.3, 0.7], dtype=torch.float64).log(), torch.as_tensor(rng.randn(2, 4)),
              factor @ factor.mT + torch.eye(4, dtype=torch.float64))
    module = module_of(params, torch.full((4,), 1e-3, dtype=torch.float64), covariance_type)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(0.1 * torch.as_tensor(rng.randn(*parameter.shape)))
    value = observed_log_likelihood(X, observed, weights, *em_parameters(module))
    expected = torch.autograd.grad(value, list(module.parameters()))
    current = em_parameters(module)
    with torch.no_grad():
        statistics = expected_statistics(X, observed, weights, *current)
    surrogate = expected_log_likelihood(statistics, current[1].detach(), *current)
    for a, b in zip(expected, torch.autograd.grad(surrogate, list(module.parameters())), strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-12)
    assert float(statistics[0]) == pytest.approx(float(value.detach()), abs=1e-12)


def test_the_climb_to_the_optimum_stops_where_the_check_passes(monkeypatch):
    # The check asks for a fit within tol of the optimum; climbing on to tol / 10 crawled along ridges
    # (a default refit on breast_cancer, 40 % self-masked: 414 plain EM steps for 0.0008 nats).
    import skmpt.estimators.gaussian_mixture as module

    rng = np.random.RandomState(3)
    base = rng.randn(200, 8)
    X = np.column_stack([base, base[:, 0] + base[:, 1] + 0.003 * rng.randn(200)])
    X[rng.rand(*X.shape) < 0.4] = np.nan
    estimator = MaskedGaussianMixture(1, init_params="em", learning_rate=1e-3, n_iter_no_change=1,
                                      random_state=0).fit(X)
    steps, step = [], module.em_step
    monkeypatch.setattr(module, "em_step", lambda *a, **k: steps.append(1) or step(*a, **k))
    gap = estimator._climb_to_optimum(X, None)
    assert gap <= estimator.tol
    assert len(steps) <= 2 * module._EM_WINDOW  # a window that passes, then the check's own (70 with tol / 10)


def test_a_quasi_newton_round_is_not_judged_by_its_first_iteration():
    # L-BFGS's first iteration is a gradient step of unit length, before any curvature is known: judged
    # alone it ended round after round of a refit after that one step (star98, 40 % self-masked).
    X_t, observed, weights, floor, params = _collinear_with_holes(80, 5, seed=0)
    with torch.no_grad():
        for _ in range(1000):  # at EM's optimum: every iteration gains less than tol / 10
            params = em_step(X_t, observed, weights, *params, floor)[1]
    _, evaluations = quasi_newton(X_t, observed, weights, params, floor, "full", 1e-2, 400)
    assert evaluations >= 4  # the start, the first iteration and a second one at least (3 when the first judged)


def test_a_fit_out_of_epochs_short_of_the_optimum_is_told_of_the_em_start():
    # one binary column: MPT from k-means crawls towards its spikes (0.13 nats short after 300 epochs), EM gets
    # there in a few steps; the warning had said only to raise max_epochs
    rng = np.random.RandomState(0)
    X = rng.randn(500, 2) @ rng.randn(2, 5) + rng.randn(500, 5) * rng.uniform(0.2, 1.0, 5)
    X[:, 0] = X[:, 0] > 0
    X = (X - X.mean(0)) / X.std(0)
    with pytest.warns(ConvergenceWarning, match=r"max_epochs \(now 20\), or start from EM's optimum with "
                                                r"init_params='em'") as record:
        MaskedGaussianMixture(2, max_epochs=20, random_state=0).fit(X)
    assert len(record) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        em = MaskedGaussianMixture(2, init_params="em", max_epochs=20, random_state=0).fit(X)
    assert em.converged_
