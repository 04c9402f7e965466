"""MLMCurveScorer: the scikit-learn estimator, its parameters and its public scores.

Loading (:mod:`._loading`), encoding and batching (:mod:`._batching`), scoring a text from its
masked copies (:mod:`._scoring`) and training (:mod:`._training`) live in their own modules; the
reductions of the MPT identity (``S(x; M)`` from mask sums, the area of a curve) are those of
:mod:`skmpt.objectives`, shared with the array estimators.
"""

import copy
import os
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._distributed import init_distributed
from ..masks import mask_size_for_rate
from ..objectives import curve_area, mean_over_masks
from ._batching import BatchingMixin
from ._loading import DTYPES, LoadingMixin
from ._scoring import ScoringMixin, chain_masks, single_masks, size_masks
from ._training import TrainingMixin

__all__ = ["MLMCurveScorer", "DEFAULT_MASK_RATES"]

#: Masking rates of the paper's curves (Fig. 5, Table 2): 1 % to 99 % in steps of 1 %.
DEFAULT_MASK_RATES = np.arange(1, 100) / 100


class MLMCurveScorer(LoadingMixin, BatchingMixin, ScoringMixin, TrainingMixin, TransformerMixin, BaseEstimator):
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

    Data parallelism: started by ``torchrun --nproc-per-node N`` or ``accelerate launch``,
    :meth:`fit` joins the launcher's process group (``torch.distributed``; gloo on the CPU,
    NCCL with each process on ``cuda:LOCAL_RANK``), and :meth:`transform`,
    :meth:`score_samples`, :meth:`pseudo_log_likelihood` and :meth:`paper_area` split the
    texts over the processes; every process returns all results, in input order, equal to a
    one-process run with the same ``random_state`` (a text's masks depend only on the seed and
    its tokens). Every process must call the method, with the same texts (the processes
    exchange their results). Only the main process shows progress bars. With
    ``max_steps > 0``, :meth:`fit` trains with ``DistributedDataParallel``, ``batch_size``
    texts per step over all processes, and can checkpoint and resume (``checkpoint_every``,
    ``checkpoint_dir``, ``resume``).

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
    mask_rates : array-like of float in (0, 1) or None, default=None
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
        Most masked copies in one forward pass; in :meth:`fit`, texts per optimisation step,
        all processes together under a launcher (each computes the loss of its share).
    max_batch_tokens : int, default=16384
        Most tokens (copies times padded length) in one forward pass: bounds memory whatever
        the sentence length. A training step larger than this accumulates gradients over
        several passes (gradient accumulation: a step is always ``batch_size`` texts).
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
    checkpoint_every : int or None, default=None
        Save a checkpoint to ``checkpoint_dir`` every this many training steps: the model
        (``save_pretrained``, in ``step-NNNNNNNN/model``), the optimiser's state, the history,
        the data order and the random generators, written atomically (the latest one is
        kept). ``None`` saves none.
    checkpoint_dir : str, path or None, default=None
        Where checkpoints are written and read; needed by ``checkpoint_every`` and ``resume``.
    resume : bool, default=False
        Continue training from the latest checkpoint in ``checkpoint_dir`` (from the start
        when it holds none): an interrupted run loses at most ``checkpoint_every`` steps, and
        the resumed run gives the model and history of an uninterrupted one. Resume with the
        same parameters and number of processes.
    text_column : str or None, default=None
        Column holding the texts when the input is a ``datasets.Dataset`` or a pandas
        DataFrame; ``None`` picks ``"text"`` or ``"sentence"``, or the only string column.
    device : str or torch.device, default="auto"
        ``"auto"`` is CUDA when available, else the CPU; under a launcher, ``"auto"`` and
        ``"cuda"`` are ``cuda:LOCAL_RANK``. With ``dtype="auto"`` on CUDA the encoder runs
        under ``torch.autocast`` (bfloat16 where supported).
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
        "checkpoint_every": [None, Interval(Integral, 1, None, closed="left")],
        "checkpoint_dir": [None, str, os.PathLike],
        "resume": ["boolean"],
        "text_column": [None, str],
        "device": [str, torch.device],
        "dtype": [None, StrOptions({"auto", *DTYPES}), torch.dtype],
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
        checkpoint_every=None,
        checkpoint_dir=None,
        resume=False,
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
        self.checkpoint_every = checkpoint_every
        self.checkpoint_dir = checkpoint_dir
        self.resume = resume
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
        # A rate of 1 would mask every token and leave nothing to condition on.
        bad = ~((rates > 0) & (rates < 1))
        if bad.any():
            raise ValueError(f"mask_rates must lie in (0, 1) (exclusive); got {float(rates[bad][0])!r}.")
        if np.any(np.diff(rates) <= 0):
            raise ValueError("mask_rates must be strictly increasing.")
        return rates

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
        if (self.checkpoint_every is not None or self.resume) and self.checkpoint_dir is None:
            raise ValueError("checkpoint_every and resume=True need checkpoint_dir, where checkpoints are kept.")
        # Under torchrun or accelerate launch, join the process group: cuda:LOCAL_RANK or gloo on the CPU.
        self.device_ = init_distributed(self.device).device
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
            return size_masks(np.repeat(sizes, n_masks), length, generator)

        def reduce(masked, sums):
            return mean_over_masks(sums, masked.sum(1).numpy(), n_masks)

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
                lambda length, g: chain_masks(n_masks, length, g),
                lambda masked, sums: sums.sum() / n_masks,
                lambda length: n_masks * length,
            )
        return self._score_texts(
            encoded,
            lambda length, g: size_masks(np.repeat(np.arange(1, length + 1), n_masks), length, g),
            lambda masked, sums: mean_over_masks(sums, masked.sum(1).numpy(), n_masks).sum(),
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
        return self._score_texts(encoded, single_masks, lambda masked, sums: sums.sum(), lambda length: length)

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
        return curve_area(self.transform(X), self.mask_rates_, scale=scale)

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
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.non_deterministic = self.random_state is None
        return tags
