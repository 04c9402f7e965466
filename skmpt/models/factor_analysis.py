r"""Factor analysis as a torch module with exact masked conditionals.

The model (scikit-learn's :class:`~sklearn.decomposition.FactorAnalysis`) is

.. math::

    x = W z + \mu + \varepsilon, \qquad z \sim \mathcal N(0, I_K), \qquad
    \varepsilon \sim \mathcal N(0, \Psi), \quad \Psi = \mathrm{diag}(\psi_1, \dots, \psi_D),

so ``p(x) = N(x | mu, W W^T + Psi)``. The masked conditionals go through the posterior of
``z`` given the observed tokens ``x_r``, each token weighted by its own noise precision:

.. math::

    A_r = I + \sum_{d \in r} w_d w_d^\top / \psi_d, \quad
    \bar z = A_r^{-1} \sum_{d \in r} w_d (x_d - \mu_d) / \psi_d, \quad
    x_j \mid x_r \sim \mathcal N(\mu_j + w_j^\top \bar z,\; \psi_j + w_j^\top A_r^{-1} w_j).

Along a chain of nested masks, revealing token ``j`` is a Kalman update of ``z``'s posterior
``N(m, C)`` with observation noise ``psi_j`` (not PPCA's single ``sigma^2``):
``s = psi_j + w_j^T C w_j``, ``g = C w_j / s``, ``m <- m + g (x_j - mu_j - w_j^T m)``,
``C <- C - s g g^T``. The log-marginal likelihood uses the capacitance (Woodbury) form:
``log det(W W^T + Psi) = sum_d log psi_d + log det(I + W^T Psi^{-1} W)``.
"""

import math

import torch

from ._base import MaskedModel
from .ppca import _batch, _project

__all__ = ["FactorAnalysisModule"]


class FactorAnalysisModule(MaskedModel):
    """Factor analysis with learnable ``W``, ``mu`` and ``psi`` and exact masked conditionals.

    Parameters
    ----------
    components : torch.Tensor of shape (n_components, n_features)
        ``W^T``, in scikit-learn's layout (rows are the factors' loadings).
    mean : torch.Tensor of shape (n_features,)
    noise_variance : torch.Tensor of shape (n_features,)
        ``psi > 0``, one variance per feature; stored as logarithms so that gradient steps
        keep them positive.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import FactorAnalysisModule
    >>> from skmpt.testing import assert_mpt_identity
    >>> W = torch.tensor([[1.0, 0.5, -0.3]], dtype=torch.float64)
    >>> psi = torch.tensor([0.2, 1.0, 3.0], dtype=torch.float64)
    >>> module = FactorAnalysisModule(W, torch.zeros(3, dtype=torch.float64), psi)
    >>> X = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> assert_mpt_identity(module, X)
    """

    def __init__(self, components, mean, noise_variance):
        super().__init__()
        self.components = torch.nn.Parameter(components)
        self.mean = torch.nn.Parameter(mean)
        noise = torch.as_tensor(noise_variance, dtype=mean.dtype, device=mean.device)
        self.log_noise_variance = torch.nn.Parameter(noise.expand(mean.shape).log().clone())

    @property
    def noise_variance(self):
        """``psi``, shape ``(n_features,)``."""
        return self.log_noise_variance.exp()

    @property
    def n_features(self):
        return self.components.shape[1]

    def unstandardize_(self, center, scale):
        """Map parameters fitted on ``(x - center) / scale`` back to the units of ``x``.

        ``scale`` is one positive number or one per feature: factor analysis is closed under
        diagonal scaling, ``W -> diag(scale) W``, ``mu -> center + scale mu``,
        ``psi -> scale^2 psi``. In place; returns self.
        """
        self.components.mul_(scale)
        self.mean.mul_(scale).add_(center)
        self.log_noise_variance.add_(2 * torch.log(scale))
        return self

    def _outer(self):
        """``w_d w_d^T`` for every feature, flattened: shape ``(D, K * K)``."""
        W = self.components.T
        return (W.unsqueeze(-1) * W.unsqueeze(-2)).flatten(1)

    def _mask_posterior(self, masks, dtype):
        """Per-mask covariance ``A_r^{-1}`` of ``z | x_r`` and every token's predictive variance.

        Returns ``cov`` of shape ``(*batch, K, K)`` and ``variance`` of shape ``(*batch, D)``
        for masks of shape ``(*batch, D)``.
        """
        K = self.components.shape[0]
        outer = self._outer()
        observed = (~masks).to(dtype)
        precision = torch.eye(K, dtype=dtype, device=masks.device) + (
            observed @ (outer / self.noise_variance.unsqueeze(-1))
        ).unflatten(-1, (K, K))
        # precision >= I, so its Cholesky factor is well conditioned and the K x K inverse
        # (needed for every token's predictive variance) is safe.
        cov = torch.cholesky_inverse(torch.linalg.cholesky(precision))
        variance = self.noise_variance + cov.flatten(-2) @ outer.T
        return cov, variance

    def _mask_posterior_mean(self, residual, masks, cov):
        """Posterior mean of ``z`` given the observed tokens, shape ``(n, P, K)``."""
        observed = (~masks).to(residual.dtype)
        projected = _project(residual / self.noise_variance, observed, self.components.T)
        return torch.einsum(f"{_batch(masks)}kl,npl->npk", cov, projected)

    def masked_log_prob(self, X, masks, *, generator=None):
        """Per-token ``log p(x_j | x_r)`` at masked positions, zero at observed ones.

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, n_features)
        masks : torch.Tensor of dtype bool and shape (n_masks, n_features) or \
                (n_samples, n_masks, n_features)
            ``True`` marks a masked token.
        generator : None
            Ignored: the conditionals are exact.

        Returns
        -------
        log_prob : torch.Tensor of shape (n_samples, n_masks, n_features)
        """
        residual = X - self.mean
        cov, variance = self._mask_posterior(masks, X.dtype)
        z_mean = self._mask_posterior_mean(residual, masks, cov)
        error = residual.unsqueeze(1) - z_mean @ self.components
        log_prob = -0.5 * (math.log(2 * math.pi) + variance.log() + error.square() / variance)
        return torch.where(masks, log_prob, torch.zeros_like(log_prob))

    def masked_log_prob_sum(self, X, masks, *, generator=None):
        """``sum_{j in m} log p(x_j | x_r)`` for every sample and mask, from per-mask statistics.

        With ``e = x - mu`` and ``u_j = [j in m] / v_j`` (``v_j`` the predictive variance),
        ``sum_j u_j (e_j - w_j^T z)^2 = sum_j u_j e_j^2 - 2 z^T sum_j u_j e_j w_j
        + z^T (sum_j u_j w_j w_j^T) z``: matrix products against per-mask weights, so shared
        masks never form a tensor of shape ``(n_samples, n_masks, D)``.

        Parameters are those of :meth:`masked_log_prob`.

        Returns
        -------
        sums : torch.Tensor of shape (n_samples, n_masks)
        """
        residual = X - self.mean
        cov, variance = self._mask_posterior(masks, X.dtype)
        z_mean = self._mask_posterior_mean(residual, masks, cov)
        masked = masks.to(X.dtype)
        inv_var = masked / variance
        ones = X.new_ones(X.shape[1], 1)
        quad = _project(residual.square(), inv_var, ones).squeeze(-1)
        quad = quad - 2 * (_project(residual, inv_var, self.components.T) * z_mean).sum(-1)
        K = self.components.shape[0]
        curvature = (inv_var @ self._outer()).unflatten(-1, (K, K))
        quad = quad + torch.einsum(f"npk,{_batch(masks)}kl,npl->np", z_mean, curvature, z_mean)
        log_det = (masked * variance.log()).sum(-1)
        return -0.5 * (masked.sum(-1) * math.log(2 * math.pi) + log_det + quad)

    def chain_log_prob(self, X, orderings, *, generator=None):
        """Chain-rule terms ``log p(x_{s_t} | x_{s_{t+1:D}})`` of each ordering ``s``.

        Reveals the tokens in reverse order, each a Kalman update of ``z``'s posterior with
        that token's own noise variance ``psi_j``: ``O(n D K)`` plus ``O(D K^2)`` per ordering.

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, n_features)
        orderings : torch.Tensor of dtype long and shape (n_orderings, n_features)
        generator : None
            Ignored: the conditionals are exact.

        Returns
        -------
        terms : torch.Tensor of shape (n_samples, n_orderings, n_features)
            ``terms[:, o, t]`` is the term of the ``t``-th token of ordering ``o``; each row
            sums to ``log p(x)``.
        """
        n_samples = X.shape[0]
        n_orderings, n_features = orderings.shape
        K = self.components.shape[0]
        W = self.components.T
        psi = self.noise_variance
        residual = X - self.mean
        cov = torch.eye(K, dtype=X.dtype, device=X.device).expand(n_orderings, K, K).clone()
        z_mean = X.new_zeros(n_samples, n_orderings, K)
        terms = X.new_empty(n_samples, n_orderings, n_features)
        for t in range(n_features - 1, -1, -1):
            token = orderings[:, t]
            w = W[token]  # (O, K)
            cov_w = (cov @ w.unsqueeze(-1)).squeeze(-1)
            variance = psi[token] + (w * cov_w).sum(-1)  # the token's own noise, psi_j
            error = residual[:, token] - (z_mean * w).sum(-1)  # (n, O)
            terms[:, :, t] = -0.5 * (math.log(2 * math.pi) + variance.log() + error.square() / variance)
            gain = cov_w / variance.unsqueeze(-1)
            z_mean = z_mean + error.unsqueeze(-1) * gain
            cov = cov - variance.view(-1, 1, 1) * gain.unsqueeze(-1) * gain.unsqueeze(-2)
        return terms

    def _whitened(self):
        """``Psi^{-1/2} W`` (D x K) and the Cholesky factor of ``I + W^T Psi^{-1} W`` (K x K)."""
        W = self.components.T / self.noise_variance.sqrt().unsqueeze(-1)
        eye = torch.eye(W.shape[1], dtype=W.dtype, device=W.device)
        return W, torch.linalg.cholesky(eye + W.T @ W)

    def log_marginal(self, X):
        """Closed-form ``log N(x | mu, W W^T + Psi)`` per sample, shape ``(n_samples,)``."""
        W, L = self._whitened()
        residual = (X - self.mean) / self.noise_variance.sqrt()
        projected = torch.linalg.solve_triangular(L, (residual @ W).T, upper=False)
        quad = residual.square().sum(-1) - projected.square().sum(0)
        log_det = self.log_noise_variance.sum() + 2 * L.diagonal().log().sum()
        return -0.5 * (X.shape[1] * math.log(2 * math.pi) + log_det + quad)

    def posterior(self, X):
        """Posterior of ``z`` given all of ``x``: mean ``(n_samples, K)`` and covariance ``(K, K)``."""
        W, L = self._whitened()
        cov = torch.cholesky_inverse(L)
        mean = ((X - self.mean) / self.noise_variance.sqrt()) @ W @ cov
        return mean, cov

    def decode(self, Z):
        """Mean of ``x`` given ``z``: ``W z + mu``, shape ``(n, D)``."""
        return Z @ self.components + self.mean

    def covariance(self):
        """Model covariance ``W W^T + Psi``, shape ``(D, D)``."""
        W = self.components.T
        return W @ W.T + torch.diag(self.noise_variance)

    def precision(self):
        """Inverse covariance by the Woodbury identity, shape ``(D, D)``."""
        W, L = self._whitened()
        factor = torch.linalg.solve_triangular(L, W.T, upper=False) / self.noise_variance.sqrt()
        return torch.diag(1 / self.noise_variance) - factor.T @ factor
