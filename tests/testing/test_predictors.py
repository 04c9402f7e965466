"""check_masked_predictor passes skmpt's own families and catches each broken predictor by its rule."""

import re

import pytest
import torch

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
