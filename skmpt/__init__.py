"""skmpt: scikit-learn estimators trained and scored by masked pre-training.

Masked pre-training summed over every mask size is the model's log-marginal likelihood
(Moreno-Muñoz, Recasens and Hauberg, 2023). The estimators here train latent-variable
models with that objective and score them with its cumulative estimate.

The estimators import torch; ``import skmpt`` alone does not, so it stays cheap.
"""

import importlib

__version__ = "0.1.0.dev0"

_ESTIMATORS = {
    "MLMCurveScorer": ".text",
    "MaskedFactorAnalysis": "._factor_analysis",
    "MaskedGaussianMixture": "._gaussian_mixture",
    "MaskedLinearVAE": "._linear_vae",
    "MaskedPPCA": "._ppca",
    "MaskedVAE": "._vae",
}

__all__ = [
    "MLMCurveScorer",
    "MaskedFactorAnalysis",
    "MaskedGaussianMixture",
    "MaskedLinearVAE",
    "MaskedPPCA",
    "MaskedVAE",
    "datasets",
    "get_working_memory",
    "masks",
    "objectives",
    "testing",
    "working_memory",
]


def __getattr__(name):
    if name in _ESTIMATORS:
        return getattr(importlib.import_module(_ESTIMATORS[name], __name__), name)
    if name in ("working_memory", "get_working_memory"):
        return getattr(importlib.import_module("._utils", __name__), name)
    if name in ("datasets", "masks", "objectives", "testing", "models"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
