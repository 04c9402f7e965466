"""skmpt.testing measures inconsistency, not only consistency."""

import numpy as np
import pytest
import torch
from hypothesis import given
from sklearn.exceptions import NotFittedError

from conftest import make_ppca_module
from skmpt import MaskedPPCA
from skmpt.testing import (
    TabularJoint,
    assert_mpt_identity,
    check_mpt_identity,
    ppca_parameters,
    tabular_joints,
)


class Tempered:
    """Conditionals of a joint raised to a power and renormalised: consistent only at power 1."""

    def __init__(self, joint, power):
        self.joint, self.power = joint, power

    def log_marginal(self, X):
        return self.joint.log_marginal(X)

    def masked_log_prob(self, X, masks):
        log_p = self.joint.masked_log_prob(X, masks)
        log_q = torch.log1p(-log_p.exp())  # the other value of each binary token, same context
        tempered = self.power * log_p - torch.logaddexp(self.power * log_p, self.power * log_q)
        return torch.where(masks, tempered, torch.zeros_like(tempered))


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


@given(params=ppca_parameters(max_features=5))
def test_ppca_strategy_and_sampled_methods(params):
    module = make_ppca_module(*params)
    X = np.random.RandomState(0).randn(3, params[1].shape[0])
    assert check_mpt_identity(module, X, method="chain", n_masks=2, random_state=0).max_rel_discrepancy < 1e-9


def test_reference_values_and_their_shape():
    joint = TabularJoint.random(3, random_state=0)
    X = joint.sample(4, random_state=0)
    reference = joint.log_marginal(X).numpy() + 1.0
    check = check_mpt_identity(joint, X, log_marginal=reference)
    np.testing.assert_allclose(check.discrepancy, -1.0, rtol=1e-9)
    with pytest.raises(ValueError, match="shape"):
        check_mpt_identity(joint, X, log_marginal=reference[:2])


def test_tabular_joint_validation():
    with pytest.raises(ValueError, match="shape"):
        TabularJoint(np.ones((2, 3)) / 6)
    with pytest.raises(ValueError, match="sum to one"):
        TabularJoint(np.ones((2, 2)))
    joint = TabularJoint.random(2, random_state=0)
    with pytest.raises(ValueError, match="binary"):
        joint.log_marginal(torch.tensor([[0.5, 1.0]], dtype=torch.float64))


def test_identity_check_of_an_unfitted_estimator_is_not_fitted_error():
    with pytest.raises(NotFittedError):
        check_mpt_identity(MaskedPPCA(), np.zeros((3, 4)))
