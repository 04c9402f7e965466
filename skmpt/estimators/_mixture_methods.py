"""What a fitted mixture offers besides scoring, as :class:`~sklearn.mixture.GaussianMixture`
does: responsibilities, labels, ``fit_predict`` and sampling."""

import torch
from sklearn.utils.validation import check_is_fitted

from .._utils import check_generator
from .._validation import check_positive_int

__all__ = []


class _MixtureMethodsMixin:
    """``predict_proba``, ``predict``, ``fit_predict`` and ``sample`` of an estimator whose
    ``transform`` gives the responsibilities and whose ``module_`` samples labelled points."""

    def predict_proba(self, X):
        """Responsibilities: the posterior probability of each component given each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_components)
        """
        return self.transform(X)

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit, then return the most probable component of each training sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self.fit(X, sample_weight=sample_weight).predict(X)

    def predict(self, X):
        """The most probable component of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self.predict_proba(X).argmax(1)

    def sample(self, n_samples=1):
        """Draw samples from the fitted mixture.

        With an int ``random_state`` every call returns the same draws, as
        :meth:`sklearn.mixture.GaussianMixture.sample` does.

        Parameters
        ----------
        n_samples : int, default=1

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        labels : ndarray of shape (n_samples,)
            The component each sample was drawn from.
        """
        check_is_fitted(self)
        n_samples = check_positive_int(n_samples, "n_samples")
        with torch.no_grad():
            X, labels = self.module_.sample(int(n_samples), generator=check_generator(self.random_state))
        return X.cpu().numpy() + self.offset_, labels.cpu().numpy()
