"""check_masked_predictor passes skmpt's own families and catches each broken predictor by its rule."""

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from support.text import binary_tokenizer  # noqa: E402
from support.tiny_predictors import MASK_ID, ShiftedLM, TinyBidirectionalLM, gpt2_style_tokenizer  # noqa: E402
from transformers import BertConfig, BertForMaskedLM, BertModel  # noqa: E402

from skmpt.testing import MASKED_PREDICTOR_CHECKS, MaskedPredictorCase, check_masked_predictor  # noqa: E402
from skmpt.text import MaskedPredictor, ModulePredictor, as_predictor  # noqa: E402


def bert(tokenizer, **config):
    config = BertConfig(**{"vocab_size": len(tokenizer), "hidden_size": 8, "num_hidden_layers": 1,
                           "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 32, **config})
    torch.manual_seed(0)
    return BertForMaskedLM(config)


class Logits(MaskedPredictor):
    """A predictor of logits computed by ``function(input_ids, attention_mask)``."""

    def __init__(self, function, mask_token_id, module=None):
        super().__init__(module or torch.nn.Linear(1, 1), mask_token_id)
        self.function = function

    def logits(self, input_ids, attention_mask, rates):
        return self.function(input_ids, attention_mask)


@pytest.mark.parametrize("family", ["masked_lm", "module", "shifted", "timestep"])
def test_skmpt_families_keep_the_contract(family):
    if family == "masked_lm":
        tokenizer = binary_tokenizer()
        predictor = as_predictor(bert(tokenizer), tokenizer.mask_token_id)
    else:
        tokenizer = gpt2_style_tokenizer(bos=family == "shifted")
        module = TinyBidirectionalLM(timestep=family == "timestep")
        module = ShiftedLM(module) if family == "shifted" else module
        predictor = as_predictor(module, MASK_ID, shift_logits=family == "shifted",
                                 timestep_fn=(lambda rate: {"timesteps": rate}) if family == "timestep" else None)
    report = check_masked_predictor(predictor, tokenizer)
    assert len(report) == len(MASKED_PREDICTOR_CHECKS)


def test_each_broken_predictor_is_caught_by_its_rule():
    tokenizer = binary_tokenizer()
    mask, vocab = tokenizer.mask_token_id, len(tokenizer)
    good = as_predictor(bert(tokenizer), mask)
    broken = {
        "logits shape": Logits(lambda ids, attention: torch.zeros(*ids.shape, vocab - 1), mask),
        "finite logits": Logits(lambda ids, attention: torch.full((*ids.shape, vocab), torch.nan), mask),
        "mask id": Logits(lambda ids, attention: torch.zeros(*ids.shape, vocab), tokenizer.pad_token_id),
        "padding": Logits(lambda ids, attention: torch.zeros(*ids.shape, vocab) + ids.shape[1], mask),
        "deterministic in evaluation": Logits(lambda ids, attention: torch.randn(*ids.shape, vocab), mask),
    }
    for rule, predictor in broken.items():
        with pytest.raises(AssertionError, match=re.escape(f"Logits breaks the masked-predictor contract ({rule})")):
            check_masked_predictor(predictor, tokenizer)
    assert check_masked_predictor(good, tokenizer)["logits shape"] == vocab


def test_a_head_less_encoder_as_wide_as_the_vocabulary_is_refused():
    tokenizer = binary_tokenizer()
    vocab = len(tokenizer)
    config = BertConfig(vocab_size=vocab, hidden_size=2 * vocab, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=32)
    encoder = BertModel(config, add_pooling_layer=False)
    hidden_states = ModulePredictor(lambda input_ids, attention_mask: encoder(input_ids, attention_mask)[0],
                                    tokenizer.mask_token_id)
    hidden_states.module.encoder = encoder  # the callable's encoder, visible to the check
    with pytest.raises(AssertionError, match=r"\(not hidden states\).*output of a normalisation layer"):
        check_masked_predictor(hidden_states, tokenizer)


def test_the_users_module_comes_back_as_it_was():
    tokenizer = binary_tokenizer()
    model = bert(tokenizer).train()  # the user's module in training mode, dropout on
    model.config.hidden_dropout_prob = 0.0
    check_masked_predictor(as_predictor(model, tokenizer.mask_token_id), tokenizer)
    assert model.training and all(module.training for module in model.modules())

    class Mutating(MaskedPredictor):
        def logits(self, input_ids, attention_mask, rates):
            with torch.no_grad():
                self.module.weight.add_(1.0)
            return torch.zeros(*input_ids.shape, len(tokenizer))

    with pytest.raises(AssertionError, match=r"\(module unchanged\).*changed 1 parameters"):
        check_masked_predictor(Mutating(torch.nn.Linear(1, 1), tokenizer.mask_token_id), tokenizer)


def test_a_case_needs_a_tokenizer_with_text():
    tokenizer = binary_tokenizer()
    case = MaskedPredictorCase(as_predictor(bert(tokenizer), tokenizer.mask_token_id), tokenizer)
    assert case.input_ids.shape == (len(case.own), len(case.own) + 2)  # [CLS] a b [SEP], one copy per own token


def test_a_model_that_is_not_a_predictor_is_named():
    tokenizer = binary_tokenizer()
    with pytest.raises(TypeError, match="The checks take a MaskedPredictor; got BertForMaskedLM.*as_predictor"):
        check_masked_predictor(bert(tokenizer), tokenizer)


# ---- the kinds of predictor, and what each may put in its logits -----------------------------------------------

def _joint():
    from support.text import JointMaskedLM

    from skmpt.testing import TabularJoint

    tokenizer = binary_tokenizer()  # the case's text is "a b": a joint over two words
    return as_predictor(JointMaskedLM(TabularJoint.random(2, random_state=0), tokenizer),
                        tokenizer.mask_token_id), tokenizer, len(tokenizer)


def _tiny(kind):
    from support.tiny_predictors import VOCAB_SIZE, TinyDiffusionConfig, TinyDiffusionModel

    tokenizer = gpt2_style_tokenizer(bos=kind == "shifted")
    if kind == "transformers":
        return as_predictor(TinyDiffusionModel(TinyDiffusionConfig()), MASK_ID), tokenizer, VOCAB_SIZE
    module = TinyBidirectionalLM(timestep=kind == "timestep")
    module = ShiftedLM(module) if kind == "shifted" else module
    timestep_fn = (lambda rate: {"timesteps": rate}) if kind == "timestep" else None
    return as_predictor(module, MASK_ID, shift_logits=kind == "shifted", timestep_fn=timestep_fn), tokenizer, VOCAB_SIZE


#: Each kind of predictor: (predictor, tokenizer, width of its logits).
KINDS = {
    "masked_lm": lambda: (lambda t: (as_predictor(bert(t), t.mask_token_id), t, len(t)))(binary_tokenizer()),
    "module": lambda: _tiny("module"),
    "shifted": lambda: _tiny("shifted"),
    "timestep": lambda: _tiny("timestep"),
    "transformers": lambda: _tiny("transformers"),
    "joint (-inf off a and b)": _joint,
}


class Edited(MaskedPredictor):
    """``base``'s logits changed by ``edit(logits, read, targets, predictor)`` at the rows the runner reads.

    ``read`` holds the (copy, row) of the logits that predict each masked token and ``targets``
    the masked tokens: in the case's batch every copy holds the same text, each with another of
    its tokens masked, so a copy's masked token is the next copy's token at that position.
    """

    def __init__(self, base, edit):
        super().__init__(base.module, base.mask_token_id)
        self.base, self.edit, self.shift = base, edit, base.shift

    def logits(self, input_ids, attention_mask, rates):
        logits = self.base.logits(input_ids, attention_mask, rates).clone()
        copies, positions = (input_ids == self.mask_token_id).nonzero(as_tuple=True)
        if len(copies):  # the unmasked copies (the shape and mask-id checks) are left as they are
            targets = input_ids[(copies + 1) % len(input_ids), positions]
            self.edit(logits, (copies, positions - self.shift), targets, self)
        return logits


def _specials(predictor, tokenizer):
    return sorted({*tokenizer.all_special_ids, predictor.mask_token_id})


def _unread(logits, read, value):
    """``value`` everywhere but at the rows the runner reads."""
    kept = logits[read].clone()
    logits.fill_(value)
    logits[read] = kept


#: Edits a model may make (accepted) and those the runner cannot score (refused by "finite logits").
ACCEPTED = {
    "-inf at the mask id": lambda logits, read, targets, p: logits[..., p.mask_token_id].fill_(-torch.inf),
    "-inf at every special token": lambda logits, read, targets, p: logits.index_fill_(
        -1, torch.tensor(p.specials), -torch.inf),
    "-inf everywhere but the targets": lambda logits, read, targets, p: _forbid_all_but_targets(
        logits, read, targets, p),
    "NaN at the rows not read": lambda logits, read, targets, p: _unread(logits, read, torch.nan),
    "+inf at the rows not read": lambda logits, read, targets, p: _unread(logits, read, torch.inf),
}


def _forbid_targets(logits, read, targets, predictor):
    rows = logits[read]
    rows[torch.arange(len(rows)), targets] = -torch.inf
    logits[read] = rows


def _forbid_all_but_targets(logits, read, targets, predictor):
    rows = torch.full_like(logits[read], -torch.inf)
    rows[torch.arange(len(rows)), targets] = logits[read][torch.arange(len(rows)), targets]
    logits[read] = rows


def _one(value):
    def edit(logits, read, targets, predictor):
        rows = logits[read]
        rows[0, predictor.mask_token_id] = value
        logits[read] = rows
    return edit


REFUSED = {
    "NaN at one logit read": (_one(torch.nan), "1 NaN and 0 \\+inf"),
    "+inf at one logit read": (_one(torch.inf), "0 NaN and 1 \\+inf"),
    "-inf at the masked tokens": (_forbid_targets, "are -inf at the masked token \\(first"),
    "no finite logit in a row read": (
        lambda logits, read, targets, p: logits.index_put_(
            (read[0][:1], read[1][:1]), torch.tensor(-torch.inf, dtype=logits.dtype)),
        "are -inf at the masked token \\(a row with no finite logit\\)"),
}


def _edited(kind, edit):
    base, tokenizer, _ = KINDS[kind]()
    predictor = Edited(base, edit)
    predictor.specials = _specials(base, tokenizer)
    return predictor, tokenizer


@pytest.mark.parametrize("edit", ACCEPTED)
@pytest.mark.parametrize("kind", KINDS)
def test_logits_the_runner_scores_are_accepted(kind, edit):
    base, tokenizer, _ = KINDS[kind]()
    report = check_masked_predictor(base, tokenizer)
    assert len(report) == len(MASKED_PREDICTOR_CHECKS)
    edited, tokenizer = _edited(kind, ACCEPTED[edit])
    before, after = MaskedPredictorCase(base, tokenizer).logits(), MaskedPredictorCase(edited, tokenizer).logits()
    # the edit took, except where the joint's logits already are -inf (at every token but a and b)
    assert not torch.equal(before, after) or (kind.startswith("joint") and edit.startswith("-inf at"))
    report = check_masked_predictor(edited, tokenizer)
    assert report["finite logits"] >= 0 and report["padding"] == report["padding"]  # a number, never NaN


@pytest.mark.parametrize("edit", REFUSED)
@pytest.mark.parametrize("kind", KINDS)
def test_logits_the_runner_cannot_score_are_refused(kind, edit):
    change, message = REFUSED[edit]
    predictor, tokenizer = _edited(kind, change)
    with pytest.raises(AssertionError, match=r"\(finite logits\): .*" + message):
        check_masked_predictor(predictor, tokenizer)


@pytest.mark.parametrize("kind", KINDS)
def test_a_mask_id_outside_the_vocabulary_fails_its_rule(kind):
    base, tokenizer, width = KINDS[kind]()
    base.mask_token_id = width  # one past the logits (an embedding would raise IndexError on it)
    with pytest.raises(AssertionError, match=rf"\(mask id\): mask_token_id={width} is outside the model's "
                                             rf"vocabulary of {width} ids"):
        check_masked_predictor(base, tokenizer)


@given(forbidden=st.sets(st.integers(0, 13), max_size=14))
@settings(max_examples=25, deadline=None)
def test_forbidding_any_tokens_passes_exactly_when_the_texts_tokens_are_allowed(forbidden):
    base, tokenizer, _ = KINDS["module"]()
    forbidden = torch.tensor(sorted(forbidden), dtype=torch.long)
    predictor = Edited(base, lambda logits, read, targets, p: logits.index_fill_(-1, forbidden, -torch.inf))
    case = MaskedPredictorCase(predictor, tokenizer)
    texts_tokens = set(case.text_ids[0, case.own].tolist())
    if texts_tokens & set(forbidden.tolist()):
        with pytest.raises(AssertionError, match=r"\(finite logits\)"):
            check_masked_predictor(predictor, tokenizer)
    else:
        assert check_masked_predictor(predictor, tokenizer)["finite logits"] == len(forbidden) * len(case.own)
