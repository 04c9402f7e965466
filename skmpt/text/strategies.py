"""Scoring strategies: which masked copies of a text to run, and how their log-probabilities become a score.

A :class:`ScoringStrategy` says, for a text of ``L`` tokens that may be masked (a text's own
tokens, or a continuation's in conditional scoring), how many masked copies it makes
(:meth:`~ScoringStrategy.n_copies`), which (:meth:`~ScoringStrategy.copies`: boolean ``masked``
and ``targets`` of shape (n_copies, L)) and how the copies' summed target log-probabilities
become the text's result (:meth:`~ScoringStrategy.reduce`). Its needs are declared as class
attributes: ``needs_words`` (it is given each text's word ids) and ``per_target`` (it reduces
each target's log-probability, NaN at the other tokens, rather than each copy's sum). A copy is
one masked sequence through the model: one forward pass of one sequence.

============================  =======================================================  =======================
strategy                      result per text                                          copies
============================  =======================================================  =======================
:class:`CurveMasks`           ``S(x; M)`` at each masking rate                         ``score_masks`` per rate
:class:`SweepMasks`           ``sum_M c_M S(x; M)`` (the paper's estimator)            ``score_masks * L``
:class:`ChainMasks`           the chain rule along random orderings                    ``score_masks * L``
:class:`ChainSpread`          the spread of the chain across orderings                 ``score_masks * L``
:class:`UniformSizeMasks`     ``(L / M) sum_masked log p``, ``M`` uniform (LLaDA)      ``score_masks``
:class:`StratifiedSizeMasks`  the same, sizes evenly spread (LLaDA's evaluation)       ``score_masks``
:class:`BalancedMasks`        the same, all-masked once, positions balanced per size   ``score_masks``
:class:`AllocatedSizeMasks`   all-masked once, each size's mean, small sizes favoured  ``score_masks``
:class:`ControlledMasks`      the same, minus a control variate per token              ``score_masks``
:class:`TimeMasks`            ``(1 / t) sum_masked log p``, masks Bernoulli(t) (MDLM)  ``score_masks``
:class:`ExhaustiveMasks`      ``sum_M S(x; M)`` over every mask: exact                 ``2**L - 1``
:class:`SingleTokenMasks`     the pseudo-log-likelihood (or PLL-word-l2r)              ``L``
:class:`TokenScores`          each token's log-probability in the PLL                  ``L``
:class:`CurveTokenScores`     each token's mean log-probability at each rate           ``score_masks`` per rate
:class:`WholeWordMasks`       another strategy's masks drawn over words                the other's, over words
============================  =======================================================  =======================

With ``return_std=True`` the Monte Carlo strategies give ``[value, standard error]`` per text
(per rate for the curve). The estimators of ``sum_M S(x; M)`` also give each independent draw's
estimate (:meth:`~UniformSizeMasks.draws`: an ordering's, a mask's), whose mean is the result:
what an adaptive budget or a paired comparison of two texts reads.
:meth:`skmpt.text.MaskedLMRunner.score` runs any strategy.
"""

import abc
import math
import warnings
from numbers import Integral

import numpy as np
import torch

from .._validation import Interval, Options, validate_parameters
from ..masks import mask_size_for_rate, masks_of_sizes, nested_masks, random_orderings
from ..objectives import mean_over_masks
from ..objectives.vocabulary import MPT_ESTIMATORS, renamed_parameter

__all__ = [
    "AllocatedSizeMasks",
    "BalancedMasks",
    "ChainMasks",
    "ChainSpread",
    "ControlledMasks",
    "CurveMasks",
    "CurveTokenScores",
    "ExhaustiveMasks",
    "NestedMasks",
    "ScoringStrategy",
    "SingleTokenMasks",
    "StratifiedSizeMasks",
    "SweepMasks",
    "TimeMasks",
    "TokenScores",
    "UniformSizeMasks",
    "WholeWordMasks",
    "estimator_strategy",
    "least_variance_estimator",
    "pilot_variances",
]


def _size_masks(sizes, length, generator):
    """Random masks of the given sizes over a text's ``length`` tokens; targets are the masked.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import _size_masks
    >>> masked, targets = _size_masks([1, 3], 4, torch.Generator().manual_seed(0))
    >>> masked.sum(1).tolist(), bool((masked == targets).all())
    ([1, 3], True)
    """
    masked = masks_of_sizes(sizes, length, random_state=generator)
    return masked, masked


def _chain_masks(n_orderings, length, generator, antithetic=False):
    """Nested masks along random orderings; each copy's target is the token it adds.

    With ``antithetic=True`` every second ordering is the one before it reversed.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import _chain_masks
    >>> masked, targets = _chain_masks(2, 3, torch.Generator().manual_seed(0))
    >>> masked.shape, targets.sum(1).tolist()
    (torch.Size([6, 3]), [1, 1, 1, 1, 1, 1])
    """
    orderings = random_orderings(n_orderings, length, random_state=generator)
    if antithetic:
        orderings[1::2] = orderings[0 : n_orderings - n_orderings % 2 : 2].flip(1)
    masked = nested_masks(orderings).reshape(-1, length)
    targets = torch.zeros_like(masked)
    targets[torch.arange(len(masked)), orderings.reshape(-1)] = True
    return masked, targets


def _within_word_l2r_masks(word_ids):
    """PLL-word-l2r's copies: token ``j`` is the target, masked with its word's tokens to its right.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import _within_word_l2r_masks
    >>> masked, targets = _within_word_l2r_masks(torch.tensor([0, 1, 1, 1, 2]))
    >>> masked.int().tolist()
    [[1, 0, 0, 0, 0], [0, 1, 1, 1, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 1]]
    """
    word_ids = torch.as_tensor(word_ids)
    length = len(word_ids)
    same_word = word_ids.unsqueeze(0) == word_ids.unsqueeze(1)
    right = torch.arange(length).unsqueeze(0) >= torch.arange(length).unsqueeze(1)
    return same_word & right, torch.eye(length, dtype=torch.bool)


def _check_draws(score_masks, return_std, owner, what="score_masks"):
    """Draws per text: a positive integer, at least 2 for a standard error."""
    validate_parameters({what: score_masks}, {what: [Interval(Integral, 1, None, closed="left")]}, owner)
    if return_std and score_masks < 2:
        raise ValueError(f"{what}={score_masks}: a standard error needs at least 2 masks per size, orderings or masks.")
    return int(score_masks)


def _draws_of(score_masks, n_masks, return_std, owner):
    """``score_masks`` (or its 0.1.0 name ``n_masks``, with a FutureWarning) checked as ``_check_draws`` does."""
    return _check_draws(renamed_parameter("n_masks", n_masks, "score_masks", score_masks, owner, stacklevel=4),
                        return_std, owner)


def _with_std(value, std, return_std):
    return np.array([value, std]) if return_std else value


def _group_standard_errors(masked, sums, score_masks):
    """Standard error of each group's mean of ``sum / M`` over its ``score_masks`` masks (``ddof=1``)."""
    ratios = (sums / masked.sum(1).numpy()).reshape(-1, score_masks)
    return ratios.std(axis=1, ddof=1) / np.sqrt(score_masks)


def _spread_with_error(values):
    """``[s, se(s)]``: the standard deviation of ``values`` (``ddof=1``) and its delta-method standard error."""
    n = len(values)
    deviations = values - values.mean()
    variance = deviations @ deviations / (n - 1)
    if variance <= 0:
        return np.zeros(2)
    fourth = np.mean(deviations**4)
    variance_of_variance = max(fourth - variance**2 * (n - 3) / (n - 1), 0.0) / n
    return np.array([np.sqrt(variance), np.sqrt(variance_of_variance) / (2 * np.sqrt(variance))])


class ScoringStrategy(abc.ABC):
    """Which masked copies of a text to run, and how their log-probabilities reduce to its result.

    ``word_ids`` (a text's word id per token, shape (L,)) is given to every method when the
    strategy ``needs_words``, else ``None``.

    Attributes
    ----------
    needs_words : bool
        Class attribute: the strategy needs each text's word ids (a fast tokenizer's).
    per_target : bool
        Class attribute: :meth:`reduce` receives each copy's target log-probabilities, of shape
        (n_copies, L) with NaN at the tokens that are not targets, instead of each copy's sum.
    paired : bool
        The draws come in antithetic pairs (an ordering and its reverse): a count of draws is
        even. What the budgeted estimator (:class:`~skmpt.text.estimation.BudgetedEstimator`)
        reads to size a strategy to a budget.
    min_draws : int
        The fewest draws that give a standard error (2; two pairs when ``paired``).
    """

    needs_words = False
    per_target = False
    paired = False
    min_draws = 2

    @abc.abstractmethod
    def n_copies(self, length, word_ids=None):
        """Number of masked copies of a text of ``length`` tokens."""

    @abc.abstractmethod
    def copies(self, length, generator, word_ids=None):
        """``(masked, targets)``: boolean tensors of shape (n_copies, length)."""

    @abc.abstractmethod
    def reduce(self, masked, values, word_ids=None):
        """The text's result from its copies' summed target log-probabilities, shape (n_copies,)."""

    def draws(self, masked, values):
        """Each independent draw's estimate of ``sum_M S(x; M)`` (an ordering's, a mask's), whose mean is the result.

        What an adaptive budget or a paired comparison of two texts reads; the estimators of
        :func:`estimator_strategy` give them, other strategies raise ``NotImplementedError``.
        """
        raise NotImplementedError(f"{type(self).__name__} is not an estimator of sum_M S(x; M): it has no draws.")


class CurveMasks(ScoringStrategy):
    """``score_masks`` random masks of ``M = round(rate * L)`` tokens per rate; ``S(x; M)`` per rate.

    Parameters
    ----------
    rates : array-like of float in (0, 1)
    score_masks : int
        Masks per rate.
    return_std : bool, default=False
        ``[curve, standard errors]`` (shape (2, n_rates)) instead of the curve.

    Examples
    --------
    >>> from skmpt.text.strategies import CurveMasks
    >>> CurveMasks([0.2, 0.5], score_masks=3).n_copies(10)
    6
    """

    def __init__(self, rates, score_masks=None, return_std=False, *, n_masks="deprecated"):
        self.rates, self.return_std = rates, return_std
        self.score_masks = _draws_of(score_masks, n_masks, return_std, type(self).__name__)

    def n_copies(self, length, word_ids=None):
        return len(self.rates) * self.score_masks

    def copies(self, length, generator, word_ids=None):
        sizes = [mask_size_for_rate(float(rate), length) for rate in self.rates]
        return _size_masks(np.repeat(sizes, self.score_masks), length, generator)

    def reduce(self, masked, values, word_ids=None):
        curve = mean_over_masks(values, masked.sum(1).numpy(), self.score_masks)
        if not self.return_std:
            return curve
        return np.stack([curve, _group_standard_errors(masked, values, self.score_masks)])


class SweepMasks(ScoringStrategy):
    """``score_masks`` random masks at every size ``1..L``; ``sum_M c_M S(x; M)``, the paper's estimator.

    Parameters
    ----------
    score_masks : int
        Masks per size.
    return_std : bool, default=False
        ``[estimate, standard error]``: the sizes' estimates are independent, so the error is
        ``sqrt(sum_M c_M**2 var_M / score_masks)`` from the spread of each size's masks.
    weights : callable or None, default=None
        ``weights(L)`` gives ``c_M`` for ``M = 1..L`` (shape (L,)), as a noise schedule's
        discrete-time ELBO does (:func:`~skmpt.text.schedule_weights`); ``None`` is all ones.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import SweepMasks
    >>> strategy = SweepMasks(score_masks=2, return_std=True)
    >>> masked, _ = strategy.copies(3, torch.Generator().manual_seed(0))
    >>> sums = -masked.sum(1).double().numpy()  # every masked token has log-probability -1
    >>> strategy.n_copies(3), strategy.reduce(masked, sums).tolist()
    (6, [-3.0, 0.0])
    """

    def __init__(self, score_masks=None, return_std=False, weights=None, *, n_masks="deprecated"):
        self.score_masks = _draws_of(score_masks, n_masks, return_std, type(self).__name__)
        self.return_std, self.weights = return_std, weights

    def n_copies(self, length, word_ids=None):
        return self.score_masks * length

    def copies(self, length, generator, word_ids=None):
        return _size_masks(np.repeat(np.arange(1, length + 1), self.score_masks), length, generator)

    def draws(self, masked, values):
        """Each round's ``sum_M c_M`` (one mask per size) estimate, shape (score_masks,)."""
        length = masked.shape[1]
        weights = np.ones(length) if self.weights is None else np.asarray(self.weights(length), np.float64)
        ratios = (np.asarray(values, np.float64) / masked.sum(1).numpy()).reshape(length, self.score_masks)
        return weights @ ratios

    def reduce(self, masked, values, word_ids=None):
        curve = mean_over_masks(values, masked.sum(1).numpy(), self.score_masks)
        weights = np.ones(len(curve)) if self.weights is None else np.asarray(self.weights(len(curve)), np.float64)
        if not self.return_std:
            return curve.sum() if self.weights is None else weights @ curve
        errors = _group_standard_errors(masked, values, self.score_masks)
        return np.array([weights @ curve, np.sqrt((weights**2) @ errors**2)])


class ChainMasks(ScoringStrategy):
    """``score_masks`` random orderings, each token scored given those before it; their mean chain-rule sum.

    Exact for a model whose conditionals come from one joint, whatever the ordering. With
    ``antithetic=True`` the orderings come in pairs, the second the first reversed (a token
    revealed early in one is revealed late in the other), and a pair is one draw: the same
    expectation, and far less spread for a model whose conditionals are nearly those of a joint.

    Parameters
    ----------
    score_masks : int
        Orderings; even with ``antithetic``.
    return_std : bool, default=False
        ``[estimate, standard error]``: the spread of the draws' sums over the square root of
        their number.
    antithetic : bool, default=False

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import ChainMasks
    >>> strategy = ChainMasks(score_masks=2, return_std=True)
    >>> masked, _ = strategy.copies(3, torch.Generator().manual_seed(0))
    >>> strategy.n_copies(3), strategy.reduce(masked, -torch.ones(6, dtype=torch.float64).numpy()).tolist()
    (6, [-3.0, 0.0])
    """

    def __init__(self, score_masks=None, return_std=False, antithetic=False, *, n_masks="deprecated"):
        self.score_masks = _draws_of(score_masks, n_masks, return_std, type(self).__name__)
        self.return_std, self.antithetic = return_std, antithetic
        self.paired, self.min_draws = bool(antithetic), 4 if antithetic else 2
        if antithetic and (self.score_masks % 2 or (return_std and self.score_masks < 4)):
            raise ValueError(f"Antithetic orderings come in pairs: score_masks must be even (at least 4 for a standard "
                             f"error); got {score_masks}.")

    def n_copies(self, length, word_ids=None):
        return self.score_masks * length

    def copies(self, length, generator, word_ids=None):
        return _chain_masks(self.score_masks, length, generator, antithetic=self.antithetic)

    def draws(self, masked, values):
        """Each ordering's chain-rule sum (each antithetic pair's mean), shape (score_masks,) or (score_masks / 2,)."""
        totals = np.asarray(values, dtype=np.float64).reshape(self.score_masks, -1).sum(1)
        return totals.reshape(-1, 2).mean(1) if self.antithetic else totals

    def reduce(self, masked, values, word_ids=None):
        if not self.return_std:
            return values.sum() / self.score_masks
        totals = self.draws(masked, values)
        return np.array([totals.mean(), totals.std(ddof=1) / np.sqrt(len(totals))])


class ChainSpread(ChainMasks):
    """The spread of the chain across ``score_masks`` random orderings, and its standard error: ``[s, se(s)]``.

    Each ordering gives ``sum_t log p(x_{s_t} | x_{s_<t})``, the chain rule along it. When the
    conditionals come from one joint every ordering gives ``log p(x)``: the spread (the standard
    deviation of the orderings' totals, ``ddof=1``) is 0. A positive spread measures how far the
    conditionals are from any joint. The standard error of the standard deviation ``s`` is the
    delta-method one, ``se(s^2) / (2 s)`` with ``se(s^2)`` from the fourth central moment.

    Examples
    --------
    >>> from skmpt.text.strategies import ChainSpread
    >>> ChainSpread(score_masks=4).n_copies(10)
    40
    """

    def __init__(self, score_masks=None, *, n_masks="deprecated"):
        super().__init__(renamed_parameter("n_masks", n_masks, "score_masks", score_masks, "ChainSpread"),
                         return_std=True)

    def reduce(self, masked, values, word_ids=None):
        return _spread_with_error(np.asarray(values, dtype=np.float64).reshape(self.score_masks, -1).sum(1))


class UniformSizeMasks(ScoringStrategy):
    """``score_masks`` masks of uniformly random sizes ``M`` in ``1..L``; the mean of ``(L / M) sum_masked log p``.

    LLaDA's Monte Carlo estimator of ``log p(answer | prompt)`` and RADD's ``k_DCE``: unbiased
    for ``sum_M S(x; M)``, one copy per mask.

    Parameters
    ----------
    score_masks : int
    return_std : bool, default=False
        ``[estimate, standard error]``: the masks' spread over ``sqrt(score_masks)``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import UniformSizeMasks
    >>> strategy = UniformSizeMasks(score_masks=4, return_std=True)
    >>> masked, _ = strategy.copies(5, torch.Generator().manual_seed(0))
    >>> strategy.reduce(masked, -masked.sum(1).double().numpy()).tolist()  # log p = -1 per token
    [-5.0, 0.0]
    """

    def __init__(self, score_masks=None, return_std=False, *, n_masks="deprecated"):
        self.score_masks, self.return_std = _draws_of(score_masks, n_masks, return_std, type(self).__name__), return_std

    def n_copies(self, length, word_ids=None):
        return self.score_masks

    def copies(self, length, generator, word_ids=None):
        sizes = torch.randint(1, length + 1, (self.score_masks,), generator=generator).numpy()
        return _size_masks(sizes, length, generator)

    def draws(self, masked, values):
        """Each mask's ``(L / M) sum_masked log p``, shape (score_masks,)."""
        return masked.shape[1] / masked.sum(1).numpy() * np.asarray(values, dtype=np.float64)

    def reduce(self, masked, values, word_ids=None):
        terms = self.draws(masked, values)
        std = terms.std(ddof=1) / np.sqrt(len(terms)) if len(terms) > 1 else np.nan
        return _with_std(terms.mean(), std, self.return_std)


def _stratified_sizes(score_masks, length, generator):
    """LLaDA's count-stratified sizes: ``score_masks`` sizes evenly spaced over ``1..length`` from a random start.

    Each size alone is uniform on ``1..length``; together they cover the range evenly.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import _stratified_sizes
    >>> sorted(_stratified_sizes(4, 8, torch.Generator().manual_seed(0)).tolist())
    [1, 3, 5, 7]
    """
    start = int(torch.randint(1, length + 1, (), generator=generator))
    # floor, not round: LLaDA's torch.round rounds halves to even, which favours even sizes for some (L, n)
    sizes = start + np.floor(np.arange(score_masks) * (length / score_masks)).astype(np.int64)
    return (sizes - 1) % length + 1


class StratifiedSizeMasks(UniformSizeMasks):
    """LLaDA's evaluation estimator: :class:`UniformSizeMasks` with the sizes evenly spread (``_stratified_sizes``).

    The ``score_masks`` sizes of a text share one random start, so they are not independent: the
    standard error, computed as if they were, is conservative.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import StratifiedSizeMasks
    >>> masked, _ = StratifiedSizeMasks(score_masks=4).copies(8, torch.Generator().manual_seed(0))
    >>> sorted(masked.sum(1).tolist())
    [1, 3, 5, 7]
    """

    def copies(self, length, generator, word_ids=None):
        return _size_masks(_stratified_sizes(self.score_masks, length, generator), length, generator)


def _balanced_windows(sizes, length, generator):
    """Masks of the given sizes, balanced over positions: each size's masks are windows of one random ordering.

    The ``k`` masks of size ``M`` are the cyclic windows of ``M`` consecutive entries of one
    uniformly random ordering of the ``length`` tokens, starting at ``k`` offsets evenly spread
    from a random start: each mask alone is a uniformly random set of ``M`` tokens, and together
    they cover every token nearly equally often (exactly ``k M / length`` times when that is a
    whole number), which no set of independent masks does.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import _balanced_windows
    >>> masked = _balanced_windows([3, 3, 3, 3], 12, torch.Generator().manual_seed(0))
    >>> masked.sum(0).tolist()  # four windows of 3 of 12 tokens: a partition
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    masked = torch.zeros((len(sizes), length), dtype=torch.bool)
    for size in np.unique(sizes):
        rows = np.flatnonzero(sizes == size)
        ordering = random_orderings(1, length, random_state=generator)[0]
        start = int(torch.randint(length, (), generator=generator))
        offsets = start + np.floor(np.arange(len(rows)) * (length / len(rows))).astype(np.int64)
        windows = (offsets[:, None] + np.arange(size)) % length
        masked[torch.as_tensor(rows)[:, None], ordering[torch.as_tensor(windows)]] = True
    return masked


class BalancedMasks(StratifiedSizeMasks):
    """Stratified over sizes and positions: the all-masked copy once, the other sizes evenly spread, each balanced.

    ``sum_M S(x; M) = S(x; L) + sum_{M < L} S(x; M)``. The one mask of size ``L`` gives
    ``S(x; L)`` exactly from one copy (LLaDA's stratified sizes spend ``score_masks / L`` copies on
    it). The other ``score_masks - 1`` copies take LLaDA's evenly spread sizes over ``1..L - 1``
    (``_stratified_sizes``), each a term ``((L - 1) / M) sum_masked log p``, unbiased for the
    rest; the masks of each size are windows of one random ordering (``_balanced_windows``),
    so every token is masked nearly equally often within a size and the spread that comes from
    *which* tokens a mask holds (some are far harder to predict than others) mostly cancels.
    Same expectation as LLaDA's estimator; measured on AntiBERTy, 1.5 to 2 times less variance
    per forward pass (``benchmarks/text_estimator_variance.py``). The standard error treats the
    terms as independent; the balance makes them negatively correlated, so it is conservative.

    Parameters
    ----------
    score_masks : int
        Copies, the all-masked one included: at least 2 (3 for a standard error).
    return_std : bool, default=False

    Examples
    --------
    >>> import numpy as np, torch
    >>> from skmpt.text.strategies import BalancedMasks
    >>> strategy = BalancedMasks(score_masks=5, return_std=True)
    >>> masked, _ = strategy.copies(3, torch.Generator().manual_seed(0))
    >>> masked.sum(1).tolist()  # the all-masked copy first, then sizes over 1..2
    [3, 1, 1, 2, 2]
    >>> strategy.reduce(masked, -masked.sum(1).double().numpy()).tolist()  # log p = -1 per token
    [-3.0, 0.0]
    """

    min_draws = 3  # the all-masked copy and two draws

    def __init__(self, score_masks=None, return_std=False, *, n_masks="deprecated"):
        super().__init__(score_masks, return_std=return_std, n_masks=n_masks)
        if self.score_masks < 2 + return_std:
            raise ValueError(f"BalancedMasks needs score_masks >= {2 + return_std} (the all-masked copy and "
                             f"{1 + return_std} more); got {score_masks}.")

    def copies(self, length, generator, word_ids=None):
        full = torch.ones((1, length), dtype=torch.bool)
        if length == 1:  # one token: every copy is the all-masked one
            masked = full.expand(self.score_masks, 1).clone()
            return masked, masked
        sizes = _stratified_sizes(self.score_masks - 1, length - 1, generator)
        masked = torch.cat([full, _balanced_windows(sizes, length, generator)])
        return masked, masked

    def draws(self, masked, values):
        """Each copy after the first: its term plus ``S(x; L)`` from the first, shape (score_masks - 1,)."""
        values = np.asarray(values, dtype=np.float64)
        length = masked.shape[1]
        if length == 1:
            return values[1:].copy()
        last = values[0] / length
        return (length - 1) / masked[1:].sum(1).numpy() * values[1:] + last


def _size_allocation(n_copies, length, exponent):
    """Expected copies of each size ``1..length``: ``n_copies`` in proportion to ``M**-exponent``, shape (length,).

    Examples
    --------
    >>> from skmpt.text.strategies import _size_allocation
    >>> _size_allocation(6, 3, 0.0).tolist()
    [2.0, 2.0, 2.0]
    """
    shares = np.arange(1, length + 1, dtype=np.float64) ** -float(exponent)
    return n_copies * shares / shares.sum()


def _allocated_sizes(n_copies, length, exponent, generator):
    """``n_copies`` sizes over ``1..length`` by systematic sampling of ``_size_allocation``'s expected counts.

    The points ``u + k`` (``k = 0..n_copies - 1``, one uniform ``u``) fall in the intervals of
    lengths ``e_M`` laid end to end: size ``M`` gets ``floor(e_M)`` or ``ceil(e_M)`` copies, ``e_M``
    on average, and at least one wherever ``e_M >= 1``.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from skmpt.text.strategies import _allocated_sizes
    >>> sizes = _allocated_sizes(10, 4, 0.25, torch.Generator().manual_seed(0))
    >>> np.bincount(sizes, minlength=5)[1:].tolist()  # expected 3.02, 2.54, 2.30, 2.14
    [3, 2, 2, 3]
    """
    bounds = np.cumsum(_size_allocation(n_copies, length, exponent))
    bounds[-1] = n_copies
    start = float(torch.rand((), generator=generator, dtype=torch.float64))
    return np.minimum(np.searchsorted(bounds, start + np.arange(n_copies), side="right"), length - 1) + 1


def _fitted_controls(masked, values, sizes, per_size, folds=4):
    """Each copy's control variate (``_control_fit``, ``_controls``), fitted on the other copies only.

    The copies are split into ``folds`` parts (in turn, so each part holds about as many of every
    size's copies); 4 against 2 or 8 on the benchmark's 18 tuning tables (a median of 2.00 times
    LLaDA's efficiency against 1.95 and 1.99). For each part, the tokens' effects and the
    coefficients are fitted on the other parts only, each copy weighed by ``1 / per_size**2`` (its
    weight in the estimate's variance). Given a size, a uniformly random mask holds each token
    with probability ``M / L`` (and each pair with ``M (M - 1) / (L (L - 1))``): a control fitted
    on other copies has expectation 0, so subtracting it keeps the estimate unbiased, and the
    coefficients are near 0 where the effects do not track the terms (the estimate then spreads
    as without it).

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.text.strategies import _fitted_controls
    >>> masked = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]] * 2, dtype=bool)
    >>> values = np.where(masked, [-1.0, -2.0, -3.0], np.nan)  # each token as hard whatever is masked
    >>> terms = np.nansum(values, 1) / 2
    >>> (terms - _fitted_controls(masked, values, masked.sum(1), np.full(6, 6.0))).round(6).tolist()  # all the mean
    [-2.0, -2.0, -2.0, -2.0, -2.0, -2.0]
    """
    values = np.where(masked, values, 0.0)
    part_of = np.arange(len(masked)) % folds
    controls = np.zeros(len(masked))
    for part in range(folds):
        fit = part_of != part
        if not fit.any():
            continue
        controls[~fit] = _controls(masked[~fit], _control_fit(masked[fit], values[fit], 1.0 / per_size[fit] ** 2))
    return controls


def _pair_effects(masked, values):
    """``(a, d)``: least squares of ``l_kj = c_M + a_j + sum_{i in mask k, i != j} d_i`` over every masked ``(k, j)``.

    ``a_j`` is token ``j``'s own difficulty, ``d_i`` how much masking token ``i`` lowers the
    others' log-probabilities (a pair's effect, additive), ``c_M`` each size's level. The normal
    equations are formed from the masks (``(3 L)**2`` numbers, not one row per masked token),
    with a small ridge for the directions that do not change the control (shifts of ``a`` or ``d``).

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.text.strategies import _pair_effects
    >>> masked = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 1]], dtype=bool)
    >>> own, pair = np.array([-1.0, -2.0, -3.0]), np.array([0.0, -0.5, 0.0])  # masking token 1 costs the others
    >>> values = np.where(masked, own + (masked @ pair)[:, None] - pair, 0.0)
    >>> a, d = _pair_effects(masked, values)
    >>> np.round(a - a.mean(), 3).tolist(), np.round(d - d.mean(), 3).tolist()
    ([1.0, 0.0, -1.0], [0.167, -0.333, 0.167])
    """
    m = masked.astype(np.float64)
    length, sizes = m.shape[1], m.sum(1)
    levels = np.zeros((len(m), length))
    levels[np.arange(len(m)), sizes.astype(int) - 1] = 1.0
    counts, sums = m.sum(0), values.sum(1)
    gram = np.block([
        [np.diag(counts), m.T @ m - np.diag(counts), m.T @ levels],
        [m.T @ m - np.diag(counts), (m.T * (sizes - 2)) @ m + np.diag(counts), (m.T * (sizes - 1)) @ levels],
        [levels.T @ m, levels.T @ (m * (sizes - 1)[:, None]), levels.T @ (levels * sizes[:, None])]])
    right = np.concatenate([values.sum(0), m.T @ sums - values.sum(0), levels.T @ sums])
    ridge = 1e-9 * max(np.trace(gram), 1.0) / len(gram)
    effects = np.linalg.solve(gram + ridge * np.eye(len(gram)), right)
    return effects[:length], effects[length:2 * length]


def _control_features(masked, a, d):
    """Each copy's two controls, zero in expectation given its size: its tokens' own effects and their pairs'.

    ``(1 / M) sum_{j in m} a_j - mean(a)`` and ``((M - 1) / M) (sum_{i in m} d_i - (M / L) sum(d))``
    (the term's ``(1 / M) sum_{j in m} sum_{i in m, i != j} d_i`` less its expectation), shape (n, 2).
    """
    sizes = masked.sum(1)
    own = (masked * a).sum(1) / sizes - a.mean()
    pairs = (sizes - 1) / sizes * ((masked * d).sum(1) - sizes / masked.shape[1] * d.sum())
    return np.stack([own, pairs], 1)


def _control_fit(masked, values, weights):
    """``(a, d, beta)`` fitted on copies ``masked`` (``values``: 0 at the unmasked): ``_fitted_controls``' fit.

    The effects by ``_pair_effects``; ``beta`` the weighted regression of the terms
    ``(1 / M) sum_masked log p`` on the two controls (``_control_features``), within sizes.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.text.strategies import _control_fit
    >>> masked = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 0, 0], [0, 0, 1]], dtype=bool)
    >>> a, d, beta = _control_fit(masked, np.where(masked, [-1.0, -2.0, -3.0], 0.0), np.ones(5))
    >>> np.round(a - a.mean(), 4).tolist(), round(float(beta[0]), 4)  # the tokens' effects, their coefficient 1
    ([1.0, 0.0, -1.0], 1.0)
    """
    sizes = masked.sum(1)
    a, d = _pair_effects(masked, values)
    x, y = _control_features(masked, a, d), values.sum(1) / sizes
    count = np.maximum(np.bincount(sizes), 1)
    x = x - np.stack([np.bincount(sizes, weights=column) / count for column in x.T], 1)[sizes]
    y = y - (np.bincount(sizes, weights=y) / count)[sizes]
    gram = (x.T * weights) @ x
    ridge = 1e-9 * max(np.trace(gram), 1e-300)
    beta = np.linalg.solve(gram + ridge * np.eye(2), (x.T * weights) @ y) if np.trace(gram) > 1e-12 else np.zeros(2)
    return a, d, beta


def _controls(masked, fit):
    """The copies' control variates ``_control_features @ beta`` under a fit ``(a, d, beta)`` of ``_control_fit``."""
    return _control_features(masked, fit[0], fit[1]) @ fit[2]


class AllocatedSizeMasks(UniformSizeMasks):
    """The all-masked copy once, the other copies' sizes in proportion to ``M**-exponent``, each size's mean.

    ``sum_M S(x; M) = S(x; L) + sum_{M < L} S(x; M)``. The one mask of size ``L`` gives
    ``S(x; L)`` exactly from one copy. The other ``n = score_masks - 1`` copies are spread over the
    sizes ``1..L - 1``, ``e_M = n M**-exponent / sum_K K**-exponent`` expected at size ``M``
    (``_allocated_sizes``: ``floor(e_M)`` or ``ceil(e_M)`` of them, by systematic sampling), each a
    uniformly random mask of its size: small masks, whose terms spread more, get more copies.
    Each size's ``S(x; M)`` is estimated by the mean of its copies' ``(1 / M) sum_masked log p``,
    where ``e_M >= 1`` (it always has a copy), else by their sum over ``e_M`` (a size with no copy
    counts 0): unbiased for any ``exponent``, whatever the counts drawn. LLaDA's estimator
    (``eval_llada.py``) spreads its sizes evenly and rounds halves to even, which gives some sizes
    more copies than others (and a bias); this estimator spends the extra copies where they pay,
    unbiasedly. ``exponent=0.25`` was chosen on the benchmark's 18 tuning tables (the only one of
    0, 1/4, 1/2, 3/4, 1, 3/2 with no table below LLaDA's efficiency, from the tables' exact
    within-size variances; ``benchmarks/text_estimator_variance.py``). The standard error is the
    stratified one where every size has two copies or more (``draws``), else conservative.

    With ``control=True`` (``score_method="adjusted"``, the lm-eval model's standard) each term
    ``(1 / M) sum_masked log p`` loses two control variates of zero expectation given the size:
    the mean over its mask of each token's own difficulty ``a_j`` (less their mean over all
    tokens), and the effect of the pairs of masked tokens, ``d_i`` for how much masking token
    ``i`` lowers the others' log-probabilities (less its expectation), each times a coefficient
    ``beta``. ``a``, ``d`` (a least-squares fit of each target's log-probability on the size, the
    token and the other masked tokens) and ``beta`` (a regression of the terms within sizes) are
    fitted on the other three quarters of the copies only (``_fitted_controls``): unbiased, far
    less spread where the effects explain the terms (``beta`` near 1), about the same where they
    do not (``beta`` near 0). With the pairs' effect, the 18 tuning tables of the benchmark
    (8 residues, 128 passes, 200 runs) had a median of 2.54 times LLaDA's efficiency (the lowest
    1.28) against 1.87 (1.05) with the tokens' own difficulties alone (2.47 and 1.29 with one
    coefficient for both). On the benchmark's held-out AntiBERTy tables it had 1.71 to 18 times
    less variance per pass than LLaDA's estimator (median 2.53); without the control, 1.11 to 1.32.

    Parameters
    ----------
    score_masks : int
        Copies, the all-masked one included: at least 2 (3 for a standard error).
    return_std : bool, default=False
    exponent : float >= 0, default=0.25
        0 spreads the copies evenly over ``1..L - 1``.
    control : bool, default=False
        Subtract the fitted control variates where there are at least
        ``control_copies`` (4) copies per token besides the all-masked one (fewer fit it too
        poorly to gain: a round of 16 copies of 8 tokens fits it on other copies given to
        ``draws``, other rounds', or runs without it); ``draws`` then takes each
        target's log-probability (``per_target``).
    full : bool, default=True
        Whether the copies include the all-masked one. False spends all ``score_masks`` copies
        on the sizes ``1..L - 1`` and takes the all-masked copy's values from ``draws``'
        ``full_values``: a request drawn in rounds scores it once (its value does not vary).

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import AllocatedSizeMasks
    >>> strategy = AllocatedSizeMasks(score_masks=8, return_std=True)
    >>> masked, _ = strategy.copies(4, torch.Generator().manual_seed(0))
    >>> masked.sum(1).tolist()  # the all-masked copy first, then 7 sizes over 1..3 (expected 2.69, 2.26, 2.05)
    [4, 1, 1, 2, 2, 3, 3, 3]
    >>> round(float(strategy.reduce(masked, -masked.sum(1).double().numpy())[0]), 12)  # log p = -1 per token
    -4.0
    """

    min_draws = 3  # the all-masked copy and two draws
    #: The control variate is fitted only on at least this many copies per token (besides the all-masked one): on the
    #: 18 tuning tables (8 residues, 128 passes in rounds), at 2 per token it spread as much as it removed (a median
    #: of 0.99 times the variance without it, the lowest 0.55), at 4 it gained 1.44 (the lowest 1.00), at 8 1.77.
    control_copies = 4

    def __init__(self, score_masks=None, return_std=False, exponent=0.25, control=False, full=True, *,
                 n_masks="deprecated"):
        super().__init__(score_masks, return_std=return_std, n_masks=n_masks)
        if self.score_masks < 1 + full + return_std:
            raise ValueError(f"AllocatedSizeMasks needs score_masks >= {1 + full + return_std} ("
                             f"{'the all-masked copy and ' if full else ''}{1 + return_std} more); got {score_masks}.")
        if not (math.isfinite(exponent) and exponent >= 0):
            raise ValueError(f"exponent must be a finite number >= 0; got {exponent!r}.")
        self.exponent, self.control, self.full = float(exponent), bool(control), bool(full)
        self.per_target = self.control  # the control variate needs each target's log-probability

    def covering_copies(self, length):
        """The fewest copies whose allocation expects at least one copy of every size ``1..length - 1``
        (the all-masked copy included where ``full``): with fewer, the largest sizes are left to chance
        (weighed by ``1 / e_M``), and an estimate spreads more than LLaDA's.

        Parameters
        ----------
        length : int
            Tokens of the continuation.

        Returns
        -------
        n_copies : int

        Examples
        --------
        >>> from skmpt.text.strategies import AllocatedSizeMasks
        >>> strategy = AllocatedSizeMasks(score_masks=16)
        >>> strategy.covering_copies(8), strategy.covering_copies(64)
        (10, 84)
        """
        if length < 2:
            return 1
        shares = np.arange(1, length, dtype=np.float64) ** -self.exponent
        return math.ceil(shares.sum() / shares[-1] - 1e-9) + self.full

    def copies(self, length, generator, word_ids=None):
        full = torch.ones((1, length), dtype=torch.bool)
        if length == 1:  # one token: every copy is the all-masked one
            masked = full.expand(self.score_masks, 1).clone()
            return masked, masked
        sizes = _allocated_sizes(self.score_masks - self.full, length - 1, self.exponent, generator)
        masked = masks_of_sizes(sizes, length, random_state=generator)
        masked = torch.cat([full, masked]) if self.full else masked
        return masked, masked

    def draws(self, masked, values, fit_masked=None, fit_values=None, full_values=None):
        """One draw per copy but the all-masked one, whose mean is the estimate, shape (score_masks - full,).

        With ``control`` and copies too few to fit the control variate on themselves (fewer than
        ``control_copies`` per token), ``fit_masked`` and ``fit_values`` (other copies, drawn
        independently of these, without the all-masked one: other rounds') fit it instead,
        which keeps the estimate unbiased (where they hold ``control_copies`` per token too;
        else there is no control variate). With ``full=False``, ``full_values`` are the
        all-masked copy's values (a row of each target's log-probability with ``control``, else
        their sum), scored once elsewhere.

        The estimate is ``S(x; L) + sum_M`` (each size's estimate):
        :meth:`~skmpt.text.strategies.AllocatedSizeMasks.terms` and
        :meth:`~skmpt.text.strategies.AllocatedSizeMasks.stratified_draws`.
        """
        values = np.asarray(values, dtype=np.float64)
        if masked.shape[1] == 1:  # one token: every copy is the all-masked one
            sums = np.nansum(values, 1) if self.control else values
            return sums[1:].copy() if self.full else sums.copy()
        return self.stratified_draws(*self.terms(masked, values, fit_masked, fit_values, full_values))

    def terms(self, masked, values, fit_masked=None, fit_values=None, full_values=None):
        """``(full, sizes, terms, weights, covered)``: the estimate is ``full + weights @ terms``.

        ``full`` is ``S(x; L)`` from the all-masked copy; ``terms`` each other copy's
        ``(1 / M) sum_masked log p`` (less its control variate with ``control``), ``sizes`` its
        size ``M`` and ``weights`` its weight: ``1 / count_M`` where ``e_M >= 1``, else
        ``1 / e_M``; ``covered`` says that every size has ``e_M >= 1`` (each size's mean, no
        size left to chance). Arguments as ``draws``'; at least two tokens.

        Examples
        --------
        >>> import numpy as np, torch
        >>> from skmpt.text.strategies import AllocatedSizeMasks
        >>> strategy = AllocatedSizeMasks(score_masks=5)
        >>> masked, _ = strategy.copies(3, torch.Generator().manual_seed(0))
        >>> full, sizes, terms, weights, covered = strategy.terms(masked, -masked.sum(1).double().numpy())
        >>> sizes.tolist(), weights.tolist(), float(full + weights @ terms)  # log p = -1 per token
        ([1, 1, 2, 2], [0.5, 0.5, 0.5, 0.5], -3.0)
        """
        values = np.asarray(values, dtype=np.float64)
        length = masked.shape[1]
        if not self.full:
            if full_values is None:
                raise ValueError("full_values is needed: with full=False the copies lack the all-masked one.")
            masked = torch.cat([torch.ones((1, length), dtype=torch.bool), torch.as_tensor(masked)])
            values = np.concatenate([np.asarray(full_values, dtype=np.float64).reshape(1, *values.shape[1:]), values])
        sums = np.nansum(values, 1) if self.control else values
        sizes = masked[1:].sum(1).numpy()
        expected = np.diff(np.concatenate([[0.0], np.cumsum(_size_allocation(len(sizes), length - 1,
                                                                              self.exponent))]))
        counts = np.bincount(sizes, minlength=length)[1:].astype(np.float64)
        per_size = np.where(expected >= 1, counts, expected)[sizes - 1]
        terms = sums[1:] / sizes
        if self.control and len(sizes) >= self.control_copies * length:
            terms = terms - _fitted_controls(masked[1:].numpy(), values[1:], sizes, per_size)
        elif self.control and fit_masked is not None and len(fit_masked) >= self.control_copies * length:
            fit_masked = np.asarray(fit_masked)
            fit = _control_fit(fit_masked, np.where(fit_masked, fit_values, 0.0), np.ones(len(fit_masked)))
            terms = terms - _controls(masked[1:].numpy(), fit)
        return sums[0] / length, sizes, terms, 1.0 / per_size, bool((expected >= 1).all())

    @staticmethod
    def stratified_draws(full, sizes, terms, weights, covered):
        """Draws whose mean is ``full + weights @ terms`` and whose spread over ``sqrt(n)`` is its standard error.

        The arguments are ``terms``' (or those of several independent sets of copies, each set's
        weights times its share of the copies: rounds pooled). Where the sizes are ``covered`` and
        each has two copies or more, each draw is the estimate plus the copy's weighted deviation
        from its size's mean term, scaled so that the draws' spread over ``sqrt(n)`` is the
        stratified standard error ``sqrt(sum_M s_M**2 sum_k weight_k**2)`` (``s_M``: the spread of
        size ``M``'s terms): the differences between sizes' means, which are no error, stay out of
        it. Else each draw is ``full + n weight_k term_k``: the same mean, a conservative spread.

        Examples
        --------
        >>> import numpy as np
        >>> from skmpt.text.strategies import AllocatedSizeMasks
        >>> sizes, terms = np.array([1, 1, 2, 2]), np.array([-1.0, -3.0, -1.0, -1.0])
        >>> draws = AllocatedSizeMasks.stratified_draws(-1.0, sizes, terms, np.full(4, 0.5), True)
        >>> float(draws.mean()), round(float(draws.std(ddof=1) / 2), 6)  # -1 - 2 - 1; size 1's terms: s**2 / 2 = 1
        (-4.0, 1.0)
        """
        sizes, terms, weights = np.asarray(sizes), np.asarray(terms, dtype=np.float64), np.asarray(weights)
        n_copies = len(terms)
        counts = np.bincount(sizes, minlength=sizes.max() + 1)[1:].astype(np.float64)
        if not covered or counts.min() < 2:  # a size without two copies: the terms (conservative)
            return full + n_copies * weights * terms
        means = np.bincount(sizes, weights=terms, minlength=len(counts) + 1)[1:] / counts
        count = counts[sizes - 1]
        deviations = np.sqrt(n_copies * (n_copies - 1) * count / (count - 1)) * weights * (terms - means[sizes - 1])
        return full + weights @ terms + deviations - deviations.mean()


class ControlledMasks(StratifiedSizeMasks):
    """Stratified sizes with a control variate per token: each token's own difficulty, learnt from the other masks.

    A mask ``m`` of ``M`` of the ``L`` tokens, uniformly random given its size, gives LLaDA's term
    ``(L / M) sum_{j in m} l_j``; most of its spread comes from *which* tokens it masks (some are
    far harder to predict than others). With a baseline ``a_j`` per token that does not depend on
    ``m``, ``(L / M) sum_{j in m} (l_j - a_j) + sum_j a_j`` has the same expectation (each token
    is in ``m`` with probability ``M / L``) and far less spread when ``a_j`` tracks ``l_j``. Here
    ``a_j`` is fitted on the *other* masks only (``_token_effects``: ``l_jk = a_j + c_k``, each
    mask ``k`` at its own level ``c_k``), so it does not depend on ``m``. A shift of every ``a_j``
    by one constant cancels exactly, so the masks' sizes do not bias it.

    Needs each target's log-probability (``per_target``). Same copies as
    :class:`StratifiedSizeMasks`; the standard error treats the terms as independent.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from skmpt.text.strategies import ControlledMasks
    >>> strategy = ControlledMasks(score_masks=6, return_std=True)
    >>> masked, _ = strategy.copies(4, torch.Generator().manual_seed(0))
    >>> values = np.where(masked.numpy(), [-1.0, -2.0, -3.0, -4.0], np.nan)  # a mask does not change log p
    >>> strategy.reduce(masked, values).round(12).tolist()  # exactly sum_j l_j: the tokens' spread is gone
    [-10.0, 0.0]
    """

    per_target = True

    def draws(self, masked, values):
        """Each mask's controlled term, shape (score_masks,)."""
        masked = masked.numpy()
        values = np.where(masked, np.asarray(values, dtype=np.float64), 0.0)
        length, sizes = masked.shape[1], masked.sum(1)
        terms = np.empty(len(masked))
        for k in range(len(masked)):
            others = np.arange(len(masked)) != k
            baseline = _token_effects(masked[others], values[others])
            terms[k] = length / sizes[k] * (values[k] - baseline)[masked[k]].sum() + baseline.sum()
        return terms


    def draws_fitted_on(self, masked, values, fit_masked, fit_values):
        """Each mask's controlled term, its baseline fitted on other masks ``fit_masked`` (independent of these).

        With masks drawn independently of ``fit_masked``, each term is unbiased: what a pilot reads to
        measure the control variate on the copies of LLaDA's estimator at no extra forward pass.

        Examples
        --------
        >>> import numpy as np, torch
        >>> from skmpt.text.strategies import ControlledMasks
        >>> strategy = ControlledMasks(score_masks=4)
        >>> masked, _ = strategy.copies(4, torch.Generator().manual_seed(0))
        >>> fit, _ = strategy.copies(4, torch.Generator().manual_seed(1))
        >>> tokens = np.array([-1.0, -2.0, -3.0, -4.0])  # a mask does not change log p
        >>> values, fit_values = (np.where(m.numpy(), tokens, np.nan) for m in (masked, fit))
        >>> strategy.draws_fitted_on(masked, values, fit, fit_values).round(2).tolist()  # the tokens' spread is gone
        [-10.0, -10.0, -10.0, -10.0]
        """
        masked, fit_masked = np.asarray(masked), np.asarray(fit_masked)
        values = np.where(masked, np.asarray(values, dtype=np.float64), 0.0)
        baseline = _token_effects(fit_masked, np.where(fit_masked, np.asarray(fit_values, dtype=np.float64), 0.0))
        sizes = masked.sum(1)
        return masked.shape[1] / sizes * np.where(masked, values - baseline, 0.0).sum(1) + baseline.sum()


def pilot_variances(masked, values):
    """The variance per copy of a pilot's terms without and with a control variate per token.

    ``masked`` are the copies of :class:`ControlledMasks` (LLaDA's sizes, independent masks) and
    ``values`` each target's log-probability (NaN at the other tokens). Each copy's term
    ``(L / M) sum_masked log p`` spreads as LLaDA's (``"terms"``); the same terms minus a control
    variate per token fitted on the other copies spread as the controlled estimator's
    (``"controlled"``). :func:`least_variance_estimator` reads them.

    Returns
    -------
    variances : dict
        ``{"terms": float, "controlled": float}`` (``ddof=1``).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from skmpt.text.strategies import ControlledMasks, pilot_variances
    >>> masked, _ = ControlledMasks(score_masks=16).copies(8, torch.Generator().manual_seed(0))
    >>> difficulty = np.linspace(-6.0, -0.5, 8)  # each token's log-probability, whatever is masked
    >>> variances = pilot_variances(masked, np.where(masked.numpy(), difficulty, np.nan))
    >>> variances["terms"] > 1.0, variances["controlled"] < 1e-12
    (True, True)
    """
    masked = torch.as_tensor(masked)
    values = np.asarray(values, dtype=np.float64)
    terms = UniformSizeMasks(len(masked)).draws(masked, np.where(masked.numpy(), values, 0.0).sum(1))
    controlled = ControlledMasks(len(masked)).draws(masked, values)
    return {"terms": float(terms.var(ddof=1)), "controlled": float(controlled.var(ddof=1))}


def least_variance_estimator(variances, balance_gain=4.0, otherwise="balanced"):
    """``"controlled"`` or ``otherwise``: the one that should spread less per pass, from :func:`pilot_variances`.

    Balancing positions (:class:`BalancedMasks`) divides the terms' variance by a factor that
    independent masks cannot measure; measured between 1.4 and 2.5 on AntiBERTy and on a small
    diffusion LM at 48 copies (``benchmarks/text_estimator_variance.py``). So the control
    variate per token (:class:`ControlledMasks`) is chosen when it divides the terms' variance by
    more than ``balance_gain``: where the tokens' own difficulties explain most of the spread (the
    small diffusion LM: 100 times or more), not where a token's log-probability depends on which
    others are masked (AntiBERTy). ``balance_gain`` is twice that measured factor because a pilot
    is small and the wrong choice costs more one way: AntiBERTy's pilots of 6 copies show a gain
    above 2 in 12 % of draws (the control variate then spreads 1.8 to 3.9 times more than balanced
    masks), above 4 in 3 %, while the diffusion LM's show above 8 in 96 %. Else ``otherwise``:
    ``"balanced"``, or ``"nested"`` where its chains are known to pay (the lm-eval model's choice
    for a continuation given a context). The variances of several texts compared together (the
    choices of one question) may be summed first.

    Examples
    --------
    >>> from skmpt.text.strategies import least_variance_estimator
    >>> least_variance_estimator({"terms": 1.0, "controlled": 0.8}), least_variance_estimator(
    ...     {"terms": 1.0, "controlled": 0.01})
    ('balanced', 'controlled')
    >>> least_variance_estimator({"terms": 1.0, "controlled": 0.8}, otherwise="nested")
    'nested'
    """
    validate_parameters({"otherwise": otherwise}, {"otherwise": [Options(ESTIMATOR_METHODS)]},
                        "least_variance_estimator")
    return "controlled" if variances["controlled"] * balance_gain < variances["terms"] else otherwise


class NestedMasks(ScoringStrategy):
    """The chain's nested masks, every masked token scored: the chain rule and the sweep from the same copies, mixed.

    Along a random ordering ``s`` the copy of size ``M`` masks ``m_M = {s_1..s_M}``. It gives the
    chain's term ``c_M = l_{s_M}(m_M)`` (the token the mask adds) and the mean over all its masked
    tokens ``w_M``. Given ``m_M``, ``s_M`` is uniform within it, so ``E[c_M | m_M] = w_M``: the
    estimate ``sum_M w_M + chain_weight * (c_M - w_M)`` has the expectation of both for any fixed
    ``chain_weight``. 1 is the chain (exact for conditionals of one joint), 0 the sweep over
    nested masks (which averages the masked tokens' spread away). With ``antithetic=True`` the
    orderings come in pairs, one the other reversed: a token revealed early in one is revealed
    late in the other, and a pair is one draw. The all-masked copy ends every ordering and is the
    same for all: it runs once, so ``score_masks`` orderings cost ``score_masks * (L - 1) + 1`` copies.

    The default ``chain_weight=1`` (the chain) was chosen on sequences held out from the first
    tuning (``benchmarks/text_estimator_variance.py --chains``): on AntiBERTy, the 12 residues
    that end the CDR3 of trastuzumab's VH, adalimumab's VH and trastuzumab's VL given the residues
    before them, it has 3.1, 3.7 and 26 times less variance per forward pass than LLaDA's
    estimator at 48 passes (1.8, 2.4 and 4.9 at 0.7; 1.1, 1.3 and 2.1 at 0.5), and on the small
    diffusion LM's held-out sentences thousands of times less. On the one VH chain that 0.7 had
    been tuned on (its last 12 residues) 1 gives 1.5 and 0.7 gives 4.2: lower it for a model
    whose orderings disagree that much.

    Parameters
    ----------
    score_masks : int
        Orderings (``L - 1`` copies each, plus the one all-masked copy); even with ``antithetic``.
    return_std : bool, default=False
    chain_weight : float, default=1.0
    antithetic : bool, default=True

    Examples
    --------
    >>> import numpy as np, torch
    >>> from skmpt.text.strategies import NestedMasks
    >>> strategy = NestedMasks(score_masks=4, return_std=True)
    >>> masked, _ = strategy.copies(3, torch.Generator().manual_seed(0))
    >>> masked.sum(1).tolist()  # the all-masked copy once, then each ordering's masks of 1 and 2 tokens
    [3, 1, 2, 1, 2, 1, 2, 1, 2]
    >>> values = np.where(masked.numpy(), -1.0, np.nan)  # every token has log-probability -1
    >>> strategy.n_copies(3), strategy.reduce(masked, values).tolist()
    (9, [-3.0, 0.0])
    """

    per_target = True

    def __init__(self, score_masks=None, return_std=False, chain_weight=1.0, antithetic=True, *,
                 n_masks="deprecated"):
        self.score_masks = _draws_of(score_masks, n_masks, return_std, type(self).__name__)
        if antithetic and self.score_masks % 2:
            raise ValueError(f"antithetic orderings come in pairs: score_masks must be even; got {score_masks}.")
        if not math.isfinite(chain_weight):
            raise ValueError(f"chain_weight must be a finite number; got {chain_weight!r}.")
        self.return_std, self.chain_weight, self.antithetic = return_std, float(chain_weight), antithetic
        self.paired, self.min_draws = bool(antithetic), 4 if antithetic else 2

    def n_copies(self, length, word_ids=None):
        return self.score_masks * (length - 1) + 1

    def copies(self, length, generator, word_ids=None):
        orderings = random_orderings(self.score_masks, length, random_state=generator)
        if self.antithetic:
            orderings[1::2] = orderings[0::2].flip(1)
        nested = nested_masks(orderings)[:, :-1].reshape(-1, length)  # sizes 1..L - 1 of each ordering
        masked = torch.cat([torch.ones((1, length), dtype=torch.bool), nested])
        return masked, masked

    def draws(self, masked, values):
        """Each ordering's (each antithetic pair's) estimate, shape (score_masks,) (or (score_masks / 2,))."""
        length = masked.shape[1]
        values = np.asarray(values, dtype=np.float64)
        masks = masked.numpy()[1:].reshape(self.score_masks, length - 1, length)
        masks = np.concatenate([masks, np.ones((self.score_masks, 1, length), dtype=bool)], 1)
        values = np.concatenate([values[1:].reshape(self.score_masks, length - 1, length),
                                 np.broadcast_to(values[0], (self.score_masks, 1, length))], 1)
        added = masks.copy()
        added[:, 1:] &= ~masks[:, :-1]  # the token each copy adds to the one before it
        chain = np.where(added, values, 0.0).sum(2)
        sweep = np.where(masks, values, 0.0).sum(2) / masks.sum(2)
        totals = (sweep + self.chain_weight * (chain - sweep)).sum(1)
        return totals.reshape(-1, 2).mean(1) if self.antithetic else totals

    def reduce(self, masked, values, word_ids=None):
        totals = self.draws(masked, values)
        std = totals.std(ddof=1) / np.sqrt(len(totals)) if len(totals) > 1 else np.nan
        return _with_std(totals.mean(), std, self.return_std)


def _token_effects(masked, values, n_iter=10):
    """Each token's effect ``a_j`` in the additive fit ``l_jk = a_j + c_k`` over the masks ``k`` that hold it.

    ``c_k`` is each mask's level (its size's difficulty); ``a_j`` is 0 for a token no mask holds.
    A few rounds of alternating means (the additive model's backfitting), shape (L,).

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.text.strategies import _token_effects
    >>> masked = np.array([[1, 1, 0], [0, 1, 1]], dtype=bool)
    >>> values = np.array([[-1.0, -2.0, 0.0], [0.0, -3.0, -4.0]])  # the second mask is 1 harder
    >>> effects = _token_effects(masked, values)
    >>> np.round(effects - effects[1], 2).tolist()
    [1.0, 0.0, -1.0]
    """
    counts = masked.sum(0)
    effects = np.zeros(masked.shape[1])
    for _ in range(n_iter):
        levels = np.where(masked, values - effects, 0.0).sum(1) / np.maximum(masked.sum(1), 1)
        effects = np.where(masked, values - levels[:, None], 0.0).sum(0) / np.maximum(counts, 1)
    return np.where(counts > 0, effects, 0.0)


class TimeMasks(UniformSizeMasks):
    """MDLM's and MD4's estimator: a time ``t``, each token masked with probability ``t``, the masked tokens weighed.

    The continuous-time negative ELBO with the linear schedule is ``-E_t[(1 / t) sum_masked log p]``,
    of expectation ``-sum_M S(x; M)``. Each copy here is weighed by ``E[1 / t | M] = (L + 1) / M``
    (``t`` given ``M`` masked tokens is Beta(M + 1, L - M + 1)) instead of ``1 / t``: the same
    expectation, never more variance (Rao-Blackwell), so a comparison with it favours MDLM
    slightly. With ``low_discrepancy=True`` the ``score_masks`` times are ``(u + k) / score_masks`` for
    one uniform ``u`` (MDLM's low-discrepancy sampler); else independent. A copy that masks
    nothing counts 0 and still costs its pass.

    Parameters
    ----------
    score_masks : int
    return_std : bool, default=False
    low_discrepancy : bool, default=True

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import TimeMasks
    >>> masked, _ = TimeMasks(score_masks=4).copies(6, torch.Generator().manual_seed(0))
    >>> masked.shape
    torch.Size([4, 6])
    """

    def __init__(self, score_masks=None, return_std=False, low_discrepancy=True, *, n_masks="deprecated"):
        super().__init__(score_masks, return_std=return_std, n_masks=n_masks)
        self.low_discrepancy = low_discrepancy

    def copies(self, length, generator, word_ids=None):
        if self.low_discrepancy:
            u = torch.rand((), generator=generator, dtype=torch.float64)
            times = (u + torch.arange(self.score_masks, dtype=torch.float64)) / self.score_masks
        else:
            times = torch.rand(self.score_masks, generator=generator, dtype=torch.float64)
        masked = torch.rand((self.score_masks, length), generator=generator, dtype=torch.float64) < times[:, None]
        return masked, masked

    def draws(self, masked, values):
        """Each copy's ``((L + 1) / M) sum_masked log p`` (0 for an empty mask), shape (score_masks,)."""
        sizes = masked.sum(1).numpy()
        weights = (masked.shape[1] + 1) / np.maximum(sizes, 1)
        return np.where(sizes > 0, weights * np.asarray(values, dtype=np.float64), 0.0)


class ExhaustiveMasks(ScoringStrategy):
    """Every non-empty mask of the ``L`` tokens: ``sum_M S(x; M)`` exactly, no Monte Carlo error.

    The expectation that the sweep, the chain and the uniform-size estimator estimate, from all
    ``2**L - 1`` masks: cheaper than 128 Monte Carlo masks for ``L <= 7``.

    Parameters
    ----------
    max_tokens : int, default=12
        Longest text it enumerates (``2**12 - 1 = 4095`` copies); a longer one is a ``ValueError``
        raised before any text is scored.
    return_std : bool, default=False
        ``[value, 0.0]``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import ExhaustiveMasks
    >>> strategy = ExhaustiveMasks()
    >>> masked, _ = strategy.copies(3, None)
    >>> strategy.n_copies(3), float(strategy.reduce(masked, -masked.sum(1).double().numpy()))
    (7, -3.0)
    """

    def __init__(self, max_tokens=12, return_std=False):
        self.max_tokens = _check_draws(max_tokens, False, "ExhaustiveMasks", "max_tokens")
        self.return_std = return_std

    def n_copies(self, length, word_ids=None):
        if length > self.max_tokens:
            raise ValueError(
                f"ExhaustiveMasks enumerates 2**L - 1 masks: a text of {length} tokens is longer than max_tokens="
                f"{self.max_tokens} ({2**length - 1} copies); use a Monte Carlo strategy or raise max_tokens."
            )
        return 2**length - 1

    def copies(self, length, generator, word_ids=None):
        codes = torch.arange(1, 2**length)
        masked = (codes.unsqueeze(1) >> torch.arange(length)) & 1 == 1
        return masked, masked

    def draws(self, masked, values):
        """The exact value, shape (1,)."""
        return np.array([self.reduce(masked, values) if not self.return_std else self.reduce(masked, values)[0]])

    def reduce(self, masked, values, word_ids=None):
        sizes = masked.sum(1).numpy()
        length = masked.shape[1]
        counts = np.array([math.comb(length, m) for m in range(1, length + 1)], dtype=np.float64)
        per_size = np.bincount(sizes - 1, weights=np.asarray(values, np.float64) / sizes, minlength=length)
        return _with_std((per_size / counts).sum(), 0.0, self.return_std)


class SingleTokenMasks(ScoringStrategy):
    """Every token masked once, alone: the pseudo-log-likelihood ``L * S(x; 1)``.

    With ``metric="within_word_l2r"`` (Kauf and Ivanova, 2023), the copy that scores a token of
    a multi-token word also masks the word's tokens to its right (``_within_word_l2r_masks``);
    that needs the texts' word ids.

    Parameters
    ----------
    metric : {"original", "within_word_l2r"}, default="original"

    Examples
    --------
    >>> from skmpt.text.strategies import SingleTokenMasks
    >>> SingleTokenMasks().n_copies(10), SingleTokenMasks("within_word_l2r").needs_words
    (10, True)
    """

    #: Variants of the pseudo-log-likelihood.
    METRICS = ("original", "within_word_l2r")

    def __init__(self, metric="original"):
        validate_parameters({"metric": metric}, {"metric": [Options(self.METRICS)]}, type(self).__name__)
        self.metric = metric
        self.needs_words = metric == "within_word_l2r"

    def n_copies(self, length, word_ids=None):
        return length

    def copies(self, length, generator, word_ids=None):
        if self.needs_words:
            return _within_word_l2r_masks(word_ids)
        single = torch.eye(length, dtype=torch.bool)
        return single, single

    def reduce(self, masked, values, word_ids=None):
        return values.sum()


class TokenScores(SingleTokenMasks):
    """Each token's log-probability in the pseudo-log-likelihood: an array of shape (L,) per text.

    The copies of :class:`SingleTokenMasks` with the same ``metric``; their sum is the PLL.

    Examples
    --------
    >>> from skmpt.text.strategies import TokenScores
    >>> TokenScores().per_target
    True
    """

    per_target = True

    def reduce(self, masked, values, word_ids=None):
        return np.diagonal(values).copy()


class CurveTokenScores(CurveMasks):
    """Each token's log-probability averaged over the masks of each rate that mask it: (L, n_rates).

    The copies of :class:`CurveMasks`; a token that no mask of a rate covers gets NaN there
    (likely at low rates with few masks).

    Examples
    --------
    >>> from skmpt.text.strategies import CurveTokenScores
    >>> CurveTokenScores([0.5], score_masks=2).n_copies(10)
    2
    """

    per_target = True

    def reduce(self, masked, values, word_ids=None):
        values = values.reshape(len(self.rates), self.score_masks, -1)
        covered = ~np.isnan(values)
        counts = covered.sum(1)
        totals = np.where(covered, values, 0.0).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, totals / np.maximum(counts, 1), np.nan).T


def estimator_strategy(score_method=None, score_masks=None, *, return_std=False, weights=None, method="deprecated",
                       n_masks="deprecated"):
    """The strategy of an estimator of ``sum_M c_M S(x; M)`` named by ``score_method``, with ``score_masks`` draws.

    The names are those of :data:`skmpt.objectives.MPT_ESTIMATORS` offered on text
    (:data:`ESTIMATOR_METHODS`): ``"sweep"`` (:class:`SweepMasks`, the only one that takes
    ``weights``), ``"chain"`` (:class:`ChainMasks`), ``"antithetic"`` (:class:`ChainMasks` with
    antithetic orderings), ``"nested"`` (:class:`NestedMasks`), ``"uniform"``
    (:class:`UniformSizeMasks`), ``"stratified"`` (:class:`StratifiedSizeMasks`, LLaDA's),
    ``"balanced"`` (:class:`BalancedMasks`), ``"controlled"`` (:class:`ControlledMasks`), ``"time"``
    and ``"low_discrepancy"`` (:class:`TimeMasks`, i.i.d. or MDLM's times) and ``"exhaustive"``
    (:class:`ExhaustiveMasks`, which ignores ``score_masks``). Every ``score_method`` of the
    text side is read here.

    Parameters
    ----------
    score_method : str
    score_masks : int
        Draws: masks per size (sweep), orderings (chain, antithetic, nested), masks (the others).
    return_std : bool, default=False
    weights : callable or None, default=None
    method, n_masks
        Deprecated since 0.2, removed in 0.3: the old names of ``score_method`` and ``score_masks``.

    Examples
    --------
    >>> from skmpt.text.strategies import estimator_strategy
    >>> type(estimator_strategy("chain", 4)).__name__
    'ChainMasks'
    """
    score_method = renamed_parameter("method", method, "score_method", score_method, "estimator_strategy")
    score_masks = renamed_parameter("n_masks", n_masks, "score_masks", score_masks, "estimator_strategy")
    validate_parameters({"score_method": score_method}, {"score_method": [Options(ESTIMATOR_METHODS)]},
                        "estimator_strategy")
    if weights is not None and score_method != "sweep":
        raise ValueError("The schedule's weights (n_steps) need score_method='sweep', the estimator of every "
                         "S(x; M).")
    if score_method == "sweep":
        return SweepMasks(score_masks, return_std=return_std, weights=weights)
    if score_method == "exhaustive":
        return ExhaustiveMasks(return_std=return_std)
    return ESTIMATOR_METHODS[score_method](score_masks, return_std=return_std)


class WholeWordMasks(ScoringStrategy):
    """Another strategy's masks drawn over words instead of tokens: a masked word masks all its tokens.

    ``strategy`` draws its masks over a text's ``W`` words; each copy masks, and scores, every
    token of its masked words, and the strategy reduces with the number of masked words as the
    mask size: ``S(x; M)`` is then a mean log-probability per masked word (a word's is the sum
    of its tokens').

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.strategies import SweepMasks, WholeWordMasks
    >>> strategy = WholeWordMasks(SweepMasks(score_masks=1))
    >>> masked, targets = strategy.copies(3, torch.Generator().manual_seed(0), torch.tensor([0, 0, 1]))
    >>> masked.int().tolist()  # one word (here the first: 2 tokens), then both words
    [[1, 1, 0], [1, 1, 1]]
    """

    needs_words = True

    def __init__(self, strategy):
        if strategy.needs_words:
            raise ValueError(f"{type(strategy).__name__} draws over words already; it cannot be drawn over words.")
        self.strategy = strategy
        self.per_target = strategy.per_target  # per-token strategies keep one value per token of a masked word

    def n_copies(self, length, word_ids=None):
        return self.strategy.n_copies(int(word_ids.max()) + 1)

    def copies(self, length, generator, word_ids=None):
        members = torch.nn.functional.one_hot(word_ids).T.bool()  # (W, L): the tokens of each word
        masked, targets = self.strategy.copies(len(members), generator)
        expand = lambda words: (words.double() @ members.double()) > 0  # noqa: E731
        return expand(masked), expand(targets)

    def reduce(self, masked, values, word_ids=None):
        if self.per_target:
            return self.strategy.reduce(masked, values)
        first = torch.ones(len(word_ids), dtype=torch.bool)
        first[1:] = word_ids[1:] != word_ids[:-1]  # a word's first token stands for the word
        return self.strategy.reduce(masked[:, first], values)


#: The strategy class (or factory) of each estimator the text side offers, by its registry name.
_STRATEGIES = {
    "sweep": SweepMasks,
    "chain": ChainMasks,
    "uniform": UniformSizeMasks,
    "stratified": StratifiedSizeMasks,
    "balanced": BalancedMasks,
    "allocated": AllocatedSizeMasks,
    "adjusted": lambda score_masks, return_std=False: AllocatedSizeMasks(score_masks, return_std, control=True),
    "controlled": ControlledMasks,
    "nested": NestedMasks,
    "antithetic": lambda score_masks, return_std=False: ChainMasks(score_masks, return_std, antithetic=True),
    "time": lambda score_masks, return_std=False: TimeMasks(score_masks, return_std, low_discrepancy=False),
    "low_discrepancy": TimeMasks,
    "exhaustive": ExhaustiveMasks,
}

#: The estimators of ``sum_M S(x; M)`` the text side offers, by the name ``score_method`` gives them: a view of
#: :data:`skmpt.objectives.MPT_ESTIMATORS` (its entries marked ``text``), each with its strategy.
ESTIMATOR_METHODS = {name: _STRATEGIES[name] for name, estimator in MPT_ESTIMATORS.items() if estimator.text}

#: 0.1.0's public mask helpers, private since 0.2.0 (no user called them).
_PRIVATE_SINCE_0_2 = ("size_masks", "chain_masks", "within_word_l2r_masks", "stratified_sizes", "balanced_windows",
                      "token_effects")


def __getattr__(name):
    """0.1.0's public mask helpers, with a ``FutureWarning``: they are removed in 0.3.0."""
    if name not in _PRIVATE_SINCE_0_2:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"{__name__}.{name} is deprecated since 0.2.0 and will be removed in 0.3.0: it is a helper of the "
                  "strategies; build masks with a strategy's copies() instead.", FutureWarning, stacklevel=2)
    return globals()[f"_{name}"]
