r"""The linear-Gaussian masked sum with per-sample masks, with its gradient written out.

Training draws fresh masks for every sample, so every (sample, mask) pair has its own
conditioning set ``r`` and its own ``K x K`` posterior precision
``A = I + W^T diag(r / psi) W``. The sum over the masked tokens ``m`` of
``log N(x_j | mu_j + w_j^T z_bar, v_j)``, with ``C = A^{-1}``,
``z_bar = C W^T diag(r / psi) (x - mu)`` and ``v_j = psi_j + w_j^T C w_j``, takes about twenty
tensor operations; its gradient by autograd takes three times as many, each on tensors of a
few thousand numbers, so at the sizes a training step works on (hundreds of samples, a few
masks, tens of features) the cost is per operation, not arithmetic. :class:`MaskedGaussianSum`
computes the same sums and returns the gradient with respect to ``W``, ``mu``, ``psi`` (and
``x``) in about as many operations as the forward pass: the adjoint of each step, summed over
the samples and masks with matrix products.
"""

import math

import torch

__all__ = ["MaskedGaussianSum", "feature_outer_products", "masked_gaussian_sum"]


def feature_outer_products(components):
    """``w_d w_d^T`` for every feature (column ``w_d`` of ``components``, ``K x D``), flattened:
    ``(D, K * K)``. Products with it give every per-mask ``K x K`` statistic at once."""
    W = components.T
    return (W.unsqueeze(-1) * W.unsqueeze(-2)).flatten(1)


def _sums(components, mean, noise, X, masks, given):
    """The masked sums ``(n, P)`` and the intermediates their gradient needs, in torch operations
    that autograd can follow (for second derivatives)."""
    K = components.shape[0]
    W = components.T
    residual = X - mean
    scaled = given.to(X.dtype) / noise  # r_d / psi_d: the weight of token d in A and z_bar
    outer = feature_outer_products(components)
    precision = torch.eye(K, dtype=X.dtype, device=X.device) + (scaled @ outer).unflatten(-1, (K, K))
    # A >= I: well conditioned, so its explicit inverse (needed for every token's
    # predictive variance) is safe, and LU costs less than Cholesky and its inverse here.
    cov = torch.linalg.inv(precision)
    projected = (scaled * residual.unsqueeze(1)) @ W  # W^T diag(r / psi) e, (n, P, K)
    z_mean = (cov @ projected.unsqueeze(-1)).squeeze(-1)
    variance = noise + cov.flatten(-2) @ outer.T
    error = residual.unsqueeze(1) - z_mean @ components
    masked = masks.to(X.dtype)
    inv_var = masked / variance
    terms = (masked * variance.log()).add_(inv_var * error.square()).sum(-1)
    sums = -0.5 * terms.add_(masks.sum(-1), alpha=math.log(2 * math.pi))
    return sums, (W, outer, residual, scaled, cov, projected, z_mean, inv_var, error)


class MaskedGaussianSum(torch.autograd.Function):
    """``sum_{j in m} log p(x_j | x_r)`` of the linear-Gaussian model, per sample and mask.

    ``forward(components, mean, noise, X, masks, given)``: ``components`` ``(K, D)`` (``W^T``),
    ``mean`` and ``noise`` (the variances ``psi``) ``(D,)``, ``X`` ``(n, D)``, ``masks`` and
    ``given`` (the conditioning sets) boolean ``(n, P, D)``; returns ``(n, P)``. The backward
    pass is analytic; under ``create_graph=True`` (a Hessian, a gradient penalty) it is
    autograd's gradient of the same sums instead, so that it can be differentiated again.
    """

    @staticmethod
    def forward(ctx, components, mean, noise, X, masks, given):
        sums, saved = _sums(components, mean, noise, X, masks, given)
        ctx.save_for_backward(components, mean, noise, X, masks, given, *saved)
        return sums

    @staticmethod
    def backward(ctx, grad):
        components, mean, noise, X, masks, given, *saved = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: a gradient that is itself differentiable
            return _differentiable_gradient(ctx, grad, (components, mean, noise, X), masks, given)
        W, outer, residual, scaled, cov, projected, z_mean, inv_var, error = saved
        D, K = W.shape
        weight = -grad.unsqueeze(-1)
        scaled_error = inv_var * error
        grad_error = weight * scaled_error
        grad_variance = 0.5 * weight * (inv_var - scaled_error.square())  # of -(log v_j + err_j^2 / v_j) / 2
        grad_z = -(grad_error @ W)  # through err = e - W z_bar
        grad_projected = (cov @ grad_z.unsqueeze(-1)).squeeze(-1)  # z_bar = C p, C symmetric
        # dC, symmetrised: from z_bar = C p and from v_j = psi_j + w_j^T C w_j.
        grad_cov = grad_z.unsqueeze(-1) * projected.unsqueeze(-2)
        grad_cov = 0.5 * (grad_cov + grad_cov.transpose(-1, -2)) + (grad_variance @ outer).unflatten(-1, (K, K))
        grad_precision = -(cov @ grad_cov @ cov)  # C = A^{-1}
        back = grad_projected @ W.T  # w_d^T dp, (n, P, D)
        # d/ds_d of A (w_d^T dA w_d) and of p (e_d w_d^T dp), with s = r / psi.
        grad_scaled = (grad_precision.flatten(-2) @ outer.T) + residual.unsqueeze(1) * back
        flat = (-1, D)
        # dW: from err (-dErr z_bar^T), v (2 dv_j C w_j), A (2 s_d dA w_d) and p (s_d e_d dp).
        quadratic = grad_variance.reshape(flat).T @ cov.reshape(-1, K * K)
        quadratic += scaled.reshape(flat).T @ grad_precision.reshape(-1, K * K)
        grad_W = 2 * (quadratic.view(D, K, K) @ W.unsqueeze(-1)).squeeze(-1)
        grad_W -= grad_error.reshape(flat).T @ z_mean.reshape(-1, K)
        grad_W += (scaled * residual.unsqueeze(1)).reshape(flat).T @ grad_projected.reshape(-1, K)
        grad_residual = (grad_error + scaled * back).sum(1)
        grad_noise = grad_variance.reshape(flat).sum(0) - (scaled * grad_scaled).reshape(flat).sum(0) / noise
        grad_X = grad_residual if ctx.needs_input_grad[3] else None
        return grad_W.T, -grad_residual.sum(0), grad_noise, grad_X, None, None


def _differentiable_gradient(ctx, grad, inputs, masks, given):
    """The gradient of the masked sums with respect to ``inputs`` by autograd, with its graph."""
    wanted = [i for i in range(len(inputs)) if ctx.needs_input_grad[i]]
    sums = _sums(*inputs, masks, given)[0]
    grads = torch.autograd.grad(sums, [inputs[i] for i in wanted], grad, create_graph=True, allow_unused=True)
    out = [None] * 6
    for i, value in zip(wanted, grads, strict=True):
        out[i] = value
    return tuple(out)


def masked_gaussian_sum(components, mean, noise, X, masks, given):
    """:class:`MaskedGaussianSum` applied: ``(n, P)`` sums of the masked tokens' log-densities.

    Parameters
    ----------
    components : torch.Tensor of shape (K, D)
    mean : torch.Tensor of shape (D,)
    noise : torch.Tensor of shape (D,)
        The noise variances (an isotropic one expanded to ``(D,)``).
    X : torch.Tensor of shape (n, D)
    masks, given : torch.Tensor of dtype bool and shape (n, P, D)
        The masked tokens and the conditioning set of each sample's masks.

    Returns
    -------
    sums : torch.Tensor of shape (n, P)

    Examples
    --------
    The sum equals the conditional densities of ``N(mu, W W^T + Psi)`` summed over the masked tokens:

    >>> import torch
    >>> from skmpt.models._masked_gaussian import masked_gaussian_sum
    >>> W, mean = torch.tensor([[1.0, 0.5, -0.3]], dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    >>> noise = torch.tensor([0.2, 1.0, 3.0], dtype=torch.float64)
    >>> X, masks = torch.ones(1, 3, dtype=torch.float64), torch.tensor([[[True, False, False]]])
    >>> S = W.T @ W + torch.diag(noise)
    >>> gain = S[0, 1:] @ torch.linalg.inv(S[1:, 1:])
    >>> exact = torch.distributions.Normal(gain @ X[0, 1:], (S[0, 0] - gain @ S[1:, 0]).sqrt()).log_prob(X[0, 0])
    >>> bool(torch.isclose(masked_gaussian_sum(W, mean, noise, X, masks, ~masks)[0, 0], exact))
    True
    """
    return MaskedGaussianSum.apply(components, mean, noise, X, masks, given)
