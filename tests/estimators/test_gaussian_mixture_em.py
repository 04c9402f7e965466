"""MaskedGaussianMixture(init_params="em"): EM steps on the observed entries, then MPT."""

import numpy as np
import pytest
import torch
from support.em_missing import gmm_em, incomplete_data

from skmpt import MaskedGaussianMixture
from skmpt.estimators.gaussian_mixture import em_start, initial_parameters
from skmpt.models import GaussianMixtureModule

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _observed_log_likelihood(X, observed, parameters):
    module = GaussianMixtureModule(*parameters)
    with torch.no_grad():
        return float(module.log_marginal(X, observed=observed).mean())


def test_em_start_on_complete_data_is_the_sample_mean_and_covariance():
    X = torch.as_tensor(np.random.default_rng(0).normal(size=(200, 4)) @ np.diag([1.0, 2.0, 0.5, 3.0]))
    weights, means, covariances = em_start(X, torch.ones_like(X, dtype=torch.bool), torch.ones(200), 1, 0, 1e-3,
                                           torch.full((4,), 1e-6, dtype=X.dtype))
    np.testing.assert_allclose(means[0].numpy(), X.mean(0).numpy(), atol=1e-12)
    np.testing.assert_allclose(covariances[0].numpy(), np.cov(X.numpy().T, bias=True), atol=1e-12)
    assert float(weights[0]) == pytest.approx(1.0)


def test_em_start_raises_the_observed_likelihood_of_its_kmeans_start():
    X = incomplete_data("gmm", 300)
    observed = torch.as_tensor(~np.isnan(X))
    X_t = torch.as_tensor(np.nan_to_num(X))
    start = initial_parameters(X_t, 2, "full", "kmeans", 0)
    reached = em_start(X_t, observed, torch.ones(len(X)), 2, 0, 1e-3, torch.full((X.shape[1],), 1e-6, dtype=X_t.dtype))
    assert _observed_log_likelihood(X_t, observed, reached) > _observed_log_likelihood(X_t, observed, start) + 0.1


def test_em_started_fit_is_near_the_em_optimum_on_incomplete_data():
    # The bound of the MPT fit of tests/estimators/test_missing_em.py, at a fraction of its epochs.
    X = incomplete_data("gmm", 500)
    reference = gmm_em(X, 2)[-1]
    estimator = MaskedGaussianMixture(2, init_params="em", learning_rate=1e-3, n_iter_no_change=1,
                                      random_state=0).fit(X)
    assert abs(reference - float(estimator.log_marginal_likelihood(X).mean())) < 0.05
    assert estimator.n_iter_ < 20


def test_em_start_is_for_full_covariances_only():
    X = incomplete_data("gmm", 50)
    with pytest.raises(ValueError, match="init_params='em' is for covariance_type='full'"):
        MaskedGaussianMixture(2, covariance_type="diag", init_params="em").fit(X)
