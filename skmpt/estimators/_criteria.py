"""Information criteria of the estimators whose likelihood is exact: scikit-learn's mixtures'
``bic`` and ``aic``, from the closed-form log-marginal likelihood and the number of free
parameters each estimator states in ``_n_parameters``."""

import numpy as np

__all__ = []


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
        chain scoring) and ``n_parameters`` is ``_n_parameters()``, as scikit-learn's mixtures.

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
