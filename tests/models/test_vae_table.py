"""VAEModule with one likelihood head per column type (TableLikelihood): its heads against scipy, its
importance-sampled likelihood and conditionals against brute-force quadrature over a one-dimensional z."""

import math

import pytest
import torch
from scipy import stats

from skmpt.models.vae import TableLikelihood, VAEModule
from skmpt.testing import MODELS, check_masked_model

f64 = {"dtype": torch.float64}


def heads():
    """Numeric columns 0 and 3, a categorical of three values (1), a binary one (2), a count (4)."""
    values = [torch.tensor([0.0, 1.0, 2.0], **f64), torch.tensor([0.0, 1.0], **f64)]
    return TableLikelihood([0, 3], [1, 2], [4], values, torch.tensor([1.0, -2.0], **f64),
                           torch.tensor([0.5, 3.0], **f64))


def table_vae(n_components=1, seed=0):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        module = VAEModule(5, n_components, (4,), "tanh", heads(), n_particles=8,
                           input_scale=torch.tensor([0.5, 1.0, 0.5, 3.0, 2.0], **f64))
        with torch.no_grad():  # a decoder whose output depends on z
            module.decoder[-1].weight.mul_(3.0)
    return module


def table(n=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    numbers = torch.randn(n, 2, generator=g, **f64) * torch.tensor([0.5, 3.0], **f64) + torch.tensor([1.0, -2.0], **f64)
    return torch.stack([numbers[:, 0], torch.arange(n, **f64) % 3, torch.arange(n, **f64) % 2, numbers[:, 1],
                        torch.arange(n, **f64) % 4], 1)


def test_each_head_is_its_distribution():
    likelihood = heads()
    X = table()
    out = torch.randn(6, likelihood.width, generator=torch.Generator().manual_seed(0), **f64)
    token = likelihood.log_prob(X, out).detach()
    variance = likelihood.variance().detach()
    for i, row in enumerate(X.tolist()):
        a = out[i].tolist()
        expected = [
            stats.norm.logpdf(row[0], 1.0 + 0.5 * a[0], math.sqrt(variance[0])),
            math.log(torch.softmax(out[i, 2:5], 0)[int(row[1])]),
            math.log(torch.softmax(out[i, 5:7], 0)[int(row[2])]),
            stats.norm.logpdf(row[3], -2.0 + 3.0 * a[1], math.sqrt(variance[1])),
            stats.poisson.logpmf(row[4], math.exp(a[7])),
        ]
        torch.testing.assert_close(token[i], torch.tensor(expected, **f64), rtol=1e-10, atol=1e-10)


def test_means_predictions_and_draws_are_values_of_their_columns():
    likelihood = heads()
    out = torch.randn(4, 3, likelihood.width, generator=torch.Generator().manual_seed(0), **f64)
    mean = likelihood.mean(out)
    assert set(mean[..., 1].unique().tolist()) <= {0.0, 1.0, 2.0}
    torch.testing.assert_close(mean[..., 4], out[..., 7].exp())
    weights = torch.softmax(torch.randn(4, 3, generator=torch.Generator().manual_seed(1), **f64), -1)
    point = likelihood.predict_from(torch.einsum("ns,nsd->nd", weights, likelihood.expectations(out)))
    mixture = torch.einsum("ns,nsc->nc", weights, torch.softmax(out[..., 2:5], -1))
    torch.testing.assert_close(point[:, 1], mixture.argmax(-1).to(torch.float64))
    torch.testing.assert_close(point[:, 0], torch.einsum("ns,ns->n", weights, 1.0 + 0.5 * out[..., 0]))
    draws = likelihood.sample(out, torch.Generator().manual_seed(2))
    assert set(draws[..., 2].unique().tolist()) <= {0.0, 1.0}
    assert torch.equal(draws[..., 4], draws[..., 4].round()) and bool((draws[..., 4] >= 0).all())


def test_unstandardize_is_the_change_of_variables():
    module, X = table_vae(2), table()
    center = torch.tensor([1.0, -2.0, 0.5, 3.0, 4.0], **f64)
    scale = torch.tensor(2.5, **f64)
    Z = torch.randn(6, 3, 2, generator=torch.Generator().manual_seed(0), **f64)
    observed = torch.tensor([True, False, True, False, True]).expand(6, 5)
    encoded, before = module.encode(X, observed=observed), module.log_likelihood(X, Z)
    assert module.unstandardize_(center, scale) is module
    Y = center + scale * X
    for a, b in zip(module.encode(Y, observed=observed), encoded, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    # two numeric columns take the Jacobian; categories and counts are read in the new units
    torch.testing.assert_close(module.log_likelihood(Y, Z), before - 2 * math.log(2.5), rtol=1e-12, atol=1e-12)


def _quadrature(module, X, observed):
    """``log p(x_o)`` by the trapezoid rule over a fine grid of the one-dimensional ``z``."""
    z = torch.linspace(-9, 9, 6001, **f64)
    log_joint = module.log_likelihood(X, z.view(1, -1, 1).expand(len(X), -1, 1), observed=observed)
    log_joint = log_joint - 0.5 * z.square() - 0.5 * math.log(2 * math.pi)
    return torch.logsumexp(log_joint, -1) + math.log(float(z[1] - z[0]))


def test_importance_sampled_likelihood_converges_to_the_exact_one():
    module, X = table_vae(), table()
    observed = torch.rand(X.shape, generator=torch.Generator().manual_seed(3)) < 0.7
    with torch.no_grad():
        for seen in (None, observed):
            exact = _quadrature(module, X, seen)
            errors = [(module.log_marginal(X, draws, generator=torch.Generator().manual_seed(4), observed=seen)
                       - exact).abs().max() for draws in (10, 20000)]
            assert errors[1] < 0.01 and errors[1] < errors[0] / 5, errors


def test_importance_sampled_likelihood_is_unbiased_in_exp():
    # Each weight p(x, z_s) / q(z_s | x) is an unbiased estimate of p(x): their mean is within
    # four standard errors of the exact p(x).
    module, X = table_vae(), table()
    with torch.no_grad():
        exact = _quadrature(module, X, None)
        weights = module.log_importance_weights(X, 40000, generator=torch.Generator().manual_seed(6))
    ratio = (weights - exact[:, None]).exp()
    mean, error = ratio.mean(1), ratio.std(1) / math.sqrt(ratio.shape[1])
    assert bool(((mean - 1).abs() < 4 * error).all()) and bool((error < 0.05).all()), (mean, error)


def test_importance_sampled_conditionals_converge_to_the_exact_ones():
    module, X = table_vae(), table()
    masks = torch.tensor([[True, False, False, True, False], [False, True, True, False, True]])
    module.n_particles = 20000
    with torch.no_grad():
        log_prob = module.masked_log_prob(X, masks, generator=torch.Generator().manual_seed(5))
        for p, mask in enumerate(masks):
            rest = _quadrature(module, X, (~mask).expand_as(X))
            for j in torch.nonzero(mask).flatten().tolist():
                given = (~mask).clone()
                given[j] = True
                exact = _quadrature(module, X, given.expand_as(X)) - rest
                torch.testing.assert_close(log_prob[:, p, j], exact, rtol=0, atol=0.02)


@pytest.mark.parametrize("name", ["vae_table"])
def test_the_registered_table_vae_passes_the_contract(name):
    model, X = MODELS[name]()
    check_masked_model(model, X)


def test_columns_must_be_each_once():
    with pytest.raises(ValueError, match="each column once"):
        TableLikelihood([0, 1], [1], [], [torch.tensor([0.0, 1.0], **f64)], torch.zeros(2, **f64),
                        torch.ones(2, **f64))
