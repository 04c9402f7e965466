"""Data as training sees them: checks (binary data, magnitudes a dtype holds, user masks), the
units training works in (centre and overall scale, mapped back exactly for Gaussian models), and
sample weights. Plain functions of tensors and arrays, shared by the estimators, their solvers and
the moments code."""

import math
import warnings

import numpy as np
import sklearn
import torch

from ..models.likelihoods import LIKELIHOODS

__all__ = [
    "array_api_input",
    "as_torch",
    "check_chunk_units",
    "check_mask_array",
    "check_scale",
    "check_missing",
    "check_observed_features",
    "check_sample_weight",
    "check_values",
    "counted_samples",
    "dtype_name",
    "fill_missing",
    "log_jacobian",
    "namespace_and_device",
    "observed_units",
    "scale_limits",
    "standardization",
    "tensor_output",
    "to_namespace",
    "to_numpy",
    "training_rows",
    "weighted_mean",
]

# ====================================================================== data checks and units
def dtype_name(dtype):
    """``"float32"`` for ``torch.float32``."""
    return str(dtype).removeprefix("torch.")


def scale_limits(dtype):
    """Spreads (and magnitudes) whose squares, times a 1e-8 margin either way, ``dtype`` holds.

    The margin leaves room for variances well below or above the data's own.

    Examples
    --------
    >>> import torch
    >>> from skmpt.estimators._data import scale_limits
    >>> low, high = scale_limits(torch.float32)
    >>> bool(low < 1e-10 < 1e10 < high)
    True
    """
    info = torch.finfo(dtype)
    return 1e4 * math.sqrt(info.tiny), 1e-4 * math.sqrt(info.max)


def check_values(X, likelihood):
    """Binary data for a Bernoulli likelihood; magnitudes whose squares the dtype holds for a Gaussian one."""
    if likelihood != "gaussian":
        LIKELIHOODS[likelihood].check(X)
        return
    # Validated data hold no NaN (missing entries are zeros by now); an infinity (or a float64
    # value beyond float32's range, cast) is larger than the limit. One pass, no temporary.
    smallest, largest = torch.aminmax(X) if X.numel() else (X.new_zeros(()), X.new_zeros(()))
    largest = max(float(largest), -float(smallest))
    limit = scale_limits(X.dtype)[1]
    if largest > limit:
        raise ValueError(
            f"X holds values as large as {largest:.3g}: a Gaussian log-density squares them, which "
            f"overflows {dtype_name(X.dtype)} beyond {limit:.3g}. Rescale X (e.g. with "
            f"sklearn.preprocessing.StandardScaler); the log-likelihood of c * X is that of X minus "
            f"n_features * log(c)."
        )


def check_missing(X, *, reset):
    """The missing (NaN) entries of a validated float64 array, or None when there are none.

    At fit time (``reset``) every feature must be observed in some sample: a model cannot
    learn anything about a feature it never sees.
    """
    missing = np.isnan(X)
    if not missing.any():
        return None
    if reset:
        check_observed_features((~missing).sum(0))
    return missing


def check_observed_features(counts):
    """A ``ValueError`` naming the features whose number of observed training entries ``counts`` is zero."""
    never = np.flatnonzero(np.asarray(counts) == 0)
    if never.size:
        raise ValueError(
            f"Feature(s) {never[:10].tolist()} are missing (NaN) in every training sample: a model "
            f"cannot be fitted to a feature it never observes. Drop the column(s)."
        )


def standardization(X, likelihood, observed=None, *, per_feature=False):
    """Centre and overall scale that training divides out (zero and one when it does not).

    Gaussian models are closed under such maps, so training on ``(X - centre) / scale`` and
    mapping the module back is exact; binary data must stay binary and are left alone. With
    ``observed`` (a boolean tensor of ``X``'s shape), the statistics of the observed entries, and
    with ``per_feature=True`` too, each feature's own spread (one where it has no two different
    observed values) instead of one overall scale: for models closed under a scale per feature.
    """
    n_features = X.shape[1]
    if likelihood != "gaussian":
        return X.new_zeros(n_features), X.new_ones(())
    if observed is not None:
        return _observed_standardization(X, observed, per_feature)
    if per_feature:
        raise ValueError("per_feature=True reads the observed entries: pass observed.")
    center = X.mean(0)
    deviation = X - center
    # Divided by the largest deviation before squaring, so that no square under- or overflows.
    largest = deviation.abs().max()
    if largest == 0:
        return center, X.new_ones(())  # constant data: nothing to rescale
    scale = largest * (deviation / largest).square().mean().sqrt()
    return center, check_scale(scale, X.dtype)


def _observed_standardization(X, observed, per_feature):
    """:func:`standardization` from the observed entries only (each feature's own mean).

    A feature with no observed entry (possible in a ``partial_fit`` chunk of an already fitted
    model, never at ``fit``) is centred at zero: the units are a choice, mapped back exactly.
    """
    seen = observed.to(X.dtype)
    center = (X * seen).sum(0) / seen.sum(0).clamp_min(1)
    deviation = (X - center) * seen
    if per_feature:
        largest = deviation.abs().amax(0) if len(X) else X.new_zeros(X.shape[1])
        unit = torch.where(largest > 0, largest, torch.ones_like(largest))  # divided before squaring
        spread = unit * ((deviation / unit).square().sum(0) / seen.sum(0).clamp_min(1)).sqrt()
        spread = torch.where(largest > 0, spread, torch.ones_like(largest))
        for value in spread:
            check_scale(value, X.dtype)
        return center, spread
    largest = deviation.abs().max() if deviation.numel() else X.new_zeros(())  # no numeric feature: no scale
    if largest == 0:
        return center, X.new_ones(())
    scale = largest * ((deviation / largest).square().sum() / seen.sum()).sqrt()
    return center, check_scale(scale, X.dtype)


def check_scale(scale, dtype):
    """``scale`` when its square (times a margin) ``dtype`` holds; a ``ValueError`` otherwise."""
    low, high = scale_limits(dtype)
    if not low <= float(scale) <= high:
        raise ValueError(
            f"X's spread (root-mean-square deviation {float(scale):.3g}) is outside the range whose "
            f"variances {dtype_name(dtype)} can hold, [{low:.3g}, {high:.3g}]. Rescale X (e.g. with "
            f"sklearn.preprocessing.StandardScaler); the log-likelihood of c * X is that of X minus "
            f"n_features * log(c)."
        )
    return scale


def observed_units(count, mean, m2, dtype, device):
    """:func:`standardization`'s centre and overall scale of incomplete data from each feature's
    ``count``, ``mean`` and scatter ``m2`` of its observed entries (float64 NumPy arrays, as merged
    chunk by chunk), as tensors of ``dtype`` on ``device``.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from skmpt.estimators._data import observed_units
    >>> X = np.array([[0.0, 1.0], [2.0, np.nan], [4.0, 3.0]])
    >>> seen = ~np.isnan(X)
    >>> mean = np.nanmean(X, 0)
    >>> m2 = np.nansum((X - mean) ** 2, 0)
    >>> center, scale = observed_units(seen.sum(0), mean, m2, torch.float64, "cpu")
    >>> center.tolist(), round(float(scale) ** 2, 6)
    ([2.0, 2.0], 2.0)
    """
    center = torch.as_tensor(mean, dtype=dtype, device=device)
    total = float(np.sum(count))
    variance = float(np.sum(m2)) / total if total else 0.0
    if variance == 0:
        return center, torch.ones((), dtype=dtype, device=device)  # constant data: nothing to rescale
    return center, check_scale(torch.tensor(math.sqrt(variance), dtype=dtype, device=device), dtype)


def check_mask_array(masks, n_features):
    """User masks as a boolean array of shape ``(n_masks, D)`` or ``(n_samples, n_masks, D)``."""
    masks = np.asarray(masks)
    if masks.dtype != bool:
        if masks.size and not np.isin(masks, (0, 1)).all():
            raise ValueError("masks must be boolean (True marks a masked token) or hold only 0 and 1.")
        masks = masks.astype(bool)
    if masks.ndim not in (2, 3) or masks.shape[-1] != n_features:
        raise ValueError(
            f"masks must have shape (n_masks, {n_features}) or (n_samples, n_masks, "
            f"{n_features}); got {masks.shape}."
        )
    return masks


def check_chunk_units(X, center, scale, *, first):
    """Warn when a ``partial_fit`` chunk cannot set, or does not fit, the training units.

    The first chunk's centre and overall scale are the units training works in; a feature
    that is constant in it, or a later chunk whose spread in those units is a hundredfold
    larger or smaller, means the first chunk was not representative of the data.
    """
    if first:
        constant = (X == X[:1]).all(0) if len(X) > 1 else torch.ones(X.shape[1], dtype=torch.bool)
        if bool(constant.any()):
            features = torch.nonzero(constant).flatten().tolist()
            warnings.warn(
                f"The first partial_fit chunk ({len(X)} samples) is constant in feature(s) "
                f"{features[:10]}: it sets the units training works in (centre and scale), and "
                f"a model fitted from it starts with no spread there. Pass a representative first "
                f"chunk (shuffle the data before splitting it).",
                UserWarning,
                stacklevel=3,
            )
        return
    spread = float(((X - center) / scale).square().mean().sqrt())
    if not 0.01 <= spread <= 100:
        warnings.warn(
            f"This partial_fit chunk's spread is {spread:.3g} times the first chunk's: training "
            f"works in the first chunk's units, and a step size tuned to them may be far off "
            f"here. Pass a representative first chunk (shuffle the data before splitting it).",
            UserWarning,
            stacklevel=3,
        )


# ====================================================================== tensors and array-API arrays as input
def array_api_input(X):
    """Whether ``X`` is computed where it lives: a torch tensor, or another array-API array (CuPy,
    array-api-strict) that torch reads through DLPack without a copy; NumPy arrays and everything
    else go through scikit-learn's validation, as NumPy."""
    if isinstance(X, torch.Tensor):
        return True
    return not isinstance(X, np.ndarray) and hasattr(X, "__array_namespace__") and hasattr(X, "__dlpack__")


def as_torch(X):
    """An :func:`array_api_input` ``X`` as a torch tensor on its device (the same memory)."""
    return X if isinstance(X, torch.Tensor) else torch.from_dlpack(X)


def tensor_output(X):
    """Whether outputs for the input ``X`` are arrays of its namespace on its device: ``X`` is an
    :func:`array_api_input` and scikit-learn's ``array_api_dispatch`` is on
    (``sklearn.config_context(array_api_dispatch=True)``), the convention of scikit-learn's
    array-API estimators; otherwise outputs are NumPy arrays."""
    return array_api_input(X) and sklearn.get_config()["array_api_dispatch"]


def namespace_and_device(X):
    """``(name, device)`` of ``X``'s array namespace: ``("numpy", None)`` for NumPy arrays and every
    array-like that is not an :func:`array_api_input`."""
    if isinstance(X, torch.Tensor):
        return "torch", X.device
    if not array_api_input(X):
        return "numpy", None
    return X.__array_namespace__().__name__, X.device


def to_namespace(values, like):
    """The tensor ``values`` as an array of ``like``'s namespace on ``like``'s device."""
    if isinstance(like, torch.Tensor):
        return values.to(like.device)
    values = like.__array_namespace__().from_dlpack(values.to(as_torch(like).device).contiguous())
    return values if values.device == like.device else values.to_device(like.device)


def to_numpy(values):
    """``values`` (a NumPy array, a tensor or array-API array on any device, or None) as a NumPy
    array (None stays None).

    Examples
    --------
    >>> import torch
    >>> from skmpt.estimators._data import to_numpy
    >>> to_numpy(torch.ones(2)).tolist()
    [1.0, 1.0]
    """
    if isinstance(values, np.ndarray) or not array_api_input(values):
        return values
    return as_torch(values).detach().cpu().numpy()


# ====================================================================== sample weights
# A weight ``w_i`` counts sample ``i`` ``w_i`` times: training maximises the weighted mean of the
# per-sample objective, ``sum_i w_i f(x_i) / sum_i w_i``, whose optimum is that of the data with
# every row repeated ``w_i`` times (for integer weights); mini-batch steps weight each sample's
# gradient by ``w_i / mean(w)``, an unbiased estimate of the same mean. Rows of zero weight are
# left out of training altogether, initialisation included.


def check_sample_weight(sample_weight, n_samples):
    """``sample_weight`` as a float64 array of shape ``(n_samples,)``, divided by its largest
    value, or None when it is None.

    Weights must be finite and non-negative, with a positive sum; a ``ValueError`` names the
    problem otherwise. The caller's array is never modified. Weights only matter relative to
    each other, so they are rescaled (to a largest weight of one) rather than refused when
    their sum would overflow (e.g. ``1e308`` each): fitting and scoring then give what equal
    weights give. A weight below ``1e-308`` times the largest becomes zero, as it counts for
    nothing next to it.
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
    largest = weights.max(initial=0.0)
    if largest <= 0:
        raise ValueError("sample_weight sums to zero: no sample would count.")
    return weights / largest


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


def counted_samples(sample_weight, n_samples):
    """The number of samples that validated ``sample_weight`` counts: its sum, as integer weights
    count repeated rows (``n_samples`` without weights). Not rescaled: it overflows to infinity
    for weights whose sum does.

    Examples
    --------
    >>> from skmpt.estimators._data import counted_samples
    >>> counted_samples([2, 0, 1.5], 3), counted_samples(None, 3)
    (3.5, 3.0)
    """
    if sample_weight is None:
        return float(n_samples)
    with np.errstate(over="ignore"):
        return float(np.sum(np.asarray(sample_weight, dtype=np.float64)))


def weighted_mean(values, sample_weight):
    """Mean of ``values`` (a NumPy array) weighted by validated ``sample_weight`` (or unweighted)."""
    weights = check_sample_weight(sample_weight, len(values))
    return float(np.mean(values)) if weights is None else float(np.average(values, weights=weights))


def fill_missing(X, observed):
    """``X`` with its unobserved entries at zero (the centre of standardised data)."""
    return X if observed is None else torch.where(observed, X, torch.zeros_like(X))


def log_jacobian(X, scale, observed=None):
    """What every log-density of data divided by ``scale`` shifts by when mapped back: ``-D log(scale)``
    in ``D`` dimensions (of the observed entries: ``-|o| log(scale)``, on average over the samples)."""
    dimension = X.shape[1] if observed is None else float(observed.sum(-1).double().mean())
    return -dimension * float(scale.log())
