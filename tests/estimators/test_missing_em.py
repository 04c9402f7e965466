"""Incomplete data: MPT among the observed entries reaches the optimum of EM with
missing values (the references of ``tests/em_missing.py``).

The issue's size, N=2000, D=10, K=2 with 20 % MCAR, is ``benchmarks/missing_em.py`` (its fits
take 7 to 20 s each; gaps 0.0003, 0.0012 and 0.0020 nats per sample); here N=500 with the same
D, K and holes, and the same bounds: 0.02 nats per sample for PPCA and factor analysis, 0.05
for the full-covariance mixture (measured gaps 0.002, 0.003 and 0.016).
"""

import numpy as np
import pytest
from support.em_missing import gmm_em, incomplete_data, linear_gaussian_em, log_density

from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedPPCA

# Settings that converge in a few seconds at this size (50 to 80 epochs).
FAST = {"batch_size": 100, "learning_rate": 0.03, "n_iter_no_change": 6, "n_masks": 1, "random_state": 0}


@pytest.mark.parametrize(
    "kind, estimator_class, bound",
    [("ppca", MaskedPPCA, 0.02), ("fa", MaskedFactorAnalysis, 0.02), ("gmm", MaskedGaussianMixture, 0.05)],
)
def test_mpt_reaches_the_em_optimum_on_incomplete_data(kind, estimator_class, bound):
    X = incomplete_data(kind, 500)
    assert 0.15 < np.isnan(X).mean() < 0.25
    if kind == "gmm":
        reference = gmm_em(X, 2)[-1]
    else:
        reference = linear_gaussian_em(X, 2, isotropic=kind == "ppca")[-1]
    estimator = estimator_class(2, **FAST).fit(X)
    fitted = float(estimator.log_marginal_likelihood(X).mean())
    assert abs(reference - fitted) < bound, (reference, fitted)
    if kind != "gmm":
        # The EM reference scored independently: scipy's density of each observed sub-vector.
        direct = np.mean([log_density(x, estimator.mean_, estimator.get_covariance()) for x in X])
        np.testing.assert_allclose(fitted, direct, rtol=1e-9)


def test_em_reference_increases_the_likelihood_it_reports():
    X = incomplete_data("ppca", 100)
    short = linear_gaussian_em(X, 2, isotropic=True, n_iter=3)[-1]
    converged = linear_gaussian_em(X, 2, isotropic=True)[-1]
    assert converged > short
