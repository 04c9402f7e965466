r"""Gaussian mixture as a torch module with exact masked conditionals.

The model (scikit-learn's :class:`~sklearn.mixture.GaussianMixture`) is

.. math::

    p(x) = \sum_{k=1}^{K} \pi_k\, \mathcal N(x \mid \mu_k, \Sigma_k),

with full, tied (one full covariance shared by every component), diagonal or spherical (one
variance per component) covariances. A tied covariance is one shared Cholesky factor and a
spherical one a single variance per component, expanded to the full and diagonal layouts, so
the four types share the full and the diagonal conditionals. A masked token is predicted from the observed ones by the
mixture of the components' Gaussian conditionals, weighted by the responsibilities computed
from the observed tokens only:

.. math::

    p(x_j \mid x_r) = \sum_k \pi_k(x_r)\, p_k(x_j \mid x_r), \qquad
    \pi_k(x_r) = \frac{\pi_k\, p_k(x_r)}{\sum_l \pi_l\, p_l(x_r)},

so the conditionals come from one joint density and the MPT identity holds exactly. For a
full covariance, ``p_k(x_j | x_r)`` and ``p_k(x_r)`` come from one Cholesky factor per mask and
component of ``Sigma_k`` with its masked rows and columns replaced by the identity (the
masked block decouples, so ``Sigma_rr`` is conditioned on without being cut out and masks of
every size are batched together); no inverse is formed. Along an ordering shared by the
samples, each component's conditionals come from one Cholesky factor of its covariance
permuted to the ordering (:mod:`skmpt.models._chains`); with a pattern of missing entries
per sample, each revealed token is a rank-one update of every component's conditional mean
and covariance.
"""

import math

import torch

from ._chains import gaussian_chain, mixture_chain
from ._mixture_sums import diagonal_mixture_sums
from .contract import MaskedModel, conditioning_set, gaussian_log_prob, standard_normal
from .imputation import (
    decoupled_covariance, hole_patterns, mixture_mean, pattern_conditional, pattern_covariance, pattern_draws,
    pick_components,
)

__all__ = ["GaussianMixtureModule"]

COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")
# The types whose covariances are stored as Cholesky factors; the others are diagonal.
_CHOLESKY_TYPES = ("full", "tied")


class GaussianMixtureModule(MaskedModel):
    """Gaussian mixture with unconstrained parameters and exact masked conditionals.

    Parameters
    ----------
    weights : torch.Tensor of shape (n_components,)
        Mixing proportions, positive, summing to one; stored as logits.
    means : torch.Tensor of shape (n_components, n_features)
    covariances : torch.Tensor
        Of shape (n_components, n_features, n_features) for ``"full"``, (n_features,
        n_features) for ``"tied"``, (n_components, n_features) for ``"diag"`` or
        (n_components,) for ``"spherical"`` (diagonal ones stored as logarithms), as in
        :class:`sklearn.mixture.GaussianMixture`. A full covariance is stored as its Cholesky
        factor ``L = (I + N) diag(exp(d))``: ``N`` strictly lower triangular and ``d`` the
        logarithm of ``L``'s diagonal, both unconstrained. ``N`` is unitless (a covariance
        ``LDL^T`` factorisation), so a gradient step changes correlations by the same amount
        whatever the data's scale.
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import GaussianMixtureModule
    >>> from skmpt.testing import assert_mpt_identity
    >>> means = torch.tensor([[0.0, 0.0, 0.0], [3.0, -1.0, 2.0]], dtype=torch.float64)
    >>> covariances = torch.eye(3, dtype=torch.float64).repeat(2, 1, 1) + 0.5
    >>> weights = torch.tensor([0.3, 0.7], dtype=torch.float64)
    >>> module = GaussianMixtureModule(weights, means, covariances)
    >>> X = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> assert_mpt_identity(module, X)
    """

    def __init__(self, weights, means, covariances, covariance_type="full", variance_floor=None):
        super().__init__()
        if covariance_type not in COVARIANCE_TYPES:
            raise ValueError(f"covariance_type must be one of {COVARIANCE_TYPES}; got {covariance_type!r}.")
        self.covariance_type = covariance_type
        self.weight_logits = torch.nn.Parameter(weights.log())
        # The start, fixed: every other parameter is a step from it in the start's own units.
        self.register_buffer("anchor_means", means.detach().clone())
        floor = torch.zeros_like(means[0]) if variance_floor is None else torch.as_tensor(variance_floor).to(means)
        self.register_buffer("variance_floor", floor.expand(means.shape[1]).clone())
        self.mean_steps = torch.nn.Parameter(torch.zeros_like(means))
        if covariance_type in _CHOLESKY_TYPES:  # "tied": one factor of shape (D, D)
            self.register_buffer("anchor_cholesky", torch.linalg.cholesky(covariances).detach().clone())
            self.unit_lower = torch.nn.Parameter(torch.zeros_like(covariances))
            self.log_cholesky_diagonal = torch.nn.Parameter(torch.zeros_like(covariances.diagonal(dim1=-2, dim2=-1)))
        else:  # "spherical": one variance per component, of shape (K, 1)
            log_variances = covariances.log()
            if covariance_type == "spherical":
                log_variances = log_variances.unsqueeze(-1)
            self.register_buffer("anchor_scales", (0.5 * log_variances).exp().detach().clone())
            self.log_variances = torch.nn.Parameter(log_variances)

    @property
    def n_components(self):
        return self.anchor_means.shape[0]

    @property
    def n_features(self):
        return self.anchor_means.shape[1]

    @property
    def log_weights(self):
        """``log pi_k``, shape ``(K,)``."""
        return torch.log_softmax(self.weight_logits, -1)

    @property
    def means(self):
        """``mu_k``, shape ``(K, D)``: the start's mean plus a step in the start's whitened units,
        ``mu_k = a_k + L0_k m_k`` (``L0_k`` the start's Cholesky factor, or its standard deviations)."""
        if self.covariance_type in _CHOLESKY_TYPES:
            step = (self.anchor_cholesky @ self.mean_steps.unsqueeze(-1)).squeeze(-1)
        else:
            step = self.anchor_scales * self.mean_steps
        return self.anchor_means + step

    def _relative_cholesky(self):
        """``T = (I + N) diag(exp(d))``, the factor relative to the start's: ``L = L0 T``."""
        eye = torch.eye(self.n_features, dtype=self.mean_steps.dtype, device=self.mean_steps.device)
        return (eye + self.unit_lower.tril(-1)) * self.log_cholesky_diagonal.exp().unsqueeze(-2)

    def cholesky(self):
        """Lower Cholesky factors of the covariances, shape ``(K, D, D)``."""
        if self.covariance_type in _CHOLESKY_TYPES:
            factor = self.anchor_cholesky @ self._relative_cholesky()
            if self._floored:
                factor = torch.linalg.cholesky(factor @ factor.mT + torch.diag(self.variance_floor))
            return factor.expand(self.n_components, self.n_features, self.n_features)
        return torch.diag_embed(self.variances().sqrt())

    @property
    def _floored(self):
        return bool(self.variance_floor.any())

    def log_cholesky_diagonals(self):
        """``log diag L_k`` of a full or tied covariance's factor, shape ``(K, D)`` or ``(D,)``:
        ``log diag(L0) + d`` (both factors triangular) without a floor."""
        if self._floored:
            return self.cholesky().diagonal(dim1=-2, dim2=-1).log()
        return self.anchor_cholesky.diagonal(dim1=-2, dim2=-1).log() + self.log_cholesky_diagonal

    def variances(self):
        """Diagonal (or spherical) covariances, ``exp(log_variances)`` plus the floor, shape
        ``(K, D)``."""
        return (self.log_variances.exp() + self.variance_floor).expand(self.n_components, self.n_features)

    def covariances(self):
        """Covariances: ``(K, D, D)`` (full, and tied repeated per component) or ``(K, D)``
        (diag, and spherical repeated per feature)."""
        if self.covariance_type in _CHOLESKY_TYPES:
            factor = self.anchor_cholesky @ self._relative_cholesky()
            covariance = factor @ factor.mT + torch.diag(self.variance_floor)
            return covariance.expand(self.n_components, self.n_features, self.n_features)
        return self.variances()

    def unstandardize_(self, center, scale):
        """Map parameters fitted on ``(x - center) / scale`` back to the units of ``x``.

        ``scale`` is one positive number or one per feature (mixtures of Gaussians are closed
        under affine maps): ``mu_k -> center + scale mu_k``, ``L_k -> diag(scale) L_k``.
        A spherical mixture takes one number only (it stays spherical under no other map).
        ``center`` and ``scale`` (tensors or numbers) are taken to the module's device and dtype.
        In place; returns self.
        """
        center, scale = (torch.as_tensor(a).to(self.anchor_means) for a in (center, scale))
        if self.covariance_type == "spherical":
            if scale.numel() > 1 and not bool((scale == scale.reshape(-1)[0]).all()):
                raise ValueError("A spherical mixture can be rescaled by one number only; got one per feature.")
            self.log_variances.add_(2 * scale.reshape(-1)[0].log())
            self.variance_floor.mul_(scale.reshape(-1)[0].square())
            self.anchor_scales.mul_(scale.reshape(-1)[0])
            self.anchor_means.mul_(scale.reshape(-1)[0]).add_(center)
            return self
        scale = scale.expand(self.n_features)
        # The steps are in the start's units, which move with it: L = diag(s) L0 T.
        self.anchor_means.mul_(scale).add_(center)
        self.variance_floor.mul_(scale.square())
        if self.covariance_type in _CHOLESKY_TYPES:
            self.anchor_cholesky.mul_(scale.unsqueeze(-1))
        else:
            self.anchor_scales.mul_(scale)
            self.log_variances.add_(2 * scale.log())
        return self

    # ------------------------------------------------------------------ conditionals
    def _conditionals(self, X, given):
        """Each component's ``log p_k(x_r)`` and per-token ``log p_k(x_j | x_r)``.

        ``given`` holds the conditioning sets ``r``, ``(P, D)`` or ``(n, P, D)``. Returns
        ``observed_log_prob`` of shape ``(n, P, K)`` and ``token_log_prob`` of shape
        ``(n, P, K, D)`` (meaningful outside ``r`` only).
        """
        residual = X.unsqueeze(1) - self.means  # (n, K, D)
        if self.covariance_type not in _CHOLESKY_TYPES:
            token = gaussian_log_prob(residual, self.variances())  # (n, K, D)
            observed = given.to(X.dtype)
            observed_log_prob = torch.einsum(f"nkd,{'p' if given.ndim == 2 else 'np'}d->npk", token, observed)
            return observed_log_prob, token.unsqueeze(1)
        return self._full_conditionals(residual, given)

    def _full_conditionals(self, residual, given):
        n_samples, n_features = residual.shape[0], residual.shape[-1]
        sigma = self.covariances()  # (K, D, D)
        shared = given.ndim == 2
        # Per-mask statistics depend on the conditioning set only: computed once per distinct one.
        if shared:
            unique, index = given, None
        else:
            unique, index = torch.unique(given.reshape(-1, n_features), dim=0, return_inverse=True)
        observed = unique.to(residual.dtype)  # (U, D)
        # Sigma with its masked rows and columns replaced by the identity: block diagonal,
        # Sigma_rr beside I_mm, so its Cholesky factor holds Sigma_rr's.
        decoupled = decoupled_covariance(sigma, observed.unsqueeze(1))  # (U, K, D, D)
        factor = torch.linalg.cholesky(decoupled)  # (U, K, D, D)
        log_det = 2 * factor.diagonal(dim1=-2, dim2=-1).log().sum(-1)  # log det Sigma_rr, (U, K)
        # L^{-1} applied to Sigma's observed rows: column j's squared norm is
        # Sigma_jr Sigma_rr^{-1} Sigma_rj, what conditioning removes from Sigma_jj.
        explained = torch.linalg.solve_triangular(factor, observed[:, None, :, None] * sigma, upper=False)
        variance = sigma.diagonal(dim1=-2, dim2=-1) - explained.square().sum(-2)  # (U, K, D)
        if shared:
            # alpha = Sigma_rr^{-1} (x_r - mu_r), zero at masked positions: (P, K, D, n).
            rhs = observed[:, None, :, None] * residual.permute(1, 2, 0)
            alpha = torch.cholesky_solve(rhs, factor).permute(3, 0, 1, 2)
        else:
            n_masks = given.shape[1]
            pair_factor = factor[index].view(n_samples, n_masks, *factor.shape[1:])
            rhs = observed[index].view(n_samples, n_masks, 1, n_features) * residual.unsqueeze(1)
            alpha = torch.cholesky_solve(rhs.unsqueeze(-1), pair_factor).squeeze(-1)
            observed = observed[index].view(n_samples, n_masks, n_features)
            log_det = log_det[index].view(n_samples, n_masks, -1)
            variance = variance[index].view(n_samples, n_masks, *variance.shape[1:])
        quad = (residual.unsqueeze(1) * alpha).sum(-1)  # (x_r - mu_r)^T Sigma_rr^{-1} (x_r - mu_r)
        observed_log_prob = -0.5 * (observed.sum(-1, keepdim=True) * math.log(2 * math.pi) + log_det + quad)
        # Conditional mean of x_j: mu_j + Sigma_jr alpha_r.
        error = residual.unsqueeze(1) - torch.einsum("kde,npke->npkd", sigma, alpha)
        # Observed tokens have zero conditional variance; any positive value keeps the
        # (discarded) log-density there finite, and its gradient out of the computation.
        variance = torch.where(observed.unsqueeze(-2).bool(), torch.ones_like(variance), variance)
        return observed_log_prob, gaussian_log_prob(error, variance)

    def masked_log_prob(self, X, masks, *, generator=None, observed=None):
        """Per-token ``log p(x_j | x_r)`` at masked positions, zero at observed ones.

        As :meth:`MaskedModel.masked_log_prob`; ``generator`` is ignored (the conditionals
        are exact); entries not ``observed`` are marginalised out of ``r`` and of the
        responsibilities. Returns a tensor of shape ``(n_samples, n_masks, n_features)``.
        """
        masks, given = conditioning_set(masks, observed)
        observed_log_prob, token_log_prob = self._conditionals(X, given)
        joint = self.log_weights + observed_log_prob  # log pi_k + log p_k(x_r)
        log_prob = torch.logsumexp(joint.unsqueeze(-1) + token_log_prob, -2) - torch.logsumexp(joint, -1, keepdim=True)
        return torch.where(masks, log_prob, torch.zeros_like(log_prob))

    def masked_log_prob_sum(self, X, masks, *, generator=None, observed=None):
        """``sum_{j in m} log p(x_j | x_r)`` for every sample and mask, shape ``(n_samples, n_masks)``.

        For a diagonal (or spherical) covariance and masks shared by the samples (and by the
        pattern of observed entries, if any), the sums over the components are matrix products;
        otherwise, and where those
        would lose precision, :meth:`masked_log_prob` summed over the features.
        """
        if self.covariance_type not in _CHOLESKY_TYPES and masks.ndim == 2 and (observed is None or observed.ndim == 1):
            masks, given = conditioning_set(masks, observed)
            token = gaussian_log_prob(X.unsqueeze(1) - self.means, self.variances())
            sums = diagonal_mixture_sums(self.log_weights, token, masks, given)
            if sums is not None:
                return sums
        return super().masked_log_prob_sum(X, masks, observed=observed)

    def chain_log_prob(self, X, orderings, *, generator=None, observed=None):
        """Chain-rule terms ``log p(x_{s_t} | x_{s_{t+1:D}})`` of each ordering ``s``.

        Each component's conditionals along an ordering do not depend on ``x``: they come
        from one Cholesky factor of its covariance permuted to the ordering, and one
        triangular solve gives every step's log-density for all samples at once (a diagonal
        covariance needs neither). A step's term is then the difference of the cumulative
        ``log sum_k pi_k p_k(x_revealed)``. An ordering costs
        ``O(K D^3)`` plus ``O(n K D^2)``, the closed form's cost. With one pattern of observed
        entries per sample, each revealed token updates every component's conditional mean
        and covariance by a rank-one step instead.

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, n_features)
        orderings : torch.Tensor of dtype long and shape (n_orderings, n_features)
        generator : None
            Ignored: the conditionals are exact.
        observed : torch.Tensor of dtype bool and shape (n_samples, n_features) or \
                (n_features,), default=None
            An unobserved token is skipped: its term is zero and it updates nothing (the
            components' covariances then become per sample).

        Returns
        -------
        terms : torch.Tensor of shape (n_samples, n_orderings, n_features)
            ``terms[:, o, t]`` is the term of the ``t``-th token of ordering ``o``; each row
            sums to ``log p(x)`` (``log p(x_o)`` with ``observed``).
        """
        if observed is not None and observed.ndim == 2:
            return self._observed_chain(X, orderings, observed)
        residual = X.T - self.means.unsqueeze(-1)  # (K, D, n)
        if self.covariance_type in _CHOLESKY_TYPES:
            log_prob = gaussian_chain(residual, self.covariances(), orderings, observed)
        else:
            log_prob = gaussian_log_prob(residual, self.variances().unsqueeze(-1))
            if observed is not None:
                log_prob = log_prob * observed.unsqueeze(-1)
            log_prob = log_prob[:, orderings.flip(-1)].transpose(0, 1)  # (O, K, D, n) in reveal order
        return mixture_chain(self.log_weights, log_prob)

    def _observed_chain(self, X, orderings, observed):
        """:meth:`chain_log_prob` skipping unobserved tokens, with per-sample covariances."""
        n_samples = X.shape[0]
        n_orderings, n_features = orderings.shape
        K = self.n_components
        cov = self.covariances() if self.covariance_type in _CHOLESKY_TYPES else torch.diag_embed(self.variances())
        cov = cov.expand(n_samples, n_orderings, K, n_features, n_features)
        mean = self.means.expand(n_samples, n_orderings, K, n_features)
        joint = self.log_weights.expand(n_samples, n_orderings, K)
        seen = observed.expand(n_samples, n_features)
        terms = X.new_empty(n_samples, n_orderings, n_features)
        for t in range(n_features - 1, -1, -1):
            token = orderings[:, t]
            keep = seen[:, token].unsqueeze(-1)  # (n, O, 1)
            index = token.view(1, -1, 1, 1, 1).expand(n_samples, -1, K, n_features, 1)
            column = cov.gather(-1, index).squeeze(-1)  # (n, O, K, D)
            variance = column.gather(-1, token.view(1, -1, 1, 1).expand(n_samples, -1, K, 1)).squeeze(-1)
            predicted = mean.gather(-1, token.view(1, -1, 1, 1).expand(n_samples, -1, K, 1)).squeeze(-1)
            error = X[:, token].unsqueeze(-1) - predicted  # (n, O, K)
            updated = torch.where(keep, joint + gaussian_log_prob(error, variance), joint)
            terms[:, :, t] = torch.logsumexp(updated, -1) - torch.logsumexp(joint, -1)
            joint = updated
            gain = keep.unsqueeze(-1) * column / variance.unsqueeze(-1)
            mean = mean + error.unsqueeze(-1) * gain
            cov = cov - column.unsqueeze(-1) * gain.unsqueeze(-2)
        return terms

    # ------------------------------------------------------------------ full data
    def _observed_component_log_prob(self, X, observed):
        """``log pi_k + log N(x_o | mu_k,o, Sigma_k,oo)``, shape ``(n, K)``."""
        return self.log_weights + self._conditionals(X, observed.expand_as(X).unsqueeze(1))[0].squeeze(1)

    def component_log_prob(self, X):
        """``log pi_k + log N(x | mu_k, Sigma_k)`` per sample and component, shape ``(n, K)``."""
        residual = X.unsqueeze(1) - self.means  # (n, K, D)
        if self.covariance_type not in _CHOLESKY_TYPES:
            log_prob = gaussian_log_prob(residual, self.variances()).sum(-1)
        else:
            factor = self.cholesky()
            whitened = torch.linalg.solve_triangular(factor, residual.permute(1, 2, 0), upper=False)  # (K, D, n)
            log_det = 2 * self.log_cholesky_diagonals().sum(-1)
            log_prob = -0.5 * (X.shape[1] * math.log(2 * math.pi) + log_det + whitened.square().sum(1).T)
        return self.log_weights + log_prob

    def log_marginal(self, X, *, generator=None, observed=None):
        """Closed-form ``log sum_k pi_k N(x | mu_k, Sigma_k)`` per sample, shape ``(n_samples,)``.

        With ``observed``, the density of each sample's observed sub-vector (zero exactly when
        nothing is observed: the log-sum of the weights is zero up to rounding).
        """
        if observed is not None:
            values = torch.logsumexp(self._observed_component_log_prob(X, observed), -1)
            return torch.where(observed.any(-1), values, torch.zeros_like(values))
        return torch.logsumexp(self.component_log_prob(X), -1)

    def posterior(self, X, *, observed=None):
        """Responsibilities ``p(k | x)`` (``p(k | x_o)`` with ``observed``): the posterior mean
        of the one-hot latent.

        Returns a tuple holding one tensor of shape ``(n_samples, K)``.
        """
        if observed is not None:
            return (torch.softmax(self._observed_component_log_prob(X, observed), -1),)
        return (torch.softmax(self.component_log_prob(X), -1),)

    def _missing_given_observed(self, X, observed):
        """Each component's conditional mean ``(K, n, D)`` of ``x`` given ``x_o``, the conditional covariance of
        each pattern of holes ``(K, U, D, D)``, those :class:`~skmpt.models.imputation.HolePatterns`, and the
        log-responsibilities ``(n, K)`` (:func:`~skmpt.models.imputation.pattern_conditional`)."""
        factor = self.cholesky()
        covariances = factor @ factor.mT
        holes = hole_patterns(observed)
        mean, precision, log_density = pattern_conditional(X, holes, self.means, covariances)
        cov = pattern_covariance(covariances, precision, holes)
        return mean, cov, holes, (self.log_weights.unsqueeze(-1) + log_density).T

    def impute(self, X, observed, *, generator=None):
        """``E[x | x_o]``: the components' conditional means weighted by ``p(k | x_o)``."""
        mean, _, _, log_resp = self._missing_given_observed(X, observed)
        return torch.where(observed, X, mixture_mean(log_resp, mean))

    def sample_missing(self, X, observed, n_draws, *, generator=None):
        """Draws of ``x`` given ``x_o``, ``(n_draws, n, D)``: a component from ``p(k | x_o)``,
        then the missing entries from its conditional Gaussian."""
        mean, cov, holes, log_resp = self._missing_given_observed(X, observed)
        picks = pick_components(log_resp, n_draws, generator)  # (n_draws, n)
        noise = standard_normal((n_draws, 1, *X.shape, 1), X, generator)
        return torch.where(observed, X, pattern_draws(mean, cov, holes, picks, noise))

    def decode(self, Z):
        """Mean of ``x`` given component probabilities ``Z``: ``Z @ means``, shape ``(n, D)``."""
        return Z @ self.means

    def sample(self, n_samples, *, generator=None):
        """Draw ``n_samples`` points and their components; noise drawn on the CPU.

        Returns
        -------
        X : torch.Tensor of shape (n_samples, n_features)
        labels : torch.Tensor of dtype long and shape (n_samples,)
        """
        weights = self.log_weights.exp().detach().cpu()
        labels = torch.multinomial(weights, n_samples, replacement=True, generator=generator)
        noise = torch.randn(n_samples, self.n_features, dtype=weights.dtype, generator=generator)
        labels, noise = labels.to(self.means.device), noise.to(self.means.device)
        X = self.means[labels] + (self.cholesky()[labels] @ noise.unsqueeze(-1)).squeeze(-1)
        return X, labels
