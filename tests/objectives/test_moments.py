"""Training objectives from the data's moments: equal to the per-sample objectives averaged over
the samples, for shared masks, weights and a shared pattern of observed entries."""

import pytest
import torch

from skmpt.masks import observed_masks, uniform_size_masks
from skmpt.models import FactorAnalysisModule, PPCAModule
from skmpt.objectives import Moments, moment_mpt_objective, mpt_objective


def _module(isotropic, n_features=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(2, n_features, generator=g, dtype=torch.float64)
    mean = torch.randn(n_features, generator=g, dtype=torch.float64)
    if isotropic:
        return PPCAModule(W, mean, 0.7)
    return FactorAnalysisModule(W, mean, torch.rand(n_features, generator=g, dtype=torch.float64) + 0.2)


def _data(n=40, n_features=5, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, n_features, generator=g, dtype=torch.float64) * 2 + 1


@pytest.mark.parametrize("isotropic", [True, False])
def test_the_moments_objective_is_the_mean_of_the_per_sample_one(isotropic):
    module, X = _module(isotropic), _data()
    masks = uniform_size_masks((12,), 5, random_state=0)
    expected = mpt_objective(module, X, masks).mean()
    assert torch.allclose(moment_mpt_objective(module, Moments.from_samples(X), masks), expected, rtol=1e-12)


def test_weighted_moments_count_a_sample_as_often_as_its_weight():
    module, X = _module(False), _data()
    weights = torch.arange(40, dtype=torch.float64) % 3
    masks = uniform_size_masks((6,), 5, random_state=1)
    repeated = X.repeat_interleave(weights.long(), dim=0)
    expected = mpt_objective(module, repeated, masks).mean()
    got = moment_mpt_objective(module, Moments.from_samples(X, weights), masks)
    assert torch.allclose(got, expected, rtol=1e-12)


def test_a_shared_pattern_of_observed_entries_weighs_masks_by_the_observed_count():
    module, X = _module(True), _data()
    pattern = torch.tensor([True, False, True, True, False])
    X = torch.where(pattern, X, torch.zeros_like(X))  # missing entries hold zeros, as in training
    masks = observed_masks("uniform", (1, 9), pattern[None], random_state=0)[0]
    expected = mpt_objective(module, X, masks.expand(40, 9, 5), observed=pattern.expand(40, 5)).mean()
    got = moment_mpt_objective(module, Moments.from_samples(X), masks, observed=pattern)
    assert torch.allclose(got, expected, rtol=1e-12)


def test_moments_of_chunks_add_up_to_those_of_the_whole():
    X, weights = _data(n=31), torch.rand(31, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    whole = Moments.from_samples(X, weights, chunk_size=7)
    parts = Moments.from_samples(X[:10], weights[:10]) + Moments.from_samples(X[10:], weights[10:])
    for name in ("weight", "mean", "covariance"):
        assert torch.allclose(getattr(parts, name), getattr(whole, name), rtol=1e-12)


def test_per_sample_or_empty_masks_are_refused():
    module, X = _module(True), _data()
    with pytest.raises(ValueError, match="shared by the samples"):
        moment_mpt_objective(module, Moments.from_samples(X), torch.ones(40, 2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="at least one token"):
        moment_mpt_objective(module, Moments.from_samples(X), torch.zeros(2, 5, dtype=torch.bool))
