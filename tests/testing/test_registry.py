"""MODELS: every factory gives a model of skmpt's contract and a float64 sample it scores."""

import pytest
import torch

from skmpt.models import MaskedModel
from skmpt.testing import MODELS


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_factory_gives_a_model_and_a_sample_it_scores_the_same_each_time(name):
    model, X = MODELS[name]()
    assert isinstance(model, MaskedModel) and X.dtype == torch.float64 and X.ndim == 2 and len(X) >= 2
    masks = torch.zeros(1, X.shape[1], dtype=torch.bool)
    masks[0, 0] = True
    first = model.masked_log_prob(X, masks, generator=torch.Generator().manual_seed(0))
    again_model, again_X = MODELS[name]()
    assert torch.equal(again_X, X)
    again = again_model.masked_log_prob(again_X, masks, generator=torch.Generator().manual_seed(0))
    assert first.shape == (len(X), 1, X.shape[1]) and torch.isfinite(first).all()
    torch.testing.assert_close(again, first, rtol=0, atol=0)


def test_the_registry_covers_every_model_class_and_covariance_type():
    classes = {type(MODELS[name]()[0]).__name__ for name in MODELS}
    assert {"PPCAModule", "FactorAnalysisModule", "GaussianMixtureModule", "LinearVAEModule", "VAEModule",
            "TabularJoint"} <= classes
    assert {name for name in MODELS if name.startswith("gaussian_mixture")} == {
        f"gaussian_mixture_{kind}" for kind in ("full", "diag", "tied", "spherical")}
