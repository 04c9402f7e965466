r"""The masked pre-training identity, for any model with masked conditionals.

For one observation ``x`` with ``D`` tokens, a mask ``m`` (the tokens to predict) and the
rest ``r``:

.. math::

    \log p(x) = \sum_{M=1}^{D} S(x; M), \qquad
    S(x; M) = \frac{1}{M}\, \mathbb{E}_{|m| = M}\Big[\sum_{j \in m} \log p(x_j \mid x_r)\Big],

exactly, whenever the conditionals come from one joint density (Moreno-Muñoz, Recasens and
Hauberg, 2023, Proposition 1; the proof averages the chain rule over random orderings).

The functions here take a *model* following the contract of
:class:`skmpt.models.MaskedModel` (a subclass, or any object with the same methods):

``masked_log_prob(X, masks)``
    the reference: per-token ``log p(x_j | x_r)`` of shape ``(n_samples, n_masks, D)``, zero
    at the observed positions, for ``X`` of shape ``(n_samples, D)`` and boolean ``masks``
    (``True``: masked) of shape ``(n_masks, D)`` (shared by the samples) or
    ``(n_samples, n_masks, D)``;
``masked_log_prob_sum(X, masks)``
    its sum over the masked tokens, ``(n_samples, n_masks)``; enough for every estimator but
    the ``"chain"`` one;
``chain_log_prob(X, orderings)``
    optional fast path of the chain-rule terms along orderings, ``(n_samples, n_orderings, D)``;
    without it the chain estimator uses the reference on nested masks.

A model with ``stochastic = True`` (Monte Carlo conditionals) is passed a CPU
:class:`torch.Generator` as ``generator=``: the functions here make it a copy of the masks'
generator, so a stochastic model is scored on the same masks as a deterministic one with the
same ``random_state``, and one ``random_state`` makes its scores reproducible. Such a model may
fix an integer ``mask_chunk``: masks are then passed to it that many at a time, whatever the
number of samples, so that noise it draws per call, shared by the samples, makes a sample's
estimate independent of the others.

The training objectives are in one table, :data:`OBJECTIVES`: the MPT objective, the ELBO,
the importance-weighted bound (IWAE) and the log-marginal likelihood itself.

Every function returns log-likelihoods in nats (to maximise), per sample, as tensors on the
device and in the dtype of ``X``; a training loop negates them. Nothing here depends on
scikit-learn.
"""

import math
import numbers

import numpy as np
import torch

from .models._base import (
    _with_generator,
    has_own_chain,
    has_own_weighted_sum,
    importance_log_weights,
    reference_chain_log_prob,
    standard_normal,
)
from .masks import (
    all_masks,
    check_generator,
    mask_size_for_rate,
    masks_of_sizes,
    nested_masks,
    random_orderings,
)

__all__ = [
    "OBJECTIVES",
    "SCORE_METHODS",
    "cumulative_score",
    "curve_area",
    "elbo",
    "fixed_rate_bias",
    "iwae",
    "log_marginal",
    "masked_log_prob_sum",
    "mean_over_masks",
    "mpt_curve",
    "mpt_objective",
    "score_at_size",
]

#: Estimators of the MPT curve and of its sum; see :func:`mpt_curve`.
SCORE_METHODS = ("exhaustive", "sweep", "nested", "chain")

# Masks evaluated at once are chosen so that about this many numbers are live per chunk
# (2**24 float64 values are 128 MiB): memory stays bounded whatever the number of masks.
_CHUNK_BUDGET = 2**24

# Random masks are drawn this many at a time (orderings: this many masks' worth). The blocks
# do not depend on the number of samples, so the masks, and hence a sample's score, do not
# depend on which other samples are scored with it.
_MASK_BLOCK = 4096


def _check_masks(masks, X):
    """Masks must be a boolean tensor of shape ``(P, D)`` or ``(n, P, D)`` matching ``X``."""
    if not isinstance(masks, torch.Tensor):
        raise TypeError(f"masks must be a boolean torch.Tensor; got {type(masks).__name__}.")
    if masks.dtype != torch.bool:
        raise TypeError(
            f"masks must have dtype torch.bool (True marks a masked token); got {masks.dtype}. "
            f"Convert 0/1 masks with masks.bool() if that is what they mean."
        )
    n_samples, n_features = X.shape
    if masks.ndim not in (2, 3) or masks.shape[-1] != n_features or (masks.ndim == 3 and masks.shape[0] != n_samples):
        raise ValueError(
            f"masks must have shape (n_masks, {n_features}) or ({n_samples}, n_masks, {n_features}) "
            f"for X of shape {tuple(X.shape)}; got {tuple(masks.shape)}."
        )


def _model_generator(model, generator):
    """The generator a stochastic model draws from: a copy of the masks' generator, else None."""
    if not getattr(model, "stochastic", False):
        return None
    copy = torch.Generator(device="cpu")
    copy.set_state(generator.get_state())
    return copy


def masked_log_prob_sum(model, X, masks, *, generator=None):
    """``sum_{j in m} log p(x_j | x_r)`` from whichever of the two methods the model has.

    Parameters
    ----------
    model : object
        Has ``masked_log_prob_sum`` or ``masked_log_prob`` (module docstring).
    X : torch.Tensor of shape (n_samples, n_features)
    masks : torch.Tensor of dtype bool and shape (n_masks, n_features) or \
            (n_samples, n_masks, n_features)
    generator : torch.Generator, default=None
        Passed to the model's method when given (stochastic models).

    Returns
    -------
    sums : torch.Tensor of shape (n_samples, n_masks)

    Examples
    --------
    >>> import torch
    >>> from skmpt.objectives import masked_log_prob_sum
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> X = torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64)
    >>> masks = torch.tensor([[True, False, False], [True, True, True]])
    >>> sums = masked_log_prob_sum(joint, X, masks)
    >>> sums.shape
    torch.Size([1, 2])
    """
    _check_masks(masks, X)
    if hasattr(model, "masked_log_prob_sum"):
        return _with_generator(model.masked_log_prob_sum, X, masks, generator=generator)
    if hasattr(model, "masked_log_prob"):
        return _with_generator(model.masked_log_prob, X, masks, generator=generator).sum(-1)
    raise TypeError(
        f"{type(model).__name__} has neither masked_log_prob_sum(X, masks) nor "
        f"masked_log_prob(X, masks); skmpt's objectives need one of them."
    )


def _chunk_size(model, n_samples, n_features, per_mask_width=1):
    """Masks (or orderings, ``per_mask_width`` masks each) evaluated per call of the model.

    A model may fix its own ``mask_chunk``: a stochastic one that draws noise per call needs
    calls that do not depend on the number of samples.
    """
    fixed = getattr(model, "mask_chunk", None)
    if fixed is not None:
        return max(1, fixed // per_mask_width)
    return max(1, _CHUNK_BUDGET // (max(n_samples, 1) * n_features * per_mask_width))


def _shared_mask_sums(model, X, masks, generator):
    """Sums for masks shared by all samples, evaluated a chunk of masks at a time.

    A deterministic model that never holds a samples x masks x features tensor for shared
    masks may choose its own chunk through ``shared_mask_chunk(n_samples)`` (PPCA sizes its
    chunks so that its matrix products stay fast); otherwise chunks follow ``_CHUNK_BUDGET``.
    """
    preferred = getattr(model, "shared_mask_chunk", None)
    if preferred is None or getattr(model, "mask_chunk", None) is not None:
        chunk = _chunk_size(model, X.shape[0], X.shape[1])
    else:
        chunk = max(1, int(preferred(X.shape[0])))
    parts = [
        masked_log_prob_sum(model, X, masks[i : i + chunk], generator=generator) for i in range(0, len(masks), chunk)
    ]
    return torch.cat(parts, dim=1) if parts else X.new_zeros(X.shape[0], 0)


def mpt_objective(model, X, masks, *, generator=None):
    """The masked pre-training objective, rescaled to the scale of ``log p(x)``.

    For each sample and each of its masks, ``(D / |m|) * sum_{j in m} log p(x_j | x_r)``,
    averaged over the masks. With mask sizes uniform on ``1..D`` this is an unbiased
    estimate of ``log p(x)``; with a fixed size ``M`` it estimates ``D * S(x; M)``, which is
    biased (see :func:`fixed_rate_bias`). The sign is that of a log-likelihood: maximise it
    (minimise its negative mean).

    Parameters
    ----------
    model : object
        See the module docstring.
    X : torch.Tensor of shape (n_samples, n_features)
    masks : torch.Tensor of dtype bool and shape (n_masks, n_features) or \
            (n_samples, n_masks, n_features)
        No mask may be empty.
    generator : torch.Generator, default=None
        Passed to a stochastic model (``None``: its draws come from torch's global generator).

    Returns
    -------
    objective : torch.Tensor of shape (n_samples,)

    Examples
    --------
    >>> import torch
    >>> from skmpt.masks import uniform_size_masks
    >>> from skmpt.objectives import mpt_objective
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> X = torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64)
    >>> masks = uniform_size_masks((1, 4), 3, random_state=0)
    >>> mpt_objective(joint, X, masks).shape
    torch.Size([1])
    """
    _check_masks(masks, X)
    sizes = masks.sum(-1)
    if bool((sizes == 0).any()):
        raise ValueError("Every mask must mask at least one token; got an empty mask.")
    sums = masked_log_prob_sum(model, X, masks, generator=generator)
    return (sums * (X.shape[1] / sizes.to(X.dtype))).mean(-1)


def log_marginal(model, X, *, generator=None, **options):
    """The model's own log-marginal likelihood ``log p(x)`` (exact or estimated), per sample.

    Parameters
    ----------
    model : object
        Has ``log_marginal(X)`` (see :class:`skmpt.models.MaskedModel`).
    X : torch.Tensor of shape (n_samples, n_features)
    generator : torch.Generator, default=None
        Passed to a stochastic model's estimate when given.
    **options
        Passed to ``model.log_marginal`` (e.g. ``n_samples`` of an importance-sampled one).

    Returns
    -------
    log_marginal : torch.Tensor of shape (n_samples,)

    Examples
    --------
    >>> import torch
    >>> from skmpt.objectives import log_marginal
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint([[0.1, 0.2], [0.3, 0.4]])
    >>> X = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    >>> round(float(log_marginal(joint, X).exp()), 6)
    0.3
    """
    if not hasattr(model, "log_marginal"):
        raise TypeError(f"{type(model).__name__} has no log_marginal(X) method.")
    return _with_generator(model.log_marginal, X, generator=generator, **options)


def elbo(model, X, *, generator=None):
    """The evidence lower bound, one reparameterised sample and the analytic KL, per sample.

    ``log p(x | z) - KL(q(z | x) || p(z))`` with ``z ~ q(z | x)``, a lower bound on
    ``log p(x)`` in expectation. The model has an amortised Gaussian encoder ``encode(X)`` →
    ``(mean, log_variance)`` and ``log_likelihood(X, Z)``; the prior is ``N(0, I)``.

    Parameters
    ----------
    model : object
        See :class:`skmpt.models.MaskedModel` (optional methods).
    X : torch.Tensor of shape (n_samples, n_features)
    generator : torch.Generator, default=None
        The sample's noise; ``None``: torch's global generator.

    Returns
    -------
    elbo : torch.Tensor of shape (n_samples,)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import VAEModule
    >>> from skmpt.objectives import elbo
    >>> module = VAEModule(4, 2, (8,), "tanh", "gaussian")
    >>> X = torch.zeros(3, 4, dtype=torch.float64)
    >>> elbo(module, X, generator=torch.Generator().manual_seed(0)).shape
    torch.Size([3])
    """
    mean, log_var = model.encode(X)
    z = mean + (0.5 * log_var).exp() * standard_normal(mean.shape, X, generator)
    kl = 0.5 * (mean.square() + log_var.exp() - 1 - log_var).sum(-1)
    return model.log_likelihood(X, z) - kl


def iwae(model, X, *, n_particles=16, generator=None):
    """The importance-weighted bound (Burda et al., 2016) with ``n_particles`` draws, per sample.

    ``log (1/S) sum_s p(x, z_s) / q(z_s | x)`` with ``z_s ~ q(z | x)``: a tighter lower bound on
    ``log p(x)`` than :func:`elbo` (equal to it for one particle, in expectation). Needs what
    :func:`elbo` needs.

    Parameters
    ----------
    model : object
    X : torch.Tensor of shape (n_samples, n_features)
    n_particles : int, default=16
    generator : torch.Generator, default=None

    Returns
    -------
    bound : torch.Tensor of shape (n_samples,)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import VAEModule
    >>> from skmpt.objectives import iwae
    >>> module = VAEModule(4, 2, (8,), "tanh", "gaussian")
    >>> X = torch.zeros(3, 4, dtype=torch.float64)
    >>> iwae(module, X, n_particles=5, generator=torch.Generator().manual_seed(0)).shape
    torch.Size([3])
    """
    n_particles = _check_n_masks(n_particles, "n_particles")
    encoded = model.encode(X)
    noise = standard_normal((X.shape[0], n_particles, encoded[0].shape[-1]), X, generator)
    log_weights = importance_log_weights(model, X, noise, encoded=encoded)
    return torch.logsumexp(log_weights, dim=1) - math.log(n_particles)


def _check_n_masks(n_masks, name="n_masks"):
    if isinstance(n_masks, bool) or not isinstance(n_masks, numbers.Integral) or n_masks < 1:
        raise ValueError(f"{name} must be a positive integer; got {n_masks!r}.")
    return int(n_masks)


def score_at_size(model, X, size, *, n_masks="all", random_state=None):
    """``S(x; M)`` for one mask size: the mean over masks of size ``M`` of ``sum / M``.

    Parameters
    ----------
    model : object
        See the module docstring.
    X : torch.Tensor of shape (n_samples, n_features)
    size : int in 1..n_features
        The mask size ``M``.
    n_masks : "all" or int, default="all"
        ``"all"`` averages over all ``comb(D, M)`` masks (exact); an int averages over that
        many uniformly random masks, shared by all samples.
    random_state : see :func:`skmpt.masks.check_generator`, default=None

    Returns
    -------
    score : torch.Tensor of shape (n_samples,)

    Examples
    --------
    >>> import torch
    >>> from skmpt.objectives import score_at_size
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> X = torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64)
    >>> total = sum(score_at_size(joint, X, M) for M in (1, 2, 3))  # every mask of every size
    >>> bool(torch.allclose(total, joint.log_marginal(X)))
    True
    """
    n_features = X.shape[1]
    generator = check_generator(random_state) if n_masks != "all" or getattr(model, "stochastic", False) else None
    model_generator = _model_generator(model, generator) if generator is not None else None
    if n_masks == "all":
        masks = all_masks(n_features, size, device=X.device)
        n_masks, blocks = len(masks), masks.split(_MASK_BLOCK)
    else:
        n_masks = _check_n_masks(n_masks)
        sizes = torch.full((n_masks,), size)
        blocks = _random_mask_blocks(sizes, n_features, generator, X.device)
    return _totals_by_size(model, X, blocks, model_generator)[:, size - 1] / (n_masks * size)


def fixed_rate_bias(model, X, mask_rate, *, n_masks="all", random_state=None):
    """Bias of the fixed-rate MPT estimate of ``log p(x)``: ``D * S(x; M) - log p(x)``.

    Training with a fixed rate maximises an estimate of ``D * S(x; M)`` with
    ``M = round(rate * D)``; this is how far that target is from the log-marginal
    likelihood, per sample. The model needs ``log_marginal(X)``.

    Parameters
    ----------
    model : object
        See the module docstring; also has ``log_marginal(X)``.
    X : torch.Tensor of shape (n_samples, n_features)
    mask_rate : float in (0, 1]
    n_masks : "all" or int, default="all"
        As in :func:`score_at_size`; ``"all"`` makes the bias exact.
    random_state : see :func:`skmpt.masks.check_generator`, default=None

    Returns
    -------
    bias : torch.Tensor of shape (n_samples,)

    Examples
    --------
    >>> import torch
    >>> from skmpt.objectives import fixed_rate_bias
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint.random(4, random_state=0)
    >>> X = torch.tensor([[0.0, 1.0, 1.0, 0.0]], dtype=torch.float64)
    >>> fixed_rate_bias(joint, X, 0.25).shape  # D * S(x; 1) - log p(x): nonzero in general
    torch.Size([1])
    """
    n_features = X.shape[1]
    size = mask_size_for_rate(mask_rate, n_features)
    generator = check_generator(random_state)
    score = score_at_size(model, X, size, n_masks=n_masks, random_state=generator)
    return n_features * score - log_marginal(model, X, generator=_model_generator(model, generator))


def _totals_by_size(model, X, mask_blocks, generator):
    """Sum over the masks of each size of ``sum_{j in m} log p(x_j | x_r)``: shape ``(n, D)``."""
    n_samples, n_features = X.shape
    totals = X.new_zeros(n_samples, n_features)
    for masks in mask_blocks:
        totals.index_add_(1, masks.sum(-1) - 1, _shared_mask_sums(model, X, masks, generator))
    return totals


def _random_mask_blocks(sizes, n_features, generator, device):
    for block in sizes.split(_MASK_BLOCK):
        yield masks_of_sizes(block, n_features, random_state=generator, device=device)


def _sizes(X):
    return torch.arange(1, X.shape[1] + 1, dtype=X.dtype, device=X.device)


def _ordering_blocks(n_orderings, n_features, generator, device):
    per_block = max(1, _MASK_BLOCK // n_features)
    for start in range(0, n_orderings, per_block):
        count = min(per_block, n_orderings - start)
        yield random_orderings(count, n_features, random_state=generator, device=device)


def _chain_curve(model, X, n_orderings, generator):
    if not hasattr(model, "chain_log_prob") and not hasattr(model, "masked_log_prob"):
        raise TypeError(
            f"The 'chain' estimator predicts one token of each nested mask and needs per-token "
            f"conditionals, a masked_log_prob(X, masks) method, which {type(model).__name__} "
            f"lacks; use 'nested' or 'sweep'."
        )
    model_generator = _model_generator(model, generator)
    n_samples, n_features = X.shape
    # A model's own path (e.g. PPCA's rank-one posterior updates) costs D terms per ordering;
    # the reference evaluates D nested masks of D per-token values each.
    if has_own_chain(model):
        chain, width = model.chain_log_prob, 1
    else:
        chain, width = (lambda X, block, **kw: reference_chain_log_prob(model, X, block, **kw)), n_features
    total = X.new_zeros(n_samples, n_features)
    chunk = _chunk_size(model, n_samples, n_features, width)
    for orderings in _ordering_blocks(n_orderings, n_features, generator, X.device):
        for start in range(0, len(orderings), chunk):
            total += _with_generator(chain, X, orderings[start : start + chunk], generator=model_generator).sum(1)
    return total / n_orderings


def _mask_plan(model, X, method, n_masks, random_state):
    """The masks of a non-chain estimator: blocks of shared masks, how many masks of each size
    they hold (shape ``(D,)``), and the generator of a stochastic model's noise (or None)."""
    n_features = X.shape[1]
    if method == "exhaustive":
        counts = [math.comb(n_features, m) for m in range(1, n_features + 1)]
        stochastic = getattr(model, "stochastic", False)
        model_generator = _model_generator(model, check_generator(random_state)) if stochastic else None
        blocks = all_masks(n_features, device=X.device).split(_MASK_BLOCK)
        return blocks, torch.tensor(counts, dtype=X.dtype, device=X.device), model_generator
    generator = check_generator(random_state)
    model_generator = _model_generator(model, generator)
    counts = torch.full((n_features,), n_masks, dtype=X.dtype, device=X.device)
    if method == "sweep":
        sizes = torch.arange(1, n_features + 1).repeat_interleave(n_masks)
        blocks = _random_mask_blocks(sizes, n_features, generator, X.device)
    else:
        blocks = (
            nested_masks(orderings).reshape(-1, n_features)
            for orderings in _ordering_blocks(n_masks, n_features, generator, X.device)
        )
    return blocks, counts, model_generator


def _check_method(method, X, n_masks):
    if method not in SCORE_METHODS:
        raise ValueError(f"method must be one of {SCORE_METHODS}; got {method!r}.")
    if X.ndim != 2 or X.shape[1] < 1:
        raise ValueError(f"X must be a 2-D tensor with at least one feature; got shape {tuple(X.shape)}.")
    return 1 if method == "exhaustive" else _check_n_masks(n_masks)


def mpt_curve(model, X, *, method="sweep", n_masks=100, random_state=None):
    """The MPT curve: ``S(x; M)`` for every mask size ``M = 1..D``, per sample.

    Plotted against the masking rate ``M / D`` this is the paper's MPT curve; its sum
    over ``M`` (:func:`cumulative_score`) is the estimate of ``log p(x)``.

    Parameters
    ----------
    model : object
        See the module docstring.
    X : torch.Tensor of shape (n_samples, n_features)
    method : {"exhaustive", "sweep", "nested", "chain"}, default="sweep"
        - ``"exhaustive"``: every one of the ``2**D - 1`` masks; exact, for
          ``D <= MAX_EXHAUSTIVE_FEATURES`` only. ``n_masks`` is not used.
        - ``"sweep"``: the paper's estimator, ``n_masks`` uniformly random masks of every size
          (``n_masks * D * (D + 1) / 2`` conditionals).
        - ``"nested"``: ``n_masks`` random orderings, each a chain of nested masks of sizes
          ``1..D``; every masked token of each mask is scored (the sweep with correlated
          masks, same cost as the sweep).
        - ``"chain"``: the same orderings, but each nested mask scores only the token it adds:
          ``log p(x_{s_t} | x_{s_{t+1:D}})``. The terms of one ordering add up to ``log p(x)``
          exactly for consistent conditionals, so the cumulative score has zero variance;
          each ``S(x; M)`` is still an unbiased estimate. Needs ``masked_log_prob``.
    n_masks : int, default=100
        Masks per size (``"sweep"``) or orderings (``"nested"``, ``"chain"``).
    random_state : see :func:`skmpt.masks.check_generator`, default=None
        The masks are shared by all samples, so a sample's score does not depend on which
        other samples are scored with it.

    Returns
    -------
    curve : torch.Tensor of shape (n_samples, n_features)
        ``curve[:, M - 1]`` is ``S(x; M)``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.objectives import mpt_curve
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> X = torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64)
    >>> curve = mpt_curve(joint, X, method="exhaustive")
    >>> bool(torch.allclose(curve.sum(-1), joint.log_marginal(X)))
    True
    """
    n_masks = _check_method(method, X, n_masks)
    if method == "chain":
        return _chain_curve(model, X, n_masks, check_generator(random_state))
    blocks, counts, model_generator = _mask_plan(model, X, method, n_masks, random_state)
    return _totals_by_size(model, X, blocks, model_generator) / (counts * _sizes(X))


def cumulative_score(model, X, *, method="sweep", n_masks=100, random_state=None):
    """The cumulative MPT estimate of the log-marginal likelihood, ``sum_M S(x; M)``.

    Parameters are those of :func:`mpt_curve`.

    Returns
    -------
    score : torch.Tensor of shape (n_samples,)

    Examples
    --------
    >>> import torch
    >>> from skmpt.objectives import cumulative_score
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint.random(4, random_state=0)
    >>> X = torch.tensor([[0.0, 1.0, 1.0, 0.0]], dtype=torch.float64)
    >>> chain = cumulative_score(joint, X, method="chain", n_masks=1, random_state=0)
    >>> bool(torch.allclose(chain, joint.log_marginal(X)))
    True
    """
    n_masks = _check_method(method, X, n_masks)
    if method == "chain":
        return _chain_curve(model, X, n_masks, check_generator(random_state)).sum(-1)
    blocks, counts, model_generator = _mask_plan(model, X, method, n_masks, random_state)
    # S(x; M) weighs a mask of size M by 1 / (M * masks of that size): the score is one
    # weighted sum over all the masks, which a model may form without the per-mask sums.
    size_weights = 1 / (counts * _sizes(X))
    own = has_own_weighted_sum(model)
    total = X.new_zeros(X.shape[0])
    for masks in blocks:
        weights = size_weights[masks.sum(-1) - 1]
        if own:
            total += _with_generator(model.weighted_log_prob_sum, X, masks, weights, generator=model_generator)
        else:
            total += _shared_mask_sums(model, X, masks, model_generator) @ weights
    return total


#: Training objectives by name, each returning a log-likelihood per sample (to maximise):
#: ``"mpt"`` takes ``(model, X, masks)``, the others ``(model, X)``; all take ``generator=``.
OBJECTIVES = {"mpt": mpt_objective, "elbo": elbo, "iwae": iwae, "lml": log_marginal}


def mean_over_masks(sums, sizes, n_masks):
    """``S(x; M)`` from mask sums: the mean, over each group of ``n_masks`` masks, of ``sum / M``.

    The reduction of the identity shared by every estimator: the per-mask sums of the masked
    tokens' log-probabilities, each divided by its mask size, averaged over the masks of one size.

    Parameters
    ----------
    sums : numpy.ndarray or torch.Tensor of shape (..., n_groups * n_masks)
        ``sum_{j in m} log p(x_j | x_r)`` per mask, the masks of a group consecutive.
    sizes : array or tensor broadcastable to ``sums``
        The size ``M`` of each mask.
    n_masks : int
        Masks per group (a group shares one size, or one masking rate).

    Returns
    -------
    scores : numpy.ndarray or torch.Tensor of shape (..., n_groups)
        One ``S(x; M)`` estimate per group.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.objectives import mean_over_masks
    >>> mean_over_masks(np.array([-2.0, -4.0, -3.0, -9.0]), np.array([1, 1, 3, 3]), 2)
    array([-3., -2.])
    """
    n_masks = _check_n_masks(n_masks)
    ratios = sums / sizes
    if ratios.shape[-1] % n_masks:
        raise ValueError(f"{ratios.shape[-1]} masks do not split into groups of n_masks={n_masks}.")
    return ratios.reshape(*ratios.shape[:-1], -1, n_masks).mean(-1)


def curve_area(curve, mask_rates, *, scale=1.0):
    """Area under an MPT curve already computed: ``scale * sum_r (r - r_prev) * S(x; r)``.

    The widths are ``r_1 - 0`` for the first rate and the gaps between consecutive rates after
    it (a left Riemann sum from rate 0). With ``mask_rates = M / D`` for ``M = 1..D`` and
    ``scale = D``, it is the cumulative score ``sum_M S(x; M)``; the paper's Table 2 uses
    ``scale = 512`` over rates 0.01..0.99 whatever the sentence's length.

    Parameters
    ----------
    curve : array-like of shape (..., n_rates)
        ``S(x; r)`` at each rate (:func:`mpt_curve`'s columns, or
        :meth:`skmpt.MLMCurveScorer.transform`).
    mask_rates : array-like of shape (n_rates,)
        Strictly increasing rates in (0, 1].
    scale : float, default=1.0

    Returns
    -------
    area : numpy.ndarray of shape (...)

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.objectives import curve_area
    >>> curve = np.array([[-1.0, -2.0, -3.0, -4.0]])
    >>> curve_area(curve, np.arange(1, 5) / 4, scale=4)  # = curve.sum(-1)
    array([-10.])
    """
    curve = np.asarray(curve, dtype=np.float64)
    rates = np.asarray(mask_rates, dtype=np.float64)
    if rates.ndim != 1 or curve.shape[-1:] != rates.shape:
        raise ValueError(f"curve's last axis must have one value per rate; got shapes {curve.shape} and {rates.shape}.")
    if not ((rates > 0) & (rates <= 1)).all() or np.any(np.diff(rates) <= 0):
        raise ValueError(f"mask_rates must be strictly increasing in (0, 1]; got {rates.tolist()}.")
    return scale * curve @ np.diff(rates, prepend=0.0)
