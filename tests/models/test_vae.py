"""VAEModule where its Monte Carlo answers are exact: a decoder that ignores z and an encoder equal to the prior."""

import math

import pytest
import torch

from skmpt.models import VAEModule


def _independent(conditional="importance"):
    """A linear VAE whose decoder ignores ``z`` and whose encoder is the prior: ``p(x) = prod_d N(x_d | b_d, v_d)``."""
    module = VAEModule(4, 2, (), "identity", "gaussian", conditional=conditional, n_particles=3)
    with torch.no_grad():
        for layer in (module.encoder[0], module.decoder[0]):
            layer.weight.zero_()
        module.encoder[0].bias.zero_()  # q(z | x) = N(0, I), the prior
        module.decoder[0].bias.copy_(torch.tensor([0.5, -1.0, 2.0, 0.0], dtype=torch.float64))
    return module


def _exact(module, X):
    """Per-token ``log N(x_d | b_d, v_d)``."""
    mean, variance = module.decoder[0].bias.detach(), module.likelihood.variance().detach()
    return -0.5 * (torch.log(2 * math.pi * variance) + (X - mean) ** 2 / variance)


def test_log_marginal_and_its_weights_are_exact_when_z_carries_nothing():
    module = _independent()
    X = torch.randn(5, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    expected = _exact(module, X).sum(-1)
    torch.testing.assert_close(module.log_marginal(X, 7, generator=torch.Generator().manual_seed(1)), expected,
                               rtol=1e-10, atol=1e-10)
    weights = module.log_importance_weights(X, 7, generator=torch.Generator().manual_seed(1))
    assert weights.shape == (5, 7)
    torch.testing.assert_close(weights, expected[:, None].expand(5, 7), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(module.decode(torch.zeros(2, 2, dtype=torch.float64)),
                               module.decoder[0].bias.detach().expand(2, 4), rtol=0, atol=0)


@pytest.mark.parametrize("conditional", ["importance", "pseudo_gibbs"])
def test_masked_conditionals_are_the_marginals_when_z_carries_nothing(conditional):
    module = _independent(conditional)
    X = torch.randn(3, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    masks = torch.tensor([[True, False, True, False], [False, True, True, True]])
    log_prob = module.masked_log_prob(X, masks, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(log_prob, torch.where(masks, _exact(module, X)[:, None, :], 0.0), rtol=1e-10,
                               atol=1e-10)


def test_an_unknown_conditional_is_refused():
    with pytest.raises(ValueError, match=r"conditional must be one of \('importance', 'pseudo_gibbs'\); got 'exact'"):
        VAEModule(4, 2, (), "identity", "gaussian", conditional="exact")
