"""scikit-learn's estimator checks over every array estimator of the registry, in the small
configurations the registry gives (:data:`skmpt.estimators.ESTIMATORS`)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from skmpt.estimators import ESTIMATORS

TINY = [cls(**params, random_state=0) for cls, configurations in ESTIMATORS.values() for params in configurations]


def expected_failed_checks(estimator):
    # Weighted training equals training on repeated rows at the optimum, not step by step:
    # the repeated rows draw masks (and mini-batches) of their own, so two short fits with
    # the same seed differ. tests/estimators/test_sklearn_parity.py checks the optimum instead.
    # PPCA and factor analysis on complete data train from the weighted moments, which equal
    # the repeated rows' moments: they pass the check.
    if estimator.__class__.__name__ in ("MaskedPPCA", "MaskedFactorAnalysis"):
        return {}
    return {
        "check_sample_weight_equivalence_on_dense_data": "stochastic training: equal optima, not equal iterates",
    }


@parametrize_with_checks(TINY, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
