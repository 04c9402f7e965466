"""scikit-learn's estimator checks over every array estimator of the registry, in the small
configurations the registry gives (:data:`skmpt.estimators.ESTIMATORS`)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from skmpt.estimators import ESTIMATORS

TINY = [cls(**params, random_state=0) for cls, configurations in ESTIMATORS.values() for params in configurations]


@parametrize_with_checks(TINY)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
