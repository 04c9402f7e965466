"""MLMCurveScorer: the scikit-learn estimator, its parameters and its public scores.

Once fitted it holds a :class:`~skmpt.text.MaskedLMRunner` (``runner_``) and calls plain
functions: :func:`~skmpt.text.encode_texts` for the texts, :func:`~skmpt.text.score_texts`
with a scoring strategy for each score, :class:`~skmpt.text.MaskedPretraining` to train.
The reductions of the MPT identity (``S(x; M)`` from mask sums, the area of a curve) are those
of :mod:`skmpt.objectives`, shared with the array estimators.
"""

import copy
import os
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._utils import DTYPES, auto_dtype, resolve_dtype
from .._validation import Interval, Options, validate_parameters
from ..distributed import init_distributed
from ..masks import check_mask_rates
from .adapters import check_predictor
from .encoding import encode_texts, texts_of
from .loading import load_masked_lm, model_max_length
from .outputs import UNITS, MLMOutputsMixin
from .runner import MaskedLMRunner
from .scoring import ChainMasks, CurveMasks, SweepMasks, score_texts
from .training import MaskedPretraining

__all__ = ["DEFAULT_MASK_RATES", "MLMCurveScorer"]

#: Masking rates of the paper's curves (Fig. 5, Table 2): 1 % to 99 % in steps of 1 %.
DEFAULT_MASK_RATES = np.arange(1, 100) / 100

# The parameters of MLMCurveScorer that MaskedPretraining takes, under the same names.
_TRAINING_PARAMETERS = ("max_steps", "batch_size", "mask_rate", "learning_rate", "random_state", "checkpoint_every",
                        "checkpoint_dir", "resume", "verbose")

_PARAMETER_CONSTRAINTS = {
    # model and tokenizer take objects of transformers: checked when fit loads them
    "mask_rates": [None, "array-like"],
    "score_masks": [Interval(Integral, 1, None, closed="left")],
    "score_method": [Options({"sweep", "chain"})],
    "unit": [Options(set(UNITS))],
    "whole_word_masking": ["boolean"],
    "score_batch_size": [Interval(Integral, 1, None, closed="left")],
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "max_batch_tokens": [Interval(Integral, 1, None, closed="left")],
    "max_length": [Interval(Integral, 2, None, closed="left")],
    "mask_rate": [Options({"uniform"}), Interval(Real, 0, 1, closed="right")],
    "max_steps": [Interval(Integral, 0, None, closed="left")],
    "learning_rate": [Interval(Real, 0, None, closed="neither")],
    "checkpoint_every": [None, Interval(Integral, 1, None, closed="left")],
    "checkpoint_dir": [None, str, os.PathLike],
    "resume": ["boolean"],
    "text_column": [None, str],
    "device": [str, torch.device],
    "dtype": [None, Options({"auto", *DTYPES}), torch.dtype],
    "model_kwargs": [None, dict],
    "allow_missing_weights": ["boolean"],
    "mask_token_id": [None, Interval(Integral, 0, None, closed="left")],
    "shift_logits": ["boolean"],
    "timestep_fn": [None, "callable"],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
}


class MLMCurveScorer(MLMOutputsMixin, TransformerMixin, BaseEstimator):
    """MPT curve and cumulative log-marginal estimate of a masked language model.

    Scores texts with any masked language model of Hugging Face ``transformers``: the MPT curve
    ``S(x; M)`` at chosen masking rates (:meth:`transform`), its sum over every mask size
    ``M = 1..L`` (:meth:`score_samples`, the paper's estimate of ``log p(x)``), the
    pseudo-log-likelihood ``L * S(x; 1)`` (:meth:`pseudo_log_likelihood`, also PLL-word-l2r),
    per-token and per-word scores (:meth:`token_scores`), :meth:`pseudo_perplexity`, the
    paper's area (:meth:`paper_area`) and the chain's spread across orderings
    (:meth:`inconsistency`); Monte Carlo estimates give standard errors with ``return_std``.
    With ``max_steps > 0``, :meth:`fit` continues masked pre-training on the texts.

    Masks follow the theory: exactly ``M`` of a sentence's own ``L`` tokens are replaced by the
    mask token; special and padding tokens are never masked nor counted, and nothing else is
    corrupted. :meth:`transform` gives one column per masking rate (named by
    :meth:`get_feature_names_out`; pandas output with ``set_output``), and ``clone`` shares the
    ``model`` and ``tokenizer`` objects instead of copying their weights (neither is ever
    modified: :meth:`fit` trains, moves or casts a copy).

    Texts may be a list, array, pandas Series or DataFrame, a ``datasets`` dataset (one split),
    an iterator, or a mapping with ``text_column`` (:func:`~skmpt.text.texts_of`). The checks
    made on texts and models before any text is scored, and the split of the work under
    ``torchrun`` or ``accelerate launch`` (every process calls a method with the same texts and
    gets all results, equal to one process's), are told in :mod:`skmpt.text`.

    Read more in the :ref:`User Guide <mlm_curves>`.

    Parameters
    ----------
    model : str, path, transformers.PreTrainedModel, transformers.PretrainedConfig, torch.nn.Module \
            or callable, default="bert-base-uncased"
        A name or local directory for ``AutoModelForMaskedLM.from_pretrained`` (``AutoModel`` for
        remote code, e.g. LLaDA or Dream with ``model_kwargs={"trust_remote_code": True}``; a name
        not on disk is fetched from the Hugging Face hub, the only use of the network), a model
        object or callable mapping ``input_ids`` and ``attention_mask`` to logits (or an output
        holding ``.logits``), or a configuration: a random model seeded by ``random_state``.
    tokenizer : str, path, tokenizer object or None, default=None
        The tokenizer, or where ``AutoTokenizer.from_pretrained`` finds it; ``None`` loads it
        from ``model``'s name or directory. It must have a mask token or ``mask_token_id``.
    mask_rates : array-like of float in (0, 1), str or None, default=None
        Masking rates of :meth:`transform` and :meth:`paper_area` (a string is read by
        :func:`skmpt.masks.parse_mask_rates`); a rate ``r`` masks ``M = round(r * L)`` tokens,
        at least one. ``None`` is 0.01, 0.02, ..., 0.99 as in the paper.
    score_masks : int, default=10
        Random masks per mask size (sweep and :meth:`transform`) or random orderings (chain).
    score_method : {"sweep", "chain"}, default="sweep"
        Estimator of :meth:`score_samples`. ``"sweep"`` averages ``score_masks`` random masks
        at every size ``M = 1..L`` (the paper's estimator, ``score_masks * L`` masked copies per
        text). ``"chain"`` sums, along ``score_masks`` random orderings, each token's
        log-probability given the tokens revealed before it (``L`` copies per ordering): exact
        for a model whose conditionals come from one joint, whatever the ordering.
    unit : {"nats", "bits"}, default="nats"
        Unit of every log-probability returned (curve, estimates, PLL, token scores, areas,
        spreads and their standard errors); ``history_`` stays in nats.
    whole_word_masking : bool, default=False
        Draw the masks of :meth:`transform`, :meth:`score_samples` and :meth:`inconsistency`
        over words (the tokenizer's word ids; a fast tokenizer): ``M = round(rate * W)`` of a
        text's ``W`` words, each masking all its tokens; ``S(x; M)`` is then per masked word.
    score_batch_size : int, default=64
        Most masked copies in one forward pass when scoring.
    batch_size : int, default=64
        Texts per optimisation step of :meth:`fit`, all processes together under a launcher.
    max_batch_tokens : int, default=16384
        Most tokens (copies times padded length) in one forward pass: bounds memory whatever
        the sentence length. A training step larger than this accumulates gradients over
        several passes (a step is always ``batch_size`` texts).
    max_length : int, default=512
        Longest tokenised text, special tokens included (room for one token at least); longer
        texts are truncated with a warning. Also capped by the model's position embeddings.
    mask_rate : float in (0, 1] or "uniform", default=0.15
        Masking used by :meth:`fit` when ``max_steps > 0``: a fixed rate (``round(rate * L)``
        tokens), or ``"uniform"`` for a uniformly random size in ``1..L`` per text, whose
        objective ``(L / M) * sum log p`` is unbiased for ``log p(x)``: masked-diffusion
        training with the linear schedule (:mod:`skmpt.text.diffusion`).
    max_steps : int, default=0
        Optimisation steps of masked pre-training in :meth:`fit`; 0 only loads the model.
    learning_rate : float, default=5e-5
        Step size of AdamW in :meth:`fit`.
    checkpoint_every : int or None, default=None
        Save a checkpoint (model, optimiser, history, data order, generators; atomically, the
        latest kept) to ``checkpoint_dir`` every this many training steps.
    checkpoint_dir : str, path or None, default=None
        Where checkpoints are kept; needed by ``checkpoint_every`` and ``resume``. A new run
        refuses a directory that holds checkpoints, and deletes only those it wrote.
    resume : bool, default=False
        Continue training from the latest checkpoint in ``checkpoint_dir``, as an uninterrupted
        run would; other texts, ``batch_size``, ``mask_rate``, ``learning_rate`` or
        ``max_length``, or another number of processes, are an error (the generators, and so
        ``random_state``, are the checkpoint's).
    text_column : str or None, default=None
        Column of the texts in a DataFrame or dataset; ``None`` picks ``"text"`` or
        ``"sentence"``, or the only string column.
    device : str or torch.device, default="auto"
        ``"auto"`` is CUDA when available, else the CPU; under a launcher, ``"auto"`` and
        ``"cuda"`` are ``cuda:LOCAL_RANK``.
    dtype : {"auto", "float32", "bfloat16", "float16", "float64"}, torch.dtype or None, \
            default="auto"
        Dtype the model runs in (a model object is cast as a copy). ``"auto"`` or ``None``
        keeps the model's own weights, and runs a float32 model under bfloat16
        ``torch.autocast`` only where the device has native bfloat16 matrix units (a GPU of
        compute capability 8.0 or above, a CPU with AMX or AVX-512 BF16 that multiplies
        bfloat16 faster than float32): float32 elsewhere, where bfloat16 is emulated and
        slower (:func:`skmpt.text.auto_dtype`; the dtype chosen is ``dtype_``). Log-probabilities
        are always computed and summed in float64 from the logits.
    model_kwargs : dict or None, default=None
        Further options of ``from_pretrained`` (``revision``, ``trust_remote_code``,
        ``local_files_only``, ``cache_dir``, ``token``, ...); those that say where to fetch
        also reach the tokenizer's. ``dtype`` has its own parameter.
    allow_missing_weights : bool, default=False
        Accept a checkpoint that lacks weights of the masked LM (which transformers would
        initialise at random) instead of an error naming them.
    mask_token_id : int or None, default=None
        Id that masks a token, for a tokenizer without a mask token (MDLM: 50257 with GPT-2's).
    shift_logits : bool, default=False
        The logits at position ``i`` predict the token at ``i + 1`` (Dream).
    timestep_fn : callable or None, default=None
        Hook giving a model its timestep: ``rate`` (each copy's ``M / L``) to a dict of forward
        keyword arguments (:mod:`skmpt.text.adapters`), e.g. ``lambda rate: {"timesteps": rate}``.
    random_state : int, RandomState instance or None, default=None
        Seeds the masks (a text's masks depend only on this seed and its tokens), the training
        masks and the random initialisation from a configuration.
    verbose : int, default=0
        When > 0, ``tqdm`` progress bars: scoring advances after each forward pass, training
        shows the steps and the loss (also logged to the ``skmpt`` logger whatever ``verbose``).

    Attributes
    ----------
    runner_ : MaskedLMRunner
        The loaded model and tokenizer with their device, dtype and budgets; it runs the
        forward passes. ``model_``, ``tokenizer_``, ``device_`` and ``max_length_`` are its.
    model_ : transformers.PreTrainedModel
        The masked LM in evaluation mode: ``model`` itself, or a copy if trained, moved or cast.
    tokenizer_ : transformers tokenizer
    device_ : torch.device
    dtype_ : torch.dtype or None
        The dtype the model's matrix products run in: ``dtype``, or what ``"auto"`` chose
        (bfloat16 under autocast, or the model's own dtype); ``None`` for a model without
        floating-point parameters (a plain callable).
    max_length_ : int
        ``max_length`` capped by the model's position embeddings.
    mask_rates_ : ndarray of shape (n_rates,)
    history_ : list of dict
        One entry per optimisation step of :meth:`fit`: ``step``, ``loss`` (negative MPT
        objective per token, nats) and ``seconds``.

    Examples
    --------
    >>> from transformers import BertConfig
    >>> from skmpt import MLMCurveScorer
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> texts = load_wordnet_sentences()[:200]
    >>> tokenizer = make_wordpiece_tokenizer(texts, vocab_size=300)
    >>> config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=64)
    >>> scorer = MLMCurveScorer(config, tokenizer=tokenizer, mask_rates=[0.15, 0.5],
    ...                         score_masks=2, random_state=0).fit()
    >>> scorer.transform(texts[:3]).shape
    (3, 2)
    >>> scorer.get_feature_names_out()
    array(['S@0.15', 'S@0.5'], dtype=object)
    >>> bool(scorer.score(texts[:3]) < 0)
    True
    """

    _parameter_constraints: dict = _PARAMETER_CONSTRAINTS

    def __init__(self, model="bert-base-uncased", *, tokenizer=None, mask_rates=None, score_masks=10,
                 score_method="sweep", unit="nats", whole_word_masking=False, score_batch_size=64, batch_size=64,
                 max_batch_tokens=16384, max_length=512,
                 mask_rate=0.15, max_steps=0, learning_rate=5e-5, checkpoint_every=None, checkpoint_dir=None,
                 resume=False, text_column=None, device="auto", dtype="auto", model_kwargs=None,
                 allow_missing_weights=False, mask_token_id=None, shift_logits=False, timestep_fn=None,
                 random_state=None, verbose=0):
        self.model = model
        self.tokenizer = tokenizer
        self.mask_rates = mask_rates
        self.score_masks = score_masks
        self.score_method = score_method
        self.unit = unit
        self.whole_word_masking = whole_word_masking
        self.score_batch_size = score_batch_size
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.max_length = max_length
        self.mask_rate = mask_rate
        self.max_steps = max_steps
        self.learning_rate = learning_rate
        self.checkpoint_every = checkpoint_every
        self.checkpoint_dir = checkpoint_dir
        self.resume = resume
        self.text_column = text_column
        self.device = device
        self.dtype = dtype
        self.model_kwargs = model_kwargs
        self.allow_missing_weights = allow_missing_weights
        self.mask_token_id = mask_token_id
        self.shift_logits = shift_logits
        self.timestep_fn = timestep_fn
        self.random_state = random_state
        self.verbose = verbose

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
        validate_parameters(self.get_params(deep=False), self._parameter_constraints, type(self).__name__)
        training = MaskedPretraining(**{name: getattr(self, name) for name in _TRAINING_PARAMETERS})
        training.check(X)  # texts to train on, and a checkpoint_dir it may write to: before anything loads
        X = None if X is None else texts_of(X, self.text_column)  # containers it would misread: refused now
        # Under torchrun or accelerate launch, join the process group: cuda:LOCAL_RANK or gloo on the CPU.
        device = init_distributed(self.device).device
        self.mask_rates_ = DEFAULT_MASK_RATES.copy() if self.mask_rates is None else check_mask_rates(self.mask_rates)
        dtype = None if self.dtype in (None, "auto") else resolve_dtype(self.dtype)
        model, tokenizer = load_masked_lm(
            self.model, tokenizer=self.tokenizer, device=device, dtype=dtype, model_kwargs=self.model_kwargs,
            allow_missing_weights=self.allow_missing_weights, random_state=self.random_state,
            train=self.max_steps > 0, verbose=self.verbose, mask_token_id=self.mask_token_id,
        )
        own = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)  # None: a plain callable
        # "auto": bfloat16 autocast for a float32 model where the device has bfloat16 units, else its own dtype
        self.dtype_ = dtype if dtype is not None else (own if own is None else auto_dtype(device, own))
        self.runner_ = MaskedLMRunner(
            model, tokenizer, device, dtype=dtype, autocast_dtype=None if self.dtype_ in (dtype, own) else self.dtype_,
            max_length=model_max_length(model, tokenizer, self.max_length),
            score_batch_size=self.score_batch_size, max_batch_tokens=self.max_batch_tokens,
            mask_token_id=self.mask_token_id, shift_logits=self.shift_logits, timestep_fn=self.timestep_fn,
        )
        check_predictor(self.runner_)  # one probe pass on a few ids: the output's logits, before any text
        self.history_ = []
        if X is not None:
            encoded = self._encode(X)  # validates the texts even when there is nothing to train
            if self.max_steps > 0:
                self.history_ = training.run(self.runner_, encoded)
        return self

    model_ = property(lambda self: self.runner_.model, doc="The masked language model (``runner_.model``).")
    tokenizer_ = property(lambda self: self.runner_.tokenizer, doc="The tokenizer (``runner_.tokenizer``).")
    device_ = property(lambda self: self.runner_.device, doc="The device it runs on (``runner_.device``).")
    max_length_ = property(lambda self: self.runner_.max_length, doc="Longest text, in tokens.")

    def _encode(self, X, words=False):
        check_is_fitted(self)
        return encode_texts(X, self.tokenizer_, self.max_length_, text_column=self.text_column, word_ids=words)

    def _score(self, X, strategy, encoded=None):  # transform(X) is _score(X, CurveMasks(...))
        encoded = self._encode(X, getattr(strategy, "needs_words", False)) if encoded is None else encoded
        return score_texts(self.runner_, encoded, strategy, random_state=self.random_state, verbose=self.verbose)

    def transform(self, X, return_std=False):
        """MPT curve ``S(x; M)`` of each text at each rate of ``mask_rates_``.

        ``S(x; M)`` is the mean log-probability (per token) of ``M = round(rate * L)`` masked
        tokens given the other ``L - M``, averaged over ``score_masks`` random masks.

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        return_std : bool, default=False
            Also return each value's standard error over the masks (needs ``score_masks >= 2``).

        Returns
        -------
        curve : ndarray of shape (n_texts, n_rates)
        curve_std : ndarray of shape (n_texts, n_rates)
            Only with ``return_std=True``.
        """
        self._check_std(return_std)
        return self._with_std(self._score(X, self._masks(CurveMasks(self.mask_rates_, self.score_masks, return_std))),
                              return_std)

    def score_samples(self, X, return_std=False):
        """Cumulative MPT estimate of ``log p(x)``: ``sum_{M=1..L} S(x; M)`` per text.

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        return_std : bool, default=False
            Also return each estimate's Monte Carlo standard error (needs ``score_masks >= 2``):
            the sizes' errors over masks added in quadrature (sweep), or the orderings' (chain).

        Returns
        -------
        scores : ndarray of shape (n_texts,)
        scores_std : ndarray of shape (n_texts,)
            Only with ``return_std=True``.
        """
        self._check_std(return_std)
        strategy = ChainMasks if self.score_method == "chain" else SweepMasks
        return self._with_std(self._score(X, self._masks(strategy(self.score_masks, return_std))), return_std)

    def score(self, X, y=None):
        """Mean of :meth:`score_samples` over the texts (nats per text).

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        y : None
            Ignored.

        Returns
        -------
        score : float
        """
        return float(np.mean(self.score_samples(X)))

    def get_feature_names_out(self, input_features=None):
        """Names of the columns of :meth:`transform`: ``"S@<rate>"`` for each rate of ``mask_rates_``.

        Parameters
        ----------
        input_features : None
            Ignored.

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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.non_deterministic = self.random_state is None
        return tags

