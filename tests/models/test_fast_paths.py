"""The training step's own fast paths give the numbers of the plain ones.

The linear-Gaussian per-sample masked sum with its gradient written out, the mask samplers
without their checks, and ``seeded`` without ``torch.manual_seed``."""

import pytest
import torch

from skmpt import masks
from skmpt._utils import seeded
from skmpt.models import FactorAnalysisModule, PPCAModule
from skmpt.models._masked_gaussian import MaskedGaussianSum


def _problem(seed=0, n=5, n_masks=3, D=6, K=2):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(K, D, dtype=torch.float64, generator=g)
    mean = torch.randn(D, dtype=torch.float64, generator=g)
    noise = torch.rand(D, dtype=torch.float64, generator=g) + 0.3
    X = torch.randn(n, D, dtype=torch.float64, generator=g)
    sampled = masks.uniform_size_masks((n, n_masks), D, random_state=g)
    observed = torch.rand(n, D, generator=g) < 0.8
    return W, mean, noise, X, sampled, observed


@pytest.mark.parametrize("missing", [False, True])
def test_written_out_gradient_passes_gradcheck(missing):
    W, mean, noise, X, sampled, observed = _problem()
    observed = observed if missing else torch.ones_like(observed)
    sampled = sampled & observed.unsqueeze(1)
    given = ~sampled & observed.unsqueeze(1)
    inputs = tuple(t.clone().requires_grad_() for t in (W, mean, noise, X))
    assert torch.autograd.gradcheck(lambda *a: MaskedGaussianSum.apply(*a, sampled, given), inputs)


def test_second_derivatives_go_through_autograd():
    """A Hessian through the per-sample path (create_graph=True) is autograd's, not zeros."""
    W, mean, noise, X, sampled, observed = _problem(2)
    sampled = sampled & observed.unsqueeze(1)
    given = ~sampled & observed.unsqueeze(1)
    inputs = tuple(t.clone().requires_grad_() for t in (W, mean, noise, X))
    assert torch.autograd.gradgradcheck(lambda *a: MaskedGaussianSum.apply(*a, sampled, given), inputs)
    module = PPCAModule(W.clone(), mean.clone(), 0.7)

    def hessian(method):
        # the stored parameter (mu in units of the feature scales, ones for PPCA)
        mean = module.scaled_mean
        (grad,) = torch.autograd.grad(getattr(module, method)(X, sampled).sum(), mean, create_graph=True)
        return torch.stack([torch.autograd.grad(g, mean, retain_graph=True)[0] for g in grad])

    fast, per_token = hessian("masked_log_prob_sum"), hessian("masked_log_prob")
    assert fast.abs().max() > 0.1
    torch.testing.assert_close(fast, per_token, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("module_class", [PPCAModule, FactorAnalysisModule])
@pytest.mark.parametrize("missing", [False, True])
def test_per_sample_sum_and_gradient_equal_the_per_token_path(module_class, missing):
    """masked_log_prob (autograd through the per-token conditionals) against the fast sum."""
    W, mean, noise, X, sampled, observed = _problem(1)
    options = {"observed": observed} if missing else {}
    sampled = sampled & observed.unsqueeze(1) if missing else sampled
    module = module_class(W, mean, noise[0] if module_class is PPCAModule else noise)
    fast = module.masked_log_prob_sum(X, sampled, **options)
    fast_grads = torch.autograd.grad(fast.square().sum(), list(module.parameters()))
    plain = module.masked_log_prob(X, sampled, **options).sum(-1)
    plain_grads = torch.autograd.grad(plain.square().sum(), list(module.parameters()))
    torch.testing.assert_close(fast, plain, rtol=1e-12, atol=1e-12)
    for a, b in zip(fast_grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_samplers_draw_the_stream_of_masks_of_sizes():
    """The checks are skipped, the random numbers drawn are the same."""
    g = torch.Generator().manual_seed(3)
    sizes = torch.randint(1, 8, (4, 2), generator=g)
    expected = masks.masks_of_sizes(sizes, 7, random_state=g)
    assert torch.equal(masks.uniform_size_masks((4, 2), 7, random_state=3), expected)
    fixed = masks.masks_of_sizes(torch.full((4, 2), 2), 7, random_state=5)
    assert torch.equal(masks.fixed_rate_masks((4, 2), 7, 0.3, random_state=5), fixed)


def test_seeded_seeds_and_restores_the_cpu_generator():
    torch.manual_seed(11)
    outside = torch.rand(3)
    torch.manual_seed(11)
    with seeded(5, torch.device("cpu")):
        inside = torch.rand(3)
    assert torch.equal(torch.rand(3), outside)  # the state outside the block is untouched
    torch.manual_seed(5)
    assert torch.equal(inside, torch.rand(3))  # the stream torch.manual_seed gives
