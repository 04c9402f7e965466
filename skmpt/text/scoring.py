"""Scoring texts from masked copies: the masks of each estimator, and the loop that runs them.

A scoring strategy says, for a text of ``L`` own tokens, how many masked copies it makes
(``n_copies``), which (``copies``: boolean ``masked`` and ``targets`` of shape
(n_copies, L)) and how the summed target log-probabilities of its copies become the text's
result (``reduce``):

- :class:`CurveMasks`: ``score_masks`` random masks at each masking rate; ``S(x; M)`` per rate.
- :class:`SweepMasks`: ``score_masks`` random masks at every size ``M = 1..L``; their sum
  over ``M`` of ``S(x; M)``, the cumulative estimate of ``log p(x)``.
- :class:`ChainMasks`: ``score_masks`` random orderings, each token predicted from those
  revealed before it; the chain rule averaged over orderings.
- :class:`SingleTokenMasks`: every single-token mask; the pseudo-log-likelihood (or, with
  ``metric="within_word_l2r"``, PLL-word-l2r's copies).
- :class:`ChainSpread`: the chain's copies; the spread of its total across orderings.
- :class:`WholeWordMasks`: another strategy's masks drawn over words rather than tokens.

``CurveMasks``, ``SweepMasks`` and ``ChainMasks`` with ``return_std=True`` also give each
result's Monte Carlo standard error (``[value, error]`` per text). A strategy with
``needs_words`` is also given each text's word ids (``word_ids=`` of ``n_copies``, ``copies``
and ``reduce``); one with ``per_target`` (:class:`TokenScores`, :class:`CurveTokenScores`)
reduces each target's log-probability (:func:`copy_target_log_probs`) rather than the copies'
sums, and :func:`score_texts` returns a list of its per-text arrays.

:func:`score_texts` runs a strategy with a :class:`~skmpt.text.MaskedLMRunner`. A text's masks
come from a generator seeded by ``random_state`` and the text's token ids only, so they do not
depend on the batch, the group or the process that scores the text.
"""

import zlib
from functools import partial

import numpy as np
import torch
from sklearn.utils import check_random_state

from .._utils import chunk_budget
from ..distributed import current_context, sharded_map
from ..masks import mask_size_for_rate, masks_of_sizes, nested_masks, random_orderings
from ..objectives import mean_over_masks

__all__ = [
    "ChainMasks",
    "ChainSpread",
    "CurveMasks",
    "CurveTokenScores",
    "SingleTokenMasks",
    "SweepMasks",
    "TokenScores",
    "WholeWordMasks",
    "chain_masks",
    "copy_target_log_probs",
    "group_standard_errors",
    "score_texts",
    "single_masks",
    "size_masks",
    "spread_with_error",
    "within_word_l2r_masks",
]


def size_masks(sizes, length, generator):
    """Random masks of the given sizes over a text's ``length`` tokens; targets are the masked.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text import size_masks
    >>> masked, targets = size_masks([1, 3], 4, torch.Generator().manual_seed(0))
    >>> masked.sum(1).tolist(), bool((masked == targets).all())
    ([1, 3], True)
    """
    masked = masks_of_sizes(sizes, length, random_state=generator)
    return masked, masked


def chain_masks(n_orderings, length, generator):
    """Nested masks along random orderings; each copy's target is the token it adds.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text import chain_masks
    >>> masked, targets = chain_masks(2, 3, torch.Generator().manual_seed(0))
    >>> masked.shape, targets.sum(1).tolist()
    (torch.Size([6, 3]), [1, 1, 1, 1, 1, 1])
    """
    orderings = random_orderings(n_orderings, length, random_state=generator)
    masked = nested_masks(orderings).reshape(-1, length)
    targets = torch.zeros_like(masked)
    targets[torch.arange(len(masked)), orderings.reshape(-1)] = True
    return masked, targets


def single_masks(length, generator=None):
    """Every single-token mask: the pseudo-log-likelihood's copies.

    Examples
    --------
    >>> from skmpt.text import single_masks
    >>> single_masks(2)[0].tolist()
    [[True, False], [False, True]]
    """
    single = torch.eye(length, dtype=torch.bool)
    return single, single


class CurveMasks:
    """``score_masks`` random masks of ``M = round(rate * L)`` tokens per rate; ``S(x; M)`` per rate.

    Examples
    --------
    >>> from skmpt.text import CurveMasks
    >>> CurveMasks([0.2, 0.5], score_masks=3).n_copies(10)
    6
    """

    def __init__(self, rates, score_masks, return_std=False):
        self.rates, self.score_masks, self.return_std = rates, score_masks, return_std

    def n_copies(self, length):
        return len(self.rates) * self.score_masks

    def copies(self, length, generator):
        sizes = [mask_size_for_rate(float(rate), length) for rate in self.rates]
        return size_masks(np.repeat(sizes, self.score_masks), length, generator)

    def reduce(self, masked, sums):
        curve = mean_over_masks(sums, masked.sum(1).numpy(), self.score_masks)
        return np.stack([curve, group_standard_errors(masked, sums, self.score_masks)]) if self.return_std else curve


class SweepMasks:
    """``score_masks`` random masks at every size ``1..L``; ``sum_M S(x; M)``, the paper's estimator.

    Examples
    --------
    >>> from skmpt.text import SweepMasks
    >>> SweepMasks(score_masks=3).n_copies(10)
    30
    """

    def __init__(self, score_masks, return_std=False):
        self.score_masks, self.return_std = score_masks, return_std

    def n_copies(self, length):
        return self.score_masks * length

    def copies(self, length, generator):
        return size_masks(np.repeat(np.arange(1, length + 1), self.score_masks), length, generator)

    def reduce(self, masked, sums):
        total = mean_over_masks(sums, masked.sum(1).numpy(), self.score_masks).sum()
        if not self.return_std:
            return total
        # the sizes' estimates are independent: their variances add
        return np.array([total, np.sqrt(np.sum(group_standard_errors(masked, sums, self.score_masks) ** 2))])


class ChainMasks:
    """``score_masks`` random orderings, each token scored given those before it; their mean sum.

    Exact for a model whose conditionals come from one joint, whatever the ordering.

    Examples
    --------
    >>> from skmpt.text import ChainMasks
    >>> ChainMasks(score_masks=2).n_copies(10)
    20
    """

    def __init__(self, score_masks, return_std=False):
        self.score_masks, self.return_std = score_masks, return_std

    def n_copies(self, length):
        return self.score_masks * length

    def copies(self, length, generator):
        return chain_masks(self.score_masks, length, generator)

    def reduce(self, masked, sums):
        if not self.return_std:
            return sums.sum() / self.score_masks
        totals = sums.reshape(self.score_masks, -1).sum(1)  # one log p(x) per ordering
        return np.array([totals.mean(), totals.std(ddof=1) / np.sqrt(self.score_masks)])


class ChainSpread(ChainMasks):
    """The spread of the chain across ``score_masks`` random orderings, and its standard error.

    Each ordering gives ``sum_t log p(x_{s_t} | x_{s_<t})``, the chain rule along it. When the
    conditionals come from one joint every ordering gives ``log p(x)``: the spread (the standard
    deviation of the orderings' totals, ``ddof=1``) is 0. A positive spread measures how far the
    conditionals are from any joint. The standard error of the standard deviation ``s`` is the
    delta-method one, ``se(s^2) / (2 s)`` with ``se(s^2)`` from the fourth central moment.

    Examples
    --------
    >>> from skmpt.text import ChainSpread
    >>> ChainSpread(score_masks=4).n_copies(10)
    40
    """

    def reduce(self, masked, sums):
        return spread_with_error(sums.reshape(self.score_masks, -1).sum(1))


def spread_with_error(values):
    """``[s, se(s)]``: the standard deviation of ``values`` (``ddof=1``) and its delta-method standard error.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.text import spread_with_error
    >>> spread_with_error(np.array([1.0, 1.0, 1.0]))
    array([0., 0.])
    """
    n = len(values)
    deviations = values - values.mean()
    variance = deviations @ deviations / (n - 1)
    if variance <= 0:
        return np.zeros(2)
    fourth = np.mean(deviations**4)
    variance_of_variance = max(fourth - variance**2 * (n - 3) / (n - 1), 0.0) / n
    return np.array([np.sqrt(variance), np.sqrt(variance_of_variance) / (2 * np.sqrt(variance))])


def group_standard_errors(masked, sums, score_masks):
    """Standard error of each group's mean of ``sum / M`` over its ``score_masks`` masks (``ddof=1``).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from skmpt.text import group_standard_errors
    >>> masked = torch.tensor([[True, False], [False, True]])
    >>> group_standard_errors(masked, np.array([-1.0, -3.0]), 2)
    array([1.])
    """
    ratios = (sums / masked.sum(1).numpy()).reshape(-1, score_masks)
    return ratios.std(axis=1, ddof=1) / np.sqrt(score_masks)


class SingleTokenMasks:
    """Every token masked once, alone: the pseudo-log-likelihood ``L * S(x; 1)``.

    With ``metric="within_word_l2r"`` (Kauf and Ivanova, 2023), the copy that scores a token of
    a multi-token word also masks the word's tokens to its right (:func:`within_word_l2r_masks`);
    that needs the texts' word ids (``needs_words``).

    Examples
    --------
    >>> from skmpt.text import SingleTokenMasks
    >>> SingleTokenMasks().n_copies(10)
    10
    """

    def __init__(self, metric="original"):
        self.metric = metric
        self.needs_words = metric == "within_word_l2r"

    def n_copies(self, length, word_ids=None):
        return length

    def copies(self, length, generator, word_ids=None):
        return single_masks(length, generator) if word_ids is None else within_word_l2r_masks(word_ids)

    def reduce(self, masked, sums, word_ids=None):
        return sums.sum()


class TokenScores(SingleTokenMasks):
    """Each token's log-probability in the pseudo-log-likelihood: an array of shape (L,) per text.

    The copies of :class:`SingleTokenMasks` with the same ``metric``; their sum is the PLL.

    Examples
    --------
    >>> from skmpt.text import TokenScores
    >>> TokenScores().per_target
    True
    """

    per_target = True

    def reduce(self, masked, values, word_ids=None):
        return np.diagonal(values).copy()


class CurveTokenScores(CurveMasks):
    """Each token's log-probability averaged over the masks of each rate that mask it: (L, n_rates).

    The copies of :class:`CurveMasks`; a token that no mask of a rate covers gets NaN there
    (likely at low rates with few ``score_masks``).

    Examples
    --------
    >>> from skmpt.text import CurveTokenScores
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


def within_word_l2r_masks(word_ids):
    """PLL-word-l2r's copies: token ``j`` is the target, masked with its word's tokens to its right.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text import within_word_l2r_masks
    >>> masked, targets = within_word_l2r_masks(torch.tensor([0, 1, 1, 1, 2]))
    >>> masked.int().tolist()
    [[1, 0, 0, 0, 0], [0, 1, 1, 1, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 1]]
    """
    word_ids = torch.as_tensor(word_ids)
    length = len(word_ids)
    same_word = word_ids.unsqueeze(0) == word_ids.unsqueeze(1)
    right = torch.arange(length).unsqueeze(0) >= torch.arange(length).unsqueeze(1)
    return same_word & right, torch.eye(length, dtype=torch.bool)


class WholeWordMasks:
    """Another strategy's masks drawn over words instead of tokens: a masked word masks all its tokens.

    ``strategy`` (:class:`CurveMasks`, :class:`SweepMasks`, :class:`ChainMasks`, ...) draws its
    masks over a text's ``W`` words; each copy masks, and scores, every token of its masked
    words, and the strategy reduces with the number of masked words as the mask size: ``S(x;
    M)`` is then a mean log-probability per masked word (a word's is the sum of its tokens').

    Examples
    --------
    >>> import torch
    >>> from skmpt.text import SweepMasks, WholeWordMasks
    >>> strategy = WholeWordMasks(SweepMasks(score_masks=1))
    >>> masked, targets = strategy.copies(3, torch.Generator().manual_seed(0), torch.tensor([0, 0, 1]))
    >>> masked.int().tolist()  # one word (here the first: 2 tokens), then both words
    [[1, 1, 0], [1, 1, 1]]
    """

    needs_words = True

    def __init__(self, strategy):
        self.strategy = strategy
        # per-token strategies (CurveTokenScores) keep one value per token: every token of a masked word
        self.per_target = getattr(strategy, "per_target", False)

    def n_copies(self, length, word_ids=None):
        return self.strategy.n_copies(length if word_ids is None else int(word_ids.max()) + 1)

    def copies(self, length, generator, word_ids=None):
        members = torch.nn.functional.one_hot(word_ids).T.bool()  # (W, L): the tokens of each word
        masked, targets = self.strategy.copies(len(members), generator)
        expand = lambda words: (words.double() @ members.double()) > 0  # noqa: E731
        return expand(masked), expand(targets)

    def reduce(self, masked, sums, word_ids=None):
        if self.per_target:
            return self.strategy.reduce(masked, sums)
        first = torch.ones(len(word_ids), dtype=torch.bool)
        first[1:] = word_ids[1:] != word_ids[:-1]  # a word's first token stands for the word
        return self.strategy.reduce(masked[:, first], sums)


def score_texts(runner, encoded, strategy, *, random_state=None, verbose=0):
    """Score each text from its masked copies, a group of texts at a time, split over ranks.

    Under a launcher (a process group of ``torch.distributed``), each rank scores a shard of
    the texts, dealt by their work (copies times padded length) so the ranks get similar
    shares, and every rank returns all results in input order
    (:func:`skmpt.distributed.sharded_map`); without one the shard is every text.

    Parameters
    ----------
    runner : MaskedLMRunner
    encoded : EncodedTexts
    strategy : CurveMasks, SweepMasks, ChainMasks or SingleTokenMasks
        Or any object with ``n_copies(length)``, ``copies(length, generator)`` and
        ``reduce(masked, sums)``.
    random_state : int, RandomState instance or None, default=None
        Seeds the masks, with each text's tokens.
    verbose : int, default=0
        When > 0, a progress bar on the main rank counts the masked copies.

    Returns
    -------
    results : ndarray of shape (n_texts,) or (n_texts, n_results)
    """
    base = int(check_random_state(random_state).randint(2**32, dtype=np.uint64))
    context = current_context(runner.device)
    work = [strategy.n_copies(int(n)) * len(ids) for n, ids in zip(encoded.n_tokens, encoded.input_ids, strict=True)]
    show = bool(verbose) and context.is_main  # one bar, on the main rank, counting its share
    if getattr(strategy, "needs_words", False) and encoded.word_ids is None:
        raise ValueError(f"{type(strategy).__name__} needs the texts' word ids: encode them with word_ids=True.")

    def score_shard(indices):
        return _score_shard(runner, encoded.subset(indices), strategy, base, show)

    results = sharded_map(score_shard, len(encoded), context=context, costs=work)
    return list(results) if getattr(strategy, "per_target", False) else np.array(results)


def copy_target_log_probs(runner, encoded, copies, progress=None):
    """Run every copy; per text, each copy's target log-probabilities, NaN at the other tokens.

    Parameters
    ----------
    runner : MaskedLMRunner
    encoded : EncodedTexts
    copies : list of (masked, targets)
        Boolean tensors of shape (n_copies_i, L_i) per text.
    progress : tqdm bar or None, default=None
        Advances after each forward pass, by the copies it ran.

    Returns
    -------
    values : list of ndarray
        ``values[i]`` has shape (n_copies_i, L_i), float64.
    """
    results = [np.full(masked.shape, np.nan) for masked, _ in copies]
    with torch.inference_mode():
        for pieces in runner.batches(encoded, copies):
            values = runner.forward(encoded, copies, pieces, per_target=True).cpu().numpy()
            offset = n_copies = 0
            for i, start, stop in pieces:
                targets = copies[i][1][start:stop].numpy()
                block = results[i][start:stop]  # a view: filled copy by copy, left to right
                block[targets] = values[offset : offset + int(targets.sum())]
                offset += int(targets.sum())
                n_copies += stop - start
            if progress is not None:
                progress.update(n_copies)
    return results


def _score_shard(runner, encoded, strategy, base, show):
    """The results of the texts of ``encoded``, in its order; texts go shortest first, in
    groups holding at most :func:`~skmpt.get_working_memory`'s budget of mask entries
    (``2**24`` by default), so memory stays bounded however many texts are scored.
    """
    from tqdm.auto import tqdm

    order = sorted(range(len(encoded)), key=lambda i: len(encoded.input_ids[i]))
    results = [None] * len(encoded)
    # strategies over words (whole-word masks, PLL-word-l2r) are given each text's word ids
    words = encoded.word_ids if getattr(strategy, "needs_words", False) else [None] * len(encoded)
    extra = [{} if w is None else {"word_ids": w} for w in words]
    total = int(sum(strategy.n_copies(int(length), **kw) for length, kw in zip(encoded.n_tokens, extra, strict=True)))
    run = partial(copy_target_log_probs, runner) if getattr(strategy, "per_target", False) else runner.copy_log_probs
    budget = chunk_budget()
    with tqdm(total=total, desc="scoring", unit="copy", disable=not show) as progress:
        group, copies, load = [], [], 0
        for position, i in enumerate(order):
            ids, own = encoded.input_ids[i], encoded.content_positions[i]
            # Each text's masks depend only on the seed and its tokens (torch's CPU generator
            # keeps 32 bits of a seed: both are folded into 32).
            generator = torch.Generator().manual_seed(zlib.crc32(ids.numpy().astype(np.int64).tobytes(), base))
            copies.append(strategy.copies(len(own), generator, **extra[i]))
            group.append(i)
            load += copies[-1][0].numel()
            if load >= budget or position == len(order) - 1:
                sums = run(encoded.subset(group), copies, progress)
                for j, (masked, _), text_sums in zip(group, copies, sums, strict=True):
                    results[j] = strategy.reduce(masked, text_sums, **extra[j])
                group, copies, load = [], [], 0
    return results
