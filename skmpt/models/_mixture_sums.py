r"""Masked sums of a diagonal Gaussian mixture for masks shared by the samples, by matrix products.

A masked token's conditional is a mixture, ``log p(x_j | x_r) = log sum_k exp(J_k + l_kj) -
log sum_k exp(J_k)``, with ``J_k = log pi_k + sum_{d in r} l_kd`` and ``l_kj`` the component's
log-density of the token. With ``a = max_k J_k`` and ``b_j = max_k l_kj``,

.. math::

    \log \sum_k e^{J_k + l_{kj}} = a + b_j + \log \sum_k e^{J_k - a}\, e^{l_{kj} - b_j},

and the sum over ``k`` is, per sample, a product of a ``(P, K)`` matrix with a ``(K, D)`` one:
the exponentials are taken ``n (P + D) K`` times instead of ``n P K D``. Every term of the sum
is at most one and the largest ``J_k`` gives one factor ``e^0``, so the sum only loses
precision when that component's density of the token is hundreds of nats below another's;
the sums are then refused (``None``) and the caller computes the reference.
"""

import torch

from .._utils import chunk_budget

__all__ = ["diagonal_mixture_sums"]

#: Below this a sum of exponentials is in (or near) the subnormal range and has lost digits.
_SMALLEST = 1e-280


def diagonal_mixture_sums(log_weights, token, masks, given):
    """``sum_{j in m_p} log p(x_j | x_{r_p})`` of shape ``(n, P)``, or None where it would lose precision.

    Parameters
    ----------
    log_weights : torch.Tensor of shape (K,)
    token : torch.Tensor of shape (n_samples, K, D)
        Each component's log-density of each token.
    masks, given : torch.Tensor of dtype bool and shape (P, D)
        The masked tokens and the conditioning sets (disjoint).

    Returns
    -------
    sums : torch.Tensor of shape (n_samples, P), or None

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import GaussianMixtureModule
    >>> from skmpt.models._mixture_sums import diagonal_mixture_sums
    >>> module = GaussianMixtureModule(torch.tensor([0.4, 0.6], dtype=torch.float64),
    ...     torch.tensor([[0.0, 1.0], [2.0, -1.0]], dtype=torch.float64), torch.ones(2, 2, dtype=torch.float64), "diag")
    >>> X, masks = torch.tensor([[0.5, 0.0]], dtype=torch.float64), torch.tensor([[True, False]])
    >>> token = torch.distributions.Normal(module.means, 1.0).log_prob(X.unsqueeze(1))
    >>> sums = diagonal_mixture_sums(module.log_weights, token, masks, ~masks)
    >>> bool(torch.allclose(sums, module.masked_log_prob(X, masks).sum(-1)))
    True
    """
    dtype = token.dtype
    masked = masks.to(dtype)
    joint = log_weights + (token @ given.to(dtype).T).transpose(1, 2)  # (n, P, K)
    top = joint.amax(-1, keepdim=True)  # (n, P, 1)
    best = token.amax(1, keepdim=True)  # (n, 1, D)
    scaled_joint, scaled_token = torch.exp(joint - top), torch.exp(token - best)
    # Samples a few at a time, so that the (rows, P, D) products stay in the cache.
    step = max(1, chunk_budget(1 / 64) // masked.numel())
    logs = []
    for start in range(0, token.shape[0], step):
        mixed = scaled_joint[start : start + step] @ scaled_token[start : start + step]  # (rows, P, D)
        if float(mixed.detach().amin()) < _SMALLEST:
            return None
        logs.append(mixed.log().mul_(masked).sum(-1))
    evidence = torch.logsumexp(joint, -1)  # log p(x_r), (n, P)
    sums = torch.cat(logs) + best.squeeze(1) @ masked.T
    return sums + masked.sum(-1) * (top.squeeze(-1) - evidence)
