"""The MPT curve, its area and the cumulative log-marginal estimate of a masked language model.

A sentence ``x`` of ``L`` tokens (special and padding tokens never count) has the MPT curve
``S(x; M)``: the average, over uniformly random masks of exactly ``M`` of its tokens, of the mean
log-probability the model gives the masked tokens, each predicted from the unmasked ones.
Summed over ``M = 1..L`` it is the chain rule averaged over orderings, i.e. ``log p(x)`` for a
model whose conditionals come from one joint; the pseudo-log-likelihood is ``L * S(x; 1)``.

:class:`MLMCurveScorer` is split by concern: :mod:`._loading` (model and tokenizer, checked),
:mod:`._batching` (texts to ids, masked copies to bounded forward passes), :mod:`._scoring`
(each text's masks and its reduction) and :mod:`._training` (masked pre-training).
"""

from ._batching import language_model_head
from ._scorer import DEFAULT_MASK_RATES, MLMCurveScorer
from ._scoring import chain_masks, single_masks, size_masks

__all__ = ["MLMCurveScorer", "DEFAULT_MASK_RATES", "chain_masks", "language_model_head", "single_masks", "size_masks"]
