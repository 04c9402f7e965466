"""The base of the array estimators: parameters, validated data, fitted state and scoring.

A concrete estimator declares its parameters and implements two hooks, ``_build_module``
(its :class:`skmpt.models.MaskedModel` on the training data) and ``_set_fitted_attributes``;
the optional hooks have defaults. Training is a :class:`~skmpt.estimators._trainer.Trainer`;
scoring is inherited from :class:`~skmpt.estimators._scoring._BaseFittedModel`.
"""

import abc
import time
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .. import objectives
from .._utils import DTYPES, check_generator, resolve_device, seeded
from .._validation import Interval, Options, validate_parameters
from ..masks import MAX_EXHAUSTIVE_FEATURES, observed_masks, sample_masks
from ._data import check_chunk_units, dtype_name, standardization
from ._scoring import _BaseFittedModel
from ._trainer import StreamState, Trainer, training_mode
from ._weights import training_rows

__all__ = []


def _log_jacobian(X, scale, observed=None):
    # Every log-density in D dimensions shifts by -D log(scale) when mapped back (of the
    # observed entries: by -|o| log(scale), on average over the samples).
    dimension = X.shape[1] if observed is None else float(observed.sum(-1).double().mean())
    return -dimension * float(scale.log())


def _fill_missing(X, observed):
    """``X`` with its unobserved entries at zero (the centre of standardised data)."""
    return X if observed is None else torch.where(observed, X, torch.zeros_like(X))


class _BaseMaskedEstimator(_BaseFittedModel, metaclass=abc.ABCMeta):
    """Base for estimators trained by masked pre-training and scored by its cumulative sum."""

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
    def _build_module(self, X, generator):
        """The untrained :class:`skmpt.models.MaskedModel` for (standardised) training data ``X``.

        ``X`` is ``(x - center) / scale``; ``self._training_units`` holds ``(center, scale)``
        (for a start given in the data's units, e.g. a warm start)."""

    def _set_fitted_attributes(self):
        """Copy learned parameters out of ``module_`` into NumPy attributes; none by default."""

    def _objective_name(self):
        """Key of :data:`skmpt.objectives.OBJECTIVES` that training maximises."""
        return "mpt"

    def _objective_kwargs(self):
        """Keyword arguments of the training objective (e.g. IWAE's number of particles)."""
        return {}

    def _resolve_n_components(self, X):
        """The latent dimension to fit on (standardised) training data ``X``: ``n_components``
        by default; an estimator with a data-driven choice (PPCA's ``"mle"``) overrides it."""
        return self.n_components

    def _check_data(self, X):
        """Data-dependent checks on the validated training array; subclasses extend them."""
        if self.score_method == "exhaustive" and X.shape[1] > MAX_EXHAUSTIVE_FEATURES:
            raise ValueError(
                f"score_method='exhaustive' enumerates 2**D - 1 masks, allowed for at most "
                f"{MAX_EXHAUSTIVE_FEATURES} features; X has {X.shape[1]}. Use score_method='sweep', "
                f"'nested' or 'chain'."
            )

    # ------------------------------------------------------------------ data
    def _validate_training_data(self, X, *, reset, sample_weight=None):
        """Validated training tensor, its observed entries (None when all are) and weights: the
        rows of positive ``sample_weight``, and their weights scaled to mean one (None without
        ``sample_weight``)."""
        if reset:
            validate_parameters(self.get_params(deep=False), self._parameter_constraints, type(self).__name__)
            self.device_ = resolve_device(self.device)
        X_t, observed = self._to_tensor(X, reset=reset)
        X_t, observed, weights = training_rows(X_t, observed, sample_weight, min_samples=2 if reset else 1)
        if reset:
            self._check_data(X_t)
        return X_t, observed, weights

    def _map_back(self, center, scale):
        """Map ``module_`` fitted on ``(x - center) / scale`` to the units of ``x``."""
        if self._likelihood() == "gaussian":
            with torch.no_grad():
                self.module_.unstandardize_(center, scale)

    # ------------------------------------------------------------------ training
    def _trainer(self):
        def objective(X, masks, observed=None):
            masks = () if masks is None else (masks,)
            options = {**self._objective_kwargs(), **({} if observed is None else {"observed": observed})}
            return objectives.OBJECTIVES[self._objective_name()](self.module_, X, *masks, **options)

        def draw_masks(shape, n_features, generator, device, observed=None):
            if observed is not None:  # among each sample's observed entries
                return observed_masks(self.mask_rate, shape, observed, random_state=generator, device=device)
            return sample_masks(self.mask_rate, shape, n_features, random_state=generator, device=device)

        def monitor(X, observed=None):
            options = {} if observed is None else {"observed": observed}
            return self.module_.log_marginal(X, **self._log_marginal_kwargs(), **options)

        return Trainer(
            objective,
            draw_masks if self._objective_name() == "mpt" else None,
            self.n_masks,
            self.learning_rate,
            batch_size=self.batch_size,
            max_epochs=self.max_epochs,
            tol=self.tol,
            n_iter_no_change=self.n_iter_no_change,
            monitor=monitor if self.monitor == "lml" else None,
            monitor_every=self.monitor_every,
            verbose=self.verbose,
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
            weight are left out, initialisation included. None: equal weights.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        with training_mode(self.verbose):
            X_t, observed, weights = self._validate_training_data(X, reset=True, sample_weight=sample_weight)
            generator = check_generator(self.random_state)
            seed = int(torch.randint(2**62, (1,), generator=generator))
            center, scale = standardization(X_t, self._likelihood(), observed)
            X_train = _fill_missing((X_t - center) / scale, observed)
            self._training_units = (center, scale)
            trainer = self._trainer()
            trainer.sample_weight = weights
            with seeded(seed, self.device_):
                self.n_components_ = self._resolve_n_components(X_train)
                self.module_ = self._build_module(X_train, generator)
                log_jacobian = _log_jacobian(X_t, scale, observed)
                self.n_iter_, self.converged_ = trainer.fit(self.module_, X_train, generator, log_jacobian, observed)
            self.history_ = trainer.history
            self._map_back(center, scale)
            self._set_fitted_attributes()
            self.__dict__.pop("_partial_fit_state", None)
        if not self.converged_:
            warnings.warn(
                f"{type(self).__name__} stopped after max_epochs={self.max_epochs} epochs while the "
                f"objective was still improving by more than tol={self.tol}; raise max_epochs.",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

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
            X_t, observed, weights = self._validate_training_data(X, reset=first, sample_weight=sample_weight)
            if state is None:
                seed = int(torch.randint(2**62, (1,), generator=check_generator(self.random_state)))
                center, scale = standardization(X_t, self._likelihood(), observed)
                state = StreamState(center, scale, seed, X_t.dtype)
                self._training_units = (center, scale)
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
                    self.n_components_ = self._resolve_n_components(X_train)
                    self.module_ = self._build_module(X_train, generator)
                else:
                    self._map_back(-state.center / state.scale, 1 / state.scale)  # to the training units
                start = time.perf_counter()
                objective, progress = trainer.stream_step(self.module_, X_train, state, generator, observed)
            self._map_back(state.center, state.scale)
            self._partial_fit_state = state
            self.n_iter_ += 1
            self.__dict__.pop("converged_", None)
            log_jacobian = _log_jacobian(X_train, state.scale, observed)
            record = {"epoch": self.n_iter_, "objective": objective + log_jacobian}
            record["stopping_objective"] = progress + log_jacobian
            record["learning_rate"] = state.optimizer["param_groups"][0]["lr"]
            trainer.record(record, start)
            self._set_fitted_attributes()
        return self

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
        validate_parameters(estimator.get_params(deep=False), cls._parameter_constraints, cls.__name__)
        estimator.device_ = resolve_device(estimator.device)
        estimator.offset_ = estimator._offset(np.asarray(center(source), dtype=np.float64), estimator._dtype)
        with torch.no_grad():
            n_components, module = build_module(estimator._dtype, estimator.device_, estimator.offset_)
        estimator.set_params(n_components=n_components)
        estimator.n_components_ = n_components
        estimator.n_features_in_ = source.n_features_in_
        if hasattr(source, "feature_names_in_"):
            estimator.feature_names_in_ = source.feature_names_in_
        estimator.module_ = module
        estimator.history_, estimator.n_iter_ = [], 0
        estimator._set_fitted_attributes()
        return estimator
