"""check_incomplete_rows and its pattern of observed entries."""


import pytest
import torch

from skmpt.models import MaskedModel, PPCAModule
from skmpt.models.contract import reference_chain_log_prob
from skmpt.testing.case import MaskedModelCase
from skmpt.testing.joints import TabularJoint
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


@pytest.mark.parametrize("n_samples", [1, 2, 3, 50])
def test_pattern_has_a_complete_first_row_and_an_empty_last_row_from_three_rows(n_samples):
    observed = incomplete_pattern(n_samples, 6, seed=1)
    assert observed.shape == (n_samples, 6) and observed.dtype == torch.bool
    assert bool(observed[0].all())
    assert bool(observed[-1].any()) == (n_samples < 3)


def test_pattern_is_reproducible_and_observes_about_rate_of_the_entries():
    a = incomplete_pattern(400, 10, seed=3, rate=0.3)
    assert torch.equal(a, incomplete_pattern(400, 10, seed=3, rate=0.3))
    assert not torch.equal(a, incomplete_pattern(400, 10, seed=4, rate=0.3))
    middle = a[1:-1].double().mean()  # the rows not forced complete or empty
    assert abs(float(middle) - 0.3) < 0.03
    assert incomplete_pattern(4, 3, device="cpu").device.type == "cpu"


class CompleteRowsOnly(MaskedModel):
    """Its reference takes no observed=: it handles complete rows only."""

    def __init__(self, joint):
        super().__init__()
        self.joint = joint

    def masked_log_prob(self, X, masks, *, generator=None):
        return self.joint.masked_log_prob(X, masks)


def test_a_model_for_complete_rows_only_is_skipped_with_the_reason():
    joint = TabularJoint.random(3, random_state=0)
    model = CompleteRowsOnly(joint)
    assert not model.handles_missing
    case = MaskedModelCase(model, joint.sample(4, random_state=0))
    check_incomplete_rows(case)
    reason = "skipped: handles_missing is False (the model handles complete rows only)"
    assert case.report == {"incomplete rows": reason}


class LeaksOutsideTheMasks(TabularJoint):
    def masked_log_prob(self, X, masks, *, generator=None, observed=None):
        values = super().masked_log_prob(X, masks, observed=observed)
        return values if observed is None else values - 0.25 * (~masks)


class ChainIgnoresObserved(TabularJoint):
    def chain_log_prob(self, X, orderings, *, generator=None, observed=None):
        return reference_chain_log_prob(self, X, orderings)


class MarginalIgnoresObserved(TabularJoint):
    def log_marginal(self, X, *, generator=None, observed=None):
        return super().log_marginal(X, observed=None if observed is None else torch.ones_like(observed))


@pytest.mark.parametrize(
    ("model_class", "message"),
    [
        (LeaksOutsideTheMasks, "masked_log_prob is not zero outside the masks on incomplete rows."),
        (ChainIgnoresObserved, "chain_log_prob with observed=: max abs difference"),
        (MarginalIgnoresObserved, "exhaustive score over observed entries against log_marginal: max abs difference"),
    ],
)
def test_each_mishandled_hole_is_named(model_class, message):
    joint = TabularJoint.random(4, random_state=0)
    model = model_class(joint.probabilities.reshape((2,) * 4).numpy())
    X = joint.sample(5, random_state=0)
    with pytest.raises(AssertionError, match=f"{model_class.__name__} fails the masked-model contract, "
                                             f"'incomplete rows': {message}"):
        check_incomplete_rows(MaskedModelCase(model, X))


def test_a_marginal_of_an_empty_row_must_be_exactly_zero():
    class EmptyRowNotZero(TabularJoint):
        def log_marginal(self, X, *, generator=None, observed=None):
            values = super().log_marginal(X, observed=observed)
            if observed is None:
                return values
            return torch.where(observed.any(-1), values, torch.full_like(values, 1e-15))

    joint = TabularJoint.random(3, random_state=1)
    model = EmptyRowNotZero(joint.probabilities.reshape(2, 2, 2).numpy())
    # a difference far below the tolerance still fails: nothing observed has probability one exactly
    message = r"log_marginal\(X, observed=\) is not zero for a row with nothing observed"
    with pytest.raises(AssertionError, match=message):
        check_incomplete_rows(MaskedModelCase(model, joint.sample(4, random_state=0), atol=1e-12))
