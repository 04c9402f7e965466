"""The array estimators: scikit-learn estimators over the models of :mod:`skmpt.models`.

:data:`ESTIMATORS` is the one registry of them. The common tests (scikit-learn's estimator
checks), the contract tests (:func:`skmpt.testing.check_masked_model` on each fitted
``module_``) and the API reference all read it: a new estimator is one file here and one line
below.
"""

from .factor_analysis import MaskedFactorAnalysis
from .gaussian_mixture import MaskedGaussianMixture
from .imputer import MaskedImputer
from .linear_vae import MaskedLinearVAE
from .mixed_mixture import MaskedMixedMixture
from .ppca import MaskedPPCA
from .selection import MaskedModelSearch
from .vae import MaskedVAE

__all__ = [
    "ESTIMATORS",
    "MaskedFactorAnalysis",
    "MaskedGaussianMixture",
    "MaskedImputer",
    "MaskedLinearVAE",
    "MaskedMixedMixture",
    "MaskedModelSearch",
    "MaskedPPCA",
    "MaskedVAE",
]

#: Every array estimator, by name, with the small configurations (parameter sets) that the
#: common tests fit: a few epochs on a few features, one per variant worth checking.
ESTIMATORS = {
    "MaskedPPCA": (MaskedPPCA, [{"n_components": 1, "max_epochs": 3, "score_masks": 3}]),
    "MaskedFactorAnalysis": (MaskedFactorAnalysis, [{"n_components": 1, "max_epochs": 3}]),
    "MaskedGaussianMixture": (
        MaskedGaussianMixture,
        [
            {"n_components": 2, "max_epochs": 3},
            {"n_components": 2, "covariance_type": "diag", "max_epochs": 3},
            {"n_components": 2, "covariance_type": "tied", "max_epochs": 3},
            {"n_components": 2, "covariance_type": "spherical", "max_epochs": 3},
        ],
    ),
    "MaskedMixedMixture": (
        MaskedMixedMixture,
        [{"n_components": 2, "max_epochs": 3}, {"n_components": 2, "covariance_type": "diag", "algorithm": "mpt",
                                                 "max_epochs": 3}],
    ),
    "MaskedLinearVAE": (
        MaskedLinearVAE,
        [
            {"n_components": 1, "likelihood": "gaussian", "n_quadrature": 6, "max_epochs": 3},
            {"n_components": 1, "n_quadrature": 6, "max_epochs": 3},
        ],
    ),
    "MaskedVAE": (
        MaskedVAE,
        [{"n_components": 1, "hidden_layer_sizes": (4,), "n_particles": 3, "score_masks": 2, "n_lml_samples": 5,
          "max_epochs": 2}],
    ),
}
