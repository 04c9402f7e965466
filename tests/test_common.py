"""scikit-learn's estimator checks over every array estimator, in a tiny configuration."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from skmpt import MaskedPPCA

TINY = [MaskedPPCA(n_components=1, max_epochs=3, score_masks=3, random_state=0)]


@parametrize_with_checks(TINY)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
