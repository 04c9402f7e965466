"""What the array estimators compute from a fitted ``module_``: the cumulative MPT score, the
MPT curve, the conditionals, the log-marginal likelihood, the latent means, and pickling.

Fitting is :class:`skmpt.estimators._base._BaseMaskedEstimator`'s, which derives from this class.
"""

import copy
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .. import objectives
from .._utils import DTYPES, check_generator
from ._data import check_mask_array, check_missing, check_values
from ._missing import _MissingDataMixin
from ._weights import weighted_mean

__all__ = []


class _BaseFittedModel(_MissingDataMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Scoring, transforms and persistence of an estimator whose ``module_`` is a fitted
    :class:`skmpt.models.MaskedModel`; subclasses declare the hooks below when they differ."""

    def _likelihood(self):
        """``"gaussian"`` (data standardised for training) or ``"bernoulli"`` (binary data)."""
        return "gaussian"

    def _log_marginal_kwargs(self):
        """Keyword arguments of the module's ``log_marginal`` (e.g. a number of samples)."""
        return {}

    def _binarize_threshold(self):
        """Values above it become 1 and the others 0 before a Bernoulli model sees them; None: none."""
        return None

    # ------------------------------------------------------------------ data
    @property
    def _dtype(self):
        """The torch dtype of the fitted module, or the one ``dtype`` asks for before fit."""
        module = getattr(self, "module_", None)
        return DTYPES[self.dtype] if module is None else next(module.parameters()).dtype

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
        dtype = DTYPES[self.dtype] if reset else self._dtype
        X = np.asarray(X, dtype=np.float64)
        missing = check_missing(X, reset=reset)
        if reset:
            self.offset_ = self._offset(X.mean(0) if missing is None else np.nanmean(X, 0), dtype)
        # A copy (the subtraction makes one): torch cannot wrap read-only arrays without warning.
        X = X - self.offset_
        if missing is not None:
            X[missing] = 0.0
        X_t = torch.tensor(X, dtype=dtype, device=self.device_)
        threshold = self._binarize_threshold()
        if threshold is not None:
            X_t = (X_t > threshold).to(dtype)  # BernoulliNB's rule: above the threshold is 1
        check_values(X_t, self._likelihood())
        observed = None if missing is None else torch.as_tensor(~missing, device=self.device_)
        return X_t, observed

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
        return {"method": self.score_method, "score_masks": self.score_masks, "random_state": self.random_state}

    def _noise_generator(self):
        """A fresh generator from ``random_state`` for a stochastic module's noise, else None."""
        return check_generator(self.random_state) if self.module_.stochastic else None

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
                module, X_t, mask_rate, score_masks=score_masks, random_state=self.random_state
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
        return self._evaluate(
            X,
            lambda module, X_t, observed: objectives.log_marginal(
                module, X_t, generator=self._noise_generator(), observed=observed, **self._log_marginal_kwargs()
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
