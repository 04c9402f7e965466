import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skmpt import MaskedPPCA, MaskedVAE
from skmpt.datasets import load_binarized_digits, make_ppca
from skmpt.masks import masks_of_sizes
from skmpt.models.contract import importance_log_weights


def _quiet_fit(estimator, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(X)


def _vae_set_to(ppca, X, **params):
    """A linear-Gaussian MaskedVAE (with ``params``) set to a fitted MaskedPPCA: the same model."""
    vae = _quiet_fit(MaskedVAE(hidden_layer_sizes=(), max_epochs=1, random_state=0, device="cpu", **params), X)
    module = vae.module_
    W, mu, s2 = torch.as_tensor(ppca.components_.T), torch.as_tensor(ppca.mean_), ppca.noise_variance_
    with torch.no_grad():
        module.decoder[0].weight.copy_(W)
        module.decoder[0].bias.copy_(mu)
        module.likelihood.log_variance.fill_(np.log(s2 - float(module.likelihood.variance_floor)))
        # Encoder: the exact posterior mean of z given complete x, its marginal variances.
        cov = torch.linalg.inv(torch.eye(2, dtype=torch.float64) + W.T @ W / s2)
        gain = cov @ W.T / s2
        module.encoder[0].weight.zero_()
        module.encoder[0].weight[:2].copy_(gain)
        module.encoder[0].bias.copy_(torch.cat([-gain @ mu, cov.diagonal().log()]))
        module.fill.copy_(mu)
    return vae


@pytest.fixture(scope="module")
def ppca_as_vae():
    """A linear-Gaussian MaskedVAE set to a fitted MaskedPPCA: the same model, known answers."""
    X = make_ppca(300, 6, 2, random_state=0).data
    ppca = MaskedPPCA(random_state=0, device="cpu").fit(X)  # the modules meet CPU tensors and generators
    return ppca, _vae_set_to(ppca, X), torch.as_tensor(X[:20])


def _error(module, ppca, X, masks, conditional, n_particles, repeats=3):
    module.conditional, module.n_particles = conditional, n_particles
    exact = ppca.module_.masked_log_prob(X, masks)
    errors = []
    with torch.no_grad():
        for seed in range(repeats):
            estimate = module.masked_log_prob(X, masks, generator=torch.Generator().manual_seed(seed))
            errors.append(float((estimate - exact).abs().sum() / masks.sum() / len(X)))
    return np.mean(errors)


def test_importance_conditionals_converge_to_ppca(ppca_as_vae):
    ppca, vae, X = ppca_as_vae
    masks = masks_of_sizes([1, 2, 3, 4, 5, 6] * 3, 6, random_state=0)
    few, many = (_error(vae.module_, ppca, X, masks, "importance", s) for s in (64, 1024))
    # Monte Carlo error shrinks like 1/sqrt(particles): 16 times more particles, about a quarter
    # of the error (measured 0.27 -> 0.054 nats per token; 0.028 at 4096).
    assert many < 0.1 and many < 0.4 * few


def test_pseudo_gibbs_does_not_converge(ppca_as_vae):
    ppca, vae, X = ppca_as_vae
    masks = masks_of_sizes([1, 2, 3, 4, 5, 6] * 3, 6, random_state=0)
    few, many = (_error(vae.module_, ppca, X, masks, "pseudo_gibbs", s) for s in (64, 1024))
    # Its error plateaus (measured 0.38 -> 0.32 nats per token; 0.31 at 4096): a biased estimate.
    assert many > 0.2 and many > 0.6 * few


def test_importance_sampled_lml_converges_to_ppca(ppca_as_vae):
    ppca, vae, X = ppca_as_vae
    exact = ppca.log_marginal_likelihood(X.numpy())
    n_draws = 5000
    # n_lml_samples is a parameter of the model: it acts at fit (set_params after fit changes nothing)
    data = make_ppca(300, 6, 2, random_state=0).data
    estimate = _vae_set_to(ppca, data, n_lml_samples=n_draws).log_marginal_likelihood(X.numpy())
    # The tolerance is the estimator's own Monte Carlo error: by the delta method, the standard
    # error of log(mean w) is std(w) / (mean(w) sqrt(S)), from weights of an independent run.
    with torch.no_grad():
        noise = torch.randn(n_draws, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        weights = torch.softmax(importance_log_weights(vae.module_, X, noise), dim=1) * n_draws
        standard_error = (weights.std(1) / np.sqrt(n_draws)).numpy()
    # The draws are shared by the samples, and in this linear-Gaussian model every sample's
    # weights are the same, so the errors are one draw, not an average: bound each by 4 SE.
    assert np.all(np.abs(estimate - exact) < 4 * standard_error)
    coarse = _vae_set_to(ppca, data, n_lml_samples=10).log_marginal_likelihood(X.numpy())
    assert np.abs(coarse - exact).mean() > np.abs(estimate - exact).mean()


@pytest.mark.parametrize("objective, conditional", [("mpt", "importance"), ("mpt", "pseudo_gibbs"),
                                                    ("elbo", "importance"), ("iwae", "importance")])
def test_objectives_train(objective, conditional):
    X = make_ppca(300, 6, 2, random_state=1).data
    vae = _quiet_fit(MaskedVAE(hidden_layer_sizes=(16,), objective=objective, conditional=conditional,
                               max_epochs=8, learning_rate=1e-2, monitor="lml", random_state=0), X)
    assert vae.history_[-1]["lml"] > vae.history_[0]["lml"]
    assert np.isfinite(vae.score(X))


def test_scores_are_reproducible_and_subset_invariant():
    X = make_ppca(100, 5, 2, random_state=0).data
    vae = _quiet_fit(MaskedVAE(hidden_layer_sizes=(8,), max_epochs=2, score_masks=3, random_state=0), X)
    scores = vae.score_samples(X[:30])
    np.testing.assert_array_equal(vae.score_samples(X[:30]), scores)
    np.testing.assert_allclose(vae.score_samples(X[:7]), scores[:7], rtol=1e-10)
    lml = vae.log_marginal_likelihood(X[:30])
    np.testing.assert_allclose(vae.log_marginal_likelihood(X[:7]), lml[:7], rtol=1e-10)


def test_bernoulli_pipeline_pickle_clone():
    X = load_binarized_digits().data[:200]
    vae = _quiet_fit(MaskedVAE(hidden_layer_sizes=(32,), likelihood="bernoulli", max_epochs=2, score_masks=2,
                               random_state=0), X)
    restored = pickle.loads(pickle.dumps(vae))
    np.testing.assert_array_equal(restored.score_samples(X[:5]), vae.score_samples(X[:5]))
    assert clone(vae).get_params() == vae.get_params()
    probabilities = vae.inverse_transform(vae.transform(X[:4]))
    assert probabilities.shape == (4, 64) and ((probabilities > 0) & (probabilities < 1)).all()
    with pytest.raises(ValueError, match="only 0 and 1"):
        vae.score_samples(X[:3] * 0.5)


def test_gaussian_rescaling_is_exact():
    X = make_ppca(200, 5, 2, random_state=0).data
    a = _quiet_fit(MaskedVAE(hidden_layer_sizes=(8,), max_epochs=3, random_state=0), X)
    b = _quiet_fit(MaskedVAE(hidden_layer_sizes=(8,), max_epochs=3, random_state=0), 100 * X + 3)
    np.testing.assert_allclose(b.transform(100 * X[:5] + 3), a.transform(X[:5]), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(b.log_marginal_likelihood(100 * X[:5] + 3),
                               a.log_marginal_likelihood(X[:5]) - 5 * np.log(100), rtol=1e-8)


def test_in_a_pipeline():
    X = make_ppca(150, 5, 2, random_state=0).data
    pipe = make_pipeline(StandardScaler(), MaskedVAE(hidden_layer_sizes=(8,), max_epochs=2, random_state=0))
    _quiet_fit(pipe, X)
    assert pipe.transform(X[:3]).shape == (3, 2)


@pytest.mark.parametrize("params, message", [({"hidden_layer_sizes": (0,)}, "hidden_layer_sizes"),
                                             ({"activation": "gelu"}, "activation"),
                                             ({"conditional": "gibbs"}, "conditional"),
                                             ({"n_particles": 0}, "n_particles"),
                                             ({"objective": "lml"}, "objective")])
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        MaskedVAE(**params).fit(np.random.RandomState(0).randn(20, 3))


def test_log_marginal_likelihood_takes_the_draws_of_one_call():
    """More importance draws for one estimate without refitting (as kneighbors takes n_neighbors)."""
    from skmpt.datasets import make_ppca

    X = make_ppca(60, 4, 1, random_state=0).data
    vae = MaskedVAE(1, hidden_layer_sizes=(4,), n_lml_samples=5, max_epochs=2, random_state=0).fit(X)
    fitted = vae.log_marginal_likelihood(X[:5])
    np.testing.assert_array_equal(vae.log_marginal_likelihood(X[:5], n_lml_samples=5), fitted)
    more = vae.log_marginal_likelihood(X[:5], n_lml_samples=50)
    assert not np.allclose(more, fitted) and vae.params_["n_lml_samples"] == 5
    assert vae.importance_diagnostics(X[:5], n_lml_samples=50).ess.max() > 5  # more than the fitted 5 draws
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="n_lml_samples must be a positive integer or None"):
            vae.log_marginal_likelihood(X[:5], n_lml_samples=bad)
