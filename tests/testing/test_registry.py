"""The registry of small models: every model class is in it, each factory is deterministic and fresh."""

import pytest
import torch

from skmpt.models import (
    FactorAnalysisModule,
    GaussianMixtureModule,
    LinearVAEModule,
    MaskedModel,
    PPCAModule,
    VAEModule,
)
from skmpt.testing.joints import TabularJoint
from skmpt.testing.registry import MODELS


def test_every_model_class_and_variant_is_registered():
    classes = {name: type(MODELS[name]()[0]) for name in MODELS}
    assert set(classes.values()) == {PPCAModule, FactorAnalysisModule, GaussianMixtureModule, LinearVAEModule,
                                     VAEModule, TabularJoint}
    mixtures = {MODELS[name]()[0].covariance_type for name in MODELS if classes[name] is GaussianMixtureModule}
    assert mixtures == {"full", "tied", "diag", "spherical"}
    linear = {MODELS[name]()[0].likelihood.name for name in MODELS if classes[name] is LinearVAEModule}
    assert linear == {"bernoulli", "gaussian"}
    vaes = {(m.likelihood.name, m.conditional) for m in (MODELS[n]()[0] for n in MODELS) if isinstance(m, VAEModule)}
    assert vaes == {("gaussian", "importance"), ("gaussian", "pseudo_gibbs"), ("bernoulli", "importance")}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_factory_gives_a_fresh_deterministic_model_and_a_sample_it_can_score(name):
    model, X = MODELS[name]()
    again, Y = MODELS[name]()
    assert isinstance(model, MaskedModel) and model is not again
    assert X.dtype == torch.float64 and X.ndim == 2 and X.shape[0] >= 2 and torch.equal(X, Y)
    state, other = model.state_dict(), again.state_dict()
    assert state.keys() == other.keys() and all(torch.equal(state[k], other[k]) for k in state)
    assert all(t.dtype == torch.float64 for t in state.values() if t.is_floating_point())
    binary = isinstance(model, TabularJoint) or getattr(getattr(model, "likelihood", None), "name", None) == "bernoulli"
    if binary:
        assert set(X.unique().tolist()) <= {0.0, 1.0}
    # modifying one model's parameters leaves the next factory call untouched
    with torch.no_grad():
        for tensor in model.parameters():
            tensor.add_(1.0)
    assert all(torch.equal(MODELS[name]()[0].state_dict()[k], other[k]) for k in other)
    masks = torch.eye(X.shape[1], dtype=torch.bool)
    generator = torch.Generator().manual_seed(0) if again.stochastic else None
    with torch.no_grad():
        values = again.masked_log_prob(X, masks, generator=generator)
    assert values.shape == (X.shape[0], X.shape[1], X.shape[1]) and bool(torch.isfinite(values).all())


def test_factories_leave_the_global_random_state_alone():
    state = torch.random.get_rng_state()
    for make in MODELS.values():
        make()
    assert torch.equal(torch.random.get_rng_state(), state)
