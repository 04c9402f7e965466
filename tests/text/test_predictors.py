"""The predictor and strategy seams: one class per family, a user's own family, compositions without a scorer."""

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from support.text import JointMaskedLM, binary_tokenizer  # noqa: E402
from support.tiny_predictors import MASK_ID, TinyBidirectionalLM, gpt2_style_tokenizer  # noqa: E402
from transformers import BertConfig, BertForMaskedLM  # noqa: E402

import skmpt.text as sktext  # noqa: E402
from skmpt import MLMCurveScorer  # noqa: E402
from skmpt.testing import TabularJoint  # noqa: E402
from skmpt.text import strategies  # noqa: E402

TEXTS = ["the cat sat on the mat", "a big red dog ran"]


def test_every_strategy_declares_the_protocol():
    classes = [getattr(strategies, name) for name in strategies.__all__ if name[0].isupper()]
    assert strategies.ScoringStrategy in classes
    for cls in classes:
        assert issubclass(cls, strategies.ScoringStrategy), cls
        assert isinstance(cls.needs_words, bool) and isinstance(cls.per_target, bool)


@pytest.mark.parametrize("make, message", [
    (lambda: strategies.SweepMasks(1, return_std=True), "a standard error needs at least 2"),
    (lambda: strategies.ChainMasks(2.5), "'score_masks' parameter of ChainMasks must be an int in .* got 2.5"),
    (lambda: strategies.UniformSizeMasks(True), "'score_masks' parameter of UniformSizeMasks must be an int .* True"),
    (lambda: strategies.SingleTokenMasks("l2r"), "'metric' parameter of SingleTokenMasks must be .*'within_word_l2r'"),
])
def test_strategy_options_are_checked(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_exhaustive_masks_are_the_expectation_of_the_sweep_and_exact_on_a_joint():
    joint = TabularJoint.random(5, random_state=3)
    tokenizer = binary_tokenizer()
    scorer = MLMCurveScorer(JointMaskedLM(joint, tokenizer), tokenizer=tokenizer, device="cpu").fit()
    words = "a b b a b".split()
    table = joint.probabilities.reshape((2,) * 5)
    x = tuple("ab".index(w) for w in words)
    exact = float(torch.log(table[x] / table[x[:2]].sum()))
    result = sktext.conditional_log_likelihood(scorer.runner_, ["a b"], [" b a b"], score_method="exhaustive")
    np.testing.assert_allclose(result.log_likelihood, [exact], rtol=1e-12)
    assert result.std.tolist() == [0.0] and result.forward_passes.tolist() == [7]
    encoded = sktext.encode_texts([" ".join(words)], tokenizer, 16)
    whole = scorer.runner_.score(encoded, strategies.ExhaustiveMasks())
    np.testing.assert_allclose(whole, [joint.log_marginal(torch.tensor([x], dtype=torch.float64)).item()], rtol=1e-12)
    with pytest.raises(ValueError, match="a text of 5 tokens is longer than max_tokens=4"):
        scorer.runner_.score(encoded, strategies.ExhaustiveMasks(max_tokens=4))


def test_compositions_need_no_fitted_scorer():
    tokenizer = gpt2_style_tokenizer()
    predictor, tokenizer = sktext.load_masked_lm(TinyBidirectionalLM(), tokenizer=tokenizer, device=torch.device("cpu"),
                                                 mask_token_id=MASK_ID)
    assert type(predictor).__name__ == "ModulePredictor" and predictor.mask_token_id == MASK_ID
    runner = sktext.MaskedLMRunner(predictor, tokenizer, torch.device("cpu"))
    bound = sktext.masked_diffusion_bound(runner, TEXTS, score_method="chain", score_masks=2, random_state=0)
    fitted = MLMCurveScorer(predictor.module, tokenizer=tokenizer, mask_token_id=MASK_ID, device="cpu",
                            score_method="chain", score_masks=2, random_state=0).fit()
    np.testing.assert_allclose(-bound.nelbo, fitted.score_samples(TEXTS), rtol=1e-12)
    assert len(sktext.sample_any_order(runner, 2, 4, random_state=0)) == 2


def test_a_users_own_family_is_one_class():
    tokenizer = gpt2_style_tokenizer()
    module = TinyBidirectionalLM()

    class Reversed(sktext.MaskedPredictor):
        """A model that reads its input right to left."""

        def logits(self, input_ids, attention_mask, rates):
            return self.module(input_ids.flip(1), attention_mask.flip(1)).flip(1)

    own = MLMCurveScorer(Reversed(module, MASK_ID), tokenizer=tokenizer, device="cpu", score_masks=2,
                         random_state=0).fit()
    assert own.predictor_.module is module and own.dtype_ == torch.float32
    plain = MLMCurveScorer(module, tokenizer=tokenizer, mask_token_id=MASK_ID, device="cpu", score_masks=2,
                           random_state=0).fit()
    assert not np.allclose(own.pseudo_log_likelihood(TEXTS), plain.pseudo_log_likelihood(TEXTS))
    with pytest.raises(ValueError, match="a predictor that knows its own layout"):
        sktext.as_predictor(own.predictor_, MASK_ID, shift_logits=True)


def test_fit_and_scores_leave_the_users_module_as_it_was():
    tokenizer = binary_tokenizer()
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=16, max_position_embeddings=16))
    model.train()
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, device="cpu", score_masks=2, random_state=0).fit()
    first = scorer.score_samples(["a b a", "b b"])
    assert scorer.model_ is model and model.training  # scored in evaluation mode, handed back in training mode
    assert all(module.training for module in model.modules())
    np.testing.assert_array_equal(scorer.score_samples(["a b a", "b b"]), first)  # dropout was off while scoring
    assert all(torch.equal(before[name], tensor) for name, tensor in model.state_dict().items())


@pytest.mark.parametrize("model", [
    lambda input_ids: torch.zeros(*input_ids.shape, 7),
    lambda ids, mask: torch.zeros(*ids.shape, 7),
])
def test_a_callable_that_cannot_take_the_attention_mask_is_refused_at_fit(model):
    tokenizer = binary_tokenizer()
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, mask_token_id=tokenizer.mask_token_id, device="cpu")
    with pytest.raises(ValueError, match=r"calls its model as model\(input_ids=..., attention_mask=...\).*must accept"):
        scorer.fit()


def test_a_models_own_type_error_is_not_blamed_on_its_signature():
    def model(input_ids, attention_mask, **kwargs):
        raise TypeError("the model's own bug")

    tokenizer = binary_tokenizer()
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, mask_token_id=tokenizer.mask_token_id, device="cpu").fit()
    with pytest.raises(TypeError, match="the model's own bug"):
        scorer.score_samples(["a b"])


def test_the_predictors_parameters_are_validated_with_their_names():
    from skmpt._validation import InvalidParameterError
    from skmpt.text.predictors import check_mask_token_id

    tokenizer = binary_tokenizer()
    for bad in (-1, 1.5, "4", True):
        with pytest.raises(InvalidParameterError, match=r"The 'mask_token_id' parameter of check_mask_token_id must "
                                                         r"be None or an int in the range \[0, inf\); got"):
            check_mask_token_id(bad, tokenizer)
    with pytest.raises(InvalidParameterError, match=r"The 'vocab_size' parameter of check_mask_token_id must be None "
                                                     r"or an int in the range \[1, inf\); got 0"):
        check_mask_token_id(None, tokenizer, 0)
    assert check_mask_token_id(np.int64(4), tokenizer, 7) == 4 == tokenizer.mask_token_id
    with pytest.raises(InvalidParameterError, match=r"The 'module' parameter of MaskedLMPredictor must be an "
                                                     r"instance of torch.nn.*Module; got 3"):
        sktext.MaskedLMPredictor(3, 4)
    with pytest.raises(InvalidParameterError, match="The 'module' parameter of ModulePredictor must be a callable"):
        sktext.ModulePredictor("model", 4)
    with pytest.raises(InvalidParameterError, match="The 'timestep_fn' parameter of TimeConditionedPredictor must be "
                                                    "a callable; got 0.5"):
        sktext.TimeConditionedPredictor(torch.nn.Identity(), 4, 0.5)


@pytest.mark.parametrize("make", [
    lambda: sktext.as_predictor(BertForMaskedLM(BertConfig(vocab_size=7, hidden_size=8, num_hidden_layers=1,
                                                           num_attention_heads=2, intermediate_size=16)), 4),
    lambda: sktext.as_predictor(TinyBidirectionalLM(), MASK_ID),
    lambda: sktext.as_predictor(TinyBidirectionalLM(), MASK_ID, shift_logits=True),
    lambda: sktext.as_predictor(TinyBidirectionalLM(timestep=True), MASK_ID, timestep_fn=lambda r: {"timesteps": r}),
    lambda: sktext.as_predictor(lambda input_ids, attention_mask: torch.zeros(*input_ids.shape, 7), 4),
], ids=["masked_lm", "module", "shifted", "timestep", "callable"])
def test_a_predictor_keeps_its_mask_id_and_refuses_another(make):
    predictor = make()
    own = predictor.mask_token_id
    for same in (None, own, np.int64(own)):
        assert sktext.as_predictor(predictor, same) is predictor and predictor.mask_token_id == own
    message = rf"mask_token_id={own + 1} differs from the predictor's own \({own}\)"
    with pytest.raises(ValueError, match=message):
        sktext.as_predictor(predictor, own + 1)
    tokenizer = binary_tokenizer() if own == 4 else gpt2_style_tokenizer()
    with pytest.raises(ValueError, match=message):  # the loader refuses the same mismatch the same way
        sktext.load_masked_lm(predictor, tokenizer=tokenizer, device=torch.device("cpu"), mask_token_id=own + 1)
    assert predictor.mask_token_id == own
