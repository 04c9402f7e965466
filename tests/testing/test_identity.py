"""check_mpt_identity and assert_mpt_identity: zero discrepancy for conditionals of one joint, the size of
the inconsistency otherwise."""

import numpy as np
import pytest
from hypothesis import given
from sklearn.exceptions import NotFittedError

from support.helpers import Tempered
from skmpt import MaskedPPCA
from skmpt.testing import TabularJoint, assert_mpt_identity, check_mpt_identity, tabular_joints


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
