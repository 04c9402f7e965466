"""The observation models of the VAEs: their log-densities, natural terms, mixtures, checks and rescaling."""


import math

import numpy as np
import pytest
import torch
from scipy import stats

from skmpt.models.likelihoods import LIKELIHOODS, Bernoulli, Gaussian, Likelihood, make_likelihood


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


def test_bernoulli_log_prob_and_mean_are_scipy_bernoulli_of_the_sigmoid():
    out = torch.tensor([-40.0, -3.0, 0.0, 0.7, 5.0, 40.0], dtype=torch.float64)
    p = 1 / (1 + np.exp(-out.numpy()))
    likelihood = Bernoulli()
    moderate = np.abs(out.numpy()) < 10
    for x in (0.0, 1.0):
        X = torch.full_like(out, x)
        got = likelihood.log_prob(X, out).numpy()
        np.testing.assert_allclose(got[moderate], stats.bernoulli(p[moderate]).logpmf(x), rtol=1e-12)
        # everywhere, tails included: log sigmoid(+-a) = -log(1 + exp(-+a))
        np.testing.assert_allclose(got, -np.logaddexp(0.0, -out.numpy() if x else out.numpy()), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(likelihood.mean(out).numpy(), p, rtol=1e-12)
    # no overflow far in the tails: log sigmoid(-40) = -40 to rounding
    assert math.isclose(float(likelihood.log_prob(torch.tensor(0.0, dtype=torch.float64), out[-1])), -40.0,
                        rel_tol=1e-12)


def test_gaussian_log_prob_is_scipy_norm_with_the_learned_variance():
    likelihood = Gaussian(torch.tensor([0.5, 2.0, 3.0], dtype=torch.float64))
    X = torch.tensor([[0.3, -1.0, 2.0], [1.0, 0.0, -4.0]], dtype=torch.float64)
    out = torch.tensor([0.1, 0.5, -1.0], dtype=torch.float64)
    with torch.no_grad():
        got = likelihood.log_prob(X, out).numpy()
        variance = likelihood.variance().numpy()
    np.testing.assert_allclose(variance, [0.5, 2.0, 3.0], rtol=1e-12)
    np.testing.assert_allclose(got, stats.norm(out.numpy(), np.sqrt(variance)).logpdf(X.numpy()), rtol=1e-12)
    assert torch.equal(likelihood.mean(out), out)


def test_gaussian_floor_bounds_the_variance_from_below():
    likelihood = Gaussian(torch.tensor(1.0, dtype=torch.float64), floor=0.25)
    with torch.no_grad():
        assert math.isclose(float(likelihood.variance()), 1.0, rel_tol=1e-12)
        likelihood.log_variance.fill_(-1e3)  # the learned part shrinks to nothing
        assert float(likelihood.variance()) == 0.25
    assert "variance_floor" in dict(likelihood.named_buffers())
    assert [name for name, _ in likelihood.named_parameters()] == ["log_variance"]


@pytest.mark.parametrize("name", ["bernoulli", "gaussian"])
def test_draws_are_reproducible_and_have_the_likelihood_mean(name):
    likelihood = make_likelihood(name, torch.zeros((), dtype=torch.float64), variance=0.5)
    out = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64).expand(20000, 3)
    with torch.no_grad():
        draws = likelihood.sample(out, torch.Generator().manual_seed(0))
        again = likelihood.sample(out, torch.Generator().manual_seed(0))
        mean = likelihood.mean(out[0])
    assert draws.shape == out.shape and draws.dtype == torch.float64
    assert torch.equal(draws, again)
    np.testing.assert_allclose(draws.mean(0).numpy(), mean.numpy(), atol=0.02)
    if name == "bernoulli":
        assert set(draws.unique().tolist()) <= {0.0, 1.0}
    else:
        np.testing.assert_allclose(draws.var(0).numpy(), 0.5, rtol=0.05)


def test_bernoulli_mixture_stays_accurate_near_certainty():
    # Both components give x = 0 a probability of about exp(-50): the log-probability is about -50,
    # where 1 - sigmoid(50) would round to 0 and its log to -inf.
    out = torch.tensor([[50.0], [52.0]], dtype=torch.float64)
    log_weights = torch.log(torch.tensor([[[0.5, 0.5]]], dtype=torch.float64))
    got = Bernoulli().mixture_log_prob(torch.zeros(1, 1, dtype=torch.float64), log_weights, out)
    expected = np.log(0.5 * np.exp(-50.0) + 0.5 * np.exp(-52.0))  # sigmoid(-a) ~ exp(-a) there
    assert got.shape == (1, 1, 1)
    np.testing.assert_allclose(float(got), expected, rtol=1e-12)


def test_gaussian_mixture_of_outputs_is_scipy_mixture_density():
    likelihood = Gaussian(torch.tensor(0.8, dtype=torch.float64))
    out = torch.tensor([[0.0, 1.0], [2.0, -1.0], [-1.0, 0.5]], dtype=torch.float64)  # G=3, D=2
    weights = np.array([0.2, 0.5, 0.3])
    log_weights = torch.log(torch.as_tensor(weights)).expand(4, 1, 3)
    X = torch.tensor([[0.1, 0.2], [1.5, -2.0], [3.0, 0.0], [-1.0, 1.0]], dtype=torch.float64)
    with torch.no_grad():
        got = likelihood.mixture_log_prob(X, log_weights, out)
    assert got.shape == (4, 1, 2)
    expected = np.log(
        (weights[None, :, None] * stats.norm(out.numpy()[None], np.sqrt(0.8)).pdf(X.numpy()[:, None, :])).sum(1)
    )
    np.testing.assert_allclose(got[:, 0].numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("floor", "scale", "expected_variance"),
    [
        (None, [3.0, 0.5], [0.5 * 9, 2.0 * 0.25]),  # one scale per feature
        (0.1, 3.0, [0.5 * 9, 2.0 * 9]),  # one scale for all (the estimators' standardisation), with a floor
        (0.1, [3.0, 0.5], [0.5 * 9, 2.0 * 0.25]),  # one scale per feature, with a floor: one floor per feature
    ],
)
def test_gaussian_unstandardize_is_the_change_of_variables(floor, scale, expected_variance):
    likelihood = Gaussian(torch.tensor([0.5, 2.0], dtype=torch.float64), floor=floor)
    X, out = torch.tensor([0.3, -1.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)
    scale = torch.tensor(scale, dtype=torch.float64)
    with torch.no_grad():
        before = likelihood.log_prob(X, out)
        assert likelihood.unstandardize_(scale) is likelihood
        after = likelihood.log_prob(scale * X, scale * out)
        np.testing.assert_allclose(likelihood.variance().numpy(), expected_variance, rtol=1e-12)
        if floor is not None:
            np.testing.assert_allclose(likelihood.variance_floor.numpy(), floor * scale.square().numpy(), rtol=1e-12)
    torch.testing.assert_close(after, before - scale.log().expand(2), rtol=1e-12, atol=1e-12)


def test_registry_and_factory():
    assert LIKELIHOODS == {"bernoulli": Bernoulli, "gaussian": Gaussian}
    like = torch.zeros((), dtype=torch.float32)
    gaussian = make_likelihood("gaussian", like, variance=[0.5, 2.0], floor=0.01)
    assert isinstance(gaussian, Gaussian) and gaussian.log_variance.dtype == torch.float32
    torch.testing.assert_close(gaussian.variance().detach(), torch.tensor([0.5, 2.0]))
    assert isinstance(make_likelihood("bernoulli", like), Bernoulli)
    with pytest.raises(ValueError, match=r"likelihood must be one of \('bernoulli', 'gaussian'\); got 'Gaussian'"):
        make_likelihood("Gaussian", like)


def test_checks_name_the_bad_value_and_how_many():
    with pytest.raises(ValueError, match=r"contains -1 \(and 2 other non-binary values\).*Binarizer"):
        Bernoulli.check(torch.tensor([0.0, -1.0, 1.0, 0.5, 3.0]))
    Bernoulli.check(torch.tensor([0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="likelihood='gaussian' needs finite data"):
        Gaussian.check(torch.tensor([0.0, math.inf]))
    Gaussian.check(torch.tensor([-1e30, 1e30]))
    Likelihood.check(torch.tensor([math.nan]))  # the base class accepts everything


def test_the_base_class_declares_the_interface():
    base = Likelihood()
    x = torch.zeros(2)
    for call in (lambda: base.log_prob(x, x), lambda: base.mean(x), lambda: base.sample(x),
                 lambda: base.natural_terms(x), lambda: base.mixture_log_prob(x, x, x)):
        with pytest.raises(NotImplementedError):
            call()
    assert Bernoulli().natural_terms(x)[1] is None
