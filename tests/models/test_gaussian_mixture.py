"""GaussianMixtureModule against dense mixtures of Gaussians: densities, marginals and masked conditionals."""

import pytest
import torch

from skmpt.models import GaussianMixtureModule


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
