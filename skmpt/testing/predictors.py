"""The masked-predictor contract, one check function per rule: :func:`check_masked_predictor`.

What :func:`check_masked_model` is to the array side's models, this is to the text side's
predictors (:class:`skmpt.text.MaskedPredictor`): a user's own family, or a built-in one over a
user's model, is held to what the runner relies on. Each check takes a
:class:`MaskedPredictorCase`, raises ``AssertionError`` naming the predictor and the rule when it
is broken, and records what it measured in ``case.report``; :data:`MASKED_PREDICTOR_CHECKS`
lists them in the order :func:`check_masked_predictor` runs them.
"""

import torch

from ..text.encoding import encode_texts
from ..text.predictors import MaskedPredictor, check_mask_token_id

__all__ = [
    "MASKED_PREDICTOR_CHECKS",
    "MaskedPredictorCase",
    "check_deterministic",
    "check_finite_logits",
    "check_logits_shape",
    "check_mask_id",
    "check_masked_predictor",
    "check_module_unchanged",
    "check_not_hidden_states",
    "check_padding_invariance",
]


def _module_state(module):
    """Copies of every parameter and buffer, and every submodule's train/eval mode."""
    tensors = {name: tensor.detach().clone() for name, tensor in module.state_dict().items()}
    return tensors, [submodule.training for submodule in module.modules()]


class MaskedPredictorCase:
    """A predictor, its tokenizer and a small batch of masked copies that every check runs on.

    The batch holds the text that the tokenizer's first ``n_tokens`` ordinary (not special)
    tokens spell, with its special tokens around it, once per own token with that token masked
    (``input_ids``); ``text_ids`` holds the same copies unmasked, which the checks that run
    before the mask id is known to be in range use. The module's parameters, buffers and modes
    are recorded first, for :func:`~skmpt.testing.predictors.check_module_unchanged`.

    Parameters
    ----------
    predictor : MaskedPredictor
    tokenizer : transformers tokenizer
    n_tokens : int, default=5
        Own tokens per text.
    rtol, atol : float, default=1e-4, 1e-5
        Tolerances of the comparisons of logits (padding, determinism).

    Attributes
    ----------
    report : dict
        What each check measured, by the check's name.
    """

    def __init__(self, predictor, tokenizer, *, n_tokens=5, rtol=1e-4, atol=1e-5):
        if not isinstance(predictor, MaskedPredictor):
            raise TypeError(
                f"The checks take a MaskedPredictor; got {type(predictor).__name__}. Wrap a model with "
                "skmpt.text.as_predictor(model, mask_token_id), or subclass skmpt.text.MaskedPredictor."
            )
        self.predictor, self.tokenizer, self.rtol, self.atol = predictor, tokenizer, rtol, atol
        self.name = type(predictor).__name__
        self.state = _module_state(predictor.module)
        self.device = next((p.device for p in predictor.module.parameters()), torch.device("cpu"))
        specials = set(tokenizer.all_special_ids) | {predictor.mask_token_id}
        ordinary = [i for i in sorted(tokenizer.get_vocab().values()) if i not in specials][:n_tokens]
        # the text those tokens spell, encoded as every text is: the tokenizer's special tokens around it
        encoded = encode_texts([tokenizer.decode(ordinary, skip_special_tokens=True)], tokenizer, 512)
        ids, own = encoded.input_ids[0], encoded.content_positions[0]
        if len(own) < 2:
            raise ValueError(f"The tokenizer's first tokens make a text of {len(own)} tokens; the checks need 2.")
        # one copy per own token, that token masked
        self.text_ids = ids.repeat(len(own), 1)
        self.input_ids = self.text_ids.clone()
        self.input_ids[torch.arange(len(own)), own] = predictor.mask_token_id
        self.attention_mask = torch.ones_like(self.input_ids)
        self.rates = torch.full((len(own),), 1 / len(own), dtype=torch.float64)
        self.own = own
        self.report = {}

    def fail(self, rule, message):
        raise AssertionError(f"{self.name} breaks the masked-predictor contract ({rule}): {message}")

    def logits(self, input_ids=None, attention_mask=None):
        """The predictor's logits of the case's batch (or of the ids given), in evaluation mode, on the CPU."""
        input_ids = self.input_ids if input_ids is None else input_ids
        attention_mask = self.attention_mask if attention_mask is None else attention_mask
        with torch.inference_mode(), self.predictor.evaluating():
            logits = self.predictor.logits(input_ids.to(self.device), attention_mask.to(self.device), self.rates)
        if not isinstance(logits, torch.Tensor):
            self.fail("logits shape", f"logits() returned a {type(logits).__name__}, not a tensor.")
        return logits.detach().float().cpu()

    def target_logits(self):
        """The logits the runner reads: those that predict each copy's masked token, of shape (copies, V)."""
        rows = torch.arange(len(self.own))
        with torch.inference_mode(), self.predictor.evaluating():
            logits = self.predictor.target_logits(self.input_ids.to(self.device), self.attention_mask.to(self.device),
                                                  self.rates, rows.to(self.device), self.own.to(self.device))
        return logits.detach().float().cpu()


def _equal(first, second, rtol, atol):
    """Whether two logits agree within the tolerances, equal infinities and NaN included; and by how much they differ.

    The difference is the largest over the entries that are finite in both (0 when none is).
    """
    same = torch.allclose(first, second, rtol=rtol, atol=atol, equal_nan=True)
    finite = torch.isfinite(first) & torch.isfinite(second)
    difference = float((first[finite] - second[finite]).abs().max()) if bool(finite.any()) else 0.0
    return same, difference


def check_logits_shape(case):
    """``"logits shape"``: logits of shape (batch, length, V), ``V`` covering every id the tokenizer makes.

    Run on the case's copies unmasked (``case.text_ids``): the mask id is checked against ``V``
    next (:func:`~skmpt.testing.predictors.check_mask_id`), before any copy holds it.

    Examples
    --------
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import MaskedLMPredictor
    >>> from skmpt.testing import MaskedPredictorCase
    >>> from skmpt.testing.predictors import check_logits_shape
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                                    num_attention_heads=2, intermediate_size=32))
    >>> case = MaskedPredictorCase(MaskedLMPredictor(model, tokenizer.mask_token_id), tokenizer)
    >>> check_logits_shape(case)
    >>> case.report["logits shape"] == len(tokenizer)
    True
    """
    logits = case.logits(case.text_ids)
    if logits.ndim != 3 or logits.shape[:2] != case.input_ids.shape:
        case.fail("logits shape", f"logits of shape {tuple(logits.shape)} for input_ids of shape "
                                  f"{tuple(case.input_ids.shape)}; they must be (batch, length, vocab_size).")
    largest = max(max(case.tokenizer.get_vocab().values()), len(case.tokenizer) - 1)
    if largest >= logits.shape[-1]:
        case.fail("logits shape", f"the tokenizer can produce ids up to {largest} but the logits cover "
                                  f"{logits.shape[-1]} ids (0..{logits.shape[-1] - 1}).")
    case.report["logits shape"] = int(logits.shape[-1])


def check_finite_logits(case):
    """``"finite logits"``: the logits that predict masked tokens give each of them a finite log-probability.

    What the runner needs of the logits it reads (those at the masked positions, through
    :meth:`~skmpt.text.MaskedPredictor.target_logits`): no NaN and no ``+inf``, and a finite
    logit at the masked token, so that its log-probability is finite. ``-inf`` at other tokens
    (tokens the model forbids, such as the mask itself in MDLM's parameterisation) is accepted,
    as are any values at positions the runner does not read (special tokens, unmasked tokens).
    The report holds the number of ``-inf`` logits accepted.

    Examples
    --------
    >>> import torch
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import MaskedPredictor
    >>> from skmpt.testing import MaskedPredictorCase
    >>> from skmpt.testing.predictors import check_finite_logits
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> class NeverMask(MaskedPredictor):  # uniform, but never predicts the mask
    ...     def logits(self, input_ids, attention_mask, rates):
    ...         logits = torch.zeros(*input_ids.shape, len(tokenizer))
    ...         logits[..., self.mask_token_id] = -torch.inf
    ...         return logits
    >>> case = MaskedPredictorCase(NeverMask(torch.nn.Linear(1, 1), tokenizer.mask_token_id), tokenizer)
    >>> check_finite_logits(case)
    >>> case.report["finite logits"] == len(case.own)  # one -inf per masked copy, at the mask id
    True
    """
    logits = case.target_logits()
    targets = case.text_ids[torch.arange(len(case.own)), case.own]
    nan, positive = int(torch.isnan(logits).sum()), int((logits == torch.inf).sum())
    if nan or positive:
        case.fail("finite logits", f"{nan} NaN and {positive} +inf among the {logits.numel()} logits that predict "
                                   "masked tokens; the runner's log-probabilities would be NaN.")
    at_target = logits.gather(1, targets.unsqueeze(1)).squeeze(1)
    forbidden = ~torch.isfinite(at_target)
    if bool(forbidden.any()):
        copy = int(forbidden.nonzero()[0, 0])
        token = case.tokenizer.convert_ids_to_tokens(int(targets[copy]))
        empty = " (a row with no finite logit)" if not bool(torch.isfinite(logits[copy]).any()) else ""
        case.fail("finite logits", f"the logits of {int(forbidden.sum())} of {len(targets)} masked copies are -inf at "
                                   f"the masked token{empty} (first: {token!r}, id {int(targets[copy])}, at position "
                                   f"{int(case.own[copy])}): the runner would give the text a log-probability of "
                                   "-inf. A model may forbid tokens with -inf, but not the tokens of a text.")
    case.report["finite logits"] = int((logits == -torch.inf).sum())


def check_not_hidden_states(case):
    """``"not hidden states"``: a head-less encoder's hidden states are refused, even when as wide as the vocabulary.

    An encoder without its language-model head returns the output of its last normalisation
    layer: logits equal to the output of a module of the predictor's whose class is a norm
    (``LayerNorm``, ``RMSNorm``, ...) are hidden states, whatever their width.
    """
    captured = []
    norms = [m for m in case.predictor.module.modules() if "Norm" in type(m).__name__]
    hooks = [m.register_forward_hook(lambda module, inputs, output: captured.append(output)) for m in norms]
    try:
        logits = case.logits()
    finally:
        for hook in hooks:
            hook.remove()
    for output in captured:
        if isinstance(output, torch.Tensor) and output.shape == logits.shape and torch.allclose(
                output.detach().float().cpu(), logits):
            case.fail("not hidden states", f"the {logits.shape[-1]} values per position are the output of a "
                                           "normalisation layer: the hidden states of an encoder without its "
                                           "language-model head, not logits.")
    case.report["not hidden states"] = len(norms)


def check_mask_id(case):
    """``"mask id"``: the mask id is within the logits' vocabulary and is no padding or other special token.

    The width of the vocabulary is read from the logits of the copies unmasked
    (``case.text_ids``), so that a mask id outside it fails here, not in the model's embedding.
    """
    width = int(case.logits(case.text_ids).shape[-1])
    mask = case.predictor.mask_token_id
    try:
        check_mask_token_id(mask, case.tokenizer, width)
    except ValueError as error:
        case.fail("mask id", str(error))
    case.report["mask id"] = mask


def check_padding_invariance(case):
    """``"padding"``: padding (hidden by the attention mask) does not change the logits that predict real tokens."""
    plain = case.logits()
    plain = plain[:, : plain.shape[1] - case.predictor.shift]  # a shifted family's last row predicts no token
    pad = case.tokenizer.pad_token_id if case.tokenizer.pad_token_id is not None else case.predictor.mask_token_id
    extra = torch.full((len(case.input_ids), 3), pad, dtype=torch.long)
    padded = case.logits(torch.cat([case.input_ids, extra], 1),
                         torch.cat([case.attention_mask, torch.zeros_like(extra)], 1))
    same, difference = _equal(padded[:, : plain.shape[1]], plain, case.rtol, case.atol)
    if not same:
        case.fail("padding", f"three padding positions change the real tokens' logits by up to {difference:.3g}: "
                             "the module must honour attention_mask.")
    case.report["padding"] = difference


def check_deterministic(case):
    """``"deterministic in evaluation"``: two calls in evaluation mode give the same logits (no dropout left on)."""
    same, difference = _equal(case.logits(), case.logits(), case.rtol, case.atol)
    if not same:
        case.fail("deterministic in evaluation", f"two calls differ by up to {difference:.3g}.")
    case.report["deterministic in evaluation"] = difference


def check_module_unchanged(case):
    """``"module unchanged"``: the user's module comes back with its parameters, buffers and modes as they were."""
    tensors, modes = case.state
    now_tensors, now_modes = _module_state(case.predictor.module)
    changed = [name for name, tensor in tensors.items()
               if name not in now_tensors or not torch.equal(tensor, now_tensors[name])]
    if changed:
        names = ", ".join(changed[:3])
        case.fail("module unchanged", f"scoring changed {len(changed)} parameters or buffers: {names}.")
    if modes != now_modes:
        case.fail("module unchanged", "scoring changed the train/eval mode of the module or its submodules.")
    case.report["module unchanged"] = 0


#: Every check of the masked-predictor contract, in the order :func:`check_masked_predictor` runs them.
MASKED_PREDICTOR_CHECKS = (
    check_logits_shape,
    check_mask_id,
    check_finite_logits,
    check_not_hidden_states,
    check_deterministic,
    check_padding_invariance,
    check_module_unchanged,
)


def check_masked_predictor(predictor, tokenizer, *, rtol=1e-4, atol=1e-5):
    """Check that a masked predictor keeps the contract skmpt's runner relies on.

    Runs :data:`MASKED_PREDICTOR_CHECKS` in order on one :class:`MaskedPredictorCase`, stopping
    at the first failure: logits of shape (batch, length, V) over the tokenizer's vocabulary
    (:func:`~skmpt.testing.predictors.check_logits_shape`); a mask id in range that is no
    special token's (:func:`~skmpt.testing.predictors.check_mask_id`); a finite log-probability of
    every masked token, ``-inf`` accepted at the tokens a model forbids
    (:func:`~skmpt.testing.predictors.check_finite_logits`); not the hidden states of a head-less
    encoder (:func:`~skmpt.testing.predictors.check_not_hidden_states`); deterministic in evaluation
    (:func:`~skmpt.testing.predictors.check_deterministic`); padding that does not change the real
    tokens' logits (:func:`~skmpt.testing.predictors.check_padding_invariance`); and the module
    returned with its parameters and train/eval modes unchanged
    (:func:`~skmpt.testing.predictors.check_module_unchanged`).

    Parameters
    ----------
    predictor : MaskedPredictor
        A predictor (:mod:`skmpt.text.predictors`), e.g. from :func:`skmpt.text.as_predictor`.
    tokenizer : transformers tokenizer
    rtol, atol : float, default=1e-4, 1e-5
        Tolerances for comparing logits (padding, determinism): float32 kernels may differ in
        the last bits with the padded length.

    Returns
    -------
    report : dict
        What each check measured, by name.

    Raises
    ------
    AssertionError
        Naming the predictor and the rule it breaks.
    TypeError
        When ``predictor`` is not a :class:`~skmpt.text.MaskedPredictor` (a bare model).

    Examples
    --------
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import as_predictor
    >>> from skmpt.testing import check_masked_predictor
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                                    num_attention_heads=2, intermediate_size=32))
    >>> report = check_masked_predictor(as_predictor(model, tokenizer.mask_token_id), tokenizer)
    >>> sorted(report)[:3]
    ['deterministic in evaluation', 'finite logits', 'logits shape']
    >>> model.training  # the user's module comes back as it was given
    True
    """
    case = MaskedPredictorCase(predictor, tokenizer, rtol=rtol, atol=atol)
    for check in MASKED_PREDICTOR_CHECKS:
        check(case)
    return case.report
