"""The MPT curve, its area and the cumulative log-marginal estimate of a masked language model.

A sentence ``x`` of ``L`` tokens (special and padding tokens never count) has the MPT curve
``S(x; M)``: the average, over uniformly random masks of exactly ``M`` of its tokens, of the mean
log-probability the model gives the masked tokens, each predicted from the unmasked ones.
Summed over ``M = 1..L`` it is the chain rule averaged over orderings, i.e. ``log p(x)`` for a
model whose conditionals come from one joint; the pseudo-log-likelihood is ``L * S(x; 1)``.

Every masked copy of a batch of sentences goes through the encoder together; copies are ordered
by length and cut into forward passes of at most ``batch_size`` copies and ``max_batch_tokens``
tokens, so memory stays bounded at ``L = 512``, and the language-model head runs only at the
positions whose probability is needed.
"""

import copy
import logging
import os
import time
import warnings
import zlib
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._base import resolve_device
from .masks import check_generator, mask_size_for_rate, masks_of_sizes, nested_masks, random_orderings

__all__ = ["MLMCurveScorer"]

logger = logging.getLogger(__name__)

#: Masking rates of the paper's curves (Fig. 5, Table 2): 1 % to 99 % in steps of 1 %.
DEFAULT_MASK_RATES = np.arange(1, 100) / 100

# Most mask entries (copies x tokens) held at once; texts are scored in groups under it.
_COPY_BUDGET = 2**24

# Attributes that hold the language-model head of the masked-LM classes in transformers
# (``cls`` for the BERT family, ``lm_head`` for RoBERTa, XLM-R, CamemBERT, ...). Other models
# are run whole and their logits read at the masked positions: slower, equally exact.
_HEAD_ATTRIBUTES = ("cls", "lm_head")


def _language_model_head(model):
    """``(encoder, head)`` when ``model`` is a base model plus one known head, else ``None``."""
    base = getattr(model, "base_model", None)
    children = {name: module for name, module in model.named_children() if module is not base}
    if base is None or base is model or len(children) != 1:
        return None
    name, head = next(iter(children.items()))
    return (base, head) if name in _HEAD_ATTRIBUTES else None


# File endings of model and tokenizer files: a name ending in one is a path, never a hub name.
_FILE_EXTENSIONS = (".bin", ".safetensors", ".json", ".txt", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".model",
                    ".gguf", ".onnx")

# Files from which AutoTokenizer builds a tokenizer; a directory with none of them holds no tokenizer.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.*", "merges.txt", "*.model")

# Options of ``from_pretrained`` that say where and how to fetch; they apply to the tokenizer too.
_HUB_OPTIONS = ("revision", "trust_remote_code", "local_files_only", "cache_dir", "token")

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}


def _looks_like_path(text):
    """Whether a string that is not on disk is a path rather than a hub name (``name`` or ``org/name``)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if text.lower().endswith(_FILE_EXTENSIONS):
        return True
    try:
        validate_repo_id(text)
    except HFValidationError:
        return True
    return False


def _check_local_path(source, name):
    """A path (not a hub name) must exist: say so before transformers takes it for a hub name.

    A string is a hub name only when it is not on disk, has the form ``name`` or ``org/name``
    (huggingface_hub's repository-id rules: no ``./``, ``../``, ``~``, leading ``/``, backslash
    or second ``/``) and does not end in a file extension such as ``.bin`` or ``.json``.
    """
    text = os.fspath(source)
    if os.path.exists(os.path.expanduser(text)):
        return
    if isinstance(source, os.PathLike) or _looks_like_path(text):
        where = "" if os.path.isabs(os.path.expanduser(text)) else f" (relative to {os.getcwd()!r})"
        raise ValueError(
            f"{name}={text!r} is a path that does not exist{where}; give a saved directory or a hub name of the "
            "form 'name' or 'org/name'."
        )


def _check_tokenizer_directory(source, name):
    """A local directory must hold tokenizer files: transformers would build an empty tokenizer."""
    directory = os.path.expanduser(os.fspath(source))
    if not os.path.isdir(directory):
        return
    import glob

    if not any(glob.glob(os.path.join(glob.escape(directory), pattern)) for pattern in _TOKENIZER_FILES):
        raise ValueError(
            f"No tokenizer was found in {name}={os.fspath(source)!r} (no tokenizer.json, tokenizer_config.json, "
            "vocab.* or *.model file); pass one with tokenizer= (--tokenizer on the command line): a tokenizer "
            "object, or the name or directory of one."
        )


def _check_masked_lm_class(config, what):
    """``config`` must have a masked-LM class in transformers (or declare one as remote code)."""
    import transformers

    remote = "AutoModelForMaskedLM" in (getattr(config, "auto_map", None) or {})
    if type(config) not in transformers.MODEL_FOR_MASKED_LM_MAPPING and not remote:
        raise ValueError(
            f"{what} is a {getattr(config, 'model_type', type(config).__name__)!r} model, which has no masked "
            "language-model class in transformers (AutoModelForMaskedLM); causal LMs such as GPT-2 cannot be "
            "scored by masking."
        )


def _check_masked_lm_object(model):
    """A transformers model object must be a masked LM with its head, not a base model or a causal LM."""
    import transformers

    if not isinstance(model, transformers.PreTrainedModel):
        return  # a user's module: documented to return ``.logits`` over the vocabulary
    mapping = transformers.MODEL_FOR_MASKED_LM_MAPPING
    if type(model.config) in mapping:
        classes = mapping[type(model.config)]
        ok = isinstance(model, classes if isinstance(classes, tuple) else (classes,))
    else:
        ok = "MaskedLM" in type(model).__name__
    if not ok:
        raise ValueError(
            f"model is a {type(model).__name__}, not a masked language model (no masked-LM head); give its "
            "...ForMaskedLM class, e.g. the one AutoModelForMaskedLM loads."
        )


def _embedding_size(model):
    """Number of token ids the model's input embedding holds, or ``None`` when unknown."""
    try:
        return int(model.get_input_embeddings().num_embeddings)
    except (AttributeError, NotImplementedError, TypeError):
        size = getattr(getattr(model, "config", None), "vocab_size", None) or getattr(model, "vocab_size", None)
        return None if size is None else int(size)


def _size_masks(sizes, length, generator):
    """Random masks of the given sizes over a text's ``length`` tokens; targets are the masked."""
    masked = masks_of_sizes(sizes, length, random_state=generator)
    return masked, masked


def _chain_masks(n_orderings, length, generator):
    """Nested masks along random orderings; each copy's target is the token it adds."""
    orderings = random_orderings(n_orderings, length, random_state=generator)
    masked = nested_masks(orderings).reshape(-1, length)
    targets = torch.zeros_like(masked)
    targets[torch.arange(len(masked)), orderings.reshape(-1)] = True
    return masked, targets


def _single_masks(length, generator=None):
    """Every single-token mask: the pseudo-log-likelihood's copies."""
    single = torch.eye(length, dtype=torch.bool)
    return single, single


def _area(curve, mask_rates, scale=512):
    """The paper's area of curves ``(n_texts, n_rates)``: ``scale * sum_r (r - r_prev) * S``."""
    return scale * curve @ np.diff(np.concatenate([[0.0], mask_rates]))


class _EncodedTexts:
    """Token ids of validated texts and where each text's own tokens sit."""

    def __init__(self, input_ids, content_positions):
        self.input_ids = input_ids  # list of 1-D long tensors, special tokens included
        self.content_positions = content_positions  # list of 1-D long tensors into input_ids

    def __len__(self):
        return len(self.input_ids)

    @property
    def n_tokens(self):
        return np.array([len(p) for p in self.content_positions])

    def subset(self, indices):
        return _EncodedTexts([self.input_ids[i] for i in indices], [self.content_positions[i] for i in indices])


class MLMCurveScorer(TransformerMixin, BaseEstimator):
    """MPT curve and cumulative log-marginal estimate of a masked language model.

    Scores texts with any masked language model of Hugging Face ``transformers``: the MPT curve
    ``S(x; M)`` at chosen masking rates (:meth:`transform`), its sum over every mask size
    ``M = 1..L`` (:meth:`score_samples`, the paper's estimate of ``log p(x)``), the
    pseudo-log-likelihood ``L * S(x; 1)`` (:meth:`pseudo_log_likelihood`) and the paper's area
    (:meth:`paper_area`). With ``max_steps > 0``, :meth:`fit` continues masked pre-training on
    the texts with a fixed masking rate or with uniformly random mask sizes.

    Masks follow the theory: exactly ``M`` of a sentence's own ``L`` tokens are replaced by the
    mask token; special and padding tokens are never masked nor counted, and nothing else is
    corrupted.

    It is a scikit-learn transformer: :meth:`transform` gives one column per masking rate
    (named by :meth:`get_feature_names_out`, pandas output with ``set_output``), and ``clone``
    shares the ``model`` and ``tokenizer`` objects instead of copying their weights (neither
    is ever modified: :meth:`fit` trains, moves or casts a copy).

    Texts may be a list, tuple or array of strings of shape (n,) or (n, 1), a pandas Series
    or DataFrame (``str``, ``string[pyarrow]``/``string[python]`` or object columns), or a
    ``datasets.Dataset`` or ``IterableDataset``; from a DataFrame or dataset, the column is
    ``text_column``. Every method rejects, with a ``ValueError`` naming the text's index:
    a text that is not a string or is blank, and a text that holds a special token literally
    (``[CLS]``, ``[SEP]``, ``[PAD]``, ``[MASK]`` or the model's equivalents), which a masked LM
    would otherwise mask and score as a word of the text or skip as a special one. Characters
    the tokenizer cannot spell become its unknown token and are scored like any token. Texts
    longer than ``max_length`` are truncated with a ``UserWarning``.

    Loading is checked before any text is scored: a model that is not a masked LM (a causal
    LM such as GPT-2, a ``BertModel`` without its head), given as an object, a configuration,
    a directory or a name, is a ``ValueError``; so is a checkpoint that lacks weights
    transformers would initialise at random (read from ``from_pretrained``'s loading info,
    unless ``allow_missing_weights=True``), a directory without tokenizer files when the
    tokenizer is to be read from it, and a tokenizer that can produce ids beyond the model's
    embedding. A string is a hub name only when it is not on disk, has the form ``name`` or
    ``org/name`` and does not end in a file extension (``.bin``, ``.json``, ...); any other
    string (``./model``, ``../model``, ``a/b/c``, ``~/model``, ``C:\\model``) is a path, and
    one that does not exist is a ``ValueError`` naming it.

    Progress goes to ``tqdm`` bars (``verbose > 0``) and messages to the ``skmpt`` logger.

    Read more in the :ref:`User Guide <mlm_curves>`.

    Parameters
    ----------
    model : str, path, transformers.PreTrainedModel or transformers.PretrainedConfig, \
            default="bert-base-uncased"
        A name or local directory for ``AutoModelForMaskedLM.from_pretrained`` (a name not on
        disk is fetched from the Hugging Face hub, the only time this class uses the network), a
        masked-LM object, or a configuration, which builds a randomly initialised model (the
        paper's "random init." row) seeded by ``random_state``. A ``torch.nn.Module`` that is
        not a transformers model is used as a masked LM: called with ``input_ids`` and
        ``attention_mask``, it returns ``.logits`` over the tokenizer's vocabulary.
    tokenizer : str, path, tokenizer object or None, default=None
        The tokenizer, or where ``AutoTokenizer.from_pretrained`` finds it; ``None`` loads it
        from ``model`` when that is a name or directory, or from the model object's
        ``name_or_path``. It must have a mask token and a padding token.
    mask_rates : array-like of float in (0, 1] or None, default=None
        Masking rates of :meth:`transform` and :meth:`paper_area`; a rate ``r`` masks
        ``M = round(r * L)`` tokens, at least one. ``None`` is 0.01, 0.02, ..., 0.99 as in the
        paper.
    n_masks : int, default=10
        Random masks per mask size (sweep and :meth:`transform`) or random orderings (chain).
    score_method : {"sweep", "chain"}, default="sweep"
        Estimator of :meth:`score_samples`. ``"sweep"`` averages ``n_masks`` random masks at
        every size ``M = 1..L`` (the paper's estimator, ``n_masks * L`` masked copies per text).
        ``"chain"`` sums, along ``n_masks`` random orderings, each token's log-probability
        given the tokens revealed before it (``L`` copies per ordering): exact for a model
        whose conditionals come from one joint, whatever the ordering.
    batch_size : int, default=64
        Most masked copies in one forward pass; in :meth:`fit`, texts per optimisation step.
    max_batch_tokens : int, default=16384
        Most tokens (copies times padded length) in one forward pass: bounds memory whatever
        the sentence length. A training step larger than this accumulates gradients.
    max_length : int, default=512
        Longest tokenised text, special tokens included; longer texts are truncated with a
        warning. Also capped by the model's position embeddings.
    mask_rate : float in (0, 1] or "uniform", default=0.15
        Masking used by :meth:`fit` when ``max_steps > 0``: a fixed rate (``round(rate * L)``
        tokens), or ``"uniform"`` for a uniformly random size in ``1..L`` per text, whose
        objective ``(L / M) * sum log p`` is unbiased for ``log p(x)``.
    max_steps : int, default=0
        Optimisation steps of masked pre-training in :meth:`fit`; 0 only loads the model.
    learning_rate : float, default=5e-5
        Step size of AdamW in :meth:`fit`.
    text_column : str or None, default=None
        Column holding the texts when the input is a ``datasets.Dataset`` or a pandas
        DataFrame; ``None`` picks ``"text"`` or ``"sentence"``, or the only string column.
    device : str or torch.device, default="auto"
        ``"auto"`` is CUDA when available, else the CPU. With ``dtype="auto"`` on CUDA the
        encoder runs under ``torch.autocast`` (bfloat16 where supported).
    dtype : {"auto", "float32", "bfloat16", "float16", "float64"}, torch.dtype or None, \
            default="auto"
        Dtype the model runs in, passed to ``from_pretrained``; a model object or a model
        built from a configuration is cast as a copy. ``"auto"`` or ``None`` keeps the model's
        own (the checkpoint's). Whatever it is, log-probabilities are computed and summed in
        float64 from the logits.
    model_kwargs : dict or None, default=None
        Further options of ``from_pretrained`` (``revision``, ``trust_remote_code``,
        ``local_files_only``, ``cache_dir``, ``token``, ...), for the configuration and the
        model; those that say where to fetch also reach ``AutoTokenizer.from_pretrained``
        (``revision`` only when the tokenizer comes from the model's source). ``dtype`` has
        its own parameter.
    allow_missing_weights : bool, default=False
        Accept a checkpoint that lacks weights of the masked LM (a base model saved without
        its head), which transformers then initialises at random. ``False`` makes it an error
        naming the missing weights.
    random_state : int, RandomState instance or None, default=None
        Seeds the masks (each text's masks depend only on this seed and its tokens, so a
        text's score does not depend on which texts it is scored with), the training masks
        and the random initialisation from a configuration.
    verbose : int, default=0
        When > 0, show ``tqdm`` progress bars: scoring advances after each forward pass (by
        the masked copies it held); training shows the steps and the loss. The training loss
        is also logged (INFO) to the ``skmpt`` logger whatever ``verbose``.

    Attributes
    ----------
    model_ : transformers.PreTrainedModel
        The masked language model, in evaluation mode on ``device_``. A model object given as
        ``model`` is used as it is unless :meth:`fit` trains it, moves it to another device or
        casts it to ``dtype``, in which case ``model_`` is one copy.
    tokenizer_ : transformers tokenizer
    device_ : torch.device
    max_length_ : int
        ``max_length`` capped by the model's position embeddings.
    mask_rates_ : ndarray of shape (n_rates,)
    history_ : list of dict
        One entry per optimisation step of :meth:`fit`: ``step``, ``loss`` (negative MPT
        objective per token, nats) and ``seconds``.

    See Also
    --------
    MaskedPPCA : a tractable model whose MPT curve integrates to its exact log-marginal.

    Notes
    -----
    ``score_samples`` needs about ``n_masks * L`` forward copies per text of ``L`` tokens with
    the sweep; the chain needs ``n_masks * L`` as well but has lower variance for consistent
    models. :meth:`pseudo_log_likelihood` needs ``L``.

    Examples
    --------
    >>> import tempfile
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt import MLMCurveScorer
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> texts = load_wordnet_sentences()[:200]
    >>> tokenizer = make_wordpiece_tokenizer(texts, vocab_size=300)
    >>> config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=64)
    >>> scorer = MLMCurveScorer(config, tokenizer=tokenizer, mask_rates=[0.15, 0.5],
    ...                         n_masks=2, random_state=0).fit()
    >>> scorer.transform(texts[:3]).shape
    (3, 2)
    >>> scorer.get_feature_names_out()
    array(['S@0.15', 'S@0.5'], dtype=object)
    >>> bool(scorer.score(texts[:3]) < 0)
    True
    """

    _parameter_constraints: dict = {
        # model and tokenizer take objects of transformers, checked when fit loads them
        "model": "no_validation",
        "tokenizer": "no_validation",
        "mask_rates": [None, "array-like"],
        "n_masks": [Interval(Integral, 1, None, closed="left")],
        "score_method": [StrOptions({"sweep", "chain"})],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "max_batch_tokens": [Interval(Integral, 1, None, closed="left")],
        "max_length": [Interval(Integral, 2, None, closed="left")],
        "mask_rate": [StrOptions({"uniform"}), Interval(Real, 0, 1, closed="right")],
        "max_steps": [Interval(Integral, 0, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "text_column": [None, str],
        "device": [str, torch.device],
        "dtype": [None, StrOptions({"auto", *_DTYPES}), torch.dtype],
        "model_kwargs": [None, dict],
        "allow_missing_weights": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        model="bert-base-uncased",
        *,
        tokenizer=None,
        mask_rates=None,
        n_masks=10,
        score_method="sweep",
        batch_size=64,
        max_batch_tokens=16384,
        max_length=512,
        mask_rate=0.15,
        max_steps=0,
        learning_rate=5e-5,
        text_column=None,
        device="auto",
        dtype="auto",
        model_kwargs=None,
        allow_missing_weights=False,
        random_state=None,
        verbose=0,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.mask_rates = mask_rates
        self.n_masks = n_masks
        self.score_method = score_method
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.max_length = max_length
        self.mask_rate = mask_rate
        self.max_steps = max_steps
        self.learning_rate = learning_rate
        self.text_column = text_column
        self.device = device
        self.dtype = dtype
        self.model_kwargs = model_kwargs
        self.allow_missing_weights = allow_missing_weights
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ loading

    def _check_mask_rates(self):
        if self.mask_rates is None:
            return DEFAULT_MASK_RATES.copy()
        rates = np.asarray(self.mask_rates, dtype=float)
        if rates.ndim != 1 or rates.size == 0:
            raise ValueError(f"mask_rates must be a non-empty 1-D sequence of rates; got shape {rates.shape}.")
        bad = ~((rates > 0) & (rates <= 1))
        if bad.any():
            raise ValueError(f"mask_rates must lie in (0, 1]; got {rates[bad][0]!r}.")
        if np.any(np.diff(rates) <= 0):
            raise ValueError("mask_rates must be strictly increasing.")
        return rates

    def _dtype(self):
        """The torch dtype asked for, or ``None`` for the model's own."""
        if self.dtype is None or isinstance(self.dtype, torch.dtype):
            return self.dtype
        return None if self.dtype == "auto" else _DTYPES[self.dtype]

    def _model_kwargs(self):
        kwargs = dict(self.model_kwargs or {})
        for key in ("dtype", "torch_dtype", "output_loading_info"):
            if key in kwargs:
                hint = "use the dtype parameter" if key != "output_loading_info" else "it is set by MLMCurveScorer"
                raise ValueError(f"model_kwargs may not hold {key!r}: {hint}.")
        return kwargs

    def _load_model(self, device):
        """The model on ``device`` (in ``dtype``) and its tokenizer; cheap checks come first."""
        import transformers

        model, dtype, kwargs = self.model, self._dtype(), self._model_kwargs()
        if isinstance(model, (str, os.PathLike)):
            _check_local_path(model, "model")
            config = transformers.AutoConfig.from_pretrained(model, **kwargs)
            _check_masked_lm_class(config, f"model={os.fspath(model)!r}")
            source = model
        elif isinstance(model, transformers.PretrainedConfig):
            _check_masked_lm_class(model, "model")
            source = None
        elif isinstance(model, torch.nn.Module):
            _check_masked_lm_object(model)
            source = getattr(getattr(model, "config", None), "name_or_path", None) or None
        else:
            raise ValueError(
                "model must be a name or directory for AutoModelForMaskedLM.from_pretrained, a masked "
                f"language model object or a transformers configuration; got {type(model).__name__}."
            )
        tokenizer = self._load_tokenizer(source, kwargs)  # before the weights: it fails faster
        if isinstance(model, (str, os.PathLike)):
            loaded = self._from_pretrained(model, dtype, kwargs)
        elif isinstance(model, transformers.PretrainedConfig):
            seed = int(check_random_state(self.random_state).randint(2**31 - 1))
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                # from_config writes its dtype into the configuration: give it a copy of the user's
                loaded = transformers.AutoModelForMaskedLM.from_config(copy.deepcopy(model))
        else:
            parameters = list(model.parameters())
            needs_copy = (
                self.max_steps > 0
                or any(p.device != device for p in parameters)
                or (dtype is not None and any(p.is_floating_point() and p.dtype != dtype for p in parameters))
            )
            # one copy when training, moving or casting: the user's object is never modified
            loaded = copy.deepcopy(model) if needs_copy else model
        size = _embedding_size(loaded)
        largest = max(max(tokenizer.get_vocab().values()), len(tokenizer) - 1)
        if size is not None and largest >= size:
            raise ValueError(
                f"The tokenizer can produce token ids up to {largest} but the model's embedding holds {size} "
                f"(ids 0..{size - 1}): they do not belong together."
            )
        loaded = loaded.to(device=device, dtype=dtype) if dtype is not None else loaded.to(device)
        logger.info("Loaded %s (%s) on %s.", type(loaded).__name__, source or "object", device)
        return loaded.eval(), tokenizer

    def _from_pretrained(self, model, dtype, kwargs):
        """``AutoModelForMaskedLM.from_pretrained``, refusing weights it would initialise at random."""
        import transformers

        loaded, info = transformers.AutoModelForMaskedLM.from_pretrained(
            model, dtype="auto" if dtype is None else dtype, output_loading_info=True, **kwargs
        )
        # transformers initialises missing weights at random (and logs its load report): refuse that
        missing = sorted(info["missing_keys"]) + sorted(str(k) for k in info["mismatched_keys"])
        if missing and not self.allow_missing_weights:
            raise ValueError(
                f"model={os.fspath(model)!r} lacks {len(missing)} weights of its masked LM, which transformers "
                f"would initialise at random: {', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}. "
                "Is it a base model without its masked-LM head? Set allow_missing_weights=True to accept random "
                "weights, or build a random model from a configuration."
            )
        return loaded

    def _load_tokenizer(self, source, kwargs):
        """The tokenizer given, or loaded from ``tokenizer`` or else the model's ``source``."""
        import transformers

        tokenizer, name = self.tokenizer, "tokenizer"
        if tokenizer is None:
            if source is None:
                raise ValueError(
                    "tokenizer=None needs a model given by name or directory; pass tokenizer= with a "
                    "configuration or a model object that has no name_or_path."
                )
            tokenizer, name = source, "model"
        if isinstance(tokenizer, (str, os.PathLike)):
            _check_local_path(tokenizer, name)
            _check_tokenizer_directory(tokenizer, name)
            hub = {key: kwargs[key] for key in _HUB_OPTIONS if key in kwargs}
            if name == "tokenizer":  # the model's revision is not the tokenizer's
                hub.pop("revision", None)
            source_name, tokenizer = tokenizer, transformers.AutoTokenizer.from_pretrained(tokenizer, **hub)
            if len(tokenizer) <= len(set(tokenizer.all_special_ids)):
                raise ValueError(
                    f"No tokenizer was found in {name}={os.fspath(source_name)!r}: what loaded holds only its "
                    f"{len(tokenizer)} special tokens. Pass one with tokenizer= (--tokenizer on the command line)."
                )
        if getattr(tokenizer, "mask_token_id", None) is None:
            raise ValueError(f"The tokenizer ({type(tokenizer).__name__}) has no mask token; a masked LM needs one.")
        if getattr(tokenizer, "pad_token_id", None) is None:
            raise ValueError(f"The tokenizer ({type(tokenizer).__name__}) has no padding token.")
        return tokenizer

    def _max_length(self):
        limits = [self.max_length]
        positions = getattr(getattr(self.model_, "config", None), "max_position_embeddings", None)
        if positions:
            # RoBERTa-style models reserve the first padding_idx + 1 positions.
            offset = 0
            if getattr(self.model_.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
                offset = self.model_.config.pad_token_id + 1
            limits.append(positions - offset)
        model_max = getattr(self.tokenizer_, "model_max_length", None)
        if model_max is not None and model_max < 10**6:
            limits.append(model_max)
        return int(min(limits))

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X=None, y=None):
        """Load the model and tokenizer; with ``max_steps > 0``, continue MPT on ``X``.

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or None, default=None
            Training texts; needed only when ``max_steps > 0``.
        y : None
            Ignored.

        Returns
        -------
        self : MLMCurveScorer
        """
        self.device_ = resolve_device(self.device)
        self.mask_rates_ = self._check_mask_rates()
        self.model_, self.tokenizer_ = self._load_model(self.device_)
        self.max_length_ = self._max_length()
        self.history_ = []
        if self.max_steps > 0:
            if X is None:
                raise ValueError("fit with max_steps > 0 needs training texts X.")
            self._pretrain(self._encode(X))
        elif X is not None:
            self._encode(X)  # validate what was given
        return self

    # ------------------------------------------------------------------ texts

    def _texts(self, X):
        """The texts of ``X`` as a list, whatever container holds them."""
        try:
            import datasets
        except ImportError:  # pragma: no cover - datasets is part of the text extra
            datasets = None
        if datasets is not None and isinstance(X, (datasets.Dataset, datasets.IterableDataset)):
            return self._dataset_texts(X, datasets)
        if hasattr(X, "columns") and hasattr(X, "dtypes"):  # a DataFrame
            from pandas.api.types import is_string_dtype

            column = self._text_column(list(X.columns), lambda c: is_string_dtype(X[c]))
            return list(X[column])
        if isinstance(X, str):
            raise ValueError("Expected a sequence of texts, got a single string; wrap it in a list.")
        if not isinstance(X, np.ndarray):
            try:
                X = list(X)
            except TypeError:
                raise ValueError(f"Expected a sequence of texts; got {type(X).__name__}.") from None
            if not any(isinstance(x, (list, tuple, np.ndarray)) for x in X):
                return X
            X = np.asarray(X, dtype=object)  # rows of one text each, shape (n, 1)
        if X.ndim == 2 and X.shape[1] == 1:
            X = X[:, 0]
        if X.ndim != 1:
            raise ValueError(f"Expected a 1-D array of texts or a column of shape (n, 1); got shape {X.shape}.")
        return X.tolist()

    def _dataset_texts(self, X, datasets):
        """Texts of a ``datasets.Dataset`` or ``IterableDataset``: one column, read in full."""
        columns, features = X.column_names, X.features
        if columns is None:  # an IterableDataset that does not know its columns before it is read
            columns = list(next(iter(X)))

        def is_text(column):
            feature = None if features is None else features.get(column)
            return isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")

        column = self._text_column(columns, is_text)
        if isinstance(X, datasets.Dataset):
            return list(X[column])
        return [row[column] for row in X]

    def _text_column(self, columns, is_text):
        if self.text_column is not None:
            if self.text_column not in columns:
                raise ValueError(f"text_column={self.text_column!r} is not a column; the columns are {columns}.")
            return self.text_column
        for name in ("text", "sentence"):
            if name in columns:
                return name
        text_columns = [c for c in columns if is_text(c)]
        if len(text_columns) != 1:
            raise ValueError(f"Cannot tell which column holds the texts among {columns}; set text_column.")
        return text_columns[0]

    def _encode(self, X, names=None):
        """Validate and tokenise texts: ids with special tokens, and the positions of the text's own.

        ``names[i]`` names text ``i`` in errors (default ``"Text i"``; the command line gives line
        numbers).
        """
        texts = self._texts(X)
        if not texts:
            raise ValueError("Expected at least one text; got an empty sequence.")
        names = [f"Text {index}" for index in range(len(texts))] if names is None else names
        for name, text in zip(names, texts, strict=True):
            if not isinstance(text, str):
                raise ValueError(f"{name} is not a string but {type(text).__name__}: {text!r}.")
            if not text.strip():
                raise ValueError(f"{name} is empty.")
        tokenizer = self.tokenizer_
        plain = tokenizer(texts, add_special_tokens=False)["input_ids"]
        # A literal special token would be masked and scored as a word of the text, or silently
        # skipped as a special one, depending on the tokenizer; neither is the text's likelihood.
        # Unknown pieces are what the tokenizer makes of text it cannot spell: they stay.
        specials = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
        for name, ids in zip(names, plain, strict=True):
            found = [i for i in ids if i in specials]
            if found:
                raise ValueError(
                    f"{name} contains the special token {tokenizer.convert_ids_to_tokens(found[0])!r}; texts "
                    "holding special tokens literally ([CLS], [SEP], [PAD], [MASK], ...) are rejected: remove them."
                )
        n_long = sum(len(ids) + tokenizer.num_special_tokens_to_add() > self.max_length_ for ids in plain)
        if n_long:
            warnings.warn(
                f"{n_long} of {len(texts)} texts are longer than max_length={self.max_length_} tokens "
                "and were truncated.",
                UserWarning,
                stacklevel=3,
            )
        encoded = tokenizer(texts, truncation=True, max_length=self.max_length_, return_special_tokens_mask=True)
        input_ids, positions = [], []
        for name, text, ids, special in zip(
            names, texts, encoded["input_ids"], encoded["special_tokens_mask"], strict=True
        ):
            ids = torch.as_tensor(ids, dtype=torch.long)
            own = (torch.as_tensor(special) == 0) & (ids != tokenizer.pad_token_id)
            if not own.any():
                raise ValueError(f"{name} has no tokens of its own after tokenisation: {text!r}.")
            input_ids.append(ids)
            positions.append(own.nonzero().squeeze(1))
        return _EncodedTexts(input_ids, positions)

    # ------------------------------------------------------------------ forward passes

    def _batches(self, encoded, copies):
        """Cut masked copies into forward passes, shortest texts first.

        ``copies[i]`` is ``(masked, targets)``: two boolean tensors of shape (n_copies_i, L_i)
        over text ``i``'s own tokens. Yields ``pieces``: lists of ``(i, start, stop)``.
        """
        order = sorted(range(len(encoded)), key=lambda i: len(encoded.input_ids[i]))
        batch, count = [], 0
        for i in order:
            length = len(encoded.input_ids[i])
            capacity = max(1, min(self.batch_size, self.max_batch_tokens // length))
            start, total = 0, len(copies[i][0])
            while start < total:
                if count >= capacity:  # the batch's padded length is now this text's
                    yield batch
                    batch, count = [], 0
                stop = min(total, start + capacity - count)
                batch.append((i, start, stop))
                count += stop - start
                start = stop
        if batch:
            yield batch

    def _forward(self, encoded, copies, pieces):
        """Summed log-probability of each copy's target tokens, for one forward pass."""
        device, tokenizer = self.device_, self.tokenizer_
        width = max(len(encoded.input_ids[i]) for i, _, _ in pieces)
        rows, lengths, target_rows, target_cols, target_ids = [], [], [], [], []
        offset = 0
        for i, start, stop in pieces:
            ids, own = encoded.input_ids[i], encoded.content_positions[i]
            masked, targets = copies[i][0][start:stop], copies[i][1][start:stop]
            block = torch.full((stop - start, width), tokenizer.pad_token_id, dtype=torch.long)
            block[:, : len(ids)] = ids
            columns = block[:, own]
            columns[masked] = tokenizer.mask_token_id
            block[:, own] = columns
            rows.append(block)
            lengths.append(torch.full((stop - start,), len(ids)))
            r, c = targets.nonzero(as_tuple=True)
            target_rows.append(r + offset)
            target_cols.append(own[c])
            target_ids.append(ids[own[c]])
            offset += stop - start
        input_ids = torch.cat(rows).to(device)
        attention_mask = (torch.arange(width) < torch.cat(lengths).unsqueeze(1)).long().to(device)
        target_rows = torch.cat(target_rows).to(device)
        target_cols = torch.cat(target_cols).to(device)
        target_ids = torch.cat(target_ids).to(device)
        split = _language_model_head(self.model_)
        with self._autocast():
            if split is not None:
                encoder, head = split
                hidden = encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
                logits = head(hidden[target_rows, target_cols])
            else:
                logits = self.model_(input_ids=input_ids, attention_mask=attention_mask).logits
                logits = logits[target_rows, target_cols]
        log_probs = torch.log_softmax(logits.to(torch.float64), dim=-1)
        token_log_probs = log_probs.gather(1, target_ids.unsqueeze(1)).squeeze(1)
        sums = torch.zeros(offset, dtype=torch.float64, device=device)
        return sums.index_add(0, target_rows, token_log_probs)

    def _autocast(self):
        """bfloat16 (or float16) autocast on CUDA for a model in its own dtype; none otherwise."""
        if self.device_.type != "cuda" or self._dtype() is not None:
            return torch.autocast("cpu", enabled=False)
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.autocast("cuda", dtype=dtype)

    def _copy_log_probs(self, encoded, copies, progress=None):
        """Run every copy; per text, the summed target log-probability of each of its copies.

        ``progress``, a tqdm bar counting masked copies, advances after each forward pass.
        """
        results = [np.empty(len(masked)) for masked, _ in copies]
        with torch.inference_mode():
            for pieces in self._batches(encoded, copies):
                sums = self._forward(encoded, copies, pieces).cpu().numpy()
                offset = 0
                for i, start, stop in pieces:
                    results[i][start:stop] = sums[offset : offset + stop - start]
                    offset += stop - start
                if progress is not None:
                    progress.update(offset)
        return results

    def _score_texts(self, encoded, make_copies, reduce, n_copies):
        """Score each text from its masked copies, a group of texts at a time.

        ``make_copies(length, generator)`` gives a text's ``(masked, targets)``, boolean of
        shape (n_copies, length) over its own tokens; ``reduce(masked, sums)`` turns the summed
        target log-probabilities of its copies into its result; ``n_copies(length)`` is how many
        copies ``make_copies`` makes (the progress bar's total). Texts go shortest first, in
        groups holding at most ``_COPY_BUDGET`` mask entries, so memory stays bounded however
        many texts are scored.
        """
        from tqdm.auto import tqdm

        base = int(check_random_state(self.random_state).randint(2**32, dtype=np.uint64))
        order = sorted(range(len(encoded)), key=lambda i: len(encoded.input_ids[i]))
        results = [None] * len(encoded)
        total = int(sum(n_copies(int(length)) for length in encoded.n_tokens))
        with tqdm(total=total, desc="scoring", unit="copy", disable=not self.verbose) as progress:
            group, copies, load = [], [], 0
            for rank, i in enumerate(order):
                ids, own = encoded.input_ids[i], encoded.content_positions[i]
                # Each text's masks depend only on the seed and its tokens (torch's CPU generator
                # keeps 32 bits of a seed: both are folded into 32).
                generator = torch.Generator().manual_seed(zlib.crc32(ids.numpy().astype(np.int64).tobytes(), base))
                copies.append(make_copies(len(own), generator))
                group.append(i)
                load += copies[-1][0].numel()
                if load >= _COPY_BUDGET or rank == len(order) - 1:
                    sums = self._copy_log_probs(encoded.subset(group), copies, progress)
                    for j, (masked, _), text_sums in zip(group, copies, sums, strict=True):
                        results[j] = reduce(masked, text_sums)
                    group, copies, load = [], [], 0
        return np.array(results)

    # ------------------------------------------------------------------ public scores

    def transform(self, X):
        """MPT curve ``S(x; M)`` of each text at each rate of ``mask_rates_``.

        ``S(x; M)`` is the mean log-probability (nats per token) of ``M = round(rate * L)``
        masked tokens given the other ``L - M``, averaged over ``n_masks`` random masks.

        Parameters
        ----------
        X : list or array of str of shape (n_texts,) or (n_texts, 1), pandas Series or DataFrame, \
                datasets.Dataset or IterableDataset

        Returns
        -------
        curve : ndarray of shape (n_texts, n_rates)
        """
        check_is_fitted(self)
        encoded = self._encode(X)
        rates, n_masks = self.mask_rates_, self.n_masks

        def make_copies(length, generator):
            sizes = [mask_size_for_rate(float(rate), length) for rate in rates]
            return _size_masks(np.repeat(sizes, n_masks), length, generator)

        def reduce(masked, sums):
            return (sums / masked.sum(1).numpy()).reshape(len(rates), n_masks).mean(1)

        return self._score_texts(encoded, make_copies, reduce, lambda length: len(rates) * n_masks)

    def score_samples(self, X):
        """Cumulative MPT estimate of ``log p(x)``: ``sum_{M=1..L} S(x; M)`` per text (nats).

        Parameters
        ----------
        X : list or array of str of shape (n_texts,) or (n_texts, 1), pandas Series or DataFrame, \
                datasets.Dataset or IterableDataset

        Returns
        -------
        scores : ndarray of shape (n_texts,)
        """
        check_is_fitted(self)
        encoded = self._encode(X)
        n_masks = self.n_masks
        if self.score_method == "chain":
            return self._score_texts(
                encoded,
                lambda length, g: _chain_masks(n_masks, length, g),
                lambda masked, sums: sums.sum() / n_masks,
                lambda length: n_masks * length,
            )
        return self._score_texts(
            encoded,
            lambda length, g: _size_masks(np.repeat(np.arange(1, length + 1), n_masks), length, g),
            lambda masked, sums: (sums / masked.sum(1).numpy()).sum() / n_masks,
            lambda length: n_masks * length,
        )

    def score(self, X, y=None):
        """Mean of :meth:`score_samples` over the texts (nats per text).

        Parameters
        ----------
        X : list or array of str of shape (n_texts,) or (n_texts, 1), pandas Series or DataFrame, \
                datasets.Dataset or IterableDataset
        y : None
            Ignored.

        Returns
        -------
        score : float
        """
        return float(np.mean(self.score_samples(X)))

    def pseudo_log_likelihood(self, X):
        """Pseudo-log-likelihood ``sum_j log p(x_j | x_{-j})``, every token masked once, exactly.

        It is ``L * S(x; 1)``: the first point of the MPT curve times the length, as computed
        by the MLM scoring tools (Salazar et al., 2020).

        Parameters
        ----------
        X : list or array of str of shape (n_texts,) or (n_texts, 1), pandas Series or DataFrame, \
                datasets.Dataset or IterableDataset

        Returns
        -------
        pll : ndarray of shape (n_texts,)
        """
        check_is_fitted(self)
        encoded = self._encode(X)
        return self._score_texts(encoded, _single_masks, lambda masked, sums: sums.sum(), lambda length: length)

    def paper_area(self, X, *, scale=512):
        """The paper's area under the MPT curve: ``scale * sum_r (r - r_prev) * S(x; r)`` per text.

        Table 2 of the paper reports this area with ``scale = 512`` (BERT's longest input,
        whatever the sentence's length) over rates 0.01..0.99; it is not an estimate of
        ``log p(x)`` (see :meth:`score_samples` for that). Widths are ``r_1 - 0`` for the
        first rate and the gaps between consecutive rates after it.

        Parameters
        ----------
        X : list or array of str of shape (n_texts,) or (n_texts, 1), pandas Series or DataFrame, \
                datasets.Dataset or IterableDataset
        scale : float, default=512

        Returns
        -------
        area : ndarray of shape (n_texts,)
        """
        return _area(self.transform(X), self.mask_rates_, scale)

    def get_feature_names_out(self, input_features=None):
        """Names of the columns of :meth:`transform`: ``"S@<rate>"`` for each rate of ``mask_rates_``.

        Parameters
        ----------
        input_features : None
            Ignored: the input is text.

        Returns
        -------
        feature_names_out : ndarray of str objects of shape (n_rates,)
        """
        check_is_fitted(self)
        return np.asarray([f"S@{np.format_float_positional(r, trim='-')}" for r in self.mask_rates_], dtype=object)

    def __sklearn_clone__(self):
        # The model and tokenizer objects are shared, not deep-copied: fit never modifies them
        # (it trains, moves or casts a copy), so a clone costs no copy of the weights.
        stripped = copy.copy(self)
        stripped.model = stripped.tokenizer = None
        clone = super(MLMCurveScorer, stripped).__sklearn_clone__()
        clone.model, clone.tokenizer = self.model, self.tokenizer
        return clone

    # ------------------------------------------------------------------ training

    def _pretrain(self, encoded):
        """Masked pre-training for ``max_steps`` steps of ``batch_size`` texts."""
        model = self.model_
        generator = check_generator(self.random_state)
        optimizer = torch.optim.AdamW(model.parameters(), lr=self.learning_rate)
        lengths = encoded.n_tokens
        order = torch.randperm(len(encoded), generator=generator)
        cursor, start_time = 0, time.perf_counter()
        model.train()
        from tqdm.auto import tqdm

        try:
            with tqdm(total=self.max_steps, desc="training", unit="step", disable=not self.verbose) as progress:
                for step in range(1, self.max_steps + 1):
                    if cursor >= len(order):
                        order, cursor = torch.randperm(len(encoded), generator=generator), 0
                    chosen = order[cursor : cursor + self.batch_size].tolist()
                    cursor += len(chosen)
                    loss = self._train_step(encoded, chosen, lengths, generator, optimizer)
                    self.history_.append({"step": step, "loss": loss, "seconds": time.perf_counter() - start_time})
                    progress.set_postfix(loss=f"{loss:.4f}", refresh=False)
                    progress.update()
                    if step == 1 or step % max(1, self.max_steps // 10) == 0:
                        logger.info("step %d of %d: loss %.4f nats per token", step, self.max_steps, loss)
        finally:
            model.eval()

    def _train_step(self, encoded, chosen, lengths, generator, optimizer):
        subset = encoded.subset(chosen)
        copies, weights = [], []
        for i in chosen:
            length = int(lengths[i])
            if self.mask_rate == "uniform":
                size = int(torch.randint(1, length + 1, (1,), generator=generator))
            else:
                size = mask_size_for_rate(self.mask_rate, length)
            masked = masks_of_sizes([size], length, random_state=generator)
            copies.append((masked, masked))
            weights.append(length / size)
        weights = torch.tensor(weights, dtype=torch.float64, device=self.device_)
        total_tokens = float(lengths[chosen].sum())
        optimizer.zero_grad(set_to_none=True)
        loss_value = 0.0
        for pieces in self._batches(subset, copies):
            sums = self._forward(subset, copies, pieces)
            index = torch.tensor([i for i, _, _ in pieces], device=self.device_)
            loss = -(weights[index] * sums).sum() / total_tokens
            loss.backward()
            loss_value += float(loss.detach())
        optimizer.step()
        return loss_value

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.non_deterministic = self.random_state is None
        return tags
