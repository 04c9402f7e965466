"""MaskedModelCase: the model, the data and the masks the checks share."""


import math

import numpy as np
import pytest
import torch

from skmpt import MaskedPPCA
from skmpt._validation import InvalidParameterError
from skmpt.testing import check_masked_model
from skmpt.testing.case import MaskedModelCase
from skmpt.testing.joints import TabularJoint


def test_case_draws_its_masks_from_random_state_and_validates_its_parameters():
    joint = TabularJoint.random(3, random_state=0)
    X = joint.sample(4, random_state=0)
    a, b = MaskedModelCase(joint, X, random_state=1), MaskedModelCase(joint, X, random_state=1)
    assert torch.equal(a.masks, b.masks) and torch.equal(a.per_sample_masks, b.per_sample_masks)
    assert torch.equal(a.orderings, b.orderings)
    assert bool(a.masks[-1].all()) and a.masks.sum(-1)[:3].tolist() == [1, 2, 3]
    case = MaskedModelCase(joint, X, n_check_masks=2, n_orderings=5)
    assert case.masks.shape == (2, 3) and case.per_sample_masks.shape == (4, 2, 3) and case.orderings.shape == (5, 3)
    for bad in ({"n_check_masks": 0}, {"n_orderings": 1.5}, {"rtol": -1.0}, {"random_state": "zero"}):
        with pytest.raises(InvalidParameterError, match=f"'{next(iter(bad))}' parameter of MaskedModelCase"):
            MaskedModelCase(joint, X, **bad)
    with pytest.raises(InvalidParameterError, match="'n_check_masks' parameter"):
        check_masked_model(joint, X, n_check_masks=0)


@pytest.fixture
def joint_and_data():
    joint = TabularJoint.random(4, random_state=0)
    return joint, joint.sample(5, random_state=0)


class NoisyJoint(TabularJoint):
    """Stochastic: its conditionals carry noise from the generator it is given."""

    stochastic = True

    def masked_log_prob(self, X, masks, *, generator=None):
        noise = torch.rand(masks.shape[-2:], generator=generator, dtype=X.dtype)
        return super().masked_log_prob(X, masks) + 1e-3 * noise * masks


def test_masks_cycle_through_every_size_and_the_last_masks_everything(joint_and_data):
    joint, X = joint_and_data
    case = MaskedModelCase(joint, X, n_check_masks=10, n_orderings=2)
    assert case.masks.dtype == torch.bool and case.masks.shape == (10, 4)
    assert case.masks.sum(-1).tolist() == [1, 2, 3, 4, 1, 2, 3, 4, 1, 4]
    assert case.per_sample_masks.shape == (5, 10, 4) and bool(case.per_sample_masks[:, -1].all())
    assert not all(torch.equal(case.per_sample_masks[0], m) for m in case.per_sample_masks[1:])  # drawn per sample
    assert sorted(case.orderings[0].tolist()) == [0, 1, 2, 3] and case.orderings.shape == (2, 4)


def test_seed_and_draws_follow_random_state(joint_and_data):
    joint, X = joint_and_data
    a, b, c = (MaskedModelCase(joint, X, random_state=s) for s in (3, 3, 4))
    assert a.seed == b.seed != c.seed and 0 <= a.seed < 2**62
    assert torch.equal(a.masks, b.masks) and not torch.equal(a.per_sample_masks, c.per_sample_masks)


def test_references_are_the_models_values_computed_once(joint_and_data):
    joint, X = joint_and_data
    case = MaskedModelCase(joint, X)
    assert torch.equal(case.reference, joint.masked_log_prob(X, case.masks))
    assert case.reference is case.reference  # cached
    assert torch.equal(case.per_sample_reference, joint.masked_log_prob(X, case.per_sample_masks))
    assert torch.equal(case.log_marginal, joint.log_marginal(X))
    assert not case.stochastic and case.report == {}


def test_call_forms_cover_every_shape_of_call_with_their_expected_values(joint_and_data):
    joint, X = joint_and_data
    case = MaskedModelCase(joint, X, n_check_masks=3)
    forms = case.call_forms
    assert len(forms) == 2 * (2 * 3 + 2)
    for label, rows, masks, expected in forms:
        got = joint.masked_log_prob(X[rows], masks)
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12, msg=label)
    assert {label.split(", ")[1] for label, *_ in forms} == {
        "one shared mask", "one mask per sample", "shared masks", "per-sample masks"}


def test_a_stochastic_model_is_called_with_generators_seeded_from_the_case():
    table = TabularJoint.random(3, random_state=0).probabilities.reshape(2, 2, 2)
    model = NoisyJoint(table)
    X = model.sample(4, random_state=0)
    case = MaskedModelCase(model, X)
    assert case.stochastic
    first = case.call(model.masked_log_prob, X, case.masks)
    assert torch.equal(first, case.call(model.masked_log_prob, X, case.masks))
    assert not torch.equal(first, case.call(model.masked_log_prob, X, case.masks, seed=1))
    expected = model.masked_log_prob(X, case.masks, generator=torch.Generator().manual_seed(case.seed))
    assert torch.equal(first, expected)
    # a deterministic model gets no generator
    seen = []
    joint = TabularJoint.random(3, random_state=0)
    MaskedModelCase(joint, X).call(lambda *args, generator: seen.append(generator))
    assert seen == [None]


def test_check_output_names_the_property_the_shape_and_the_dtype(joint_and_data):
    joint, X = joint_and_data
    case = MaskedModelCase(joint, X)
    case.check_output("thing", torch.zeros(5, 2, dtype=torch.float64), (5, 2))
    with pytest.raises(AssertionError, match=r"TabularJoint fails the masked-model contract, 'thing': "
                                             r"call \(1, 4\): returned shape \(5,\); expected \(5, 2\)\."):
        case.check_output("thing", torch.zeros(5, dtype=torch.float64), (5, 2), where="call (1, 4)")
    with pytest.raises(AssertionError, match="returned ndarray, not a torch.Tensor"):
        case.check_output("thing", np.zeros((5, 2)), (5, 2))
    with pytest.raises(AssertionError, match="returned torch.float32 on cpu; expected X's torch.float64 on cpu"):
        case.check_output("thing", torch.zeros(5, 2), (5, 2))


def test_assert_close_records_the_largest_difference_and_locates_the_first_failure(joint_and_data):
    joint, X = joint_and_data
    case = MaskedModelCase(joint, X, rtol=1e-12, atol=1e-3)
    expected = torch.tensor([[1.0, 2.0], [3.0, -math.inf]], dtype=torch.float64)
    case.assert_close("close", expected + 5e-4, expected)  # equal infinities count as no difference
    assert case.report["close"] == pytest.approx(5e-4)
    case.assert_close("close", expected, expected)
    assert case.report["close"] == pytest.approx(5e-4)  # the largest over calls is kept
    actual = expected.clone()
    actual[1, 0] = 3.5
    with pytest.raises(AssertionError, match=r"'far': max abs difference 0\.5 \(first beyond tolerance at index "
                                             r"\(1, 0\): got 3\.5, expected 3; rtol=1e-12, atol=0\.001\)\.$"):
        case.assert_close("far", actual, expected)
    assert case.report["far"] == pytest.approx(0.5)


def test_assert_close_in_float32_suggests_a_tolerance():
    joint = TabularJoint.random(3, random_state=0)
    case = MaskedModelCase(joint, joint.sample(3, random_state=0).float())
    assert case.X.dtype == torch.float32
    with pytest.raises(AssertionError, match=r"X is float32: .*e\.g\. rtol=1e-04, atol=1e-05\."):
        case.assert_close("x", torch.ones(2), torch.zeros(2))


def test_skip_and_fail(joint_and_data):
    joint, X = joint_and_data
    case = MaskedModelCase(joint, X)
    case.skip("posterior", "no posterior")
    assert case.report == {"posterior": "skipped: no posterior"}
    with pytest.raises(AssertionError, match=r"^TabularJoint fails the masked-model contract, 'x': broken\.$"):
        case.fail("x", "broken.")


@pytest.mark.parametrize("X", [torch.zeros(4), torch.zeros(1, 4), torch.zeros(3, 0), torch.zeros(2, 2, 2)])
def test_x_must_be_two_dimensional_with_two_samples(joint_and_data, X):
    joint, _ = joint_and_data
    with pytest.raises(ValueError, match="X must be a 2-D tensor with at least two samples and one feature"):
        MaskedModelCase(joint, X.double())


def test_a_fitted_estimator_is_checked_through_its_module():
    X = np.random.default_rng(0).normal(size=(30, 4))
    estimator = MaskedPPCA(n_components=1, random_state=0).fit(X)
    case = MaskedModelCase(estimator, X[:3])
    assert case.model is estimator.module_ and case.X.shape == (3, 4) and case.X.dtype == torch.float64
    assert case.posterior_mean.shape == (3, 1)


def test_assert_close_with_rtol_zero_takes_equal_infinities_as_equal(joint_and_data):
    joint, X = joint_and_data
    case = MaskedModelCase(joint, X, rtol=0.0, atol=1e-3)
    expected = torch.tensor([[1.0, -math.inf]], dtype=torch.float64)
    case.assert_close("inf", expected + torch.tensor([[5e-4, 0.0]], dtype=torch.float64), expected)
    assert case.report["inf"] == pytest.approx(5e-4)
    with pytest.raises(AssertionError, match="beyond tolerance"):
        case.assert_close("inf", torch.tensor([[1.0, math.inf]], dtype=torch.float64), expected)
