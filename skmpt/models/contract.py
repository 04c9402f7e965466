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
import functools
import inspect
import math

import torch

from ..masks import nested_masks

__all__ = [
    "CONTRACT_KEYWORDS",
    "MaskedModel",
    "MaskedModelAdapter",
    "as_masked_model",
    "conditioning_set",
    "gaussian_log_prob",
    "has_own_chain",
    "has_own_weighted_sum",
    "importance_log_weights",
    "model_name",
    "poisson_log_prob",
    "provides",
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
    >>> from skmpt.models.contract import standard_normal
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
    >>> from skmpt.models.contract import gaussian_log_prob
    >>> gaussian_log_prob(torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
    tensor([-0.9189, -0.9189], dtype=torch.float64)
    """
    return -0.5 * (math.log(2 * math.pi) + variance.log() + error.square() / variance)


def poisson_log_prob(counts, log_rate):
    """``log Poisson(counts | exp(log_rate))`` elementwise, computed in float64 and returned in
    ``log_rate``'s dtype: its three terms grow as the counts (about 1e7 at counts of 1e6) and cancel
    to a few nats, which float32 arithmetic left up to a nat off.

    Parameters
    ----------
    counts : torch.Tensor
        Non-negative integers (as floats).
    log_rate : torch.Tensor
        Broadcasts against ``counts``.

    Returns
    -------
    log_prob : torch.Tensor

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.contract import poisson_log_prob
    >>> poisson_log_prob(torch.tensor([0.0, 2.0]), torch.zeros(2)).exp()
    tensor([0.3679, 0.1839])
    """
    k, log_rate64 = counts.double(), log_rate.double()
    return (k * log_rate64 - log_rate64.exp() - torch.lgamma(k + 1)).to(log_rate.dtype)


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
    >>> from skmpt.models.contract import standard_normal_log_prob
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
    >>> from skmpt.models.contract import conditioning_set
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
    model : MaskedModel or object
        Has ``encode`` and ``log_likelihood`` (see :class:`MaskedModel`); another object is
        wrapped by :func:`~skmpt.models.as_masked_model`.
    X : torch.Tensor of shape (n_samples, n_features)
    noise : torch.Tensor of shape (S, K) (shared by the samples) or (n_samples, S, K)
    encoded : tuple of torch.Tensor, default=None
        ``model.encode(X, observed=observed)``, if already computed.
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features), default=None
        Entries not observed are left out of the likelihood and out of what the encoder sees
        (both take ``observed=``): the weights of ``log p(x_o)``.

    Returns
    -------
    log_weights : torch.Tensor of shape (n_samples, S)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import VAEModule
    >>> from skmpt.models.contract import importance_log_weights
    >>> module = VAEModule(4, 2, (8,), "tanh", "gaussian")
    >>> X = torch.zeros(3, 4, dtype=torch.float64)
    >>> noise = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> importance_log_weights(module, X, noise).shape
    torch.Size([3, 5])
    """
    model = as_masked_model(model)
    mean, log_var = model.encode(X, observed=observed) if encoded is None else encoded
    std = (0.5 * log_var).exp().unsqueeze(1)
    z = mean.unsqueeze(1) + std * noise
    log_q = standard_normal_log_prob(noise) - torch.log(std).sum(-1)
    return model.log_likelihood(X, z, observed=observed) + standard_normal_log_prob(z) - log_q


def reference_chain_log_prob(model, X, orderings, *, generator=None, observed=None):
    """Chain-rule terms from the reference conditionals on each ordering's nested masks.

    Step ``t`` of ordering ``s`` is ``log p(x_{s_t} | x_{s_{t+1:D}})``: the token that the
    ``t``-th nested mask (:func:`skmpt.masks.nested_masks`) adds, predicted by
    ``model.masked_log_prob`` on that mask. Costs ``D`` masks per ordering; a model may
    override :meth:`~skmpt.models.MaskedModel.chain_log_prob` with something faster that agrees with this.

    Parameters
    ----------
    model : MaskedModel or object
        Has ``masked_log_prob``; another object is wrapped by :func:`~skmpt.models.as_masked_model`.
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
    >>> from skmpt.models.contract import reference_chain_log_prob
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> X = torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64)
    >>> terms = reference_chain_log_prob(joint, X, torch.tensor([[2, 0, 1]]))
    >>> bool(torch.allclose(terms.sum(-1), joint.log_marginal(X)[:, None]))
    True
    """
    model = as_masked_model(model)
    n_samples = X.shape[0]
    n_orderings, n_features = orderings.shape
    masks = nested_masks(orderings).reshape(-1, n_features)
    if observed is not None:
        masks = masks & (observed.unsqueeze(-2) if observed.ndim == 2 else observed)
    per_token = model.masked_log_prob(X, masks, generator=generator, observed=observed)
    per_token = per_token.reshape(n_samples, n_orderings, n_features, n_features)
    # Step t predicts the token the t-th mask adds: the ordering's t-th feature.
    index = orderings.unsqueeze(0).unsqueeze(-1).expand(n_samples, -1, -1, 1)
    return per_token.gather(-1, index).squeeze(-1)


#: The keyword arguments each method of the contract takes (keyword-only, default None), besides
#: its positional ones. A :class:`MaskedModel` subclass, or a wrapped object, whose method leaves
#: one out still accepts it: ``generator`` is then dropped (a deterministic method needs none) and
#: an ``observed`` that is not None raises ``NotImplementedError`` naming the model and the method.
CONTRACT_KEYWORDS = {
    "masked_log_prob": ("generator", "observed"),
    "masked_log_prob_sum": ("generator", "observed"),
    "weighted_log_prob_sum": ("generator", "observed"),
    "chain_log_prob": ("generator", "observed"),
    "log_marginal": ("generator", "observed"),
    "posterior": ("observed",),
    "encode": ("observed",),
    "log_likelihood": ("observed",),
    "impute": ("generator",),
    "sample_missing": ("generator",),
    "decode": (),
    "unstandardize_": (),
    "shared_mask_chunk": (),
}


def _takes(function, keyword):
    """Whether ``function`` accepts the keyword argument ``keyword`` (by name or ``**kwargs``)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): pass every keyword
        return True
    return any(p.name == keyword and p.kind != p.POSITIONAL_ONLY or p.kind == p.VAR_KEYWORD for p in parameters)


def _with_contract_keywords(function, name, owner):
    """``function`` (the method ``name`` of ``owner``), taking every keyword of :data:`CONTRACT_KEYWORDS`.

    Decided once, from the signature: a keyword the function takes is passed on; a ``generator``
    it does not take is dropped, an ``observed`` it does not take must be None.
    """
    missing = tuple(keyword for keyword in CONTRACT_KEYWORDS[name] if not _takes(function, keyword))
    if not missing:
        return function

    @functools.wraps(function)
    def method(*args, **kwargs):
        if "observed" in missing and kwargs.pop("observed", None) is not None:
            raise NotImplementedError(
                f"{owner}.{name} takes no observed=: the model handles complete rows only. Entries not "
                f"observed (NaN) need a model whose {name} takes observed= and marginalises them out."
            )
        if "generator" in missing:
            kwargs.pop("generator", None)
        return function(*args, **kwargs)

    declared = inspect.signature(function)
    added = [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None) for k in missing]
    method.__signature__ = declared.replace(parameters=[*declared.parameters.values(), *added])
    return method


def _not_provided(model, member, needed_by):
    return NotImplementedError(
        f"{model_name(model)} does not provide {member}, an optional member of the masked-model contract "
        f"(skmpt.models.MaskedModel) that {needed_by} needs."
    )


class MaskedModel(torch.nn.Module, metaclass=abc.ABCMeta):
    r"""Base class of a model with masked conditionals ``log p(x_j | x_r)``.

    A subclass implements one method, the reference :meth:`masked_log_prob`; it inherits
    :meth:`masked_log_prob_sum`, :meth:`weighted_log_prob_sum` and :meth:`chain_log_prob`
    computed from it, and may override them with faster paths that must agree with it (check with
    :func:`skmpt.testing.check_masked_model`). Every other member of the contract is declared
    here with its default, so that skmpt calls them directly and never asks whether a model
    has them. :mod:`skmpt.objectives` and :mod:`skmpt.testing` also take an object that is not
    a subclass but has ``masked_log_prob`` (duck typing): :func:`as_masked_model` wraps it once,
    where it enters.

    **Masks.** A boolean tensor, ``True`` for a *masked* token (one to predict) and ``False``
    for an observed one, of shape ``(n_masks, D)`` (the same masks for every sample) or
    ``(n_samples, n_masks, D)`` (masks per sample, as in training). Both forms give the same
    numbers for the same masks, and a sample's numbers do not depend on which other samples
    are in ``X``. Every tensor a method returns has ``X``'s dtype and device.

    **Keywords.** Every method of the contract accepts the keywords :data:`CONTRACT_KEYWORDS`
    lists for it, keyword-only: ``generator`` and ``observed`` for the conditionals and
    ``log_marginal``. A subclass may leave them out of its own methods' signatures: the class
    then accepts them for it, drops ``generator`` and raises ``NotImplementedError`` for an
    ``observed`` that is not None (and ``handles_missing`` is False when the reference
    leaves ``observed`` out).

    **Randomness.** A model whose conditionals are Monte Carlo estimates sets
    ``stochastic = True``. Its methods draw from their ``generator``, a CPU
    :class:`torch.Generator` (``None``: torch's global generator, as in training), and from no
    other source: nothing random is stored on the model, so scoring never mutates it and is
    safe from several threads. skmpt passes a generator to stochastic models only. A
    stochastic model that shares noise across the samples of a call sets ``mask_chunk``: skmpt
    then passes it masks that many at a time, whatever the number of samples, so a sample's
    estimate does not depend on the others.

    **Missing entries.** An entry that is not observed (``observed`` False) is marginalised out:
    neither predicted nor conditioned on, so the identity over the observed entries gives
    ``log p(x_o)``.

    **Optional members**, with their defaults (a method that the model cannot provide raises
    ``NotImplementedError`` naming the model and the member; :func:`provides` tells whether a
    model has its own):

    ``log_marginal(X, *, generator=None, observed=None)`` → ``(n_samples,)``
        ``log p(x)`` (``log p(x_o)`` with ``observed``), exact or estimated.
        :func:`skmpt.objectives.log_marginal` and the estimators' ``log_marginal_likelihood``
        need it; for a deterministic model the exhaustive cumulative MPT score must equal it.
    ``posterior(X, *, observed=None)`` → ``(mean (n_samples, K), covariance)``
        The latent posterior given ``x`` (``x_o``); ``transform`` returns its mean.
    ``decode(Z)`` → ``(n_samples, D)``
        The mean of ``x`` given latent values ``Z``; ``inverse_transform``.
    ``encode(X, *, observed=None)`` → ``(mean, log_variance)``, each ``(n_samples, K)``
        An amortised Gaussian ``q(z | x)``; the model chooses what its encoder sees at entries
        not observed. For :func:`skmpt.objectives.elbo` and :func:`skmpt.objectives.iwae`, with
        the prior ``N(0, I)``.
    ``log_likelihood(X, Z, *, observed=None)`` → ``(n_samples,)`` or ``(n_samples, S)``
        ``sum_d log p(x_d | z)`` over the observed entries, for ``Z`` of shape
        ``(n_samples, K)`` or ``(n_samples, S, K)``; for the same objectives.
    ``impute(X, observed, *, generator=None)`` → ``(n_samples, D)``
        The conditional mean of the entries not observed given the observed ones (the
        observed entries of the result are not used).
    ``sample_missing(X, observed, n_draws, *, generator=None)`` → ``(n_draws, n_samples, D)``
        Draws of the entries not observed given the observed ones.
    ``unstandardize_(center, scale)`` → ``self``
        Map, in place, a model fitted on ``(x - center) / scale`` (``center`` of shape
        ``(D,)``, ``scale`` a positive 0-d tensor) back to the units of ``x``, so that the
        estimators can train on standardised data. Raise ``ValueError`` if the model family is
        not closed under that map.
    ``shared_mask_chunk(n_samples)`` → int or None, default None
        Masks per call the model prefers when masks are shared by ``n_samples`` samples (PPCA
        sizes its chunks so that its matrix products stay fast); ``None``: chunks follow
        :func:`skmpt.working_memory`. Not used when ``mask_chunk`` is set.

    Attributes
    ----------
    stochastic : bool, default=False
        Whether the conditionals are Monte Carlo estimates drawn from ``generator``.
    mask_chunk : int or None, default=None
        Masks per call for a stochastic model that shares noise across samples.
    handles_missing : bool, default=True
        Whether the methods marginalise entries that are not observed out (take ``observed``).
        False for a subclass whose ``masked_log_prob`` takes no ``observed``, unless it says
        otherwise; :func:`skmpt.testing.missing.check_incomplete_rows` is skipped for such a model.

    Examples
    --------
    Independent Gaussians: ``p(x_j | x_r) = N(x_j | mu_j, sigma_j^2)``, whatever ``r``.

    >>> import math
    >>> import torch
    >>> from skmpt.models import MaskedModel, provides
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
    >>> model.masked_log_prob_sum(X, masks, generator=None).detach()  # two tokens of log N(0 | 0, 1) each
    tensor([[-1.8379],
            [-1.8379]], dtype=torch.float64)
    >>> model.chain_log_prob(X, torch.tensor([[0, 1, 2]])).shape
    torch.Size([2, 1, 3])
    >>> model.stochastic, model.mask_chunk, model.handles_missing, provides(model, "posterior")
    (False, None, False, False)
    """

    stochastic = False
    mask_chunk = None
    handles_missing = True

    def __init_subclass__(cls, **kwargs):
        """Give the contract methods the subclass defines every keyword of :data:`CONTRACT_KEYWORDS`."""
        super().__init_subclass__(**kwargs)
        for name in CONTRACT_KEYWORDS:
            function = cls.__dict__.get(name)
            if inspect.isfunction(function):
                setattr(cls, name, _with_contract_keywords(function, name, cls.__name__))
        reference = cls.__dict__.get("masked_log_prob")
        if inspect.isfunction(reference) and "handles_missing" not in cls.__dict__:
            cls.handles_missing = _takes(inspect.unwrap(reference), "observed")

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
            The only source of randomness of a stochastic model; a deterministic one ignores it
            (and may leave it out of its signature).
        observed : torch.Tensor of dtype bool and shape (n_samples, n_features) or \
                (n_features,), default=None
            ``True`` for an observed entry (``None``: all are). Masks must lie among the
            observed entries (:func:`~skmpt.models.contract.conditioning_set` checks it). A model that leaves the
            argument out of its signature handles complete data only (``handles_missing``).

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
        return self.masked_log_prob(X, masks, generator=generator, observed=observed).sum(-1)

    def chain_log_prob(self, X, orderings, *, generator=None, observed=None):
        """Chain-rule terms ``log p(x_{s_t} | x_{s_{t+1:D}})`` of each ordering ``s``.

        Defaults to :func:`~skmpt.models.contract.reference_chain_log_prob` (``D`` nested masks per ordering); a
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
        return self.masked_log_prob_sum(X, masks, generator=generator, observed=observed) @ weights

    def log_marginal(self, X, *, generator=None, observed=None):
        """``log p(x)`` per sample (``log p(x_o)`` with ``observed``), exact or estimated.

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, n_features)
        generator, observed
            As in :meth:`masked_log_prob`.

        Returns
        -------
        log_marginal : torch.Tensor of shape (n_samples,)

        Raises
        ------
        NotImplementedError
            By default: a model that knows its log-marginal likelihood overrides this.
        """
        raise _not_provided(self, "log_marginal", "the identity check and log_marginal_likelihood")

    def posterior(self, X, *, observed=None):
        """The latent posterior given ``x`` (``x_o`` with ``observed``): ``(mean, covariance)``.

        ``mean`` has shape ``(n_samples, K)``; raises ``NotImplementedError`` by default.
        """
        raise _not_provided(self, "posterior", "transform")

    def decode(self, Z):
        """The mean of ``x`` given latent values ``Z`` of shape ``(n_samples, K)``: ``(n_samples, D)``.

        Raises ``NotImplementedError`` by default.
        """
        raise _not_provided(self, "decode", "inverse_transform")

    def encode(self, X, *, observed=None):
        """The amortised Gaussian ``q(z | x)``: ``(mean, log_variance)``, each ``(n_samples, K)``.

        With ``observed``, ``q(z | x_o)``: the model chooses what its encoder sees at the entries
        not observed. Raises ``NotImplementedError`` by default.
        """
        raise _not_provided(self, "encode", "the ELBO and IWAE objectives")

    def log_likelihood(self, X, Z, *, observed=None):
        """``sum_d log p(x_d | z)`` over the (observed) entries, for ``Z`` of shape ``(n, K)`` or ``(n, S, K)``.

        Returns shape ``(n,)`` or ``(n, S)``; raises ``NotImplementedError`` by default.
        """
        raise _not_provided(self, "log_likelihood", "the ELBO and IWAE objectives")

    def impute(self, X, observed, *, generator=None):
        """The conditional mean of the entries not ``observed`` given the observed ones, ``(n, D)``.

        Raises ``NotImplementedError`` by default.
        """
        raise _not_provided(self, "impute", "imputation")

    def sample_missing(self, X, observed, n_draws, *, generator=None):
        """``n_draws`` draws of the entries not ``observed`` given the observed ones, ``(n_draws, n, D)``.

        Raises ``NotImplementedError`` by default.
        """
        raise _not_provided(self, "sample_missing", "multiple imputation")

    def unstandardize_(self, center, scale):
        """Map, in place, a model fitted on ``(x - center) / scale`` back to the units of ``x``.

        Raises ``NotImplementedError`` by default (``ValueError`` in a model whose family is not
        closed under the map).
        """
        raise _not_provided(self, "unstandardize_", "training on standardised data")

    def shared_mask_chunk(self, n_samples):
        """Masks per call the model prefers for masks shared by ``n_samples`` samples; None (the
        default): chunks follow the working memory."""
        return None


def model_name(model):
    """The name of ``model``'s class, or of the class of the object a :class:`MaskedModelAdapter` wraps.

    Examples
    --------
    >>> from skmpt.models import as_masked_model
    >>> from skmpt.models.contract import model_name
    >>> class Mine:
    ...     def masked_log_prob(self, X, masks):
    ...         return X.new_zeros(X.shape[0], *masks.shape[-2:])
    >>> model_name(as_masked_model(Mine()))
    'Mine'
    """
    return type(model.model if isinstance(model, MaskedModelAdapter) else model).__name__


def provides(model, name):
    """Whether ``model`` has its own member ``name`` of the contract, not :class:`MaskedModel`'s default.

    For the fast paths, the default is computed from the reference; for the optional methods,
    the default raises ``NotImplementedError``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import PPCAModule, provides
    >>> ppca = PPCAModule(torch.ones(1, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64), 0.5)
    >>> provides(ppca, "log_marginal"), provides(ppca, "encode")
    (True, False)
    """
    if name not in CONTRACT_KEYWORDS:
        raise ValueError(f"{name!r} is not a method of the masked-model contract; one of {sorted(CONTRACT_KEYWORDS)}.")
    method = getattr(model, name)
    return getattr(method, "__func__", method) is not getattr(MaskedModel, name)


def has_own_chain(model):
    """Whether ``model`` has a ``chain_log_prob`` other than the reference default.

    Examples
    --------
    >>> from skmpt.models.contract import has_own_chain
    >>> from skmpt.testing import TabularJoint
    >>> has_own_chain(TabularJoint.random(3, random_state=0))
    False
    """
    return provides(model, "chain_log_prob")


def has_own_weighted_sum(model):
    """Whether ``model`` has a ``weighted_log_prob_sum`` other than the default contraction.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import PPCAModule, VAEModule
    >>> from skmpt.models.contract import has_own_weighted_sum
    >>> ppca = PPCAModule(torch.ones(1, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64), 0.5)
    >>> has_own_weighted_sum(ppca), has_own_weighted_sum(VAEModule(4, 2, (8,), "tanh", "gaussian"))
    (True, False)
    """
    return provides(model, "weighted_log_prob_sum")


def as_masked_model(model):
    """``model`` as a :class:`MaskedModel`: itself if it is one, else a :class:`MaskedModelAdapter`.

    The objectives and the checks call this where a model enters, once; after it every member of
    the contract can be called directly with every keyword.

    Parameters
    ----------
    model : MaskedModel or object
        Any object with ``masked_log_prob(X, masks)``, the reference, or at least
        ``masked_log_prob_sum(X, masks)`` (enough for every estimator but the chain, and for
        training).

    Returns
    -------
    model : MaskedModel

    Raises
    ------
    TypeError
        If ``model`` has neither.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import MaskedModel, as_masked_model
    >>> class Mine:
    ...     def masked_log_prob(self, X, masks):
    ...         return X.new_zeros(X.shape[0], *masks.shape[-2:])
    >>> model = as_masked_model(Mine())
    >>> isinstance(model, MaskedModel), as_masked_model(model) is model, model.handles_missing
    (True, True, False)
    >>> model.masked_log_prob_sum(torch.zeros(2, 3), torch.ones(1, 3, dtype=torch.bool), generator=None).shape
    torch.Size([2, 1])
    """
    if isinstance(model, MaskedModel):
        return model
    if not any(callable(getattr(model, name, None)) for name in ("masked_log_prob", "masked_log_prob_sum")):
        raise TypeError(
            f"{type(model).__name__} has neither masked_log_prob(X, masks), the reference of the masked-model "
            f"contract (skmpt.models.MaskedModel), nor masked_log_prob_sum(X, masks)."
        )
    return MaskedModelAdapter(model)


class MaskedModelAdapter(MaskedModel):
    """A :class:`MaskedModel` that forwards to an object that is not one (a user's duck-typed model).

    What the object has is read once, here: its ``stochastic``, ``mask_chunk`` and
    ``handles_missing`` (by default, whether its ``masked_log_prob`` takes ``observed``), and
    each member of the contract it has, called with the keywords its signature takes (a
    ``generator`` it does not take is dropped, an ``observed`` it does not take must be None).
    Members it lacks keep :class:`MaskedModel`'s defaults. Build it with :func:`as_masked_model`.

    Parameters
    ----------
    model : object
        Has ``masked_log_prob(X, masks)`` or ``masked_log_prob_sum(X, masks)``; a
        :class:`torch.nn.Module` becomes a submodule.

    Attributes
    ----------
    model : object
        The object wrapped.
    reference : callable or None
        Its ``masked_log_prob``, taking every keyword of the contract (None if it has none).
    """

    def __init__(self, model):
        super().__init__()
        self.model = model
        owner = type(model).__name__
        self.reference = None
        for name in CONTRACT_KEYWORDS:
            method = getattr(model, name, None)
            if name == "masked_log_prob" and callable(method):
                self.reference = _with_contract_keywords(method, name, owner)
            elif callable(method):
                # An instance attribute: provides() then sees the object's own member.
                object.__setattr__(self, name, _with_contract_keywords(method, name, owner))
        self.stochastic = bool(getattr(model, "stochastic", False))
        self.mask_chunk = getattr(model, "mask_chunk", None)
        first = model.masked_log_prob if self.reference is not None else model.masked_log_prob_sum
        self.handles_missing = bool(getattr(model, "handles_missing", _takes(first, "observed")))

    def masked_log_prob(self, X, masks, *, generator=None, observed=None):
        """The wrapped object's ``masked_log_prob``; a ``TypeError`` if it has none."""
        if self.reference is None:
            raise TypeError(
                f"{model_name(self)} has no masked_log_prob(X, masks): the per-token conditionals that the "
                f"'chain' estimator and check_masked_model need (use the 'nested' or 'sweep' estimator)."
            )
        return self.reference(X, masks, generator=generator, observed=observed)


