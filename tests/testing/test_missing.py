"""check_incomplete_rows and its pattern of observed entries."""

import pytest
import torch

from skmpt.models import PPCAModule
from skmpt.testing import MaskedModelCase, TabularJoint
from skmpt.testing.missing import check_incomplete_rows, incomplete_pattern


def test_the_pattern_has_a_complete_row_an_empty_row_and_its_rate():
    observed = incomplete_pattern(400, 5, seed=3, rate=0.7)
    assert observed.dtype == torch.bool and observed.shape == (400, 5)
    assert observed[0].all() and not observed[-1].any()
    assert abs(observed[1:-1].float().mean().item() - 0.7) < 0.05
    assert torch.equal(incomplete_pattern(400, 5, seed=3, rate=0.7), observed)
    assert incomplete_pattern(2, 3).all(-1)[0] and incomplete_pattern(2, 3).shape == (2, 3)  # no empty row below 3


def test_a_model_that_keeps_the_contract_on_incomplete_rows_passes_and_a_leaky_one_fails():
    joint = TabularJoint.random(4, random_state=0)
    case = MaskedModelCase(joint, joint.sample(6, random_state=0))
    check_incomplete_rows(case)
    assert case.report["incomplete rows"] < 1e-12

    class SeesMissing(PPCAModule):
        """Conditions on the entries it was told are not observed."""

        def masked_log_prob_sum(self, X, masks, *, generator=None, observed=None):
            return super().masked_log_prob_sum(X, masks, generator=generator)

    g = torch.Generator().manual_seed(0)
    W, mean, X = (torch.randn(*shape, generator=g, dtype=torch.float64) for shape in ((2, 4), (4,), (5, 4)))
    with pytest.raises(AssertionError, match="'incomplete rows'"):
        check_incomplete_rows(MaskedModelCase(SeesMissing(W, mean, 0.5), X))
