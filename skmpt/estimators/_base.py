"""The base of the array estimators: parameters, validated data, the training pipeline, fitted state
and everything computed from a fitted ``module_``.

A concrete estimator declares its parameters and implements ``_build_module`` (its
:class:`skmpt.models.MaskedModel` on the training data); the other hooks have defaults, listed
with them in :class:`_BaseMaskedEstimator`'s docstring. Training is one pipeline of named stages
that ``fit`` and ``partial_fit`` share; what it runs on is the solver object of the ``_solver``
hook (:class:`~skmpt.estimators._trainer.MiniBatchSolver` by default; the linear-Gaussian
estimators may choose ``skmpt.estimators._moments``' solver), and the loop is a
:class:`~skmpt.estimators._trainer.Trainer`.

Fitted state stays fitted: ``fit`` (and ``partial_fit``) copies the validated constructor
parameters into ``params_`` (a :class:`~sklearn.utils.Bunch`: a dict whose keys read as
attributes), and every method of a fitted estimator reads ``params_`` and the fitted ``module_``,
never a parameter as it is now; ``set_params`` after ``fit`` acts at the next ``fit``, as in
scikit-learn. The options of the score (``score_method``, ``score_masks``, ``random_state``)
follow the same rule.
"""

import abc
import copy
import time
import warnings
from functools import partial
from itertools import repeat
from numbers import Integral, Real

import numpy as np
import sklearn
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import Bunch
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .. import objectives
from .._utils import DTYPES, check_generator, resolve_device, seeded
from .._validation import Interval, Options, check_positive_int, validate_parameters
from ..masks import MAX_EXHAUSTIVE_FEATURES
from ._dask import (
    as_dask_array,
    check_collection,
    collection_weights,
    dask_mean,
    is_dask_collection,
    iter_blocks,
    map_rows,
    merge_summaries,
    reduce_chunks,
    summarize_chunk,
)
from ._data import (
    array_api_input,
    as_torch,
    check_chunk_units,
    check_mask_array,
    check_missing,
    check_observed_features,
    check_values,
    counted_samples,
    dtype_name,
    log_jacobian,
    namespace_and_device,
    standardization,
    tensor_output,
    to_namespace,
    to_numpy,
    training_rows,
    weighted_mean,
)
from ._moments import MomentSolver
from .tables import is_table
from ._trainer import (
    MiniBatchSolver,
    StreamState,
    Trainer,
    TrainingObjective,
    fit_threads,
    intra_op_threads,
    training_mode,
)

__all__ = ["linear_gaussian_parameter_count"]

# Each further round of ``_train_to_optimum`` draws this many times the masks of the round before
# it, up to _MAX_NOISE_CUT times ``n_masks``; all the rounds of a fit cost at most _MAX_COST times
# ``max_epochs`` epochs of the fit's own size (chosen on the README demo and the tests' data).
_NOISE_CUT = 2
_MAX_NOISE_CUT = 64
_MAX_COST = 2


def _same(a, b):
    """Whether two parameter values are equal: arrays element by element, lists and tuples item by item."""
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return a is not None and b is not None and np.array_equal(a, b)
    return bool(a == b)


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
class _BaseMaskedEstimator(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator, metaclass=abc.ABCMeta):
    """Base for estimators trained by masked pre-training and scored by its cumulative sum.

    Everything a fitted estimator computes comes from its fitted ``module_`` and ``params_``
    (the parameters of the last ``fit``), never from a parameter as it is now.

    The hooks a subclass may override, each defined below with its default (``_build_module`` is
    the one it must give):

    ========================================  ====================================================
    hook                                      default
    ========================================  ====================================================
    ``_build_module(X, generator, units)``    required: the untrained module
    ``_set_fitted_attributes()``              none: no attributes beyond ``module_``
    ``_check_data(X)``                        refuses ``score_method="exhaustive"`` beyond its limit
    ``_likelihood()``                         ``"gaussian"`` (data standardised for training)
    ``_binarize_threshold()``                 None: no binarisation
    ``_objective()``                          ``("mpt", {})``: a key of :data:`skmpt.objectives.OBJECTIVES`, options
    ``_log_marginal_kwargs()``                ``{}``
    ``_resolve_n_components(X, w, m, n)``     ``params_.n_components``
    ``_solver()``                             ``MiniBatchSolver()``: mini-batches of rows
    ========================================  ====================================================

    The pipeline (``fit`` and ``partial_fit``): :meth:`_set_params_` and
    :meth:`_validate_training_data`, then the solver of :meth:`_solver` prepares the data, the
    start comes from :meth:`_initialize`, the trainer from :meth:`_trainer` (its masks from
    ``params_.mask_rate``), the solver trains, and :meth:`_finish` maps the module back to the
    data's units.
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

    def _check_data(self, X):
        """Data-dependent checks on the validated training array; subclasses extend them."""
        if self.params_.score_method == "exhaustive" and X.shape[1] > MAX_EXHAUSTIVE_FEATURES:
            raise ValueError(
                f"score_method='exhaustive' enumerates 2**D - 1 masks, allowed for at most "
                f"{MAX_EXHAUSTIVE_FEATURES} features; X has {X.shape[1]}. Use score_method='sweep', "
                f"'nested' or 'chain'."
            )

    def _likelihood(self):
        """``"gaussian"`` (data standardised for training) or ``"bernoulli"`` (binary data)."""
        return "gaussian"

    def _binarize_threshold(self):
        """Values above it become 1 and the others 0 before a Bernoulli model sees them; None: none."""
        return None

    def _objective(self):
        """``(name, options)``: the key of :data:`skmpt.objectives.OBJECTIVES` that training maximises
        and its keyword arguments (e.g. IWAE's number of particles)."""
        return "mpt", {}

    def _log_marginal_kwargs(self):
        """Keyword arguments of the module's ``log_marginal`` (e.g. a number of samples)."""
        return {}

    def _resolve_n_components(self, X, sample_weight, moments, n_samples):
        """The latent dimension to fit on (standardised) training data ``X`` with its training
        weights (a tensor of mean one, or None), or, when ``X`` is None, on the data whose
        :class:`~skmpt.objectives.Moments` are ``moments``; ``n_samples`` is the number of samples
        they count (the sum of ``sample_weight`` as given, as repeated rows). ``n_components`` by
        default; an estimator with a data-driven choice (PPCA's ``"mle"``) overrides it."""
        return self.params_.n_components

    def _exact_target(self):
        """Whether training aims at the module's exact, deterministic ``log_marginal`` (then the
        judge of whether a run ended below its start); False by default."""
        return False

    def _optimality_gap(self, X, sample_weight):
        """Nats per sample by which the fitted model's exact log-likelihood of ``X`` falls short of
        its optimum, as exact ascent steps from it (EM's) measure it, or None where there are none:
        a fit within ``tol`` of its optimum has converged (whatever the stopping rule said), one
        further from it has not."""
        return None

    def _start_advice(self):
        """What the warnings of an unconverged fit add to their advice: a start nearer the optimum that
        the estimator offers and the fit did not take (``""`` by default)."""
        return ""

    def _climb_to_optimum(self, X, sample_weight):
        """Where the model has an exact ascent of its likelihood from given parameters (EM), run it
        from the fitted parameters, keep the better of the two and return their
        :meth:`_optimality_gap`; None where it has none (by default)."""
        return None

    def _solver(self):
        """What training runs on, chosen here once per fit: mini-batches of rows by default (the
        linear-Gaussian estimators read their ``solver`` parameter)."""
        return MiniBatchSolver()

    # ------------------------------------------------------------------ data
    @property
    def _dtype(self):
        """The torch dtype of the fitted module, or the one ``dtype`` asks for before fit."""
        module = getattr(self, "module_", None)
        return DTYPES[self.params_.dtype] if module is None else next(module.parameters()).dtype

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
        it there) and ``False`` in ``observed``. ``inf`` is an error. A torch tensor is checked
        and converted on its device, never through NumPy.
        """
        dtype = DTYPES[self.params_.dtype] if reset else self._dtype
        rows = self._tensor_rows if array_api_input(X) else self._array_rows
        X_t, missing = rows(X, dtype, reset=reset)
        threshold = self._binarize_threshold()
        if threshold is not None:
            X_t = (X_t > threshold).to(dtype)  # BernoulliNB's rule: above the threshold is 1
        check_values(X_t, self._likelihood())
        observed = None if missing is None else torch.as_tensor(missing, device=self.device_).logical_not()
        return X_t, observed

    def _array_rows(self, X, dtype, *, reset):
        """``(X_t, missing)`` of array-like ``X``: the tensor of ``dtype`` on ``device_`` with missing
        entries at zero, and the missing entries (a NumPy array, None when there are none)."""
        if is_table(X):
            self._check_table_columns(X)
        # Fitting needs two samples to have any spread; scoring works sample by sample.
        X = validate_data(
            self, X, reset=reset, dtype=[np.float64, np.float32], ensure_min_samples=2 if reset else 1,
            ensure_all_finite="allow-nan",
        )
        X = np.asarray(X, dtype=np.float64)
        # One pass for the column sums: finite sums mean no NaN (which would propagate), so the
        # entry-by-entry search for missing entries runs only on data that may have some.
        sums = X.sum(0)
        missing = None if np.isfinite(sums).all() else check_missing(X, reset=reset)
        if reset:
            self.offset_ = self._offset(sums / len(X) if missing is None else np.nanmean(X, 0), dtype)
        offset = to_numpy(self.offset_)
        if missing is None and not offset.any():
            # Read, never written: the caller's array is wrapped (copied only when read-only, which
            # torch cannot wrap without warning, or when the dtype or device differ).
            X_t = torch.from_numpy(X) if X.flags.writeable else torch.tensor(X)
            return X_t.to(dtype=dtype, device=self.device_), None
        X = X - offset  # a copy, writable: torch wraps it without warning
        if missing is not None:
            X[missing] = 0.0
        return torch.from_numpy(X).to(dtype=dtype, device=self.device_), missing

    def _check_table_columns(self, frame):
        """Refuse a DataFrame without columns (scikit-learn's check of an array's features says NumPy's
        "at least one array or dtype is required" of it), or with columns that are not numbers (text,
        categories of text, dates), by name, before NumPy's conversion error, which names a value."""
        import pandas as pd  # a DataFrame came in: pandas is imported already

        if not frame.shape[1]:
            raise ValueError(f"Found array with 0 feature(s) (shape={frame.shape}) while a minimum of 1 is required "
                             f"by {type(self).__name__}.")

        def numeric(dtype):
            if isinstance(dtype, pd.CategoricalDtype):
                return pd.api.types.is_numeric_dtype(dtype.categories.dtype)
            return pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype)

        text = [(name, str(dtype)) for name, dtype in frame.dtypes.items() if not numeric(dtype)]
        if text:
            raise ValueError(
                f"X has column(s) that are not numbers: {text[:10]} (name, dtype). {type(self).__name__} reads a "
                f"table of numbers (a category as its integer code, with categorical_features where it has them); "
                f"MaskedImputer reads a DataFrame's text and category columns as categories (column_types)."
            )

    def _tensor_rows(self, X, dtype, *, reset):
        """:meth:`_array_rows` for a torch tensor (or array-API array) ``X``, computed on ``device_`` (at
        fit with ``device="auto"``, the tensor's own device): the missing entries are a boolean tensor."""
        validate_data(self, X, reset=reset, skip_check_array=True)
        X = as_torch(X)
        minimum = 2 if reset else 1
        if X.ndim != 2 or X.shape[0] < minimum or X.is_complex():
            raise ValueError(
                f"X must be a real 2-D tensor of shape (n_samples, n_features) with at least {minimum} sample(s); "
                f"got shape {tuple(X.shape)} and dtype {X.dtype}."
            )
        X = X.detach().to(device=self.device_, dtype=torch.float64)  # never written: no copy when it is already
        if bool(torch.isinf(X).any()):
            raise ValueError("Input X contains infinity; NaN marks a missing entry, infinity is not allowed.")
        missing = torch.isnan(X)
        missing = missing if bool(missing.any()) else None
        if reset:
            if missing is not None:
                check_observed_features(to_numpy((~missing).sum(0)))
            self.offset_ = self._offset(to_numpy(X.nanmean(0)), dtype)
        offset = to_numpy(self.offset_)
        if offset.any():
            X = X - torch.as_tensor(offset, device=self.device_)
        if missing is not None:
            X = torch.where(missing, 0.0, X)
        return X.to(dtype), missing

    def _validate_training_data(self, X, *, reset, sample_weight=None):
        """Validated training tensor, its observed entries (None when all are) and weights: the
        rows of positive ``sample_weight``, and their weights scaled to mean one (None without
        ``sample_weight``)."""
        if reset:  # a tensor is computed on its own device unless device names one
            on_device = array_api_input(X) and self.params_.device == "auto"
            self.device_ = as_torch(X).device if on_device else resolve_device(self.params_.device)
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

    def _map_back(self, center, scale):
        """Map ``module_`` fitted on ``(x - center) / scale`` to the units of ``x``."""
        if self._likelihood() == "gaussian":
            with torch.no_grad():
                self.module_.unstandardize_(center, scale)

    def _warm_start_source(self, X, shaping, noun=None):
        """The fitted ``(module_, offset_)`` that ``fit`` continues from (``warm_start=True``), or None;
        a ``ValueError``, before the estimator changes, naming the first parameter of ``shaping`` (those
        that shape the module) set otherwise since the fit, or ``X``'s other width. ``noun`` names the
        fitted model in the messages (the class's name by default)."""
        if not (self.warm_start and hasattr(self, "module_")):
            return None
        noun = noun or type(self).__name__
        for name in shaping:
            fitted, now = self.params_[name], getattr(self, name)
            if not _same(fitted, now):
                raise ValueError(
                    f"warm_start=True continues the fitted {noun}, whose {name} is {fitted!r}; {name} is now "
                    f"{now!r}. Refit with warm_start=False."
                )
        n_features = check_array(to_numpy(X), dtype=None, ensure_all_finite=False).shape[1]
        if n_features != self.n_features_in_:
            raise ValueError(
                f"warm_start=True continues the fitted {noun} of {self.n_features_in_} features; X has "
                f"{n_features}. Refit with warm_start=False."
            )
        return self.module_, np.asarray(to_numpy(self.offset_)).copy()

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

    # ------------------------------------------------------------------ training: one pipeline
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
            of one, so a sum beyond float64 is fine). None: equal weights. With a dask collection
            ``X`` (an estimator that trains from moments): a NumPy array or a dask array or Series of
            ``X``'s rows, which weighs each chunk's moments where the chunk is (and the rows of rare
            patterns of missing entries, trained beside the moments, with their weights).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._fit(X, sample_weight, random_state=self.random_state)
        self._fitted_like(X)
        return self

    def _fit(self, X, sample_weight, *, random_state, previous=None, at_optimum=False, gap=None):
        """One training run from ``random_state``'s start, or from the ``previous`` fit's
        ``(module, offset)`` (a warm start); warns when it stops on its budget. ``at_optimum``: the
        ``previous`` start was computed to the optimum (EM's, which MPT with uniform mask sizes aims
        at too), so it has nothing left to learn: no epoch runs, and the check of the optimum
        (:meth:`_train_to_optimum`) judges it, training on only if it fails; ``gap``: what that
        computation's own verdict leaves to gain (EM's stopping rule and saddle probe), which the
        check takes rather than measuring it again (None: the check measures it)."""
        self._fitted_like(None)  # a fit reads and writes NumPy attributes
        sample_weight = to_numpy(sample_weight)  # weights of any namespace are few: NumPy
        with training_mode(self.verbose):
            self._set_params_()
            solver = self._solver()
            if is_dask_collection(X):
                data, choice, jacobian, rows, n_samples = self._chunked_training_data(X, sample_weight, solver)
                weights = data.weights  # of the rows trained beside the moments (None: in the moments)
            else:
                X_t, observed, weights = self._validate_training_data(X, reset=True, sample_weight=sample_weight)
                data = solver.prepare(X_t, observed, weights, self._likelihood())
                choice, jacobian = data.moments, log_jacobian(X_t, data.units[1], observed)
                n_samples = counted_samples(sample_weight, len(X_t))
                # From moments alone, their mean stands for the data's width, dtype and device.
                rows = data.X if data.X is not None else data.groups[0].moments.mean[None]
            generator = check_generator(random_state)
            seed = int(torch.randint(2**62, (1,), generator=generator))
            # Every step of the training from here, its start included, on the threads its step size asks for.
            threads = fit_threads(solver.step_size(self.params_, data.shape, data.groups))
            with seeded(seed, self.device_), intra_op_threads(threads):
                self.n_components_ = self._resolve_n_components(data.X, weights, choice, n_samples)
                self.module_, near_start = self._initialize(solver, data.groups, rows, generator, data.units, previous)
                trainer = self._trainer(weights, near_start)
                if at_optimum:
                    self.n_iter_, self.converged_ = 0, True
                else:
                    self.n_iter_, self.converged_ = solver.fit(trainer, self.module_, data, generator, jacobian)
                self._finish(trainer, data.units)
                trainer, gap = self._train_to_optimum(X, sample_weight, solver, trainer, data, generator, jacobian,
                                                      gap if at_optimum else None)
            self.__dict__.pop("_partial_fit_state", None)
        self._warn_unconverged(trainer, gap)

    def _train_to_optimum(self, X, sample_weight, solver, trainer, data, generator, jacobian, gap=None):
        """Where the optimum can be checked (:meth:`_optimality_gap`), train on until the fit is within
        ``tol`` of it; ``(trainer, gap)``: the trainer of the parameters kept and their gap (None where
        there is no check). ``gap``: the start's, where already measured (:meth:`_fit`).

        The stopping rule ends a run when the stopping objective gains less than ``tol`` in
        ``n_iter_no_change`` epochs, which near the optimum can happen while the fit is still more than
        ``tol`` below it: each step's random masks make the gradient noisy, and Adam, whose steps are
        about the step size in every parameter whatever the gradient, then wanders about the optimum,
        more than ``tol`` below it on average when the parameters are many (MaskedPPCA with 8
        components on the 64 pixels of the digits, from PCA's solution: 0.0028 nats per image). So
        training goes on from where it stopped, at the step size it ended at, each round drawing
        ``_NOISE_CUT`` times the masks of the round before (the noise, and the wandering, shrink by its
        square root; at most ``_MAX_NOISE_CUT`` times ``n_masks``) and ending at its first stall, within
        ``max_epochs`` in all and the cost of ``_MAX_COST * max_epochs`` epochs of the fit's own, until
        the check passes or a round ends no nearer the optimum than the best so far (the noise was not
        what held it back), or below where it started (it then goes back to parameters no better than
        its start's and is not kept: near a slow optimum the check's extrapolation of EM's gains can
        differ 3x between parameters a relative 1e-12 apart, so it cannot say such a round got nearer;
        factor analysis with some noise variances near zero, left short of the optimum by EM with holes,
        goes downhill by MPT). A model with an exact ascent of its likelihood (:meth:`_climb_to_optimum`:
        the mixtures' EM) first takes it from a fit the stopping rule ended short of the optimum
        (not from one out of ``max_epochs``), and trains on only if that did not get there. The
        parameters nearest the optimum are kept; ``converged_`` is whether they are within ``tol`` of
        it."""
        if gap is None:
            gap = self._optimality_gap(X, sample_weight)
        if gap is None:
            return trainer, None
        params = self.params_
        if gap > params.tol and self.converged_:
            climbed = self._climb_to_optimum(X, sample_weight)
            gap = gap if climbed is None else climbed
        n_masks = params.n_masks
        best, spent = (gap, copy.deepcopy(self.module_.state_dict()), trainer), self.n_iter_
        while gap > params.tol and n_masks < params.n_masks * _MAX_NOISE_CUT:
            cost = n_masks * _NOISE_CUT / params.n_masks  # of an epoch, against the fit's own
            budget = min(params.max_epochs - self.n_iter_, int((_MAX_COST * params.max_epochs - spent) / cost))
            if budget <= params.n_iter_no_change:  # not even one stall's worth
                break
            step = self.history_[-1]["learning_rate"] if self.history_ else params.learning_rate
            center, scale = data.units
            self._map_back(-center / scale, 1 / scale)  # back to the training units
            history, previous = self.history_, self.n_iter_
            trainer = self._trainer(trainer.sample_weight)
            n_masks *= _NOISE_CUT
            trainer.n_masks, trainer.max_epochs = n_masks, budget
            # Adam from the step size the last round ended at, the round ending at its first stall.
            trainer.first_step_factor = min(1.0, step / params.learning_rate)
            trainer.n_lr_cuts = trainer.start_cuts()
            n_iter, _ = solver.fit(trainer, self.module_, data, generator, jacobian)
            for record in trainer.history:
                record["epoch"] += previous
            trainer.history = history + trainer.history
            self.n_iter_, spent = previous + n_iter, spent + n_iter * cost
            self._finish(trainer, data.units)
            if trainer.downhill is not None:  # back to parameters no better than its start's
                break
            gap = self._optimality_gap(X, sample_weight)
            if gap >= best[0]:
                break
            best = (gap, copy.deepcopy(self.module_.state_dict()), trainer)
        gap, state, trainer = best
        self.module_.load_state_dict(state)
        self._set_fitted_attributes()
        self.converged_ = gap <= params.tol
        if self.converged_:
            trainer.downhill = None
        return trainer, gap

    def _chunked_training_data(self, X, sample_weight, solver):
        """``(data, moments, log_jacobian, rows, n_samples)`` of a dask collection ``X``, reduced chunk by chunk
        on the active scheduler (:meth:`~skmpt.estimators._moments.MomentSolver.prepare_chunks`), with the
        checks ``_validate_training_data`` makes on an array, from the first pass's summary; ``n_samples``
        is the number of samples they count (the sum of ``sample_weight``: a NumPy array, or a dask array
        or Series of ``X``'s rows, which weighs the moments, and the rows trained beside them)."""
        name = type(self).__name__
        if not isinstance(solver, MomentSolver):
            raise TypeError(
                f"{name} trains on rows (solver {type(solver).__name__}), so its fit does not take a dask "
                f"collection; only an estimator that trains from the data's moments does (MaskedPPCA and "
                f"MaskedFactorAnalysis with solver='auto' or 'moments'). Stream the chunks through partial_fit "
                f"instead: {name}.partial_fit(X) with a dask collection X makes one call per chunk."
            )
        self.device_ = resolve_device(self.params_.device)
        check_collection(self, X, reset=True)
        X = as_dask_array(X)
        weights, n_samples = None, float(X.shape[0])
        if sample_weight is not None:
            weights, n_samples = collection_weights(sample_weight, X)
        summary = reduce_chunks(X, summarize_chunk, merge_summaries, weights=weights)
        if summary.n_infinite:
            raise ValueError(
                f"X holds {summary.n_infinite} infinite value(s); NaN marks a missing entry, infinity is not allowed."
            )
        if summary.n_samples < 2:
            raise ValueError(f"Found {summary.n_samples} sample(s) in the dask collection X; {name} needs at least 2.")
        check_observed_features(summary.count)
        if weights is not None and summary.positive.n_samples < 2:
            raise ValueError(
                f"sample_weight gives {summary.positive.n_samples} sample(s) a positive weight; at least 2 needed."
            )
        never = [] if weights is None else np.flatnonzero(summary.positive.count == 0).tolist()
        if never:
            raise ValueError(
                f"Feature(s) {never[:10]} are observed only in samples of zero sample_weight: a model "
                f"cannot be fitted to a feature it never observes. Drop the column(s) or weight those samples."
            )
        dtype = DTYPES[self.params_.dtype]
        self.offset_ = self._offset(summary.mean, dtype)
        # The largest magnitudes training sees, checked as the rows themselves are.
        extremes = torch.as_tensor(np.stack([summary.low, summary.high]) - self.offset_).to(dtype)
        check_values(extremes, self._likelihood())
        self._check_data(torch.empty((0, X.shape[1]), dtype=dtype))  # the checks read the data's width
        return *solver.prepare_chunks(X, summary, self.offset_, dtype, self.device_, weights), n_samples

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
            one within the chunk: they weigh samples against each other, not chunks). With a
            dask collection ``X``, a NumPy array or a dask array or Series of its rows: each chunk is
            streamed with its weights (a chunk of no weight is skipped).

        Returns
        -------
        self : object
            The updated estimator.
        """
        if is_dask_collection(X):
            weights = repeat(None)
            if sample_weight is not None:
                weights = iter_blocks(collection_weights(sample_weight, as_dask_array(X))[0])
            for chunk, chunk_weights in zip(iter_blocks(X), weights):  # noqa: B905 (repeat has no end)
                # A chunk of no rows, or of no weight, holds nothing to learn from.
                if len(chunk) and (chunk_weights is None or chunk_weights.any()):
                    self.partial_fit(chunk, sample_weight=chunk_weights)
            return self
        self._fitted_like(None)  # a fit reads and writes NumPy attributes
        sample_weight = to_numpy(sample_weight)  # weights of any namespace are few: NumPy
        first = not hasattr(self, "module_")
        state = self.__dict__.get("_partial_fit_state")
        self._check_stream(state)
        with training_mode(self.verbose):
            self._set_params_()
            X_t, observed, weights = self._validate_training_data(X, reset=first, sample_weight=sample_weight)
            if state is None:
                state = self._stream_state(X_t, observed)
            if observed is not None:  # missing entries at the centre of the training units
                X_t = torch.where(observed, X_t, state.center)
            if self._likelihood() == "gaussian":  # binary data are not rescaled: no units to set
                check_chunk_units(X_t, state.center, state.scale, first=state.calls == 0)
            X_train = (X_t - state.center) / state.scale
            units, near_start = (state.center, state.scale), False
            # A generator per call, from the first call's seed: the run is reproducible.
            generator = torch.Generator().manual_seed(state.seed + state.calls)
            if first:
                state.groups = state.solver.stream_groups(X_train, observed, weights)
            threads = fit_threads(state.solver.step_size(self.params_, X_train.shape, state.groups))
            with seeded(state.seed + state.calls, self.device_), intra_op_threads(threads):
                if first:
                    self.n_components_ = self._resolve_n_components(X_train, weights, None,
                                                                    counted_samples(sample_weight, len(X_train)))
                    self.module_, near_start = self._initialize(state.solver, state.groups, X_train, generator, units)
                else:
                    self._map_back(-state.center / state.scale, 1 / state.scale)  # to the training units
                trainer = self._trainer(weights, near_start)
                trainer.history = self.history_
                start = time.perf_counter()
                objective, progress, learning_rate = state.solver.stream_step(
                    trainer, self.module_, X_train, observed, weights, state, generator, first
                )
            self._partial_fit_state = state
            self.n_iter_ += 1
            self.__dict__.pop("converged_", None)
            jacobian = log_jacobian(X_train, state.scale, observed)
            record = {"epoch": self.n_iter_, "objective": objective + jacobian}
            record["stopping_objective"] = progress + jacobian
            record["learning_rate"] = learning_rate
            trainer.record(record, start)
            self._finish(trainer, units)
        self._fitted_like(X)
        return self

    def _fitted_like(self, X):
        """The fitted array attributes (``components_``, ``offset_``, ...) as tensors on ``X``'s device when
        outputs for ``X`` are tensors (:func:`~skmpt.estimators._data.tensor_output`) and the estimator
        declares array-API support, else as NumPy arrays (as ``fit`` computes them)."""
        tensors = self._tensor_output(X)
        for name, value in list(vars(self).items()):
            if not name.endswith("_") or name.startswith("_"):
                continue
            if tensors and isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
                value = torch.as_tensor(np.ascontiguousarray(value), device=as_torch(X).device)
                setattr(self, name, to_namespace(value, X))
            elif not tensors and not isinstance(value, np.ndarray) and array_api_input(value):
                setattr(self, name, to_numpy(value))

    def _check_namespace(self, X, method):
        """Under ``array_api_dispatch``, a ``ValueError`` when ``X`` is not of the namespace and device the
        fitted attributes are (scikit-learn's rule: an estimator is moved, not its inputs)."""
        dispatch = sklearn.get_config()["array_api_dispatch"] and self.__sklearn_tags__().array_api_support
        if not dispatch or not hasattr(self, "offset_"):
            return
        fitted, given = namespace_and_device(self.offset_), namespace_and_device(X)
        if fitted != given:
            raise ValueError(
                f"Inputs passed to {type(self).__name__}.{method}() must use the same namespace and the same "
                f"device as those passed to fit(): fit's were {fitted[0]} on {fitted[1]}, {method}'s are "
                f"{given[0]} on {given[1]}. Pass X there, or refit on X's."
            )

    def _tensor_output(self, X):
        """Whether outputs for ``X`` are arrays of its namespace (:func:`~skmpt.estimators._data.tensor_output`):
        only for an estimator that declares array-API support; the others give NumPy arrays."""
        return tensor_output(X) and self.__sklearn_tags__().array_api_support

    def _output(self, values, X):
        """A result tensor as the caller of a method gets it: on ``X``'s device when outputs for ``X``
        are tensors, else a NumPy array."""
        return to_namespace(values, X) if self._tensor_output(X) else values.cpu().numpy()

    # ------------------------------------------------------------------ the pipeline's stages
    def _set_params_(self):
        """Validate the parameters and copy them into ``params_``: what this fit, and every method
        of the fitted estimator until the next fit, reads (as attributes, ``params_.mask_rate``)."""
        params = self.get_params(deep=False)
        validate_parameters(params, self._parameter_constraints, type(self).__name__)
        self.params_ = Bunch(**params)

    def _check_stream(self, state):
        """Refuse a ``partial_fit`` call whose parameters the calls before it cannot continue with."""
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

    def _stream_state(self, X, observed):
        """A new :class:`~skmpt.estimators._trainer.StreamState` from the first chunk ``X``: its units,
        a seed from ``random_state`` and the solver, which every later call continues with."""
        seed = int(torch.randint(2**62, (1,), generator=check_generator(self.params_.random_state)))
        center, scale = standardization(X, self._likelihood(), observed)
        self.history_, self.n_iter_ = [], 0
        return StreamState(center, scale, seed, X.dtype, solver=self._solver())

    def _initialize(self, solver, groups, rows, generator, units, previous=None):
        """The module training starts from, and whether it is near the optimum: the ``solver``'s start
        from the moment ``groups`` (PCA's solution, for the moments solver), else ``_build_module``'s
        on the standardised ``rows``, or for a warm start the ``previous`` fit ``(module, offset)``
        mapped to the training ``units = (center, scale)``."""
        start = None if previous is not None else solver.start(groups, self.n_components_)
        if start is not None:
            return start, True
        return self._start_module(rows, generator, units, previous), False

    def _trainer(self, weights, near_start=False):
        """The :class:`~skmpt.estimators._trainer.Trainer` of ``params_`` for ``module_``: its objective
        (:meth:`_objective`), its masks (``params_.mask_rate``), the ``"lml"`` monitor and the
        training rows' ``weights``; ``near_start``: smaller first steps."""
        params, module = self.params_, self.module_
        name, options = self._objective()
        objective = TrainingObjective(name, module, options)
        monitor = partial(module.log_marginal, **self._log_marginal_kwargs()) if params.monitor == "lml" else None
        exact = module.log_marginal if self._exact_target() else None
        return Trainer.from_params(params, objective, monitor=monitor, sample_weight=weights, near_start=near_start,
                                   exact=exact)

    def _finish(self, trainer, units):
        """The trained ``module_`` back in the data's units ``(center, scale)``, with its history and
        the fitted attributes."""
        self.history_ = trainer.history
        self._map_back(*units)
        self._set_fitted_attributes()

    def _warn_unconverged(self, trainer, gap=None):
        """A ``ConvergenceWarning`` at the caller of ``fit`` when training went downhill, ran out of
        epochs or stopped short of the optimum by ``gap`` nats per sample (:meth:`_optimality_gap`)."""
        if trainer.downhill is not None:
            start, end, kept = trainer.downhill
            warnings.warn(
                f"{type(self).__name__}'s training ended below where it started (stopping objective "
                f"{end:.6g} against {start:.6g} nats per sample at the start), so it has not converged; the "
                f"parameters are those of epoch {kept} (0 is the start). Lower learning_rate "
                f"(now {self.params_.learning_rate}) or try another random_state.",
                ConvergenceWarning,
                stacklevel=4,
            )
        elif gap is not None and gap > self.params_.tol:
            warnings.warn(
                f"{type(self).__name__}'s training stopped short of the optimum, so it has not converged: the "
                f"optimum (EM from its parameters, or the closed form) is about {gap:.3g} nats per sample higher "
                f"(more than tol={self.params_.tol}). Raise n_iter_no_change (now {self.params_.n_iter_no_change}) "
                f"or max_epochs (now {self.params_.max_epochs}){self._start_advice()}.",
                ConvergenceWarning,
                stacklevel=4,
            )
        elif not self.converged_:
            warnings.warn(
                f"{type(self).__name__} stopped after max_epochs={self.params_.max_epochs} epochs while the "
                f"objective was still improving by more than tol={self.params_.tol}; raise max_epochs"
                f"{self._start_advice()}.",
                ConvergenceWarning,
                stacklevel=4,
            )

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
            return self._output(function(self.module_, X_t, observed), X)

    def _score_kwargs(self):
        # A fresh generator per call: with an int random_state every call scores with the
        # same masks (and a stochastic model with the same noise), so scores are reproducible
        # and comparable across estimators.
        params = self.params_
        return {"score_method": params.score_method, "score_masks": params.score_masks,
                "random_state": params.random_state}

    def _noise_generator(self):
        """A fresh generator from ``random_state`` for a stochastic module's noise, else None."""
        return check_generator(self.params_.random_state) if self.module_.stochastic else None

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
        self._check_namespace(X, "score_samples")
        if is_dask_collection(X):
            return map_rows(self, "score_samples", X)
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
        scores = self.score_samples(X)
        if is_dask_collection(scores):
            return dask_mean(scores, sample_weight)
        return weighted_mean(to_numpy(scores), to_numpy(sample_weight))

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
        self._check_namespace(X, "mpt_curve")
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
        self._check_namespace(X, "fixed_rate_bias")

        def bias(module, X_t, observed):
            if observed is not None:
                raise ValueError(
                    "fixed_rate_bias compares D * S(x; M) with log p(x) on complete rows; X has missing "
                    "(NaN) entries. Pass complete rows."
                )
            return objectives.fixed_rate_bias(
                module, X_t, mask_rate, score_masks=score_masks, random_state=self.params_.random_state
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
        self._check_namespace(X, "conditional_log_prob")
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
        self._check_namespace(X, "log_marginal_likelihood")
        if is_dask_collection(X):
            return map_rows(self, "log_marginal_likelihood", X)
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
        self._check_namespace(X, "transform")
        if is_dask_collection(X):
            check_is_fitted(self)
            return map_rows(self, "transform", X, (self.n_components_,))
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
        self._check_namespace(Z, "inverse_transform")
        check_is_fitted(self)
        given = Z
        Z = as_torch(Z).detach() if array_api_input(Z) else check_array(Z, dtype=np.float64)
        if Z.ndim != 2 or Z.shape[1] != self.n_components_:
            raise ValueError(
                f"Z must have shape (n_samples, {self.n_components_}) (the fitted n_components_); "
                f"got {tuple(Z.shape)}."
            )
        with torch.no_grad():
            # torch.tensor copies: Z may be a read-only view of a pandas frame.
            Z = Z.to(dtype=self._dtype, device=self.device_) if isinstance(Z, torch.Tensor) else torch.tensor(
                Z, dtype=self._dtype, device=self.device_)
            mean = self.module_.decode(Z).double() + torch.as_tensor(to_numpy(self.offset_), device=self.device_)
        return self._output(mean, given)

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
        if array_api_input(X):
            given = as_torch(X).detach().to(device=self.device_, dtype=torch.float64)
        else:
            given = torch.from_numpy(np.array(validate_data(self, X, reset=False, dtype=np.float64,
                                                            ensure_all_finite="allow-nan"))).to(self.device_)
        if observed is None:
            observed = torch.ones(X_t.shape, dtype=torch.bool, device=X_t.device)
        with torch.no_grad():
            values = function(self.module_, X_t, observed).double()
            values = values + torch.as_tensor(to_numpy(self.offset_), device=self.device_)
        return self._output(torch.where(torch.isnan(given), values, given), X)

    def impute(self, X):
        """The conditional mean of each sample's missing (NaN) entries given its observed ones.

        ``E[x_mis | x_obs]`` under the fitted model, exactly for the linear-Gaussian models,
        the mixtures and the linear VAE (its grid); :class:`~skmpt.MaskedVAE` estimates it by
        self-normalised importance sampling over its encoder's posterior (MIWAE; Mattei and
        Frellsen, 2019), drawing particles until their effective sample size reaches 100, at most
        1000, reproducibly from ``random_state``. The observed
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
        self._check_namespace(X, "impute")
        if is_dask_collection(X):
            check_is_fitted(self)
            return map_rows(self, "impute", X, (self.n_features_in_,))
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
        self._check_namespace(X, "sample_missing")
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
        estimator.device_ = resolve_device(estimator.params_.device)
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
        params = self.__dict__.get("params_")
        if params is not None and not isinstance(params, Bunch):  # pickled by skmpt 0.1.0: a plain dict
            self.params_ = Bunch(**params)
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
