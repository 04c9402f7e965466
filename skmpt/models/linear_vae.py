r"""A linear latent-variable model integrated on a Gauss–Hermite grid.

.. math::

    z \sim \mathcal N(0, I_K), \qquad
    x_d \mid z \sim \mathrm{Bernoulli}(\sigma(w_d^\top z + b_d))
    \quad\text{or}\quad \mathcal N(w_d^\top z + b_d, \sigma^2).

The prior is replaced by a tensor Gauss–Hermite grid ``{(z_g, v_g)}`` whose weights sum to
one. The model *is* the grid's joint ``p(x) = sum_g v_g prod_d p(x_d | z_g)``: its LML, its
masked conditionals ``p(x_j | x_r) = sum_g pi_g(x_r) p(x_j | z_g)`` with the grid posterior
``pi_g(x_r) ∝ v_g prod_{d in r} p(x_d | z_g)``, and its posterior all come from the same
grid, so the MPT identity holds exactly (to rounding) for any grid size.

``sum_{d in r} log p(x_d | z_g)`` is a matrix product of the masked data with a
``(D, G)`` table for both likelihoods; for the Bernoulli likelihood the predictive
``sum_g pi_g sigma(+-a_gj)`` is too, so no ``(n_samples, G, D)`` tensor is formed (at D=784,
N=2000 and a 32 x 32 grid it would take 13 GB). The Gaussian likelihood, a cross-check
against PPCA, evaluates its predictive per token with a log-sum-exp over the grid, in chunks.
"""

import itertools

import numpy as np
import torch

from .contract import MaskedModel, conditioning_set
from .imputation import pick_components
from .likelihoods import make_likelihood

__all__ = ["LinearVAEModule", "gauss_hermite_grid"]


def gauss_hermite_grid(n_components, n_points, *, dtype=torch.float64, device=None):
    """Tensor Gauss–Hermite grid for ``N(0, I_K)``.

    Parameters
    ----------
    n_components : int
        Latent dimension ``K``.
    n_points : int
        Nodes per dimension ``Q``; the grid has ``Q**K`` points.

    Returns
    -------
    nodes : torch.Tensor of shape (Q**K, K)
    log_weights : torch.Tensor of shape (Q**K,)
        Logarithms of weights that sum to one.

    Examples
    --------
    >>> from skmpt.models.linear_vae import gauss_hermite_grid
    >>> nodes, log_weights = gauss_hermite_grid(2, 10)
    >>> nodes.shape, round(float(log_weights.exp().sum()), 12)
    (torch.Size([100, 2]), 1.0)
    >>> round(float((log_weights.exp()[:, None] * nodes**2).sum(0)[0]), 12)  # E[z_1^2] = 1
    1.0
    """
    points, weights = np.polynomial.hermite_e.hermegauss(n_points)
    weights = weights / weights.sum()
    nodes = np.array(list(itertools.product(points, repeat=n_components)))
    log_weights = np.log(np.array(list(itertools.product(weights, repeat=n_components)))).sum(1)
    return (
        torch.as_tensor(nodes, dtype=dtype, device=device),
        torch.as_tensor(log_weights, dtype=dtype, device=device),
    )


class LinearVAEModule(MaskedModel):
    """Linear decoder, Bernoulli or Gaussian likelihood, prior integrated on a grid.

    A deterministic :class:`MaskedModel` with its own ``chain_log_prob`` (grid posterior
    updated one token at a time).

    Parameters
    ----------
    components : torch.Tensor of shape (n_components, n_features)
        Decoder weights; column ``d`` is ``w_d``.
    intercept : torch.Tensor of shape (n_features,)
    n_quadrature : int
        Gauss–Hermite nodes per latent dimension.
    likelihood : {"bernoulli", "gaussian"}
        Becomes the ``likelihood`` attribute, the observation model's object.
    noise_variance : float, default=1.0
        ``sigma^2`` of the Gaussian likelihood (a parameter of the likelihood; unused for Bernoulli).
    encoder : bool, default=False
        Add an amortised linear Gaussian encoder ``q(z | x)`` (:meth:`encode`) for the ELBO.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import LinearVAEModule
    >>> from skmpt.testing import assert_mpt_identity
    >>> g = torch.Generator().manual_seed(0)
    >>> W = torch.randn(2, 5, generator=g, dtype=torch.float64)
    >>> module = LinearVAEModule(W, torch.zeros(5, dtype=torch.float64), n_quadrature=8)
    >>> X = torch.randint(0, 2, (4, 5), generator=g).double()
    >>> assert_mpt_identity(module, X)
    """

    def __init__(self, components, intercept, n_quadrature, *, likelihood="bernoulli", noise_variance=1.0,
                 encoder=False):
        super().__init__()
        self.likelihood = make_likelihood(likelihood, intercept, variance=noise_variance)
        self.components = torch.nn.Parameter(components)
        self.intercept = torch.nn.Parameter(intercept)
        nodes, log_weights = gauss_hermite_grid(
            components.shape[0], n_quadrature, dtype=components.dtype, device=components.device
        )
        self.register_buffer("nodes", nodes)
        self.register_buffer("log_weights", log_weights)
        if encoder:
            K, D = components.shape
            self.encoder_weight = torch.nn.Parameter(torch.zeros(D, 2 * K, dtype=components.dtype,
                                                                 device=components.device))
            self.encoder_bias = torch.nn.Parameter(torch.zeros(2 * K, dtype=components.dtype,
                                                               device=components.device))

    @property
    def noise_variance(self):
        """``sigma^2`` of the Gaussian likelihood, a 0-d tensor."""
        return self.likelihood.variance()

    def unstandardize_(self, center, scale):
        """Map parameters fitted on ``(x - center) / scale`` back (Gaussian likelihood only)."""
        self.likelihood.unstandardize_(scale)
        self.components.mul_(scale)
        self.intercept.mul_(scale).add_(center)
        return self

    # ------------------------------------------------------------------ grid tables
    def _activations(self):
        """``a_gd = w_d . z_g + b_d``, shape ``(G, D)``."""
        return self.nodes @ self.components + self.intercept

    def _observed_log_lik(self, X, observed):
        """``sum_{d in r} log p(x_d | z_g)``: shape ``(n, P, G)`` for weights ``observed``
        of shape ``(P, D)`` (shared) or ``(n, P, D)``; ``(n, G)`` for ``observed=None`` (all)."""
        linear, square, constant = self.likelihood.natural_terms(self._activations())
        if observed is None:
            out = X @ linear.T + constant.sum(1)
            return out if square is None else out + square * X.square().sum(1, keepdim=True)
        data = observed * X.unsqueeze(1)  # (n, P, D): the masked data, inherent to per-mask posteriors
        out = data @ linear.T + observed @ constant.T
        if square is not None:
            out = out + square * (data * X.unsqueeze(1)).sum(-1, keepdim=True)
        return out

    def _grid_posterior(self, X, given):
        """Log grid posterior given the tokens ``given`` (``(P, D)`` or ``(n, P, D)``), ``(n, P, G)``,
        normalised over the grid."""
        observed = given.to(X.dtype)
        return torch.log_softmax(self.log_weights + self._observed_log_lik(X, observed), dim=-1)

    def _predictive_log_prob(self, X, log_posterior):
        """``log p(x_j | x_r)`` for every token, ``(n, P, D)``, from the grid posterior."""
        return self.likelihood.mixture_log_prob(X, log_posterior, self._activations())

    # ------------------------------------------------------------------ the interface
    def masked_log_prob(self, X, masks, *, generator=None, observed=None):
        """Per-token ``log p(x_j | x_r)`` at masked positions, zero elsewhere: ``(n, P, D)``.

        Entries not ``observed`` are left out of ``r`` (marginalised out).
        """
        masks, given = conditioning_set(masks, observed)
        log_prob = self._predictive_log_prob(X, self._grid_posterior(X, given))
        return torch.where(masks, log_prob, torch.zeros_like(log_prob))

    def chain_log_prob(self, X, orderings, *, generator=None, observed=None):
        """Chain-rule terms ``log p(x_{s_t} | x_{s_{t+1:D}})``, shape ``(n, O, D)``.

        Reveals one token at a time and updates the grid posterior: ``O(n G)`` per token. An
        unobserved token (``observed``, ``(n, D)`` or ``(D,)``) is skipped: its term is zero.
        """
        n_samples = X.shape[0]
        n_orderings, n_features = orderings.shape
        a = self._activations()
        log_post = self.log_weights.expand(n_samples, n_orderings, -1)
        terms = X.new_empty(n_samples, n_orderings, n_features)
        for t in range(n_features - 1, -1, -1):
            token = orderings[:, t]
            x = X[:, token].unsqueeze(-1)  # (n, O, 1)
            joint = log_post + self.likelihood.log_prob(x, a[:, token].T)  # a: (O, G)
            if observed is not None:
                joint = torch.where(observed.expand(n_samples, n_features)[:, token].unsqueeze(-1), joint, log_post)
            terms[:, :, t] = torch.logsumexp(joint, -1) - torch.logsumexp(log_post, -1)
            log_post = joint
        return terms

    def _log_lik(self, X, observed):
        if observed is None:
            return self._observed_log_lik(X, None)
        return self._observed_log_lik(X, observed.expand_as(X).unsqueeze(1).to(X.dtype)).squeeze(1)

    def log_marginal(self, X, *, generator=None, observed=None):
        """Grid log-marginal likelihood ``log sum_g v_g p(x | z_g)``, shape ``(n_samples,)``.

        With ``observed``, that of each sample's observed entries.
        """
        return torch.logsumexp(self.log_weights + self._log_lik(X, observed), dim=-1)

    def posterior(self, X, *, observed=None):
        """Grid posterior of ``z`` given ``x`` (or its ``observed`` entries): mean ``(n, K)`` and
        covariance ``(n, K, K)``."""
        weights = torch.softmax(self.log_weights + self._log_lik(X, observed), dim=-1)
        mean = weights @ self.nodes
        second = torch.einsum("ng,gk,gl->nkl", weights, self.nodes, self.nodes)
        return mean, second - mean.unsqueeze(-1) * mean.unsqueeze(-2)

    def impute(self, X, observed, *, generator=None):
        """``E[x | x_o]`` on the grid: ``sum_g pi_g(x_o) E[x | z_g]`` at the missing entries."""
        weights = torch.softmax(self.log_weights + self._log_lik(X, observed), dim=-1)
        return torch.where(observed, X, weights @ self.likelihood.mean(self._activations()))

    def sample_missing(self, X, observed, n_draws, *, generator=None):
        """Draws of ``x`` given ``x_o``, ``(n_draws, n, D)``: a grid node from ``pi(x_o)``, then
        the missing entries from the likelihood at that node."""
        picks = pick_components(self.log_weights + self._log_lik(X, observed), n_draws, generator)
        return torch.where(observed, X, self.likelihood.sample(self._activations()[picks], generator))

    def decode(self, Z):
        """Mean of ``x`` given ``z``: probabilities (Bernoulli) or ``W z + b`` (Gaussian)."""
        return self.likelihood.mean(Z @ self.components + self.intercept)

    def log_likelihood(self, X, Z, *, observed=None):
        """``sum_d log p(x_d | z)`` for ``Z`` of shape ``(n, K)`` or ``(n, S, K)``: ``(n,)`` or ``(n, S)``.

        With ``observed`` (``(n, D)``), the sum over each sample's observed entries.
        """
        X = X.reshape(X.shape[0], *([1] * (Z.ndim - 2)), X.shape[1])
        token = self.likelihood.log_prob(X, Z @ self.components + self.intercept)
        if observed is not None:
            token = token * observed.reshape(X.shape).to(X.dtype)
        return token.sum(-1)

    def encode(self, X, *, observed=None):
        """Mean and log-variance of the linear Gaussian encoder ``q(z | x)`` (``encoder=True``); it
        sees zero at entries not ``observed``."""
        K = self.components.shape[0]
        stats = (X if observed is None else torch.where(observed, X, 0.0)) @ self.encoder_weight + self.encoder_bias
        return stats[..., :K], stats[..., K:]
