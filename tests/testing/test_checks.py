"""skmpt.testing measures inconsistency, not only consistency, and each check of the contract
catches the model broken in its own way."""

import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from support.helpers import Tempered, make_ppca_module
from skmpt.masks import uniform_size_masks
from skmpt.models import MaskedModel, PPCAModule
from skmpt.testing import MASKED_MODEL_CHECKS, MaskedModelCase, TabularJoint, check_masked_model, ppca_parameters
from skmpt.testing.checks import (
    check_batch_independence,
    check_call_shapes,
    check_chain_matches_reference,
    check_decode_output,
    check_identity,
    check_log_marginal_output,
    check_masked_log_prob_output,
    check_masked_sum_matches_reference,
    check_posterior_output,
    check_randomness,
    check_shared_and_per_sample_masks,
    check_weighted_sum_matches_reference,
    check_zero_at_observed,
)
from skmpt.testing.missing import check_incomplete_rows


# ------------------------------------------------------------------ one check per rule
def _ppca(cls=PPCAModule):
    """A small PPCA module (it has every fast path, posterior and decode) and a sample."""
    g = torch.Generator().manual_seed(0)
    W, mean, X = (torch.randn(*shape, generator=g, dtype=torch.float64) for shape in ((2, 4), (4,), (5, 4)))
    return cls(W, mean, 0.5), X


class WrongDtype(PPCAModule):
    def masked_log_prob(self, X, masks):
        return super().masked_log_prob(X, masks).float()


class NotFinite(PPCAModule):
    def masked_log_prob(self, X, masks):
        return super().masked_log_prob(X, masks).masked_fill(masks, float("nan"))


class Leaky(PPCAModule):
    def masked_log_prob(self, X, masks):
        return super().masked_log_prob(X, masks) - 0.5 * ~masks


class HiddenNoise(PPCAModule):
    """Deterministic by its own account, but adds noise from torch's global generator."""

    def masked_log_prob(self, X, masks):
        out = super().masked_log_prob(X, masks)
        return out + torch.rand((), dtype=X.dtype) * masks


class BatchCentred(PPCAModule):
    def masked_log_prob(self, X, masks):
        return super().masked_log_prob(X - X.mean(0), masks)


class FirstSampleMasks(PPCAModule):
    """Per-sample masks read as if every sample had the first sample's masks."""

    def masked_log_prob(self, X, masks):
        return super().masked_log_prob(X, masks[:1].expand_as(masks) if masks.ndim == 3 else masks)


class OffsetSum(PPCAModule):
    def masked_log_prob_sum(self, X, masks):
        return super().masked_log_prob_sum(X, masks) + 0.1


class OffsetWeightedSum(PPCAModule):
    def weighted_log_prob_sum(self, X, masks, weights):
        return super().weighted_log_prob_sum(X, masks, weights) + 0.1


class ReversedChain(PPCAModule):
    def chain_log_prob(self, X, orderings):
        return super().chain_log_prob(X, orderings.flip(-1))


class OneMaskPerSampleSum(PPCAModule):
    """Per-mask sums wrong only with one mask per sample, (n, 1, D): the training default."""

    def masked_log_prob_sum(self, X, masks):
        sums = super().masked_log_prob_sum(X, masks)
        return sums + 0.1 if masks.ndim == 3 and masks.shape[1] == 1 else sums


class ColumnMarginal(PPCAModule):
    def log_marginal(self, X):
        return super().log_marginal(X)[:, None]


class ShiftedMarginal(PPCAModule):
    def log_marginal(self, X):
        return super().log_marginal(X) + 0.25


class TransposedPosterior(PPCAModule):
    def posterior(self, X):
        mean, *rest = super().posterior(X)
        return (mean.T, *rest)


class IgnoresObserved(PPCAModule):
    def masked_log_prob_sum(self, X, masks, *, observed=None):
        return super().masked_log_prob_sum(X, masks)


class SingleDecode(PPCAModule):
    def decode(self, Z):
        return super().decode(Z).float()


BROKEN = [
    (check_masked_log_prob_output, WrongDtype, "masked_log_prob output", "returned torch.float32"),
    (check_masked_log_prob_output, NotFinite, "masked_log_prob output", "non-finite values at masked positions"),
    (check_zero_at_observed, Leaky, "zero at observed positions", "max abs value 0.5; must be exactly 0"),
    (check_randomness, HiddenNoise, "randomness", "max abs difference"),
    (check_batch_independence, BatchCentred, "batch independence", "max abs difference"),
    (check_shared_and_per_sample_masks, FirstSampleMasks, "shared and per-sample masks", "max abs difference"),
    (check_masked_sum_matches_reference, OffsetSum, "masked_log_prob_sum", "max abs difference 0.1 "),
    (check_weighted_sum_matches_reference, OffsetWeightedSum, "weighted_log_prob_sum", "max abs difference 0.1 "),
    (check_chain_matches_reference, ReversedChain, "chain_log_prob", "max abs difference"),
    (
        check_call_shapes,
        OneMaskPerSampleSum,
        "call shapes",
        "masked_log_prob_sum, every sample, one mask per sample (X of shape (5, 4), masks of shape (5, 1, 4)): "
        "max abs difference 0.1 ",
    ),
    (check_log_marginal_output, ColumnMarginal, "log_marginal output", "returned shape (5, 1); expected (5,)"),
    (check_identity, ShiftedMarginal, "identity", "max abs difference 0.25 "),
    (check_posterior_output, TransposedPosterior, "posterior", "posterior(X)[0] must be a tensor of shape (5, K)"),
    (check_decode_output, SingleDecode, "decode", "returned torch.float32"),
    (
        check_incomplete_rows,
        IgnoresObserved,
        "incomplete rows",
        "masked_log_prob_sum with observed=: max abs difference",
    ),
]


def test_the_registry_lists_every_check_once():
    assert len(set(MASKED_MODEL_CHECKS)) == len(MASKED_MODEL_CHECKS)
    assert {check for check, *_ in BROKEN} == set(MASKED_MODEL_CHECKS)


@pytest.mark.parametrize("check", MASKED_MODEL_CHECKS, ids=lambda check: check.__name__)
def test_each_check_runs_alone_and_passes_a_model_that_keeps_the_contract(check):
    case = MaskedModelCase(*_ppca())
    check(case)
    assert len(case.report) == 1
    (value,) = case.report.values()
    assert value <= 1e-9 * 4 * 5  # log-densities of a few nats, summed over at most 4 features and 5 weights


@pytest.mark.parametrize("check, model_class, rule, message", BROKEN, ids=lambda p: getattr(p, "__name__", None))
def test_each_check_catches_the_model_broken_its_way(check, model_class, rule, message):
    pattern = re.escape(f"{model_class.__name__} fails the masked-model contract, '{rule}': {message}")
    with pytest.raises(AssertionError, match=pattern):
        check(MaskedModelCase(*_ppca(model_class)))
    # The same rule is the first that check_masked_model finds broken: every earlier check passes.
    with pytest.raises(AssertionError, match=pattern):
        check_masked_model(*_ppca(model_class))


class NoisyJoint(TabularJoint):
    """A stochastic model that draws its noise, one value per mask and feature, from its generator."""

    stochastic = True

    def masked_log_prob(self, X, masks, *, generator=None):
        noise = torch.rand(masks.shape[-2:], generator=generator, dtype=X.dtype)
        return super().masked_log_prob(X, masks) + 1e-3 * noise * masks

    def log_marginal(self, X, *, generator=None):
        return super().log_marginal(X)


class NoisyPerRow(NoisyJoint):
    """Its noise is drawn per row of the batch: a sample's value depends on where it sits."""

    def masked_log_prob(self, X, masks, *, generator=None):
        noise = torch.rand(X.shape[0], 1, 1, generator=generator, dtype=X.dtype)
        return TabularJoint.masked_log_prob(self, X, masks) + noise * masks


def test_a_stochastic_model_is_checked_with_seeded_generators():
    table = TabularJoint.random(3, random_state=0).probabilities.reshape(2, 2, 2)
    joint = NoisyJoint(table)
    X = joint.sample(4, random_state=0)
    report = check_masked_model(joint, X)
    assert report["randomness"] == 0.0 and report["identity"].startswith("skipped: stochastic model")
    with pytest.raises(AssertionError, match="NoisyPerRow .*'batch independence'"):
        check_masked_model(NoisyPerRow(table), X)


# ------------------------------------------------------------------ every shape of call
class OneSharedMaskSum(PPCAModule):
    def masked_log_prob_sum(self, X, masks):
        sums = super().masked_log_prob_sum(X, masks)
        return sums - 1.0 if masks.shape == (1, X.shape[1]) else sums


class OneSampleSum(PPCAModule):
    """A chunk of one sample gets another sample's sums (the last chunk of a batch)."""

    def masked_log_prob_sum(self, X, masks):
        sums = super().masked_log_prob_sum(X, masks)
        return sums + 0.5 if X.shape[0] == 1 else sums


class SqueezedOneSample(PPCAModule):
    def masked_log_prob_sum(self, X, masks):
        return super().masked_log_prob_sum(X, masks).squeeze(0)


class OneMaskReference(PPCAModule):
    """The reference itself is wrong with one mask per sample (and so is its inherited sum)."""

    def masked_log_prob(self, X, masks):
        values = super().masked_log_prob(X, masks)
        return values * 1.01 if masks.ndim == 3 and masks.shape[1] == 1 else values

    masked_log_prob_sum = MaskedModel.masked_log_prob_sum


class OneMaskWeightedSum(PPCAModule):
    def weighted_log_prob_sum(self, X, masks, weights):
        total = super().weighted_log_prob_sum(X, masks, weights)
        return 2 * total if len(masks) == 1 else total


class OneOrderingChain(PPCAModule):
    def chain_log_prob(self, X, orderings):
        return super().chain_log_prob(X, orderings.flip(-1) if len(orderings) == 1 else orderings)


class OneSampleChain(PPCAModule):
    def chain_log_prob(self, X, orderings):
        return super().chain_log_prob(X, orderings.flip(-1) if len(X) == 1 else orderings)


@pytest.mark.parametrize(
    "model_class, message",
    [
        (
            OneSharedMaskSum,
            "masked_log_prob_sum, every sample, one shared mask (X of shape (5, 4), masks of shape (1, 4))",
        ),
        (OneSampleSum, "masked_log_prob_sum, a chunk of one sample, one shared mask (X of shape (1, 4), masks of"),
        (
            SqueezedOneSample,
            "masked_log_prob_sum, a chunk of one sample, one shared mask (X of shape (1, 4), masks "
            "of shape (1, 4)): returned shape (1,); expected (1, 1)",
        ),
        (
            OneMaskReference,
            "masked_log_prob, every sample, one mask per sample (X of shape (5, 4), masks of shape "
            "(5, 1, 4)): max abs difference",
        ),
        (
            OneMaskWeightedSum,
            "weighted_log_prob_sum, every sample, one shared mask (X of shape (5, 4), masks of "
            "shape (1, 4)): max abs difference",
        ),
        (OneOrderingChain, "chain_log_prob, every sample, one ordering (X of shape (5, 4), orderings of shape (1, 4))"),
        (OneSampleChain, "chain_log_prob, a chunk of one sample, one ordering (X of shape (1, 4), orderings of"),
    ],
    ids=lambda p: getattr(p, "__name__", None),
)
def test_a_model_broken_for_one_shape_of_call_only_is_caught(model_class, message):
    pattern = re.escape(f"{model_class.__name__} fails the masked-model contract, 'call shapes': {message}")
    with pytest.raises(AssertionError, match=pattern):
        check_masked_model(*_ppca(model_class))


def test_a_model_broken_for_one_mask_per_sample_corrupts_the_training_objective():
    """Why the check matters: the broken sums pass the many-mask checks but not training's call."""
    from skmpt.objectives import mpt_objective

    (good, X), (broken, _) = _ppca(), _ppca(OneMaskPerSampleSum)
    case = MaskedModelCase(broken, X)
    for check in MASKED_MODEL_CHECKS[: MASKED_MODEL_CHECKS.index(check_call_shapes)]:
        check(case)  # every earlier check passes
    assert case.report["masked_log_prob_sum"] < 1e-9
    masks = uniform_size_masks((len(X), 1), X.shape[1], random_state=0)
    with torch.no_grad():
        assert (
            float((mpt_objective(broken, X, masks) - mpt_objective(good, X, masks)).abs().min()) > 0.09
        )  # 0.1 times D / |m|


class Recording(PPCAModule):
    """Records the dtype of every X it is called with."""

    def __init__(self, *args):
        super().__init__(*args)
        self.seen = set()

    def masked_log_prob(self, X, masks):
        self.seen.add(("masked_log_prob", X.dtype))
        return super().masked_log_prob(X, masks)

    def masked_log_prob_sum(self, X, masks):
        self.seen.add(("masked_log_prob_sum", X.dtype))
        return super().masked_log_prob_sum(X, masks)

    def weighted_log_prob_sum(self, X, masks, weights):
        self.seen.add(("weighted_log_prob_sum", X.dtype))
        return super().weighted_log_prob_sum(X, masks, weights)

    def chain_log_prob(self, X, orderings):
        self.seen.add(("chain_log_prob", X.dtype))
        return super().chain_log_prob(X, orderings)

    def log_marginal(self, X):
        self.seen.add(("log_marginal", X.dtype))
        return super().log_marginal(X)


def _float32_ppca(cls=PPCAModule):
    module, X = _ppca()
    return cls(module.components.detach().float(), module.mean.detach().float(), 0.5), X.float().numpy()


def test_a_float32_model_is_checked_in_float32():
    module, X = _float32_ppca(Recording)
    assert X.dtype == np.float32
    report = check_masked_model(module, X, rtol=1e-4, atol=1e-5)
    assert {dtype for _, dtype in module.seen} == {torch.float32}
    assert {name for name, _ in module.seen} == {
        "masked_log_prob",
        "masked_log_prob_sum",
        "weighted_log_prob_sum",
        "chain_log_prob",
        "log_marginal",
    }
    assert 0 < report["masked_log_prob_sum"] < 1e-4  # float32 rounding, not float64's
    assert MaskedModelCase(module, torch.from_numpy(X)).X.dtype == torch.float32
    # Input without a floating dtype of its own takes the model's.
    assert MaskedModelCase(module, X.tolist()).X.dtype == torch.float32
    assert MaskedModelCase(*_ppca()).X.dtype == torch.float64


def test_a_float32_failure_names_the_precision_and_a_tolerance():
    module, X = _float32_ppca()
    with pytest.raises(AssertionError, match=r"X is float32: the model was checked in float32, .*rtol=1e-04"):
        check_masked_model(module, X)
    with pytest.raises(AssertionError, match="max abs difference") as info:
        check_masked_model(*_ppca(OffsetSum))
    assert "X is float" not in str(info.value)  # float64: no precision note


def test_x_in_another_dtype_than_the_model_is_passed_as_given():
    module, X = _ppca()
    with pytest.raises(
        AssertionError,
        match=r"cannot be called with X in torch\.float32: the model's parameters are "
        r"torch\.float64\. .*pass X in torch\.float64 .*model\.to\(torch\.float32\)",
    ):
        check_masked_model(module, X.float())
    # A model that computes in its own precision and returns X's dtype keeps the contract.
    joint = TabularJoint.random(3, random_state=0)
    assert joint.probabilities.dtype == torch.float64
    report = check_masked_model(joint, joint.sample(4, random_state=0).float().numpy(), rtol=1e-5, atol=1e-6)
    assert report["identity"] < 1e-5


@settings(max_examples=40, deadline=None)
@given(
    params=ppca_parameters(max_features=5),
    n_samples=st.integers(1, 4),
    n_masks=st.integers(1, 3),
    per_sample=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_ppca_fast_paths_match_the_reference_for_every_shape_of_call(params, n_samples, n_masks, per_sample, seed):
    module = make_ppca_module(*params)
    n_features = params[1].shape[0]
    g = torch.Generator().manual_seed(seed)
    X = module.mean.detach() + torch.randn(n_samples, n_features, generator=g, dtype=torch.float64)
    masks = uniform_size_masks((n_samples, n_masks) if per_sample else n_masks, n_features, random_state=seed)
    with torch.no_grad():
        reference = module.masked_log_prob(X, masks)
        sums = module.masked_log_prob_sum(X, masks)
        # Each sample alone, each mask alone: the values of the whole call.
        alone = torch.stack(
            [
                torch.cat(
                    [
                        module.masked_log_prob(X[i : i + 1], (masks[i] if per_sample else masks)[p : p + 1])
                        for p in range(n_masks)
                    ],
                    dim=1,
                )[0]
                for i in range(n_samples)
            ]
        )
    assert reference.shape == (n_samples, n_masks, n_features) and sums.shape == (n_samples, n_masks)
    scale = 1 + reference.abs().sum(-1)
    np.testing.assert_array_less(((alone - reference).abs().sum(-1) / scale).numpy(), 1e-9)
    np.testing.assert_array_less(((sums - reference.sum(-1)).abs() / scale).numpy(), 1e-9)
    if not per_sample:
        weights = torch.linspace(0.5, 2.0, n_masks, dtype=X.dtype)
        with torch.no_grad():
            total = module.weighted_log_prob_sum(X, masks, weights)
        assert total.shape == (n_samples,)
        np.testing.assert_array_less(((total - sums @ weights).abs() / (scale @ weights)).numpy(), 1e-9)
    if n_samples >= 2:  # the check itself, with n_masks check masks (it needs two samples)
        check_call_shapes(MaskedModelCase(module, X, n_check_masks=n_masks, rtol=1e-9, atol=1e-9, random_state=seed))


class SumWithoutObserved(PPCAModule):
    """Handles missing entries in its reference, but its per-mask sum takes no observed=."""

    def masked_log_prob_sum(self, X, masks):
        return super().masked_log_prob_sum(X, masks)


def test_a_duck_typed_model_is_checked_wrapped_and_named_by_its_own_class():
    joint = TabularJoint.random(3, concentration=0.5, random_state=0)
    X = joint.sample(6, random_state=0)
    report = check_masked_model(Tempered(joint, 1.0), X)
    assert report["identity"] < 1e-12 and report["masked_log_prob_sum"] < 1e-12
    assert report["posterior"].startswith("skipped") and report["incomplete rows"].startswith("skipped")
    with pytest.raises(AssertionError, match=r"^Tempered fails the masked-model contract, 'identity'"):
        check_masked_model(Tempered(joint, 0.5), X)


def test_incomplete_rows_of_the_reference_table_and_a_fast_path_that_refuses_them():
    joint = TabularJoint.random(4, random_state=0)
    report = check_masked_model(joint, joint.sample(6, random_state=0))
    assert isinstance(report["incomplete rows"], float) and report["incomplete rows"] < 1e-12
    model, X = _ppca(SumWithoutObserved)
    assert model.handles_missing
    with pytest.raises(AssertionError, match=r"'incomplete rows': SumWithoutObserved\.masked_log_prob_sum takes no "
                                             r"observed="):
        check_incomplete_rows(MaskedModelCase(model, X))


def test_the_checks_one_by_one_are_imported_from_their_modules_and_the_old_spelling_warns():
    """0.1.0 exported every check from skmpt.testing: those names still work for 0.2.0, with a FutureWarning."""
    import skmpt.testing
    import skmpt.testing.checks
    import skmpt.testing.missing
    import skmpt.testing.predictors

    assert len(skmpt.testing.__all__) == 13 and "check_identity" not in skmpt.testing.__all__
    for name, module in [("check_identity", skmpt.testing.checks), ("check_incomplete_rows", skmpt.testing.missing),
                         ("incomplete_pattern", skmpt.testing.missing), ("check_mask_id", skmpt.testing.predictors)]:
        with pytest.warns(FutureWarning, match=rf"skmpt.testing.{name} is deprecated since 0.2.0 .*"
                                                rf"import it from {module.__name__} \({module.__name__}.{name}\)"):
            assert getattr(skmpt.testing, name) is getattr(module, name)
    with pytest.raises(AttributeError, match="module 'skmpt.testing' has no attribute 'check_nothing'"):
        skmpt.testing.check_nothing  # noqa: B018
    assert all(check.__module__ in ("skmpt.testing.checks", "skmpt.testing.missing") for check in MASKED_MODEL_CHECKS)
