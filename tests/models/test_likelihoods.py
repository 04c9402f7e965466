"""The observation models of the VAEs: their log-densities, natural terms, mixtures, checks and rescaling."""

import math

import numpy as np
import pytest
import torch


@pytest.mark.parametrize("name", ["bernoulli", "gaussian"])
def test_likelihood_objects_agree_with_their_own_log_prob(name):
    from skmpt.models.likelihoods import make_likelihood

    g = torch.Generator().manual_seed(0)
    likelihood = make_likelihood(name, torch.zeros((), dtype=torch.float64), variance=0.7)
    out = torch.randn(6, 4, generator=g, dtype=torch.float64)  # G=6 decoder outputs, D=4
    X = torch.randint(0, 2, (3, 4), generator=g).double() if name == "bernoulli" else torch.randn(3, 4, generator=g,
                                                                                                   dtype=torch.float64)
    with torch.no_grad():
        token = likelihood.log_prob(X[:, None, :], out)  # (n, G, D)
        linear, square, constant = likelihood.natural_terms(out)
        natural = X[:, None, :] * linear + constant + (0 if square is None else square * X[:, None, :].square())
        np.testing.assert_allclose(natural.numpy(), token.numpy(), rtol=1e-12)
        log_weights = torch.log_softmax(torch.randn(3, 2, 6, generator=g, dtype=torch.float64), -1)
        mixture = likelihood.mixture_log_prob(X, log_weights, out)
        brute = torch.logsumexp(log_weights.unsqueeze(-1) + token.unsqueeze(1), dim=2)
        np.testing.assert_allclose(mixture.numpy(), brute.numpy(), rtol=1e-12)
    expected_mean = torch.sigmoid(out) if name == "bernoulli" else out
    assert torch.equal(likelihood.mean(out), expected_mean)


def test_likelihood_checks_and_rescaling():
    from skmpt.models.likelihoods import make_likelihood

    like = torch.zeros((), dtype=torch.float64)
    bernoulli, gaussian = make_likelihood("bernoulli", like), make_likelihood("gaussian", like, floor=0.1)
    with pytest.raises(ValueError, match="only 0 and 1, but it contains 0.5"):
        bernoulli.check(torch.tensor([0.0, 0.5], dtype=torch.float64))
    with pytest.raises(ValueError, match="NaN or infinity"):
        gaussian.check(torch.tensor([math.nan], dtype=torch.float64))
    with pytest.raises(ValueError, match="bernoulli likelihood is not closed under rescaling"):
        bernoulli.unstandardize_(torch.tensor(2.0, dtype=torch.float64))
    with torch.no_grad():
        gaussian.unstandardize_(torch.tensor(2.0, dtype=torch.float64))
    np.testing.assert_allclose(float(gaussian.variance().detach()), 4.0, rtol=1e-12)  # (0.1 + 0.9) * 2**2
    with pytest.raises(ValueError, match="likelihood must be one of"):
        make_likelihood("poisson", like)
