"""Masked language models: the MPT curve, its area and the cumulative log-marginal estimate.

A sentence ``x`` of ``L`` tokens (special and padding tokens never count) has the MPT curve
``S(x; M)``: the average, over uniformly random masks of exactly ``M`` of its tokens, of the mean
log-probability the model gives the masked tokens, each predicted from the unmasked ones.
Summed over ``M = 1..L`` it is the chain rule averaged over orderings, i.e. ``log p(x)`` for a
model whose conditionals come from one joint; the pseudo-log-likelihood is ``L * S(x; 1)``.

:class:`MLMCurveScorer` (:mod:`.scorer`) is the scikit-learn estimator. Fitted, it holds a
:class:`MaskedLMRunner` (:mod:`.runner`: model, tokenizer, device, dtype, budgets, forward
passes) and calls plain parts: :func:`encode_texts` (:mod:`.encoding`), :func:`load_masked_lm`
(:mod:`.loading`), :func:`score_texts` with a scoring strategy (:mod:`.scoring`) and
:class:`MaskedPretraining` (:mod:`.training`). ``transform(texts)`` is
``score_texts(runner_, encode_texts(texts, ...), CurveMasks(mask_rates_, score_masks))``.

**Texts.** Texts may be a list, tuple or array of strings of shape (n,) or (n, 1), a pandas Series or
DataFrame (``str``, ``string[pyarrow]``/``string[python]`` or object columns), or a
``datasets.Dataset`` or ``IterableDataset``; from a DataFrame or dataset, the column is
``text_column``. A mapping from column names to texts is read only with ``text_column`` (its
keys are never scored), and an iterator or generator is read once, in its order. Refused with a
message that says what to pass: a single string, a ``datasets.DatasetDict`` (what
``load_dataset`` returns without ``split=``: pass ``ds["train"]``), a mapping without
``text_column`` and unordered collections (set, frozenset, dict views) (:func:`texts_of`).
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
``C:\\model``) is a path, and one that does not exist is a ``ValueError`` naming it
(:func:`check_local_path`).

**Data parallelism.** Started by ``torchrun --nproc-per-node N`` or ``accelerate launch``, :meth:`MLMCurveScorer.fit`
joins the launcher's process group (``torch.distributed``; gloo on the CPU, NCCL with each
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

from .._utils import BFLOAT16_TOLERANCE, DTYPES, auto_dtype, native_bfloat16
from .adapters import (CallablePredictor, check_mask_token_id, check_predictor, check_vocab_size, output_logits,
                       timestep_kwargs)
from .conditional import compare_conditional_estimators, conditional_log_likelihood, encode_pairs, multiple_choice
from .diffusion import masked_diffusion_bound, noise_schedule, sample_any_order, schedule_weights
from .encoding import EncodedTexts, check_max_length, encode_texts, texts_of
from .loading import check_local_path, load_masked_lm, load_tokenizer, model_max_length
from .pretrained import ANTIBERTY_VERSION, load_antiberty
from .outputs import METRICS, UNITS, MLMOutputsMixin, scores_table, word_sums
from .runner import MaskedLMRunner, language_model_head, target_log_probs
from .scorer import DEFAULT_MASK_RATES, MLMCurveScorer
from .scoring import (
    ChainMasks,
    ChainSpread,
    CurveMasks,
    CurveTokenScores,
    SingleTokenMasks,
    SweepMasks,
    TokenScores,
    WholeWordMasks,
    chain_masks,
    copy_target_log_probs,
    group_standard_errors,
    score_texts,
    single_masks,
    size_masks,
    spread_with_error,
    within_word_l2r_masks,
)
from .standard_errors import ChainWithError, SweepWithError, UniformSizeMasks
from .training import MaskedPretraining

__all__ = [
    "ANTIBERTY_VERSION",
    "BFLOAT16_TOLERANCE",
    "CallablePredictor",
    "ChainMasks",
    "ChainSpread",
    "ChainWithError",
    "CurveMasks",
    "CurveTokenScores",
    "DEFAULT_MASK_RATES",
    "DTYPES",
    "EncodedTexts",
    "METRICS",
    "MLMCurveScorer",
    "MLMOutputsMixin",
    "MaskedLMRunner",
    "MaskedPretraining",
    "SingleTokenMasks",
    "SweepMasks",
    "SweepWithError",
    "TokenScores",
    "UNITS",
    "UniformSizeMasks",
    "WholeWordMasks",
    "auto_dtype",
    "chain_masks",
    "check_local_path",
    "check_mask_token_id",
    "check_max_length",
    "check_predictor",
    "check_vocab_size",
    "compare_conditional_estimators",
    "conditional_log_likelihood",
    "copy_target_log_probs",
    "encode_pairs",
    "encode_texts",
    "group_standard_errors",
    "language_model_head",
    "load_antiberty",
    "load_masked_lm",
    "load_tokenizer",
    "masked_diffusion_bound",
    "model_max_length",
    "multiple_choice",
    "native_bfloat16",
    "noise_schedule",
    "output_logits",
    "sample_any_order",
    "schedule_weights",
    "score_texts",
    "scores_table",
    "single_masks",
    "size_masks",
    "spread_with_error",
    "target_log_probs",
    "texts_of",
    "timestep_kwargs",
    "within_word_l2r_masks",
    "word_sums",
]
