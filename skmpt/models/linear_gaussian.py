r"""The linear-Gaussian model, with isotropic (PPCA) or diagonal (factor analysis) noise.

The model is

.. math::

    x = W z + \mu + \varepsilon, \qquad z \sim \mathcal N(0, I_K), \qquad
    \varepsilon \sim \mathcal N(0, \Psi),

with ``Psi = sigma^2 I`` (probabilistic PCA, Tipping and Bishop, 1999: one noise variance
shared by the features) or ``Psi = diag(psi_1, ..., psi_D)`` (factor analysis, as
scikit-learn's :class:`~sklearn.decomposition.FactorAnalysis`), so
``p(x) = N(x | mu, W W^T + Psi)``. The masked conditionals (Moreno-Muñoz et al., 2023, with
the conditional variance ``S_MM - S_MR^T S_RR^{-1} S_MR``) go through the posterior of ``z``
given the observed tokens ``x_r``, each token weighted by its own noise precision:

.. math::

    A_r = I + \sum_{d \in r} w_d w_d^\top / \psi_d, \quad
    \bar z = A_r^{-1} \sum_{d \in r} w_d (x_d - \mu_d) / \psi_d, \quad
    x_j \mid x_r \sim \mathcal N(\mu_j + w_j^\top \bar z,\; \psi_j + w_j^\top A_r^{-1} w_j).

``A_r`` is ``K x K`` and depends on the mask only, so a mask costs ``O(D K^2)`` plus
``O(n D K)`` for its samples, instead of the ``O(D^3)`` of inverting ``S_RR``. The *sum* over
masked tokens of the log-densities is a quadratic form in the residual whose coefficients are
per-mask statistics: shared masks never build a tensor of shape ``(n_samples, n_masks, D)``,
and a weighted sum over many masks (a cumulative score) is one ``D x D`` form.

Along a chain of nested masks, revealing token ``j`` is a Kalman update of ``z``'s posterior
``N(m, C)`` with that token's noise ``psi_j``: ``s = psi_j + w_j^T C w_j``, ``g = C w_j / s``,
``m <- m + g (x_j - mu_j - w_j^T m)``, ``C <- C - s g g^T``. For an ordering shared by the
samples, ``C`` and ``g`` do not depend on ``x`` and the predictions are a linear map of the
residuals, applied by matrix products (:mod:`skmpt.models._chains`). The log-marginal likelihood uses
the capacitance (Woodbury) form,
``log det(W W^T + Psi) = sum_d log psi_d + log det(I + W^T Psi^{-1} W)``.
"""

import math

import torch

from .._utils import chunk_budget, inverse_from_cholesky
from ._chains import linear_gaussian_chain
from ._masked_gaussian import feature_outer_products, masked_gaussian_sum
from .contract import MaskedModel, conditioning_set, gaussian_log_prob, standard_normal

__all__ = ["FactorAnalysisModule", "LinearGaussianModule", "PPCAModule"]


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


def _whitened(components, noise_variance):
    """``Psi^{-1/2} W`` (D x K) and the Cholesky factor of ``I + W^T Psi^{-1} W`` (K x K)."""
    W = components.T / noise_variance.sqrt().unsqueeze(-1)
    eye = torch.eye(W.shape[1], dtype=W.dtype, device=W.device)
    return W, torch.linalg.cholesky(eye + W.T @ W)


def _normaliser(masks, variance):
    """``sum_{j in m} log(2 pi v_j)`` per mask: the part of the masked sum free of ``x``."""
    masked = masks.to(variance.dtype)
    return (masked * variance.log()).sum(-1) + masked.sum(-1) * math.log(2 * math.pi)


class _DensityMixin:
    """The densities of the linear-Gaussian model: ``log p(x)`` (of the observed entries, too),
    the posterior of ``z``, the chain over observed entries, and the moments; a base of
    :class:`LinearGaussianModule`."""

    def _observed_chain(self, X, orderings, observed):
        """:meth:`chain_log_prob` skipping unobserved tokens: the posterior of ``z`` is then
        per sample, ``(n, O, K, K)`` (``(O, K, K)`` for a pattern ``(D,)`` shared by the samples)."""
        n_orderings, n_features = orderings.shape
        K = self.components.shape[0]
        W = self.components.T
        noise = self.noise_variance.expand(n_features)
        residual = X - self.mean
        seen = observed.to(X.dtype)
        cov = torch.eye(K, dtype=X.dtype, device=X.device).expand(n_orderings, K, K)
        z_mean = X.new_zeros(X.shape[0], n_orderings, K)
        terms = X.new_empty(X.shape[0], n_orderings, n_features)
        for t in range(n_features - 1, -1, -1):
            token = orderings[:, t]
            keep = seen[..., token]  # (n, O) or (O,): whether the step reveals anything
            w = W[token]
            cov_w = (cov @ w.unsqueeze(-1)).squeeze(-1)
            variance = noise[token] + (w * cov_w).sum(-1)
            error = residual[:, token] - (z_mean * w).sum(-1)
            terms[:, :, t] = keep * gaussian_log_prob(error, variance)
            gain = keep.unsqueeze(-1) * cov_w / variance.unsqueeze(-1)
            z_mean = z_mean + error.unsqueeze(-1) * gain
            cov = cov - (variance * keep).unsqueeze(-1).unsqueeze(-1) * gain.unsqueeze(-1) * gain.unsqueeze(-2)
        return terms

    # ------------------------------------------------------------------ complete data
    def _observed_posterior(self, X, observed):
        """Posterior of ``z`` given each sample's observed entries: mean ``(n, K)``,
        covariance ``(n, K, K)``, and the Cholesky factor of its precision."""
        K = self.components.shape[0]
        seen = observed.to(X.dtype)
        noise = self.noise_variance.expand(X.shape[1])
        information = ((seen / noise) @ feature_outer_products(self.components)).unflatten(-1, (K, K))
        factor = torch.linalg.cholesky(torch.eye(K, dtype=X.dtype, device=X.device) + information)
        projected = (seen * (X - self.mean) / noise) @ self.components.T
        mean = torch.cholesky_solve(projected.unsqueeze(-1), factor).squeeze(-1)
        return mean, inverse_from_cholesky(factor), factor

    def log_marginal(self, X, *, generator=None, observed=None):
        """Closed-form ``log N(x | mu, W W^T + Psi)`` per sample, shape ``(n_samples,)``.

        With ``observed`` of shape ``(n_samples, n_features)``, the density of each sample's
        observed sub-vector, ``log N(x_o | mu_o, W_o W_o^T + Psi_o)`` (zero when nothing is observed).
        """
        if observed is not None:
            return self._observed_log_marginal(X, observed)
        W, L = _whitened(self.components, self.noise_variance)
        residual = (X - self.mean) / self.noise_variance.sqrt()
        projected = torch.linalg.solve_triangular(L, (residual @ W).T, upper=False)
        quad = residual.square().sum(-1) - projected.square().sum(0)
        log_det = self.log_noise_variance.expand(X.shape[1]).sum() + 2 * L.diagonal().log().sum()
        return -0.5 * (X.shape[1] * math.log(2 * math.pi) + log_det + quad)

    def _observed_log_marginal(self, X, observed):
        seen = observed.to(X.dtype)
        noise = self.noise_variance.expand(X.shape[1])
        residual = seen * (X - self.mean)
        mean, _, factor = self._observed_posterior(X, observed)
        projected = (residual / noise) @ self.components.T
        quad = (residual.square() / noise).sum(-1) - (projected * mean).sum(-1)
        log_det = seen @ noise.log() + 2 * factor.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (seen.sum(-1) * math.log(2 * math.pi) + log_det + quad)

    def moment_log_marginal(self, mean, second_moment, *, observed=None):
        """The data's mean of ``log p(x)`` (of ``log p(x_o)`` for a shared pattern ``observed``
        of shape ``(n_features,)``), from their ``mean`` and covariance ``second_moment``."""
        covariance, offset, second = self.covariance(), mean - self.mean, second_moment
        if observed is not None:
            covariance, offset = covariance[observed][:, observed], offset[observed]
            second = second[observed][:, observed]
        factor = torch.linalg.cholesky(covariance)
        quad = torch.cholesky_solve(second + torch.outer(offset, offset), factor).diagonal().sum()
        log_det = 2 * factor.diagonal().log().sum()
        return -0.5 * (len(offset) * math.log(2 * math.pi) + log_det + quad)

    def posterior(self, X, *, observed=None):
        """Posterior of ``z`` given all of ``x``: mean ``(n_samples, K)`` and covariance ``(K, K)``.

        With ``observed``, given each sample's observed entries: the covariance is then
        ``(n_samples, K, K)``.
        """
        if observed is not None:
            return self._observed_posterior(X, observed)[:2]
        W, L = _whitened(self.components, self.noise_variance)
        cov = torch.cholesky_inverse(L)
        mean = ((X - self.mean) / self.noise_variance.sqrt()) @ W @ cov
        return mean, cov

    def impute(self, X, observed, *, generator=None):
        """``E[x | x_o]``: ``x_o`` at the ``observed`` entries, ``mu + W E[z | x_o]`` elsewhere."""
        mean = self._observed_posterior(X, observed)[0]
        return torch.where(observed, X, mean @ self.components + self.mean)

    def sample_missing(self, X, observed, n_draws, *, generator=None):
        """Draws of ``x`` given ``x_o``, ``(n_draws, n, D)``: ``z`` from its posterior, then
        ``x = W z + mu + noise``; the ``observed`` entries stay ``X``'s."""
        mean, cov, _ = self._observed_posterior(X, observed)
        K, D = self.components.shape
        z = mean + (torch.linalg.cholesky(cov) @ standard_normal((n_draws, *mean.shape, 1), X, generator)).squeeze(-1)
        noise = self.noise_variance.sqrt() * standard_normal((n_draws, *X.shape), X, generator)
        return torch.where(observed, X, z @ self.components + self.mean + noise)

    def decode(self, Z):
        """Mean of ``x`` given ``z``: ``W z + mu``, shape ``(n, D)``."""
        return Z @ self.components + self.mean

    def covariance(self):
        """Model covariance ``W W^T + Psi``, shape ``(D, D)``."""
        W = self.components.T
        return W @ W.T + torch.diag(self.noise_variance.expand(W.shape[0]))

    def precision(self):
        """Inverse covariance by the Woodbury identity, shape ``(D, D)``."""
        W, L = _whitened(self.components, self.noise_variance)
        noise = self.noise_variance.expand(W.shape[0])
        factor = torch.linalg.solve_triangular(L, W.T, upper=False) / noise.sqrt()
        return torch.diag(1 / noise) - factor.T @ factor


class LinearGaussianModule(_DensityMixin, MaskedModel):
    """Linear-Gaussian model with learnable ``W``, ``mu`` and noise, and exact masked conditionals.

    A deterministic :class:`MaskedModel` with its own fast paths: ``masked_log_prob_sum`` and
    ``weighted_log_prob_sum`` from per-mask statistics, and ``chain_log_prob`` from the rank-one
    (Kalman) updates of the posterior of ``z``. :class:`PPCAModule` (isotropic noise) and
    :class:`FactorAnalysisModule` (diagonal noise) are its two cases.

    Parameters
    ----------
    components : torch.Tensor of shape (n_components, n_features)
        ``W^T``, in scikit-learn's layout (rows are the principal axes or factor loadings).
    mean : torch.Tensor of shape (n_features,)
    noise_variance : float or torch.Tensor of shape () or (n_features,)
        Positive: one variance shared by every feature (isotropic noise) or one per feature
        (diagonal noise); stored as logarithms so that gradient steps keep it positive.
    feature_scales : torch.Tensor of shape (n_features,), default=None
        Positive units in which each feature's loadings, mean and (diagonal) noise are stored
        and stepped: ``W = diag(c) W'``, ``mu = c mu'``, ``psi = c^2 psi'``, so a gradient step
        moves every feature by the same fraction of its own scale (one number for isotropic
        noise). None: ones.

    Examples
    --------
    One noise variance for the three features: the isotropic case, PPCA.

    >>> import torch
    >>> from skmpt.models import LinearGaussianModule
    >>> g = torch.Generator().manual_seed(0)
    >>> W, mu = torch.randn(2, 3, generator=g, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    >>> module = LinearGaussianModule(W, mu, torch.tensor(0.5, dtype=torch.float64))
    >>> module.isotropic
    True
    >>> X = module.decode(torch.randn(5, 2, generator=g, dtype=torch.float64))
    >>> exact = torch.distributions.MultivariateNormal(mu, module.covariance()).log_prob(X)
    >>> bool(torch.allclose(module.log_marginal(X), exact))
    True
    """

    def __init__(self, components, mean, noise_variance, feature_scales=None):
        super().__init__()
        noise = torch.as_tensor(noise_variance, dtype=mean.dtype, device=mean.device)
        if noise.ndim > 1 or (noise.ndim == 1 and noise.shape != mean.shape):
            raise ValueError(
                f"noise_variance must be one number or one per feature ({mean.shape[0]}); "
                f"got shape {tuple(noise.shape)}."
            )
        # Each feature's loadings, mean and noise are stored in units of its scale (the start's
        # spread, for factor analysis): a step of Adam is then the same fraction of every feature's
        # spread, whatever its units.
        self.register_buffer("feature_scales", torch.ones_like(mean).detach())
        self.scaled_components = torch.nn.Parameter(torch.empty_like(components))
        self.scaled_mean = torch.nn.Parameter(torch.empty_like(mean))
        self.log_scaled_noise = torch.nn.Parameter(torch.empty_like(noise))
        self.set_parameters_(components, mean, noise, feature_scales=feature_scales)

    @property
    def components(self):
        """``W^T``, shape ``(K, D)``."""
        return self.scaled_components * self.feature_scales

    @property
    def mean(self):
        """``mu``, shape ``(D,)``."""
        return self.scaled_mean * self.feature_scales

    @property
    def log_noise_variance(self):
        """The logarithm of the noise variance(s)."""
        if self.log_scaled_noise.ndim == 0:
            return self.log_scaled_noise
        return self.log_scaled_noise + 2 * self.feature_scales.log()

    @property
    def noise_variance(self):
        """The noise variance: a 0-d tensor (isotropic) or one per feature (diagonal)."""
        return self.log_noise_variance.exp()

    @property
    def isotropic(self):
        """Whether one noise variance is shared by every feature."""
        return self.log_scaled_noise.ndim == 0

    @property
    def n_features(self):
        return self.scaled_components.shape[1]

    def set_parameters_(self, components, mean, noise_variance, feature_scales=None):
        """Set ``W^T``, ``mu`` and the noise variance(s), stored in units of ``feature_scales``.

        Parameters
        ----------
        components : torch.Tensor of shape (n_components, n_features)
        mean : torch.Tensor of shape (n_features,)
        noise_variance : torch.Tensor of shape () or (n_features,)
            As the module holds it (one variance for isotropic noise, else one per feature).
        feature_scales : torch.Tensor of shape (n_features,), default=None
            The new units of each feature (see the class); None keeps the module's.

        Returns
        -------
        self
            Set in place, without gradient; the values are computed in the dtype of the tensors given,
            then taken to the module's device and dtype.

        Examples
        --------
        >>> import torch
        >>> from skmpt.models import FactorAnalysisModule
        >>> W, psi = torch.tensor([[3.0, 1.0]], dtype=torch.float64), torch.tensor([1.0, 2.0], dtype=torch.float64)
        >>> module = FactorAnalysisModule(W, torch.zeros(2, dtype=torch.float64), psi)
        >>> _ = module.set_parameters_(2 * W, module.mean, psi, feature_scales=torch.tensor([10.0, 1.0]))
        >>> module.scaled_components.detach(), module.components.detach()
        (tensor([[0.6000, 2.0000]], dtype=torch.float64), tensor([[6., 2.]], dtype=torch.float64))
        """
        noise = torch.as_tensor(noise_variance).to(components)
        D = self.n_features
        expected = {"components": tuple(self.scaled_components.shape), "mean": (D,),
                    "noise_variance": () if self.isotropic else (D,), "feature_scales": (D,)}
        if feature_scales is not None:
            feature_scales = torch.as_tensor(feature_scales).to(components)
        given = {"components": tuple(components.shape), "mean": tuple(mean.shape), "noise_variance": tuple(noise.shape),
                 "feature_scales": (D,) if feature_scales is None else tuple(feature_scales.shape)}
        for name, shape in given.items():
            if shape != expected[name]:
                raise ValueError(f"{name} must have shape {expected[name]}, as the module's; got {shape}.")
        if feature_scales is not None:
            if not bool((feature_scales > 0).all()):
                raise ValueError(f"feature_scales must be positive; got {feature_scales.tolist()}.")
            if self.isotropic and not bool((feature_scales == feature_scales[0]).all()):
                raise ValueError("Isotropic noise takes one scale for every feature; got one per feature.")
        with torch.no_grad():
            if feature_scales is not None:
                self.feature_scales.copy_(feature_scales.to(self.feature_scales))
            scales = self.feature_scales.to(components)
            log_noise = noise.log() if self.isotropic else noise.log() - 2 * scales.log()
            self.scaled_components.copy_(components / scales)
            self.scaled_mean.copy_(mean.to(components) / scales)
            self.log_scaled_noise.copy_(log_noise)
        return self

    def unstandardize_(self, center, scale):
        """Map parameters fitted on ``(x - center) / scale`` back to the units of ``x``.

        ``scale`` is one positive number, or (diagonal noise only) one per feature:
        ``W -> diag(scale) W``, ``mu -> center + scale mu``, ``Psi -> scale^2 Psi``. ``center`` and
        ``scale`` (tensors or numbers) are taken to the module's device and dtype. In place; returns self.
        """
        center, scale = (torch.as_tensor(a).to(self.scaled_mean) for a in (center, scale))
        if self.isotropic and scale.numel() > 1:
            raise ValueError("Isotropic noise is not closed under scaling each feature differently.")
        # mu -> center + scale mu: the stored mean gains center / (new scales)
        self.feature_scales.mul_(scale)
        self.scaled_mean.add_(center / self.feature_scales)
        if self.isotropic:
            self.log_scaled_noise.add_(2 * torch.log(scale))
        return self

    # ------------------------------------------------------------------ per-mask statistics
    def _mask_covariance(self, given, dtype):
        """Per-mask covariance ``A_r^{-1}`` of ``z | x_r``, ``(*batch, K, K)`` for conditioning sets ``(*batch, D)``."""
        K = self.components.shape[0]
        observed = given.to(dtype)
        if self.isotropic:  # one variance: divide once, after the sum over the tokens
            information = (observed @ feature_outer_products(self.components)) / self.noise_variance
        else:
            information = observed @ (feature_outer_products(self.components) / self.noise_variance.unsqueeze(-1))
        precision = torch.eye(K, dtype=dtype, device=given.device) + information.unflatten(-1, (K, K))
        # precision >= I, so its Cholesky factor is well conditioned and the K x K inverse
        # (needed for every token's predictive variance) is safe.
        return inverse_from_cholesky(torch.linalg.cholesky(precision))

    def _mask_posterior(self, given, dtype):
        """Per-mask ``cov`` of ``z | x_r``, ``(*batch, K, K)``, and every token's predictive
        ``variance``, ``(*batch, D)``, for conditioning sets ``r`` of shape ``(*batch, D)``."""
        cov = self._mask_covariance(given, dtype)
        variance = self.noise_variance + cov.flatten(-2) @ feature_outer_products(self.components).T
        return cov, variance

    def _mask_posterior_mean(self, residual, given, cov):
        """Posterior mean of ``z`` given the conditioning sets ``given``, shape ``(n, P, K)``."""
        observed = given.to(residual.dtype)
        if self.isotropic:
            projected = _project(residual, observed, self.components.T) / self.noise_variance
        else:
            projected = _project(residual / self.noise_variance, observed, self.components.T)
        return torch.einsum(f"{_batch(given)}kl,npl->npk", cov, projected)

    def shared_mask_chunk(self, n_samples):
        """Masks per call of :meth:`masked_log_prob_sum` when they are shared by the samples.

        A mask holds about ``(2K + 1) n + (2K + 4) D`` numbers; chunks of an eighth of the
        working memory (``2**21`` numbers by default) keep the products fast, while fewer
        masks per call would repeat the per-call work. Used by :mod:`skmpt.objectives`.
        """
        K, D = self.components.shape
        return max(1, chunk_budget(1 / 8) // ((2 * K + 1) * n_samples + (2 * K + 4) * D))

    # ------------------------------------------------------------------ masked conditionals
    def masked_log_prob(self, X, masks, *, generator=None, observed=None):
        """Per-token ``log p(x_j | x_r)`` at masked positions, zero at observed ones.

        Entries not ``observed`` are marginalised out: left out of ``r``.

        Returns
        -------
        log_prob : torch.Tensor of shape (n_samples, n_masks, n_features)
        """
        masks, given = conditioning_set(masks, observed)
        residual = X - self.mean
        cov, variance = self._mask_posterior(given, X.dtype)
        z_mean = self._mask_posterior_mean(residual, given, cov)
        log_prob = gaussian_log_prob(residual.unsqueeze(1) - z_mean @ self.components, variance)
        return torch.where(masks, log_prob, torch.zeros_like(log_prob))

    def masked_log_prob_sum(self, X, masks, *, generator=None, observed=None):
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
        observed : torch.Tensor of dtype bool and shape (n_samples, n_features) or \
                (n_features,), default=None
            Entries not observed are marginalised out.

        Returns
        -------
        sums : torch.Tensor of shape (n_samples, n_masks)
        """
        masks, given = conditioning_set(masks, observed)
        if masks.ndim == 3:  # training's masks: its gradient written out, in fewer operations
            noise = self.noise_variance.expand(X.shape[1])
            return masked_gaussian_sum(self.components, self.mean, noise, X, masks, given)
        quad, variance = self._shared_quadratic(X - self.mean, masks, given)
        return -0.5 * (_normaliser(masks, variance) + quad)

    def _shared_rows(self, masks, given, dtype, weights=None):
        """The linear maps of the residual whose products give each shared mask's quadratic.

        For masks ``(P, D)`` returns ``rows`` of shape ``(2, K, P, D)`` with
        ``rows[0, :, p] @ e = z_bar`` and ``rows[1, :, p] @ e = Gamma z_bar - 2 g`` (see
        :meth:`masked_log_prob_sum`), times ``weights[p]`` if given, ``inv_var`` (``u``, zero
        at observed tokens) and the predictive ``variance``, both ``(P, D)``. The layout puts
        ``K`` outermost so that products with it are reduced over ``K`` along contiguous memory.
        """
        n_masks, n_features = masks.shape
        K = self.components.shape[0]
        cov, variance = self._mask_posterior(given, dtype)
        inv_var = masks / variance
        curvature = (inv_var @ feature_outer_products(self.components)).view(n_masks, K, K)
        # z_bar = C W^T Psi^{-1} e_r and Gamma z_bar - 2 g = Gamma C W^T Psi^{-1} e_r - 2 W^T (u * e).
        second, weighted_inv_var = curvature @ cov, inv_var
        if weights is not None:
            second, weighted_inv_var = second * weights.view(-1, 1, 1), inv_var * weights.unsqueeze(-1)
        coefficients = torch.cat([cov, second], dim=1).permute(1, 0, 2)  # (2K, P, K)
        rows = (coefficients.reshape(-1, K) @ self.components).view(2, K, n_masks, n_features)
        rows.mul_(given / self.noise_variance)
        rows[1].addcmul_(self.components.unsqueeze(1), weighted_inv_var, value=-2)
        return rows, inv_var, variance

    def _shared_quadratic(self, residual, masks, given):
        """``sum_j u_j (e_j - w_j^T z_bar)^2`` of shape ``(n, P)`` for shared masks ``(P, D)``.

        Also returns the predictive variances, shape ``(P, D)``.
        """
        n_masks, n_features = masks.shape
        K = self.components.shape[0]
        rows, inv_var, variance = self._shared_rows(masks, given, residual.dtype)
        projected = (residual @ rows.view(-1, n_features).T).view(-1, 2, K, n_masks)
        quad = residual.square() @ inv_var.T
        quad += (projected[:, 0] * projected[:, 1]).sum(1)
        return quad, variance

    def weighted_log_prob_sum(self, X, masks, weights, *, generator=None, observed=None):
        """``sum_p weights_p sum_{j in m_p} log p(x_j | x_{r_p})`` per sample, for shared masks.

        Each mask's quadratic is ``e^T (diag(u_p) + R_{0p}^T R_{1p}) e`` with the ``K x D``
        maps of each mask, so the weighted sum over the masks is one quadratic form
        ``e^T Q e``: ``Q`` costs ``P K D^2`` multiply-adds, independent of the number of
        samples, and the samples ``n D^2``. The per-mask sums cost ``n P D (2 K + 1)``; the
        cheaper of the two is used, with the same result up to rounding.

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, n_features)
        masks : torch.Tensor of dtype bool and shape (n_masks, n_features)
        weights : torch.Tensor of shape (n_masks,)
        observed : torch.Tensor of dtype bool and shape (n_samples, n_features) or \
                (n_features,), default=None
            Entries not observed are marginalised out; a pattern shared by the samples keeps
            the quadratic form, one per sample sums the masks one by one.

        Returns
        -------
        total : torch.Tensor of shape (n_samples,)

        Examples
        --------
        With 40 samples and 2 masks of 3 features the quadratic form is the cheaper path:

        >>> import torch
        >>> from skmpt.models import FactorAnalysisModule
        >>> g = torch.Generator().manual_seed(0)
        >>> W, psi = torch.randn(1, 3, generator=g, dtype=torch.float64), torch.tensor([0.2, 1.0, 3.0])
        >>> module = FactorAnalysisModule(W, torch.zeros(3, dtype=torch.float64), psi)
        >>> X = torch.randn(40, 3, dtype=torch.float64, generator=g)
        >>> masks, weights = torch.tensor([[True, False, False], [False, True, True]]), torch.tensor([1.0, 0.5])
        >>> direct = module.masked_log_prob(X, masks).sum(-1) @ weights.double()
        >>> bool(torch.allclose(module.weighted_log_prob_sum(X, masks, weights.double()), direct))
        True
        """
        (n_samples, n_features), n_masks = X.shape, masks.shape[0]
        K = self.components.shape[0]
        per_mask_cost = n_samples * n_masks * n_features * (2 * K + 1)
        per_sample = observed is not None and observed.ndim == 2
        if per_sample or per_mask_cost <= n_masks * K * n_features**2 + n_samples * n_features**2:
            chunk = self.shared_mask_chunk(n_samples)
            options = {} if observed is None else {"observed": observed}  # subclasses may not take it
            return sum(
                (
                    self.masked_log_prob_sum(X, part, **options) @ part_weights
                    for part, part_weights in zip(masks.split(chunk), weights.split(chunk), strict=True)
                ),
                X.new_zeros(n_samples),
            )
        form, diagonal, constant = self._weighted_form(masks, weights, observed, X.dtype)
        residual = X - self.mean
        quad = residual.square() @ diagonal + ((residual @ form) * residual).sum(-1)
        return -0.5 * (constant + quad)

    def _weighted_form(self, masks, weights, observed, dtype):
        """``(form, diagonal, constant)`` of the weighted sum over shared masks: it is
        ``-0.5 (constant + e^T (diag(diagonal) + form) e)`` for the residual ``e = x - mu``."""
        n_features = masks.shape[-1]
        K = self.components.shape[0]
        form = self.mean.new_zeros(n_features, n_features, dtype=dtype)
        diagonal = self.mean.new_zeros(n_features, dtype=dtype)
        constant = self.mean.new_zeros((), dtype=dtype)
        # Chunks of masks whose per-mask rows hold a sixteenth of the working memory (2**20
        # numbers, 8 MiB in float64, by default): the chunk stays in cache.
        chunk = max(1, chunk_budget(1 / 16) // ((2 * K + 4) * n_features))
        for part, part_weights in zip(masks.split(chunk), weights.split(chunk), strict=True):
            part, given = conditioning_set(part, observed)
            rows, inv_var, variance = self._shared_rows(part, given, dtype, part_weights)
            form = form.addmm(rows[0].reshape(-1, n_features).T, rows[1].reshape(-1, n_features))
            diagonal = diagonal + part_weights @ inv_var
            constant = constant + part_weights @ _normaliser(part, variance)
        return form, diagonal, constant

    def moment_log_prob_sum(self, mean, second_moment, masks, weights, *, observed=None):
        """The data's mean of ``sum_p weights_p sum_{j in m_p} log p(x_j | x_{r_p})``, from moments.

        For masks shared by the samples the weighted sum is a quadratic form in the residual
        ``e = x - mu`` (:meth:`weighted_log_prob_sum`), so its mean over the data needs only
        their mean and second moment: ``E[e e^T] = S + (m - mu)(m - mu)^T`` with
        ``second_moment = S``, the covariance about the mean ``m``. Training from moments
        costs ``O(P K D^2)`` per step whatever the number of samples.

        Parameters
        ----------
        mean : torch.Tensor of shape (n_features,)
            The (weighted) mean of the samples.
        second_moment : torch.Tensor of shape (n_features, n_features)
            Their (weighted) covariance about ``mean``, divided by the total weight.
        masks : torch.Tensor of dtype bool and shape (n_masks, n_features)
        weights : torch.Tensor of shape (n_masks,)
        observed : torch.Tensor of dtype bool and shape (n_features,), default=None
            The pattern of observed entries shared by the samples (None: all); ``mean`` and
            ``second_moment`` are read at observed entries only.

        Returns
        -------
        mean_sum : torch.Tensor of shape ()

        Examples
        --------
        The mean of the per-sample sums, from two moments of the data:

        >>> import torch
        >>> from skmpt.models import PPCAModule
        >>> g = torch.Generator().manual_seed(0)
        >>> W, mu = torch.randn(1, 3, generator=g, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
        >>> module = PPCAModule(W, mu, 0.5)
        >>> X = torch.randn(50, 3, generator=g, dtype=torch.float64)
        >>> masks, weights = torch.tensor([[True, False, True]]), torch.ones(1, dtype=torch.float64)
        >>> centred = X - X.mean(0)
        >>> from_moments = module.moment_log_prob_sum(X.mean(0), centred.T @ centred / 50, masks, weights)
        >>> bool(torch.allclose(from_moments, module.weighted_log_prob_sum(X, masks, weights).mean()))
        True
        """
        form, diagonal, constant = self._weighted_form(masks, weights, observed, mean.dtype)
        offset = mean - self.mean
        quad = (second_moment.diagonal() + offset.square()) @ diagonal
        quad = quad + (form * second_moment).sum() + offset @ form @ offset
        return -0.5 * (constant + quad)

    def chain_log_prob(self, X, orderings, *, generator=None, observed=None):
        """Chain-rule terms ``log p(x_{s_t} | x_{s_{t+1:D}})`` of each ordering ``s``.

        The conditionals of an ordering do not depend on ``x``: the posterior of ``z`` after
        each step (a Kalman update with that token's noise variance) gives every step's
        variance and the weights of its prediction on the earlier tokens, a strictly
        lower-triangular map of rank ``K``, applied to all samples by blocks of matrix
        products: ``O(D K^3)`` per
        ordering plus ``O(n D (2 K + 32))`` for its samples. With one pattern of observed
        entries per sample the posterior is per sample, and the updates run token by token.

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, n_features)
        orderings : torch.Tensor of dtype long and shape (n_orderings, n_features)
        observed : torch.Tensor of dtype bool and shape (n_samples, n_features) or \
                (n_features,), default=None
            An unobserved token is skipped: its term is zero and it updates nothing.

        Returns
        -------
        terms : torch.Tensor of shape (n_samples, n_orderings, n_features)
            ``terms[:, o, t - 1]`` is step ``t`` of ordering ``o``; each row sums to ``log p(x)``
            (``log p(x_o)`` with ``observed``).
        """
        if observed is not None and observed.ndim == 2:
            return self._observed_chain(X, orderings, observed)
        return linear_gaussian_chain(X - self.mean, self.components, self.noise_variance, orderings, observed)


class PPCAModule(LinearGaussianModule):
    """PPCA: :class:`LinearGaussianModule` with one noise variance ``sigma^2`` for every feature.

    Parameters
    ----------
    components, mean
        As in :class:`LinearGaussianModule`; the rows of ``components`` are the principal axes.
    noise_variance : float or torch.Tensor of shape ()
        ``sigma^2 > 0``.

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

    def __init__(self, components, mean, noise_variance):
        noise = torch.as_tensor(noise_variance, dtype=mean.dtype, device=mean.device)
        if noise.ndim != 0:
            raise ValueError(
                f"PPCAModule has one noise variance; got shape {tuple(noise.shape)}. "
                f"FactorAnalysisModule has one per feature."
            )
        super().__init__(components, mean, noise)


class FactorAnalysisModule(LinearGaussianModule):
    """Factor analysis: :class:`LinearGaussianModule` with a noise variance ``psi_d`` per feature.

    Parameters
    ----------
    components, mean
        As in :class:`LinearGaussianModule`; the rows of ``components`` are the factors' loadings.
    noise_variance : float or torch.Tensor of shape (n_features,)
        ``psi > 0``, one variance per feature (a number is repeated for every feature).
    noise_floor : float, default=0.0
        The least noise variance of each feature, as a fraction of its variance under the
        parameters given (``feature_scales ** 2``, which stay fixed): a variance stored below it
        reads as the floor (its gradient still reaches the stored value, so that a variance held
        there can rise again). With holes the likelihood can peak where a feature's noise
        vanishes (a Heywood case), an optimum that training and EM approach at rates near one.
        0: none, the parameters exactly as given.

    Examples
    --------
    One ordering of the chain rule gives ``log p(x)`` exactly, each token's update with its
    own noise variance:

    >>> import torch
    >>> from skmpt.models import FactorAnalysisModule
    >>> psi = torch.tensor([0.2, 1.0, 3.0], dtype=torch.float64)
    >>> module = FactorAnalysisModule(torch.tensor([[1.0, 0.5, -0.3]], dtype=torch.float64), 0 * psi, psi)
    >>> X = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> terms = module.chain_log_prob(X, torch.tensor([[2, 0, 1]]))
    >>> bool(torch.allclose(terms.sum(-1).squeeze(1), module.log_marginal(X)))
    True
    """

    # A module pickled before the floor existed has none.
    noise_floor = 0.0

    def __init__(self, components, mean, noise_variance, noise_floor=0.0):
        if not 0 <= noise_floor < 1:
            raise ValueError(f"noise_floor is a fraction of each feature's variance, in [0, 1); got {noise_floor!r}.")
        noise = torch.as_tensor(noise_variance, dtype=mean.dtype, device=mean.device)
        noise = noise.expand(mean.shape).clone() if noise.ndim == 0 else noise
        # Factor analysis is equivariant to each feature's scale: its parameters are stored in
        # units of each feature's variance under the start, W W^T + Psi.
        scales = (components.detach().square().sum(0) + noise.detach()).sqrt()
        super().__init__(components, mean, noise, feature_scales=scales)
        self.noise_floor = float(noise_floor)

    @property
    def log_noise_variance(self):
        """The logarithm of the noise variances, each at least ``noise_floor`` of its feature's variance
        (``feature_scales ** 2``); the gradient passes the floor to the stored value."""
        scaled = self.log_scaled_noise
        if self.noise_floor > 0:
            scaled = scaled + (scaled.clamp_min(math.log(self.noise_floor)) - scaled).detach()
        return scaled + 2 * self.feature_scales.log()

    def noise_floors(self):
        """Each feature's least noise variance, ``noise_floor * feature_scales ** 2`` (zeros without a floor).

        Returns
        -------
        floors : torch.Tensor of shape (n_features,)

        Examples
        --------
        >>> import torch
        >>> from skmpt.models import FactorAnalysisModule
        >>> W = torch.tensor([[3.0, 1.0]], dtype=torch.float64)
        >>> psi = torch.tensor([1e-3, 1.0], dtype=torch.float64)
        >>> module = FactorAnalysisModule(W, torch.zeros(2, dtype=torch.float64), psi, noise_floor=1e-2)
        >>> module.noise_floors()
        tensor([0.0900, 0.0200], dtype=torch.float64)
        >>> module.noise_variance  # the first variance, 1e-3, is below its floor
        tensor([0.0900, 1.0000], dtype=torch.float64, grad_fn=<ExpBackward0>)
        """
        return self.noise_floor * self.feature_scales.square()
