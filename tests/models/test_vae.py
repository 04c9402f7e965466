"""VAEModule where its Monte Carlo answers are exact: a decoder that ignores z and an encoder equal to the prior."""


import math

import numpy as np
import pytest
import torch

from skmpt.models.vae import VAEModule


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


def make_vae(likelihood="gaussian", conditional="importance", hidden=(6,), activation="tanh", seed=0, **kwargs):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        module = VAEModule(5, 2, hidden, activation, likelihood, conditional=conditional, n_particles=8, **kwargs)
    return module.requires_grad_(False)


def data(likelihood="gaussian", n=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    if likelihood == "bernoulli":
        return torch.randint(0, 2, (n, 5), generator=g).double()
    return torch.randn(n, 5, generator=g, dtype=torch.float64)


MASKS = torch.tensor([[True, False, False, True, False], [False, True, True, True, True]])


@pytest.mark.parametrize(
    ("hidden", "activation", "encoder_sizes", "activation_type"),
    [((7, 3), "relu", [(5, 7), (7, 3), (3, 4)], torch.nn.ReLU), ((), "logistic", [(5, 4)], None)],
)
def test_networks_mirror_each_other(hidden, activation, encoder_sizes, activation_type):
    module = make_vae(hidden=hidden, activation=activation)
    linear = [(m.in_features, m.out_features) for m in module.encoder if isinstance(m, torch.nn.Linear)]
    assert linear == encoder_sizes  # the last layer gives the mean and log-variance of K=2 latents
    decoder = [(m.in_features, m.out_features) for m in module.decoder if isinstance(m, torch.nn.Linear)]
    assert decoder == [(2, *reversed(hidden), 5)[i : i + 2] for i in range(len(hidden) + 1)]
    activations = [type(m) for m in module.encoder if not isinstance(m, torch.nn.Linear)]
    assert activations == ([activation_type] * len(hidden) if activation_type else [])
    assert all(p.dtype == torch.float64 for p in module.parameters())
    assert torch.equal(module.fill, torch.zeros(5, dtype=torch.float64))


def test_bad_conditional_is_refused():
    with pytest.raises(ValueError, match=r"conditional must be one of \('importance', 'pseudo_gibbs'\); got 'gibbs'"):
        make_vae(conditional="gibbs")
    with pytest.raises(ValueError, match="importance weights exist for conditional='importance' only"):
        make_vae(conditional="pseudo_gibbs").masked_log_prob_weights(data(), MASKS)


@pytest.mark.parametrize("conditional", ["importance", "pseudo_gibbs"])
@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli"])
def test_conditionals_are_reproducible_zero_outside_the_masks_and_independent_of_the_batch(likelihood, conditional):
    module, X = make_vae(likelihood, conditional), data(likelihood)
    first = module.masked_log_prob(X, MASKS, generator=torch.Generator().manual_seed(0))
    assert first.shape == (4, 2, 5) and first.dtype == torch.float64
    assert torch.equal(first, module.masked_log_prob(X, MASKS, generator=torch.Generator().manual_seed(0)))
    assert not torch.equal(first, module.masked_log_prob(X, MASKS, generator=torch.Generator().manual_seed(1)))
    assert not first[~MASKS.expand(4, -1, -1)].any() and torch.isfinite(first).all()
    # shared masks share the particles' noise across samples: one sample alone gets the same estimate
    alone = module.masked_log_prob(X[2:3], MASKS, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(alone, first[2:3], rtol=1e-12, atol=1e-12)
    if likelihood == "bernoulli":
        assert (first <= 0).all()


def test_importance_weights_reproduce_the_conditionals():
    module, X = make_vae(), data()
    log_prob = module.masked_log_prob(X, MASKS, generator=torch.Generator().manual_seed(3))
    log_weights, token = module.masked_log_prob_weights(X, MASKS, generator=torch.Generator().manual_seed(3))
    assert log_weights.shape == (4, 2, 8) and token.shape == (4, 2, 8, 5)
    np.testing.assert_allclose(log_weights.exp().sum(-1).numpy(), 1.0, rtol=1e-12)
    rebuilt = torch.logsumexp(log_weights.unsqueeze(-1) + token, -2)
    torch.testing.assert_close(torch.where(MASKS, rebuilt, 0.0), log_prob, rtol=1e-12, atol=1e-12)


def test_log_marginal_is_the_mean_of_its_importance_weights():
    module, X = make_vae(), data()
    for n_draws in (5, 300):  # one chunk of draws, and two (256 per chunk)
        estimate = module.log_marginal(X, n_draws, generator=torch.Generator().manual_seed(0))
        weights = module.log_importance_weights(X, n_draws, generator=torch.Generator().manual_seed(0))
        assert estimate.shape == (4,) and weights.shape == (4, n_draws)
        torch.testing.assert_close(estimate, torch.logsumexp(weights, 1) - math.log(n_draws), rtol=1e-12, atol=1e-12)


def test_log_marginal_of_nothing_observed_is_exactly_zero():
    module, X = make_vae(), data()
    observed = torch.tensor([[True] * 5, [True, False, True, False, False], [False] * 5, [False, True] + [False] * 3])
    got = module.log_marginal(X, 50, generator=torch.Generator().manual_seed(0), observed=observed)
    assert float(got[2]) == 0.0 and (got[[0, 1, 3]] != 0).all()


def test_log_likelihood_is_the_sum_of_the_likelihood_over_tokens():
    module, X = make_vae(), data()
    Z = torch.randn(4, 3, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    out, variance = module.decoder(Z), module.likelihood.variance()
    expected = torch.distributions.Normal(out, variance.sqrt()).log_prob(X.unsqueeze(1))
    torch.testing.assert_close(module.log_likelihood(X, Z), expected.sum(-1), rtol=1e-12, atol=1e-12)
    observed = torch.tensor([True, False, True, True, False]).expand(4, 5)
    torch.testing.assert_close(module.log_likelihood(X, Z, observed=observed), expected[..., observed[0]].sum(-1),
                               rtol=1e-12, atol=1e-12)
    assert module.log_likelihood(X, Z[:, 0]).shape == (4,)
    np.testing.assert_allclose(variance.numpy(), 1.0 + 1e-3, rtol=1e-12)  # floor + 1 at the start


def test_encoder_sees_the_fill_value_where_entries_are_not_observed_and_posterior_is_its_output():
    fill = torch.tensor([0.5, -1.0, 2.0, 0.0, 3.0], dtype=torch.float64)
    module, X = make_vae(fill=fill), data()
    observed = torch.tensor([True, False, True, False, True]).expand(4, 5)
    mean, log_var = module.encode(X, observed=observed)
    torch.testing.assert_close(mean, module.encode(torch.where(observed, X, fill))[0])
    posterior_mean, posterior_cov = module.posterior(X, observed=observed)
    torch.testing.assert_close(posterior_mean, mean)
    torch.testing.assert_close(posterior_cov, torch.diag_embed(log_var.exp()))
    assert mean.shape == log_var.shape == (4, 2)
    bernoulli = make_vae("bernoulli")
    decoded = bernoulli.decode(torch.randn(6, 2, dtype=torch.float64))
    assert ((decoded > 0) & (decoded < 1)).all()


def test_impute_and_sample_missing_keep_the_observed_entries_and_are_reproducible():
    module, X = make_vae(), data()
    observed = torch.tensor([True, False, True, False, True]).expand(4, 5)
    imputed = module.impute(X, observed, n_particles=50, generator=torch.Generator().manual_seed(0))
    assert imputed.shape == (4, 5) and torch.equal(imputed[observed], X[observed])
    assert torch.equal(imputed, module.impute(X, observed, n_particles=50, generator=torch.Generator().manual_seed(0)))
    draws = module.sample_missing(X, observed, 3, n_particles=50, generator=torch.Generator().manual_seed(0))
    assert draws.shape == (3, 4, 5) and torch.equal(draws[:, observed], X[observed].expand(3, -1))


def test_impute_draws_rounds_until_the_target_ess_and_pools_them_exactly(monkeypatch):
    module, X = make_vae(), data()
    X[:, 0] = torch.arange(4.0, dtype=torch.float64)  # the row's number, for the stand-in below
    observed = torch.tensor([True, False, True, True, True]).repeat(4, 1)
    observed[3] = True  # nothing to impute: no particle drawn
    g = torch.Generator().manual_seed(0)
    # Log-weights of each row's particles: row 0 equal (ESS 100 after its first round of 100), rows 1
    # and 2 spread (ESS far below 100: they run to n_particles=700 in rounds of 100, 100, 200, 300).
    log_w = torch.cat([torch.zeros(1, 700), 8 * torch.randn(2, 700, generator=g), torch.zeros(1, 700)])
    out = torch.randn(4, 700, 5, generator=g, dtype=torch.float64)
    drawn, rounds = [0] * 4, []

    def particles(X_rows, observed_rows, size, generator):
        rows = X_rows[:, 0].long().tolist()
        rounds.append((rows, size))
        take = [slice(drawn[r], drawn[r] + size) for r in rows]
        for r in rows:
            drawn[r] += size
        pairs = list(zip(rows, take, strict=True))
        return None, torch.stack([out[r, t] for r, t in pairs]), torch.stack([log_w[r, t].double() for r, t in pairs])

    monkeypatch.setattr(module, "_importance_particles", particles)
    imputed = module.impute(X, observed, n_particles=700, target_ess=100)
    assert drawn == [100, 700, 700, 0] and [size for _, size in rounds] == [100, 100, 200, 300]
    for r, used in enumerate(drawn[:3]):  # one self-normalised estimate over all of a row's particles
        expected = torch.softmax(log_w[r, :used].double(), 0) @ out[r, :used]
        torch.testing.assert_close(imputed[r, 1], expected[1], rtol=1e-12, atol=1e-12)
    assert torch.equal(imputed[observed], X[observed])


def test_sample_missing_resamples_among_all_of_a_rows_rounds_of_particles(monkeypatch):
    import skmpt.models.vae as vae

    module, X = make_vae(), data()
    X[:, 0] = torch.arange(4.0, dtype=torch.float64)  # the row's number, for the stand-in below
    observed = torch.tensor([True, False, True, True, True]).repeat(4, 1)
    observed[3] = True  # nothing to draw: no particle
    g = torch.Generator().manual_seed(0)
    # Row 0's weights are equal (ESS 100 after one round of 100); rows 1 and 2 spread (they run to 700
    # particles in rounds of 100, 100, 200, 300); row 1's particle 450 (4th round) outweighs the rest.
    log_w = torch.cat([torch.zeros(1, 700), 8 * torch.randn(2, 700, generator=g), torch.zeros(1, 700)]).double()
    log_w[1, 450] = 1e3
    z = torch.zeros(4, 700, 2, dtype=torch.float64)
    z[..., 0] = 1000 * torch.arange(4.0)[:, None] + torch.arange(700.0)  # a particle's row and number
    drawn, sizes, weights, decoded = [0] * 4, [], [], []
    pick = vae.pick_components

    def particles(X_rows, observed_rows, size, generator):
        rows = X_rows[:, 0].long().tolist()
        sizes.append(size)
        take = [slice(drawn[r], drawn[r] + size) for r in rows]
        for r in rows:
            drawn[r] += size
        pairs = list(zip(rows, take, strict=True))
        return torch.stack([z[r, t] for r, t in pairs]), None, torch.stack([log_w[r, t] for r, t in pairs])

    def picks(log_weights, n_draws, generator):
        weights.append(log_weights)
        return pick(log_weights, n_draws, generator)

    monkeypatch.setattr(module, "_importance_particles", particles)
    monkeypatch.setattr(vae, "pick_components", picks)
    module.decoder.register_forward_hook(lambda layer, inputs, output: decoded.append(inputs[0]))
    draws = module.sample_missing(X, observed, 50, n_particles=700, target_ess=100, generator=g)
    assert drawn == [100, 700, 700, 0] and sizes == [100, 100, 200, 300]
    # resampled among each row's particles of every round, by their weights (row 0's 600 undrawn ones: none)
    expected = log_w[:3].clone()
    expected[0, 100:] = -math.inf
    torch.testing.assert_close(weights[0], torch.log_softmax(expected, -1), rtol=1e-12, atol=1e-12)
    chosen = decoded[0][..., 0]  # (n_draws, rows): row * 1000 + particle
    assert ((chosen // 1000) == torch.arange(3.0)).all() and (chosen[:, 0] % 1000 < 100).all()
    assert (chosen[:, 1] == 1450).all()
    assert draws.shape == (50, 4, 5) and torch.equal(draws[:, observed], X[observed].expand(50, -1))


def test_unstandardize_is_the_change_of_variables():
    module, X = make_vae(), data()
    center = torch.tensor([1.0, -2.0, 0.5, 3.0, 0.0], dtype=torch.float64)
    scale = torch.tensor(2.5, dtype=torch.float64)
    Z = torch.randn(4, 3, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    encoded, before = module.encode(X), module.log_likelihood(X, Z)
    observed = torch.tensor([True, False, True, False, True]).expand(4, 5)
    encoded_partial = module.encode(X, observed=observed)
    assert module.unstandardize_(center, scale) is module
    Y = center + scale * X
    for a, b in zip(module.encode(Y), encoded, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    # the fill value moved with the data
    for a, b in zip(module.encode(Y, observed=observed), encoded_partial, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(module.log_likelihood(Y, Z), before - 5 * math.log(2.5), rtol=1e-12, atol=1e-12)
