"""What every check accepts: a fitted estimator (its ``module_`` on validated data) or a model."""

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

__all__ = ["as_model_and_tensor", "parameter_dtype"]

#: numpy floating dtypes that a check keeps as given.
_FLOATING = (np.float16, np.float32, np.float64)


def parameter_dtype(model):
    """The one floating dtype of a torch module's parameters and buffers, or None (no module,
    no floating tensors, or several dtypes)."""
    if not isinstance(model, torch.nn.Module):
        return None
    dtypes = {t.dtype for t in (*model.parameters(), *model.buffers()) if t.is_floating_point()}
    return dtypes.pop() if len(dtypes) == 1 else None


def as_model_and_tensor(model, X):
    """``(model, X)`` with ``X`` a tensor in the precision given.

    A fitted estimator gives its ``module_`` and its own validation of ``X`` (in the
    estimator's ``dtype``). For a model object, a tensor is used as it is (detached); a
    floating numpy array keeps its dtype (float32 stays float32); anything else (a list, a
    data frame, integers) takes the dtype of the model's parameters, float64 when the model
    has none or several.
    """
    if isinstance(model, BaseEstimator):
        check_is_fitted(model)
        return model.module_, model._to_tensor(X, reset=False)[0]
    if isinstance(X, torch.Tensor):
        return model, X.detach()
    given = getattr(X, "dtype", None)
    if isinstance(given, np.dtype) and given.type in _FLOATING:
        return model, torch.from_numpy(np.array(X))
    dtype = parameter_dtype(model) or torch.float64
    return model, torch.from_numpy(np.array(X, dtype=np.float64)).to(dtype)
