"""How :class:`~skmpt.estimators.MaskedGaussianMixture` starts: GaussianMixture's
``init_params`` (responsibilities from k-means, k-means++ centres, random numbers or random
samples, then each component's proportion, mean and covariance), a warm start from the
previous fit, and ``n_init`` restarts of which the most likely is kept."""

import warnings

import numpy as np
import torch
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning

__all__ = ["INIT_PARAMS", "best_of_inits", "initial_parameters", "sklearn_covariances"]

INIT_PARAMS = ("kmeans", "k-means++", "random", "random_from_data")

# Added to the diagonal of each initial covariance, as GaussianMixture's default reg_covar:
# a cluster of one point (or of identical points) still gets a positive definite covariance.
_INIT_REG_COVAR = 1e-6


def _responsibilities(data, n_components, init_params, seed):
    """Initial responsibilities ``(n, K)`` of the (standardised) training data, a NumPy array."""
    n_samples = data.shape[0]
    if init_params == "kmeans":
        labels = KMeans(n_components, n_init=1, random_state=seed).fit(data).labels_
        return np.eye(n_components)[labels]
    rng = np.random.RandomState(seed)
    if init_params == "random":
        resp = rng.uniform(size=(n_samples, n_components))
        return resp / resp.sum(1, keepdims=True)
    if init_params == "k-means++":
        centres = kmeans_plusplus(data, n_components, random_state=rng)[0]
    else:  # "random_from_data"
        centres = data[rng.choice(n_samples, size=n_components, replace=False)]
    # GaussianMixture gives the chosen samples all the responsibility, and EM's first step
    # spreads it; a gradient start from covariances of reg_covar alone would not move, so
    # every sample goes to its nearest chosen centre.
    distances = ((data[:, None, :] - centres[None]) ** 2).sum(-1)
    return np.eye(n_components)[distances.argmin(1)]


def initial_parameters(X, n_components, covariance_type, init_params, seed):
    """``(weights, means, covariances)`` from the initial responsibilities, as GaussianMixture's
    M-step computes them (``covariances`` in the module's layout of ``covariance_type``)."""
    resp = X.new_tensor(_responsibilities(X.cpu().numpy(), n_components, init_params, seed))  # (n, K)
    counts = resp.sum(0) + 10 * torch.finfo(X.dtype).eps  # guard against empty clusters
    means = (resp.T @ X) / counts.unsqueeze(-1)
    residual = X.unsqueeze(1) - means  # (n, K, D)
    eye = torch.eye(X.shape[1], dtype=X.dtype, device=X.device)
    if covariance_type == "full":
        covariances = torch.einsum("nk,nkd,nke->kde", resp, residual, residual) / counts.view(-1, 1, 1)
        covariances = covariances + _INIT_REG_COVAR * eye
    elif covariance_type == "tied":  # GaussianMixture's: the pooled within-cluster covariance
        covariances = torch.einsum("nk,nkd,nke->de", resp, residual, residual) / counts.sum()
        covariances = covariances + _INIT_REG_COVAR * eye
    else:
        covariances = torch.einsum("nk,nkd->kd", resp, residual.square()) / counts.unsqueeze(-1)
        covariances = covariances + _INIT_REG_COVAR
        if covariance_type == "spherical":  # GaussianMixture's: the mean of the diagonal
            covariances = covariances.mean(-1)
    return counts / counts.sum(), means, covariances


def best_of_inits(estimator, fit_once, seeds, X, sample_weight):
    """Fit ``estimator`` once per seed (``fit_once(candidate)`` fits a candidate) and keep the fit
    of highest (weighted) mean exact log-likelihood on ``X``, as GaussianMixture keeps the best
    of its ``n_init`` runs. ``estimator`` itself is the first run, with its own ``random_state``;
    the others are clones with ``random_state`` set to the next seeds. Returns ``estimator``,
    holding the best fit and its own parameters."""
    from sklearn.base import clone

    def lml(candidate):
        values = candidate.log_marginal_likelihood(X)
        return float(np.average(values, weights=sample_weight))

    fit_once(estimator)
    best_state, best = dict(estimator.__dict__), lml(estimator)
    params = estimator.get_params(deep=False)
    for seed in seeds:
        candidate = clone(estimator).set_params(n_init=1, random_state=int(seed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # warned about by the first run only
            fit_once(candidate)
        value = lml(candidate)
        if value > best:
            best_state, best = dict(candidate.__dict__), value
    estimator.__dict__.update(best_state)
    estimator.set_params(**params)
    return estimator


def sklearn_covariances(module):
    """``(covariances_, precisions_cholesky_, precisions_)`` of a fitted module in
    GaussianMixture's layout: a tied covariance once, a spherical one as one number per
    component; precision factors upper triangular ``L^{-T}`` (full, tied) or
    ``1 / sqrt(variance)`` (diag, spherical), and the precisions they factor."""
    covariances = module.covariances()
    if module.covariance_type in ("full", "tied"):
        factor = module.cholesky()
        eye = torch.eye(factor.shape[-1], dtype=factor.dtype, device=factor.device)
        precisions_cholesky = torch.linalg.solve_triangular(factor, eye, upper=False).mT
    else:
        precisions_cholesky = (-0.5 * module.log_variances).exp().expand_as(covariances)
    layout = {"tied": lambda a: a[0], "spherical": lambda a: a[:, 0]}.get(module.covariance_type, lambda a: a)
    precisions_cholesky = layout(precisions_cholesky)
    if module.covariance_type in ("full", "tied"):
        precisions = precisions_cholesky @ precisions_cholesky.mT
    else:
        precisions = precisions_cholesky.square()
    return layout(covariances).cpu().numpy(), precisions_cholesky.cpu().numpy(), precisions.cpu().numpy()
