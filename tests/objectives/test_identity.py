"""The identity on models whose conditionals come from an explicit joint, independent of PPCA."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import skmpt
from skmpt import masks, objectives
from skmpt.testing import TabularJoint, tabular_joints


def _samples(joint, seed):
    return joint.sample(4, random_state=seed)


@given(joint=tabular_joints(max_features=6), seed=st.integers(0, 2**16))
def test_exhaustive_cumulative_score_is_log_marginal(joint, seed):
    X = _samples(joint, seed)
    cumulative = objectives.cumulative_score(joint, X, score_method="exhaustive")
    np.testing.assert_allclose(cumulative.numpy(), joint.log_marginal(X).numpy(), rtol=1e-9, atol=0)


@given(joint=tabular_joints(max_features=6), seed=st.integers(0, 2**16), data=st.data())
def test_chain_is_exact_for_every_ordering(joint, seed, data):
    X = _samples(joint, seed)
    D = joint.n_features
    ordering = torch.tensor(data.draw(st.permutations(range(D))))
    per_token = joint.masked_log_prob(X, masks.nested_masks(ordering))
    chain = per_token.gather(-1, ordering.view(1, D, 1).expand(len(X), D, 1)).sum((1, 2))
    np.testing.assert_allclose(chain.numpy(), joint.log_marginal(X).numpy(), rtol=1e-9, atol=0)
    # and through the public estimator, with random orderings
    estimate = objectives.cumulative_score(joint, X, score_method="chain", score_masks=3, random_state=seed)
    np.testing.assert_allclose(estimate.numpy(), joint.log_marginal(X).numpy(), rtol=1e-9, atol=0)


@given(joint=tabular_joints(max_features=5), seed=st.integers(0, 2**16))
def test_uniform_mpt_objective_is_unbiased(joint, seed):
    """E over |m| ~ U{1..D} and m | |m| of (D/|m|) sum_{j in m} log p(x_j|x_r) is log p(x)."""
    X = _samples(joint, seed)
    D = joint.n_features
    every = masks.all_masks(D)
    sizes = every.sum(-1)
    values = torch.stack([objectives.mpt_objective(joint, X, m.view(1, D)) for m in every], dim=1)
    weights = torch.tensor([1.0 / (D * math.comb(D, int(s))) for s in sizes], dtype=torch.float64)
    np.testing.assert_allclose((values @ weights).numpy(), joint.log_marginal(X).numpy(), rtol=1e-9)


def test_curve_methods_agree_in_expectation():
    joint = TabularJoint.random(5, random_state=3)
    X = joint.sample(3, random_state=0)
    exact = objectives.mpt_curve(joint, X, score_method="exhaustive")
    for method in ("sweep", "nested", "chain"):
        estimate = objectives.mpt_curve(joint, X, score_method=method, score_masks=4000, random_state=0)
        assert estimate.shape == exact.shape
        # 4000 masks per size: Monte Carlo error well below 0.05 nats per entry here.
        np.testing.assert_allclose(estimate.numpy(), exact.numpy(), atol=0.05)


def test_sweep_and_nested_are_random_but_reproducible():
    joint = TabularJoint.random(6, random_state=0)
    X = joint.sample(5, random_state=0)
    a = objectives.cumulative_score(joint, X, score_method="sweep", score_masks=2, random_state=1)
    b = objectives.cumulative_score(joint, X, score_method="sweep", score_masks=2, random_state=1)
    c = objectives.cumulative_score(joint, X, score_method="sweep", score_masks=2, random_state=2)
    assert torch.equal(a, b) and not torch.equal(a, c)
    # Masks are shared by the samples: scoring a subset gives the same numbers.
    sub = objectives.cumulative_score(joint, X[:2], score_method="nested", score_masks=2, random_state=1)
    full = objectives.cumulative_score(joint, X, score_method="nested", score_masks=2, random_state=1)
    np.testing.assert_allclose(sub.numpy(), full[:2].numpy(), rtol=1e-12)


def test_score_at_size_and_fixed_rate_bias():
    joint = TabularJoint.random(4, random_state=0)
    X = joint.sample(3, random_state=0)
    curve = objectives.mpt_curve(joint, X, score_method="exhaustive")
    for size in range(1, 5):
        s = objectives.score_at_size(joint, X, size)
        np.testing.assert_allclose(s.numpy(), curve[:, size - 1].numpy(), rtol=1e-12)
    bias = objectives.fixed_rate_bias(joint, X, 0.5)
    np.testing.assert_allclose(bias.numpy(), (4 * curve[:, 1] - joint.log_marginal(X)).numpy(), rtol=1e-12)
    sampled = objectives.score_at_size(joint, X, 2, score_masks=3000, random_state=0)
    np.testing.assert_allclose(sampled.numpy(), curve[:, 1].numpy(), atol=0.05)


def test_sums_only_model_works_and_chain_explains_what_it_needs():
    joint = TabularJoint.random(3, random_state=0)

    class SumsOnly:
        def masked_log_prob_sum(self, X, m):
            return joint.masked_log_prob(X, m).sum(-1)

    X = joint.sample(2, random_state=0)
    exact = objectives.cumulative_score(SumsOnly(), X, score_method="exhaustive")
    np.testing.assert_allclose(exact.numpy(), joint.log_marginal(X).numpy(), rtol=1e-9)
    with pytest.raises(TypeError, match="masked_log_prob"):
        objectives.cumulative_score(SumsOnly(), X, score_method="chain", score_masks=1)
    with pytest.raises(TypeError, match="neither"):
        objectives.cumulative_score(object(), X, score_method="exhaustive")


def test_bad_arguments():
    joint = TabularJoint.random(3, random_state=0)
    X = joint.sample(2, random_state=0)
    with pytest.raises(ValueError, match="method"):
        objectives.mpt_curve(joint, X, score_method="all")
    with pytest.raises(ValueError, match="score_masks"):
        objectives.mpt_curve(joint, X, score_masks=0)
    with pytest.raises(ValueError, match="2-D"):
        objectives.mpt_curve(joint, X[0])
    with pytest.raises(ValueError, match="empty mask"):
        objectives.mpt_objective(joint, X, torch.zeros(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="D=21"):
        objectives.mpt_curve(joint, torch.zeros(1, 21, dtype=torch.float64), score_method="exhaustive")


def test_chunking_gives_the_same_answer(monkeypatch):
    joint = TabularJoint.random(5, random_state=0)
    X = joint.sample(3, random_state=0)
    methods = ("exhaustive", "sweep", "nested", "chain")
    whole = [objectives.mpt_curve(joint, X, score_method=m, score_masks=7, random_state=0) for m in methods]
    # One mask (or ordering) evaluated at a time: the same masks, the same numbers.
    with skmpt.working_memory(1e-9):
        for method, expected in zip(methods, whole, strict=True):
            chunked = objectives.mpt_curve(joint, X, score_method=method, score_masks=7, random_state=0)
            np.testing.assert_allclose(chunked.numpy(), expected.numpy(), rtol=1e-12)
    # Enumerated masks in blocks of one give the same exact curve.
    monkeypatch.setattr(objectives.scoring, "MASK_BLOCK", 1)
    blocked = objectives.mpt_curve(joint, X, score_method="exhaustive")
    np.testing.assert_allclose(blocked.numpy(), whole[0].numpy(), rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.uint8])
@pytest.mark.parametrize("objective", [objectives.mpt_objective, objectives.masked_log_prob_sum])
def test_masks_that_are_not_boolean_are_refused(objective, dtype):
    joint = TabularJoint.random(3, random_state=0)
    X = joint.sample(2, random_state=0)
    with pytest.raises(TypeError, match=r"masks must have dtype torch.bool .*got torch\.(float64|int64|uint8)"):
        objective(joint, X, torch.ones(1, 3, dtype=dtype))
    with pytest.raises(TypeError, match="masks must be a boolean torch.Tensor; got ndarray"):
        objective(joint, X, np.ones((1, 3), dtype=bool))


@pytest.mark.parametrize("shape", [(3,), (1, 4), (3, 1, 3), (2, 1, 2)])
def test_masks_of_the_wrong_shape_are_refused(shape):
    joint = TabularJoint.random(3, random_state=0)
    X = joint.sample(2, random_state=0)
    with pytest.raises(ValueError, match=r"masks must have shape \(n_masks, 3\) or \(2, n_masks, 3\)"):
        objectives.mpt_objective(joint, X, torch.ones(shape, dtype=torch.bool))


def _exact_posterior_models():
    """A linear-Gaussian model with K=1 as a VAEModule and as a LinearVAEModule whose encoders
    are the exact posterior ``p(z | x)``: every importance weight is then ``log p(x)``."""
    from skmpt.models import LinearVAEModule, PPCAModule, VAEModule

    g = torch.Generator().manual_seed(0)
    D, s2 = 4, 0.6
    W = torch.randn(1, D, generator=g, dtype=torch.float64)
    mu = torch.randn(D, generator=g, dtype=torch.float64)
    cov = 1.0 / (1.0 + float(W @ W.T) / s2)
    gain = cov * W[0] / s2
    vae = VAEModule(D, 1, (), "identity", "gaussian")
    linear = LinearVAEModule(W, mu, 4, likelihood="gaussian", noise_variance=s2, encoder=True)
    with torch.no_grad():
        vae.decoder[0].weight.copy_(W.T)
        vae.decoder[0].bias.copy_(mu)
        vae.likelihood.log_variance.fill_(math.log(s2 - float(vae.likelihood.variance_floor)))
        vae.encoder[0].weight.zero_()
        vae.encoder[0].weight[0].copy_(gain)
        vae.encoder[0].bias.copy_(torch.tensor([-float(gain @ mu), math.log(cov)], dtype=torch.float64))
        linear.encoder_weight[:, 0].copy_(gain)
        linear.encoder_bias.copy_(torch.tensor([-float(gain @ mu), math.log(cov)], dtype=torch.float64))
    X = mu + torch.randn(5, D, generator=g, dtype=torch.float64)
    return [vae, linear], X, PPCAModule(W, mu, s2).log_marginal(X).detach()


def test_elbo_and_iwae_are_model_agnostic_and_exact_for_the_exact_posterior():
    models, X, exact = _exact_posterior_models()
    for model in models:
        with torch.no_grad():
            bound = objectives.OBJECTIVES["iwae"](model, X, n_particles=7, generator=torch.Generator().manual_seed(1))
            elbos = torch.stack([objectives.elbo(model, X, generator=torch.Generator().manual_seed(s))
                                 for s in range(400)])
        np.testing.assert_allclose(bound.numpy(), exact.numpy(), rtol=1e-10)
        # One-sample ELBOs scatter around log p(x) (the KL to the posterior is zero):
        # 400 draws give a standard error of about 0.05 nats here.
        np.testing.assert_allclose(elbos.mean(0).numpy(), exact.numpy(), atol=0.25)
        assert float(elbos.std(0).min()) > 0


def test_objectives_table_and_generators():
    models, X, _ = _exact_posterior_models()
    assert set(objectives.OBJECTIVES) == {"mpt", "elbo", "iwae", "lml"}
    vae = models[0]
    with torch.no_grad():
        a = objectives.elbo(vae, X, generator=torch.Generator().manual_seed(3))
        b = objectives.elbo(vae, X, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="n_particles"):
        objectives.iwae(vae, X, n_particles=0)


def test_a_model_returning_another_shape_is_named_not_broadcast():
    """A masked sum that drops the masks axis for one mask per sample (the training default)
    would broadcast into the objective; the objectives check every shape a model returns."""
    from skmpt.masks import uniform_size_masks
    from skmpt.models import PPCAModule

    class OneMaskBug(PPCAModule):
        def masked_log_prob_sum(self, X, masks, **kwargs):
            sums = super().masked_log_prob_sum(X, masks, **kwargs)
            return sums[..., 0] if masks.shape[-2] == 1 else sums

    g = torch.Generator().manual_seed(0)
    model = OneMaskBug(torch.randn(2, 5, generator=g, dtype=torch.float64), torch.zeros(5, dtype=torch.float64), 0.5)
    X = torch.randn(4, 5, generator=g, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"OneMaskBug.masked_log_prob_sum returned \(4,\) .* asks for \(4, 1\)"):
        objectives.mpt_objective(model, X, uniform_size_masks((4, 1), 5, random_state=0))

    class ChainBug(PPCAModule):
        def chain_log_prob(self, X, orderings, **kwargs):
            return super().chain_log_prob(X, orderings, **kwargs).sum(1)

    chain_bug = ChainBug(model.components.detach(), model.mean.detach(), 0.5)
    with pytest.raises(ValueError, match=r"ChainBug.chain_log_prob returned \(4, 5\)"):
        objectives.cumulative_score(chain_bug, X, score_method="chain", score_masks=1, random_state=0)
