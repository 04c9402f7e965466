"""Any masked predictor behind the runner: logits from whatever a model returns, and the checks.

:class:`~skmpt.text.MLMCurveScorer` scores, besides a masked LM of ``transformers``, any model
that maps ``input_ids`` (and an ``attention_mask``) to per-position logits over the vocabulary:

- a ``transformers`` model loaded with ``AutoModel`` (masked diffusion LMs such as LLaDA or
  Dream, with ``model_kwargs={"trust_remote_code": True}`` where the user asks for remote code),
  whose output holds logits as ``.logits``, ``["logits"]``, its first element or the output
  itself (:func:`output_logits`);
- a plain ``torch.nn.Module`` or a callable (wrapped in :class:`CallablePredictor`);
- with ``mask_token_id`` for a tokenizer that has no mask token (MDLM uses GPT-2's tokenizer
  and the id 50257, one past its vocabulary), checked by :func:`check_mask_token_id`;
- with ``shift_logits=True`` for models whose logits at position ``i`` predict the token at
  ``i + 1`` (Dream, adapted from an autoregressive model);
- with ``timestep_fn``, the hook for models that take a timestep or noise level: it is called
  with the masking rate ``M / L`` of each masked copy (a float64 tensor of shape
  ``(n_copies,)``) and returns a dict of keyword arguments of the model's forward, each a tensor
  whose first dimension is ``n_copies`` (e.g. ``lambda rate: {"timesteps": rate}``; under the
  linear schedule ``alpha_t = 1 - t`` the time at which a token is masked with probability
  ``M / L`` is ``t = M / L``).

:func:`check_predictor` runs one probe forward pass on a few ids before any text is scored, so
that a model whose output has no usable logits, whose logits do not match the input's shape,
whose vocabulary does not hold the tokenizer's ids or the mask id, or whose timestep hook
returns the wrong shape is a ``ValueError`` naming what was found.
"""

import numbers

import torch

__all__ = ["CallablePredictor", "check_mask_token_id", "check_predictor", "check_vocab_size", "output_logits",
           "timestep_kwargs"]


class CallablePredictor(torch.nn.Module):
    """A callable mapping ``input_ids`` (and ``attention_mask``) to logits, as a module.

    Parameters
    ----------
    function : callable
        Called as ``function(input_ids=..., attention_mask=..., **timestep_kwargs)``; returns
        logits of shape ``(batch, length, vocab_size)`` (or an output holding them).

    Examples
    --------
    >>> import torch
    >>> from skmpt.text import CallablePredictor
    >>> predictor = CallablePredictor(lambda input_ids, attention_mask: torch.zeros(*input_ids.shape, 5))
    >>> predictor(input_ids=torch.zeros(2, 3, dtype=torch.long), attention_mask=torch.ones(2, 3)).shape
    torch.Size([2, 3, 5])
    """

    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, **inputs):
        return self.function(**inputs)


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
    >>> from skmpt.text import output_logits
    >>> output_logits(types.SimpleNamespace(logits=torch.zeros(1, 2, 3))).shape
    torch.Size([1, 2, 3])
    >>> output_logits({"last_hidden_state": torch.zeros(1, 2, 8)})
    Traceback (most recent call last):
    ...
    ValueError: The model's output holds no usable logits of shape (batch, length, vocab_size): found a dict ...
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
        raise ValueError(
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
    >>> from skmpt.text import timestep_kwargs
    >>> timestep_kwargs(lambda rate: {"timesteps": rate.float()}, torch.tensor([0.5, 1.0]))
    {'timesteps': tensor([0.5000, 1.0000])}
    >>> timestep_kwargs(lambda rate: {"timesteps": rate[:1]}, torch.tensor([0.5, 1.0]))
    Traceback (most recent call last):
    ...
    ValueError: timestep_fn returned 'timesteps' of shape (1,) for 2 masked copies; ...
    """
    if timestep_fn is None:
        return {}
    kwargs = timestep_fn(rates)
    if not isinstance(kwargs, dict) or not all(isinstance(key, str) for key in kwargs):
        raise ValueError(
            f"timestep_fn must return a dict of keyword arguments of the model (e.g. {{'timesteps': rate}}); "
            f"got {type(kwargs).__name__}."
        )
    for key, value in kwargs.items():
        if not isinstance(value, torch.Tensor) or value.ndim < 1 or value.shape[0] != len(rates):
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise ValueError(
                f"timestep_fn returned {key!r} of shape {shape} for {len(rates)} masked copies; each value must "
                f"be a tensor whose first dimension is the number of copies ({len(rates)},)."
            )
    return kwargs


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
    >>> from skmpt.text import check_mask_token_id
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
    if not isinstance(mask_token_id, numbers.Integral) or isinstance(mask_token_id, bool) or mask_token_id < 0:
        raise ValueError(f"mask_token_id must be a non-negative integer; got {mask_token_id!r}.")
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
    >>> from skmpt.text import check_vocab_size
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


def check_predictor(runner):
    """One probe forward pass of two copies of three ids, before any text: the output's logits checked.

    The runner checks every pass's output (:meth:`~skmpt.text.MaskedLMRunner.logits`): that it
    holds logits (:func:`output_logits`) of shape ``(batch, length, V)``, that ``V`` covers
    every id the tokenizer produces and the mask id (:func:`check_vocab_size`, on the first
    pass), and that the timestep hook returns the right shapes (:func:`timestep_kwargs`). The
    probe makes these errors come before any text is scored. A model that cannot run the probe
    at all (one that takes only inputs of its own length, say) meets the same checks at its
    first pass instead. Returns the vocabulary size, or ``None`` when the probe could not run.
    """
    input_ids = torch.zeros((2, 3), dtype=torch.long, device=runner.device)
    attention_mask = torch.ones((2, 3), dtype=torch.long, device=runner.device)
    rates = torch.tensor([1 / 3, 1.0], dtype=torch.float64)
    extra = {key: value.to(runner.device) for key, value in timestep_kwargs(runner.timestep_fn, rates).items()}
    try:
        with torch.inference_mode(), runner.autocast():
            output = runner.model(input_ids=input_ids, attention_mask=attention_mask, **extra)
    except Exception:  # noqa: BLE001 - e.g. a model of fixed input length: checked at its first pass instead
        return None
    runner.checked_logits(output, input_ids)
    return runner.vocab_size
