"""Conditional scoring and masked-diffusion quantities: exact on an explicit joint, and MDLM's own loss."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from support.text import JointMaskedLM, binary_tokenizer  # noqa: E402
from support.tiny_predictors import MASK_ID, TinyBidirectionalLM, gpt2_style_tokenizer  # noqa: E402

from skmpt import MLMCurveScorer  # noqa: E402
from skmpt.testing import TabularJoint  # noqa: E402
from skmpt.text import (  # noqa: E402
    compare_conditional_estimators,
    conditional_log_likelihood,
    masked_diffusion_bound,
    multiple_choice,
    noise_schedule,
    sample_any_order,
    schedule_weights,
)


@pytest.fixture(scope="module")
def joint_scorer():
    joint = TabularJoint.random(5, random_state=3)
    tokenizer = binary_tokenizer()
    scorer = MLMCurveScorer(JointMaskedLM(joint, tokenizer), tokenizer=tokenizer, score_masks=4, random_state=0,
                            device="cpu").fit()
    return joint, scorer


def exact_conditional(joint, words, n_context):
    """``log p(x_{k+1..D} | x_{1..k})`` from the table."""
    table = joint.probabilities.reshape((2,) * joint.n_features)
    x = tuple("ab".index(w) for w in words)
    return float(torch.log(table[x] / table[x[:n_context]].sum()))


def test_the_chain_is_the_exact_conditional_of_a_joint_and_the_others_agree_within_their_errors(joint_scorer):
    joint, scorer = joint_scorer
    sentences = [s.split() for s in ["a b b a b", "b b a a a", "a a a b b", "b a b b a"]]
    contexts = [" ".join(words[:2]) for words in sentences]
    continuations = [" " + " ".join(words[2:]) for words in sentences]
    exact = np.array([exact_conditional(joint, words, 2) for words in sentences])
    chain = conditional_log_likelihood(scorer.runner_, contexts, continuations, score_method="chain",
                                       max_forward_passes=6, random_state=0)  # 7 masks do not fit: two orderings
    np.testing.assert_allclose(chain.log_likelihood, exact, rtol=1e-10)
    np.testing.assert_allclose(chain.std, 0, atol=1e-10)  # every ordering gives the same sum
    assert chain.n_tokens.tolist() == [3] * 4 and chain.forward_passes.tolist() == [6] * 4
    assert chain.score_method.tolist() == ["chain"] * 4 and not chain.exact.any()
    # three orderings cost 9 passes: the 2**3 - 1 = 7 masks fit, so they are enumerated instead
    enumerated = conditional_log_likelihood(scorer.runner_, contexts, continuations, score_method="chain",
                                            score_masks=3, random_state=0)
    np.testing.assert_allclose(enumerated.log_likelihood, exact, rtol=1e-10)
    assert enumerated.forward_passes.tolist() == [7] * 4 and enumerated.exact.all()
    results = compare_conditional_estimators(scorer.runner_, contexts, continuations, score_masks=200,
                                             target_std=0.05, random_state=0)
    for method in ("uniform", "sweep"):
        result = results[method]
        assert (result.std > 0).all()
        assert (np.abs(result.log_likelihood - exact) < 4 * result.std).all(), method
    # the chain needs one ordering (3 passes) for any standard error; LLaDA's masks need more
    assert results["chain"].passes_for_target_std.tolist() == [3] * 4
    assert (results["uniform"].passes_for_target_std > 3).all()
    # the unconditional identity is the conditional one with a context of nothing: the whole text
    full = clone(scorer).set_params(score_method="chain").fit().score_samples([" ".join(w) for w in sentences])
    np.testing.assert_allclose(full, [joint.log_marginal(torch.tensor([["ab".index(c) for c in w]],
                                                                      dtype=torch.float64)).item()
                                      for w in sentences], rtol=1e-10)


def test_the_scorer_methods_give_the_conditional_and_its_curve(joint_scorer):
    joint, scorer = joint_scorer
    sentences = [s.split() for s in ["a b b a b", "b b a a a"]]
    contexts = [" ".join(words[:2]) for words in sentences]
    continuations = [" " + " ".join(words[2:]) for words in sentences]
    exact = np.array([exact_conditional(joint, words, 2) for words in sentences])
    scorer = clone(scorer).set_params(mask_rates=[1 / 3, 2 / 3, 0.99], score_masks=3).fit()
    scores, std = scorer.conditional_score_samples(contexts, continuations, score_method="chain", return_std=True)
    np.testing.assert_allclose(scores, exact, rtol=1e-10)
    np.testing.assert_allclose(std, 0, atol=1e-10)
    np.testing.assert_allclose(clone(scorer).set_params(unit="bits").fit().conditional_score_samples(
        contexts, continuations, score_method="chain"), exact / np.log(2), rtol=1e-10)
    # the curve over the continuation's 3 tokens (sizes 1, 2, 3) sums to an estimate of the conditional
    curve, curve_std = scorer.conditional_transform(contexts, continuations, return_std=True)
    assert curve.shape == curve_std.shape == (2, 3) and (curve_std >= 0).all()
    assert (np.abs(curve.sum(1) - exact) <= 4 * np.sqrt((curve_std**2).sum(1)) + 1e-10).all()
    # the scorer's conditional estimate is exact where the masks fit the budget, whatever the estimator named
    sweep = scorer.conditional_score_samples(contexts, continuations, score_method="sweep")
    np.testing.assert_allclose(sweep, exact, rtol=1e-10)
    with pytest.raises(ValueError, match="tokenizes to nothing"):
        scorer.conditional_transform(["a b"], [""])


def test_multiple_choice_and_minimal_pairs(joint_scorer):
    joint, scorer = joint_scorer
    choices = [[" a b a", " b b b", " a a b"], [" b a a", " a b b", " b b a"]]
    result = multiple_choice(scorer.runner_, ["a b", "b a"], choices, random_state=0)
    exact = np.array([[exact_conditional(joint, (c + " " + k).split(), 2) for k in row]
                      for c, row in zip(["a b", "b a"], choices, strict=True)])
    np.testing.assert_allclose(result.log_likelihood, exact, rtol=1e-10)
    assert result.prediction.tolist() == exact.argmax(1).tolist()


@pytest.mark.parametrize("context, continuation, message", [
    ("", " a b", "Pair 0: the context '' tokenizes to nothing"),
    ("   ", "a b", "the context '   ' tokenizes to nothing"),
    ("a b", "  ", "the continuation '  ' tokenizes to nothing"),
    ("a b", "b a", "a token straddles the end of the context"),
    ("a b a", " b a b a b", "Pair 0 has 8 tokens, more than max_length=7"),
])
def test_bad_pairs_are_named(joint_scorer, context, continuation, message):
    _, scorer = joint_scorer
    scorer = MLMCurveScorer(scorer.model, tokenizer=scorer.tokenizer, max_length=7, device="cpu").fit()
    with pytest.raises(ValueError, match=message):
        conditional_log_likelihood(scorer.runner_, [context], [continuation])


def test_any_order_samples_follow_the_joint(joint_scorer):
    joint, scorer = joint_scorer
    texts = sample_any_order(scorer.runner_, 3000, 5, random_state=0)
    counts = np.zeros(32)
    for text in texts:
        counts[int("".join("01"["ab".index(w)] for w in text.split()), 2)] += 1
    # any-order generation from exact conditionals draws from the joint: total variation at sampling noise
    assert 0.5 * np.abs(counts / len(texts) - joint.probabilities.numpy()).sum() < 0.06


def mdlm_loss(model, ids, n_samples, generator, schedule="linear", n_steps=None, eps=1e-3):
    """Monte Carlo negative ELBO of MDLM (Sahoo et al. 2024), written directly: ``t`` by antithetic sampling
    clamped to ``[eps, 1]`` as in their code (or ``t = i / T`` in discrete time), each token masked with
    probability ``1 - alpha_t``, loss ``w(t) * sum_masked -log p`` with ``w = -alpha'(t) / (1 - alpha_t)``."""
    alpha = noise_schedule(schedule)
    if n_steps is None:
        u = (torch.rand(n_samples, generator=generator, dtype=torch.float64) / n_samples
             + torch.arange(n_samples, dtype=torch.float64) / n_samples) % 1
        t = ((1 - eps) * u + eps).numpy()
        h = 1e-6
        weight = (alpha(t - h) - alpha(t + h)) / (2 * h) / (1 - alpha(t))
    else:
        i = torch.randint(1, n_steps + 1, (n_samples,), generator=generator).numpy()
        t, s = i / n_steps, (i - 1) / n_steps
        weight = n_steps * (alpha(s) - alpha(t)) / (1 - alpha(t))
    probability = torch.as_tensor(1 - alpha(t))
    masked = torch.rand(n_samples, len(ids), generator=generator, dtype=torch.float64) < probability[:, None]
    inputs = torch.where(masked, MASK_ID, ids.expand(n_samples, -1))
    with torch.no_grad():
        log_probs = torch.log_softmax(model(inputs, torch.ones_like(inputs)).double(), -1)
    token = log_probs.gather(2, ids.expand(n_samples, -1).unsqueeze(2)).squeeze(2)
    losses = torch.as_tensor(weight) * -(token * masked).sum(1)
    return float(losses.mean()), float(losses.std() / np.sqrt(n_samples))


def test_the_bound_agrees_with_mdlm_continuous_time_loss():
    tokenizer, model = gpt2_style_tokenizer(), TinyBidirectionalLM(seed=1).eval()
    with torch.no_grad():
        model.head.weight.mul_(4)  # peaked, context-dependent conditionals
    text = "the big cat sat on the red mat"
    ids = torch.tensor(tokenizer(text)["input_ids"])
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, mask_token_id=MASK_ID, device="cpu", random_state=0).fit()
    generator = torch.Generator().manual_seed(0)
    direct, direct_std = mdlm_loss(model, ids, 20000, generator)
    for method, n_masks in [("sweep", 100), ("chain", 100), ("uniform", 2000)]:
        bound = masked_diffusion_bound(scorer.runner_, [text], score_method=method, score_masks=n_masks,
                                       random_state=0)
        std = np.hypot(bound.nelbo_std[0], direct_std)
        assert abs(bound.nelbo[0] - direct) < 3 * std, (method, bound.nelbo[0], direct, std)
        assert bound.nelbo_std[0] > 0
        np.testing.assert_allclose(bound.perplexity, np.exp(bound.nelbo / 8))
    # a discrete-time ELBO with the cosine schedule weighs the sizes: checked against its direct form
    discrete, discrete_std = mdlm_loss(model, ids, 20000, generator, schedule="cosine", n_steps=4)
    bound = masked_diffusion_bound(scorer.runner_, [text], score_masks=100, schedule="cosine", n_steps=4,
                                   random_state=0)
    assert abs(bound.nelbo[0] - discrete) < 3 * np.hypot(bound.nelbo_std[0], discrete_std)
    continuous = masked_diffusion_bound(scorer.runner_, [text], score_masks=100, random_state=0)
    assert abs(bound.nelbo[0] - continuous.nelbo[0]) > 1


def test_schedule_weights():
    np.testing.assert_allclose(schedule_weights("cosine", n_steps=20000)(6), 1, atol=1e-3)
    np.testing.assert_allclose(schedule_weights("linear")(4), 1)
    with pytest.raises(ValueError, match="must decrease from 1"):
        schedule_weights(lambda t: t, n_steps=3)
    with pytest.raises(ValueError, match="'schedule' parameter of noise_schedule must be .* or a callable; got 'exp'"):
        noise_schedule("exp")


def test_the_masked_diffusion_example_runs_small(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "plot_masked_diffusion.py"
    spec = importlib.util.spec_from_file_location("plot_masked_diffusion", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--max-steps", "2", "--n-train", "100", "--n-test", "4", "--orderings", "2", "--vocab-size", "120",
                 "--output", str(tmp_path / "figure.png")])
    out = capsys.readouterr().out
    assert out.count("perplexity bound on 4 held-out sentences") == 2 and "any-order generation" in out
    assert (tmp_path / "figure.png").exists()


def test_a_schedule_that_stays_unmasked_for_a_while_has_the_limit_not_nan():
    alpha = lambda t: np.clip(2 - 2 * np.asarray(t), 0, 1)  # noqa: E731 - alpha = 1 until t = 1/2, then linear
    weights = schedule_weights(alpha, n_steps=10)(4)
    assert np.isfinite(weights).all() and (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(), 4, rtol=1e-12)
    np.testing.assert_allclose(schedule_weights(alpha, n_steps=20_000)(3), 1, atol=1e-3)  # continuous-time limit


@pytest.mark.parametrize("n_steps", [2.7, 1.5, "3", True, float("nan"), 0, -2, np.float64(3.0)])
def test_n_steps_is_an_integer_or_none_named_when_not(joint_scorer, n_steps):
    with pytest.raises(ValueError, match=r"'n_steps' parameter of schedule_weights must be None or an int in "):
        schedule_weights("linear", n_steps)
    with pytest.raises(ValueError, match=r"'n_steps' parameter of masked_diffusion_bound must be None or an int in "):
        masked_diffusion_bound(joint_scorer[1].runner_, ["a b"], n_steps=n_steps)
    assert schedule_weights("linear", np.int64(3))(2).shape == (2,)


def test_a_scalar_only_schedule_is_vectorised_and_a_wrong_one_named():
    scalar = lambda t: 1 - math.cos(math.pi / 2 * (1 - t))  # noqa: E731 - MD4's cosine, math functions only
    np.testing.assert_allclose(schedule_weights(scalar, n_steps=7)(5), schedule_weights("cosine", n_steps=7)(5),
                               rtol=1e-12)
    np.testing.assert_allclose(noise_schedule(scalar)(np.array([0.0, 0.5])), [1, 1 - math.cos(math.pi / 4)])
    with pytest.raises(ValueError, match=r"must decrease from 1 at t = 0 to 0 at t = 1; at t = i / n_steps it is"):
        schedule_weights(math.sin, n_steps=4)
    with pytest.raises(ValueError, match="must decrease"):
        schedule_weights(lambda t: np.full_like(t, np.nan), n_steps=4)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=6), st.integers(1, 40), st.integers(1, 12))
def test_schedule_weights_sum_to_the_length_for_any_valid_schedule(knots, n_steps, length):
    """``sum_M c_M = L``: the steps' masked fractions telescope, whatever the (flat or steep) schedule."""
    values = np.concatenate([[1.0], np.sort(knots)[::-1], [0.0]])
    alpha = lambda t: np.interp(t, np.linspace(0, 1, len(values)), values)  # noqa: E731
    weights = schedule_weights(alpha, n_steps)(length)
    assert np.isfinite(weights).all() and (weights >= -1e-12).all()
    np.testing.assert_allclose(weights.sum(), length, rtol=1e-9)


def test_the_bound_and_the_conditional_functions_take_a_unit(joint_scorer):
    runner = joint_scorer[1].runner_
    nats = masked_diffusion_bound(runner, ["a b a b b", "b b a a a"], score_masks=2, random_state=0)
    bits = masked_diffusion_bound(runner, ["a b a b b", "b b a a a"], score_masks=2, random_state=0, unit="bits")
    np.testing.assert_allclose(bits.nelbo, nats.nelbo / np.log(2), rtol=1e-12)
    np.testing.assert_allclose(bits.nelbo_std, nats.nelbo_std / np.log(2), rtol=1e-12)
    np.testing.assert_array_equal(bits.perplexity, nats.perplexity)
    assert bits.corpus_perplexity == nats.corpus_perplexity
    pairs = (["a b"], [" a b a"])
    nats = conditional_log_likelihood(runner, *pairs, max_forward_passes=4, random_state=0)
    bits = conditional_log_likelihood(runner, *pairs, max_forward_passes=4, random_state=0, unit="bits")
    np.testing.assert_allclose(bits.log_likelihood, nats.log_likelihood / np.log(2), rtol=1e-12)
    for function in (masked_diffusion_bound, lambda runner, texts, **kw: conditional_log_likelihood(
            runner, ["a b"], texts, **kw)):
        with pytest.raises(ValueError, match=r"'unit' parameter of \w+ must be a str among \{'bits', 'nats'\}"):
            function(runner, [" a b a"], unit="nat")


def test_every_log_probability_output_of_the_scorer_follows_its_unit(joint_scorer):
    scorer = joint_scorer[1]
    in_bits = clone(scorer).set_params(unit="bits").fit()
    texts, contexts, continuations = ["a b a b b", "b b a a a"], ["a b"], [" a b a"]
    for method, args in [("score_samples", (texts,)), ("transform", (texts,)), ("pseudo_log_likelihood", (texts,)),
                         ("paper_area", (texts,)), ("inconsistency", (texts,)),
                         ("conditional_score_samples", (contexts, continuations)),
                         ("conditional_transform", (contexts, continuations))]:
        np.testing.assert_allclose(getattr(in_bits, method)(*args), getattr(scorer, method)(*args) / np.log(2),
                                   rtol=1e-12, err_msg=method)
    np.testing.assert_allclose(in_bits.score(texts), scorer.score(texts) / np.log(2), rtol=1e-12)
    np.testing.assert_allclose(np.concatenate(in_bits.token_scores(texts)),
                               np.concatenate(scorer.token_scores(texts)) / np.log(2), rtol=1e-12)
    np.testing.assert_allclose(in_bits.pseudo_perplexity(texts), scorer.pseudo_perplexity(texts), rtol=1e-12)


def test_the_bound_takes_its_0_1_names_with_a_future_warning(joint_scorer):
    runner = joint_scorer[1].runner_
    new = masked_diffusion_bound(runner, ["a b a b b"], score_method="chain", score_masks=2, random_state=0)
    with pytest.warns(FutureWarning, match="masked_diffusion_bound: the parameter method was renamed score_method"):
        with pytest.warns(FutureWarning, match="the parameter n_masks was renamed score_masks"):
            old = masked_diffusion_bound(runner, ["a b a b b"], method="chain", n_masks=2, random_state=0)
    np.testing.assert_array_equal(old.nelbo, new.nelbo)
