r"""Probabilistic PCA as a torch module with batched masked conditionals.

The model (Tipping and Bishop, 1999) is

.. math::

    x = W z + \mu + \varepsilon, \qquad z \sim \mathcal N(0, I_K), \qquad
    \varepsilon \sim \mathcal N(0, \sigma^2 I_D),

so ``p(x) = N(x | mu, W W^T + sigma^2 I)``. The masked conditionals of Moreno-Muñoz et al.
(2023), corrected as in DESIGN.md (the conditional variance is ``S_MM - S_MR^T S_RR^{-1} S_MR``),
are computed through the posterior of ``z`` given the observed tokens ``x_r``:

.. math::

    A_r = I + W_r^\top W_r / \sigma^2, \quad
    \bar z = A_r^{-1} W_r^\top (x_r - \mu_r) / \sigma^2, \quad
    x_j \mid x_r \sim \mathcal N(\mu_j + w_j^\top \bar z,\; \sigma^2 + w_j^\top A_r^{-1} w_j).

``A_r`` is ``K x K`` and depends on the mask only, so a mask costs ``O(D K^2)`` plus
``O(n D K)`` for its samples, instead of the ``O(D^3)`` of inverting ``S_RR``. The *sum* over
masked tokens of the log-densities is a quadratic form in ``z_bar`` whose coefficients are
per-mask statistics, so :meth:`PPCAModule.masked_log_prob_sum` never builds a tensor of
shape ``(n_samples, n_masks, D)`` when the masks are shared by the samples.
"""

import math

import torch

from ._base import MaskedModel

__all__ = ["PPCAModule"]


def _project(values, weights, basis):
    """``out[n, p, k] = sum_d weights[(n,) p, d] * values[n, d] * basis[d, k]``.

    With masks shared by the samples (``weights`` of shape ``(P, D)``) this is one matrix
    product against a ``(D, P * K)`` matrix: no ``(n, P, D)`` intermediate.
    """
    if weights.ndim == 2:
        n_masks, n_features = weights.shape
        stacked = (weights.T.unsqueeze(-1) * basis.unsqueeze(1)).reshape(n_features, -1)
        return (values @ stacked).reshape(values.shape[0], n_masks, basis.shape[1])
    return (weights * values.unsqueeze(1)) @ basis


def _batch(masks):
    """einsum subscripts of the per-mask statistics: shared masks ``p``, per-sample ``np``.

    Contracting with einsum keeps per-mask ``K x K`` matrices from being broadcast (copied)
    over the samples, as ``matmul`` would.
    """
    return "p" if masks.ndim == 2 else "np"


class PPCAModule(MaskedModel):
    """PPCA with learnable ``W``, ``mu`` and ``sigma^2`` and exact masked conditionals.

    A deterministic :class:`MaskedModel` with its own fast paths: ``masked_log_prob_sum``
    from per-mask statistics and ``chain_log_prob`` by rank-one updates, both of which assume
    one noise variance ``sigma^2`` for every feature.

    Parameters
    ----------
    components : torch.Tensor of shape (n_components, n_features)
        ``W^T``, in scikit-learn's layout (rows are the principal axes).
    mean : torch.Tensor of shape (n_features,)
    noise_variance : float or torch.Tensor
        ``sigma^2 > 0``; stored as its logarithm so that gradient steps keep it positive.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import PPCAModule
    >>> from skmpt.testing import assert_mpt_identity
    >>> W = torch.tensor([[1.0, 0.5, -0.3]], dtype=torch.float64)
    >>> module = PPCAModule(W, torch.zeros(3, dtype=torch.float64), 0.5)
    >>> X = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> assert_mpt_identity(module, X)
    """

    # weighted_log_prob_sum builds its quadratic form from chunks of masks whose per-mask
    # rows hold about this many numbers (8 MiB in float64: the chunk stays in cache).
    _form_chunk_numbers = 2**20

    def __init__(self, components, mean, noise_variance):
        super().__init__()
        self.components = torch.nn.Parameter(components)
        self.mean = torch.nn.Parameter(mean)
        log_noise = torch.as_tensor(noise_variance, dtype=mean.dtype, device=mean.device).log()
        self.log_noise_variance = torch.nn.Parameter(log_noise)

    @property
    def noise_variance(self):
        """``sigma^2``, a 0-d tensor."""
        return self.log_noise_variance.exp()

    @property
    def n_features(self):
        return self.components.shape[1]

    def unstandardize_(self, center, scale):
        """Map parameters fitted on ``(x - center) / scale`` back to the units of ``x``.

        ``scale`` is one positive number, so the model family is unchanged: ``W -> scale W``,
        ``mu -> center + scale mu``, ``sigma^2 -> scale^2 sigma^2``. In place; returns self.
        """
        self.components.mul_(scale)
        self.mean.mul_(scale).add_(center)
        self.log_noise_variance.add_(2 * torch.log(scale))
        return self

    def _outer(self):
        """``w_d w_d^T`` for every feature, flattened: shape ``(D, K * K)``."""
        W = self.components.T
        return (W.unsqueeze(-1) * W.unsqueeze(-2)).flatten(1)

    def shared_mask_chunk(self, n_samples):
        """Masks per call of :meth:`masked_log_prob_sum` when they are shared by the samples.

        A mask holds about ``(2K + 1) n + (2K + 4) D`` numbers; chunks of about ``2**21`` of
        them (16 MiB in float64) keep the products fast, while fewer masks per call would
        repeat the per-call work. Used by :mod:`skmpt.objectives`.
        """
        K, D = self.components.shape
        return max(1, 2**21 // ((2 * K + 1) * n_samples + (2 * K + 4) * D))

    def _mask_covariance(self, masks, dtype):
        """Per-mask covariance of ``z | x_r``, shape ``(*batch, K, K)`` for masks ``(*batch, D)``."""
        K = self.components.shape[0]
        observed = (~masks).to(dtype)
        precision = torch.eye(K, dtype=dtype, device=masks.device) + (
            observed @ self._outer()
        ).unflatten(-1, (K, K)) / self.noise_variance
        # precision >= I, so its Cholesky factor is well conditioned and the K x K inverse
        # (needed for every token's predictive variance) is safe.
        return torch.cholesky_inverse(torch.linalg.cholesky(precision))

    def _mask_posterior(self, masks, dtype):
        """Per-mask covariance of ``z | x_r`` and predictive variances of every token.

        Returns ``cov`` of shape ``(*batch, K, K)`` and ``variance`` of shape ``(*batch, D)``
        for masks of shape ``(*batch, D)``.
        """
        cov = self._mask_covariance(masks, dtype)
        variance = self.noise_variance + cov.flatten(-2) @ self._outer().T
        return cov, variance

    def _mask_posterior_mean(self, residual, masks, cov):
        """Posterior mean of ``z`` given the observed tokens, shape ``(n, P, K)``."""
        observed = (~masks).to(residual.dtype)
        projected = _project(residual, observed, self.components.T) / self.noise_variance
        return torch.einsum(f"{_batch(masks)}kl,npl->npk", cov, projected)

    def masked_log_prob_sum(self, X, masks):
        """``sum_{j in m} log p(x_j | x_r)`` for every sample and mask.

        With ``e = x - mu`` and ``u_j = 1 / v_j`` at masked tokens (zero elsewhere), the sum
        of ``u_j (e_j - w_j^T z_bar)^2`` is ``sum_j u_j e_j^2 + z_bar^T (Gamma z_bar - 2 g)``
        with ``Gamma = sum_j u_j w_j w_j^T`` and ``g = sum_j u_j e_j w_j``. Both ``z_bar`` and
        ``Gamma z_bar - 2 g`` are linear in ``e``, so with masks shared by the samples each
        mask contributes ``2 K + 1`` rows to two matrix products with the residuals, and
        everything else costs ``O(P D K^2)``: no per-sample ``K x K`` algebra.

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, n_features)
        masks : torch.Tensor of dtype bool and shape (n_masks, n_features) or \
                (n_samples, n_masks, n_features)

        Returns
        -------
        sums : torch.Tensor of shape (n_samples, n_masks)
        """
        residual = X - self.mean
        if masks.ndim == 2:
            quad, variance = self._shared_quadratic(residual, masks)
        else:
            quad, variance = self._per_sample_quadratic(residual, masks)
        return -0.5 * (self._normaliser(masks, variance) + quad)

    @staticmethod
    def _normaliser(masks, variance):
        """``sum_{j in m} log(2 pi v_j)`` per mask: the part of the masked sum free of ``x``."""
        masked = masks.to(variance.dtype)
        return (masked * variance.log()).sum(-1) + masked.sum(-1) * math.log(2 * math.pi)

    def _shared_rows(self, masks, dtype, weights=None):
        """The linear maps of the residual whose products give each shared mask's quadratic.

        For masks ``(P, D)`` returns ``rows`` of shape ``(2, K, P, D)`` with
        ``rows[0, :, p] @ e = z_bar`` and ``rows[1, :, p] @ e = Gamma z_bar - 2 g`` (see
        :meth:`masked_log_prob_sum`), times ``weights[p]`` if given, ``inv_var`` (``u``, zero
        at observed tokens) and the predictive ``variance``, both ``(P, D)``. The layout puts
        ``K`` outermost so that products with it are reduced over ``K`` along contiguous memory.
        """
        n_masks, n_features = masks.shape
        K = self.components.shape[0]
        outer = self._outer()
        cov = self._mask_covariance(masks, dtype)
        variance = self.noise_variance + cov.flatten(-2) @ outer.T
        inv_var = masks / variance
        curvature = (inv_var @ outer).view(n_masks, K, K)
        # z_bar = C W_r^T e_r / s2 and Gamma z_bar - 2 g = Gamma C W_r^T e_r / s2 - 2 W^T (u * e).
        second, weighted_inv_var = curvature @ cov, inv_var
        if weights is not None:
            second, weighted_inv_var = second * weights.view(-1, 1, 1), inv_var * weights.unsqueeze(-1)
        coefficients = torch.cat([cov, second], dim=1).permute(1, 0, 2)  # (2K, P, K)
        rows = (coefficients.reshape(-1, K) @ self.components).view(2, K, n_masks, n_features)
        rows.mul_((~masks) / self.noise_variance)
        rows[1].addcmul_(self.components.unsqueeze(1), weighted_inv_var, value=-2)
        return rows, inv_var, variance

    def _shared_quadratic(self, residual, masks):
        """``sum_j u_j (e_j - w_j^T z_bar)^2`` of shape ``(n, P)`` for shared masks ``(P, D)``.

        Also returns the predictive variances, shape ``(P, D)``.
        """
        n_masks, n_features = masks.shape
        K = self.components.shape[0]
        rows, inv_var, variance = self._shared_rows(masks, residual.dtype)
        projected = (residual @ rows.view(-1, n_features).T).view(-1, 2, K, n_masks)
        quad = residual.square() @ inv_var.T
        quad += (projected[:, 0] * projected[:, 1]).sum(1)
        return quad, variance

    def weighted_log_prob_sum(self, X, masks, weights):
        """``sum_p weights_p sum_{j in m_p} log p(x_j | x_{r_p})`` per sample, for shared masks.

        Each mask's quadratic is ``e^T (diag(u_p) + R_{0p}^T R_{1p}) e`` with the ``K x D``
        maps of :meth:`_shared_rows`, so the weighted sum over the masks is one quadratic form
        ``e^T Q e``: ``Q`` costs ``P K D^2`` multiply-adds, independent of the number of
        samples, and the samples ``n D^2``. The per-mask sums cost ``n P D (2 K + 1)``; the
        cheaper of the two is used, with the same result up to rounding.

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, n_features)
        masks : torch.Tensor of dtype bool and shape (n_masks, n_features)
        weights : torch.Tensor of shape (n_masks,)

        Returns
        -------
        total : torch.Tensor of shape (n_samples,)

        Examples
        --------
        >>> import torch
        >>> from skmpt.models import PPCAModule
        >>> W = torch.tensor([[1.0, 0.5, -0.3]], dtype=torch.float64)
        >>> module = PPCAModule(W, torch.zeros(3, dtype=torch.float64), 0.5)
        >>> X = torch.randn(40, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        >>> masks = torch.tensor([[True, False, False], [False, True, True]])
        >>> weights = torch.tensor([1.0, 0.5], dtype=torch.float64)
        >>> direct = module.masked_log_prob_sum(X, masks) @ weights
        >>> bool(torch.allclose(module.weighted_log_prob_sum(X, masks, weights), direct))
        True
        """
        (n_samples, n_features), n_masks = X.shape, masks.shape[0]
        K = self.components.shape[0]
        per_mask_cost = n_samples * n_masks * n_features * (2 * K + 1)
        if per_mask_cost <= n_masks * K * n_features**2 + n_samples * n_features**2:
            chunk = self.shared_mask_chunk(n_samples)
            return sum(
                (
                    self.masked_log_prob_sum(X, part) @ part_weights
                    for part, part_weights in zip(masks.split(chunk), weights.split(chunk), strict=True)
                ),
                X.new_zeros(n_samples),
            )
        form = X.new_zeros(n_features, n_features)
        diagonal = X.new_zeros(n_features)
        constant = X.new_zeros(())
        chunk = max(1, self._form_chunk_numbers // ((2 * K + 4) * n_features))
        for part, part_weights in zip(masks.split(chunk), weights.split(chunk), strict=True):
            rows, inv_var, variance = self._shared_rows(part, X.dtype, part_weights)
            form.addmm_(rows[0].reshape(-1, n_features).T, rows[1].reshape(-1, n_features))
            diagonal += part_weights @ inv_var
            constant += part_weights @ self._normaliser(part, variance)
        residual = X - self.mean
        quad = residual.square() @ diagonal + ((residual @ form) * residual).sum(-1)
        return -0.5 * (constant + quad)

    def _per_sample_quadratic(self, residual, masks):
        """The same for masks of shape ``(n, P, D)``; variances of shape ``(n, P, D)``."""
        K = self.components.shape[0]
        cov, variance = self._mask_posterior(masks, residual.dtype)
        z_mean = self._mask_posterior_mean(residual, masks, cov)
        inv_var = masks / variance
        ones = residual.new_ones(residual.shape[1], 1)
        quad = _project(residual.square(), inv_var, ones).squeeze(-1)
        quad = quad - 2 * (_project(residual, inv_var, self.components.T) * z_mean).sum(-1)
        curvature = (inv_var @ self._outer()).unflatten(-1, (K, K))
        return quad + torch.einsum("npk,npkl,npl->np", z_mean, curvature, z_mean), variance

    def masked_log_prob(self, X, masks):
        """Per-token ``log p(x_j | x_r)`` at masked positions, zero at observed ones.

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

    def chain_log_prob(self, X, orderings):
        """Chain-rule terms ``log p(x_{s_t} | x_{s_{t+1:D}})`` of each ordering ``s``.

        Reveals the tokens in reverse order and updates the posterior of ``z`` by one token
        at a time (a rank-one update of its ``K x K`` covariance), so an ordering costs
        ``O(n D K)`` plus ``O(D K^2)``, instead of scoring ``D`` nested masks of ``D`` tokens.

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, n_features)
        orderings : torch.Tensor of dtype long and shape (n_orderings, n_features)

        Returns
        -------
        terms : torch.Tensor of shape (n_samples, n_orderings, n_features)
            ``terms[:, o, t - 1]`` is step ``t`` of ordering ``o``; each row sums to ``log p(x)``.
        """
        n_samples = X.shape[0]
        n_orderings, n_features = orderings.shape
        K = self.components.shape[0]
        W = self.components.T
        residual = X - self.mean
        cov = torch.eye(K, dtype=X.dtype, device=X.device).expand(n_orderings, K, K).clone()
        z_mean = X.new_zeros(n_samples, n_orderings, K)
        terms = X.new_empty(n_samples, n_orderings, n_features)
        for t in range(n_features - 1, -1, -1):
            token = orderings[:, t]
            w = W[token]  # (O, K)
            cov_w = (cov @ w.unsqueeze(-1)).squeeze(-1)
            variance = self.noise_variance + (w * cov_w).sum(-1)
            error = residual[:, token] - (z_mean * w).sum(-1)  # (n, O)
            terms[:, :, t] = -0.5 * (math.log(2 * math.pi) + variance.log() + error.square() / variance)
            gain = cov_w / variance.unsqueeze(-1)
            z_mean = z_mean + error.unsqueeze(-1) * gain
            cov = cov - variance.view(-1, 1, 1) * gain.unsqueeze(-1) * gain.unsqueeze(-2)
        return terms

    def _capacitance_cholesky(self):
        """Cholesky factor of ``I + W^T W / sigma^2`` (K x K), as in LowRankMultivariateNormal."""
        W = self.components.T
        K = W.shape[1]
        eye = torch.eye(K, dtype=W.dtype, device=W.device)
        return torch.linalg.cholesky(eye + W.T @ W / self.noise_variance)

    def log_marginal(self, X):
        """Closed-form ``log N(x | mu, W W^T + sigma^2 I)`` per sample, shape ``(n_samples,)``."""
        residual = X - self.mean
        L = self._capacitance_cholesky()
        n_features = X.shape[1]
        projected = torch.linalg.solve_triangular(L, (residual @ self.components.T).T, upper=False)
        quad = (residual.square().sum(-1) - projected.square().sum(0) / self.noise_variance) / self.noise_variance
        log_det = n_features * self.log_noise_variance + 2 * L.diagonal().log().sum()
        return -0.5 * (n_features * math.log(2 * math.pi) + log_det + quad)

    def posterior(self, X):
        """Posterior of ``z`` given all of ``x``: mean ``(n_samples, K)`` and covariance ``(K, K)``."""
        L = self._capacitance_cholesky()
        cov = torch.cholesky_inverse(L)
        mean = (X - self.mean) @ self.components.T @ cov / self.noise_variance
        return mean, cov

    def decode(self, Z):
        """Mean of ``x`` given ``z``: ``W z + mu``, shape ``(n, D)``."""
        return Z @ self.components + self.mean

    def covariance(self):
        """Model covariance ``W W^T + sigma^2 I``, shape ``(D, D)``."""
        W = self.components.T
        return W @ W.T + self.noise_variance * torch.eye(W.shape[0], dtype=W.dtype, device=W.device)

    def precision(self):
        """Inverse covariance by the Woodbury identity, shape ``(D, D)``."""
        W = self.components.T
        L = self._capacitance_cholesky()
        factor = torch.linalg.solve_triangular(L, W.T, upper=False)
        eye = torch.eye(W.shape[0], dtype=W.dtype, device=W.device)
        return (eye - factor.T @ factor / self.noise_variance) / self.noise_variance
