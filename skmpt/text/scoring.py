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
- :class:`SingleTokenMasks`: every single-token mask; the pseudo-log-likelihood.

:func:`score_texts` runs a strategy with a :class:`~skmpt.text.MaskedLMRunner`. A text's masks
come from a generator seeded by ``random_state`` and the text's token ids only, so they do not
depend on the batch, the group or the process that scores the text.
"""

import zlib

import numpy as np
import torch
from sklearn.utils import check_random_state

from .._utils import chunk_budget
from ..distributed import current_context, sharded_map
from ..masks import mask_size_for_rate, masks_of_sizes, nested_masks, random_orderings
from ..objectives import mean_over_masks

__all__ = [
    "ChainMasks",
    "CurveMasks",
    "SingleTokenMasks",
    "SweepMasks",
    "chain_masks",
    "score_texts",
    "single_masks",
    "size_masks",
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

    def __init__(self, rates, score_masks):
        self.rates, self.score_masks = rates, score_masks

    def n_copies(self, length):
        return len(self.rates) * self.score_masks

    def copies(self, length, generator):
        sizes = [mask_size_for_rate(float(rate), length) for rate in self.rates]
        return size_masks(np.repeat(sizes, self.score_masks), length, generator)

    def reduce(self, masked, sums):
        return mean_over_masks(sums, masked.sum(1).numpy(), self.score_masks)


class SweepMasks:
    """``score_masks`` random masks at every size ``1..L``; ``sum_M S(x; M)``, the paper's estimator.

    Examples
    --------
    >>> from skmpt.text import SweepMasks
    >>> SweepMasks(score_masks=3).n_copies(10)
    30
    """

    def __init__(self, score_masks):
        self.score_masks = score_masks

    def n_copies(self, length):
        return self.score_masks * length

    def copies(self, length, generator):
        return size_masks(np.repeat(np.arange(1, length + 1), self.score_masks), length, generator)

    def reduce(self, masked, sums):
        return mean_over_masks(sums, masked.sum(1).numpy(), self.score_masks).sum()


class ChainMasks:
    """``score_masks`` random orderings, each token scored given those before it; their mean sum.

    Exact for a model whose conditionals come from one joint, whatever the ordering.

    Examples
    --------
    >>> from skmpt.text import ChainMasks
    >>> ChainMasks(score_masks=2).n_copies(10)
    20
    """

    def __init__(self, score_masks):
        self.score_masks = score_masks

    def n_copies(self, length):
        return self.score_masks * length

    def copies(self, length, generator):
        return chain_masks(self.score_masks, length, generator)

    def reduce(self, masked, sums):
        return sums.sum() / self.score_masks


class SingleTokenMasks:
    """Every token masked once, alone: the pseudo-log-likelihood ``L * S(x; 1)``.

    Examples
    --------
    >>> from skmpt.text import SingleTokenMasks
    >>> SingleTokenMasks().n_copies(10)
    10
    """

    def n_copies(self, length):
        return length

    def copies(self, length, generator):
        return single_masks(length, generator)

    def reduce(self, masked, sums):
        return sums.sum()


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

    def score_shard(indices):
        return _score_shard(runner, encoded.subset(indices), strategy, base, show)

    return np.array(sharded_map(score_shard, len(encoded), context=context, costs=work))


def _score_shard(runner, encoded, strategy, base, show):
    """The results of the texts of ``encoded``, in its order; texts go shortest first, in
    groups holding at most :func:`~skmpt.get_working_memory`'s budget of mask entries
    (``2**24`` by default), so memory stays bounded however many texts are scored.
    """
    from tqdm.auto import tqdm

    order = sorted(range(len(encoded)), key=lambda i: len(encoded.input_ids[i]))
    results = [None] * len(encoded)
    total = int(sum(strategy.n_copies(int(length)) for length in encoded.n_tokens))
    budget = chunk_budget()
    with tqdm(total=total, desc="scoring", unit="copy", disable=not show) as progress:
        group, copies, load = [], [], 0
        for position, i in enumerate(order):
            ids, own = encoded.input_ids[i], encoded.content_positions[i]
            # Each text's masks depend only on the seed and its tokens (torch's CPU generator
            # keeps 32 bits of a seed: both are folded into 32).
            generator = torch.Generator().manual_seed(zlib.crc32(ids.numpy().astype(np.int64).tobytes(), base))
            copies.append(strategy.copies(len(own), generator))
            group.append(i)
            load += copies[-1][0].numel()
            if load >= budget or position == len(order) - 1:
                sums = runner.copy_log_probs(encoded.subset(group), copies, progress)
                for j, (masked, _), text_sums in zip(group, copies, sums, strict=True):
                    results[j] = strategy.reduce(masked, text_sums)
                group, copies, load = [], [], 0
    return results
