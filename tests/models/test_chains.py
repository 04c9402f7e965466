"""The chain scores of the linear-Gaussian models and the mixtures from one factorisation per
ordering (skmpt/models/_chains.py) against the token-by-token updates that computed them
before, and against the reference conditionals."""

import pytest
import torch

from skmpt.masks import random_orderings
from skmpt.models import (
    FactorAnalysisModule,
    GaussianMixtureModule,
    MaskedModel,
    PPCAModule,
    reference_chain_log_prob,
)
from skmpt.objectives import cumulative_score, mpt_curve

RTOL = 1e-10


def close(actual, expected, rtol=RTOL):
    """Relative to the magnitude of the terms (a term near zero is held to rtol in absolute)."""
    scale = expected.abs().clamp(min=1.0)
    return float(((actual - expected).abs() / scale).max()) < rtol


def linear_gaussian(kind, n_features, n_components, generator):
    W = torch.randn(n_components, n_features, generator=generator, dtype=torch.float64)
    mean = torch.randn(n_features, generator=generator, dtype=torch.float64)
    if kind == "ppca":
        return PPCAModule(W, mean, torch.tensor(0.7, dtype=torch.float64))
    noise = 0.1 + torch.rand(n_features, generator=generator, dtype=torch.float64)
    return FactorAnalysisModule(W, mean, noise)


def mixture(covariance_type, n_features, n_components, generator):
    weights = 0.2 + torch.rand(n_components, generator=generator, dtype=torch.float64)
    means = 2 * torch.randn(n_components, n_features, generator=generator, dtype=torch.float64)
    A = torch.randn(n_components, n_features, n_features, generator=generator, dtype=torch.float64)
    eye = torch.eye(n_features, dtype=torch.float64)
    covariances = {
        "full": A @ A.mT / n_features + 0.3 * eye,
        "tied": A[0] @ A[0].T / n_features + 0.3 * eye,
        "diag": 0.2 + torch.rand(n_components, n_features, generator=generator, dtype=torch.float64),
        "spherical": 0.2 + torch.rand(n_components, generator=generator, dtype=torch.float64),
    }[covariance_type]
    return GaussianMixtureModule(weights / weights.sum(), means, covariances, covariance_type)


MODELS = [
    # 40 features: more than one block of the linear-Gaussian models' triangular products.
    *[(linear_gaussian, kind, n_features, 3) for kind in ("ppca", "fa") for n_features in (1, 5, 40)],
    *[(mixture, kind, n_features, 3) for kind in ("full", "tied", "diag", "spherical") for n_features in (1, 6)],
]


@pytest.fixture(params=MODELS, ids=lambda p: f"{p[1]}-D{p[2]}")
def model_and_data(request):
    build, kind, n_features, n_components = request.param
    generator = torch.Generator().manual_seed(n_features)
    model = build(kind, n_features, n_components, generator).requires_grad_(False)
    X = 2 * torch.randn(7, n_features, generator=generator, dtype=torch.float64)
    return model, X, generator


def test_chain_matches_token_by_token_updates_and_reference(model_and_data):
    model, X, generator = model_and_data
    n_features = X.shape[1]
    orderings = random_orderings(3, n_features, random_state=generator)
    fast = model.chain_log_prob(X, orderings)
    # Every entry observed, one pattern per sample: the rank-one updates of the previous code.
    everything = torch.ones_like(X, dtype=torch.bool)
    assert close(fast, model._observed_chain(X, orderings, everything))
    assert close(fast, reference_chain_log_prob(model, X, orderings), 1e-9)
    assert close(fast.sum(-1), model.log_marginal(X).unsqueeze(-1).expand(-1, 3), 1e-9)


def test_chain_with_a_shared_pattern_matches_per_sample_updates(model_and_data):
    model, X, generator = model_and_data
    n_features = X.shape[1]
    orderings = random_orderings(2, n_features, random_state=generator)
    pattern = torch.rand(n_features, generator=generator) < 0.6
    pattern[0] = True
    fast = model.chain_log_prob(X, orderings, observed=pattern)
    per_sample = model._observed_chain(X, orderings, pattern.expand_as(X))
    assert close(fast, per_sample)
    assert bool((fast[:, ~pattern[orderings]] == 0).all())  # unobserved tokens are skipped
    assert close(fast.sum(-1), model.log_marginal(X, observed=pattern.expand_as(X)).unsqueeze(-1).expand(-1, 2), 1e-9)


def reference_model(model):
    """The same model whose chain goes through the contract's reference (nested masks)."""
    reference = type(f"Reference{type(model).__name__}", (type(model),), {"chain_log_prob": MaskedModel.chain_log_prob})
    copy = reference.__new__(reference)
    copy.__dict__.update(model.__dict__)
    return copy


def test_chain_scores_and_curves_match_the_reference_path(model_and_data):
    model, X, _ = model_and_data
    reference = reference_model(model)
    observed = torch.rand(X.shape, generator=torch.Generator().manual_seed(1)) < 0.8
    observed[:, 0] = True
    for options in ({}, {"observed": observed}):
        for function in (cumulative_score, mpt_curve):
            fast = function(model, X, score_method="chain", score_masks=2, random_state=0, **options)
            slow = function(reference, X, score_method="chain", score_masks=2, random_state=0, **options)
            assert close(fast, slow, 1e-9)


@pytest.mark.parametrize("covariance_type", ["diag", "spherical", "full"])
def test_mixture_masked_sums_match_the_per_token_conditionals(covariance_type):
    generator = torch.Generator().manual_seed(3)
    model = mixture(covariance_type, 9, 3, generator).requires_grad_(False)
    X = 2 * torch.randn(6, 9, generator=generator, dtype=torch.float64)
    masks = torch.rand(11, 9, generator=generator) < 0.5
    masks[:, 0] = True
    pattern = torch.rand(9, generator=generator) < 0.7
    pattern[0] = True
    for observed in (None, pattern, pattern.expand_as(X)):
        options = {} if observed is None else {"observed": observed}
        shared = masks if observed is None else masks & pattern
        expected = model.masked_log_prob(X, shared, **options).sum(-1)
        assert close(model.masked_log_prob_sum(X, shared, **options), expected)
    per_sample = masks.expand(6, -1, -1)
    assert close(model.masked_log_prob_sum(X, per_sample), model.masked_log_prob(X, per_sample).sum(-1))


def test_mixture_sweep_scores_match_the_reference_path():
    generator = torch.Generator().manual_seed(4)
    for covariance_type in ("diag", "spherical"):
        model = mixture(covariance_type, 7, 3, generator).requires_grad_(False)
        methods = {"masked_log_prob_sum": MaskedModel.masked_log_prob_sum}
        reference = type("Reference", (GaussianMixtureModule,), methods)
        slow = reference.__new__(reference)
        slow.__dict__.update(model.__dict__)
        X = 2 * torch.randn(5, 7, generator=generator, dtype=torch.float64)
        observed = torch.rand(X.shape, generator=generator) < 0.8
        for options in ({}, {"observed": observed}):
            for function in (cumulative_score, mpt_curve):
                fast = function(model, X, score_method="sweep", score_masks=3, random_state=0, **options)
                assert close(fast, function(slow, X, score_method="sweep", score_masks=3, random_state=0, **options))


def test_mixture_masked_sums_that_would_underflow_take_the_reference():
    # Token 0 puts component 1 about 1000 nats below component 0, whose density of token 1 is
    # then negligible: the factored sum over the components underflows, the reference does not.
    means = torch.tensor([[0.0, 0.0], [45.0, 30.0]], dtype=torch.float64)
    variances = torch.tensor([[1e-4, 1e-4], [1.0, 1.0]], dtype=torch.float64)
    model = GaussianMixtureModule(torch.tensor([0.5, 0.5], dtype=torch.float64), means, variances, "diag")
    X = torch.tensor([[0.0, 30.0]], dtype=torch.float64)
    masks = torch.tensor([[False, True]])
    with torch.no_grad():
        sums = model.masked_log_prob_sum(X, masks)
        assert bool(torch.isfinite(sums).all())
        assert close(sums, model.masked_log_prob(X, masks).sum(-1))
