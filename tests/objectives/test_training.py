"""The training objectives against their definitions, summed by hand over masks and draws."""

import math

import numpy as np
import pytest
import torch

from skmpt.masks import all_masks
from skmpt.models import VAEModule
from skmpt.models.contract import importance_log_weights
from skmpt.objectives.training import (
    check_output,
    elbo,
    iwae,
    log_marginal,
    masked_log_prob_sum,
    mpt_objective,
    noise_generator,
)
from skmpt.testing.joints import TabularJoint


@pytest.fixture(scope="module")
def joint_and_data():
    joint = TabularJoint.random(4, random_state=0)
    return joint, joint.sample(5, random_state=1)


def vae():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return VAEModule(4, 2, (6,), "tanh", "gaussian").requires_grad_(False)


def test_masked_log_prob_sum_is_the_sum_of_the_masked_tokens(joint_and_data):
    joint, X = joint_and_data
    masks = torch.tensor([[True, False, True, False], [True, True, True, True], [False, False, False, True]])
    got = masked_log_prob_sum(joint, X, masks)
    assert got.shape == (5, 3) and got.dtype == torch.float64
    torch.testing.assert_close(got, joint.masked_log_prob(X, masks).sum(-1), rtol=1e-12, atol=1e-12)
    # the full mask conditions on nothing: the sum of the one-token marginals log p(x_j)
    marginals = sum(joint.log_marginal(X, observed=torch.arange(4) == j) for j in range(4))
    torch.testing.assert_close(got[:, 1], marginals, rtol=1e-12, atol=1e-12)


def test_mpt_objective_is_the_rescaled_mean_over_masks(joint_and_data):
    joint, X = joint_and_data
    masks = torch.tensor([[True, False, False, False], [True, True, False, True], [True, True, True, True]])
    per_token = joint.masked_log_prob(X, masks)
    expected = sum(4 / int(m.sum()) * per_token[:, p].sum(-1) for p, m in enumerate(masks)) / 3
    got = mpt_objective(joint, X, masks)
    assert got.shape == (5,)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_mpt_objective_over_every_mask_weighted_by_size_is_log_p(joint_and_data):
    """Uniform sizes and uniform masks of a size: (1/D) sum_M mean_{|m|=M} (D/M) sum_m = sum_M S(x; M) = log p(x)."""
    joint, X = joint_and_data
    D = 4
    masks = all_masks(D)
    sizes = masks.sum(-1)
    per_mask = (D / sizes.double()) * masked_log_prob_sum(joint, X, masks)
    counts = torch.tensor([math.comb(D, int(s)) for s in sizes], dtype=torch.float64)
    weighted = (per_mask / (D * counts)).sum(-1)
    torch.testing.assert_close(weighted, joint.log_marginal(X), rtol=1e-12, atol=1e-12)
    # and mpt_objective with per-sample masks gives each sample its own masks' mean
    per_sample = masks[torch.tensor([[0, 5], [3, 14], [1, 2], [14, 14], [7, 9]])]
    got = mpt_objective(joint, X, per_sample)
    expected = torch.stack([per_mask[n, [int((masks == m).all(-1).nonzero()) for m in per_sample[n]]].mean()
                            for n in range(5)])
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_mpt_objective_with_missing_entries_weighs_by_the_observed_count(joint_and_data):
    joint, X = joint_and_data
    observed = torch.tensor([[True] * 4, [True, False, True, False], [False, False, True, False],
                             [False] * 4, [True, True, False, True]])
    masks = torch.stack([observed & torch.tensor([True, False, True, True]), observed & torch.tensor([True] * 4)], 1)
    got = mpt_objective(joint, X, masks, observed=observed)
    sums = joint.masked_log_prob(X, masks, observed=observed).sum(-1)
    n_observed = observed.sum(-1, keepdim=True).double()
    expected = (sums * n_observed / masks.sum(-1).clamp(min=1)).mean(-1)
    # rtol: the weights |o| / |m| are computed in float32 (a division of two integer tensors)
    torch.testing.assert_close(got, expected, rtol=1e-7, atol=1e-12)
    assert float(got[3]) == 0.0  # nothing observed: empty masks, objective zero
    torch.testing.assert_close(got[0], mpt_objective(joint, X[:1], masks[:1])[0])
    with pytest.raises(ValueError, match="must mask at least one of them"):
        mpt_objective(joint, X, masks & torch.tensor([False, False, False, True]), observed=observed)


def test_noise_generator_is_a_copy_for_a_stochastic_model_and_none_otherwise(joint_and_data):
    joint, _ = joint_and_data
    generator = torch.Generator().manual_seed(7)
    assert noise_generator(joint, generator) is None
    copy = noise_generator(vae(), generator)
    assert copy is not generator
    draws = torch.rand(3, generator=copy)
    assert torch.equal(draws, torch.rand(3, generator=generator))  # the same state, advanced independently


def test_check_output_returns_the_tensor_or_names_the_method_and_shapes(joint_and_data):
    joint, X = joint_and_data
    masks = torch.ones(2, 4, dtype=torch.bool)
    values = torch.zeros(5, 2)
    assert check_output(values, (5, 2), joint, "masked_log_prob_sum", X, masks) is values
    message = (r"TabularJoint\.masked_log_prob_sum returned \(5,\) for X of shape \(5, 4\) and masks \(or "
               r"orderings\) of shape \(2, 4\); the contract asks for \(5, 2\)")
    with pytest.raises(ValueError, match=message):
        check_output(torch.zeros(5), (5, 2), joint, "masked_log_prob_sum", X, masks)
    with pytest.raises(ValueError, match="returned list"):
        check_output([0.0], (5, 2), joint, "chain_log_prob", X, masks)


def test_log_marginal_is_the_models_own_with_its_options(joint_and_data):
    joint, X = joint_and_data
    torch.testing.assert_close(log_marginal(joint, X), joint.log_marginal(X))
    model, Y = vae(), torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    got = log_marginal(model, Y, n_lml_samples=7, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(got, model.log_marginal(Y, 7, generator=torch.Generator().manual_seed(2)))


def test_elbo_is_one_reparameterised_draw_minus_the_analytic_kl():
    model = vae()
    X = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    got = elbo(model, X, generator=torch.Generator().manual_seed(5))
    mean, log_var = model.encode(X)
    noise = torch.randn(3, 2, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    z = mean + (0.5 * log_var).exp() * noise
    q = torch.distributions.Normal(mean, (0.5 * log_var).exp())
    kl = torch.distributions.kl_divergence(q, torch.distributions.Normal(0.0, 1.0)).sum(-1)
    torch.testing.assert_close(got, model.log_likelihood(X, z) - kl, rtol=1e-12, atol=1e-12)


def test_iwae_is_the_log_mean_of_the_importance_weights():
    model = vae()
    X = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    got = iwae(model, X, n_particles=6, generator=torch.Generator().manual_seed(4))
    noise = torch.randn(3, 6, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    weights = importance_log_weights(model, X, noise)
    torch.testing.assert_close(got, torch.logsumexp(weights, 1) - math.log(6), rtol=1e-12, atol=1e-12)
    # Jensen, draw by draw: the bound with S particles is at least the mean of their one-particle bounds
    assert (got >= weights.mean(1) - 1e-12).all()
    with pytest.raises((TypeError, ValueError), match="n_particles"):
        iwae(model, X, n_particles=1.5)


def test_missing_entries_are_left_out_of_the_bounds():
    model = vae()
    X = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    observed = torch.tensor([True, False, True, True]).expand(3, 4)
    changed = torch.where(observed, X, 1e3)
    for bound in (elbo, iwae):
        a = bound(model, X, generator=torch.Generator().manual_seed(1), observed=observed)
        b = bound(model, changed, generator=torch.Generator().manual_seed(1), observed=observed)
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
        assert not np.allclose(a.numpy(), bound(model, X, generator=torch.Generator().manual_seed(1)).numpy())
