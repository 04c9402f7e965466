"""Diagnostics of MaskedVAE's importance-sampled masked conditionals ``p(x_j | x_r)``.

With ``conditional="importance"`` each conditional is a self-normalised importance-sampling
estimate ``p_hat = sum_s w_s p(x_j | z_s)`` from ``S = n_particles`` particles whose weights
``w_s`` (normalised) depend on the sample and the mask, not on the predicted token ``j``.
"""

import warnings

import torch
from sklearn.utils import Bunch

from ..models import importance_diagnostics, pareto_k_threshold


def conditional_diagnostics(log_weights, token_log_prob, masks, log_prob):
    """Per-sample-and-mask ESS, Pareto ``k_hat`` and reliability, per-token standard error.

    ``log_weights`` ``(n, P, S)`` (normalised), ``token_log_prob`` ``(n, P, S, D)``, ``masks``
    and ``log_prob`` ``(n, P, D)``: torch tensors. The standard error of ``log p_hat`` is the
    delta-method one of a self-normalised estimate (Owen, 2013, eq. 9.8),
    ``sqrt(sum_s w_s^2 (p(x_j | z_s) / p_hat - 1)^2)``; zero at unmasked tokens.
    """
    n_samples, n_masks, n_particles = log_weights.shape
    flat = importance_diagnostics(log_weights.reshape(-1, n_particles).cpu().numpy())
    ratio = torch.expm1(token_log_prob - log_prob.unsqueeze(-2))  # p(x_j | z_s) / p_hat - 1
    variance = (torch.exp(2 * log_weights).unsqueeze(-1) * ratio.square()).sum(-2)
    standard_error = torch.where(masks, variance.sqrt(), torch.zeros_like(variance))
    return Bunch(
        log_prob=log_prob.cpu().numpy(),
        ess=flat["ess"].reshape(n_samples, n_masks),
        standard_error=standard_error.cpu().numpy(),
        pareto_k=flat["pareto_k"].reshape(n_samples, n_masks),
        reliable=flat["reliable"].reshape(n_samples, n_masks),
        threshold=pareto_k_threshold(n_particles),
    )


def warn_unreliable_conditionals(diagnostics, n_particles, stacklevel=3):
    """The documented rule: warn when a (sample, mask)'s ``k_hat`` is above the threshold."""
    n_unreliable = int((~diagnostics.reliable).sum())
    if n_unreliable:
        warnings.warn(
            f"The importance-sampled conditionals of {n_unreliable} of {diagnostics.reliable.size} "
            f"(sample, mask) pair(s) are unreliable: Pareto k_hat above {diagnostics.threshold:.2f} with "
            f"n_particles={n_particles} (inf: too few particles to fit the tail, at least 20 needed). "
            f"Raise n_particles; if k_hat stays high, the encoder is a poor proposal given those masks.",
            UserWarning,
            stacklevel=stacklevel,
        )
    return diagnostics
