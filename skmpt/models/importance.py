"""Diagnostics of importance-sampled estimates: the effective sample size of the weights, the
delta-method standard error of ``log p_hat``, and the Pareto ``k_hat`` of their tail (PSIS;
Vehtari, Simpson, Gelman, Yao and Gabry, 2024), fitted as Zhang and Stephens (2009).

All functions take log-weights of shape ``(n, S)``, one row per estimate, in NumPy float64.
"""

import math

import numpy as np

__all__ = [
    "effective_sample_size",
    "importance_diagnostics",
    "log_mean_standard_error",
    "pareto_k_threshold",
    "pareto_khat",
]


def _normalised(log_weights):
    weights = np.exp(log_weights - log_weights.max(1, keepdims=True))
    return weights / weights.sum(1, keepdims=True)


def effective_sample_size(log_weights):
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` per row, in ``[1, S]``.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.models.importance import effective_sample_size
    >>> effective_sample_size(np.log(np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1e-300, 1e-300]])))
    array([4., 2.])
    """
    return 1.0 / np.square(_normalised(log_weights)).sum(1)


def log_mean_standard_error(log_weights):
    """Delta-method standard error of ``log(mean(w))`` per row.

    ``Var(mean w) = s^2 / S`` with ``s^2`` the unbiased sample variance of the weights, so
    ``se(log mean w) = s / (sqrt(S) mean w) = sqrt((S / ESS - 1) / (S - 1))``; NaN for ``S = 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.models.importance import log_mean_standard_error
    >>> log_mean_standard_error(np.zeros((1, 10)))  # equal weights: no spread
    array([0.])
    """
    n_draws = log_weights.shape[1]
    if n_draws < 2:
        return np.full(log_weights.shape[0], np.nan)
    relative = n_draws / effective_sample_size(log_weights) - 1.0
    return np.sqrt(np.maximum(relative, 0.0) / (n_draws - 1))


def _generalized_pareto_shape(exceedances):
    """Zhang and Stephens's (2009) posterior-mean fit of a generalised Pareto to each row of
    positive, ascending ``exceedances`` (``(n, M)``); the shape ``k`` with PSIS's weakly
    informative prior (``M k + 10 * 0.5) / (M + 10)`` (Vehtari et al., 2024)."""
    n_tail = exceedances.shape[1]
    n_grid = 30 + int(math.sqrt(n_tail))
    quartile = exceedances[:, int(n_tail / 4 + 0.5) - 1]
    grid = 1 - np.sqrt(n_grid / (np.arange(1, n_grid + 1) - 0.5))  # (G,)
    theta = grid / (3 * quartile[:, None]) + 1 / exceedances[:, -1:]  # (n, G)
    k = np.log1p(-theta[:, :, None] * exceedances[:, None, :]).mean(-1)  # (n, G)
    profile = n_tail * (np.log(-theta / k) - k - 1)
    weights = 1 / np.exp(profile[:, None, :] - profile[:, :, None]).sum(-1)
    weights = np.where(weights >= 10 * np.finfo(float).eps, weights, 0.0)
    theta_mean = (theta * weights).sum(1) / weights.sum(1)
    shape = np.log1p(-theta_mean[:, None] * exceedances).mean(1)
    return (n_tail * shape + 10 * 0.5) / (n_tail + 10)


def pareto_khat(log_weights):
    """PSIS's Pareto ``k_hat`` per row: the shape of a generalised Pareto fitted to the
    ``M = ceil(min(S / 5, 3 sqrt(S)))`` largest weights above the next one.

    ``k_hat < 0.5``: the weights have a finite variance, the estimate converges at the
    Monte Carlo rate; above :func:`~skmpt.models.importance.pareto_k_threshold` (0.7 for ``S >= 2200``) too few draws
    land where the integrand's mass is, and the estimate is unreliable. Inf when fewer than
    five weights are in the tail (``S <= 20``: the tail needs at least 21 draws) or the tail is flat.

    Parameters
    ----------
    log_weights : ndarray of shape (n, S)

    Returns
    -------
    khat : ndarray of shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.models.importance import pareto_khat
    >>> rng = np.random.RandomState(0)
    >>> light = 0.3 * rng.randn(1, 2000)                        # log-normal weights, light tail
    >>> heavy = np.log(rng.pareto(1.25, size=(1, 2000)) + 1)    # Pareto tail of shape 0.8
    >>> bool(pareto_khat(light)[0] < 0.5), bool(pareto_khat(heavy)[0] > 0.7)
    (True, True)
    """
    n_rows, n_draws = log_weights.shape
    n_tail = int(math.ceil(min(0.2 * n_draws, 3 * math.sqrt(n_draws))))
    if n_tail < 5:
        return np.full(n_rows, np.inf)
    ordered = np.sort(log_weights - log_weights.max(1, keepdims=True), axis=1)
    exceedances = np.exp(ordered[:, -n_tail:]) - np.exp(ordered[:, -n_tail - 1 : -n_tail])
    khat = np.full(n_rows, np.inf)
    fit = exceedances[:, 0] > 0  # ties at the cutoff leave no tail to fit
    if fit.any():
        khat[fit] = _generalized_pareto_shape(exceedances[fit])
    return khat


def pareto_k_threshold(n_draws):
    """Above this ``k_hat`` an importance-sampled estimate from ``n_draws`` draws is unreliable:
    ``min(1 - 1 / log10(S), 0.7)`` (Vehtari et al., 2024, section 3.2.4)."""
    return min(1 - 1 / math.log10(n_draws), 0.7) if n_draws > 10 else 0.0


def importance_diagnostics(log_weights):
    """Estimate and diagnostics of ``log mean(w)`` per row of ``log_weights`` ``(n, S)``.

    Returns a dict of arrays of shape ``(n,)``: ``log_mean`` (the estimate), ``ess``
    (the effective sample size ``(sum w)^2 / sum w^2``), ``standard_error`` (its delta-method
    standard error),
    ``pareto_k`` (:func:`~skmpt.models.importance.pareto_khat`), and ``reliable`` (``pareto_k`` at most
    :func:`~skmpt.models.importance.pareto_k_threshold` of ``S``).

    Parameters
    ----------
    log_weights : array-like of shape (n, S)
        ``log w``, e.g. :meth:`VAEModule.log_importance_weights`.

    Returns
    -------
    diagnostics : dict of ndarray of shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.models import importance_diagnostics
    >>> log_weights = np.array([[0.0, 0.0, 0.0, 0.0], [np.log(4.0), -np.inf, -np.inf, -np.inf]])
    >>> d = importance_diagnostics(log_weights)
    >>> d["ess"], np.exp(d["log_mean"])
    (array([4., 1.]), array([1., 1.]))
    >>> d["standard_error"].round(3)
    array([0., 1.])
    """
    log_weights = np.asarray(log_weights, dtype=np.float64)
    n_draws = log_weights.shape[1]
    top = log_weights.max(1)
    log_mean = top + np.log(np.exp(log_weights - top[:, None]).sum(1)) - math.log(n_draws)
    khat = pareto_khat(log_weights)
    return {
        "log_mean": log_mean,
        "ess": effective_sample_size(log_weights),
        "standard_error": log_mean_standard_error(log_weights),
        "pareto_k": khat,
        "reliable": khat <= pareto_k_threshold(n_draws),
    }
