"""scikit-learn glue shared by the array estimators: validation, device, seeding, the
training loop, ``history_``, scoring and ``transform``.

A concrete estimator declares its own parameters and builds its torch module in
``_init_module``; everything else (masks, the MPT objective, the cumulative score) comes
from :mod:`skmpt.masks` and :mod:`skmpt.objectives`.
"""

import copy
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
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    _dtype = torch.float64

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

    # Step-size schedule: divide by this factor after n_iter_no_change epochs without
    # progress, this many times, then stop.
    _lr_cut_factor = 5.0
    _n_lr_cuts = 2

    # ------------------------------------------------------------------ data and device
    def _to_tensor(self, X, *, reset):
        # Fitting needs two samples to have any spread; scoring works sample by sample.
        X = validate_data(self, X, reset=reset, dtype=[np.float64, np.float32], ensure_min_samples=2 if reset else 1)
        # A copy: torch cannot wrap read-only arrays (memmaps) without warning.
        X_t = torch.tensor(np.asarray(X, dtype=np.float64), dtype=self._dtype, device=self.device_)
        self._check_values(X_t)
        return X_t

    def _check_values(self, X):
        """Checks on the values of any input, at fit and at score time: binary data for a
        Bernoulli likelihood."""
        if getattr(self, "likelihood", None) == "bernoulli":
            bad = (X != 0) & (X != 1)
            if bool(bad.any()):
                raise ValueError(
                    f"likelihood='bernoulli' models binary data: X must contain only 0 and 1, but "
                    f"it contains {float(X[bad][0]):g} (and {int(bad.sum()) - 1} other non-binary "
                    f"values). Binarise it first, e.g. with sklearn.preprocessing.Binarizer in a pipeline."
                )

    def _check_data(self, X):
        """Data-dependent checks on the validated training array; subclasses extend them."""
        if self.score_masks == "all" and X.shape[1] > MAX_EXHAUSTIVE_FEATURES:
            raise ValueError(
                f"score_masks='all' enumerates 2**D - 1 masks, allowed for at most "
                f"{MAX_EXHAUSTIVE_FEATURES} features; X has {X.shape[1]}. Use an integer "
                f"score_masks (masks per size, or orderings with score_method='chain')."
            )

    # ------------------------------------------------------------------ training
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the model by maximising the masked pre-training objective with Adam.

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
        self.device_ = resolve_device(self.device)
        X_t = self._to_tensor(X, reset=True)
        self._check_data(X_t)
        generator = check_generator(self.random_state)
        torch_seed = int(torch.randint(2**62, (1,), generator=generator))

        center, scale = X_t.new_zeros(X_t.shape[1]), X_t.new_ones(())
        if self._standardize:
            center = X_t.mean(0)
            # One overall scale keeps the model family (isotropic noise) the same; the floor
            # avoids dividing by zero on constant data.
            scale = (X_t - center).square().mean().sqrt().clamp_min(1e-12)
        X_train = (X_t - center) / scale
        # Every log-density in D dimensions shifts by -D log(scale) when mapped back.
        log_jacobian = -X_t.shape[1] * float(scale.log())

        # enable_grad: fitting works even when called inside a torch.no_grad() block.
        with torch.random.fork_rng(devices=self._cuda_indices()), torch.enable_grad():
            torch.manual_seed(torch_seed)
            self.module_ = self._init_module(X_train, generator)
            self._fit_loop(X_train, generator, log_jacobian)
        if self._standardize:
            with torch.no_grad():
                self.module_.unstandardize_(center, scale)
        self._set_fitted_attributes()
        return self

    def _cuda_indices(self):
        """CUDA device indices whose random state fit forks (and restores), none on the CPU."""
        if self.device_.type != "cuda":
            return []
        return [self.device_.index if self.device_.index is not None else torch.cuda.current_device()]

    def _resolved_batch_size(self, n_samples):
        return min(200, n_samples) if self.batch_size == "auto" else min(self.batch_size, n_samples)

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

    def _epoch_diagnostics(self, X):
        """Extra per-epoch numbers for ``history_`` (per-sample means, training units)."""
        return {"lml": float(self.module_.log_marginal(X, **self._log_marginal_kwargs()).mean())}

    def _set_fitted_attributes(self):
        """Copy learned parameters out of ``module_`` into NumPy attributes; none by default."""

    def _fit_loop(self, X, generator, log_jacobian):
        n_samples, n_features = X.shape
        batch_size = self._resolved_batch_size(n_samples)
        optimizer = torch.optim.Adam(self.module_.parameters(), lr=self.learning_rate)
        self.history_ = []
        best, stall, lr_cuts = -math.inf, 0, 0
        converged = False
        # Common random numbers for the stopping rule: the objective on masks drawn once is
        # compared across epochs, so mask noise (large for small masks: one token scaled by D)
        # cannot pass for a lack of progress. Training itself draws fresh masks every step.
        monitor_masks = None
        if self._uses_masks:
            monitor_masks = sample_masks(
                self.mask_rate, (n_samples, self.n_masks), n_features, random_state=generator, device=X.device
            )
        for epoch in range(1, self.max_epochs + 1):
            start = time.perf_counter()
            total = X.new_zeros(())
            order = torch.randperm(n_samples, generator=generator).to(X.device)
            for batch in order.split(batch_size):
                masks = None
                if self._uses_masks:
                    masks = sample_masks(
                        self.mask_rate, (len(batch), self.n_masks), n_features, random_state=generator, device=X.device
                    )
                total += self._train_step(X[batch], masks, optimizer).sum()
            record = {"epoch": epoch, "objective": float(total) / n_samples + log_jacobian}
            with torch.no_grad():
                if monitor_masks is not None:
                    fixed = sum(
                        float(self._objective(X[i : i + batch_size], monitor_masks[i : i + batch_size]).sum())
                        for i in range(0, n_samples, batch_size)
                    )
                    record["objective_fixed_masks"] = fixed / n_samples + log_jacobian
                for key, value in self._epoch_diagnostics(X).items():
                    record[key] = value + log_jacobian
            progress = record.get("objective_fixed_masks", record["objective"])
            record["seconds"] = time.perf_counter() - start
            self.history_.append(record)
            if self.verbose:
                print(", ".join(f"{k}={v:.5g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.items()))
            if not math.isfinite(progress):
                raise FloatingPointError(
                    f"The training objective became {progress} at epoch {epoch}; lower "
                    f"learning_rate (now {self.learning_rate})."
                )
            if progress > best + self.tol:
                best, stall = progress, 0
            else:
                stall += 1
            if stall >= self.n_iter_no_change:
                # As scikit-learn's MLP with learning_rate="adaptive": a stall means the
                # step size, not the model, limits progress; stop once it has been cut enough.
                if lr_cuts == self._n_lr_cuts:
                    converged = True
                    break
                for group in optimizer.param_groups:
                    group["lr"] /= self._lr_cut_factor
                lr_cuts, stall = lr_cuts + 1, 0
        self.n_iter_ = epoch
        if not converged:
            warnings.warn(
                f"{type(self).__name__} stopped after max_epochs={self.max_epochs} epochs while the "
                f"objective was still improving by more than tol={self.tol}; raise max_epochs.",
                ConvergenceWarning,
                stacklevel=3,
            )

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
