r"""The model contract: what a masked model promises to skmpt's objectives and estimators.

Everything skmpt computes from a model — the MPT loss, ``S(x; M)``, the cumulative score, the
chain estimator, the MPT curve — is built from one *reference* method,

.. math::

    \texttt{masked\_log\_prob}(X, m)_{n, p, j} = \log p(x_{n j} \mid x_{n r_p})
    \quad (j \in m_p), \qquad 0 \quad (j \notin m_p),

the per-token conditional of every masked token given the observed ones (masked tokens do
not condition on each other). An entry may also be *not observed* (missing): every method
takes an optional boolean ``observed`` (``True``: observed), and an unobserved entry is
marginalised out — neither predicted nor conditioned on — so the identity over the observed
entries gives ``log p(x_o)``. Faster methods are optimisations of the reference, never a
second definition; :func:`skmpt.testing.check_masked_model` checks that they agree.
"""

import abc
import math

import torch

from .._utils import call_with_generator
from ..masks import nested_masks

__all__ = [
    "MaskedModel",
    "conditioning_set",
    "gaussian_log_prob",
    "has_own_chain",
    "has_own_weighted_sum",
    "importance_log_weights",
    "reference_chain_log_prob",
    "standard_normal",
    "standard_normal_log_prob",
]


def standard_normal(shape, like, generator=None):
    """Standard normal noise of ``shape`` with the dtype and device of the tensor ``like``.

    With a ``generator`` (a CPU :class:`torch.Generator`) the noise is drawn on the CPU and
    moved, so one seed gives the same draws on every device; without one it comes from
    torch's global generator on ``like``'s device (as in training, which seeds it).

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import standard_normal
    >>> like = torch.zeros(1, dtype=torch.float64)
    >>> a = standard_normal((2, 3), like, torch.Generator().manual_seed(0))
    >>> b = standard_normal((2, 3), like, torch.Generator().manual_seed(0))
    >>> bool(torch.equal(a, b)), a.dtype
    (True, torch.float64)
    """
    if generator is None:
        return torch.randn(shape, dtype=like.dtype, device=like.device)
    return torch.randn(shape, generator=generator, dtype=like.dtype).to(like.device)


def gaussian_log_prob(error, variance):
    """``log N(error | 0, variance)`` elementwise: a Gaussian log-density from its residual.

    Parameters
    ----------
    error : torch.Tensor
        ``x - mean``.
    variance : torch.Tensor
        Positive; broadcasts against ``error``.

    Returns
    -------
    log_prob : torch.Tensor

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import gaussian_log_prob
    >>> gaussian_log_prob(torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
    tensor([-0.9189, -0.9189], dtype=torch.float64)
    """
    return -0.5 * (math.log(2 * math.pi) + variance.log() + error.square() / variance)


def standard_normal_log_prob(Z):
    """``log N(z | 0, I)`` summed over the last dimension.

    Parameters
    ----------
    Z : torch.Tensor of shape (..., K)

    Returns
    -------
    log_prob : torch.Tensor of shape (...)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import standard_normal_log_prob
    >>> standard_normal_log_prob(torch.zeros(2, 1, dtype=torch.float64))
    tensor([-0.9189, -0.9189], dtype=torch.float64)
    """
    return -0.5 * (Z.square() + math.log(2 * math.pi)).sum(-1)


def conditioning_set(masks, observed):
    """The masks and the tokens they condition on, ``~masks & observed``, for ``observed``.

    Parameters
    ----------
    masks : torch.Tensor of dtype bool and shape (P, D) or (n, P, D)
    observed : torch.Tensor of dtype bool and shape (n, D) or (D,), or None
        ``True`` for an observed entry; ``(D,)`` is one pattern shared by the samples;
        ``None``: everything is observed.

    Returns
    -------
    masks : torch.Tensor
        ``masks``, expanded to ``(n, P, D)`` when ``observed`` varies by sample.
    given : torch.Tensor of dtype bool, of the shape of the returned ``masks``
        The conditioning set of each mask: unmasked and observed.

    Raises
    ------
    ValueError
        If a mask holds an entry that is not observed: a missing entry cannot be predicted.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import conditioning_set
    >>> masks = torch.tensor([[True, False, False]])
    >>> _, given = conditioning_set(masks, torch.tensor([True, True, False]))
    >>> given.tolist()
    [[False, True, False]]
    """
    if observed is None:
        return masks, ~masks
    if observed.ndim == 2:
        if masks.ndim == 2:
            masks = masks.expand(observed.shape[0], *masks.shape)
        observed = observed.unsqueeze(1)
    if bool((masks & ~observed).any()):
        raise ValueError(
            "A mask holds an entry that is not observed: masks must lie among the observed "
            "entries (a missing entry is marginalised out, never predicted)."
        )
    return masks, ~masks & observed


def importance_log_weights(model, X, noise, *, encoded=None, observed=None):
    """``log p(x, z_s) - log q(z_s | x)`` for ``z_s`` reparameterised from standard normal ``noise``.

    The proposal is the model's amortised Gaussian ``q(z | x)`` (``model.encode``), the prior
    ``N(0, I)`` and the likelihood ``model.log_likelihood(X, Z)``: the weights of the IWAE
    bound and of an importance-sampled ``log p(x)``.

    Parameters
    ----------
    model : object
        Has ``encode(X)`` and ``log_likelihood(X, Z)`` (see :class:`MaskedModel`).
    X : torch.Tensor of shape (n_samples, n_features)
    noise : torch.Tensor of shape (S, K) (shared by the samples) or (n_samples, S, K)
    encoded : tuple of torch.Tensor, default=None
        ``model.encode(X)``, if already computed.
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features), default=None
        Entries not observed are left out of the likelihood (``model.log_likelihood`` takes
        ``observed=``) and replaced by ``model.fill`` (zero if it has none) where the encoder
        sees them: the
        weights of ``log p(x_o)``.

    Returns
    -------
    log_weights : torch.Tensor of shape (n_samples, S)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import VAEModule, importance_log_weights
    >>> module = VAEModule(4, 2, (8,), "tanh", "gaussian")
    >>> X = torch.zeros(3, 4, dtype=torch.float64)
    >>> noise = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> importance_log_weights(module, X, noise).shape
    torch.Size([3, 5])
    """
    if encoded is None:
        encoded = model.encode(X if observed is None else torch.where(observed, X, getattr(model, "fill", 0.0)))
    mean, log_var = encoded
    std = (0.5 * log_var).exp().unsqueeze(1)
    z = mean.unsqueeze(1) + std * noise
    log_q = standard_normal_log_prob(noise) - torch.log(std).sum(-1)
    return model.log_likelihood(X, z, **_observed(observed)) + standard_normal_log_prob(z) - log_q


def reference_chain_log_prob(model, X, orderings, *, generator=None, observed=None):
    """Chain-rule terms from the reference conditionals on each ordering's nested masks.

    Step ``t`` of ordering ``s`` is ``log p(x_{s_t} | x_{s_{t+1:D}})``: the token that the
    ``t``-th nested mask (:func:`skmpt.masks.nested_masks`) adds, predicted by
    ``model.masked_log_prob`` on that mask. Costs ``D`` masks per ordering; a model may
    override :meth:`MaskedModel.chain_log_prob` with something faster that agrees with this.

    Parameters
    ----------
    model : object
        Has ``masked_log_prob(X, masks[, generator=])``.
    X : torch.Tensor of shape (n_samples, n_features)
    orderings : torch.Tensor of dtype long and shape (n_orderings, n_features)
    generator : torch.Generator, default=None
        Passed to a stochastic model's ``masked_log_prob``, which sees the ``n_orderings * D``
        nested masks in one call.
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features) or (n_features,), default=None
        Entries not observed are skipped (their terms are zero): each row sums to ``log p(x_o)``.

    Returns
    -------
    terms : torch.Tensor of shape (n_samples, n_orderings, n_features)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import reference_chain_log_prob
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> X = torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64)
    >>> terms = reference_chain_log_prob(joint, X, torch.tensor([[2, 0, 1]]))
    >>> bool(torch.allclose(terms.sum(-1), joint.log_marginal(X)[:, None]))
    True
    """
    n_samples = X.shape[0]
    n_orderings, n_features = orderings.shape
    masks = nested_masks(orderings).reshape(-1, n_features)
    if observed is None:
        per_token = call_with_generator(model.masked_log_prob, X, masks, generator=generator)
    else:
        masks = masks & (observed.unsqueeze(-2) if observed.ndim == 2 else observed)
        per_token = call_with_generator(model.masked_log_prob, X, masks, generator=generator, **_observed(observed))
    per_token = per_token.reshape(n_samples, n_orderings, n_features, n_features)
    # Step t predicts the token the t-th mask adds: the ordering's t-th feature.
    index = orderings.unsqueeze(0).unsqueeze(-1).expand(n_samples, -1, -1, 1)
    return per_token.gather(-1, index).squeeze(-1)


class MaskedModel(torch.nn.Module, metaclass=abc.ABCMeta):
    r"""Base class of a model with masked conditionals ``log p(x_j | x_r)``.

    A subclass implements one method, the reference :meth:`masked_log_prob`; it inherits
    :meth:`masked_log_prob_sum`, :meth:`weighted_log_prob_sum` and :meth:`chain_log_prob`
    computed from it, and may override them with faster paths that must agree with it (check with
    :func:`skmpt.testing.check_masked_model`). Any object with the same methods works with
    :mod:`skmpt.objectives` (duck typing); this class writes the contract down and supplies
    the defaults.

    **Masks.** A boolean tensor, ``True`` for a *masked* token (one to predict) and ``False``
    for an observed one, of shape ``(n_masks, D)`` (the same masks for every sample) or
    ``(n_samples, n_masks, D)`` (masks per sample, as in training). Both forms give the same
    numbers for the same masks, and a sample's numbers do not depend on which other samples
    are in ``X``. Every tensor a method returns has ``X``'s dtype and device.

    **Randomness.** A model whose conditionals are Monte Carlo estimates sets
    ``stochastic = True``. Its methods take a keyword ``generator``, a CPU
    :class:`torch.Generator` (``None``: torch's global generator, as in training), and use no
    other source of randomness: nothing random is stored on the model, so scoring never
    mutates it and is safe from several threads. Deterministic models may omit the
    argument; skmpt passes it only to stochastic ones. A stochastic model that shares noise
    across the samples of a call sets ``mask_chunk``: skmpt then passes it masks that many at
    a time, whatever the number of samples, so a sample's estimate does not depend on the
    others.

    **Optional methods**, where the model has them:

    ``log_marginal(X[, generator=][, observed=])`` → ``(n_samples,)``
        ``log p(x)`` (``log p(x_o)`` with ``observed``), exact or estimated.
        :func:`skmpt.objectives.log_marginal` and the
        estimators' ``log_marginal_likelihood`` need it; for a deterministic model the
        exhaustive cumulative MPT score must equal it.
    ``posterior(X)`` → ``(mean (n_samples, K), covariance)``
        The latent posterior given all of ``x``; ``transform`` returns its mean.
    ``decode(Z)`` → ``(n_samples, D)``
        The mean of ``x`` given latent values ``Z``; ``inverse_transform``.
    ``unstandardize_(center, scale)`` → ``self``
        Map, in place, a model fitted on ``(x - center) / scale`` (``center`` of shape
        ``(D,)``, ``scale`` a positive 0-d tensor) back to the units of ``x``, so that the
        estimators can train on standardised data. Raise ``ValueError`` if the model family is
        not closed under that map.
    ``encode(X)`` → ``(mean, log_variance)``, each ``(n_samples, K)``, and ``log_likelihood(X, Z)``
        An amortised Gaussian ``q(z | x)`` and ``sum_d log p(x_d | z)`` (``Z`` of shape
        ``(n_samples, K)`` or ``(n_samples, S, K)``), for the ELBO and IWAE objectives
        (:func:`skmpt.objectives.elbo`, :func:`skmpt.objectives.iwae`); the prior is
        ``N(0, I)``.

    Attributes
    ----------
    stochastic : bool, default=False
        Whether the conditionals are Monte Carlo estimates drawn from ``generator``.
    mask_chunk : int or None, default=None
        Masks per call for a stochastic model that shares noise across samples.

    Examples
    --------
    Independent Gaussians: ``p(x_j | x_r) = N(x_j | mu_j, sigma_j^2)``, whatever ``r``.

    >>> import math
    >>> import torch
    >>> from skmpt.models import MaskedModel
    >>> class IndependentGaussians(MaskedModel):
    ...     def __init__(self, mean, std):
    ...         super().__init__()
    ...         self.mean, self.std = torch.nn.Parameter(mean), torch.nn.Parameter(std)
    ...     def masked_log_prob(self, X, masks):
    ...         token = torch.distributions.Normal(self.mean, self.std).log_prob(X).unsqueeze(1)
    ...         return torch.where(masks, token, torch.zeros_like(token))
    ...     def log_marginal(self, X):
    ...         return torch.distributions.Normal(self.mean, self.std).log_prob(X).sum(-1)
    >>> model = IndependentGaussians(torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
    >>> X = torch.zeros(2, 3, dtype=torch.float64)
    >>> masks = torch.tensor([[True, False, True]])
    >>> model.masked_log_prob_sum(X, masks).detach()  # two tokens of log N(0 | 0, 1) each
    tensor([[-1.8379],
            [-1.8379]], dtype=torch.float64)
    >>> model.chain_log_prob(X, torch.tensor([[0, 1, 2]])).shape
    torch.Size([2, 1, 3])
    """

    stochastic = False
    mask_chunk = None

    @abc.abstractmethod
    def masked_log_prob(self, X, masks, *, generator=None, observed=None):
        """Per-token ``log p(x_j | x_r)`` at masked positions, zero at observed ones.

        The reference every other method must agree with. With ``observed``, ``r`` holds the
        unmasked *observed* tokens only: entries not observed are marginalised out.

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, n_features)
        masks : torch.Tensor of dtype bool and shape (n_masks, n_features) or \
                (n_samples, n_masks, n_features)
            ``True`` marks a masked token.
        generator : torch.Generator, default=None
            The only source of randomness of a stochastic model; deterministic models may
            leave the argument out.
        observed : torch.Tensor of dtype bool and shape (n_samples, n_features) or \
                (n_features,), default=None
            ``True`` for an observed entry (``None``: all are). Masks must lie among the
            observed entries (:func:`conditioning_set` checks it). A model that leaves the
            argument out handles complete data only.

        Returns
        -------
        log_prob : torch.Tensor of shape (n_samples, n_masks, n_features)
        """

    def masked_log_prob_sum(self, X, masks, *, generator=None, observed=None):
        """``sum_{j in m} log p(x_j | x_r)`` for every sample and mask.

        Defaults to :meth:`masked_log_prob` summed over the features; a model may compute it
        faster (the linear-Gaussian models: a quadratic form of per-mask statistics).

        Parameters
        ----------
        X, masks, generator, observed
            As in :meth:`masked_log_prob`.

        Returns
        -------
        sums : torch.Tensor of shape (n_samples, n_masks)
        """
        return call_with_generator(self.masked_log_prob, X, masks, generator=generator, **_observed(observed)).sum(-1)

    def chain_log_prob(self, X, orderings, *, generator=None, observed=None):
        """Chain-rule terms ``log p(x_{s_t} | x_{s_{t+1:D}})`` of each ordering ``s``.

        Defaults to :func:`reference_chain_log_prob` (``D`` nested masks per ordering); a
        model may update its posterior one token at a time instead.

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, n_features)
        orderings : torch.Tensor of dtype long and shape (n_orderings, n_features)
            Permutations of the features; ``orderings[o, t - 1]`` is revealed last among the
            first ``t`` and predicted at step ``t``.
        generator : torch.Generator, default=None
        observed : torch.Tensor of dtype bool, default=None
            As in :meth:`masked_log_prob`; an unobserved token's term is zero.

        Returns
        -------
        terms : torch.Tensor of shape (n_samples, n_orderings, n_features)
            ``terms[:, o, t - 1]`` is step ``t`` of ordering ``o``; for consistent
            conditionals each row sums to ``log p(x)`` (``log p(x_o)`` with ``observed``).
        """
        return reference_chain_log_prob(self, X, orderings, generator=generator, observed=observed)

    def weighted_log_prob_sum(self, X, masks, weights, *, generator=None, observed=None):
        """``sum_p weights_p sum_{j in m_p} log p(x_j | x_{r_p})`` per sample, for shared masks.

        The form of every cumulative score (:func:`skmpt.objectives.cumulative_score` weights
        a mask of size ``M`` by one over ``M`` times the number of masks of that size).
        Defaults to :meth:`masked_log_prob_sum` contracted with ``weights``; a model may add
        the masks up before it sees the samples (linear-Gaussian models: one ``D x D`` quadratic form for all
        the masks, instead of ``2 K + 1`` weighted sums per sample and mask).

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, n_features)
        masks : torch.Tensor of dtype bool and shape (n_masks, n_features)
            Shared by the samples.
        weights : torch.Tensor of shape (n_masks,)
            In ``X``'s dtype and on its device.
        generator : torch.Generator, default=None
        observed : torch.Tensor of dtype bool, default=None
            As in :meth:`masked_log_prob`.

        Returns
        -------
        total : torch.Tensor of shape (n_samples,)
        """
        sums = call_with_generator(self.masked_log_prob_sum, X, masks, generator=generator, **_observed(observed))
        return sums @ weights


def _observed(observed):
    """Keyword arguments passing ``observed`` only when there is one (complete-data models
    need not take the argument)."""
    return {} if observed is None else {"observed": observed}


def _overrides(model, name):
    method = getattr(type(model), name, None)
    return method is not None and method is not getattr(MaskedModel, name)


def has_own_chain(model):
    """Whether ``model`` has a ``chain_log_prob`` other than the reference default.

    Examples
    --------
    >>> from skmpt.models import has_own_chain
    >>> from skmpt.testing import TabularJoint
    >>> has_own_chain(TabularJoint.random(3, random_state=0))
    False
    """
    return _overrides(model, "chain_log_prob")


def has_own_weighted_sum(model):
    """Whether ``model`` has a ``weighted_log_prob_sum`` other than the default contraction.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import PPCAModule, VAEModule, has_own_weighted_sum
    >>> ppca = PPCAModule(torch.ones(1, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64), 0.5)
    >>> has_own_weighted_sum(ppca), has_own_weighted_sum(VAEModule(4, 2, (8,), "tanh", "gaussian"))
    (True, False)
    """
    return _overrides(model, "weighted_log_prob_sum")
