"""Masked copies of each text, their scores, and the per-text reductions of the MPT identity.

A text's masks come from a generator seeded by ``random_state`` and the text's token ids only, so
they do not depend on the batch, the group or the process that scores the text.
"""

import zlib

import numpy as np
import torch
from sklearn.utils import check_random_state

from .._distributed import current_context, sharded_map
from ..masks import masks_of_sizes, nested_masks, random_orderings

__all__ = ["ScoringMixin", "chain_masks", "single_masks", "size_masks"]


# Most mask entries (copies x tokens) held at once; texts are scored in groups under it.
_COPY_BUDGET = 2**24

def size_masks(sizes, length, generator):
    """Random masks of the given sizes over a text's ``length`` tokens; targets are the masked."""
    masked = masks_of_sizes(sizes, length, random_state=generator)
    return masked, masked


def chain_masks(n_orderings, length, generator):
    """Nested masks along random orderings; each copy's target is the token it adds."""
    orderings = random_orderings(n_orderings, length, random_state=generator)
    masked = nested_masks(orderings).reshape(-1, length)
    targets = torch.zeros_like(masked)
    targets[torch.arange(len(masked)), orderings.reshape(-1)] = True
    return masked, targets


def single_masks(length, generator=None):
    """Every single-token mask: the pseudo-log-likelihood's copies."""
    single = torch.eye(length, dtype=torch.bool)
    return single, single


class ScoringMixin:
    """Scoring of :class:`MLMCurveScorer`: a text's masked copies, run in bounded groups, reduced per text."""

    def _score_texts(self, encoded, make_copies, reduce, n_copies):
        """Score each text from its masked copies, a group of texts at a time, split over ranks.

        ``make_copies(length, generator)`` gives a text's ``(masked, targets)``, boolean of
        shape (n_copies, length) over its own tokens; ``reduce(masked, sums)`` turns the summed
        target log-probabilities of its copies into its result; ``n_copies(length)`` is how many
        copies ``make_copies`` makes (the progress bar's total and the work a text takes).

        Under a launcher (a process group of ``torch.distributed``), each rank scores a shard of
        the texts, dealt by their work (copies times padded length) so the ranks get similar
        shares, and every rank returns all results in input order
        (:func:`skmpt._distributed.sharded_map`); without one the shard is every text. A text's
        masks depend only on ``random_state`` and its tokens, so they are the same whichever
        rank, group or batch scores it.
        """
        base = int(check_random_state(self.random_state).randint(2**32, dtype=np.uint64))
        context = current_context(self.device_)
        work = [n_copies(int(n)) * len(ids) for n, ids in zip(encoded.n_tokens, encoded.input_ids, strict=True)]

        def score_shard(indices):
            return self._score_shard(encoded.subset(indices), make_copies, reduce, n_copies, base, context)

        return np.array(sharded_map(score_shard, len(encoded), context=context, costs=work))

    def _score_shard(self, encoded, make_copies, reduce, n_copies, base, context):
        """The results of the texts of ``encoded``, in its order; texts go shortest first, in
        groups holding at most ``_COPY_BUDGET`` mask entries, so memory stays bounded however
        many texts are scored.
        """
        from tqdm.auto import tqdm

        order = sorted(range(len(encoded)), key=lambda i: len(encoded.input_ids[i]))
        results = [None] * len(encoded)
        total = int(sum(n_copies(int(length)) for length in encoded.n_tokens))
        hidden = not self.verbose or not context.is_main  # one bar, on the main rank, counting its share
        with tqdm(total=total, desc="scoring", unit="copy", disable=hidden) as progress:
            group, copies, load = [], [], 0
            for position, i in enumerate(order):
                ids, own = encoded.input_ids[i], encoded.content_positions[i]
                # Each text's masks depend only on the seed and its tokens (torch's CPU generator
                # keeps 32 bits of a seed: both are folded into 32).
                generator = torch.Generator().manual_seed(zlib.crc32(ids.numpy().astype(np.int64).tobytes(), base))
                copies.append(make_copies(len(own), generator))
                group.append(i)
                load += copies[-1][0].numel()
                if load >= _COPY_BUDGET or position == len(order) - 1:
                    sums = self._copy_log_probs(encoded.subset(group), copies, progress)
                    for j, (masked, _), text_sums in zip(group, copies, sums, strict=True):
                        results[j] = reduce(masked, text_sums)
                    group, copies, load = [], [], 0
        return results
