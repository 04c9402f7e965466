r"""Mixture of Gaussians and categoricals, for tables of numbers and categories, with exact conditionals.

Each component holds a Gaussian over the numeric columns ``N`` (the covariance types of
:class:`~skmpt.models.GaussianMixtureModule`), an independent categorical over each discrete
column ``j`` of ``C`` (a binary column is a categorical of two categories, a Bernoulli) and an
independent Poisson over each count column ``j`` of ``P``:

.. math::

    p(x) = \sum_{k=1}^{K} \pi_k\, \mathcal N(x_N \mid \mu_k, \Sigma_k)
    \prod_{j \in C} \theta_{kj}[x_j] \prod_{j \in P} \mathrm{Poisson}(x_j \mid \lambda_{kj}).

Everything is exact. A masked token is predicted from the observed ones by the mixture of the
components' conditionals weighted by the responsibilities of the observed tokens,

.. math::

    p(x_j \mid x_r) = \sum_k \pi_k(x_r)\, p_k(x_j \mid x_r), \qquad
    \pi_k(x_r) \propto \pi_k\, \mathcal N(x_{r \cap N} \mid \mu_k, \Sigma_k)
    \prod_{c \in r \cap C} \theta_{kc}[x_c],

where ``p_k(x_j | x_r)`` is the Gaussian conditional on ``x_{r ∩ N}`` for a numeric ``j`` and
``theta_kj[x_j]`` for a categorical one (``Poisson(x_j | lambda_kj)`` for a count; independent of
the rest given ``k``). An entry not observed drops out: a categorical or count one from the
product, a numeric one from the Gaussian (its marginal). So the conditionals come from one joint
density and the MPT identity holds exactly (Moreno-Muñoz, Recasens and Hauberg, 2023).

The model reads a categorical column's entries as values: ``category_values`` holds each column's
categories (in the units of ``X``), and an entry is the category nearest to it. A map of the
data's units (training on standardised columns) moves the values with the data, so the
likelihood of the categories is unchanged by it. A count column is read the same way: an entry
``x`` is the count ``(x - count_zero) / count_unit``, rounded.
"""

import torch

from .contract import MaskedModel, conditioning_set, gaussian_log_prob, poisson_log_prob, standard_normal
from .gaussian_mixture import GaussianMixtureModule
from .imputation import (
    hole_patterns, mixture_mean, pattern_conditional, pattern_covariance, pattern_draws, pick_components,
)

__all__ = ["MixedMixtureModule"]


class MixedMixtureModule(MaskedModel):
    """Mixture whose components are a Gaussian over the numeric columns times categoricals.

    Parameters
    ----------
    weights : torch.Tensor of shape (n_components,)
        Mixing proportions, positive, summing to one.
    means : torch.Tensor of shape (n_components, n_numeric)
    covariances : torch.Tensor
        In :class:`~skmpt.models.GaussianMixtureModule`'s layout of ``covariance_type`` over the
        numeric columns.
    probabilities : list of torch.Tensor
        One per categorical column, of shape (n_components, n_categories_j): each row positive
        and summing to one. Stored as logits.
    category_values : list of torch.Tensor
        One per categorical column, of shape (n_categories_j,): the value of each category in the
        units of ``X``, distinct.
    numeric_features, categorical_features : sequence of int
        The columns of ``X`` of each kind; together, each column once.
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
    count_features : sequence of int, default=()
        The count columns (non-negative integers); the three sets of columns hold each column once.
    rates : torch.Tensor of shape (n_components, n_count), default=None
        Each component's Poisson rate of each count column, positive; stored as logarithms.

    Attributes
    ----------
    gaussian : GaussianMixtureModule
        The mixing proportions and the components' Gaussians over the numeric columns.
    category_logits : torch.nn.Parameter of shape (n_categorical, n_components, max_categories)
        Logits of the categoricals; entries beyond a column's categories are not used.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.mixed import MixedMixtureModule
    >>> from skmpt.testing import assert_mpt_identity
    >>> f64 = dict(dtype=torch.float64)
    >>> module = MixedMixtureModule(
    ...     torch.tensor([0.4, 0.6], **f64), torch.tensor([[0.0], [2.0]], **f64), torch.ones(2, 1, 1, **f64),
    ...     [torch.tensor([[0.9, 0.1], [0.2, 0.8]], **f64)], [torch.tensor([0.0, 1.0], **f64)], [0], [1])
    >>> X = torch.tensor([[0.3, 0.0], [1.8, 1.0]], **f64)
    >>> assert_mpt_identity(module, X)
    >>> module.log_marginal(X).shape
    torch.Size([2])
    """

    def __init__(self, weights, means, covariances, probabilities, category_values, numeric_features,
                 categorical_features, covariance_type="full", *, count_features=(), rates=None):
        super().__init__()
        numeric = torch.as_tensor(list(numeric_features), dtype=torch.long, device=means.device)
        categorical = torch.as_tensor(list(categorical_features), dtype=torch.long, device=means.device)
        count = torch.as_tensor(list(count_features), dtype=torch.long, device=means.device)
        if rates is None:
            rates = means.new_ones(weights.shape[0], len(count))
        if rates.shape != (weights.shape[0], len(count)):
            raise ValueError(f"rates must have shape (n_components, n_count) = {(weights.shape[0], len(count))}; "
                             f"got {tuple(rates.shape)}.")
        order = torch.cat([numeric, categorical, count])
        if not torch.equal(order.sort().values, torch.arange(len(order), device=order.device)):
            raise ValueError("numeric_features, categorical_features and count_features must hold each column once.")
        if len(probabilities) != len(categorical) or len(category_values) != len(categorical):
            raise ValueError("probabilities and category_values need one entry per categorical column.")
        self.gaussian = GaussianMixtureModule(weights, means, covariances, covariance_type)
        self.register_buffer("numeric_features", numeric)
        self.register_buffer("categorical_features", categorical)
        self.register_buffer("count_features", count)
        self.log_rates = torch.nn.Parameter(rates.log())
        # A count is (x - count_zero) / count_unit: the zero and the unit move with the data's units.
        self.register_buffer("count_zero", means.new_zeros(len(count)))
        self.register_buffer("count_unit", means.new_ones(len(count)))
        # Columns back in X's order from [numeric, categorical, count].
        self.register_buffer("column_order", order.argsort())
        sizes = [len(values) for values in category_values]
        width = max(sizes, default=0)
        n_components = weights.shape[0]
        logits = means.new_zeros(len(sizes), n_components, width)
        values = means.new_zeros(len(sizes), width)
        valid = torch.zeros(len(sizes), width, dtype=torch.bool, device=means.device)
        for j, (p, v) in enumerate(zip(probabilities, category_values, strict=True)):
            logits[j, :, : len(v)] = p.log()
            values[j, : len(v)] = v
            valid[j, : len(v)] = True
        self.category_logits = torch.nn.Parameter(logits)
        self.register_buffer("category_values", values)
        self.register_buffer("category_valid", valid)

    @property
    def n_components(self):
        return self.gaussian.n_components

    @property
    def n_features(self):
        return len(self.column_order)

    @property
    def covariance_type(self):
        return self.gaussian.covariance_type

    @property
    def log_weights(self):
        """``log pi_k``, shape ``(K,)``."""
        return self.gaussian.log_weights

    def category_log_probs(self):
        """``log theta_kj[c]``, shape ``(n_categorical, K, max_categories)``; ``-inf`` beyond a
        column's categories."""
        masked = self.category_logits.masked_fill(~self.category_valid.unsqueeze(1), -torch.inf)
        return torch.log_softmax(masked, -1)

    def codes(self, X):
        """The category index of each categorical entry: the nearest of its column's values,
        shape ``(n_samples, n_categorical)`` (any valid index where an entry is not observed)."""
        if not self.category_values.numel():  # no categorical column (or none with a category)
            return X.new_zeros(X.shape[0], len(self.categorical_features), dtype=torch.long)
        distance = (X[:, self.categorical_features].unsqueeze(-1) - self.category_values).abs()
        return distance.masked_fill(~self.category_valid, torch.inf).argmin(-1)

    def counts(self, X):
        """The counts of the count columns, ``(n_samples, n_count)``: ``(x - count_zero) / count_unit``
        rounded (the units' round trip may leave a count a rounding error away), at least 0."""
        return ((X[:, self.count_features] - self.count_zero) / self.count_unit).round().clamp_min(0)

    def _count_token_log_prob(self, X):
        """``log Poisson(x_j | lambda_kj)`` of each count entry, shape ``(n, K, n_count)``."""
        x = self.counts(X).unsqueeze(1)
        return poisson_log_prob(x, self.log_rates)

    def _full_covariances(self):
        """Every component's covariance as a full matrix, ``(K, D_N, D_N)``."""
        covariances = self.gaussian.covariances()
        return covariances if covariances.ndim == 3 else torch.diag_embed(covariances)

    # ------------------------------------------------------------------ conditionals
    def _category_token_log_prob(self, X):
        """``log theta_kj[x_j]`` of each categorical entry, shape ``(n, K, n_categorical)``."""
        log_probs = self.category_log_probs()  # (C, K, W)
        codes = self.codes(X)  # (n, C)
        index = codes.T.unsqueeze(1).expand(-1, self.n_components, -1)  # (C, K, n)
        return log_probs.gather(-1, index).permute(2, 1, 0)

    def _conditionals(self, X, given):
        """Each component's ``log p_k(x_r)`` ``(n, P, K)`` and per-token ``log p_k(x_j | x_r)``
        ``(n, P, K, D)`` (meaningful outside ``r`` only), for conditioning sets ``given`` of
        shape ``(P, D)`` or ``(n, P, D)``."""
        n_samples = X.shape[0]
        given = given.expand(n_samples, *given.shape[-2:])
        n_masks = given.shape[1]
        numeric, categorical = self.numeric_features, self.categorical_features
        X_n, given_n = X[:, numeric], given[..., numeric]
        means = self.gaussian.means
        if self.covariance_type in ("diag", "spherical"):
            token_n = gaussian_log_prob(X_n.unsqueeze(1) - means, self.gaussian.covariances())  # (n, K, D_N)
            observed_n = torch.einsum("nkd,npd->npk", token_n, given_n.to(X.dtype))
            token_n = token_n.unsqueeze(1).expand(-1, n_masks, -1, -1)
        else:
            rows = X_n.unsqueeze(1).expand(-1, n_masks, -1).reshape(n_samples * n_masks, -1)
            holes = hole_patterns(given_n.reshape(n_samples * n_masks, -1))
            covariances = self._full_covariances()
            mean, precision, log_density = pattern_conditional(rows, holes, means, covariances)
            cov = pattern_covariance(covariances, precision, holes).diagonal(dim1=-2, dim2=-1)[:, holes.index]
            # A given token has zero conditional variance; any positive value keeps its (discarded)
            # log-density finite, and its gradient out of the computation.
            variance = torch.where(holes.observed, torch.ones_like(cov), cov)
            token_n = gaussian_log_prob(rows - mean, variance)  # (K, nP, D_N)
            token_n = token_n.permute(1, 0, 2).reshape(n_samples, n_masks, self.n_components, -1)
            observed_n = log_density.T.reshape(n_samples, n_masks, self.n_components)
        token_c = self._category_token_log_prob(X)  # (n, K, D_C)
        observed_c = torch.einsum("nkc,npc->npk", token_c, given[..., categorical].to(X.dtype))
        token_c = token_c.unsqueeze(1).expand(-1, n_masks, -1, -1)
        token_p = self._count_token_log_prob(X)  # (n, K, D_P)
        observed_p = torch.einsum("nkc,npc->npk", token_p, given[..., self.count_features].to(X.dtype))
        token_p = token_p.unsqueeze(1).expand(-1, n_masks, -1, -1)
        token = torch.cat([token_n, token_c, token_p], -1)[..., self.column_order]
        return observed_n + observed_c + observed_p, token

    def masked_log_prob(self, X, masks, *, generator=None, observed=None):
        """Per-token ``log p(x_j | x_r)`` at masked positions, zero at observed ones, exact.

        As :meth:`~skmpt.models.MaskedModel.masked_log_prob`; ``generator`` is ignored; entries not
        ``observed`` are marginalised out. Returns shape ``(n_samples, n_masks, n_features)``.
        """
        masks, given = conditioning_set(masks, observed)
        observed_log_prob, token_log_prob = self._conditionals(X, given)
        joint = self.log_weights + observed_log_prob
        log_prob = torch.logsumexp(joint.unsqueeze(-1) + token_log_prob, -2) - torch.logsumexp(joint, -1, keepdim=True)
        return torch.where(masks.expand_as(log_prob), log_prob, torch.zeros_like(log_prob))

    def _joint(self, X, observed):
        """``log pi_k + log p_k(x_o)``, shape ``(n, K)``."""
        if observed is None:
            observed = torch.ones(X.shape, dtype=torch.bool, device=X.device)
        given = observed.expand_as(X).unsqueeze(1)
        return self.log_weights + self._conditionals(X, given)[0].squeeze(1)

    def log_marginal(self, X, *, generator=None, observed=None):
        """Closed-form ``log p(x)`` (``log p(x_o)`` with ``observed``) per sample, ``(n_samples,)``: zero
        exactly where nothing is observed (the log-sum of the weights is zero up to rounding)."""
        values = torch.logsumexp(self._joint(X, observed), -1)
        return values if observed is None else torch.where(observed.any(-1), values, torch.zeros_like(values))

    def posterior(self, X, *, observed=None):
        """Responsibilities ``p(k | x)`` (``p(k | x_o)``): a tuple holding one ``(n_samples, K)`` tensor."""
        return (torch.softmax(self._joint(X, observed), -1),)

    # ------------------------------------------------------------------ imputation
    def missing_given_observed(self, X, observed):
        """Each component's conditional mean and covariance of the numeric columns given ``x_o``,
        ``(K, n, D_N)`` and ``(K, n, D_N, D_N)`` (zero in the observed rows and columns), and
        ``log pi_k + log p_k(x_o)``, ``(n, K)``: EM's E-step, each row's covariance that of its pattern of
        holes (:meth:`conditional_by_pattern`)."""
        mean, covariance, holes, log_joint = self.conditional_by_pattern(X, observed)
        return mean, covariance[:, holes.index], log_joint

    def conditional_by_pattern(self, X, observed):
        """:meth:`missing_given_observed` with each conditional covariance once per pattern of holes of
        the numeric columns: ``(mean, covariance, holes, log_joint)``, ``covariance`` ``(K, U, D_N, D_N)``
        for the :class:`~skmpt.models.imputation.HolePatterns` ``holes`` of ``observed``'s numeric
        columns (:func:`~skmpt.models.imputation.pattern_conditional`; row ``i``'s is
        ``covariance[:, holes.index[i]]``)."""
        numeric = self.numeric_features
        holes = hole_patterns(observed[:, numeric])
        covariances = self._full_covariances()
        mean, precision, log_density = pattern_conditional(X[:, numeric], holes, self.gaussian.means, covariances)
        # log p_k(x_o): the numeric part is the conditional's own density (as in _conditionals, not computed twice)
        seen = observed.to(X.dtype)
        discrete = (torch.einsum("nkc,nc->nk", self._category_token_log_prob(X), seen[:, self.categorical_features])
                    + torch.einsum("nkc,nc->nk", self._count_token_log_prob(X), seen[:, self.count_features]))
        covariance = pattern_covariance(covariances, precision, holes)
        return mean, covariance, holes, self.log_weights + log_density.T + discrete

    def _assemble(self, numeric, categorical, counts):
        """Columns ``[numeric, categorical, count]`` back in ``X``'s order (counts in ``X``'s units)."""
        counts = self.count_zero + self.count_unit * counts
        return torch.cat([numeric, categorical, counts], -1)[..., self.column_order]

    def impute(self, X, observed, *, generator=None):
        """Numeric and count entries: ``E[x_j | x_o]``; categorical ones: the most probable category
        under ``p(x_j | x_o) = sum_k p(k | x_o) theta_kj``. Observed entries as in ``X``."""
        mean, _, _, log_resp = self.conditional_by_pattern(X, observed)
        numeric, counts = mixture_mean(log_resp, mean), mixture_mean(log_resp, self.log_rates.exp())
        return torch.where(observed, X, self._assemble(numeric, self._most_probable(torch.softmax(log_resp, -1)),
                                                       counts))

    def _most_probable(self, resp):
        """Each column's most probable category's value under ``sum_k resp_k theta_kj``, for
        component probabilities ``resp`` of shape ``(n, K)``: shape ``(n, n_categorical)``."""
        if not self.category_values.numel():
            return resp.new_zeros(resp.shape[0], len(self.categorical_features))
        probabilities = torch.einsum("nk,ckw->ncw", resp, self.category_log_probs().exp())
        return self._values(probabilities.argmax(-1))

    def _values(self, codes):
        """The values of category indices ``codes`` of shape ``(..., n_categorical)``."""
        values = self.category_values.expand(*codes.shape[:-1], *self.category_values.shape)
        return values.gather(-1, codes.unsqueeze(-1)).squeeze(-1)

    def _draw_categories(self, picks, generator):
        """A category of each column for components ``picks`` of any shape: ``(*picks.shape, n_categorical)``."""
        if not self.category_values.numel():
            return picks.new_zeros(*picks.shape, len(self.categorical_features))
        probabilities = self.category_log_probs().exp()[:, picks]  # (C, *picks, W)
        flat = probabilities.reshape(-1, probabilities.shape[-1]).detach().cpu()
        codes = torch.multinomial(flat, 1, generator=generator).view(probabilities.shape[:-1])
        return codes.to(picks.device).movedim(0, -1)

    def sample_missing(self, X, observed, n_draws, *, generator=None):
        """Draws of ``x`` given ``x_o``, ``(n_draws, n, D)``: a component from ``p(k | x_o)``,
        then the numeric entries from its conditional Gaussian and the categories from its
        categoricals."""
        mean, cov, holes, log_resp = self.conditional_by_pattern(X, observed)
        picks = pick_components(log_resp, n_draws, generator)  # (n_draws, n)
        noise = standard_normal((n_draws, 1, X.shape[0], mean.shape[-1], 1), X, generator)
        numeric = pattern_draws(mean, cov, holes, picks, noise)
        categorical = self._values(self._draw_categories(picks, generator))
        return torch.where(observed, X, self._assemble(numeric, categorical, self._draw_counts(picks, generator)))

    def _draw_counts(self, picks, generator):
        """A count of each count column for components ``picks``: ``(*picks.shape, n_count)``, drawn on the CPU."""
        rates = self.log_rates.exp().detach()[picks]
        return torch.poisson(rates.cpu(), generator=generator).to(rates.device)

    def decode(self, Z):
        """Given component probabilities ``Z``: the numeric and count means (``Z @ means``, ``Z @ rates``)
        and each column's most probable category under ``sum_k Z_k theta_kj``; shape ``(n, D)``."""
        return self._assemble(Z @ self.gaussian.means, self._most_probable(Z), Z @ self.log_rates.exp())

    def unstandardize_(self, center, scale):
        """Map parameters fitted on ``(x - center) / scale`` back to the units of ``x``, in place.

        The Gaussian maps as :meth:`~skmpt.models.GaussianMixtureModule.unstandardize_`; the categories'
        values move with the data, their probabilities stay. ``center`` and ``scale`` are taken to the
        module's device and dtype. Returns self.
        """
        center, scale = (torch.as_tensor(a).to(self.category_values) for a in (center, scale))
        scale = scale.reshape(-1)
        scale_n = scale if scale.numel() == 1 else scale[self.numeric_features]
        scale_c = scale if scale.numel() == 1 else scale[self.categorical_features]
        self.gaussian.unstandardize_(center[self.numeric_features], scale_n)
        values = center[self.categorical_features].unsqueeze(-1) + scale_c.unsqueeze(-1) * self.category_values
        self.category_values.copy_(torch.where(self.category_valid, values, torch.zeros_like(values)))
        scale_p = scale if scale.numel() == 1 else scale[self.count_features]
        self.count_zero.copy_(center[self.count_features] + scale_p * self.count_zero)
        self.count_unit.mul_(scale_p)
        return self

    def sample(self, n_samples, *, generator=None):
        """Draw ``n_samples`` rows and their components; noise drawn on the CPU.

        Returns
        -------
        X : torch.Tensor of shape (n_samples, n_features)
        labels : torch.Tensor of dtype long and shape (n_samples,)
        """
        numeric, labels = self.gaussian.sample(n_samples, generator=generator)  # the components and the numbers
        categorical = self._values(self._draw_categories(labels, generator))
        return self._assemble(numeric, categorical, self._draw_counts(labels, generator)), labels
