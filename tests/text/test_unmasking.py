"""The one unmasking loop behind the greedy check, LLaDA's sampler and any-order sampling."""

import pytest
import torch

pytest.importorskip("transformers")

from support.text import JointMaskedLM, binary_tokenizer  # noqa: E402
from transformers import BertConfig, BertForMaskedLM  # noqa: E402

from skmpt.testing import TabularJoint  # noqa: E402
from skmpt.text import MaskedLMRunner, encode_pairs, load_masked_lm  # noqa: E402
from skmpt.text.unmasking import generate_masked, greedy_matches, special_ids, unmask  # noqa: E402


def make_runner(model, tokenizer, max_length=16):
    predictor, tokenizer = load_masked_lm(model, tokenizer=tokenizer, device=torch.device("cpu"))
    return MaskedLMRunner(predictor, tokenizer, torch.device("cpu"), max_length=max_length)


@pytest.fixture(scope="module")
def bert_runner():
    tokenizer = binary_tokenizer()
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16)
    return make_runner(BertForMaskedLM(config).eval(), tokenizer)


def test_the_plan_says_what_to_reveal_and_the_loop_counts_its_passes(bert_runner):
    before, after = special_ids(bert_runner)
    ids = torch.cat([before, torch.full((5,), bert_runner.mask_token_id), after]).repeat(2, 1)
    masked = ids == bert_runner.mask_token_id
    two = torch.tensor([2, 2])
    steps = unmask(bert_runner, ids, masked, lambda ids, masked: (masked, two), exclude_special=True)
    assert steps == 3 and not masked.any()  # 2 + 2 + 1 tokens per row
    assert set(ids[:, len(before) : len(before) + 5].flatten().tolist()) <= set(
        bert_runner.tokenizer.convert_tokens_to_ids(["a", "b"]))  # no special token drawn


def test_greedy_unmasking_rebuilds_only_the_joint_s_greedy_continuation():
    joint, tokenizer = TabularJoint.random(4, random_state=0), binary_tokenizer()
    runner = make_runner(JointMaskedLM(joint, tokenizer), tokenizer, max_length=6)
    continuations = [f" {u} {v}" for u in "ab" for v in "ab"]
    matches = greedy_matches(runner, encode_pairs(["a b"] * 4, continuations, tokenizer, 6))
    assert sorted(matches) == [0, 1, 2, 3] and sum(matches.values()) == 1


def test_generation_is_deterministic_at_temperature_zero_and_checks_its_options(bert_runner):
    first = generate_masked(bert_runner, "a b", max_gen_toks=4)
    assert first == generate_masked(bert_runner, "a b", max_gen_toks=4) and len(first.split()) == 4
    assert len(generate_masked(bert_runner, "a b", max_gen_toks=4, block_length=2, steps=2).split()) == 4
    sampled = [generate_masked(bert_runner, "a b", max_gen_toks=4, temperature=1.0, random_state=s) for s in (0, 0)]
    assert sampled[0] == sampled[1]
    with pytest.raises(ValueError, match="'max_gen_toks' parameter of generate_masked must be an int in the range"):
        generate_masked(bert_runner, "a b", max_gen_toks=0)
