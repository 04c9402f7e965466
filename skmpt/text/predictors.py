"""Masked predictors: what skmpt needs of any model that predicts masked tokens, one class per family.

A :class:`MaskedPredictor` is the text counterpart of :class:`skmpt.models.MaskedModel`. Given a
batch of masked copies of texts (``input_ids``, ``attention_mask`` and each copy's masking rate
``M / L``) it returns the logits over the vocabulary that predict each token; it knows the id
that masks a token and which position's logits predict which token. Everything in
:mod:`skmpt.text` that runs a model — the runner's forward passes and probe, training, diffusion
bounds, any-order sampling — calls a predictor, never a model directly. A family of models is
one class:

- :class:`MaskedLMPredictor`: a masked LM of ``transformers`` (``...ForMaskedLM``); its
  language-model head runs only at the positions whose probability is needed.
- :class:`ModulePredictor`: any ``torch.nn.Module`` or callable mapping ``input_ids`` and
  ``attention_mask`` to logits, or to an output holding them (``.logits``, ``["logits"]``, a
  first element): plain modules, and ``transformers`` models loaded with ``AutoModel`` (masked
  diffusion LMs such as LLaDA, remote code only where the user asks for it).
- :class:`ShiftedLogitsPredictor`: logits at position ``i`` predict the token at ``i + 1``
  (Dream, adapted from an autoregressive model).
- :class:`TimeConditionedPredictor`: a denoiser that takes a timestep or noise level, given by
  a hook from each copy's masking rate (MDLM's).

:func:`~skmpt.text.as_predictor` picks the family from a model and the options, and
:func:`skmpt.text.load_masked_lm` returns one. A family of your own is a subclass of
:class:`MaskedPredictor` with :meth:`~skmpt.text.MaskedPredictor.logits`; :func:`skmpt.testing.check_masked_predictor`
checks it. A tokenizer without a mask token (MDLM uses GPT-2's, masking with the id 50257, one
past its vocabulary) needs ``mask_token_id``, checked by :func:`check_mask_token_id`.
"""

import abc
import contextlib
import copy
import inspect
from numbers import Integral

import torch

from .._validation import Interval, validate_parameters, validated

__all__ = [
    "MaskedLMPredictor",
    "MaskedPredictor",
    "MaskedPredictorError",
    "ModulePredictor",
    "ShiftedLogitsPredictor",
    "ShiftedTimeConditionedPredictor",
    "TimeConditionedPredictor",
    "as_predictor",
    "check_mask_token_id",
    "check_vocab_size",
    "language_model_head",
    "output_logits",
    "timestep_kwargs",
]

# Attributes that hold the language-model head of the masked-LM classes in transformers
# (``cls`` for the BERT family, ``lm_head`` for RoBERTa, XLM-R, CamemBERT, ...).
_HEAD_ATTRIBUTES = ("cls", "lm_head")


class MaskedPredictorError(ValueError):
    """A predictor's output is not what skmpt needs: no logits, logits of the wrong shape, a bad timestep hook."""


def _describe(output):
    """What an output holds, for an error message: its type and the shapes of its tensors."""
    if isinstance(output, torch.Tensor):
        return f"a tensor of shape {tuple(output.shape)}"
    if isinstance(output, dict) or hasattr(output, "keys"):
        items = {key: output[key] for key in output.keys()}
    elif isinstance(output, (tuple, list)):
        items = {f"[{i}]": value for i, value in enumerate(output)}
    else:
        items = {key: value for key, value in vars(output).items() if not key.startswith("_")} if hasattr(
            output, "__dict__") else {}
    shapes = [f"{key}: {tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__}"
              for key, value in items.items()]
    return f"a {type(output).__name__} holding {{{', '.join(shapes)}}}" if shapes else f"a {type(output).__name__}"


def output_logits(output):
    """The per-position logits of a model's output: ``.logits``, ``["logits"]``, a tensor or a first element.

    Raises
    ------
    ValueError
        When none of them is a 3-dimensional tensor, naming what was found (a base model returns
        ``last_hidden_state`` and no logits).

    Examples
    --------
    >>> import types, torch
    >>> from skmpt.text.predictors import output_logits
    >>> output_logits(types.SimpleNamespace(logits=torch.zeros(1, 2, 3))).shape
    torch.Size([1, 2, 3])
    >>> output_logits({"last_hidden_state": torch.zeros(1, 2, 8)})
    Traceback (most recent call last):
    ...
    skmpt.text.predictors.MaskedPredictorError: The model's output holds no usable logits of shape ...
    """
    if isinstance(output, torch.Tensor):
        logits = output
    elif isinstance(output, dict) or (hasattr(output, "keys") and "logits" in output.keys()):
        logits = output.get("logits")
    elif getattr(output, "logits", None) is not None:
        logits = output.logits
    elif isinstance(output, (tuple, list)) and output:
        logits = output[0]
    else:
        logits = None
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3 or not logits.is_floating_point():
        raise MaskedPredictorError(
            "The model's output holds no usable logits of shape (batch, length, vocab_size): found "
            f"{_describe(output)}. A base model (last_hidden_state only) needs its language-model head; a "
            "model of your own must return the logits, or an output with .logits."
        )
    return logits


def timestep_kwargs(timestep_fn, rates):
    """The model's extra keyword arguments from ``timestep_fn(rates)``, each checked to have ``len(rates)`` rows.

    Parameters
    ----------
    timestep_fn : callable or None
        The hook: ``rates`` (float64 tensor of shape ``(n_copies,)``, each copy's masking rate
        ``M / L``) to a dict of keyword arguments whose values are tensors of first dimension
        ``n_copies``.
    rates : torch.Tensor of shape (n_copies,)

    Returns
    -------
    kwargs : dict

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.predictors import timestep_kwargs
    >>> timestep_kwargs(lambda rate: {"timesteps": rate.float()}, torch.tensor([0.5, 1.0]))
    {'timesteps': tensor([0.5000, 1.0000])}
    >>> timestep_kwargs(lambda rate: {"timesteps": rate[:1]}, torch.tensor([0.5, 1.0]))
    Traceback (most recent call last):
    ...
    skmpt.text.predictors.MaskedPredictorError: timestep_fn returned 'timesteps' of shape (1,) for 2 masked copies; ...
    """
    if timestep_fn is None:
        return {}
    kwargs = timestep_fn(rates)
    if not isinstance(kwargs, dict) or not all(isinstance(key, str) for key in kwargs):
        raise MaskedPredictorError(
            f"timestep_fn must return a dict of keyword arguments of the model (e.g. {{'timesteps': rate}}); "
            f"got {type(kwargs).__name__}."
        )
    for key, value in kwargs.items():
        if not isinstance(value, torch.Tensor) or value.ndim < 1 or value.shape[0] != len(rates):
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise MaskedPredictorError(
                f"timestep_fn returned {key!r} of shape {shape} for {len(rates)} masked copies; each value must "
                f"be a tensor whose first dimension is the number of copies ({len(rates)},)."
            )
    return kwargs


@validated({"mask_token_id": [None, Interval(Integral, 0, None, closed="left")],
            "vocab_size": [None, Interval(Integral, 1, None, closed="left")]})
def check_mask_token_id(mask_token_id, tokenizer, vocab_size=None):
    """The id that masks a token: the tokenizer's mask token, or ``mask_token_id``, checked.

    Parameters
    ----------
    mask_token_id : int or None
        ``None`` takes the tokenizer's mask token.
    tokenizer : transformers tokenizer
    vocab_size : int or None, default=None
        Number of ids the model takes or predicts, when known.

    Returns
    -------
    mask_token_id : int

    Raises
    ------
    ValueError
        Without a mask token and without ``mask_token_id``; for an id that is negative or not
        below ``vocab_size``, or that is the padding id or another special token's.

    Examples
    --------
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text.predictors import check_mask_token_id
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:50], vocab_size=200)
    >>> check_mask_token_id(None, tokenizer) == tokenizer.mask_token_id
    True
    >>> check_mask_token_id(tokenizer.pad_token_id, tokenizer)
    Traceback (most recent call last):
    ...
    ValueError: mask_token_id=0 is the padding token's id; ...
    """
    own = getattr(tokenizer, "mask_token_id", None)
    if mask_token_id is None:
        if own is None:
            raise ValueError(
                f"The tokenizer ({type(tokenizer).__name__}) has no mask token; pass mask_token_id=, the id the "
                "model was trained to read as a mask (e.g. 50257 for MDLM with GPT-2's tokenizer)."
            )
        mask_token_id = own
    mask_token_id = int(mask_token_id)
    if vocab_size is not None and mask_token_id >= vocab_size:
        raise ValueError(
            f"mask_token_id={mask_token_id} is outside the model's vocabulary of {vocab_size} ids "
            f"(0..{vocab_size - 1})."
        )
    if mask_token_id == getattr(tokenizer, "pad_token_id", None):
        raise ValueError(f"mask_token_id={mask_token_id} is the padding token's id; a mask must be its own token.")
    specials = set(getattr(tokenizer, "all_special_ids", ())) - {own}
    if mask_token_id in specials:
        token = tokenizer.convert_ids_to_tokens(mask_token_id)
        raise ValueError(
            f"mask_token_id={mask_token_id} is the special token {token!r}; a mask must be its own token, not one "
            "the tokenizer adds or pads with."
        )
    return mask_token_id


def check_vocab_size(vocab_size, tokenizer, mask_token_id):
    """The logits' ``vocab_size`` must cover every id the tokenizer produces and the mask id; returns it.

    Examples
    --------
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text.predictors import check_vocab_size
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:50], vocab_size=200)
    >>> check_vocab_size(len(tokenizer), tokenizer, tokenizer.mask_token_id) == len(tokenizer)
    True
    """
    largest = max(max(tokenizer.get_vocab().values()), len(tokenizer) - 1)
    if largest >= vocab_size:
        raise ValueError(
            f"The tokenizer can produce token ids up to {largest} but the model's logits cover {vocab_size} ids "
            f"(0..{vocab_size - 1}): they do not belong together."
        )
    check_mask_token_id(mask_token_id, tokenizer, vocab_size)
    return int(vocab_size)


def language_model_head(model):
    """``(encoder, head)`` when ``model`` is a base model plus one known head, else ``None``.

    Examples
    --------
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.text.predictors import language_model_head
    >>> model = BertForMaskedLM(BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
    ...                                    num_attention_heads=1, intermediate_size=8))
    >>> language_model_head(model)[1] is model.cls
    True
    """
    base = getattr(model, "base_model", None)
    children = {name: module for name, module in model.named_children() if module is not base}
    if base is None or base is model or len(children) != 1:
        return None
    name, head = next(iter(children.items()))
    return (base, head) if name in _HEAD_ATTRIBUTES else None


class _CallableModule(torch.nn.Module):
    """A callable as a module without parameters, so that every predictor holds a module."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, **inputs):
        return self.function(**inputs)


class MaskedPredictor(abc.ABC):
    """What skmpt needs of a masked predictor: logits of masked copies, the mask id, the logits' layout.

    Subclasses implement :meth:`logits`; the rest has defaults a family may override. A
    predictor holds its ``module`` (a ``torch.nn.Module``: training, moving and casting act on
    it) and never modifies it outside training: :meth:`evaluating` puts it in evaluation mode
    for a block and restores every submodule's mode after it.

    Parameters
    ----------
    module : torch.nn.Module
    mask_token_id : int
        The id that replaces a masked token.

    Attributes
    ----------
    shift : int
        Class attribute: the logits at position ``i`` predict the token at ``i + shift`` (0 for
        masked LMs, 1 for :class:`ShiftedLogitsPredictor`).

    Examples
    --------
    A family whose module returns a tuple ``(logits, hidden)``:

    >>> import torch
    >>> from skmpt.text import MaskedPredictor
    >>> class TupleModel(torch.nn.Module):
    ...     def forward(self, input_ids, attention_mask):
    ...         return torch.zeros(*input_ids.shape, 6), None
    >>> class TuplePredictor(MaskedPredictor):
    ...     def logits(self, input_ids, attention_mask, rates):
    ...         return self.module(input_ids, attention_mask)[0]
    >>> predictor = TuplePredictor(TupleModel(), mask_token_id=5)
    >>> ids = torch.zeros(2, 3, dtype=torch.long)
    >>> predictor.target_logits(ids, torch.ones_like(ids), torch.tensor([0.5, 1.0]),
    ...                         torch.tensor([0, 1]), torch.tensor([2, 0])).shape
    torch.Size([2, 6])
    """

    shift = 0

    def __init__(self, module, mask_token_id):
        validate_parameters({"module": module}, {"module": [torch.nn.Module]}, type(self).__name__)
        self.module = module
        self.mask_token_id = int(mask_token_id)

    @abc.abstractmethod
    def logits(self, input_ids, attention_mask, rates):
        """Logits at every position, of shape (batch, length, vocab_size).

        Parameters
        ----------
        input_ids : torch.Tensor of dtype long and shape (batch, length)
            Masked copies, padded; masked tokens hold ``mask_token_id``.
        attention_mask : torch.Tensor of dtype long and shape (batch, length)
            1 at real tokens, 0 at padding.
        rates : torch.Tensor of dtype float64 and shape (batch,)
            Each copy's masking rate ``M / L`` (on the CPU), for time-conditioned families.

        Returns
        -------
        logits : torch.Tensor of shape (batch, length, vocab_size)
            Row ``i`` predicts the token at ``i + shift``.
        """

    def target_logits(self, input_ids, attention_mask, rates, rows, positions):
        """The logits that predict the tokens at ``(rows, positions)``, of shape (n_targets, vocab_size).

        Defaults to :meth:`logits` read at ``positions - shift``; a family with an encoder and a
        head runs the head only there (:class:`MaskedLMPredictor`).
        """
        return self.logits(input_ids, attention_mask, rates)[rows, positions - self.shift]

    def check_positions(self, first_position):  # noqa: B027 - a hook: nothing to check where shift is 0
        """A text's first own token must have logits that predict it: at ``first_position - shift >= 0``."""

    @property
    def dtype(self):
        """The dtype of the module's floating-point parameters, or ``None`` when it has none."""
        return next((p.dtype for p in self.module.parameters() if p.is_floating_point()), None)

    def with_module(self, module):
        """The same predictor over another module (a ``DistributedDataParallel`` wrapper of its own)."""
        clone = copy.copy(self)
        clone.module = module
        return clone

    @contextlib.contextmanager
    def evaluating(self):
        """The module in evaluation mode within the block; every submodule's own mode restored after it."""
        modes = [(module, module.training) for module in self.module.modules()]
        self.module.eval()
        try:
            yield self
        finally:
            for module, training in modes:
                module.training = training


class MaskedLMPredictor(MaskedPredictor):
    """A masked LM of ``transformers``: logits from its output, its head only at the masked positions.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A ``...ForMaskedLM`` model.
    mask_token_id : int

    Examples
    --------
    >>> import torch
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.text import MaskedLMPredictor
    >>> model = BertForMaskedLM(BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
    ...                                    num_attention_heads=1, intermediate_size=8)).eval()
    >>> predictor = MaskedLMPredictor(model, mask_token_id=4)
    >>> ids = torch.tensor([[2, 4, 7, 3]])
    >>> rows, positions = torch.tensor([0]), torch.tensor([1])
    >>> head_only = predictor.target_logits(ids, torch.ones_like(ids), None, rows, positions)
    >>> bool(torch.allclose(head_only, predictor.logits(ids, torch.ones_like(ids), None)[rows, positions]))
    True
    """

    def __init__(self, model, mask_token_id):
        super().__init__(model, mask_token_id)
        self.split = language_model_head(model)

    def logits(self, input_ids, attention_mask, rates):
        return _checked(output_logits(self.module(input_ids=input_ids, attention_mask=attention_mask)), input_ids)

    def target_logits(self, input_ids, attention_mask, rates, rows, positions):
        if self.split is None:
            return super().target_logits(input_ids, attention_mask, rates, rows, positions)
        encoder, head = self.split
        hidden = encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return head(hidden[rows, positions])

    def with_module(self, module):
        clone = super().with_module(module)
        clone.split = language_model_head(module)  # None for a wrapper (DDP): it runs whole, so that it synchronises
        return clone


class ModulePredictor(MaskedPredictor):
    """A module or callable mapping ``input_ids`` and ``attention_mask`` to logits (or an output holding them).

    Plain ``torch.nn.Module`` objects, callables, and ``transformers`` models loaded with
    ``AutoModel`` whose output holds logits (:func:`~skmpt.text.predictors.output_logits`). It is called as
    ``module(input_ids=..., attention_mask=..., **forward_kwargs(rates))``.

    Parameters
    ----------
    module : torch.nn.Module or callable
    mask_token_id : int

    Examples
    --------
    >>> import torch
    >>> from skmpt.text import ModulePredictor
    >>> predictor = ModulePredictor(lambda input_ids, attention_mask: torch.zeros(*input_ids.shape, 5), 4)
    >>> ids = torch.zeros(2, 3, dtype=torch.long)
    >>> predictor.logits(ids, torch.ones_like(ids), torch.tensor([0.5, 1.0])).shape
    torch.Size([2, 3, 5])
    """

    def __init__(self, module, mask_token_id):
        validate_parameters({"module": module}, {"module": ["callable"]}, type(self).__name__)
        if not isinstance(module, torch.nn.Module):
            module = _CallableModule(module)
        super().__init__(module, mask_token_id)

    def forward_kwargs(self, rates):
        """Keyword arguments of the module's forward beyond ``input_ids`` and ``attention_mask``: none."""
        return {}

    def logits(self, input_ids, attention_mask, rates):
        extra = {key: value.to(input_ids.device) for key, value in self.forward_kwargs(rates).items()}
        try:
            output = self.module(input_ids=input_ids, attention_mask=attention_mask, **extra)
        except TypeError:
            self.check_signature(["input_ids", "attention_mask", *extra])
            raise  # the call's arguments fit: a TypeError of the model's own
        return _checked(output_logits(output), input_ids)

    def check_signature(self, names):
        """Refuse a module whose ``forward`` (or a callable) cannot take the keyword arguments ``names``.

        Raises :class:`~skmpt.text.predictors.MaskedPredictorError` naming what it must accept;
        returns quietly when they fit or when the signature cannot be read.
        """
        function = self.module.function if isinstance(self.module, _CallableModule) else self.module.forward
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):  # a builtin without a readable signature: its own error stands
            return
        try:
            signature.bind(**dict.fromkeys(names))
        except TypeError as error:
            arguments = ", ".join(f"{name}=..." for name in names)
            raise MaskedPredictorError(
                f"{type(self).__name__} calls its model as model({arguments}), but the model's signature is "
                f"{signature} ({error}). A model or callable must accept these keyword arguments (ignore those it "
                "does not need, e.g. lambda input_ids, attention_mask: f(input_ids))."
            ) from None


class ShiftedLogitsPredictor(ModulePredictor):
    """A module whose logits at position ``i`` predict the token at ``i + 1`` (Dream).

    The tokenizer must put a token (such as BOS) in front of a text, whose logits predict the
    text's first token.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text import ShiftedLogitsPredictor
    >>> predictor = ShiftedLogitsPredictor(lambda input_ids, attention_mask: torch.zeros(*input_ids.shape, 5), 4)
    >>> predictor.shift
    1
    """

    shift = 1

    def check_positions(self, first_position):
        if first_position < self.shift:
            raise ValueError(
                "shift_logits=True reads a token's logits at the position before it, but the text's first token "
                "is at position 0: the tokenizer adds no token (such as BOS) in front of a text."
            )


class TimeConditionedPredictor(ModulePredictor):
    """A denoiser that takes a timestep: ``timestep_fn(rates)`` gives its extra forward arguments.

    Parameters
    ----------
    module : torch.nn.Module or callable
    mask_token_id : int
    timestep_fn : callable
        From each copy's masking rate ``M / L`` (float64 tensor of shape ``(n_copies,)``) to a
        dict of keyword arguments of the forward, each a tensor of first dimension ``n_copies``
        (:func:`~skmpt.text.predictors.timestep_kwargs`), e.g. ``lambda rate: {"timesteps": rate}``: under the linear
        schedule ``alpha_t = 1 - t`` a token is masked with probability ``M / L`` at ``t = M / L``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text import TimeConditionedPredictor
    >>> def denoiser(input_ids, attention_mask, timesteps):
    ...     return timesteps.view(-1, 1, 1) * torch.ones(*input_ids.shape, 5)
    >>> predictor = TimeConditionedPredictor(denoiser, 4, lambda rate: {"timesteps": rate.float()})
    >>> ids = torch.zeros(2, 3, dtype=torch.long)
    >>> predictor.logits(ids, torch.ones_like(ids), torch.tensor([0.5, 1.0]))[:, 0, 0].tolist()
    [0.5, 1.0]
    """

    def __init__(self, module, mask_token_id, timestep_fn):
        super().__init__(module, mask_token_id)
        validate_parameters({"timestep_fn": timestep_fn}, {"timestep_fn": ["callable"]}, type(self).__name__)
        self.timestep_fn = timestep_fn

    def forward_kwargs(self, rates):
        return timestep_kwargs(self.timestep_fn, rates)


class ShiftedTimeConditionedPredictor(ShiftedLogitsPredictor, TimeConditionedPredictor):
    """A denoiser that takes a timestep and whose logits at position ``i`` predict the token at ``i + 1``.

    Examples
    --------
    >>> from skmpt.text.predictors import ShiftedTimeConditionedPredictor
    >>> ShiftedTimeConditionedPredictor.shift
    1
    """


def as_predictor(model, mask_token_id, *, shift_logits=False, timestep_fn=None):
    """The predictor of a model's family: a predictor as it is, else the class the model and options name.

    Parameters
    ----------
    model : MaskedPredictor, torch.nn.Module or callable
        A masked LM of ``transformers`` becomes a :class:`MaskedLMPredictor`; another module or
        callable a :class:`ModulePredictor`, :class:`ShiftedLogitsPredictor` (``shift_logits``),
        :class:`TimeConditionedPredictor` (``timestep_fn``) or, with both,
        :class:`~skmpt.text.predictors.ShiftedTimeConditionedPredictor`.
    mask_token_id : int or None
        The id that masks a token. A predictor keeps its own: ``None`` or that id, any other is
        refused.
    shift_logits : bool, default=False
    timestep_fn : callable or None, default=None

    Returns
    -------
    predictor : MaskedPredictor

    Raises
    ------
    ValueError
        For a predictor with ``shift_logits`` or ``timestep_fn``, or with a ``mask_token_id``
        other than its own.

    Examples
    --------
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.text import as_predictor
    >>> model = BertForMaskedLM(BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
    ...                                    num_attention_heads=1, intermediate_size=8))
    >>> predictor = as_predictor(model, 4)
    >>> type(predictor).__name__
    'MaskedLMPredictor'
    >>> as_predictor(predictor, 4) is predictor
    True
    >>> as_predictor(predictor, 5)
    Traceback (most recent call last):
    ...
    ValueError: mask_token_id=5 differs from the predictor's own (4); ...
    """
    if isinstance(model, MaskedPredictor):
        if shift_logits or timestep_fn is not None:
            raise ValueError(
                f"model is a {type(model).__name__}, a predictor that knows its own layout: shift_logits and "
                "timestep_fn are options of the built-in families only."
            )
        if mask_token_id is not None and int(mask_token_id) != model.mask_token_id:
            raise ValueError(
                f"mask_token_id={mask_token_id} differs from the predictor's own ({model.mask_token_id}); a "
                f"{type(model).__name__} keeps the mask id it was built with: pass None or {model.mask_token_id}, "
                "or build the predictor with the other id."
            )
        return model
    if shift_logits and timestep_fn is not None:
        return ShiftedTimeConditionedPredictor(model, mask_token_id, timestep_fn)
    if shift_logits:
        return ShiftedLogitsPredictor(model, mask_token_id)
    if timestep_fn is not None:
        return TimeConditionedPredictor(model, mask_token_id, timestep_fn)
    if isinstance(model, torch.nn.Module) and language_model_head(model) is not None:
        return MaskedLMPredictor(model, mask_token_id)
    return ModulePredictor(model, mask_token_id)


def _checked(logits, input_ids):
    """Logits must have one row per input position: shape (batch, length, vocab_size), on the
    inputs' device."""
    if logits.device != input_ids.device:
        raise MaskedPredictorError(
            f"The model's logits are on {logits.device} for input_ids on {input_ids.device}: a model must return "
            f"them on its inputs' device (create any tensor of its own on input_ids.device)."
        )
    if logits.shape[:2] != input_ids.shape:
        raise MaskedPredictorError(
            f"The model's logits have shape {tuple(logits.shape)} for input_ids of shape "
            f"{tuple(input_ids.shape)}: they must be (batch, length, vocab_size)."
        )
    return logits
