"""What every check accepts: a fitted estimator (its ``module_`` on validated data) or a model."""

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

__all__ = ["as_model_and_tensor"]


def as_model_and_tensor(model, X):
    """``(model, X)`` with ``X`` a tensor: a fitted estimator gives its ``module_`` and its own
    validation of ``X``; a model object is returned as it is, with ``X`` as float64 unless it
    is a tensor already (then detached)."""
    if isinstance(model, BaseEstimator):
        check_is_fitted(model)
        return model.module_, model._to_tensor(X, reset=False)
    if isinstance(X, torch.Tensor):
        return model, X.detach()
    return model, torch.as_tensor(np.asarray(X, dtype=np.float64))
