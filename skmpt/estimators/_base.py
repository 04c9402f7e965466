"""The base of the array estimators: parameters, validated data, training, fitted state and
everything computed from a fitted ``module_``.

A concrete estimator declares its parameters and implements two hooks, ``_build_module`` (its
:class:`skmpt.models.MaskedModel` on the training data) and ``_set_fitted_attributes``; the
optional hooks have defaults. Training is a :class:`~skmpt.estimators._trainer.Trainer`.

Fitted state stays fitted: ``fit`` (and ``partial_fit``) copies the constructor parameters into
``params_``, and every method of a fitted estimator reads ``params_`` and the fitted ``module_``,
never a parameter as it is now; ``set_params`` after ``fit`` acts at the next ``fit``, as in
scikit-learn. The options of the score (``score_method``, ``score_masks``, ``random_state``)
follow the same rule.

Sections: data checks (binary data, magnitudes a dtype holds, the units training works in, user
masks), sample weights, information criteria, and the base estimator itself (hooks, data,
training, scoring, imputation, conversion from scikit-learn, persistence).
"""

import abc
import copy
import math
import time
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .. import objectives
from .._utils import DTYPES, check_generator, resolve_device, seeded
from .._validation import Interval, Options, check_positive_int, validate_parameters
from ..masks import MAX_EXHAUSTIVE_FEATURES, observed_masks, sample_masks
from ..models.likelihoods import LIKELIHOODS
from ._trainer import MomentGroup, StreamState, Trainer, fit_threads, intra_op_threads, training_mode

__all__ = [
    "check_chunk_units",
    "check_mask_array",
    "check_missing",
    "check_sample_weight",
    "check_values",
    "dtype_name",
    "linear_gaussian_parameter_count",
    "moment_groups",
    "moment_standardization",
    "scale_limits",
    "standardization",
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
    >>> from skmpt.estimators._base import scale_limits
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
        never = np.flatnonzero(missing.all(0))
        if never.size:
            raise ValueError(
                f"Feature(s) {never[:10].tolist()} are missing (NaN) in every training sample: a model "
                f"cannot be fitted to a feature it never observes. Drop the column(s)."
            )
    return missing


def standardization(X, likelihood, observed=None):
    """Centre and overall scale that training divides out (zero and one when it does not).

    Gaussian models are closed under such maps, so training on ``(X - centre) / scale`` and
    mapping the module back is exact; binary data must stay binary and are left alone. With
    ``observed`` (a boolean tensor of ``X``'s shape), the statistics of the observed entries.
    """
    n_features = X.shape[1]
    if likelihood != "gaussian":
        return X.new_zeros(n_features), X.new_ones(())
    if observed is not None:
        return _observed_standardization(X, observed)
    center = X.mean(0)
    deviation = X - center
    # Divided by the largest deviation before squaring, so that no square under- or overflows.
    largest = deviation.abs().max()
    if largest == 0:
        return center, X.new_ones(())  # constant data: nothing to rescale
    scale = largest * (deviation / largest).square().mean().sqrt()
    return center, _check_scale(scale, X.dtype)


def moment_standardization(moments):
    """:func:`standardization`'s centre and scale from the :class:`~skmpt.objectives.Moments` of
    complete data, and the moments of the standardised data: ``((center, scale), moments)``; None
    when the spread is zero or its square leaves the range the dtype holds (then
    :func:`standardization`, which divides by the largest deviation before squaring, decides)."""
    covariance = moments.covariance
    scale = (covariance.diagonal().sum() / covariance.shape[0]).sqrt()
    low, high = scale_limits(covariance.dtype)
    if not low <= float(scale) <= high:
        return None
    standardized = objectives.Moments(moments.weight, torch.zeros_like(moments.mean), covariance / scale.square())
    return (moments.mean, scale), standardized


def _observed_standardization(X, observed):
    """:func:`standardization` from the observed entries only (each feature's own mean).

    A feature with no observed entry (possible in a ``partial_fit`` chunk of an already fitted
    model, never at ``fit``) is centred at zero: the units are a choice, mapped back exactly.
    """
    seen = observed.to(X.dtype)
    center = (X * seen).sum(0) / seen.sum(0).clamp_min(1)
    deviation = (X - center) * seen
    largest = deviation.abs().max()
    if largest == 0:
        return center, X.new_ones(())
    scale = largest * ((deviation / largest).square().sum() / seen.sum()).sqrt()
    return center, _check_scale(scale, X.dtype)


def _check_scale(scale, dtype):
    low, high = scale_limits(dtype)
    if not low <= float(scale) <= high:
        raise ValueError(
            f"X's spread (root-mean-square deviation {float(scale):.3g}) is outside the range whose "
            f"variances {dtype_name(dtype)} can hold, [{low:.3g}, {high:.3g}]. Rescale X (e.g. with "
            f"sklearn.preprocessing.StandardScaler); the log-likelihood of c * X is that of X minus "
            f"n_features * log(c)."
        )
    return scale


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


def weighted_mean(values, sample_weight):
    """Mean of ``values`` (a NumPy array) weighted by validated ``sample_weight`` (or unweighted)."""
    weights = check_sample_weight(sample_weight, len(values))
    return float(np.mean(values)) if weights is None else float(np.average(values, weights=weights))


def moment_groups(X, observed, weights):
    """The training samples as :class:`~skmpt.estimators._trainer.MomentGroup`: one group of
    every sample for complete data, one per pattern of observed entries otherwise.

    ``X`` holds the (standardised) training rows, ``observed`` their observed entries (None
    when all are), ``weights`` their weights of mean one (None: equal). Each group's moments
    are weighted; its share is its weight over the total.
    """
    if observed is None:
        return [MomentGroup(objectives.Moments.from_samples(X, weights))]
    patterns, labels = torch.unique(observed, dim=0, return_inverse=True)
    total = float(X.shape[0]) if weights is None else float(weights.sum())
    groups = []
    for index, pattern in enumerate(patterns):
        rows = torch.nonzero(labels == index).flatten()
        part = None if weights is None else weights[rows]
        moments = objectives.Moments.from_samples(X[rows], part)
        groups.append(MomentGroup(moments, pattern, float(moments.weight) / total))
    return groups


# ====================================================================== information criteria
class _InformationCriteriaMixin:
    """``bic(X)`` and ``aic(X)`` as in :class:`sklearn.mixture.GaussianMixture`, for an estimator
    with an exact ``log_marginal_likelihood`` and a ``_n_parameters()`` method."""

    def _n_parameters(self):
        """Number of free parameters of the fitted model."""
        raise NotImplementedError

    def bic(self, X):
        """Bayesian information criterion of the fitted model on ``X``; lower is better.

        ``-2 * log L + n_parameters * log(n_samples)``, where ``log L`` is the sum over ``X`` of
        the exact ``log_marginal_likelihood`` (``score(X) * n_samples`` with the default exact
        chain scoring) and ``n_parameters`` is the number of free parameters of the fitted model
        (the user guide's page on scikit-learn parity lists it for each estimator), as
        scikit-learn's mixtures count them.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        bic : float
        """
        log_likelihood = self.log_marginal_likelihood(X)
        return float(-2 * log_likelihood.sum() + self._n_parameters() * np.log(len(log_likelihood)))

    def aic(self, X):
        """Akaike information criterion of the fitted model on ``X``; lower is better.

        ``-2 * log L + 2 * n_parameters``, with ``log L`` and ``n_parameters`` as in :meth:`bic`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        aic : float
        """
        return float(-2 * self.log_marginal_likelihood(X).sum() + 2 * self._n_parameters())


def linear_gaussian_parameter_count(n_features, n_components, n_noise):
    """Free parameters of ``x = W z + mu + eps`` with ``n_noise`` noise variances.

    ``W`` has ``D K`` entries less the ``K (K - 1) / 2`` of a rotation of ``z`` (which leaves
    the likelihood unchanged), ``mu`` has ``D``.
    """
    return n_features * n_components - n_components * (n_components - 1) // 2 + n_features + n_noise


# ====================================================================== the base estimator
def _log_jacobian(X, scale, observed=None):
    # Every log-density in D dimensions shifts by -D log(scale) when mapped back (of the
    # observed entries: by -|o| log(scale), on average over the samples).
    dimension = X.shape[1] if observed is None else float(observed.sum(-1).double().mean())
    return -dimension * float(scale.log())


def _fill_missing(X, observed):
    """``X`` with its unobserved entries at zero (the centre of standardised data)."""
    return X if observed is None else torch.where(observed, X, torch.zeros_like(X))


def _step_size(trainer, X, groups):
    """About the numbers one training step handles: rows times masks times features, or from
    moments, masks times features squared (what :func:`~skmpt.estimators._trainer.fit_threads` sizes)."""
    n_features = X.shape[1]
    if groups is not None:
        return len(groups) * trainer.n_masks * trainer.moment_masks_per_step * n_features**2
    return trainer.resolved_batch_size(X.shape[0]) * trainer.n_masks * n_features


def _merge_groups(groups, new):
    """The moment groups of two sets of samples: the moments of a pattern in both are added,
    and every group's share is its weight over the new total."""
    merged = {None if g.observed is None else tuple(g.observed.tolist()): g for g in groups}
    for group in new:
        key = None if group.observed is None else tuple(group.observed.tolist())
        old = merged.get(key)
        merged[key] = group if old is None else MomentGroup(old.moments + group.moments, group.observed)
    total = sum(float(g.moments.weight) for g in merged.values())
    return [MomentGroup(g.moments, g.observed, float(g.moments.weight) / total) for g in merged.values()]


def _moment_stream_step(trainer, module, X, observed, weights, state, generator, first):
    """One ``partial_fit`` call from moments: the chunk's moments added to those of the chunks
    before it, then training on all of them until the stopping rule is met (so the model after
    the last call is the model ``fit`` would train on every chunk). Returns the last step's
    objective, the stopping objective and the last step size."""
    if not first:
        state.groups = _merge_groups(state.groups, moment_groups(X, observed, weights))
    if first and state.groups[0].observed is None:  # near the optimum already: smaller first steps
        trainer.first_step_factor = trainer.near_start_factor
    history, trainer.history = trainer.history, []
    trainer.fit_moments(module, state.groups, generator, 0.0)
    last, trainer.history = trainer.history[-1], history
    return last["objective"], last["stopping_objective"], last["learning_rate"]


class _BaseMaskedEstimator(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator, metaclass=abc.ABCMeta):
    """Base for estimators trained by masked pre-training and scored by its cumulative sum.

    Everything a fitted estimator computes comes from its fitted ``module_`` and ``params_``
    (the parameters of the last ``fit``), never from a parameter as it is now.
    """

    _parameter_constraints: dict = {
        "mask_rate": [Options({"uniform"}), Interval(Real, 0, 1, closed="right")],
        "n_masks": [Interval(Integral, 1, None, closed="left")],
        "score_masks": [Interval(Integral, 1, None, closed="left")],
        "score_method": [Options(objectives.SCORE_METHODS)],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Options({"auto"}), Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "monitor": [None, Options({"lml"})],
        "monitor_every": [Interval(Integral, 1, None, closed="left")],
        "dtype": [Options({"float64", "float32"})],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # ------------------------------------------------------------------ hooks
    @abc.abstractmethod
    def _build_module(self, X, generator, units):
        """The untrained :class:`skmpt.models.MaskedModel` for (standardised) training data ``X``.

        ``X`` is ``(x - center) / scale`` with ``units = (center, scale)`` (for a start given in
        the data's units, e.g. factor analysis' ``noise_variance_init``). Called during ``fit``:
        it reads the parameters from ``params_``."""

    def _set_fitted_attributes(self):
        """Copy learned parameters out of ``module_`` into NumPy attributes; none by default."""

    def _objective_name(self):
        """Key of :data:`skmpt.objectives.OBJECTIVES` that training maximises."""
        return "mpt"

    def _objective_kwargs(self):
        """Keyword arguments of the training objective (e.g. IWAE's number of particles)."""
        return {}

    def _resolve_n_components(self, X, sample_weight, moments):
        """The latent dimension to fit on (standardised) training data ``X`` with its training
        weights (a tensor of mean one, or None), or, when ``X`` is None, on the data whose
        :class:`~skmpt.objectives.Moments` are ``moments``: ``n_components`` by default; an
        estimator with a data-driven choice (PPCA's ``"mle"``) overrides it."""
        return self.params_["n_components"]

    def _trains_from_moments(self):
        """Whether training on complete rows runs from their moments alone (a
        Gaussian model with masks shared by the samples): then the standardised data are never
        formed."""
        return False

    def _training_data(self, X, observed, weights):
        """``(X_train, groups, units)``: the standardised training data ``(X - center) / scale`` (missing
        entries at zero) and ``units = (center, scale)``; or, for complete data that train from their
        moments, ``X_train`` None and the one moment group of the standardised data, the units from
        the moments (no pass over the data beyond theirs)."""
        if observed is None and self._likelihood() == "gaussian" and self._trains_from_moments():
            moments = objectives.Moments.from_samples(X, weights)
            standardized = moment_standardization(moments)
            if standardized is not None:
                units, moments = standardized
                return None, [MomentGroup(moments)], units
        center, scale = standardization(X, self._likelihood(), observed)
        return _fill_missing((X - center) / scale, observed), None, (center, scale)

    def _check_data(self, X):
        """Data-dependent checks on the validated training array; subclasses extend them."""
        if self.params_["score_method"] == "exhaustive" and X.shape[1] > MAX_EXHAUSTIVE_FEATURES:
            raise ValueError(
                f"score_method='exhaustive' enumerates 2**D - 1 masks, allowed for at most "
                f"{MAX_EXHAUSTIVE_FEATURES} features; X has {X.shape[1]}. Use score_method='sweep', "
                f"'nested' or 'chain'."
            )

    def _likelihood(self):
        """``"gaussian"`` (data standardised for training) or ``"bernoulli"`` (binary data)."""
        return "gaussian"

    def _log_marginal_kwargs(self):
        """Keyword arguments of the module's ``log_marginal`` (e.g. a number of samples)."""
        return {}

    def _binarize_threshold(self):
        """Values above it become 1 and the others 0 before a Bernoulli model sees them; None: none."""
        return None

    def _get_parameters(self):
        """The learned parameters (a copy of ``module_``'s state), for :meth:`_set_parameters`:
        ``n_init`` keeps the best of its starts with them, as scikit-learn's ``BaseMixture``."""
        return copy.deepcopy(self.module_.state_dict())

    def _training_groups(self, X, observed, weights):
        """``(groups, part)``: the training samples as moment groups when this estimator trains from
        moments (a Gaussian model with masks shared by the samples), and a
        :class:`~skmpt.estimators._trainer.RowPart` of those trained by mini-batches beside them (None:
        none); ``(None, None)``: mini-batches of rows."""
        return None, None

    def _streams_from_moments(self, n_samples):
        """Whether ``partial_fit`` trains from moments, given a first chunk of ``n_samples`` rows
        whose patterns of observed entries all go through moments."""
        return False

    def _moment_start(self, groups):
        """A start computed from the moment ``groups`` (e.g. PCA's solution), or None: :meth:`_build_module`'s."""
        return None

    def _set_parameters(self, params):
        """Load parameters from :meth:`_get_parameters` into ``module_`` and the fitted attributes."""
        self.module_.load_state_dict(params)
        self._set_fitted_attributes()

    # ------------------------------------------------------------------ data
    @property
    def _dtype(self):
        """The torch dtype of the fitted module, or the one ``dtype`` asks for before fit."""
        module = getattr(self, "module_", None)
        return DTYPES[self.params_["dtype"]] if module is None else next(module.parameters()).dtype

    def _offset(self, center, dtype):
        """What is subtracted from the data, in float64, before they are cast to ``dtype``.

        Nothing in float64. In a lower precision a Gaussian model works on data centred in
        float64 first: float32 holds about 7 significant digits, so the raw values of data
        with an offset of 1e6 would lose their spread before any centring in float32 could
        keep it. Binary data are never shifted.
        """
        if dtype == torch.float64 or self._likelihood() != "gaussian":
            return np.zeros_like(center)
        return np.asarray(center, dtype=np.float64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN marks an entry that was not observed
        return tags

    def _to_tensor(self, X, *, reset):
        """Validated ``X`` as a tensor, and its ``observed`` entries (None when all are).

        NaN marks an entry that was not observed; it becomes 0 in the tensor (models ignore
        it there) and ``False`` in ``observed``. ``inf`` is an error.
        """
        # Fitting needs two samples to have any spread; scoring works sample by sample.
        X = validate_data(
            self, X, reset=reset, dtype=[np.float64, np.float32], ensure_min_samples=2 if reset else 1,
            ensure_all_finite="allow-nan",
        )
        dtype = DTYPES[self.params_["dtype"]] if reset else self._dtype
        X = np.asarray(X, dtype=np.float64)
        # One pass for the column sums: finite sums mean no NaN (which would propagate), so the
        # entry-by-entry search for missing entries runs only on data that may have some.
        sums = X.sum(0)
        missing = None if np.isfinite(sums).all() else check_missing(X, reset=reset)
        if reset:
            self.offset_ = self._offset(sums / len(X) if missing is None else np.nanmean(X, 0), dtype)
        if missing is None and not self.offset_.any():
            # Read, never written: the caller's array is wrapped (copied only when read-only, which
            # torch cannot wrap without warning, or when the dtype or device differ).
            X_t = torch.from_numpy(X) if X.flags.writeable else torch.tensor(X)
            X_t = X_t.to(dtype=dtype, device=self.device_)
        else:
            X = X - self.offset_  # a copy, writable: torch wraps it without warning
            if missing is not None:
                X[missing] = 0.0
            X_t = torch.from_numpy(X).to(dtype=dtype, device=self.device_)
        threshold = self._binarize_threshold()
        if threshold is not None:
            X_t = (X_t > threshold).to(dtype)  # BernoulliNB's rule: above the threshold is 1
        check_values(X_t, self._likelihood())
        observed = None if missing is None else torch.as_tensor(~missing, device=self.device_)
        return X_t, observed

    def _validate_training_data(self, X, *, reset, sample_weight=None):
        """Validated training tensor, its observed entries (None when all are) and weights: the
        rows of positive ``sample_weight``, and their weights scaled to mean one (None without
        ``sample_weight``)."""
        if reset:
            self.device_ = resolve_device(self.params_["device"])
        X_t, observed = self._to_tensor(X, reset=reset)
        X_t, observed, weights = training_rows(X_t, observed, sample_weight, min_samples=2 if reset else 1)
        if reset and observed is not None:
            never = torch.nonzero(~observed.any(0)).flatten().tolist()
            if never:
                raise ValueError(
                    f"Feature(s) {never[:10]} are observed only in samples of zero sample_weight: a model "
                    f"cannot be fitted to a feature it never observes. Drop the column(s) or weight those samples."
                )
        if reset:
            self._check_data(X_t)
        return X_t, observed, weights

    def _set_params_(self):
        """Validate the parameters and copy them into ``params_``: what this fit, and every method
        of the fitted estimator until the next fit, reads."""
        params = self.get_params(deep=False)
        validate_parameters(params, self._parameter_constraints, type(self).__name__)
        self.params_ = params

    def _map_back(self, center, scale):
        """Map ``module_`` fitted on ``(x - center) / scale`` to the units of ``x``."""
        if self._likelihood() == "gaussian":
            with torch.no_grad():
                self.module_.unstandardize_(center, scale)

    def _start_module(self, X, generator, units, previous):
        """``_build_module``'s module, or, for a warm start, the ``previous`` fit ``(module, offset)``
        mapped to the training units ``(x - center) / scale``."""
        if previous is None:
            return self._build_module(X, generator, units)
        module, offset = previous
        module = copy.deepcopy(module).to(device=X.device, dtype=X.dtype)
        center, scale = units
        shift = center + X.new_tensor(self.offset_ - offset)
        with torch.no_grad():
            return module.unstandardize_(-shift / scale, 1 / scale)

    # ------------------------------------------------------------------ training
    def _trainer(self):
        params = self.params_

        def objective(X, masks, observed=None):
            masks = () if masks is None else (masks,)
            return objectives.OBJECTIVES[self._objective_name()](self.module_, X, *masks, observed=observed,
                                                                 **self._objective_kwargs())

        def draw_masks(shape, n_features, generator, device, observed=None):
            if observed is not None:  # among each sample's observed entries
                return observed_masks(params["mask_rate"], shape, observed, random_state=generator, device=device)
            return sample_masks(params["mask_rate"], shape, n_features, random_state=generator, device=device)

        def monitor(X, observed=None):
            return self.module_.log_marginal(X, **self._log_marginal_kwargs(), observed=observed)

        def moment_objective(moments, masks, observed=None):
            return objectives.moment_mpt_objective(self.module_, moments, masks, observed=observed)

        def moment_monitor(moments, observed=None):
            return self.module_.moment_log_marginal(moments.mean, moments.covariance, observed=observed)

        return Trainer(
            objective,
            draw_masks if self._objective_name() == "mpt" else None,
            params["n_masks"],
            params["learning_rate"],
            batch_size=params["batch_size"],
            max_epochs=params["max_epochs"],
            tol=params["tol"],
            n_iter_no_change=params["n_iter_no_change"],
            monitor=monitor if params["monitor"] == "lml" else None,
            monitor_every=params["monitor_every"],
            verbose=params["verbose"],
            moment_objective=moment_objective,
            moment_monitor=moment_monitor if params["monitor"] == "lml" else None,
        )

    def fit(self, X, y=None, sample_weight=None):
        """Fit the model by maximising its training objective with Adam until it converges.

        NaN marks an entry that was not observed: training then masks among each sample's
        observed entries (mask sizes uniform on ``1..|o|``, or ``mask_rate`` of ``|o|``) and
        weighs a mask by ``|o| / |m|``, an unbiased estimate of ``log p(x_o)``, the likelihood
        to maximise when the data are missing at random. The model is initialised from the
        data with their missing entries at the feature means.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data; NaN for an entry that was not observed.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights: sample ``i`` counts ``sample_weight[i]`` times, so integer
            weights aim at the optimum of the data with rows repeated (each mini-batch step
            weights a sample's objective by its weight over the mean weight). Rows of zero
            weight are left out, initialisation included: a feature observed only in them is
            an error that names it. Only relative weights matter (they are rescaled to a largest
            of one, so a sum beyond float64 is fine). None: equal weights.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._fit(X, sample_weight, random_state=self.random_state)
        return self

    def _fit(self, X, sample_weight, *, random_state, previous=None):
        """One training run from ``random_state``'s start, or from the ``previous`` fit's
        ``(module, offset)`` (a warm start); warns when it stops on its budget."""
        with training_mode(self.verbose):
            self._set_params_()
            X_t, observed, weights = self._validate_training_data(X, reset=True, sample_weight=sample_weight)
            generator = check_generator(random_state)
            seed = int(torch.randint(2**62, (1,), generator=generator))
            X_train, groups, (center, scale) = self._training_data(X_t, observed, weights)
            trainer = self._trainer()
            trainer.sample_weight = weights
            with seeded(seed, self.device_):
                moments = None if X_train is not None else groups[0].moments
                self.n_components_ = self._resolve_n_components(X_train, weights, moments)
                part = None
                if X_train is not None:
                    groups, part = self._training_groups(X_train, observed, weights)
                start = None if groups is None or previous is not None else self._moment_start(groups)
                if start is None:  # from moments alone, their mean stands for the data's width, dtype and device
                    data = X_train if X_train is not None else moments.mean[None]
                    self.module_ = self._start_module(data, generator, (center, scale), previous)
                else:  # near the optimum already: smaller first steps
                    self.module_, trainer.first_step_factor = start, trainer.near_start_factor
                log_jacobian = _log_jacobian(X_t, scale, observed)
                with intra_op_threads(fit_threads(_step_size(trainer, X_t, groups))):
                    if groups is None:
                        self.n_iter_, self.converged_ = trainer.fit(
                            self.module_, X_train, generator, log_jacobian, observed
                        )
                    else:
                        self.n_iter_, self.converged_ = trainer.fit_moments(
                            self.module_, groups, generator, log_jacobian, part
                        )
            self.history_ = trainer.history
            self._map_back(center, scale)
            self._set_fitted_attributes()
            self.__dict__.pop("_partial_fit_state", None)
        if trainer.downhill is not None:
            start, end, kept = trainer.downhill
            warnings.warn(
                f"{type(self).__name__}'s training ended below where it started (stopping objective "
                f"{end:.6g} against {start:.6g} nats per sample at the start), so it has not converged; the "
                f"parameters are those of epoch {kept} (0 is the start). Lower learning_rate "
                f"(now {self.params_['learning_rate']}) or try another random_state.",
                ConvergenceWarning,
                stacklevel=3,
            )
        elif not self.converged_:
            warnings.warn(
                f"{type(self).__name__} stopped after max_epochs={self.params_['max_epochs']} epochs while the "
                f"objective was still improving by more than tol={self.params_['tol']}; raise max_epochs.",
                ConvergenceWarning,
                stacklevel=3,
            )

    def partial_fit(self, X, y=None, sample_weight=None):
        """One more pass of the optimiser over a chunk of data, for data that do not fit in memory.

        The first call (or the first after ``fit``) starts Adam; each call is one pass over
        ``X`` in mini-batches of ``batch_size``, continuing the optimiser's state and ``fit``'s
        step-size schedule: the stopping objective is computed after every call on samples and
        masks fixed at the first one, and the step size is halved after ``n_iter_no_change``
        calls without progress, so streaming converges as ``fit`` does. A ``learning_rate``
        changed with ``set_params`` between calls restarts the schedule from it; ``dtype``
        cannot change between calls. Gaussian models train in the units of the first chunk
        (its centre and overall scale), so the first chunk should be representative: a chunk
        with a constant feature, or one whose spread differs a hundredfold from the first's,
        is warned about. ``module_`` is mapped back to the units of ``X`` after every call.
        Each call is a fit: it copies the parameters into ``params_``, as ``fit`` does. An
        estimator that trains from moments (``solver="moments"``, or ``"auto"`` with a first
        chunk of 1,000 rows or more) instead adds each chunk's moments to those of the chunks
        before it and trains on all of them until the stopping rule is met: one pass suffices.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A chunk of training data.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the chunk's samples, as in :meth:`fit` (scaled to mean
            one within the chunk: they weigh samples against each other, not chunks).

        Returns
        -------
        self : object
            The updated estimator.
        """
        first = not hasattr(self, "module_")
        state = getattr(self, "_partial_fit_state", None)
        # A data-driven n_components ("mle", a variance fraction) was resolved by the first call.
        if state is not None and isinstance(self.n_components, Integral) and self.n_components != self.n_components_:
            raise ValueError(
                f"n_components={self.n_components} was set after partial_fit started with "
                f"{self.n_components_}; a model cannot change its latent dimension between calls. "
                f"Refit, or set n_components back."
            )
        if state is not None and DTYPES[self.dtype] != state.dtype:
            raise ValueError(
                f"dtype={self.dtype!r} was set after partial_fit started in {dtype_name(state.dtype)}; a "
                f"model cannot change precision between calls. Refit, or set dtype back."
            )
        with training_mode(self.verbose):
            self._set_params_()
            X_t, observed, weights = self._validate_training_data(X, reset=first, sample_weight=sample_weight)
            if state is None:
                seed = int(torch.randint(2**62, (1,), generator=check_generator(self.params_["random_state"])))
                center, scale = standardization(X_t, self._likelihood(), observed)
                state = StreamState(center, scale, seed, X_t.dtype)
                self.history_, self.n_iter_ = [], 0
            if observed is not None:  # missing entries at the centre of the training units
                X_t = torch.where(observed, X_t, state.center)
            if self._likelihood() == "gaussian":  # binary data are not rescaled: no units to set
                check_chunk_units(X_t, state.center, state.scale, first=state.calls == 0)
            X_train = (X_t - state.center) / state.scale
            trainer = self._trainer()
            trainer.history, trainer.sample_weight = self.history_, weights
            # A generator per call, from the first call's seed: the run is reproducible.
            generator = torch.Generator().manual_seed(state.seed + state.calls)
            with seeded(state.seed + state.calls, self.device_):
                if first:
                    self.n_components_ = self._resolve_n_components(X_train, weights, None)
                    groups, part = self._training_groups(X_train, observed, weights)
                    state.groups = groups if part is None and self._streams_from_moments(len(X_train)) else None
                    start = None if state.groups is None else self._moment_start(state.groups)
                    self.module_ = self._build_module(X_train, generator, (state.center, state.scale)) \
                        if start is None else start
                else:
                    self._map_back(-state.center / state.scale, 1 / state.scale)  # to the training units
                start = time.perf_counter()
                if state.groups is None:
                    objective, progress = trainer.stream_step(self.module_, X_train, state, generator, observed)
                    learning_rate = state.optimizer["learning_rate"]
                else:
                    objective, progress, learning_rate = _moment_stream_step(
                        trainer, self.module_, X_train, observed, weights, state, generator, first
                    )
            self._map_back(state.center, state.scale)
            self._partial_fit_state = state
            self.n_iter_ += 1
            self.__dict__.pop("converged_", None)
            log_jacobian = _log_jacobian(X_train, state.scale, observed)
            record = {"epoch": self.n_iter_, "objective": objective + log_jacobian}
            record["stopping_objective"] = progress + log_jacobian
            record["learning_rate"] = learning_rate
            trainer.record(record, start)
            self._set_fitted_attributes()
        return self

    # ------------------------------------------------------------------ scoring
    def _evaluate(self, X, function):
        """``function(module_, X, observed)`` on validated ``X``, without gradients, as a NumPy array.

        ``observed`` is None when nothing is missing. Scoring never changes the estimator or
        its module (randomness comes in through generators made per call), so it is safe from
        several threads at once.
        """
        check_is_fitted(self)
        X_t, observed = self._to_tensor(X, reset=False)
        with torch.no_grad():
            return function(self.module_, X_t, observed).cpu().numpy()

    def _score_kwargs(self):
        # A fresh generator per call: with an int random_state every call scores with the
        # same masks (and a stochastic model with the same noise), so scores are reproducible
        # and comparable across estimators.
        params = self.params_
        return {"score_method": params["score_method"], "score_masks": params["score_masks"],
                "random_state": params["random_state"]}

    def _noise_generator(self):
        """A fresh generator from ``random_state`` for a stochastic module's noise, else None."""
        return check_generator(self.params_["random_state"]) if self.module_.stochastic else None

    def score_samples(self, X):
        """Cumulative MPT estimate of each sample's log-marginal likelihood, ``sum_M S(x; M)``.

        Exact with ``score_method="exhaustive"`` (every mask); otherwise an estimate from
        ``score_masks`` masks of every size, or orderings, by ``score_method``. It does not
        depend on the ``mask_rate`` used in training.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            In nats.
        """
        return self._evaluate(
            X, lambda module, X_t, observed: objectives.cumulative_score(
                module, X_t, observed=observed, **self._score_kwargs()
            )
        )

    def score(self, X, y=None, sample_weight=None):
        """Mean cumulative MPT estimate of the log-marginal likelihood (see ``score_samples``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights: the score is the weighted mean. None: the plain mean.

        Returns
        -------
        score : float
            Nats per sample.
        """
        return weighted_mean(self.score_samples(X), sample_weight)

    def mpt_curve(self, X):
        """The MPT curve ``S(x; M)`` at every mask rate ``M / D``, per sample.

        Computed by the same method and masks as ``score_samples``; each row sums to the
        sample's score.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        mask_rates : ndarray of shape (n_features,)
            ``M / D`` for ``M = 1..D``.
        curve : ndarray of shape (n_samples, n_features)
            ``curve[:, M - 1]`` is ``S(x; M)`` in nats.
        """
        curve = self._evaluate(
            X,
            lambda module, X_t, observed: objectives.mpt_curve(
                module, X_t, observed=observed, **self._score_kwargs()
            ),
        )
        n_features = self.n_features_in_
        return np.arange(1, n_features + 1) / n_features, curve

    def fixed_rate_bias(self, X, mask_rate, *, score_masks="all"):
        """Bias of the fixed-rate MPT estimate, ``D * S(x; M) - log p(x)``, per sample.

        This is what training with ``mask_rate`` converges to, minus the log-marginal
        likelihood. Exact with ``score_masks="all"`` (every mask of size
        ``M = round(mask_rate * D)``); otherwise a Monte Carlo estimate over ``score_masks``
        random masks.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        mask_rate : float in (0, 1]
        score_masks : "all" or int, default="all"

        Returns
        -------
        bias : ndarray of shape (n_samples,)
            In nats. Positive where ``S(x; M)`` at this rate lies above the curve's mean,
            as at low rates (more context, better predictions): a fixed low rate overstates
            the log-marginal likelihood.
        """

        def bias(module, X_t, observed):
            if observed is not None:
                raise ValueError(
                    "fixed_rate_bias compares D * S(x; M) with log p(x) on complete rows; X has missing "
                    "(NaN) entries. Pass complete rows."
                )
            return objectives.fixed_rate_bias(
                module, X_t, mask_rate, score_masks=score_masks, random_state=self.params_["random_state"]
            )

        return self._evaluate(X, bias)

    def conditional_log_prob(self, X, masks):
        """The masked conditionals ``log p(x_j | x_r)`` themselves, per token.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        masks : array-like of bool of shape (n_masks, n_features) or \
                (n_samples, n_masks, n_features)
            ``True`` marks a masked token (one to predict from the unmasked ones). Masks of
            shape (n_masks, n_features) are shared by all samples.

        Returns
        -------
        log_prob : ndarray of shape (n_samples, n_masks, n_features)
            ``log p(x_j | x_r)`` at masked positions, zero at unmasked ones.
        """
        check_is_fitted(self)
        masks = check_mask_array(masks, self.n_features_in_)

        def conditionals(module, X_t, observed):
            if masks.ndim == 3 and masks.shape[0] != X_t.shape[0]:
                raise ValueError(f"masks hold {masks.shape[0]} samples' masks, but X has {X_t.shape[0]} samples.")
            mask_t = torch.as_tensor(masks, device=X_t.device)
            return module.masked_log_prob(X_t, mask_t, generator=self._noise_generator(), observed=observed)

        return self._evaluate(X, conditionals)

    def log_marginal_likelihood(self, X):
        """The model's own log-marginal likelihood of each sample, ``log p(x)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_marginal : ndarray of shape (n_samples,)
        """
        return self._log_marginal_likelihood(X, self._log_marginal_kwargs())

    def _log_marginal_likelihood(self, X, options):
        """``log p(x)`` per sample, the model's ``log_marginal`` called with ``options``."""
        return self._evaluate(
            X,
            lambda module, X_t, observed: objectives.log_marginal(
                module, X_t, generator=self._noise_generator(), observed=observed, **options
            ),
        )

    def transform(self, X):
        """Posterior mean of the latent variables given each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
        """
        return self._evaluate(
            X,
            lambda module, X_t, observed: module.posterior(X_t, observed=observed)[0],
        )

    def inverse_transform(self, Z):
        """Mean of ``x`` given latent values (probabilities for a Bernoulli likelihood).

        Parameters
        ----------
        Z : array-like of shape (n_samples, n_components)

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        Z = check_array(Z, dtype=np.float64)
        if Z.shape[1] != self.n_components_:
            raise ValueError(
                f"Z must have shape (n_samples, {self.n_components_}) (the fitted n_components_); got {Z.shape}."
            )
        with torch.no_grad():
            # torch.tensor copies: Z may be a read-only view of a pandas frame.
            mean = self.module_.decode(torch.tensor(Z, dtype=self._dtype, device=self.device_)).cpu().numpy()
        return mean + self.offset_

    @property
    def _n_features_out(self):
        # The fitted dimension: set_params(n_components=...) does not change a fitted model.
        return self.n_components_

    # ------------------------------------------------------------------ imputation
    def _with_missing(self, X, function):
        """``function(module_, X_t, observed)`` for validated ``X`` with NaN, in ``X``'s units;
        the observed entries are put back from ``X`` itself, bit for bit."""
        check_is_fitted(self)
        X_t, observed = self._to_tensor(X, reset=False)
        X_array = np.asarray(validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite="allow-nan"))
        if observed is None:
            observed = torch.ones(X_t.shape, dtype=torch.bool, device=X_t.device)
        with torch.no_grad():
            values = function(self.module_, X_t, observed).cpu().numpy() + self.offset_
        return np.where(np.isnan(X_array), values, X_array)

    def impute(self, X):
        """The conditional mean of each sample's missing (NaN) entries given its observed ones.

        ``E[x_mis | x_obs]`` under the fitted model, exactly for the linear-Gaussian models,
        the mixtures and the linear VAE (its grid); :class:`~skmpt.MaskedVAE` estimates it by
        self-normalised importance sampling over its encoder's posterior, with 1000 particles
        (MIWAE; Mattei and Frellsen, 2019), reproducibly from ``random_state``. The observed
        entries are returned untouched, bit for bit; a row with nothing observed gets the
        model's mean. Appropriate when the data are missing at random.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN marks a missing entry.

        Returns
        -------
        X_imputed : ndarray of shape (n_samples, n_features)
        """
        return self._with_missing(
            X,
            lambda module, X_t, observed: module.impute(X_t, observed, generator=self._noise_generator()),
        )

    def sample_missing(self, X, n_draws=1, random_state=None):
        """Draws of each sample's missing entries from ``p(x_mis | x_obs)``, for multiple imputation.

        Exact draws for the linear-Gaussian models, the mixtures and the linear VAE;
        :class:`~skmpt.MaskedVAE` draws by sampling importance resampling of its MIWAE
        particles.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN marks a missing entry.
        n_draws : int, default=1
            Completed copies of ``X`` to draw.
        random_state : int, RandomState instance or None, default=None
            The draws' randomness (``None``: fresh draws on every call).

        Returns
        -------
        X_draws : ndarray of shape (n_draws, n_samples, n_features)
            ``X_draws[i]`` is ``X`` with its missing entries drawn; the observed entries are
            ``X``'s own, bit for bit.
        """
        n_draws = check_positive_int(n_draws, "n_draws")
        generator = check_generator(random_state)
        return self._with_missing(
            X,
            lambda module, X_t, observed: module.sample_missing(X_t, observed, n_draws, generator=generator),
        )

    # ------------------------------------------------------------------ conversion
    @classmethod
    def _from_fitted(cls, source, source_class, params, build_module, center):
        """A fitted ``cls`` holding the parameters of a fitted scikit-learn ``source``.

        ``params`` go to ``cls``'s constructor and are validated as in ``fit``;
        ``build_module(dtype, device, offset)`` returns ``(n_components, module)`` from
        ``source``'s fitted attributes, its means less ``offset`` (computed in float64; see
        ``_offset``: ``center(source)`` is the data's centre as the source knows it). The result has no
        training history (``history_ == []``, ``n_iter_ == 0``); shared by the
        ``from_estimator`` class methods.
        """
        if not isinstance(source, source_class):
            raise TypeError(
                f"{cls.__name__}.from_estimator takes a fitted {source_class.__name__}; got {type(source).__name__}."
            )
        check_is_fitted(source)
        if "n_components" in params:
            raise ValueError(f"n_components is taken from the {source_class.__name__}; do not pass it.")
        estimator = cls(**params)
        estimator._set_params_()
        estimator.device_ = resolve_device(estimator.params_["device"])
        estimator.offset_ = estimator._offset(np.asarray(center(source), dtype=np.float64), estimator._dtype)
        with torch.no_grad():
            n_components, module = build_module(estimator._dtype, estimator.device_, estimator.offset_)
        estimator.set_params(n_components=n_components)
        estimator._set_params_()
        estimator.n_components_ = n_components
        estimator.n_features_in_ = source.n_features_in_
        if hasattr(source, "feature_names_in_"):
            estimator.feature_names_in_ = source.feature_names_in_
        estimator.module_ = module
        estimator.history_, estimator.n_iter_ = [], 0
        estimator._set_fitted_attributes()
        return estimator

    # ------------------------------------------------------------------ persistence
    def __getstate__(self):
        # A copy: on Python >= 3.11 the parent may hand back the live __dict__.
        state = dict(super().__getstate__())
        module = state.get("module_")
        if module is not None and self.device_.type != "cpu":
            # Pickles hold CPU tensors, so they load on machines without a GPU.
            state["module_"] = copy.deepcopy(module).cpu()
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        device = getattr(self, "device_", None)
        if device is not None and device.type == "cuda":
            if torch.cuda.is_available():
                self.module_.to(device)
            else:
                warnings.warn(
                    f"This {type(self).__name__} was fitted on {device}; CUDA is not available here, "
                    f"so it was loaded on the CPU.",
                    UserWarning,
                    stacklevel=2,
                )
                self.device_ = torch.device("cpu")
