"""Masked language models: the MPT curve, its area and the cumulative log-marginal estimate.

A sentence ``x`` of ``L`` tokens (special and padding tokens never count) has the MPT curve
``S(x; M)``: the average, over uniformly random masks of exactly ``M`` of its tokens, of the mean
log-probability the model gives the masked tokens, each predicted from the unmasked ones.
Summed over ``M = 1..L`` it is the chain rule averaged over orderings, i.e. ``log p(x)`` for a
model whose conditionals come from one joint; the pseudo-log-likelihood is ``L * S(x; 1)``.

Three seams, as the array side's model contract (:mod:`skmpt.models`):

- a **predictor** (:class:`MaskedPredictor`, :mod:`~skmpt.text.predictors`): any model that predicts masked
  tokens, one class per family (:class:`MaskedLMPredictor`, :class:`ModulePredictor`,
  :class:`ShiftedLogitsPredictor`, :class:`TimeConditionedPredictor`; your own is a subclass,
  checked by :func:`skmpt.testing.check_masked_predictor`); :func:`load_masked_lm` returns one;
- a **strategy** (:class:`~skmpt.text.strategies.ScoringStrategy`, :mod:`~skmpt.text.strategies`): which
  masked copies of a text to run and how their log-probabilities reduce to a score and its
  standard error (sweep, chain, uniform sizes, exhaustive, the PLL and its variants);
- the **runner** (:class:`MaskedLMRunner`): the one loop that batches the copies
  within the memory budget, calls the predictor, gathers the target log-probabilities and
  shares the texts out over processes.

Above them, the **budgeted estimator** (:class:`~skmpt.text.estimation.BudgetedEstimator`,
:mod:`~skmpt.text.estimation`) spends a budget of forward passes on ``log p(continuation |
context)``: exact where the masks can be enumerated, else the estimator named or chosen by a
pilot, with common random numbers across a question's choices and an adaptive stop. The lm-eval
model, the scorer's conditional scores and the conditional functions all call it. One unmasking
loop (:func:`~skmpt.text.unmasking.unmask`) serves the greedy check, generation and any-order
sampling.

Conditional scores (:func:`conditional_log_likelihood`), diffusion bounds and sampling
(:func:`masked_diffusion_bound`, :func:`sample_any_order`) and per-token and per-word tables
(:func:`scores_table`, :func:`word_sums`) are functions of a runner, encoded texts and a
strategy; :class:`~skmpt.MLMCurveScorer` is their scikit-learn face: ``transform(texts)``
is ``runner_.score(encode_texts(texts, ...), CurveMasks(mask_rates_, score_masks))``.

**Texts.** Texts may be a list, tuple or array of strings of shape (n,) or (n, 1), a pandas Series or
DataFrame (``str``, ``string[pyarrow]``/``string[python]`` or object columns), or a
``datasets.Dataset`` or ``IterableDataset``; from a DataFrame or dataset, the column is
``text_column``. A mapping from column names to texts is read only with ``text_column`` (its
keys are never scored), and an iterator or generator is read once, in its order. Refused with a
message that says what to pass: a single string, a ``datasets.DatasetDict`` (what
``load_dataset`` returns without ``split=``: pass ``ds["train"]``), a mapping without
``text_column`` and unordered collections (set, frozenset, dict views).
Every method rejects, with a ``ValueError`` naming the text's index: a text that is not a
string, is blank or is not valid Unicode (a lone surrogate), and a text that holds a special
token literally (``[CLS]``,
``[SEP]``, ``[PAD]``, ``[MASK]`` or the model's equivalents), which a masked LM would otherwise
mask and score as a word of the text or skip as a special one. Characters the tokenizer cannot
spell become its unknown token and are scored like any token. Texts longer than ``max_length``
are truncated with a ``UserWarning``; a text is cut to a bounded number of characters before it
is tokenised, so a single huge line costs what a long one does.

**Loading.** Loading is checked before any text is scored: a model that is not a masked LM (a causal LM such
as GPT-2, a ``BertModel`` without its head), given as an object, a configuration, a directory or
a name, is a ``ValueError``; so is a checkpoint that lacks weights transformers would initialise
at random (read from ``from_pretrained``'s loading info, unless ``allow_missing_weights=True``),
a directory without tokenizer files when the tokenizer is to be read from it, and a tokenizer
that can produce ids beyond the model's embedding. A string is a hub name only when it is not on
disk, has the form ``name`` or ``org/name`` and does not end in a file extension (``.bin``,
``.json``, ...); any other string (``./model``, ``../model``, ``a/b/c``, ``~/model``,
``C:\\model``) is a path, and one that does not exist is a ``ValueError`` naming it.

**Data parallelism.** Started by ``torchrun --nproc-per-node N`` or ``accelerate launch``,
:meth:`MLMCurveScorer.fit <skmpt.MLMCurveScorer.fit>` joins the launcher's process group
(``torch.distributed``; gloo on the CPU, NCCL with each
process on ``cuda:LOCAL_RANK``), and ``transform``, ``score_samples``,
``pseudo_log_likelihood`` and ``paper_area`` split the texts over the processes
(:func:`skmpt.distributed.sharded_map`); every process returns all results, in input order,
equal to a one-process run with the same ``random_state`` (a text's masks depend only on the
seed and its tokens). Every process must call the method, with the same texts (the processes
exchange their results). Only the main process shows progress bars. With ``max_steps > 0``,
``fit`` trains with ``DistributedDataParallel``, ``batch_size`` texts per step over all
processes, and can checkpoint and resume (``checkpoint_every``, ``checkpoint_dir``,
``resume``).
"""

from .conditional import compare_conditional_estimators, conditional_log_likelihood, encode_pairs, multiple_choice
from .diffusion import masked_diffusion_bound, noise_schedule, sample_any_order, schedule_weights
from .encoding import EncodedTexts, encode_texts
from .loading import load_masked_lm, load_tokenizer
from .outputs import scores_table, word_sums
from .predictors import (MaskedLMPredictor, MaskedPredictor, ModulePredictor, ShiftedLogitsPredictor,
                         TimeConditionedPredictor, as_predictor)
from .pretrained import load_antiberty
from .runner import MaskedLMRunner
from .scorer import DEFAULT_MASK_RATES, MLMCurveScorer
from .training import MaskedPretraining

__all__ = [
    "DEFAULT_MASK_RATES",
    "EncodedTexts",
    "MLMCurveScorer",
    "MaskedLMPredictor",
    "MaskedLMRunner",
    "MaskedPredictor",
    "MaskedPretraining",
    "ModulePredictor",
    "ShiftedLogitsPredictor",
    "TimeConditionedPredictor",
    "as_predictor",
    "compare_conditional_estimators",
    "conditional_log_likelihood",
    "encode_pairs",
    "encode_texts",
    "load_antiberty",
    "load_masked_lm",
    "load_tokenizer",
    "masked_diffusion_bound",
    "multiple_choice",
    "noise_schedule",
    "sample_any_order",
    "schedule_weights",
    "scores_table",
    "word_sums",
]
