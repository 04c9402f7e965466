"""MLMCurveScorer: the scikit-learn face of the text side.

Fitting loads a masked predictor (:func:`~skmpt.text.load_masked_lm`) and holds it in a
:class:`~skmpt.text.MaskedLMRunner` (``runner_``); each score is the runner running one scoring
strategy of :mod:`skmpt.text.strategies` over the encoded texts (:func:`~skmpt.text.encode_texts`),
in the scorer's unit; :class:`~skmpt.text.MaskedPretraining` trains. The reductions of the MPT
identity (``S(x; M)`` from mask sums, the area of a curve) are those of :mod:`skmpt.objectives`,
shared with the array estimators.
"""

import copy
import os
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._utils import DTYPES, OutputChoiceMixin, resolve_dtype
from .._validation import Interval, Options, validate_parameters
from ..distributed import init_distributed
from ..masks import check_mask_rates
from ..objectives import curve_area
from ..objectives.vocabulary import renamed_parameter
from .conditional import conditional_log_likelihood, encode_pairs
from .encoding import encode_texts, texts_of
from .loading import load_masked_lm, model_max_length, require_text_extra
from .outputs import UNITS, scores_table, word_sums
from .runner import MaskedLMRunner
from .strategies import (ChainSpread, CurveMasks, CurveTokenScores, SingleTokenMasks, TokenScores, WholeWordMasks,
                         estimator_strategy)
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


_LEVELS = ("token", "word")


#: What the options of the scoring methods accept.
_OPTION_CONSTRAINTS = {"level": [Options(_LEVELS)], "metric": [Options(SingleTokenMasks.METRICS)]}


class MLMCurveScorer(OutputChoiceMixin, TransformerMixin, BaseEstimator):
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
    an iterator, or a mapping with ``text_column`` . The checks
    made on texts and models before any text is scored, and the split of the work under
    ``torchrun`` or ``accelerate launch`` (every process calls a method with the same texts and
    gets all results, equal to one process's), are told in :mod:`skmpt.text`.

    Every log-probability is in the scorer's ``unit`` (nats or bits); pseudo-perplexities have
    no unit. Word-level outputs and ``metric="within_word_l2r"`` need a tokenizer that gives
    word ids (a fast tokenizer: ``tokenizer.is_fast``; other tokenizers are an error).

    Read more in the :ref:`User Guide <mlm_curves>`.

    Parameters
    ----------
    model : str, path, transformers.PreTrainedModel, transformers.PretrainedConfig, MaskedPredictor, \
            torch.nn.Module or callable, default="bert-base-uncased"
        A name or local directory for ``AutoModelForMaskedLM.from_pretrained`` (``AutoModel`` for
        remote code, e.g. LLaDA or Dream with ``model_kwargs={"trust_remote_code": True}``; a name
        not on disk is fetched from the Hugging Face hub, the only use of the network), a model
        object or callable mapping ``input_ids`` and ``attention_mask`` to logits (or an output
        holding ``.logits``), a :class:`~skmpt.text.MaskedPredictor` of your own family, or a
        configuration: a random model seeded by ``random_state``.
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
        training with the linear schedule (:func:`~skmpt.text.masked_diffusion_bound`).
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
        Dtype the model runs in (a model object is cast as a copy). ``"auto"`` or ``None`` is the
        checkpoint's own dtype (as ``torch_dtype="auto"`` in Hugging Face), or a model object's:
        the same on every machine. ``"bfloat16"`` casts the model, faster on a GPU or a CPU with
        bfloat16 units and slower where they are emulated, and differs from float32 by about
        1e-3 nats per token (measured in the :ref:`User Guide <mlm_curves>`). Log-probabilities
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
        keyword arguments (:class:`~skmpt.text.TimeConditionedPredictor`), e.g.
        ``lambda rate: {"timesteps": rate}``.
    random_state : int, RandomState instance or None, default=None
        Seeds the masks (a text's masks depend only on this seed and its tokens), the training
        masks and the random initialisation from a configuration.
    verbose : int, default=0
        When > 0, ``tqdm`` progress bars: scoring advances after each forward pass, training
        shows the steps and the loss (also logged to the ``skmpt`` logger whatever ``verbose``).

    Attributes
    ----------
    runner_ : MaskedLMRunner
        The loaded predictor and tokenizer with their device and budgets; it runs the forward
        passes. ``predictor_``, ``model_``, ``tokenizer_``, ``device_`` and ``max_length_`` are its.
    predictor_ : MaskedPredictor
        The model's family (:mod:`skmpt.text.predictors`).
    model_ : torch.nn.Module
        The predictor's module: ``model`` itself (its train/eval mode kept), or a copy in
        evaluation mode if trained, moved or cast.
    tokenizer_ : transformers tokenizer
    device_ : torch.device
    dtype_ : torch.dtype or None
        The dtype the model runs in: ``dtype``, or the checkpoint's or model's own for
        ``"auto"``; ``None`` for a model without floating-point parameters (a plain callable).
    max_length_ : int
        ``max_length`` capped by the model's position embeddings.
    mask_rates_ : ndarray of shape (n_rates,)
    params_ : dict
        The parameters as they were at :meth:`fit` (``get_params(deep=False)``): every method
        of the fitted scorer reads them, so ``set_params`` after ``fit`` takes effect at the
        next ``fit``, as in scikit-learn.
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
        require_text_extra(f"{type(self).__name__}.fit")
        # what every method of the fitted scorer reads: set_params after fit acts at the next fit
        self.params_ = self.get_params(deep=False)
        training = MaskedPretraining(**{name: getattr(self, name) for name in _TRAINING_PARAMETERS})
        training.check(X)  # texts to train on, and a checkpoint_dir it may write to: before anything loads
        X = None if X is None else texts_of(X, self.text_column)  # containers it would misread: refused now
        # Under torchrun or accelerate launch, join the process group: cuda:LOCAL_RANK or gloo on the CPU.
        device = init_distributed(self.device).device
        self.mask_rates_ = DEFAULT_MASK_RATES.copy() if self.mask_rates is None else check_mask_rates(self.mask_rates)
        # "auto" is the checkpoint's (or the model object's) own dtype: nothing depends on the machine
        dtype = None if self.dtype in (None, "auto") else resolve_dtype(self.dtype)
        predictor, tokenizer = load_masked_lm(
            self.model, tokenizer=self.tokenizer, device=device, dtype=dtype, model_kwargs=self.model_kwargs,
            allow_missing_weights=self.allow_missing_weights, random_state=self.random_state,
            train=self.max_steps > 0, verbose=self.verbose, mask_token_id=self.mask_token_id,
            shift_logits=self.shift_logits, timestep_fn=self.timestep_fn,
        )
        self.dtype_ = predictor.dtype
        self.runner_ = MaskedLMRunner(
            predictor, tokenizer, device, max_length=model_max_length(predictor.module, tokenizer, self.max_length),
            score_batch_size=self.score_batch_size, max_batch_tokens=self.max_batch_tokens,
        )
        self.runner_.probe()  # one pass on a few ids: the predictor's logits, before any text
        self.history_ = []
        if X is not None:
            encoded = self._encode(X)  # validates the texts even when there is nothing to train
            if self.max_steps > 0:
                self.history_ = training.run(self.runner_, encoded)
        return self

    predictor_ = property(lambda self: self.runner_.predictor, doc="The masked predictor (``runner_.predictor``).")
    model_ = property(lambda self: self.runner_.predictor.module, doc="The predictor's module.")
    tokenizer_ = property(lambda self: self.runner_.tokenizer, doc="The tokenizer (``runner_.tokenizer``).")
    device_ = property(lambda self: self.runner_.device, doc="The device it runs on (``runner_.device``).")
    max_length_ = property(lambda self: self.runner_.max_length, doc="Longest text, in tokens.")

    def _encode(self, X, words=False):
        check_is_fitted(self)
        column = self.params_["text_column"]
        return encode_texts(X, self.tokenizer_, self.max_length_, text_column=column, word_ids=words)

    def _score(self, X, strategy, encoded=None):  # transform(X) is _score(X, CurveMasks(...))
        encoded = self._encode(X, strategy.needs_words) if encoded is None else encoded
        params = self.params_
        return self.runner_.score(encoded, strategy, random_state=params["random_state"], verbose=params["verbose"])

    def transform(self, X, return_std=False):
        """MPT curve ``S(x; M)`` of each text at each rate of ``mask_rates_``.

        ``S(x; M)`` is the mean log-probability (per token) of ``M = round(rate * L)`` masked
        tokens given the other ``L - M``, averaged over ``score_masks`` random masks
        (:class:`~skmpt.text.strategies.CurveMasks`).

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        return_std : bool, default=False
            Also return each value's standard error over the masks (needs ``score_masks >= 2``).

        Returns
        -------
        curve : ndarray of shape (n_texts, n_rates)
            In the scorer's ``unit`` per token.
        curve_std : ndarray of shape (n_texts, n_rates)
            Only with ``return_std=True``.
        """
        check_is_fitted(self)
        self._check_std(return_std)
        strategy = CurveMasks(self.mask_rates_, self.params_["score_masks"], return_std)
        return self._with_std(self._score(X, self._masks(strategy)), return_std)

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
            In the scorer's ``unit``.
        scores_std : ndarray of shape (n_texts,)
            Only with ``return_std=True``.
        """
        check_is_fitted(self)
        self._check_std(return_std)
        strategy = estimator_strategy(self.params_["score_method"], self.params_["score_masks"], return_std=return_std)
        return self._with_std(self._score(X, self._masks(strategy)), return_std)

    def score(self, X, y=None):
        """Mean of :meth:`score_samples` over the texts, in the scorer's ``unit`` (nats or bits) per text.

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

    def _unit(self, values):
        return values * UNITS[self.params_["unit"]]

    def _masks(self, strategy):
        """``strategy``, drawn over words when ``whole_word_masking``."""
        return WholeWordMasks(strategy) if self.params_["whole_word_masking"] else strategy

    def _check_std(self, return_std, always=False):
        """``return_std`` (or the spread, ``always``) needs two masks or orderings: checked before scoring."""
        if (return_std or always) and self.params_["score_masks"] < 2:
            what = "return_std=True" if return_std else "the spread across orderings"
            raise ValueError(
                f"{what} needs score_masks >= 2 (a standard deviation of the Monte Carlo draws); got "
                f"score_masks={self.params_['score_masks']}."
            )

    def _with_std(self, results, return_std):
        """Split ``[value, error]`` results, each in the scorer's unit."""
        if not return_std:
            return self._unit(results)
        return self._unit(results[:, 0]), self._unit(results[:, 1])

    def pseudo_log_likelihood(self, X, *, metric="original"):
        """Pseudo-log-likelihood ``sum_j log p(x_j | x_{-j})``, every token masked once, exactly.

        It is ``L * S(x; 1)``, as computed by the MLM scoring tools (Salazar et al., 2020).
        ``metric="within_word_l2r"`` is PLL-word-l2r (Kauf and Ivanova, 2023): the copy that
        scores a token of a multi-token word also masks the tokens of that word to its right,
        so a word is not guessed from its own pieces; it is minicons' ``PLL_metric``.

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        metric : {"original", "within_word_l2r"}, default="original"

        Returns
        -------
        pll : ndarray of shape (n_texts,)
        """
        return self._unit(self._score(X, SingleTokenMasks(metric)))

    def pseudo_perplexity(self, X, *, metric="original", level="token"):
        """Pseudo-perplexity ``exp(-PLL / n)`` per text, ``n`` its number of tokens or of words.

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        metric : {"original", "within_word_l2r"}, default="original"
        level : {"token", "word"}, default="token"
            Per token (``n = L``) or per word (``n`` = the tokenizer's words).

        Returns
        -------
        ppl : ndarray of shape (n_texts,)
        """
        validate_parameters({"level": level}, _OPTION_CONSTRAINTS, "MLMCurveScorer.pseudo_perplexity")
        strategy = SingleTokenMasks(metric)
        encoded = self._encode(X, words=level == "word" or metric == "within_word_l2r")
        pll = self._score(X, strategy, encoded=encoded)
        counts = encoded.n_tokens if level == "token" else [int(w.max()) + 1 for w in encoded.word_ids]
        return np.exp(-pll / np.asarray(counts))

    def token_scores(self, X, *, level="token", metric="original", curve=False):
        """Each token's (or word's) log-probability: in the PLL, or on the MPT curve.

        With ``curve=False``, token ``j``'s ``log p(x_j | x_{-j})`` in the pseudo-log-likelihood
        (its masks set by ``metric``); they sum to :meth:`pseudo_log_likelihood`. With
        ``curve=True``, at each rate of ``mask_rates_``, the mean of token ``j``'s
        log-probability over the ``score_masks`` masks of that rate that mask it (NaN when none
        does); with ``whole_word_masking`` these masks are drawn over words, as :meth:`transform`'s
        (a masked word masks, and scores, all its tokens). ``level="word"`` sums a word's tokens
        (the tokenizer's word ids). With
        ``set_output(transform="pandas")`` the result is one long table
        (:func:`~skmpt.text.scores_table`: ``text, position, token, word, score``, or one ``S@<rate>``
        column per rate with ``curve=True``).

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        level : {"token", "word"}, default="token"
        metric : {"original", "within_word_l2r"}, default="original"
            Only ``"original"`` with ``curve=True``.
        curve : bool, default=False

        Returns
        -------
        scores : list of ndarray or pandas.DataFrame
            Per text, shape (n_units,), or (n_units, n_rates) with ``curve=True``.
        """
        validate_parameters({"level": level, "metric": metric}, _OPTION_CONSTRAINTS, "MLMCurveScorer.token_scores")
        if curve and metric != "original":
            raise ValueError(f"metric={metric!r} is a variant of the PLL; the curve's token scores take no metric.")
        output = self._output_container()
        check_is_fitted(self)
        # the table's word column is filled whenever the tokenizer gives word ids
        need_words = (level == "word" or metric == "within_word_l2r" or (curve and self.params_["whole_word_masking"])
                 or (output != "default" and getattr(self.tokenizer_, "is_fast", False)))
        encoded = self._encode(X, words=need_words)
        masks = self.params_["score_masks"]
        strategy = self._masks(CurveTokenScores(self.mask_rates_, masks)) if curve else TokenScores(metric)
        scores = [self._unit(values) for values in self._score(X, strategy, encoded=encoded)]
        if level == "word":
            scores = [word_sums(values, words.numpy()) for values, words in zip(scores, encoded.word_ids, strict=True)]
        if output == "default":
            return scores
        columns = tuple(self.get_feature_names_out()) if curve else ("score",)
        table = scores_table(scores, encoded, self.tokenizer_, level=level, columns=columns)
        if output == "polars":
            import polars

            return polars.from_pandas(table)
        return table

    def inconsistency(self, X, *, return_std=False):
        """Spread of the chain across orderings: how far the model's conditionals are from one joint.

        Along each of ``score_masks`` random orderings the chain gives ``sum_t log p(x_{s_t} |
        x_{s_<t})``; this is their standard deviation per text (:class:`~skmpt.text.strategies.ChainSpread`).
        It is 0 when the conditionals come from one joint (every ordering gives ``log p(x)``) and
        grows with their inconsistency. The gap between the sweep and the chain does not measure
        it: both have expectation ``sum_M S(x; M)`` for any conditionals.

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        return_std : bool, default=False
            Also return the standard error of each spread (delta method).

        Returns
        -------
        spread : ndarray of shape (n_texts,)
        spread_std : ndarray of shape (n_texts,)
            Only with ``return_std=True``.
        """
        check_is_fitted(self)
        self._check_std(return_std, always=True)
        return self._with_std(self._score(X, self._masks(ChainSpread(self.params_["score_masks"]))), return_std)

    def paper_area(self, X, *, scale=512):
        """The paper's area under the MPT curve: ``scale * sum_r (r - r_prev) * S(x; r)`` per text.

        Table 2 of the paper reports it with ``scale = 512`` (BERT's longest input) over rates
        0.01..0.99; it is not an estimate of ``log p(x)`` (``score_samples`` is). Widths are
        ``r_1 - 0`` for the first rate and the gaps between consecutive rates after it.

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        scale : float, default=512

        Returns
        -------
        area : ndarray of shape (n_texts,)
        """
        return curve_area(self.transform(X), self.mask_rates_, scale=scale)

    def conditional_transform(self, contexts, continuations, *, return_std=False):
        """Conditional MPT curve of each continuation given its context, at each rate of ``mask_rates_``.

        The text is ``context + continuation``; masks of ``M = round(rate * L_c)`` tokens are drawn
        among the continuation's ``L_c`` tokens only, the context always visible, so the curve's
        sum over ``M = 1..L_c`` is ``log p(continuation | context)``
        (:meth:`conditional_score_samples`). Start the continuation with its space (``" sat"``).

        Parameters
        ----------
        contexts, continuations : sequences of str of the same length
        return_std : bool, default=False
            Also return each value's standard error over the masks (needs ``score_masks >= 2``).

        Returns
        -------
        curve : ndarray of shape (n_pairs, n_rates)
        curve_std : ndarray of shape (n_pairs, n_rates)
            Only with ``return_std=True``.
        """
        check_is_fitted(self)
        self._check_std(return_std)
        encoded = encode_pairs(contexts, continuations, self.tokenizer_, self.max_length_)
        strategy = CurveMasks(self.mask_rates_, self.params_["score_masks"], return_std)
        return self._with_std(self._score(None, strategy, encoded), return_std)

    def conditional_score_samples(self, contexts, continuations, *, score_method="auto", max_forward_passes=128,
                                  return_std=False, method="deprecated"):
        """``log p(continuation | context)`` of each pair, at a budget of forward passes, with masks among its tokens.

        :func:`~skmpt.text.conditional_log_likelihood`: the budgeted estimator of the lm-eval model
        (:class:`~skmpt.text.estimation.BudgetedEstimator`), exact where the continuation's
        ``2**L - 1`` masks fit ``max_forward_passes``, else the estimator a pilot chooses (or the
        one ``score_method`` names); with an int ``random_state`` it gives the lm-eval model's
        numbers for ``seed=random_state``. :func:`~skmpt.text.compare_conditional_estimators` sets
        the estimators side by side; for minimal pairs and multiple choice see
        :func:`~skmpt.text.multiple_choice`.

        Parameters
        ----------
        contexts, continuations : sequences of str of the same length
            Joined as ``context + continuation``: start the continuation with its space.
        score_method : str, default="auto"
            As :func:`~skmpt.text.conditional_log_likelihood`.
        max_forward_passes : int >= 2, default=128
            Masked copies per pair at most.
        return_std : bool, default=False
            Also return each estimate's Monte Carlo standard error (0 where exact).
        method : str
            Deprecated since 0.2, removed in 0.3: the old name of ``score_method`` (its default
            was the scorer's ``score_method``).

        Returns
        -------
        scores : ndarray of shape (n_pairs,)
        scores_std : ndarray of shape (n_pairs,)
            Only with ``return_std=True``.
        """
        check_is_fitted(self)
        score_method = renamed_parameter("method", method, "score_method", score_method,
                                         "MLMCurveScorer.conditional_score_samples")
        result = conditional_log_likelihood(self.runner_, contexts, continuations, score_method=score_method,
                                            max_forward_passes=max_forward_passes, unit=self.params_["unit"],
                                            random_state=self.params_["random_state"], verbose=self.params_["verbose"])
        return (result.log_likelihood, result.std) if return_std else result.log_likelihood

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

