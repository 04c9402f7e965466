"""Imputation by the array estimators: ``impute`` (the conditional mean of the missing entries)
and ``sample_missing`` (draws from their conditional distribution), from a fitted ``module_``."""

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted, validate_data

from .._utils import check_generator
from .._validation import check_positive_int

__all__ = []


class _MissingDataMixin:
    """``impute`` and ``sample_missing`` of :class:`~skmpt.estimators._scoring._BaseFittedModel`.

    The module has ``impute(X, observed)`` and ``sample_missing(X, observed, n_draws,
    generator=)`` (optional methods of :class:`skmpt.models.MaskedModel`); the estimator
    validates ``X`` (NaN for a missing entry), maps the result back to ``X``'s units and puts
    the observed entries back from ``X`` itself.
    """

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
