"""Scoring of array models: the 0.1.0 name of score_method still works, with a FutureWarning naming the new one."""

import pytest
import torch

from skmpt import objectives
from skmpt.testing import TabularJoint


@pytest.mark.parametrize("function", [objectives.mpt_curve, objectives.cumulative_score])
def test_method_is_renamed_score_method(function):
    joint = TabularJoint.random(3, random_state=0)
    X = torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64)
    with pytest.warns(FutureWarning, match=f"{function.__name__}: the parameter method was renamed score_method"):
        old = function(joint, X, method="exhaustive")
    torch.testing.assert_close(old, function(joint, X, score_method="exhaustive"))
    with pytest.raises(ValueError, match="score_method must be one of"):
        function(joint, X, score_method="uniform")  # a text-only estimator
