"""scikit-learn's estimator checks over every array estimator, in a tiny configuration."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedLinearVAE, MaskedPPCA, MaskedVAE

TINY = [
    MaskedPPCA(n_components=1, max_epochs=3, score_masks=3, random_state=0),
    MaskedLinearVAE(n_components=1, likelihood="gaussian", n_quadrature=6, max_epochs=3, random_state=0),
    MaskedLinearVAE(n_components=1, n_quadrature=6, max_epochs=3, random_state=0),
    MaskedVAE(n_components=1, hidden_layer_sizes=(4,), n_particles=3, score_masks=2, n_lml_samples=5,
              max_epochs=2, random_state=0),
    MaskedFactorAnalysis(n_components=1, max_epochs=3, random_state=0),
    MaskedGaussianMixture(n_components=2, max_epochs=3, random_state=0),
    MaskedGaussianMixture(n_components=2, covariance_type="diag", max_epochs=3, random_state=0),
]


@parametrize_with_checks(TINY)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
