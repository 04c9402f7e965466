"""MODELS: every factory gives a model of skmpt's contract and a float64 sample it scores."""


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
from skmpt.models.mixed import MixedMixtureModule
from skmpt.testing.joints import TabularJoint
from skmpt.testing.registry import MODELS


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


def test_every_model_class_and_variant_is_registered():
    classes = {name: type(MODELS[name]()[0]) for name in MODELS}
    assert set(classes.values()) == {PPCAModule, FactorAnalysisModule, GaussianMixtureModule, LinearVAEModule,
                                     VAEModule, TabularJoint, MixedMixtureModule}
    assert {MODELS[name]()[0].covariance_type for name in MODELS if classes[name] is MixedMixtureModule} == {
        "full", "diag"}
    mixtures = {MODELS[name]()[0].covariance_type for name in MODELS if classes[name] is GaussianMixtureModule}
    assert mixtures == {"full", "tied", "diag", "spherical"}
    linear = {MODELS[name]()[0].likelihood.name for name in MODELS if classes[name] is LinearVAEModule}
    assert linear == {"bernoulli", "gaussian"}
    vaes = {(m.likelihood.name, m.conditional) for m in (MODELS[n]()[0] for n in MODELS) if isinstance(m, VAEModule)}
    assert vaes == {("gaussian", "importance"), ("gaussian", "pseudo_gibbs"), ("bernoulli", "importance"),
                    ("table", "importance")}


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
