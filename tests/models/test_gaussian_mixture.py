"""GaussianMixtureModule against dense mixtures of Gaussians: densities, marginals and masked conditionals."""


import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

from skmpt.models.gaussian_mixture import GaussianMixtureModule


def _mixture(covariance_type, K=3, D=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    weights = torch.softmax(torch.randn(K, generator=g, dtype=torch.float64), 0)
    means = 2 * torch.randn(K, D, generator=g, dtype=torch.float64)
    A = torch.randn(K, D, D, generator=g, dtype=torch.float64)
    full = A @ A.mT + 0.5 * torch.eye(D, dtype=torch.float64)
    given = {"full": full, "tied": full[0], "diag": full.diagonal(dim1=-2, dim2=-1),
             "spherical": full.diagonal(dim1=-2, dim2=-1).mean(-1)}[covariance_type]
    dense = {"full": full, "tied": full[0].expand(K, D, D), "diag": torch.diag_embed(given),
             "spherical": given[:, None, None] * torch.eye(D, dtype=torch.float64)}[covariance_type]
    module = GaussianMixtureModule(weights, means, given, covariance_type)
    X = torch.randn(5, D, generator=g, dtype=torch.float64) + means[0]
    return module, X, weights, means, dense


def _log_density(x, keep, weights, means, covariances):
    """``log p(x_keep)`` of the mixture: the mixture of the components' marginals."""
    if not keep.any():
        return torch.zeros((), dtype=torch.float64)
    terms = [w.log() + torch.distributions.MultivariateNormal(m[keep], c[keep][:, keep]).log_prob(x[keep])
             for w, m, c in zip(weights, means, covariances, strict=True)]
    return torch.logsumexp(torch.stack(terms), 0)


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_log_marginal_and_masked_conditionals_are_the_dense_mixture_s(covariance_type):
    module, X, weights, means, dense = _mixture(covariance_type)
    everything = torch.ones(4, dtype=torch.bool)
    expected = torch.stack([_log_density(x, everything, weights, means, dense) for x in X])
    torch.testing.assert_close(module.log_marginal(X), expected, rtol=1e-10, atol=1e-10)
    masks = torch.tensor([[True, False, True, False], [False, False, False, True], [True, True, True, True]])
    log_prob = module.masked_log_prob(X, masks)
    assert log_prob.shape == (5, 3, 4)
    for n, x in enumerate(X):
        for p, masked in enumerate(masks):
            rest = ~masked
            for j in range(4):
                if not masked[j]:
                    assert log_prob[n, p, j] == 0
                    continue
                with_j = rest.clone()
                with_j[j] = True
                conditional = _log_density(x, with_j, weights, means, dense) - _log_density(x, rest, weights, means,
                                                                                            dense)
                torch.testing.assert_close(log_prob[n, p, j], conditional, rtol=1e-9, atol=1e-10)


def test_the_parameters_round_trip_and_an_unknown_covariance_type_is_refused():
    module, _, weights, means, dense = _mixture("full")
    torch.testing.assert_close(module.log_weights.exp(), weights, rtol=1e-12, atol=1e-12)
    assert module.n_components == 3 and module.n_features == 4
    with pytest.raises(ValueError, match=r"covariance_type must be one of .*; got 'banded'"):
        GaussianMixtureModule(weights, means, dense, "banded")


COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")


def make_mixture(covariance_type, K=3, D=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    means = 2 * torch.randn(K, D, generator=g, dtype=torch.float64)
    if covariance_type == "full":
        A = torch.randn(K, D, D, generator=g, dtype=torch.float64)
        covariances = A @ A.mT / D + 0.3 * torch.eye(D, dtype=torch.float64)
    elif covariance_type == "tied":
        A = torch.randn(D, D, generator=g, dtype=torch.float64)
        covariances = A @ A.T / D + 0.3 * torch.eye(D, dtype=torch.float64)
    elif covariance_type == "diag":
        covariances = torch.rand(K, D, generator=g, dtype=torch.float64) + 0.3
    else:
        covariances = torch.rand(K, generator=g, dtype=torch.float64) + 0.3
    weights = torch.softmax(torch.randn(K, generator=g, dtype=torch.float64), 0)
    X = means[torch.arange(6) % K] + torch.randn(6, D, generator=g, dtype=torch.float64)
    return GaussianMixtureModule(weights, means, covariances, covariance_type), X, weights, means


def dense_covariances(module):
    """``(K, D, D)`` numpy covariances, whatever the type."""
    with torch.no_grad():
        cov = module.covariances()
    cov = cov.numpy()
    return cov if cov.ndim == 3 else np.stack([np.diag(c) for c in cov])


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_log_marginal_is_the_dense_sum_of_component_densities(covariance_type):
    module, X, weights, means = make_mixture(covariance_type)
    cov = dense_covariances(module)
    expected = logsumexp(
        [
            np.log(w) + multivariate_normal(m, c).logpdf(X.numpy())
            for w, m, c in zip(weights.numpy(), means.numpy(), cov, strict=True)
        ],
        axis=0,
    )
    with torch.no_grad():
        got = module.log_marginal(X)
    assert got.shape == (6,) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10)


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_covariances_are_the_ones_given(covariance_type):
    g = torch.Generator().manual_seed(1)
    given = {
        "full": lambda: (lambda A: A @ A.mT + torch.eye(3, dtype=torch.float64))(
            torch.randn(2, 3, 3, generator=g, dtype=torch.float64)
        ),
        "tied": lambda: (lambda A: A @ A.T + torch.eye(3, dtype=torch.float64))(
            torch.randn(3, 3, generator=g, dtype=torch.float64)
        ),
        "diag": lambda: torch.rand(2, 3, generator=g, dtype=torch.float64) + 0.5,
        "spherical": lambda: torch.tensor([0.5, 2.0], dtype=torch.float64),
    }[covariance_type]()
    means = torch.zeros(2, 3, dtype=torch.float64)
    module = GaussianMixtureModule(torch.tensor([0.4, 0.6], dtype=torch.float64), means, given, covariance_type)
    with torch.no_grad():
        got = module.covariances()
        factor = module.cholesky()
    if covariance_type == "tied":
        expected = given.expand(2, 3, 3)
    elif covariance_type == "spherical":
        expected = given.unsqueeze(-1).expand(2, 3)
    else:
        expected = given
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    dense = torch.as_tensor(dense_covariances(module))
    torch.testing.assert_close(factor @ factor.mT, dense, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(module.log_weights.exp(), torch.tensor([0.4, 0.6], dtype=torch.float64))
    assert (module.n_components, module.n_features) == (2, 3)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_masked_conditionals_are_schur_complement_mixtures(covariance_type):
    module, X, weights, means = make_mixture(covariance_type)
    cov = dense_covariances(module)
    masks = torch.tensor([[True, False, True, False], [False, False, False, True], [True, True, True, True]])
    with torch.no_grad():
        got = module.masked_log_prob(X, masks).numpy()
    assert got.shape == (6, 3, 4)
    for p, mask in enumerate(masks.numpy()):
        r = np.flatnonzero(~mask)
        for n, x in enumerate(X.numpy()):
            # responsibilities from the observed tokens only
            log_joint = np.array(
                [
                    np.log(w) + (multivariate_normal(m[r], c[np.ix_(r, r)]).logpdf(x[r]) if len(r) else 0.0)
                    for w, m, c in zip(weights.numpy(), means.numpy(), cov, strict=True)
                ]
            )
            resp = np.exp(log_joint - logsumexp(log_joint))
            for j in np.flatnonzero(mask):
                densities = []
                for m, c in zip(means.numpy(), cov, strict=True):
                    if len(r):
                        gain = np.linalg.solve(c[np.ix_(r, r)], c[r, j])
                        mean_j = m[j] + gain @ (x[r] - m[r])
                        var_j = c[j, j] - c[j, r] @ gain
                    else:
                        mean_j, var_j = m[j], c[j, j]
                    densities.append(multivariate_normal(mean_j, var_j).pdf(x[j]))
                np.testing.assert_allclose(got[n, p, j], np.log(resp @ np.array(densities)), rtol=1e-9)
            assert np.all(got[n, p, ~mask] == 0)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_masked_log_prob_sum_is_the_sum_of_the_per_token_terms(covariance_type):
    module, X, _, _ = make_mixture(covariance_type)
    masks = torch.tensor([[True, False, True, False], [False, True, True, True], [True, True, True, True]])
    with torch.no_grad():
        sums = module.masked_log_prob_sum(X, masks)
        per_token = module.masked_log_prob(X, masks).sum(-1)
    assert sums.shape == (6, 3)
    torch.testing.assert_close(sums, per_token, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_posterior_is_bayes_rule_over_the_components(covariance_type):
    module, X, weights, means = make_mixture(covariance_type)
    cov = dense_covariances(module)
    log_joint = np.stack(
        [
            np.log(w) + multivariate_normal(m, c).logpdf(X.numpy())
            for w, m, c in zip(weights.numpy(), means.numpy(), cov, strict=True)
        ],
        axis=1,
    )
    with torch.no_grad():
        (resp,) = module.posterior(X)
        component = module.component_log_prob(X)
    np.testing.assert_allclose(component.numpy(), log_joint, rtol=1e-10)
    np.testing.assert_allclose(resp.numpy(), np.exp(log_joint - logsumexp(log_joint, axis=1, keepdims=True)), rtol=1e-9)
    np.testing.assert_allclose(resp.sum(-1).numpy(), 1.0, rtol=1e-12)


def test_observed_log_marginal_and_posterior_marginalise_the_missing_entries():
    module, X, weights, means = make_mixture("full")
    cov = dense_covariances(module)
    observed = torch.tensor([True, False, True, True])
    o = np.flatnonzero(observed.numpy())
    log_joint = np.stack(
        [
            np.log(w) + multivariate_normal(m[o], c[np.ix_(o, o)]).logpdf(X.numpy()[:, o])
            for w, m, c in zip(weights.numpy(), means.numpy(), cov, strict=True)
        ],
        axis=1,
    )
    with torch.no_grad():
        got = module.log_marginal(X, observed=observed)
        (resp,) = module.posterior(X, observed=observed)
    np.testing.assert_allclose(got.numpy(), logsumexp(log_joint, axis=1), rtol=1e-10)
    np.testing.assert_allclose(resp.numpy(), np.exp(log_joint - logsumexp(log_joint, axis=1, keepdims=True)), rtol=1e-9)


def test_impute_is_the_responsibility_weighted_schur_mean():
    module, X, weights, means = make_mixture("full")
    cov = dense_covariances(module)
    observed = torch.tensor([[True, False, True, False]] * 3 + [[False, True, True, True]] * 3)
    with torch.no_grad():
        got = module.impute(X, observed).numpy()
    for n, (x, seen) in enumerate(zip(X.numpy(), observed.numpy(), strict=True)):
        o, m_ = np.flatnonzero(seen), np.flatnonzero(~seen)
        log_joint = np.array(
            [np.log(w) + multivariate_normal(mu[o], c[np.ix_(o, o)]).logpdf(x[o])
             for w, mu, c in zip(weights.numpy(), means.numpy(), cov, strict=True)]
        )
        resp = np.exp(log_joint - logsumexp(log_joint))
        conditional = np.array(
            [mu[m_] + c[np.ix_(m_, o)] @ np.linalg.solve(c[np.ix_(o, o)], x[o] - mu[o])
             for mu, c in zip(means.numpy(), cov, strict=True)]
        )
        np.testing.assert_allclose(got[n, m_], resp @ conditional, rtol=1e-9)
        assert np.array_equal(got[n, o], x[o])


def test_sample_missing_keeps_observed_entries_and_is_reproducible():
    module, X, _, _ = make_mixture("full")
    observed = torch.tensor([True, False, True, False]).expand(6, 4)
    with torch.no_grad():
        first = module.sample_missing(X, observed, 5, generator=torch.Generator().manual_seed(0))
        again = module.sample_missing(X, observed, 5, generator=torch.Generator().manual_seed(0))
        other = module.sample_missing(X, observed, 5, generator=torch.Generator().manual_seed(1))
    assert first.shape == (5, 6, 4) and first.dtype == torch.float64
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert torch.equal(first[:, observed], X[observed].expand(5, -1))


def test_sample_is_reproducible_and_has_the_mixture_mean():
    module, _, weights, means = make_mixture("full")
    with torch.no_grad():
        X, labels = module.sample(4000, generator=torch.Generator().manual_seed(0))
        again, _ = module.sample(4000, generator=torch.Generator().manual_seed(0))
    assert X.shape == (4000, 4) and X.dtype == torch.float64 and labels.dtype == torch.long
    assert torch.equal(X, again)
    assert int(labels.min()) >= 0 and int(labels.max()) < 3
    np.testing.assert_allclose(np.bincount(labels.numpy(), minlength=3) / 4000, weights.numpy(), atol=0.03)
    # within-component means: about 1/sqrt(n_k) from the true means
    for k in range(3):
        np.testing.assert_allclose(X[labels == k].mean(0).numpy(), means[k].numpy(), atol=0.25)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_unstandardize_is_the_affine_change_of_variables(covariance_type):
    module, X, _, _ = make_mixture(covariance_type)
    center = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)
    scale = torch.full((4,), 2.5, dtype=torch.float64) if covariance_type == "spherical" else torch.tensor(
        [0.5, 2.0, 3.0, 1.5], dtype=torch.float64
    )
    with torch.no_grad():
        before = module.log_marginal(X)
        assert module.unstandardize_(center, scale) is module
        after = module.log_marginal(center + scale * X)
    torch.testing.assert_close(after, before - scale.log().sum(), rtol=1e-10, atol=1e-10)


def test_decode_is_the_probability_weighted_mean():
    module, _, _, means = make_mixture("diag")
    Z = torch.tensor([[1.0, 0.0, 0.0], [0.2, 0.3, 0.5]], dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(module.decode(Z), Z @ means)


def test_bad_covariance_type_and_spherical_rescaling_are_refused():
    with pytest.raises(ValueError, match="covariance_type must be one of .*'banded'"):
        make_mixture("banded")
    module, _, _, _ = make_mixture("spherical")
    with pytest.raises(ValueError, match="spherical mixture can be rescaled by one number only"):
        module.unstandardize_(
            torch.zeros(4, dtype=torch.float64), torch.tensor([1.0, 2.0, 1.0, 1.0], dtype=torch.float64)
        )


def test_draws_by_pattern_of_holes_are_the_rowwise_ones():
    # One Cholesky factor per pattern of holes; each row's factor of its own gives the same draws.
    from skmpt.models.imputation import gaussian_conditional

    module, X, _, _ = make_mixture("full")
    observed = torch.rand(X.shape, generator=torch.Generator().manual_seed(3)) < 0.6
    with torch.no_grad():
        draws = module.sample_missing(X, observed, 3, generator=torch.Generator().manual_seed(2))
        mean, cov, log_density = gaussian_conditional(X, observed, module.means.unsqueeze(1),
                                                      torch.as_tensor(dense_covariances(module)))
        resp = torch.softmax((module.log_weights.unsqueeze(-1) + log_density).T, -1)
    generator = torch.Generator().manual_seed(2)
    picks = torch.multinomial(resp, 3, replacement=True, generator=generator).T  # (3, n)
    noise = torch.randn(3, 1, *X.shape, 1, generator=generator, dtype=torch.float64)
    factor = torch.linalg.cholesky(cov + torch.diag_embed(observed.to(torch.float64)))
    numbers = (mean + (factor @ noise).squeeze(-1))[torch.arange(3)[:, None], picks, torch.arange(len(X))]
    torch.testing.assert_close(draws, torch.where(observed, X, numbers), rtol=0, atol=1e-12)
