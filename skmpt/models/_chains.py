r"""Chain-rule terms of Gaussian models from one factorisation per ordering, for all samples at once.

Along an ordering, each step predicts one token from the tokens revealed before it. For a
Gaussian the coefficients of these conditionals do not depend on ``x``: the step's variance
and the weights of its conditional mean on the earlier tokens are fixed by the ordering, so
they are computed once per ordering and applied to every sample as matrix products.

- A linear-Gaussian model (``x = W z + mu + noise``) predicts token ``s_t`` of an ordering
  ``s`` from the posterior of ``z`` given the tokens revealed before it, ``s_{t+1:D}``: with
  ``C_t = (I + sum_{d > t} w_d w_d^T / psi_d)^{-1}`` and ``a_t = C_t w_t`` (indices along the
  ordering), the prediction is ``a_t^T sum_{d > t} w_d e_d / psi_d`` and the variance
  ``psi_t + w_t^T a_t``. The predictions are the product of the residuals with a strictly
  upper-triangular matrix of rank ``K`` above its diagonal, ``B_{td} = a_t^T w_d / psi_d``: a
  block of ``b`` steps takes its own ``b x b`` corner of ``B`` and the sum over all later
  blocks as a ``K``-vector per sample, so the products cost ``O(n D (2 K + b))`` instead of
  the ``O(n D^2)`` of ``B``.
- A Gaussian ``N(mu, Sigma)`` (a mixture's component) has, for the ordering's permutation
  ``Sigma' = L L^T`` (Cholesky), the conditional of the ``i``-th revealed token
  ``N(mu'_i + sum_{j < i} L_ij z_j, L_ii^2)`` with ``z = L^{-1} (x' - mu')``: one triangular
  solve per ordering and component, as the closed-form density takes per component.
  A mixture's step is then ``log sum_k pi_k p_k(x_{<=i}) - log sum_k pi_k p_k(x_{<i})``,
  differences of a cumulative log-sum-exp over the components' prefix log-densities.

An entry outside a pattern ``seen`` of shape ``(D,)`` (shared by the samples) is skipped:
its term is zero and nothing is conditioned on it.
"""

import math

import torch

from .contract import gaussian_log_prob
from .imputation import decoupled_covariance

__all__ = ["gaussian_chain", "linear_gaussian_chain", "mixture_chain"]

#: Steps per block of the triangular product of :func:`linear_gaussian_chain`: large
#: enough for efficient matrix products, small against ``D`` so that the work stays
#: ``O(n D (2 K + b))``.
BLOCK = 32


def _exclusive_cumsum(values, dim):
    """``out[i] = sum_{j < i} values[j]`` along ``dim``, exactly (no subtraction)."""
    shifted = values.narrow(dim, 0, values.shape[dim] - 1)
    zeros = values.new_zeros(*values.shape[:dim], 1, *values.shape[dim + 1 :])
    return torch.cat([zeros, shifted], dim).cumsum(dim)


def _upper_product(residual, left, right, block=BLOCK):
    """``residual[n, o, t] - sum_{d > t} (left[o, t] . right[o, d]) residual[n, o, d]``.

    ``residual`` has shape ``(n, O, D)``, ``left`` and ``right`` ``(O, D, K)``: the product
    with a strictly upper-triangular ``D x D`` matrix of rank ``K`` per ordering, by blocks of
    ``block`` columns from the last: a block takes its own corner and the later blocks' sum
    ``sum_d right[o, d] residual[n, o, d]``, ``K`` numbers per sample.
    """
    n_samples, n_orderings, n_features = residual.shape
    K = left.shape[-1]
    eye = torch.eye(min(block, n_features), dtype=residual.dtype, device=residual.device)
    out = torch.empty_like(residual)
    for o in range(n_orderings):
        later = residual.new_zeros(n_samples, K)
        for stop in range(n_features, 0, -block):
            start = max(0, stop - block)
            a, w = left[o, start:stop], right[o, start:stop]
            part = residual[:, o, start:stop]
            # [e - (within-block prediction) | the block's sum for the earlier blocks]
            coefficients = torch.cat([eye[: stop - start, : stop - start] - (a @ w.T).triu(1).T, w], dim=1)
            product = part @ coefficients
            if stop < n_features:
                product[:, : stop - start].addmm_(later, a.T, alpha=-1)
            later = later + product[:, stop - start :]
            out[:, o, start:stop] = product[:, : stop - start]
    return out


def linear_gaussian_chain(residual, components, noise_variance, orderings, seen=None):
    """Chain-rule terms of ``x = W z + mu + noise`` for shared orderings, shape ``(n, O, D)``.

    Parameters
    ----------
    residual : torch.Tensor of shape (n_samples, n_features)
        ``x - mu``.
    components : torch.Tensor of shape (n_components, n_features)
        ``W^T``.
    noise_variance : torch.Tensor of shape () or (n_features,)
    orderings : torch.Tensor of dtype long and shape (n_orderings, n_features)
        ``orderings[o, t]`` is predicted at step ``t``, from ``orderings[o, t + 1:]``.
    seen : torch.Tensor of dtype bool and shape (n_features,), default=None
        Entries outside it are skipped (``None``: none is).

    Returns
    -------
    terms : torch.Tensor of shape (n_samples, n_orderings, n_features)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import PPCAModule
    >>> from skmpt.models._chains import linear_gaussian_chain
    >>> W = torch.tensor([[1.0, 0.5, -0.3]], dtype=torch.float64)
    >>> module = PPCAModule(W, torch.zeros(3, dtype=torch.float64), 0.5)
    >>> X = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> terms = linear_gaussian_chain(X, module.components, module.noise_variance, torch.tensor([[2, 0, 1]]))
    >>> bool(torch.allclose(terms.sum(-1).squeeze(1), module.log_marginal(X)))
    True
    """
    n_features = residual.shape[1]
    K = components.shape[0]
    W = components.T[orderings]  # (O, D, K), in the orderings' order
    psi = noise_variance.expand(n_features)[orderings]  # (O, D)
    weighted = W / psi.unsqueeze(-1)
    if seen is not None:
        weighted = weighted * seen[orderings].unsqueeze(-1)
    # The precision of z before step t: I + sum_{d > t} w_d w_d^T / psi_d, (O, D, K, K).
    precision = _exclusive_cumsum((W.unsqueeze(-1) * weighted.unsqueeze(-2)).flip(1), 1).flip(1)
    precision += torch.eye(K, dtype=residual.dtype, device=residual.device)
    gain = torch.cholesky_solve(W.unsqueeze(-1), torch.linalg.cholesky(precision)).squeeze(-1)  # C_t w_t
    variance = psi + (W * gain).sum(-1)
    index = orderings.reshape(1, -1).expand(residual.shape[0], -1)
    error = _upper_product(residual.gather(1, index).view(-1, *orderings.shape), gain, weighted)
    terms = gaussian_log_prob(error, variance)
    return terms if seen is None else terms * seen[orderings]


def gaussian_chain(residual, covariance, orderings, seen=None):
    """Per-step ``log N`` of the tokens in reveal order given the earlier ones, per component.

    Parameters
    ----------
    residual : torch.Tensor of shape (n_components, n_features, n_samples)
        ``x - mu_k``, the samples last.
    covariance : torch.Tensor of shape (n_components, n_features, n_features)
    orderings : torch.Tensor of dtype long and shape (n_orderings, n_features)
    seen : torch.Tensor of dtype bool and shape (n_features,), default=None

    Returns
    -------
    log_prob : torch.Tensor of shape (n_orderings, n_components, n_features, n_samples)
        Step ``i`` predicts ``orderings[:, D - 1 - i]`` (the reveal order); zero outside ``seen``.
    """
    reveal = orderings.flip(-1)
    if seen is not None:
        # Unseen rows and columns replaced by the identity: they decouple, and nothing is
        # conditioned on them.
        covariance = decoupled_covariance(covariance, seen)
        residual = residual * seen.to(residual.dtype).unsqueeze(-1)
    permuted = covariance[:, reveal.unsqueeze(-1), reveal.unsqueeze(-2)].transpose(0, 1)  # (O, K, D, D)
    factor = torch.linalg.cholesky(permuted)
    revealed = residual[:, reveal].transpose(0, 1)  # (O, K, D, n)
    whitened = torch.linalg.solve_triangular(factor, revealed, upper=False)
    constant = 0.5 * math.log(2 * math.pi) + factor.diagonal(dim1=-2, dim2=-1).log()  # (O, K, D)
    log_prob = whitened.square().mul_(-0.5).sub_(constant.unsqueeze(-1))
    if seen is not None:
        log_prob = log_prob * seen[reveal].unsqueeze(1).unsqueeze(-1)
    return log_prob


def mixture_chain(log_weights, log_prob):
    """Chain-rule terms of a mixture from its components' per-step log-densities.

    Parameters
    ----------
    log_weights : torch.Tensor of shape (n_components,)
    log_prob : torch.Tensor of shape (n_orderings, n_components, n_features, n_samples)
        Each component's ``log p_k(x_i | x_{<i})`` in reveal order.

    Returns
    -------
    terms : torch.Tensor of shape (n_samples, n_orderings, n_features)
        In the orderings' order (step ``t`` predicts ``orderings[:, t]``).
    """
    joint = log_prob.cumsum(2).add_(log_weights.view(-1, 1, 1))  # log pi_k p_k(x_{<=i})
    evidence = torch.logsumexp(joint, 1)  # (O, D, n)
    before = torch.logsumexp(log_weights, -1).expand(evidence.shape[0], 1, evidence.shape[-1])
    return torch.diff(evidence, dim=1, prepend=before).flip(1).permute(2, 0, 1)
