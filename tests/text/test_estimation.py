"""The budgeted estimator: exact where it fits, within its budget, one engine for lm-eval, the scorer, the functions."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from support.text import JointMaskedLM, binary_tokenizer  # noqa: E402
from transformers import BertConfig, BertForMaskedLM  # noqa: E402

from skmpt import MLMCurveScorer  # noqa: E402
from skmpt.testing import TabularJoint  # noqa: E402
from skmpt.text import MaskedLMRunner, encode_pairs, load_masked_lm, multiple_choice  # noqa: E402
from skmpt.text.estimation import BudgetedEstimator, pair_keys  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tokenizer():
    return binary_tokenizer()


@pytest.fixture(scope="module")
def tiny_bert(tokenizer):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16)
    return BertForMaskedLM(config).eval()


@pytest.fixture(scope="module")
def runner(tiny_bert, tokenizer):
    predictor, tokenizer = load_masked_lm(tiny_bert, tokenizer=tokenizer, device=torch.device("cpu"))
    return MaskedLMRunner(predictor, tokenizer, torch.device("cpu"), max_length=16)


def estimates(runner, contexts, continuations, questions=None, **options):
    encoded = encode_pairs(contexts, continuations, runner.tokenizer, runner.max_length)
    groups, keys = pair_keys(contexts, continuations, questions)
    return BudgetedEstimator(runner, **options).estimate(encoded, keys, groups=groups)


def test_exact_where_the_masks_fit_and_within_the_budget_elsewhere(runner):
    short, long = estimates(runner, ["a b", "a b"], [" a b", " a b b a b a"], max_forward_passes=15)
    assert short.exact and short.std == 0.0 and short.forward_passes == 3 and short.score_method == "exhaustive"
    assert not long.exact and long.std > 0 and long.forward_passes <= 15  # 63 masks do not fit
    # no candidate beside the standard by default: no pilot, the standard on every pass
    assert long.score_method == "adjusted" and long.pilot_variances is None and long.target_reached is None


def test_an_exact_answer_from_a_joint_whatever_the_estimator():
    joint, tokenizer = TabularJoint.random(6, random_state=1), binary_tokenizer()
    predictor, tokenizer = load_masked_lm(JointMaskedLM(joint, tokenizer), tokenizer=tokenizer,
                                          device=torch.device("cpu"))
    runner = MaskedLMRunner(predictor, tokenizer, torch.device("cpu"), max_length=8)
    x = torch.tensor([[0.0, 1.0, 1.0, 0.0, 1.0, 0.0]], dtype=torch.float64)
    exact = float(joint.log_marginal(x) - joint.log_marginal(x, observed=torch.tensor([True] * 2 + [False] * 4)))
    for method in ("exhaustive", "chain", "antithetic", "nested"):  # one ordering is exact for a joint
        # exact=False: Monte Carlo although the 15 masks would fit in the 16 passes
        result = estimates(runner, ["a b"], [" b a b a"], score_method=method, max_forward_passes=16, exact=False)[0]
        assert result.log_likelihood == pytest.approx(exact, abs=1e-10), method
        assert result.exact == (method == "exhaustive") and result.forward_passes <= 16


def test_draws_are_sized_by_what_the_strategy_declares():
    assert BudgetedEstimator.strategy("nested", 6, 30).score_masks % 2 == 0  # antithetic pairs
    assert BudgetedEstimator.strategy("nested", 6, 21).score_masks == 4  # two pairs at least, for a standard error
    with pytest.raises(ValueError, match="'nested' needs at least 21 masked copies for a text of 6 tokens"):
        BudgetedEstimator.strategy("nested", 6, 20)
    assert BudgetedEstimator.strategy("balanced", 6, 3).score_masks == 3  # the all-masked copy and two draws
    with pytest.raises(ValueError, match="'balanced' needs at least 3 masked copies"):
        BudgetedEstimator.strategy("balanced", 6, 2)
    assert BudgetedEstimator.strategy("chain", 6, 25).n_copies(6) == 24


def test_score_masks_sets_the_draws_of_a_named_estimator(runner):
    result = estimates(runner, ["a b"], [" a b b a b a"], score_method="chain", score_masks=3)[0]
    assert result.forward_passes == 18 and result.score_method == "chain"
    with pytest.raises(ValueError, match="score_masks counts the draws of a named score_method"):
        BudgetedEstimator(runner, score_masks=3)


@pytest.mark.parametrize("option, value", [("score_method", "llada"), ("max_forward_passes", 0),
                                           ("pilot_passes", 2), ("confidence", 1.0), ("adaptive", "yes")])
def test_parameters_are_checked_by_name(runner, option, value):
    with pytest.raises(ValueError, match=f"The '{option}' parameter of BudgetedEstimator must be"):
        BudgetedEstimator(runner, **{option: value})


def test_one_key_per_group_and_common_random_numbers_within_a_question(runner):
    contexts, choices = ["a b"] * 2, [" a b b a b a", " b b a a b a"]
    encoded = encode_pairs(contexts, choices, runner.tokenizer, runner.max_length)
    with pytest.raises(ValueError, match="Got 1 keys for 2 groups"):
        BudgetedEstimator(runner).estimate(encoded, ["one"])
    groups, keys = pair_keys(contexts, choices, questions=[0, 0])
    assert groups == [[0, 1]] and keys == ["a b\x00"]
    fixed = BudgetedEstimator(runner, score_method="uniform", max_forward_passes=16, adaptive=False)
    shared = fixed.estimate(encoded, keys, groups=groups)
    apart = fixed.estimate(encoded, ["a b\x00", "a b\x00"], groups=[[0], [1]])
    # the same masks for both choices: grouped or apart with the same key, the same numbers
    assert [e.log_likelihood for e in shared] == [e.log_likelihood for e in apart]


def test_the_scorer_and_the_functions_give_the_estimate_of_the_lm_eval_model(tiny_bert, tokenizer):
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from skmpt.text.harness import MaskedLMHarness

    contexts, continuations = ["a b", "b a b"], [" a b b a b a", " b b a a b a b"]
    harness = MaskedLMHarness(pretrained=tiny_bert, tokenizer=tokenizer, max_forward_passes=32, seed=5,
                              check_greedy=False, device="cpu")
    alone = harness.loglikelihood([Instance("loglikelihood", {}, pair, 0, ("toy", None, 1))
                                   for pair in zip(contexts, continuations, strict=True)])
    scorer = MLMCurveScorer(tiny_bert, tokenizer=tokenizer, random_state=5, device="cpu").fit()
    scores, std = scorer.conditional_score_samples(contexts, continuations, max_forward_passes=32, return_std=True)
    assert not any(result.exact for result in alone)
    np.testing.assert_array_equal(scores, [result[0] for result in alone])
    np.testing.assert_array_equal(std, [result.std for result in alone])
    # a question's choices: grouped by lm-eval's document, by multiple_choice's row
    choices = [" a b b a b a", " b b a a b a"]
    question = harness.loglikelihood([Instance("loglikelihood", {}, ("a b", choice), 0, ("toy", 3, 1))
                                      for choice in choices])
    grouped = multiple_choice(scorer.runner_, ["a b"], [choices], max_forward_passes=32, random_state=5)
    np.testing.assert_array_equal(grouped.log_likelihood[0], [result[0] for result in question])
    np.testing.assert_array_equal(grouped.forward_passes[0], [result.forward_passes for result in question])


def test_the_estimator_imports_and_runs_without_lm_eval():
    script = textwrap.dedent("""
        import sys
        sys.modules["lm_eval"] = None  # as if lm-eval were not installed
        import torch
        from support.text import binary_tokenizer
        from transformers import BertConfig, BertForMaskedLM
        from skmpt.text import MaskedLMRunner, encode_pairs, load_masked_lm
        from skmpt.text.estimation import BudgetedEstimator, pair_keys
        tokenizer = binary_tokenizer()
        torch.manual_seed(0)
        model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1,
                                           num_attention_heads=2, intermediate_size=16, max_position_embeddings=16))
        runner = MaskedLMRunner(*load_masked_lm(model, tokenizer=tokenizer, device=torch.device("cpu")),
                                torch.device("cpu"), max_length=16)
        encoded = encode_pairs(["a b"], [" a b b a b a"], tokenizer, 16)
        result = BudgetedEstimator(runner, max_forward_passes=16).estimate(encoded, pair_keys(["a b"], [" x"])[1])[0]
        assert result.forward_passes <= 16 and result.std > 0
        try:
            import skmpt.text.harness
        except ImportError:
            print("ran without lm-eval")
    """)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=environment)
    assert run.returncode == 0, run.stderr
    assert "ran without lm-eval" in run.stdout


#: The fewest copies of each estimator for a text of T tokens: its fewest draws for a standard error.
FEWEST = {"sweep": lambda T: 2 * T, "chain": lambda T: 2 * T, "antithetic": lambda T: 4 * T,
          "nested": lambda T: 4 * (T - 1) + 1, "balanced": lambda T: 3, "exhaustive": lambda T: 2**T - 1,
          "auto": lambda T: 3, "allocated": lambda T: 3, "adjusted": lambda T: 3}


class CountingRunner:
    """A runner that counts the masked copies it runs."""

    def __init__(self, runner):
        self.runner, self.copies = runner, 0

    def __getattr__(self, name):
        return getattr(self.runner, name)

    def run_copies(self, encoded, copies, **options):
        self.copies += sum(len(masked) for masked, _ in copies)
        return self.runner.run_copies(encoded, copies, **options)


def budget_cases():
    from skmpt.text.strategies import ESTIMATOR_METHODS

    for method in ["auto", *ESTIMATOR_METHODS]:
        for length in (1, 2, 3, 4):
            for budget in range(1, 2**length + 1):
                yield method, length, budget
        for length in (9, 13):
            fewest = FEWEST.get(method, lambda T: 2)(length)
            for budget in sorted({1, fewest - 1, fewest, 40} - {0}):  # 40: auto's pilot runs (5 copies)
                yield method, length, budget


@pytest.mark.parametrize("pairs", [1, 2], ids=["alone", "question"])
def test_every_estimator_keeps_every_budget_or_refuses_before_any_pass(runner, pairs):
    counting = CountingRunner(runner)
    for method, length, budget in budget_cases():
        continuations = [" a" * length, " b" * length][:pairs]
        exact = method == "exhaustive" or 2**length - 1 <= budget
        fewest = 2**length - 1 if exact else FEWEST.get(method, lambda T: 2)(length)
        estimator = BudgetedEstimator(counting, score_method=method, max_forward_passes=budget, round_passes=4)
        encoded = encode_pairs(["a"] * pairs, continuations, runner.tokenizer, runner.max_length)
        groups, keys = pair_keys(["a"] * pairs, continuations, [0] * pairs)
        counting.copies = 0
        case = f"{method} at {length} tokens, budget {budget}"
        if length == 13 and method == "exhaustive" or fewest > budget:
            with pytest.raises(ValueError, match=f"needs at least {fewest} masked copies|longer than max_tokens"):
                estimator.estimate(encoded, keys, groups=groups)
            assert counting.copies == 0, case
            continue
        results = estimator.estimate(encoded, keys, groups=groups)
        assert counting.copies == sum(result.forward_passes for result in results), case
        assert all(0 < result.forward_passes <= budget for result in results), case
        assert all(result.exact == exact for result in results), case


def test_score_masks_below_an_estimators_fewest_draws_is_refused_naming_them(runner):
    with pytest.raises(ValueError, match=r"Text 0 has 6 tokens: score_method='nested' needs at least 21 masked copies "
                                         r".* more than the 11 of score_masks=2"):
        estimates(runner, ["a b"], [" a b b a b a"], score_method="nested", score_masks=2, exact=False)


def test_the_measured_choice_keeps_the_standard_unless_a_candidate_is_significantly_better():
    from skmpt.text.estimation import measured_choice

    rng = np.random.default_rng(0)
    names = ("adjusted", "nested", "balanced", "controlled")
    for significance, kept in ((0.05, 0.95), (0.9, 0.1)):
        chosen = []
        for _ in range(400):  # every candidate spreads as the standard: kept in at least 1 - significance of pilots
            units = {name: rng.normal(size=4) for name in names}
            chosen.append(measured_choice({name: units[name].var(ddof=1) for name in names}, degrees=3,
                                          significance=significance))
        assert np.mean([name == "adjusted" for name in chosen]) >= kept
    # one candidate spreads 1000 times less: chosen in (nearly) every pilot, with 1 degree of freedom too
    chosen = [measured_choice({name: rng.normal(scale=0.03 if name == "nested" else 1.0, size=4 if name != "nested"
                                                else 2).var(ddof=1) for name in names},
                              degrees={**dict.fromkeys(names, 3), "nested": 1}) for _ in range(200)]
    assert np.mean([name == "nested" for name in chosen]) >= 0.95
    assert measured_choice({"adjusted": 0.0, "balanced": 0.0}, degrees=3) == "adjusted"  # all exact: a tie
    # a candidate measured worse never replaces the standard, even at a large level and with one candidate
    assert measured_choice({"adjusted": 1.0, "controlled": 1.5}, degrees=3, significance=0.99) == "adjusted"
    with pytest.raises(ValueError, match="must include the standard 'adjusted'"):
        measured_choice({"balanced": 1.0}, degrees=3)


def test_auto_is_unbiased_against_exact_enumeration(runner):
    contexts, continuations = ["a b"], [" a b b a b a a b"]  # 8 tokens: 255 masks, more than 128 passes
    encoded = encode_pairs(contexts, continuations, runner.tokenizer, runner.max_length)
    exact = BudgetedEstimator(runner, max_forward_passes=255).estimate(encoded, ["k"])[0]
    assert exact.exact
    found = [BudgetedEstimator(runner, max_forward_passes=128, seed=seed).estimate(encoded, ["k"])[0]
             for seed in range(80)]
    assert all(e.pilot_variances is None and e.forward_passes == 128 and e.score_method == "adjusted" for e in found)
    values = np.array([e.log_likelihood for e in found])
    assert abs(values.mean() - exact.log_likelihood) <= 3 * values.std(ddof=1) / np.sqrt(len(values))
    # the reported standard errors describe the spread of the estimates (within a factor 1.5)
    rms = np.sqrt(np.mean([e.std**2 for e in found]))
    assert values.std(ddof=1) / 1.5 <= rms <= 1.5 * values.std(ddof=1)


def test_target_se_draws_in_rounds_until_it_is_reached_or_the_budget_is_spent(runner):
    contexts, continuations = ["a b", "a b"], [" a b", " a b b a b a a b"]
    loose = estimates(runner, contexts, continuations, max_forward_passes=200, target_se=10.0, round_passes=8)
    assert loose[0].exact and loose[0].target_reached is True  # exact: standard error 0
    assert loose[1].target_reached is True and loose[1].std <= 10.0 and loose[1].forward_passes < 200
    strict = estimates(runner, contexts, continuations, max_forward_passes=200, target_se=1e-12, round_passes=8)
    # the budget spent up to less than what the chosen estimator's fewest draws need
    assert strict[1].target_reached is False and 200 - 16 <= strict[1].forward_passes <= 200
    assert estimates(runner, contexts, continuations, max_forward_passes=200)[1].target_reached is None
    with pytest.raises(ValueError, match="The 'target_se' parameter of BudgetedEstimator must be"):
        BudgetedEstimator(runner, target_se=0.0)


def test_a_long_text_is_scored_in_rounds_of_bounded_size(runner, monkeypatch):
    from skmpt.text import estimation

    monkeypatch.setattr(estimation, "chunk_budget", lambda: 64)  # at most 64 // 8 = 8 copies of 8 tokens a round
    sizes = []
    original = runner.run_copies

    def recording(encoded, copies, **options):
        sizes.extend(len(masked) for masked, _ in copies)
        return original(encoded, copies, **options)

    monkeypatch.setattr(runner, "run_copies", recording)
    result = estimates(runner, ["a b"], [" a b b a b a a b"], score_method="stratified", max_forward_passes=200)[0]
    assert result.forward_passes == 200 and max(sizes) <= 16  # round_passes (16) at least, not the budget


class _TableRunner:
    """A runner whose forward passes read each target's log-probability under a mask from a table (one text)."""

    def __init__(self, table):
        self.table = table

    def run_copies(self, encoded, copies, *, per_target=False, progress=None):
        values = []
        for masked, targets in copies:
            codes = masked.numpy() @ (2 ** np.arange(self.table.shape[1]))
            value = np.where(targets.numpy(), self.table[np.maximum(codes, 1) - 1], np.nan)
            values.append(value if per_target else np.nansum(value, 1))
        return values


@pytest.mark.parametrize(("given", "candidates"), [(False, ()), (False, ("controlled",)),
                                                   (True, ("controlled", "nested", "balanced"))])
def test_auto_pools_its_pilot_without_bias_and_its_standard_errors_are_calibrated(given, candidates, monkeypatch):
    from skmpt.text import EncodedTexts, estimation
    from skmpt.text.strategies import ExhaustiveMasks

    # the default (no pilot), a pilot read from the standard's units and, given a context, candidates that run units
    # of their own: their draws are pooled too
    monkeypatch.setattr(estimation, "AUTO_CANDIDATES", candidates)

    rng = np.random.default_rng(0)
    length = 8  # 255 masks: more than 128 passes, the exact value by enumeration
    masked = ExhaustiveMasks(max_tokens=length).copies(length, None)[0].numpy()
    table = np.where(masked, -1 - 2 * rng.random(masked.shape) + 0.5 * rng.normal(size=masked.shape), np.nan)
    exact = ExhaustiveMasks(max_tokens=length).draws(torch.from_numpy(masked), np.nansum(table, 1))[0]
    encoded = EncodedTexts([torch.zeros(length + 2, dtype=torch.long)], [torch.arange(1, length + 1)])
    found = [BudgetedEstimator(_TableRunner(table), max_forward_passes=128, seed=seed).estimate(
        encoded, ["k"], given={0} if given else set())[0] for seed in range(300)]
    # the pilot's standard units, the control variate read from them; given a context, nested's three units of 15
    # copies enter the pilot (balanced's 16 copies do not fit in what is left of half the budget)
    assert all(e.pilot_variances is None if not candidates else
               set(e.pilot_variances) == {"adjusted", *candidates} - ({"balanced"} if given else set())
               for e in found)
    values = np.array([e.log_likelihood for e in found])
    assert abs(values.mean() - exact) <= 3 * values.std(ddof=1) / np.sqrt(len(values))
    z = (values - exact) / np.array([e.std for e in found])
    assert 0.75 <= z.std(ddof=1) <= 1.3  # the standard errors describe the spread, pooled pilot included


def test_rounds_score_the_all_masked_copy_once_and_fit_the_control_variate_on_the_other_rounds_without_bias():
    from skmpt.text import EncodedTexts
    from skmpt.text.strategies import ExhaustiveMasks

    rng = np.random.default_rng(1)
    length = 8  # rounds of 16 copies: 15 of 8 tokens, fewer than the 4 per token the control variate needs
    masked = ExhaustiveMasks(max_tokens=length).copies(length, None)[0].numpy()
    difficulty = rng.normal(-2.0, 1.5, length)  # mostly each token's own difficulty, a little noise per mask
    table = np.where(masked, difficulty + 0.1 * rng.normal(size=masked.shape), np.nan)
    exact = ExhaustiveMasks(max_tokens=length).draws(torch.from_numpy(masked), np.nansum(table, 1))[0]
    encoded = EncodedTexts([torch.zeros(length + 2, dtype=torch.long)], [torch.arange(1, length + 1)])
    runner, full = _TableRunner(table), []
    original = runner.run_copies

    def recording(encoded, copies, **options):
        full.extend(int(copy.all(1).sum()) for copy, _ in copies)
        return original(encoded, copies, **options)

    runner.run_copies = recording
    found = {}
    for method in ("auto", "allocated"):
        found[method] = [BudgetedEstimator(runner, score_method=method, target_se=1e-9, seed=seed).estimate(
            encoded, ["k"])[0] for seed in range(60)]
    assert all(e.forward_passes == 128 for e in found["auto"]) and len(full) == 2 * 60 * 8
    assert full == [1, 0, 0, 0, 0, 0, 0, 0] * 120  # 8 rounds of 16 copies: the all-masked one in the first only
    values = {method: np.array([e.log_likelihood for e in found[method]]) for method in found}
    assert values["auto"].var() < 0.2 * values["allocated"].var()  # the other rounds fit it, the first round's too
    assert abs(values["auto"].mean() - exact) <= 3 * values["auto"].std(ddof=1) / np.sqrt(60)
    z = (values["auto"] - exact) / np.array([e.std for e in found["auto"]])
    assert 0.75 <= z.std(ddof=1) <= 1.3  # the standard errors describe the spread (pooled over the rounds)


def test_rounds_beyond_the_first_few_are_fitted_once_so_the_fits_stay_within_a_few_per_round(monkeypatch):
    from skmpt.text import EncodedTexts, estimation
    from skmpt.text.strategies import AllocatedSizeMasks, ExhaustiveMasks

    length = 5
    masked = ExhaustiveMasks(max_tokens=length).copies(length, None)[0].numpy()
    table = np.where(masked, np.random.default_rng(3).normal(-2.0, 1.0, masked.shape), np.nan)
    calls = []
    original = AllocatedSizeMasks.terms
    monkeypatch.setattr(AllocatedSizeMasks, "terms", lambda self, *args, **options: calls.append(1) or original(
        self, *args, **options))
    encoded = EncodedTexts([torch.zeros(length + 2, dtype=torch.long)], [torch.arange(1, length + 1)])
    found = BudgetedEstimator(_TableRunner(table), max_forward_passes=320, round_passes=8, target_se=1e-9,
                              exact=False).estimate(encoded, ["k"])[0]
    rounds, refit = 40, estimation.REFIT_ROUNDS
    assert found.forward_passes == 320 and np.isfinite(found.log_likelihood) and found.std > 0
    assert len(calls) == refit * (refit + 1) // 2 + rounds - refit  # not rounds * (rounds + 1) / 2


def _simulated_model():
    """``benchmarks/text_rounds.py``'s ``SimulatedModel``: each masked token's own difficulty, lowered a little
    by every other masked token, plus noise (no table: too many masks to enumerate)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "text_rounds.py"
    spec = importlib.util.spec_from_file_location("text_rounds", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SimulatedModel


def test_rounds_of_a_long_continuation_cover_every_size_and_spread_less_than_lladas():
    from skmpt.text import EncodedTexts
    from skmpt.text.strategies import AllocatedSizeMasks

    length = 64  # more sizes than the 16 copies of a round
    encoded = EncodedTexts([torch.zeros(length + 2, dtype=torch.long)], [torch.arange(1, length + 1)])
    rounds, model = [], _simulated_model()

    def estimate(method, seed):
        runner = model(length, seed)
        original = runner.run_copies
        runner.run_copies = lambda encoded, copies, **options: rounds.append(sum(len(m) for m, _ in copies)) or \
            original(encoded, copies, **options)
        return BudgetedEstimator(runner, score_method=method, max_forward_passes=256, target_se=1e-9,
                                 seed=seed).estimate(encoded, ["k"])[0].log_likelihood

    auto = np.array([estimate("auto", seed) for seed in range(40)])
    covering = AllocatedSizeMasks(score_masks=16).covering_copies(length)
    assert covering > 16 and min(rounds) >= covering - 1  # every size in each round (the all-masked copy in the first)
    llada = np.array([estimate("stratified", seed) for seed in range(40)])
    assert auto.var() < llada.var()  # in rounds of 16 copies, 0.5 to 0.6 times LLaDA's efficiency
