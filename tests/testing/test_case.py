"""MaskedModelCase: the model, the data and the masks the checks share."""

import pytest
import torch

from skmpt._validation import InvalidParameterError
from skmpt.testing import MaskedModelCase, TabularJoint, check_masked_model


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
