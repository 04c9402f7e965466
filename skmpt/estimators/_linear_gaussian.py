"""What PPCA and factor analysis share as estimators: the loadings, mean and noise they fit, the
covariance and precision scikit-learn's decompositions report, and their initialisation."""

from numbers import Integral

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from ._base import _BaseMaskedEstimator
from ._criteria import _InformationCriteriaMixin, linear_gaussian_parameter_count
from ._spectrum import explained_variance

__all__ = []


class _BaseLinearGaussian(_InformationCriteriaMixin, _BaseMaskedEstimator):
    """Base of the linear-Gaussian estimators ``x = W z + mu + eps``: a subclass names its module
    class (``_module_class``) and whether the noise is one shared variance (``_isotropic``)."""

    _module_class = None
    _isotropic = True

    def _check_data(self, X):
        super()._check_data(X)
        n_features = X.shape[1]
        if isinstance(self.n_components, Integral) and self.n_components > n_features:
            raise ValueError(
                f"n_components={self.n_components} must be at most the number of features, but X "
                f"has {n_features} feature(s)."
            )

    def _build_module(self, X, generator):
        n_features = X.shape[1]
        # Small random loadings break the symmetry of W = 0 (a saddle point of every
        # objective); the data are standardised, so unit noise explains all variance at first.
        components = 0.1 * torch.randn(self.n_components_, n_features, generator=generator, dtype=X.dtype)
        noise = self._initial_noise(X)
        return self._module_class(components.to(X.device), X.new_zeros(n_features), noise)

    def _initial_noise(self, X):
        """The first noise variance(s) in the training units: one, all of the data's variance."""
        return X.new_ones(()) if self._isotropic else X.new_ones(X.shape[1])

    def _set_fitted_attributes(self):
        module = self.module_
        self.components_ = module.components.detach().cpu().numpy()
        self.mean_ = module.mean.detach().cpu().numpy().astype(np.float64) + self.offset_
        noise = module.noise_variance.detach().cpu().numpy()
        self.noise_variance_ = float(noise) if self._isotropic else noise
        components = self.components_.astype(np.float64)
        self.explained_variance_, self.explained_variance_ratio_ = explained_variance(
            components, np.asarray(noise, dtype=np.float64), self._isotropic
        )

    def _n_parameters(self):
        """Free parameters: ``D K - K (K - 1) / 2`` loadings (``W`` up to a rotation of ``z``),
        ``D`` means and one noise variance (PPCA) or ``D`` (factor analysis)."""
        check_is_fitted(self)
        n_features = self.n_features_in_
        n_noise = 1 if self._isotropic else n_features
        return linear_gaussian_parameter_count(n_features, self.n_components_, n_noise)

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
