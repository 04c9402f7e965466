"""scikit-learn glue shared by the array estimators: validation, device, seeding, the
training loop, ``history_``, scoring and ``transform``.

A concrete estimator declares its own parameters and builds its torch module in
``_init_module``; everything else (masks, the MPT objective, the cumulative score) comes
from :mod:`skmpt.masks` and :mod:`skmpt.objectives`.
"""

import contextlib
import copy
import logging
import math
import time
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .masks import MAX_EXHAUSTIVE_FEATURES, check_generator, sample_masks
from .models._base import _with_generator
from .objectives import OBJECTIVES, cumulative_score, log_marginal, mpt_curve

__all__ = ["resolve_device"]

logger = logging.getLogger("skmpt")

#: The ``dtype`` parameter's values.
DTYPES = {"float64": torch.float64, "float32": torch.float32}


def _dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def _scale_limits(dtype):
    """Spreads (and magnitudes) whose squares, times a 1e-8 margin either way, ``dtype`` holds.

    The margin leaves room for variances well below or above the data's own.
    """
    info = torch.finfo(dtype)
    return 1e4 * math.sqrt(info.tiny), 1e-4 * math.sqrt(info.max)


@contextlib.contextmanager
def _training_mode(verbose):
    """Gradients on, even inside ``torch.no_grad()`` or ``torch.inference_mode()`` blocks, and
    ``verbose`` lines shown through the ``skmpt`` logger when logging is not configured."""
    handler = None
    if verbose and not logger.hasHandlers():
        handler = logging.StreamHandler()
        logger.addHandler(handler)
    level = logger.level
    if verbose and logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        with torch.inference_mode(False), torch.enable_grad():
            yield
    finally:
        logger.setLevel(level)
        if handler is not None:
            logger.removeHandler(handler)


def resolve_device(device):
    """``"auto"`` is CUDA when available, else the CPU; a CUDA device must exist.

    Examples
    --------
    >>> from skmpt._base import resolve_device
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; got {device!r}.") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was asked for, but CUDA is not available; use 'auto' or 'cpu'.")
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; got {device!r}.")
    return resolved


class _BaseMaskedEstimator(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Base for estimators trained by masked pre-training and scored by its cumulative sum.

    Subclasses define ``_init_module(X, generator)`` (a :class:`skmpt.models.MaskedModel` on
    ``X``'s device and dtype, with ``log_marginal`` and ``posterior``), and may
    override ``_set_fitted_attributes()`` and ``_log_marginal_kwargs()``.
    """

    _parameter_constraints: dict = {
        "mask_rate": [StrOptions({"uniform"}), Interval(Real, 0, 1, closed="right")],
        "n_masks": [Interval(Integral, 1, None, closed="left")],
        "score_masks": [StrOptions({"all"}), Interval(Integral, 1, None, closed="left")],
        "score_method": [StrOptions({"sweep", "nested", "chain"})],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "monitor": [None, StrOptions({"lml"})],
        "monitor_every": [Interval(Integral, 1, None, closed="left")],
        "dtype": [StrOptions(set(DTYPES))],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    @property
    def _standardize(self):
        """Train on data centred and divided by one overall scale, then map the module back.

        Exact for Gaussian models, which are closed under such maps (PPCA has no
        ``likelihood`` parameter and is Gaussian); binary data must stay binary.
        """
        return getattr(self, "likelihood", "gaussian") == "gaussian"

    @property
    def _uses_masks(self):
        """Whether the training objective needs masks (MPT does; ELBO, IWAE and LML not)."""
        return getattr(self, "objective", "mpt") == "mpt"

    @property
    def _dtype(self):
        """The torch dtype of the fitted module, or the one ``dtype`` asks for before fit."""
        module = getattr(self, "module_", None)
        if module is not None:
            return next(module.parameters()).dtype
        return DTYPES[getattr(self, "dtype", "float64")]

    # Step-size schedule (torch's ReduceLROnPlateau): divide by this factor after
    # n_iter_no_change epochs without progress; the stall after this many cuts ends training.
    _lr_cut_factor = 2.0
    _n_lr_cuts = 6
    # The stopping rule's objective is computed on this fraction of the training samples
    # (at least _monitor_min_samples): forward passes only, about a tenth of an epoch.
    _monitor_fraction = 0.25
    _monitor_min_samples = 100

    # ------------------------------------------------------------------ data and device
    def _to_tensor(self, X, *, reset):
        # Fitting needs two samples to have any spread; scoring works sample by sample.
        X = validate_data(self, X, reset=reset, dtype=[np.float64, np.float32], ensure_min_samples=2 if reset else 1)
        dtype = DTYPES[getattr(self, "dtype", "float64")] if reset else self._dtype
        # A copy: torch cannot wrap read-only arrays (memmaps) without warning.
        X_t = torch.tensor(np.asarray(X, dtype=np.float64), dtype=dtype, device=self.device_)
        threshold = getattr(self, "binarize", None)
        if threshold is not None and getattr(self, "likelihood", None) == "bernoulli":
            X_t = (X_t > threshold).to(dtype)  # BernoulliNB's rule: above the threshold is 1
        self._check_values(X_t)
        return X_t

    def _check_values(self, X):
        """Checks on the values of any input, at fit and at score time: binary data for a
        Bernoulli likelihood, magnitudes whose squares the dtype can hold for a Gaussian one."""
        if getattr(self, "likelihood", None) == "bernoulli":
            bad = (X != 0) & (X != 1)
            if bool(bad.any()):
                raise ValueError(
                    f"likelihood='bernoulli' models binary data: X must contain only 0 and 1, but "
                    f"it contains {float(X[bad][0]):g} (and {int(bad.sum()) - 1} other non-binary "
                    f"values). Binarise it first, e.g. with binarize=0.0 (where the estimator has it) or "
                    f"sklearn.preprocessing.Binarizer."
                )
            return
        largest = float(X.abs().max()) if X.numel() else 0.0
        limit = _scale_limits(X.dtype)[1]
        if largest > limit:
            raise ValueError(
                f"X holds values as large as {largest:.3g}: a Gaussian log-density squares them, which "
                f"overflows {_dtype_name(X.dtype)} beyond {limit:.3g}. Rescale X (e.g. with "
                f"sklearn.preprocessing.StandardScaler); the log-likelihood of c * X is that of X minus "
                f"n_features * log(c)."
            )

    def _check_data(self, X):
        """Data-dependent checks on the validated training array; subclasses extend them."""
        if self.score_masks == "all" and X.shape[1] > MAX_EXHAUSTIVE_FEATURES:
            raise ValueError(
                f"score_masks='all' enumerates 2**D - 1 masks, allowed for at most "
                f"{MAX_EXHAUSTIVE_FEATURES} features; X has {X.shape[1]}. Use an integer "
                f"score_masks (masks per size, or orderings with score_method='chain')."
            )

    def _standardization(self, X):
        """Centre and overall scale that training divides out (zero and one when it does not)."""
        n_features = X.shape[1]
        if not self._standardize:
            return X.new_zeros(n_features), X.new_ones(())
        center = X.mean(0)
        deviation = X - center
        # Divided by the largest deviation before squaring, so that no square under- or overflows.
        largest = deviation.abs().max()
        if largest == 0:
            return center, X.new_ones(())  # constant data: nothing to rescale
        scale = largest * (deviation / largest).square().mean().sqrt()
        low, high = _scale_limits(X.dtype)
        if not low <= float(scale) <= high:
            raise ValueError(
                f"X's spread (root-mean-square deviation {float(scale):.3g}) is outside the range whose "
                f"variances {_dtype_name(X.dtype)} can hold, [{low:.3g}, {high:.3g}]. Rescale X (e.g. with "
                f"sklearn.preprocessing.StandardScaler); the log-likelihood of c * X is that of X minus "
                f"n_features * log(c)."
            )
        return center, scale

    # ------------------------------------------------------------------ training
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the model by maximising its training objective with Adam until it converges.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        with _training_mode(self.verbose):
            X_t = self._validate_training_data(X, reset=True)
            generator = check_generator(self.random_state)
            seed = int(torch.randint(2**62, (1,), generator=generator))
            center, scale = self._standardization(X_t)
            X_train = (X_t - center) / scale
            with self._seeded(seed):
                self.module_ = self._init_module(X_train, generator)
                self.converged_ = self._fit_loop(X_train, generator, self._log_jacobian(X_train, scale))
            self._map_back(center, scale)
            self._set_fitted_attributes()
            self.__dict__.pop("_partial_fit_state", None)
        if not self.converged_:
            # stacklevel 3: past this method and scikit-learn's _fit_context, to the caller's line.
            warnings.warn(
                f"{type(self).__name__} stopped after max_epochs={self.max_epochs} epochs while the "
                f"objective was still improving by more than tol={self.tol}; raise max_epochs.",
                ConvergenceWarning,
                stacklevel=3,
            )
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None):
        """One more pass of the optimiser over a chunk of data, for data that do not fit in memory.

        The first call (or the first after ``fit``) starts Adam; later calls continue the same
        optimiser state, one pass over ``X`` in mini-batches of ``batch_size`` each, at the
        current ``learning_rate`` (lower it with ``set_params`` between calls to anneal).
        Gaussian models train in the units of the first chunk (its centre and overall scale);
        the model family is closed under that map, so the units move the optimiser's path, not
        its optimum, and ``module_`` is mapped back to the units of ``X`` after every call.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A chunk of training data.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The updated estimator.
        """
        first = not hasattr(self, "module_")
        with _training_mode(self.verbose):
            X_t = self._validate_training_data(X, reset=first)
            state = getattr(self, "_partial_fit_state", None)
            if state is None:
                seed = int(torch.randint(2**62, (1,), generator=check_generator(self.random_state)))
                center, scale = self._standardization(X_t)
                state = {"center": center, "scale": scale, "seed": seed, "calls": 0, "optimizer": None}
                self.history_, self.n_iter_ = [], 0
            center, scale = state["center"], state["scale"]
            X_train = (X_t - center) / scale
            # A generator per call, from the first call's seed: the run is reproducible.
            generator = torch.Generator().manual_seed(state["seed"] + state["calls"])
            with self._seeded(state["seed"] + state["calls"]):
                if first:
                    self.module_ = self._init_module(X_train, generator)
                else:
                    self._map_back(-center / scale, 1 / scale)  # to the training units
                optimizer = self._optimizer()
                if state["optimizer"] is not None:
                    optimizer.load_state_dict(state["optimizer"])
                    for group in optimizer.param_groups:
                        group["lr"] = self.learning_rate
                start = time.perf_counter()
                objective = self._run_epoch(X_train, optimizer, generator)
            self._map_back(center, scale)
            state["optimizer"], state["calls"] = optimizer.state_dict(), state["calls"] + 1
            self._partial_fit_state = state
            self.n_iter_ += 1
            self.__dict__.pop("converged_", None)
            record = {"epoch": self.n_iter_, "objective": objective + self._log_jacobian(X_train, scale)}
            self._record(record, start)
            self._set_fitted_attributes()
        return self

    def _validate_training_data(self, X, *, reset):
        if reset:
            self.device_ = resolve_device(self.device)
        X_t = self._to_tensor(X, reset=reset)
        if reset:
            self._check_data(X_t)
        return X_t

    def _log_jacobian(self, X, scale):
        # Every log-density in D dimensions shifts by -D log(scale) when mapped back.
        return -X.shape[1] * float(scale.log())

    def _map_back(self, center, scale):
        """Map ``module_`` fitted on ``(x - center) / scale`` to the units of ``x``."""
        if self._standardize:
            with torch.no_grad():
                self.module_.unstandardize_(center, scale)

    @contextlib.contextmanager
    def _seeded(self, seed):
        """torch's global generators seeded for the module's own draws, and restored after."""
        with torch.random.fork_rng(devices=self._cuda_indices()):
            torch.manual_seed(seed)
            yield

    def _cuda_indices(self):
        """CUDA device indices whose random state fit forks (and restores), none on the CPU."""
        if self.device_.type != "cuda":
            return []
        return [self.device_.index if self.device_.index is not None else torch.cuda.current_device()]

    def _resolved_batch_size(self, n_samples):
        return min(200, n_samples) if self.batch_size == "auto" else min(self.batch_size, n_samples)

    def _optimizer(self):
        return torch.optim.Adam(self.module_.parameters(), lr=self.learning_rate)

    def _objective(self, X, masks):
        """Training objective per sample (to maximise), shape ``(n_samples,)``.

        The function named by ``objective`` (``"mpt"`` without one) in
        :data:`skmpt.objectives.OBJECTIVES`; masks go to the masked objective only.
        """
        masks = () if masks is None else (masks,)
        return OBJECTIVES[getattr(self, "objective", "mpt")](self.module_, X, *masks, **self._objective_kwargs())

    def _objective_kwargs(self):
        """Keyword arguments of the training objective (e.g. IWAE's number of particles)."""
        return {}

    def _train_step(self, X, masks, optimizer):
        optimizer.zero_grad()
        objective = self._objective(X, masks)
        (-objective.mean()).backward()
        optimizer.step()
        return objective.detach()

    def _log_marginal_kwargs(self):
        """Keyword arguments of the module's ``log_marginal`` (e.g. a number of samples)."""
        return {}

    def _set_fitted_attributes(self):
        """Copy learned parameters out of ``module_`` into NumPy attributes; none by default."""

    def _draw_masks(self, shape, n_features, generator, device):
        if not self._uses_masks:
            return None
        return sample_masks(self.mask_rate, shape, n_features, random_state=generator, device=device)

    def _run_epoch(self, X, optimizer, generator):
        """One pass over ``X`` in shuffled mini-batches with fresh masks; the mean objective."""
        n_samples, n_features = X.shape
        total = X.new_zeros((), dtype=torch.float64)  # accumulated in float64 whatever the dtype
        order = torch.randperm(n_samples, generator=generator).to(X.device)
        for batch in order.split(self._resolved_batch_size(n_samples)):
            masks = self._draw_masks((len(batch), self.n_masks), n_features, generator, X.device)
            total += self._train_step(X[batch], masks, optimizer).sum(dtype=torch.float64)
        return float(total) / n_samples

    def _stopping_sample(self, X, generator):
        """Samples, masks and a noise seed drawn once, on which the stopping rule compares epochs.

        Common random numbers: the objective on fixed masks and fixed noise changes only with
        the parameters, so mask noise (large for small masks: one token scaled by D) cannot
        pass for a lack of progress. Training itself draws fresh masks every step.
        """
        n_samples, n_features = X.shape
        size = min(n_samples, max(self._monitor_min_samples, math.ceil(self._monitor_fraction * n_samples)))
        rows = torch.randperm(n_samples, generator=generator)[:size].to(X.device)
        masks = self._draw_masks((size, self.n_masks), n_features, generator, X.device)
        return X[rows], masks, int(torch.randint(2**62, (1,), generator=generator))

    def _stopping_objective(self, X, masks, seed):
        """Mean training objective on the stopping rule's fixed samples, masks and noise."""
        batch_size = self._resolved_batch_size(len(X))
        total = 0.0
        with torch.no_grad(), self._seeded(seed):
            for i in range(0, len(X), batch_size):
                part = None if masks is None else masks[i : i + batch_size]
                total += float(self._objective(X[i : i + batch_size], part).sum(dtype=torch.float64))
        return total / len(X)

    def _record(self, record, start):
        record["seconds"] = time.perf_counter() - start
        self.history_.append(record)
        if self.verbose:
            logger.info(", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.items()))

    def _fit_loop(self, X, generator, log_jacobian):
        """Train ``module_`` on (standardised) ``X``; whether the stopping rule was met.

        Adam with torch's ``ReduceLROnPlateau`` on the stopping objective (as scikit-learn's
        ``MLPRegressor`` with ``learning_rate="adaptive"``): a stall of ``n_iter_no_change``
        epochs means the step size, not the model, limits progress, so it is cut; the stall
        after ``_n_lr_cuts`` cuts is convergence.
        """
        optimizer = self._optimizer()
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer,
            mode="max",
            factor=1 / self._lr_cut_factor,
            patience=self.n_iter_no_change - 1,
            threshold=self.tol,
            threshold_mode="abs",
        )
        stopping = self._stopping_sample(X, generator)
        monitor, monitor_every = getattr(self, "monitor", None), getattr(self, "monitor_every", 1)
        self.history_ = []
        cuts = 0
        for epoch in range(1, self.max_epochs + 1):
            start = time.perf_counter()
            learning_rate = optimizer.param_groups[0]["lr"]
            record = {"epoch": epoch, "objective": self._run_epoch(X, optimizer, generator) + log_jacobian}
            record["stopping_objective"] = self._stopping_objective(*stopping) + log_jacobian
            if monitor == "lml" and epoch % monitor_every == 0:
                with torch.no_grad():
                    lml = self.module_.log_marginal(X, **self._log_marginal_kwargs())
                record["lml"] = float(lml.mean(dtype=torch.float64)) + log_jacobian
            record["learning_rate"] = learning_rate
            self._record(record, start)
            self.n_iter_ = epoch
            progress = record["stopping_objective"]
            if not math.isfinite(progress):
                raise FloatingPointError(
                    f"The training objective became {progress} at epoch {epoch}; lower "
                    f"learning_rate (now {self.learning_rate})."
                )
            scheduler.step(progress)
            cuts += optimizer.param_groups[0]["lr"] < learning_rate
            if cuts > self._n_lr_cuts:
                return True
        return False

    # ------------------------------------------------------------------ scoring
    def _evaluate(self, X, function):
        """``function(module_, X)`` on validated ``X``, without gradients, as a NumPy array.

        Scoring never changes the estimator or its module (randomness comes in through
        generators made per call), so it is safe from several threads at once.
        """
        check_is_fitted(self)
        X_t = self._to_tensor(X, reset=False)
        with torch.no_grad():
            return function(self.module_, X_t).cpu().numpy()

    def _score_kwargs(self):
        # A fresh generator per call: with an int random_state every call scores with the
        # same masks (and a stochastic model with the same noise), so scores are reproducible
        # and comparable across estimators.
        if self.score_masks == "all":
            return {"method": "exhaustive", "n_masks": 1, "random_state": self.random_state}
        return {"method": self.score_method, "n_masks": self.score_masks, "random_state": self.random_state}

    def _model_generator(self):
        """A fresh generator from ``random_state`` for a stochastic module's noise, else None."""
        return check_generator(self.random_state) if getattr(self.module_, "stochastic", False) else None

    def score_samples(self, X):
        """Cumulative MPT estimate of each sample's log-marginal likelihood, ``sum_M S(x; M)``.

        An estimate when ``score_masks`` is an int (``score_masks`` masks of every size, or
        orderings, by ``score_method``); exact enumeration with ``score_masks="all"``. It does
        not depend on the ``mask_rate`` used in training.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            In nats.
        """
        return self._evaluate(X, lambda module, X_t: cumulative_score(module, X_t, **self._score_kwargs()))

    def score(self, X, y=None):
        """Mean cumulative MPT estimate of the log-marginal likelihood (see ``score_samples``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        score : float
            Nats per sample.
        """
        return float(np.mean(self.score_samples(X)))

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
        curve = self._evaluate(X, lambda module, X_t: mpt_curve(module, X_t, **self._score_kwargs()))
        n_features = self.n_features_in_
        return np.arange(1, n_features + 1) / n_features, curve

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
        masks = np.asarray(masks)
        if masks.dtype != bool:
            if masks.size and not np.isin(masks, (0, 1)).all():
                raise ValueError("masks must be boolean (True marks a masked token) or hold only 0 and 1.")
            masks = masks.astype(bool)
        if masks.ndim not in (2, 3) or masks.shape[-1] != self.n_features_in_:
            raise ValueError(
                f"masks must have shape (n_masks, {self.n_features_in_}) or (n_samples, n_masks, "
                f"{self.n_features_in_}); got {masks.shape}."
            )

        def conditionals(module, X_t):
            if masks.ndim == 3 and masks.shape[0] != X_t.shape[0]:
                raise ValueError(f"masks hold {masks.shape[0]} samples' masks, but X has {X_t.shape[0]} samples.")
            mask_t = torch.as_tensor(masks, device=X_t.device)
            return _with_generator(module.masked_log_prob, X_t, mask_t, generator=self._model_generator())

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
        return self._evaluate(
            X,
            lambda module, X_t: log_marginal(
                module, X_t, generator=self._model_generator(), **self._log_marginal_kwargs()
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
        return self._evaluate(X, lambda module, X_t: module.posterior(X_t)[0])

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
        if Z.shape[1] != self.n_components:
            raise ValueError(f"Z must have shape (n_samples, {self.n_components}) (n_components); got {Z.shape}.")
        with torch.no_grad():
            return self.module_.decode(torch.as_tensor(Z, dtype=self._dtype, device=self.device_)).cpu().numpy()

    @property
    def _n_features_out(self):
        return self.n_components

    @classmethod
    def _from_fitted(cls, source, source_class, params, build_module):
        """A fitted ``cls`` holding the parameters of a fitted scikit-learn ``source``.

        ``params`` go to ``cls``'s constructor and are validated as in ``fit``;
        ``build_module(dtype, device)`` returns ``(n_components, module)`` from ``source``'s
        fitted attributes. The result has no training history (``history_ == []``,
        ``n_iter_ == 0``); shared by the ``from_estimator`` class methods.
        """
        if not isinstance(source, source_class):
            raise TypeError(
                f"{cls.__name__}.from_estimator takes a fitted {source_class.__name__}; got {type(source).__name__}."
            )
        check_is_fitted(source)
        if "n_components" in params:
            raise ValueError(f"n_components is taken from the {source_class.__name__}; do not pass it.")
        estimator = cls(**params)
        estimator._validate_params()
        estimator.device_ = resolve_device(estimator.device)
        with torch.no_grad():
            n_components, module = build_module(estimator._dtype, estimator.device_)
        estimator.set_params(n_components=n_components)
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


class _LinearGaussianMixin:
    """``get_covariance`` and ``get_precision`` of a linear-Gaussian model (PPCA, factor
    analysis), as scikit-learn's decompositions have them; the module supplies the matrices."""

    def get_covariance(self):
        """Model covariance ``W W^T`` plus the noise covariance.

        Returns
        -------
        cov : ndarray of shape (n_features, n_features)
        """
        check_is_fitted(self)
        with torch.no_grad():
            return self.module_.covariance().cpu().numpy()

    def get_precision(self):
        """Model precision (inverse covariance), by the Woodbury identity.

        Returns
        -------
        precision : ndarray of shape (n_features, n_features)
        """
        check_is_fitted(self)
        with torch.no_grad():
            return self.module_.precision().cpu().numpy()
