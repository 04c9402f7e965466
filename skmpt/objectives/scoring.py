"""Scoring: the MPT curve ``S(x; M)`` and its sum, the cumulative estimate of ``log p(x)``, by
exhaustive enumeration, the paper's sweep, nested masks or the zero-variance chain.

One mask plan (:func:`mask_plan`) serves the curve and the cumulative score, so both see the
same masks; see :mod:`skmpt.objectives` for the model contract.
"""

import math

import torch

from .._utils import check_generator, chunk_budget
from .._validation import check_positive_int
from ..masks import all_masks, mask_size_for_rate, masks_of_sizes, nested_masks, random_orderings
from ..models import as_masked_model
from ..models.contract import has_own_chain, has_own_weighted_sum, reference_chain_log_prob
from .training import check_output, log_marginal, masked_log_prob_sum, noise_generator
from .vocabulary import SCORE_METHODS, renamed_parameter

__all__ = [
    "MASK_BLOCK",
    "SCORE_METHODS",
    "cumulative_score",
    "fixed_rate_bias",
    "mask_plan",
    "mpt_curve",
    "score_at_size",
]


#: Random masks are drawn this many at a time (orderings: this many masks' worth). A count of
#: masks, not a memory budget: the blocks do not depend on the number of samples or on the
#: working memory, so the masks, and hence a sample's score, do not depend on which other
#: samples are scored with it.
MASK_BLOCK = 4096


def _chunk_size(model, n_samples, n_features, per_mask_width=1):
    """Masks (or orderings, ``per_mask_width`` masks each) evaluated per call of the model.

    A model may fix its own ``mask_chunk``: a stochastic one that draws noise per call needs
    calls that do not depend on the number of samples.
    """
    fixed = model.mask_chunk
    if fixed is not None:
        return max(1, fixed // per_mask_width)
    return max(1, chunk_budget() // (max(n_samples, 1) * n_features * per_mask_width))


def _shared_mask_sums(model, X, masks, generator, observed=None):
    """Sums for masks shared by all samples, evaluated a chunk of masks at a time.

    A deterministic model that never holds a samples x masks x features tensor for shared
    masks may choose its own chunk through ``shared_mask_chunk(n_samples)`` (PPCA sizes its
    chunks so that its matrix products stay fast); otherwise chunks follow the working memory
    (:func:`skmpt.working_memory`).
    """
    preferred = model.shared_mask_chunk(X.shape[0]) if model.mask_chunk is None else None
    chunk = _chunk_size(model, X.shape[0], X.shape[1]) if preferred is None else max(1, int(preferred))
    parts = [
        masked_log_prob_sum(model, X, masks[i : i + chunk], generator=generator, observed=observed)
        for i in range(0, len(masks), chunk)
    ]
    return torch.cat(parts, dim=1) if parts else X.new_zeros(X.shape[0], 0)


def score_at_size(model, X, size, *, score_masks="all", random_state=None):
    """``S(x; M)`` for one mask size: the mean over masks of size ``M`` of ``sum / M``.

    Parameters
    ----------
    model : MaskedModel or object
        See the module docstring.
    X : torch.Tensor of shape (n_samples, n_features)
    size : int in 1..n_features
        The mask size ``M``.
    score_masks : "all" or int, default="all"
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
    model = as_masked_model(model)
    n_features = X.shape[1]
    generator = check_generator(random_state) if score_masks != "all" or model.stochastic else None
    model_generator = noise_generator(model, generator) if generator is not None else None
    if score_masks == "all":
        masks = all_masks(n_features, size, device=X.device)
        score_masks, blocks = len(masks), masks.split(MASK_BLOCK)
    else:
        score_masks = check_positive_int(score_masks, "score_masks")
        sizes = torch.full((score_masks,), size)
        blocks = _random_mask_blocks(sizes, n_features, generator, X.device)
    return _totals_by_size(model, X, blocks, model_generator)[:, size - 1] / (score_masks * size)


def fixed_rate_bias(model, X, mask_rate, *, score_masks="all", random_state=None):
    """Bias of the fixed-rate MPT estimate of ``log p(x)``: ``D * S(x; M) - log p(x)``.

    Training with a fixed rate maximises an estimate of ``D * S(x; M)`` with
    ``M = round(rate * D)``; this is how far that target is from the log-marginal
    likelihood, per sample. The model needs ``log_marginal(X)``.

    Parameters
    ----------
    model : MaskedModel or object
        See the module docstring; also provides ``log_marginal(X)``.
    X : torch.Tensor of shape (n_samples, n_features)
    mask_rate : float in (0, 1]
    score_masks : "all" or int, default="all"
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
    model = as_masked_model(model)
    n_features = X.shape[1]
    size = mask_size_for_rate(mask_rate, n_features)
    generator = check_generator(random_state)
    score = score_at_size(model, X, size, score_masks=score_masks, random_state=generator)
    return n_features * score - log_marginal(model, X, generator=noise_generator(model, generator))


def _totals_by_size(model, X, mask_blocks, generator, observed=None):
    """Sum over the masks of each size of ``sum_{j in m} log p(x_j | x_r)``: shape ``(n, D)``."""
    n_samples, n_features = X.shape
    totals = X.new_zeros(n_samples, n_features)
    for masks in mask_blocks:
        totals.index_add_(1, masks.sum(-1) - 1, _shared_mask_sums(model, X, masks, generator, observed))
    return totals


def _random_mask_blocks(sizes, n_features, generator, device):
    for block in sizes.split(MASK_BLOCK):
        yield masks_of_sizes(block, n_features, random_state=generator, device=device)


def _sizes(X, n_features=None):
    n_features = X.shape[1] if n_features is None else n_features
    return torch.arange(1, n_features + 1, dtype=X.dtype, device=X.device)


def _embed(blocks, features, n_features):
    """Masks over the features ``features`` (``(P, k)``) as masks over all ``n_features``."""
    for block in blocks:
        full = block.new_zeros(block.shape[0], n_features)
        full[:, features] = block
        yield full


def _by_pattern(function, X, observed):
    """``function(rows, pattern)`` on each group of rows that share a pattern of observed
    entries (``pattern=None`` for complete rows, which are then scored exactly as complete
    data is), put back in the rows' order.

    The masks a group is scored with depend on its pattern and ``random_state`` only, so a
    sample's score does not depend on the other samples.
    """
    if observed is None or bool(observed.all()):
        return function(X, None)
    patterns, index = torch.unique(observed, dim=0, return_inverse=True)
    out = None
    for number, pattern in enumerate(patterns):
        rows = index == number
        value = function(X[rows], None if bool(pattern.all()) else pattern)
        if out is None:
            out = X.new_zeros(X.shape[0], *value.shape[1:])
        out[rows] = value
    return out


def _ordering_blocks(n_orderings, n_features, generator, device, pattern=None):
    """Random orderings; with a ``pattern``, of its observed features, followed by the others
    (whose terms are zero), so that step ``M`` predicts the ``M``-th observed token."""
    if pattern is not None:
        features = torch.nonzero(pattern).flatten()
        rest = torch.nonzero(~pattern).flatten()
        for block in _ordering_blocks(n_orderings, len(features), generator, device):
            yield torch.cat([features[block], rest.expand(len(block), -1)], dim=1)
        return
    per_block = max(1, MASK_BLOCK // n_features)
    for start in range(0, n_orderings, per_block):
        count = min(per_block, n_orderings - start)
        yield random_orderings(count, n_features, random_state=generator, device=device)


def _chain_curve(model, X, n_orderings, generator, pattern=None, *, total=False):
    """The chain's curve, ``(n, D)``, or with ``total`` its sum over the steps, ``(n,)``
    (summed as the terms come, without the curve)."""
    model_generator = noise_generator(model, generator)
    n_samples, n_features = X.shape
    # A model's own path (e.g. PPCA's, one triangular map per ordering) costs D terms per ordering;
    # the reference evaluates D nested masks of D per-token values each.
    if has_own_chain(model):
        chain, width = model.chain_log_prob, 1
    else:
        chain, width = (lambda X, block, **kw: reference_chain_log_prob(model, X, block, **kw)), n_features
    dims = (1, 2) if total else 1
    out = X.new_zeros(n_samples) if total else X.new_zeros(n_samples, n_features)
    chunk = _chunk_size(model, n_samples, n_features, width)
    for orderings in _ordering_blocks(n_orderings, n_features, generator, X.device, pattern):
        for start in range(0, len(orderings), chunk):
            block = orderings[start : start + chunk]
            terms = chain(X, block, generator=model_generator, observed=pattern)
            out += check_output(terms, (n_samples, len(block), n_features), model, "chain_log_prob", X, block).sum(dims)
    return out / n_orderings


def _chain_total(model, X, n_orderings, generator, observed):
    """The chain estimate of ``log p(x_o)`` with each sample's own ``observed`` entries: the
    orderings run over all ``D`` features and skip the unobserved ones, so rows with different
    patterns share the orderings (and one call) instead of being scored pattern by pattern."""
    n_samples, n_features = X.shape
    if has_own_chain(model):
        chain, width = model.chain_log_prob, 1
    else:
        chain, width = (lambda X, block, **kw: reference_chain_log_prob(model, X, block, **kw)), n_features
    total = X.new_zeros(n_samples)
    chunk = _chunk_size(model, n_samples, n_features, width)
    for orderings in _ordering_blocks(n_orderings, n_features, generator, X.device):
        for start in range(0, len(orderings), chunk):
            block = orderings[start : start + chunk]
            terms = chain(X, block, observed=observed)
            total += check_output(terms, (n_samples, len(block), n_features), model, "chain_log_prob", X, block).sum(
                (1, 2)
            )
    return total / n_orderings


def mask_plan(model, X, score_method, score_masks, random_state, pattern=None):
    """The masks of a non-chain estimator: blocks of shared masks, how many masks of each size
    they hold (shape ``(D,)``, or ``(k,)`` for a ``pattern`` of ``k`` observed features, among
    which the masks then lie), and the generator of a stochastic model's noise (or None)."""
    if pattern is not None:
        features = torch.nonzero(pattern).flatten()
        blocks, counts, model_generator = mask_plan(model, X[:, features], score_method, score_masks, random_state)
        return _embed(blocks, features, X.shape[1]), counts, model_generator
    n_features = X.shape[1]
    if score_method == "exhaustive":
        counts = [math.comb(n_features, m) for m in range(1, n_features + 1)]
        model_generator = noise_generator(model, check_generator(random_state)) if model.stochastic else None
        blocks = all_masks(n_features, device=X.device).split(MASK_BLOCK)
        return blocks, torch.tensor(counts, dtype=X.dtype, device=X.device), model_generator
    generator = check_generator(random_state)
    model_generator = noise_generator(model, generator)
    counts = torch.full((n_features,), score_masks, dtype=X.dtype, device=X.device)
    if score_method == "sweep":
        sizes = torch.arange(1, n_features + 1).repeat_interleave(score_masks)
        blocks = _random_mask_blocks(sizes, n_features, generator, X.device)
    else:
        blocks = (
            nested_masks(orderings).reshape(-1, n_features)
            for orderings in _ordering_blocks(score_masks, n_features, generator, X.device)
        )
    return blocks, counts, model_generator


def _check_method(method, X, score_masks):
    if method not in SCORE_METHODS:
        raise ValueError(f"score_method must be one of {SCORE_METHODS}; got {method!r}.")
    if X.ndim != 2 or X.shape[1] < 1:
        raise ValueError(f"X must be a 2-D tensor with at least one feature; got shape {tuple(X.shape)}.")
    return 1 if method == "exhaustive" else check_positive_int(score_masks, "score_masks")


def mpt_curve(model, X, *, score_method="sweep", score_masks=100, random_state=None, observed=None,
              method="deprecated"):
    """The MPT curve: ``S(x; M)`` for every mask size ``M = 1..D``, per sample.

    Plotted against the masking rate ``M / D`` this is the paper's MPT curve; its sum
    over ``M`` (:func:`cumulative_score`) is the estimate of ``log p(x)``.

    Parameters
    ----------
    model : MaskedModel or object
        See the module docstring.
    X : torch.Tensor of shape (n_samples, n_features)
    score_method : {"exhaustive", "sweep", "nested", "chain"}, default="sweep"
        The estimators of :data:`~skmpt.objectives.SCORE_METHODS`:

        - ``"exhaustive"``: every one of the ``2**D - 1`` masks; exact, for
          ``D <= MAX_EXHAUSTIVE_FEATURES`` only. ``score_masks`` is not used.
        - ``"sweep"``: the paper's estimator, ``score_masks`` uniformly random masks of every size
          (``score_masks * D * (D + 1) / 2`` conditionals).
        - ``"nested"``: ``score_masks`` random orderings, each a chain of nested masks of sizes
          ``1..D``; every masked token of each mask is scored (the sweep with correlated
          masks, same cost as the sweep).
        - ``"chain"``: the same orderings, but each nested mask scores only the token it adds:
          ``log p(x_{s_t} | x_{s_{t+1:D}})``. The terms of one ordering add up to ``log p(x)``
          exactly for consistent conditionals, so the cumulative score has zero variance;
          each ``S(x; M)`` is still an unbiased estimate. Needs ``masked_log_prob``.
    score_masks : int, default=100
        Masks per size (``"sweep"``) or orderings (``"nested"``, ``"chain"``).
    random_state : see :func:`skmpt.masks.check_generator`, default=None
        The masks are shared by all samples, so a sample's score does not depend on which
        other samples are scored with it.
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features), default=None
        ``True`` for an observed entry (``None``: all are). A sample with ``k`` observed
        entries is scored by the identity over them, ``log p(x_o) = sum_{M=1}^{k} S_o(x; M)``,
        with masks among its observed entries (rows sharing a pattern share the masks); its
        curve is ``S_o(x; M)`` for ``M = 1..k`` and zero after. A sample with nothing
        observed has a curve of zeros.
    method : str
        Deprecated since 0.2, removed in 0.3: the old name of ``score_method``.

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
    >>> curve = mpt_curve(joint, X, score_method="exhaustive")
    >>> bool(torch.allclose(curve.sum(-1), joint.log_marginal(X)))
    True
    """
    method = renamed_parameter("method", method, "score_method", score_method, "mpt_curve")
    model = as_masked_model(model)
    score_masks = _check_method(method, X, score_masks)
    _check_observed(observed, X)

    def curve(X, pattern):
        if pattern is not None and not bool(pattern.any()):
            return X.new_zeros(X.shape)
        if method == "chain":
            return _chain_curve(model, X, score_masks, check_generator(random_state), pattern)
        blocks, counts, model_generator = mask_plan(model, X, method, score_masks, random_state, pattern)
        totals = _totals_by_size(model, X, blocks, model_generator, pattern)
        size = len(counts)
        return torch.cat([totals[:, :size] / (counts * _sizes(X, size)), totals[:, size:]], dim=1)

    return _by_pattern(curve, X, observed)


def cumulative_score(model, X, *, score_method="sweep", score_masks=100, random_state=None, observed=None,
                     method="deprecated"):
    """The cumulative MPT estimate of the log-marginal likelihood, ``sum_M S(x; M)``.

    Parameters are those of :func:`mpt_curve`; with ``observed``, the estimate of
    ``log p(x_o)`` (zero for a sample with nothing observed).

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
    >>> chain = cumulative_score(joint, X, score_method="chain", score_masks=1, random_state=0)
    >>> bool(torch.allclose(chain, joint.log_marginal(X)))
    True
    """
    method = renamed_parameter("method", method, "score_method", score_method, "cumulative_score")
    model = as_masked_model(model)
    score_masks = _check_method(method, X, score_masks)
    _check_observed(observed, X)
    if method == "chain" and observed is not None and not model.stochastic:
        # Each ordering's terms sum to log p(x_o) whatever the pattern: no grouping by pattern.
        return _chain_total(model, X, score_masks, check_generator(random_state), observed)
    return _by_pattern(
        lambda X, pattern: _cumulative(model, X, method, score_masks, random_state, pattern), X, observed
    )


def _check_observed(observed, X):
    if observed is not None and (observed.dtype != torch.bool or tuple(observed.shape) != tuple(X.shape)):
        raise ValueError(
            f"observed must be a boolean tensor of X's shape {tuple(X.shape)}; got "
            f"{observed.dtype} of shape {tuple(observed.shape)}."
        )


def _cumulative(model, X, method, score_masks, random_state, pattern):
    """:func:`cumulative_score` of rows that share the pattern of observed entries ``pattern``."""
    if pattern is not None and not bool(pattern.any()):
        return X.new_zeros(X.shape[0])
    if method == "chain":
        return _chain_curve(model, X, score_masks, check_generator(random_state), pattern, total=True)
    blocks, counts, model_generator = mask_plan(model, X, method, score_masks, random_state, pattern)
    # S(x; M) weighs a mask of size M by 1 / (M * masks of that size): the score is one
    # weighted sum over all the masks, which a model may form without the per-mask sums.
    size_weights = 1 / (counts * _sizes(X, len(counts)))
    own = has_own_weighted_sum(model)
    total = X.new_zeros(X.shape[0])
    for masks in blocks:
        weights = size_weights[masks.sum(-1) - 1]
        if own:
            weighted = model.weighted_log_prob_sum(X, masks, weights, generator=model_generator, observed=pattern)
            total += check_output(weighted, (X.shape[0],), model, "weighted_log_prob_sum", X, masks)
        else:
            total += _shared_mask_sums(model, X, masks, model_generator, pattern) @ weights
    return total
