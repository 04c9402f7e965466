"""skmpt: scikit-learn estimators trained and scored by masked pre-training.

Masked pre-training summed over every mask size is the model's log-marginal likelihood
(Moreno-Muñoz, Recasens and Hauberg, 2023). The estimators here train latent-variable
models with that objective and score them with its cumulative estimate.

The estimators import torch; ``import skmpt`` alone does not, so it stays cheap.
"""

import importlib

__version__ = "0.1.0"  # the one version source: pyproject.toml reads it

_ESTIMATORS = {
    "MLMCurveScorer": ".text",
    "MaskedFactorAnalysis": ".estimators",
    "MaskedGaussianMixture": ".estimators",
    "MaskedImputer": ".estimators",
    "MaskedLinearVAE": ".estimators",
    "MaskedMixedMixture": ".estimators",
    "MaskedModelSearch": ".estimators",
    "MaskedPPCA": ".estimators",
    "MaskedVAE": ".estimators",
}

__all__ = [
    "MLMCurveScorer",
    "MaskedFactorAnalysis",
    "MaskedGaussianMixture",
    "MaskedImputer",
    "MaskedLinearVAE",
    "MaskedMixedMixture",
    "MaskedModelSearch",
    "MaskedPPCA",
    "MaskedVAE",
    "datasets",
    "distributed",
    "estimators",
    "get_working_memory",
    "masks",
    "models",
    "objectives",
    "testing",
    "text",
    "working_memory",
]


def __getattr__(name):
    if name in _ESTIMATORS:
        return getattr(importlib.import_module(_ESTIMATORS[name], __name__), name)
    if name in ("working_memory", "get_working_memory"):
        return getattr(importlib.import_module("._utils", __name__), name)
    if name in ("datasets", "distributed", "estimators", "masks", "models", "objectives", "testing", "text"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
