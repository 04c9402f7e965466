"""TabularJoint: a table over {0, 1}**D, conditioned by brute force."""

import numpy as np
import pytest
import torch

from skmpt.testing import TabularJoint


def test_tabular_joint_validation():
    with pytest.raises(ValueError, match="shape"):
        TabularJoint(np.ones((2, 3)) / 6)
    with pytest.raises(ValueError, match="sum to one"):
        TabularJoint(np.ones((2, 2)))
    joint = TabularJoint.random(2, random_state=0)
    with pytest.raises(ValueError, match="binary"):
        joint.log_marginal(torch.tensor([[0.5, 1.0]], dtype=torch.float64))
