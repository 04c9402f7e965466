"""Loading a masked language model and its tokenizer, with every check made before any text is scored."""

import contextlib
import copy
import importlib
import logging
import os

import torch
from sklearn.utils import check_random_state

from .._validation import validate_parameters
from .predictors import MaskedPredictor, as_predictor, check_mask_token_id
from .encoding import check_max_length

__all__ = ["check_hub_name", "check_local_path", "load_masked_lm", "load_tokenizer", "model_max_length",
           "require_text_extra"]

logger = logging.getLogger("skmpt.text")


# File endings of model and tokenizer files: a name ending in one is a path, never a hub name.
_FILE_EXTENSIONS = (".bin", ".safetensors", ".json", ".txt", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".model",
                    ".gguf", ".onnx")

# Files from which AutoTokenizer builds a tokenizer; a directory with none of them holds no tokenizer.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.*", "merges.txt", "*.model")

# Options of ``from_pretrained`` that say where and how to fetch; they apply to the tokenizer too.
_HUB_OPTIONS = ("revision", "trust_remote_code", "local_files_only", "cache_dir", "token")

#: The packages of skmpt's "text" extra that every masked LM needs.
TEXT_EXTRA = ("transformers", "tokenizers")


def require_text_extra(what):
    """Import the text extra's packages, or raise an ``ImportError`` naming the extra to install.

    Parameters
    ----------
    what : str
        What needs them, for the message (``"MLMCurveScorer.fit"``).

    Returns
    -------
    transformers : module

    Examples
    --------
    >>> from skmpt.text.loading import require_text_extra
    >>> require_text_extra("this example").__name__
    'transformers'
    """
    modules = []
    for name in TEXT_EXTRA:
        try:
            modules.append(importlib.import_module(name))
        except ImportError as error:
            raise ImportError(
                f"{what} needs {name}, one of the packages of skmpt's text extra ({', '.join(TEXT_EXTRA)}), which "
                f'cannot be imported ({error}). Install it with: pip install "skmpt[text]"'
            ) from error
    return modules[0]


@contextlib.contextmanager
def hidden_transformers_bars(hidden=True):
    """Within the block, transformers' own progress bars ("Loading weights", ...) are hidden.

    With ``hidden=False`` nothing changes. Its warnings are untouched, and the bars' state
    before the block is restored after it.

    Examples
    --------
    >>> from transformers.utils import logging
    >>> from skmpt.text.loading import hidden_transformers_bars
    >>> with hidden_transformers_bars():
    ...     logging.is_progress_bar_enabled()
    False
    """
    from transformers.utils import logging as transformers_logging

    shown = transformers_logging.is_progress_bar_enabled()
    if hidden:
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown and hidden:
            transformers_logging.enable_progress_bar()


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


def check_local_path(source, name):
    """A path (not a hub name) must exist: say so before transformers takes it for a hub name.

    A string is a hub name only when it is not on disk, has the form ``name`` or ``org/name``
    (huggingface_hub's repository-id rules: no ``./``, ``../``, ``~``, leading ``/``, backslash
    or second ``/``) and does not end in a file extension such as ``.bin`` or ``.json``.

    Parameters
    ----------
    source : str or path
        A model or tokenizer source: a hub name or a local path.
    name : str
        What names ``source`` in the error (``"model"``, ``"--model"``).

    Raises
    ------
    ValueError
        When ``source`` is a path that does not exist.

    Examples
    --------
    >>> from skmpt.text.loading import check_local_path
    >>> check_local_path("bert-base-uncased", "model")  # a hub name: not checked here
    >>> check_local_path("./no-such-model", "model")
    Traceback (most recent call last):
    ...
    ValueError: model='./no-such-model' is a path that does not exist ...
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


def _hub_reachable(endpoint, timeout=3.0):
    """Whether a connection to the hub's host opens within ``timeout`` seconds (a proxy is taken as reachable)."""
    import socket
    from urllib.parse import urlsplit

    if any(os.environ.get(key) for key in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True  # the proxy, not this machine, reaches the hub
    url = urlsplit(endpoint)
    try:
        with socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout):
            return True
    except OSError:
        return False


def check_hub_name(source, name, *, revision=None, cache_dir=None, local_files_only=False):
    """A hub name that the hub cannot give must be in the local cache: say so at once.

    Offline (``local_files_only``, ``HF_HUB_OFFLINE=1``) or when the hub's host cannot be
    reached, a name that is neither on disk nor in the Hugging Face cache cannot load; transformers
    would retry the hub for a minute or more before saying that it "couldn't connect". Online, or
    for a path, nothing is checked (:func:`check_local_path` checks paths).

    Parameters
    ----------
    source : str or path
        A model source: a hub name or a local path.
    name : str
        What names ``source`` in the error (``"model"``, ``"--model"``).
    revision : str, optional
        The hub revision looked for in the cache (default: ``main``).
    cache_dir : str or path, optional
        The cache (default: the Hugging Face hub's, ``HF_HUB_CACHE``).
    local_files_only : bool, default=False
        Never use the network: the name must be cached.

    Raises
    ------
    ValueError
        When ``source`` is a hub name, not cached, and the hub is offline or cannot be reached.

    Examples
    --------
    >>> import tempfile
    >>> from skmpt.text.loading import check_hub_name
    >>> check_hub_name("nosuchmodel-xyz", "--model", cache_dir=tempfile.mkdtemp(), local_files_only=True)
    Traceback (most recent call last):
    ...
    ValueError: --model='nosuchmodel-xyz': no local directory and no entry of the cache ... and the hub is off ...
    """
    from huggingface_hub import constants, try_to_load_from_cache

    text = os.fspath(source)
    if isinstance(source, os.PathLike) or os.path.exists(os.path.expanduser(text)) or _looks_like_path(text):
        return
    offline = local_files_only or constants.HF_HUB_OFFLINE
    if not offline and _hub_reachable(constants.ENDPOINT):
        return
    cached = try_to_load_from_cache(text, "config.json", cache_dir=cache_dir, revision=revision)
    if isinstance(cached, str):
        return
    why = ("the hub is off (local_files_only or HF_HUB_OFFLINE)" if offline
           else f"the hub, {constants.ENDPOINT}, cannot be reached")
    at = "" if revision is None else f" at revision {revision!r}"
    raise ValueError(
        f"{name}={text!r}: no local directory and no entry of the cache "
        f"({os.fspath(cache_dir or constants.HF_HUB_CACHE)!r}) has that name{at}, and {why}; "
        "give a saved directory, or download the model while online."
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


def _auto_class(config):
    """The Auto class that loads ``config``'s model: ``AutoModelForMaskedLM`` for a masked LM (built in or
    remote), ``AutoModel`` for a model that is not built into transformers (remote code such as LLaDA's or
    Dream's, or a registered class), whose output must hold the logits; ``None`` otherwise."""
    import transformers

    auto_map = getattr(config, "auto_map", None) or {}
    if type(config) in transformers.MODEL_FOR_MASKED_LM_MAPPING or "AutoModelForMaskedLM" in auto_map:
        return transformers.AutoModelForMaskedLM
    if not _built_in(config) and ("AutoModel" in auto_map or type(config) in transformers.MODEL_MAPPING):
        return transformers.AutoModel
    return None


def _built_in(config):
    """Whether ``config``'s model type is one of transformers' own (not remote code nor registered by a user)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return getattr(config, "model_type", None) in CONFIG_MAPPING_NAMES and type(config).__module__.startswith(
        "transformers.")


def _check_masked_lm_class(config, what):
    """``config`` must have a masked-LM class in transformers, or be a model of its own loaded by ``AutoModel``."""
    if _auto_class(config) is None:
        raise ValueError(
            f"{what} is a {getattr(config, 'model_type', type(config).__name__)!r} model, which has no masked "
            "language-model class in transformers (AutoModelForMaskedLM); causal LMs such as GPT-2 cannot be "
            "scored by masking."
        )


def _check_masked_lm_object(model):
    """A transformers model object must be a masked LM with its head, not a base model or a causal LM."""
    import transformers

    if not isinstance(model, transformers.PreTrainedModel) or not _built_in(model.config):
        return  # a user's module or remote code: its output is checked by a probe (check_predictor)
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


def _check_model_type(model, transformers):
    """``model`` is one of the kinds :func:`load_masked_lm` takes (a ``torch.nn.Module`` is a callable)."""
    accepted = [str, os.PathLike, transformers.PretrainedConfig, MaskedPredictor, "callable"]
    validate_parameters({"model": model}, {"model": accepted}, "load_masked_lm")


def _check_model_kwargs(model_kwargs):
    kwargs = dict(model_kwargs or {})
    # remote code runs only when the user asks: an error, never transformers' interactive prompt
    kwargs.setdefault("trust_remote_code", False)
    for key in ("dtype", "torch_dtype", "output_loading_info"):
        if key in kwargs:
            hint = "use the dtype parameter" if key != "output_loading_info" else "it is set by MLMCurveScorer"
            raise ValueError(f"model_kwargs may not hold {key!r}: {hint}.")
    return kwargs


def _model_source(model, kwargs):
    """Check what ``model`` is before any weight loads; returns where its tokenizer may come from."""
    import transformers

    if isinstance(model, (str, os.PathLike)):
        check_local_path(model, "model")
        check_hub_name(model, "model", revision=kwargs.get("revision"), cache_dir=kwargs.get("cache_dir"),
                       local_files_only=kwargs.get("local_files_only", False))
        config = transformers.AutoConfig.from_pretrained(model, **kwargs)
        _check_masked_lm_class(config, f"model={os.fspath(model)!r}")
        return model
    if isinstance(model, transformers.PretrainedConfig):
        _check_masked_lm_class(model, "model")
        return None
    _check_masked_lm_object(model)  # a torch.nn.Module: load_masked_lm validated the type
    return getattr(getattr(model, "config", None), "name_or_path", None) or None


def load_masked_lm(model, *, tokenizer=None, device, dtype=None, model_kwargs=None, allow_missing_weights=False,
                   random_state=None, train=False, verbose=0, mask_token_id=None, shift_logits=False, timestep_fn=None):
    """The masked predictor of ``model`` on ``device`` (in ``dtype``) and its tokenizer; cheap checks first.

    Parameters
    ----------
    model : str, path, transformers.PreTrainedModel, transformers.PretrainedConfig, MaskedPredictor, \
            torch.nn.Module or callable
        As :class:`~skmpt.MLMCurveScorer`'s ``model``.
    tokenizer : str, path, tokenizer object or None, default=None
        As :func:`load_tokenizer`'s ``tokenizer``.
    device : torch.device
    dtype : torch.dtype or None, default=None
        ``None`` keeps the checkpoint's or the model's own dtype.
    model_kwargs : dict or None, default=None
        Further options of ``from_pretrained``.
    allow_missing_weights : bool, default=False
        Accept a checkpoint that lacks weights transformers would initialise at random.
    random_state : int, RandomState instance or None, default=None
        Seeds the random initialisation from a configuration.
    train : bool, default=False
        Whether the model will be trained: a model object is then copied, as it is when it
        must be moved or cast, so that the caller's object is never modified.
    verbose : int, default=0
        When 0, transformers' "Loading weights" progress bar is not shown.
    mask_token_id : int or None, default=None
        The mask id for a tokenizer without a mask token (:func:`~skmpt.text.predictors.check_mask_token_id`).
    shift_logits : bool, default=False
        The model's logits at position ``i`` predict the token at ``i + 1`` (Dream).
    timestep_fn : callable or None, default=None
        The timestep hook of a time-conditioned denoiser.

    Returns
    -------
    predictor : MaskedPredictor
        Of the model's family (:func:`~skmpt.text.as_predictor`). A module loaded, copied, moved or
        cast here is in evaluation mode; a user's module used as it is keeps its mode.
    tokenizer : transformers tokenizer

    Examples
    --------
    >>> import torch
    >>> from transformers import BertConfig
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import load_masked_lm
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=32)
    >>> predictor, tokenizer = load_masked_lm(config, tokenizer=tokenizer, device=torch.device("cpu"), random_state=0)
    >>> type(predictor).__name__, type(predictor.module).__name__, predictor.module.training
    ('MaskedLMPredictor', 'BertForMaskedLM', False)
    """
    transformers = require_text_extra("load_masked_lm")
    _check_model_type(model, transformers)
    kwargs = _check_model_kwargs(model_kwargs)
    own = model if isinstance(model, MaskedPredictor) else None
    if own is not None:
        model = own.module
        mask_token_id = as_predictor(own, mask_token_id).mask_token_id  # refuses an id other than its own
    elif callable(model) and not isinstance(model, (torch.nn.Module, transformers.PretrainedConfig)):
        if train:
            raise ValueError(
                "max_steps > 0 trains the model, but a plain callable has no trainable parameters: pass the "
                "torch.nn.Module itself (a callable's own modules are not reached), or max_steps=0 to score it."
            )
        return _predictor(model, own, tokenizer, None, kwargs, mask_token_id, shift_logits, timestep_fn)
    source = _model_source(model, kwargs)
    tokenizer = load_tokenizer(tokenizer, source, kwargs, mask_token_id=mask_token_id)  # before the weights
    if isinstance(model, (str, os.PathLike)):
        with hidden_transformers_bars(hidden=not verbose):
            loaded = _from_pretrained(model, dtype, kwargs, allow_missing_weights).eval()
    elif isinstance(model, transformers.PretrainedConfig):
        seed = int(check_random_state(random_state).randint(2**31 - 1))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            # from_config writes its dtype into the configuration: give it a copy of the user's
            loaded = _auto_class(model).from_config(copy.deepcopy(model)).eval()
    else:
        parameters = list(model.parameters())
        needs_copy = (
            train
            or any(p.device != device for p in parameters)
            or (dtype is not None and any(p.is_floating_point() and p.dtype != dtype for p in parameters))
        )
        # one copy when training, moving or casting: the user's object is never modified
        loaded = copy.deepcopy(model).eval() if needs_copy else model
    size = _embedding_size(loaded)
    check_mask_token_id(mask_token_id, tokenizer, size)
    largest = max(max(tokenizer.get_vocab().values()), len(tokenizer) - 1)
    if size is not None and largest >= size:
        raise ValueError(
            f"The tokenizer can produce token ids up to {largest} but the model's embedding holds {size} "
            f"(ids 0..{size - 1}): they do not belong together."
        )
    if loaded is not model or any(p.device != device for p in loaded.parameters()):
        loaded = loaded.to(device=device, dtype=dtype) if dtype is not None else loaded.to(device)
    logger.info("Loaded %s (%s) on %s.", type(loaded).__name__, source or "object", device)
    return _predictor(loaded, own, tokenizer, tokenizer, kwargs, mask_token_id, shift_logits, timestep_fn)


def _predictor(module, own, tokenizer, loaded_tokenizer, kwargs, mask_token_id, shift_logits, timestep_fn):
    """The predictor over ``module``: the user's own predictor with its module, or one of the module's family."""
    if loaded_tokenizer is None:
        loaded_tokenizer = load_tokenizer(tokenizer, None, kwargs, mask_token_id=mask_token_id)
    mask = check_mask_token_id(mask_token_id, loaded_tokenizer)
    if own is not None:
        return (own if module is own.module else own.with_module(module)), loaded_tokenizer
    return as_predictor(module, mask, shift_logits=shift_logits, timestep_fn=timestep_fn), loaded_tokenizer


def _from_pretrained(model, dtype, kwargs, allow_missing_weights):
    """``AutoModelForMaskedLM`` (or ``AutoModel``) ``.from_pretrained``, refusing weights it would initialise
    at random."""
    import transformers

    auto = _auto_class(transformers.AutoConfig.from_pretrained(model, **kwargs))
    loaded, info = auto.from_pretrained(
        model, dtype="auto" if dtype is None else dtype, output_loading_info=True, **kwargs
    )
    # transformers initialises missing weights at random (and logs its load report): refuse that
    missing = sorted(info["missing_keys"]) + sorted(str(k) for k in info["mismatched_keys"])
    if missing and not allow_missing_weights:
        raise ValueError(
            f"model={os.fspath(model)!r} lacks {len(missing)} weights of its masked LM, which transformers "
            f"would initialise at random: {', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}. "
            "Is it a base model without its masked-LM head? Set allow_missing_weights=True to accept random "
            "weights, or build a random model from a configuration."
        )
    return loaded


def load_tokenizer(tokenizer, source, model_kwargs=None, *, mask_token_id=None):
    """The tokenizer given, or loaded from ``tokenizer`` or else the model's ``source``.

    Parameters
    ----------
    tokenizer : str, path, tokenizer object or None
        ``None`` loads it from ``source``.
    source : str, path or None
        Where the model came from (a name or directory), or ``None``.
    model_kwargs : dict or None, default=None
        Options of ``from_pretrained``; those that say where to fetch reach
        ``AutoTokenizer.from_pretrained`` (``revision`` only when the tokenizer comes from
        ``source``).
    mask_token_id : int or None, default=None
        The mask id when the tokenizer has no mask token (:func:`~skmpt.text.predictors.check_mask_token_id`).

    Returns
    -------
    tokenizer : transformers tokenizer
        With a mask token or a valid ``mask_token_id``.

    Examples
    --------
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import load_tokenizer
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> load_tokenizer(tokenizer, None) is tokenizer
    True
    """
    import transformers

    kwargs, name = model_kwargs or {}, "tokenizer"
    if tokenizer is None:
        if source is None:
            raise ValueError(
                "tokenizer=None needs a model given by name or directory; pass tokenizer= with a "
                "configuration or a model object that has no name_or_path."
            )
        tokenizer, name = source, "model"
    if isinstance(tokenizer, (str, os.PathLike)):
        check_local_path(tokenizer, name)
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
    check_mask_token_id(mask_token_id, tokenizer)  # a mask token, or a mask id that is no special token's
    return tokenizer


def model_max_length(model, tokenizer, max_length):
    """``max_length`` capped by the model's position embeddings and the tokenizer's own limit.

    RoBERTa-style models reserve the first ``padding_idx + 1`` positions. A length that leaves no
    room for a token beside the special ones is a ``ValueError``.

    Examples
    --------
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text.loading import model_max_length
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1,
    ...                                    num_attention_heads=1, intermediate_size=8, max_position_embeddings=64))
    >>> model_max_length(model, tokenizer, 512)
    64
    """
    limits = [max_length]
    positions = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if positions:
        offset = 0
        if getattr(model.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
            offset = model.config.pad_token_id + 1
        limits.append(positions - offset)
    model_max = getattr(tokenizer, "model_max_length", None)
    if model_max is not None and model_max < 10**6:
        limits.append(model_max)
    check_max_length(tokenizer, int(min(limits)))  # room for one token of the text beside the special ones
    return int(min(limits))
