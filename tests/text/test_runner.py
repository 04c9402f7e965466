"""The runner's refusals: non-finite logits name the text before a wrong number is returned."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from support.text import binary_tokenizer  # noqa: E402

from skmpt import MLMCurveScorer  # noqa: E402

TOKENIZER = binary_tokenizer()
A, B = TOKENIZER.convert_tokens_to_ids(["a", "b"])


def poisoned(position, token, value):
    """Uniform logits, but ``value`` at ``(position, token)`` of every copy."""

    def logits(input_ids, attention_mask):
        out = torch.zeros(*input_ids.shape, len(TOKENIZER), dtype=torch.float64)
        if position < input_ids.shape[1]:
            out[:, position, token] = value
        return out

    return MLMCurveScorer(logits, tokenizer=TOKENIZER, mask_token_id=TOKENIZER.mask_token_id, device="cpu",
                          score_masks=2, random_state=0).fit()


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_logits_at_a_target_name_the_text_and_count(value):
    scorer = poisoned(2, B, value)  # "[CLS] a b a [SEP]": position 2 holds b
    for method in (scorer.score_samples, scorer.pseudo_log_likelihood, scorer.transform, scorer.token_scores):
        with pytest.raises(ValueError, match=r"returned \d+ non-finite logits .* of the text 'a b a'"):
            method(["a b a"])


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.sampled_from(["a", "b", "[PAD]"]), st.sampled_from([np.nan, np.inf, -np.inf, 1e300]))
def test_a_score_is_finite_or_refused(position, token, value):
    """Whatever the poisoned logit, a score is a finite number or a ValueError: never NaN nor -inf."""
    text = ["a b a", "b a b"][position % 2]
    scorer = poisoned(position, TOKENIZER.convert_tokens_to_ids(token), value)
    target = text.split()[position - 1]
    refused = not np.isfinite(value) and (np.isnan(value) or value > 0 or token == target)
    if refused:
        with pytest.raises(ValueError, match="non-finite logits"):
            scorer.pseudo_log_likelihood([text])
    else:
        assert np.isfinite(scorer.pseudo_log_likelihood([text])).all()


def test_forbidden_tokens_at_minus_infinity_are_accepted():
    scorer = poisoned(2, TOKENIZER.convert_tokens_to_ids("[PAD]"), -np.inf)
    np.testing.assert_allclose(scorer.pseudo_log_likelihood(["a b a"]), -(2 * np.log(7) + np.log(6)), rtol=1e-12)


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_any_order_sampling_refuses_non_finite_logits(value):
    from skmpt.text import sample_any_order

    scorer = poisoned(2, A, value)
    with pytest.raises(ValueError, match=r"returned \d+ NaN or \+inf logits at step \d+ of any-order sampling"):
        sample_any_order(scorer.runner_, 2, 3, random_state=0)
    assert len(sample_any_order(poisoned(2, A, -np.inf).runner_, 2, 3, random_state=0)) == 2  # b is left
