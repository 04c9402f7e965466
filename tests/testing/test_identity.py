"""check_mpt_identity and assert_mpt_identity: zero discrepancy for conditionals of one joint, the size of
the inconsistency otherwise."""


import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from sklearn.exceptions import NotFittedError
from support.helpers import Tempered

from skmpt import MaskedPPCA
from skmpt.masks import all_masks
from skmpt.testing import tabular_joints
from skmpt.testing.identity import IdentityCheck, assert_mpt_identity, check_mpt_identity
from skmpt.testing.joints import TabularJoint


@given(joint=tabular_joints(min_features=2, max_features=5))
def test_consistent_models_have_zero_discrepancy(joint):
    check = check_mpt_identity(joint, joint.sample(6, random_state=0))
    assert check.max_abs_discrepancy < 1e-9
    assert check.cumulative.shape == check.log_marginal.shape == (6,)


def test_inconsistent_conditionals_are_reported():
    joint = TabularJoint.random(4, concentration=0.5, random_state=0)
    X = joint.sample(8, random_state=0)
    assert check_mpt_identity(Tempered(joint, 1.0), X).max_abs_discrepancy < 1e-9
    check = check_mpt_identity(Tempered(joint, 0.5), X)
    assert check.max_abs_discrepancy > 1e-2
    with pytest.raises(AssertionError, match="cumulative MPT score differs"):
        assert_mpt_identity(Tempered(joint, 0.5), X)


def test_reference_values_and_their_shape():
    joint = TabularJoint.random(3, random_state=0)
    X = joint.sample(4, random_state=0)
    reference = joint.log_marginal(X).numpy() + 1.0
    check = check_mpt_identity(joint, X, log_marginal=reference)
    np.testing.assert_allclose(check.discrepancy, -1.0, rtol=1e-9)
    with pytest.raises(ValueError, match="shape"):
        check_mpt_identity(joint, X, log_marginal=reference[:2])


def test_identity_check_of_an_unfitted_estimator_is_not_fitted_error():
    with pytest.raises(NotFittedError):
        check_mpt_identity(MaskedPPCA(), np.zeros((3, 4)))


@pytest.fixture(scope="module")
def joint_and_data():
    joint = TabularJoint.random(4, random_state=2)
    return joint, joint.sample(6, random_state=3)


class TemperedTable(TabularJoint):
    """Conditionals of the joint raised to ``power`` and renormalised: consistent only at power 1."""

    def __init__(self, probabilities, power):
        super().__init__(probabilities)
        self.power = power

    def masked_log_prob(self, X, masks, *, generator=None):
        log_p = super().masked_log_prob(X, masks)
        log_q = torch.log1p(-log_p.exp())
        tempered = self.power * log_p - torch.logaddexp(self.power * log_p, self.power * log_q)
        return torch.where(masks, tempered, torch.zeros_like(tempered))


def cumulative_by_hand(model, X):
    """``sum_M mean_{|m| = M} (1/M) sum_{j in m} log p(x_j | x_{-m})`` over every mask."""
    D = X.shape[1]
    masks = all_masks(D)
    sums = model.masked_log_prob(X, masks).sum(-1).detach().numpy()
    sizes = masks.sum(-1).numpy()
    return sum(sums[:, sizes == M].mean(1) / M for M in range(1, D + 1))


def test_cumulative_is_the_exhaustive_sum_over_sizes_and_discrepancy_is_against_log_marginal(joint_and_data):
    joint, X = joint_and_data
    check = check_mpt_identity(joint, X)
    assert isinstance(check, IdentityCheck)
    assert check.cumulative.dtype == np.float64 and check.cumulative.shape == (6,)
    np.testing.assert_allclose(check.cumulative, cumulative_by_hand(joint, X), rtol=1e-12)
    np.testing.assert_allclose(check.log_marginal, joint.log_marginal(X).numpy(), rtol=1e-15)
    np.testing.assert_array_equal(check.discrepancy, check.cumulative - check.log_marginal)


def test_an_inconsistent_model_has_the_discrepancy_summed_by_hand(joint_and_data):
    joint, X = joint_and_data
    tempered = TemperedTable(joint.probabilities.reshape((2,) * 4).numpy(), 0.5)
    check = check_mpt_identity(tempered, X)
    expected = cumulative_by_hand(tempered, X) - joint.log_marginal(X).numpy()
    np.testing.assert_allclose(check.discrepancy, expected, rtol=1e-12)
    assert check.max_abs_discrepancy == pytest.approx(np.abs(expected).max(), rel=1e-12)
    assert check.max_abs_discrepancy > 1e-2


def test_summaries_of_a_check():
    check = IdentityCheck(np.array([-1.5, -3.0]), np.array([-2.0, -2.0]), np.array([0.5, -1.0]))
    assert check.max_abs_discrepancy == 1.0
    assert check.max_rel_discrepancy == 0.5
    zero = IdentityCheck(np.zeros(1), np.zeros(1), np.array([1e-300]))  # no division by zero
    assert math.isfinite(zero.max_rel_discrepancy)
    with pytest.raises(dataclasses.FrozenInstanceError):
        check.discrepancy = np.zeros(2)


def test_sampling_methods_are_reproducible_with_random_state(joint_and_data):
    joint, X = joint_and_data
    tempered = TemperedTable(joint.probabilities.reshape((2,) * 4).numpy(), 0.5)
    for method in ("sweep", "nested", "chain"):
        a = check_mpt_identity(tempered, X, score_method=method, score_masks=3, random_state=0)
        b = check_mpt_identity(tempered, X, score_method=method, score_masks=3, random_state=0)
        np.testing.assert_array_equal(a.cumulative, b.cumulative)
        # the chain is exact for consistent conditionals, whatever the ordering
        if method == "chain":
            exact = check_mpt_identity(joint, X, score_method=method, score_masks=2, random_state=5)
            assert exact.max_abs_discrepancy < 1e-12


def test_reference_values_may_be_given_as_a_tensor_list_or_array(joint_and_data):
    joint, X = joint_and_data
    reference = joint.log_marginal(X)
    for values in (reference, reference.tolist(), reference.numpy()):
        check = check_mpt_identity(joint, X, log_marginal=values)
        assert check.log_marginal.dtype == np.float64 and check.max_abs_discrepancy < 1e-12
    with pytest.raises(ValueError, match=r"log_marginal must have shape \(6,\); got \(6, 1\)"):
        check_mpt_identity(joint, X, log_marginal=reference.numpy()[:, None])


def test_array_input_is_accepted(joint_and_data):
    joint, X = joint_and_data
    check = check_mpt_identity(joint, X.numpy().astype(int).tolist())
    assert check.max_abs_discrepancy < 1e-12


def test_assert_mpt_identity_applies_its_tolerances(joint_and_data):
    joint, X = joint_and_data
    assert_mpt_identity(joint, X)
    shifted = joint.log_marginal(X).numpy() - 1e-3
    assert_mpt_identity(joint, X, log_marginal=shifted, atol=2e-3)
    assert_mpt_identity(joint, X, log_marginal=shifted, rtol=1e-2)
    with pytest.raises(AssertionError, match="The cumulative MPT score differs from the log-marginal likelihood"):
        assert_mpt_identity(joint, X, log_marginal=shifted, atol=5e-4)


def test_the_0_1_0_spelling_method_warns_and_still_works(joint_and_data):
    joint, X = joint_and_data
    with pytest.warns(FutureWarning, match="check_mpt_identity: the parameter method was renamed score_method"):
        old = check_mpt_identity(joint, X, method="chain", score_masks=2, random_state=0)
    new = check_mpt_identity(joint, X, score_method="chain", score_masks=2, random_state=0)
    np.testing.assert_array_equal(old.cumulative, new.cumulative)
