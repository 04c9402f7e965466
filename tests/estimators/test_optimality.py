"""A fit that reports ``converged_=True`` is at its optimum: EM run long from the fitted parameters
(independently of the ten steps and extrapolation that judge ``converged_``) gains less than
``tol`` nats per sample. On data of a shape the other tests do not use: columns on scales from
1e-3 to 1e3, one column a multiple of another (or the difference of two), complete and with holes, and
(PPCA against its closed form, factor analysis against scikit-learn) 12 rows of 8 features."""

import copy
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedPPCA
from skmpt.estimators.gaussian_mixture import em_step, floored, remaining_gain
from support.helpers import saddle_table


def _awkward_data(n_samples, holes, seed=0):
    """Two clusters in D=5, columns scaled by 1e-3 .. 1e3, the last column twice the first plus a
    little noise (nearly rank-deficient), with ``holes`` of the entries missing at random."""
    rng = np.random.RandomState(seed)
    labels = rng.rand(n_samples) < 0.4
    X = rng.randn(n_samples, 5) + 3.0 * labels[:, None] * np.array([1.0, -1.0, 0.5, 0.0, 1.0])
    X[:, 4] = 2 * X[:, 0] + 0.05 * rng.randn(n_samples)
    X = X * np.array([1e-3, 1.0, 1e3, 10.0, 1e-3])
    X[rng.rand(*X.shape) < holes] = np.nan
    return X


def _em_gain(estimator, X, n_steps):
    """What ``n_steps`` EM steps from the fitted mixture gain in mean ``log p(x_o)`` on ``X``
    (standardised by one common scale per feature, which moves every value by a constant)."""
    observed = ~np.isnan(X)
    center, scale = np.nanmean(X, 0), np.nanstd(X, 0)
    if estimator.covariance_type == "spherical":
        scale = np.full_like(scale, np.sqrt(np.mean(scale**2)))
    X_t = torch.as_tensor(np.where(observed, (X - center) / scale, 0.0))
    module = estimator.module_
    weights = torch.full((len(X),), 1 / len(X), dtype=torch.float64)
    with torch.no_grad():
        module = copy.deepcopy(module).cpu().double()  # EM runs on the host, as the estimator's check does
        module.unstandardize_(torch.as_tensor((estimator.offset_ - center) / scale), torch.as_tensor(1 / scale))
        covariances = module.covariances()
        if covariances.dim() == 2:
            covariances = torch.diag_embed(covariances)
        params, values = (module.log_weights, module.means, covariances), []
        for _ in range(n_steps):
            value, params = em_step(X_t, torch.as_tensor(observed), weights, *params, module.variance_floor,
                                    estimator.covariance_type)
            values.append(value)
    return max(values) - values[0]


@pytest.mark.parametrize("holes", [0.0, 0.2])
@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_a_mixture_that_says_converged_is_within_tol_of_em_optimum(covariance_type, holes):
    X = _awkward_data(40, holes)
    init = {"init_params": "em"} if covariance_type == "full" else {}
    estimator = MaskedGaussianMixture(2, covariance_type=covariance_type, random_state=0, **init)
    estimator.fit(X)
    gain = _em_gain(estimator, X, 100)
    assert not estimator.converged_ or gain <= estimator.tol


@pytest.mark.parametrize("covariance_type", ["tied", "diag", "spherical"])
def test_a_mixture_fit_with_holes_ends_at_em_optimum_whatever_its_covariance_type(covariance_type):
    # MPT alone stopped 0.02 to 0.26 nats short here (diag, tied, spherical) and warned; a fit that its
    # stopping rule stops short of EM's optimum (here early) continues by EM and L-BFGS from there.
    X = _awkward_data(40, 0.2)
    estimator = MaskedGaussianMixture(2, covariance_type=covariance_type, n_iter_no_change=1, learning_rate=1e-3,
                                      random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        estimator.fit(X)
    assert estimator.converged_
    assert _em_gain(estimator, X, 300) <= estimator.tol


def test_a_mixture_whose_em_crawls_past_a_saddle_is_not_said_converged_there():
    # A tied mixture on rank-2 data with 40 % of entries missing: EM from its k-means start gains about
    # 1e-6 nats a step for 100 steps, which its extrapolation took for the optimum (converged_, 0.0072
    # nats short), then leaves the saddle. L-BFGS from there leaves it in about 40 evaluations.
    X = saddle_table()
    estimator = MaskedGaussianMixture(3, covariance_type="tied", random_state=0).fit(X)
    assert estimator.converged_
    assert _em_gain(estimator, X, 300) <= estimator.tol


def test_remaining_gain_of_rates_rising_towards_one_is_not_small():
    # EM on a saddle's plateau (quakes, 20 % missing, 3 components): it then gained 0.012 nats more.
    gains = 1e-5 * np.array([7.017, 6.921, 6.078, 4.843, 3.647, 2.709, 2.047, 1.598, 1.299, 1.101])
    assert remaining_gain(np.concatenate([[0.0], np.cumsum(gains)])[-10:]) > 1e-3
    gains = 1e-6 * np.array([60.8, 48.4, 36.5, 27.1, 20.5, 16.0, 13.0, 11.0, 9.71, 8.90])  # rates up to 0.92
    assert remaining_gain(np.concatenate([[0.0], np.cumsum(gains)])) > 1e-3
    # Rates rising by less and less (diabetes, 40 % missing, 1 component): the fast directions die
    # out; EM run 3000 steps gained 1.3e-4 in all.
    gains = 1e-6 * np.array([54.0, 16.8, 10.1, 7.55, 6.05, 4.97, 4.14, 3.47, 2.92])
    assert remaining_gain(np.concatenate([[0.0], np.cumsum(gains)])) < 1e-4


def test_floored_covariances_are_the_nearest_above_the_floor():
    rng = np.random.RandomState(0)
    factor = rng.randn(4, 2)
    scatter = torch.as_tensor(factor @ factor.T)  # rank 2: two directions of no variance
    floor = torch.as_tensor([1e-2, 1.0, 1e2, 1.0])
    covariance = floored(scatter, floor)
    root = floor.sqrt()
    whitened = torch.linalg.eigvalsh((covariance - torch.diag(floor)) / torch.outer(root, root))
    assert float(whitened.min()) > -1e-10  # at least the floor in every direction
    # Sigma maximises -log|Sigma| - tr(Sigma^-1 S) over Sigma >= floor: no small step above the floor does better.
    def objective(sigma):
        return float(-torch.logdet(sigma) - torch.trace(torch.linalg.solve(sigma, scatter)))
    for _ in range(20):
        step = torch.as_tensor(rng.randn(4, 4))
        step = 1e-3 * (step @ step.T) * torch.outer(root, root)
        assert objective(covariance + step) <= objective(covariance) + 1e-12
    complete = torch.as_tensor(factor @ factor.T) + torch.diag(2 * floor)  # above the floor: unchanged
    torch.testing.assert_close(floored(complete, floor), complete)


def _few_rows_of_many_scales():
    """12 rows of 8 features on scales 1e-3 .. 1e3, one column the difference of two others."""
    rng = np.random.RandomState(1)
    X = rng.randn(12, 2) @ rng.randn(2, 8) + rng.randn(12, 8) * np.sqrt(rng.uniform(0.1, 1, 8))
    X[:, 5] = X[:, 1] - X[:, 2]
    return X * np.logspace(-3, 3, 8)


@pytest.mark.parametrize("solver", ["moments", "minibatch"])
def test_ppca_that_says_converged_is_at_the_closed_form_optimum(solver):
    X = _few_rows_of_many_scales()
    estimator = MaskedPPCA(2, solver=solver, random_state=0).fit(X)
    eigenvalues = np.sort(np.linalg.eigvalsh(np.cov(X.T, bias=True)))[::-1]
    noise = eigenvalues[2:].mean()
    optimum = -0.5 * (8 * np.log(2 * np.pi) + np.log(eigenvalues[:2]).sum() + 6 * np.log(noise) + 8)
    assert estimator.score(X) <= optimum + 1e-9
    assert not estimator.converged_ or estimator.score(X) >= optimum - estimator.tol
    if solver == "moments":  # PCA's solution is its start: it is at the optimum and says so
        assert estimator.converged_


@pytest.mark.parametrize("solver", ["moments", "minibatch"])
def test_factor_analysis_that_says_converged_is_within_tol_of_sklearn(solver):
    from sklearn.decomposition import FactorAnalysis

    X = _few_rows_of_many_scales()
    estimator = MaskedFactorAnalysis(2, solver=solver, random_state=0).fit(X)
    reference = FactorAnalysis(2, tol=1e-8, max_iter=5000).fit(X).score(X)
    assert not estimator.converged_ or estimator.score(X) >= reference - estimator.tol
