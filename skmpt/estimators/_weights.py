"""Sample weights of the array estimators: validation, and their use in training and scoring.

A weight ``w_i`` counts sample ``i`` ``w_i`` times: training maximises the weighted mean of the
per-sample objective, ``sum_i w_i f(x_i) / sum_i w_i``, whose optimum is that of the data
with every row repeated ``w_i`` times (for integer weights); mini-batch steps weight each
sample's gradient by ``w_i / mean(w)``, an unbiased estimate of the same mean. Rows of zero
weight are left out of training altogether, initialisation included.
"""

import numpy as np
import torch

__all__ = ["check_sample_weight", "training_rows"]


def check_sample_weight(sample_weight, n_samples):
    """``sample_weight`` as a float64 array of shape ``(n_samples,)``, or None when it is None.

    Weights must be finite and non-negative, with a positive sum; a ``ValueError`` names the
    problem otherwise. The caller's array is never modified.
    """
    if sample_weight is None:
        return None
    try:
        weights = np.array(sample_weight, dtype=np.float64)  # a copy
    except (TypeError, ValueError) as exc:
        raise ValueError(f"sample_weight must be an array of numbers; {exc}") from exc
    if weights.ndim != 1 or weights.shape[0] != n_samples:
        raise ValueError(
            f"sample_weight must have shape ({n_samples},), one weight per sample; got shape {weights.shape}."
        )
    if not np.isfinite(weights).all():
        raise ValueError("sample_weight holds NaN or infinite values.")
    if (weights < 0).any():
        raise ValueError(f"sample_weight must be non-negative; its smallest value is {weights.min():.6g}.")
    if weights.sum() <= 0:
        raise ValueError("sample_weight sums to zero: no sample would count.")
    return weights


def training_rows(X, observed, sample_weight, *, min_samples=1):
    """The rows of the training tensor ``X`` (and of its ``observed`` entries, None when all
    are) that count, and their weights scaled to mean one.

    Returns ``(X, observed, None)`` without weights (the unweighted path, unchanged); otherwise
    the rows of positive weight and a tensor of their weights divided by their mean, in ``X``'s
    dtype and on its device.
    """
    weights = check_sample_weight(sample_weight, X.shape[0])
    if weights is None:
        return X, observed, None
    keep = weights > 0
    if keep.sum() < min_samples:
        raise ValueError(
            f"sample_weight gives {int(keep.sum())} sample(s) a positive weight; at least {min_samples} needed."
        )
    weights = weights[keep] / weights[keep].mean()
    rows = torch.as_tensor(np.flatnonzero(keep), device=X.device)
    observed = None if observed is None else observed[rows]
    return X[rows], observed, torch.as_tensor(weights, dtype=X.dtype, device=X.device)


def weighted_mean(values, sample_weight):
    """Mean of ``values`` (a NumPy array) weighted by validated ``sample_weight`` (or unweighted)."""
    weights = check_sample_weight(sample_weight, len(values))
    return float(np.mean(values)) if weights is None else float(np.average(values, weights=weights))
