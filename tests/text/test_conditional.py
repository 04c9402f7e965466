"""The conditional functions: the budgeted estimator behind them, their checks, and the 0.1.0 names with a warning."""

import numpy as np
import pytest

pytest.importorskip("transformers")

from support.text import JointMaskedLM, binary_tokenizer  # noqa: E402

from skmpt import MLMCurveScorer  # noqa: E402
from skmpt.testing import TabularJoint  # noqa: E402
from skmpt.text import compare_conditional_estimators, conditional_log_likelihood, multiple_choice  # noqa: E402


@pytest.fixture(scope="module")
def scorer():
    joint, tokenizer = TabularJoint.random(6, random_state=2), binary_tokenizer()
    return MLMCurveScorer(JointMaskedLM(joint, tokenizer), tokenizer=tokenizer, random_state=0, device="cpu").fit()


def test_auto_within_the_budget_with_the_estimator_it_used(scorer):
    result = conditional_log_likelihood(scorer.runner_, ["a b a b a", "a"], [" a", " b a b a b"],
                                        max_forward_passes=15, random_state=0)
    assert result.exact.tolist() == [True, False] and result.forward_passes[0] == 1
    # no candidate beside the standard by default: no pilot, the standard on every pass
    assert result.forward_passes[1] == 15 and result.score_method[1] == "adjusted"
    again = conditional_log_likelihood(scorer.runner_, ["a b a b a", "a"], [" a", " b a b a b"],
                                       max_forward_passes=15, random_state=0)
    np.testing.assert_array_equal(again.log_likelihood, result.log_likelihood)  # an int seed: reproducible


def test_multiple_choice_stops_once_settled(scorer):
    choices = [[" a b a b", " b b b b"]]
    fixed = multiple_choice(scorer.runner_, ["a b"], choices, score_method="uniform", max_forward_passes=64,
                            adaptive=False, random_state=0)
    assert fixed.forward_passes.tolist() == [[15, 15]]  # 2**4 - 1 = 15 masks fit: both exact
    long = [[" a b a b a", " b b b b b"]]
    fixed = multiple_choice(scorer.runner_, ["a"], long, score_method="uniform", max_forward_passes=30,
                            adaptive=False, random_state=0)
    assert fixed.forward_passes.tolist() == [[30, 30]] and fixed.prediction.shape == (1,)


@pytest.mark.parametrize("options, message", [
    ({"score_method": "llada"}, "'score_method' parameter of conditional_log_likelihood must be a str among"),
    ({"max_forward_passes": 1}, "'max_forward_passes' parameter of conditional_log_likelihood must be an int"),
    ({"unit": "nat"}, "'unit' parameter of conditional_log_likelihood must be a str among"),
    ({"score_masks": 3}, "score_masks counts the draws of a named score_method"),
])
def test_bad_options_are_named(scorer, options, message):
    with pytest.raises(ValueError, match=message):
        conditional_log_likelihood(scorer.runner_, ["a"], [" b a"], **options)


def test_the_0_1_names_still_work_with_a_future_warning(scorer):
    pairs = (["a b"], [" a b b a"])
    new = conditional_log_likelihood(scorer.runner_, *pairs, score_method="chain", score_masks=3, random_state=0)
    with pytest.warns(FutureWarning, match="method was renamed score_method"):
        with pytest.warns(FutureWarning, match="n_masks was renamed score_masks"):
            old = conditional_log_likelihood(scorer.runner_, *pairs, method="chain", n_masks=3, random_state=0)
    np.testing.assert_array_equal(old.log_likelihood, new.log_likelihood)
    with pytest.warns(FutureWarning, match="multiple_choice: the parameter method was renamed score_method"):
        multiple_choice(scorer.runner_, ["a b"], [[" a b b a", " b b b b"]], method="chain")
    with pytest.warns(FutureWarning, match="compare_conditional_estimators: the parameter n_masks was renamed"):
        compare_conditional_estimators(scorer.runner_, *pairs, n_masks=2, score_methods=("chain",))
    with pytest.warns(FutureWarning, match="conditional_score_samples: the parameter method was renamed score_method"):
        scorer.conditional_score_samples(*pairs, method="chain")
