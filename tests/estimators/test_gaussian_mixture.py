import copy
import pickle
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture
from sklearn.mixture._gaussian_mixture import _compute_precision_cholesky
from sklearn.model_selection import GridSearchCV

from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, objectives
from skmpt.masks import all_masks, random_orderings
from skmpt.models import GaussianMixtureModule
from support.references import dense_conditionals, generic_chain, one_thread  # noqa: F401 (fixture)


def mixture_parameters(max_features=5, max_components=3):
    """(weights, means, covariances, covariance_type) of a random mixture."""
    value = st.floats(-3.0, 3.0, allow_nan=False, allow_subnormal=False)

    @st.composite
    def build(draw):
        covariance_type = draw(st.sampled_from(["full", "tied", "diag", "spherical"]))
        n_features = draw(st.integers(1, max_features))
        n_components = draw(st.integers(1, max_components))
        weights = draw(hnp.arrays(np.float64, (n_components,), elements=st.floats(0.05, 1.0)))
        means = draw(hnp.arrays(np.float64, (n_components, n_features), elements=value))
        scales = draw(hnp.arrays(np.float64, (n_components, n_features), elements=st.floats(0.1, 2.0)))
        if covariance_type == "full":
            factors = draw(hnp.arrays(np.float64, (n_components, n_features, n_features), elements=value))
            covariances = factors @ factors.transpose(0, 2, 1) + np.einsum("kd,de->kde", scales, np.eye(n_features))
        elif covariance_type == "tied":
            factor = draw(hnp.arrays(np.float64, (n_features, n_features), elements=value))
            covariances = factor @ factor.T + np.diag(scales[0])
        else:
            covariances = scales if covariance_type == "diag" else scales[:, 0]
        return weights / weights.sum(), means, covariances, covariance_type

    return build()


def make_module(weights, means, covariances, covariance_type):
    tensors = (torch.as_tensor(a, dtype=torch.float64) for a in (weights, means, covariances))
    return GaussianMixtureModule(*tensors, covariance_type)


def sklearn_mixture(weights, means, covariances, covariance_type):
    """A GaussianMixture holding the given parameters, as if fitted."""
    gmm = GaussianMixture(len(weights), covariance_type=covariance_type)
    gmm.weights_, gmm.means_, gmm.covariances_ = weights, means, covariances
    gmm.precisions_cholesky_ = _compute_precision_cholesky(covariances, covariance_type)
    gmm.n_features_in_ = means.shape[1]
    return gmm


def component_covariance(covariances, covariance_type, k, n_features):
    """Component ``k``'s full covariance from scikit-learn's layout of ``covariance_type``."""
    if covariance_type == "full":
        return covariances[k]
    if covariance_type == "tied":
        return covariances
    return np.diag(covariances[k]) if covariance_type == "diag" else covariances[k] * np.eye(n_features)


def dense_mixture_conditionals(weights, means, covariances, covariance_type, X, masks):
    """Per-token log p(x_j | x_r) of the mixture by dense conditioning of each component."""
    per_component = []
    for k in range(len(weights)):
        cov = component_covariance(covariances, covariance_type, k, len(means[k]))
        per_token, observed = dense_conditionals(means[k], cov, X, masks)
        per_component.append((np.log(weights[k]) + observed, per_token))
    joint = np.stack([j for j, _ in per_component], -1)  # (n, P, K)
    tokens = np.stack([t for _, t in per_component], -1)  # (n, P, D, K)
    out = logsumexp(joint[:, :, None, :] + tokens, -1) - logsumexp(joint, -1)[:, :, None]
    return np.where(np.asarray(masks), out, 0.0)


@given(params=mixture_parameters(), seed=st.integers(0, 2**16))
def test_identity_and_every_path_agree_with_dense_conditioning(params, seed):
    module = make_module(*params)
    n_features = params[1].shape[1]
    rng = np.random.RandomState(seed)
    X = 2 * rng.randn(4, n_features) + params[1][rng.randint(len(params[0]), size=4)]
    X_t = torch.as_tensor(X)
    masks = all_masks(n_features)
    orderings = random_orderings(3, n_features, random_state=seed)
    with torch.no_grad():
        lml = module.log_marginal(X_t).numpy()
        exhaustive = objectives.cumulative_score(module, X_t, score_method="exhaustive").numpy()
        per_token = module.masked_log_prob(X_t, masks).numpy()
        per_sample = module.masked_log_prob(X_t, masks.expand(4, -1, -1)).numpy()
        chain = module.chain_log_prob(X_t, orderings).numpy()
        reference_chain = generic_chain(module, X_t, orderings).numpy()
    np.testing.assert_allclose(lml, sklearn_mixture(*params).score_samples(X), rtol=1e-9)
    np.testing.assert_allclose(exhaustive, lml, rtol=1e-9)
    np.testing.assert_allclose(chain.sum(-1), np.repeat(lml[:, None], 3, 1), rtol=1e-9)
    dense = dense_mixture_conditionals(*params, X, masks.numpy())
    np.testing.assert_allclose(per_token, dense, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(per_sample, per_token, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(chain, reference_chain, rtol=1e-9, atol=1e-9)


def test_per_sample_masks_repeat_and_differ():
    """Per-sample masks, some repeated across samples, match the shared-mask path row by row."""
    rng = np.random.RandomState(0)
    params = (np.array([0.2, 0.5, 0.3]), rng.randn(3, 4), np.eye(4) + 0.3 * np.ones((3, 4, 4)), "full")
    module = make_module(*params)
    X = torch.as_tensor(rng.randn(6, 4))
    masks = all_masks(4)
    chosen = torch.as_tensor(rng.randint(len(masks), size=(6, 5)))
    with torch.no_grad():
        shared = module.masked_log_prob(X, masks)
        per_sample = module.masked_log_prob(X, masks[chosen])
    np.testing.assert_allclose(per_sample.numpy(), shared.gather(1, chosen[..., None].expand(-1, -1, 4)).numpy(),
                               rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("covariance_type", ["spherical", "tied"])
def test_unstandardize_tied_and_spherical(covariance_type):
    rng = np.random.RandomState(4)
    covariances = np.eye(3) + 0.4 * np.ones((3, 3)) if covariance_type == "tied" else rng.uniform(0.5, 2, 2)
    module = make_module(np.array([0.4, 0.6]), rng.randn(2, 3), covariances, covariance_type)
    center, scale = torch.as_tensor(rng.randn(3)), torch.as_tensor(rng.uniform(0.5, 3, 3))
    if covariance_type == "spherical":
        with pytest.raises(ValueError, match="one number only"):
            copy.deepcopy(module).unstandardize_(center, scale)
        scale = torch.tensor(1.7, dtype=torch.float64)
    X = torch.as_tensor(rng.randn(5, 3))
    with torch.no_grad():
        mapped = copy.deepcopy(module).unstandardize_(center, scale)
        np.testing.assert_allclose(mapped.log_marginal(center + scale * X).numpy(),
                                   (module.log_marginal(X) - scale.log().expand(3).sum()).numpy(), rtol=1e-12)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_unstandardize_with_per_feature_scale_is_exact(covariance_type):
    rng = np.random.RandomState(3)
    covariances = np.eye(3) + 0.4 * np.ones((2, 3, 3)) if covariance_type == "full" else rng.uniform(0.5, 2, (2, 3))
    module = make_module(np.array([0.4, 0.6]), rng.randn(2, 3), covariances, covariance_type)
    center, scale = torch.as_tensor(rng.randn(3)), torch.as_tensor(rng.uniform(0.5, 3, 3))
    X = torch.as_tensor(rng.randn(5, 3))
    with torch.no_grad():
        mapped = copy.deepcopy(module).unstandardize_(center, scale)
        np.testing.assert_allclose(mapped.log_marginal(center + scale * X).numpy(),
                                   (module.log_marginal(X) - scale.log().sum()).numpy(), rtol=1e-12)


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_from_estimator_matches_gaussian_mixture(covariance_type):
    rng = np.random.RandomState(0)
    X = np.vstack([rng.randn(60, 3), rng.randn(60, 3) @ rng.randn(3, 3) + 5])
    em = GaussianMixture(2, covariance_type=covariance_type, random_state=0).fit(X)
    gmm = MaskedGaussianMixture.from_estimator(em, device="cpu", random_state=0)
    assert (gmm.n_components, gmm.covariance_type, gmm.n_iter_) == (2, covariance_type, 0)
    np.testing.assert_allclose(gmm.log_marginal_likelihood(X), em.score_samples(X), rtol=1e-9)
    np.testing.assert_allclose(gmm.score_samples(X), em.score_samples(X), rtol=1e-9)  # chain: exact
    np.testing.assert_allclose(gmm.predict_proba(X), em.predict_proba(X), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(gmm.predict(X), em.predict(X))
    assert gmm._n_parameters() == em._n_parameters()
    for name in ("weights_", "means_", "covariances_", "precisions_cholesky_", "precisions_"):
        np.testing.assert_allclose(getattr(gmm, name), getattr(em, name), rtol=1e-10, atol=1e-13, err_msg=name)
    restored = pickle.loads(pickle.dumps(gmm))
    np.testing.assert_array_equal(restored.score_samples(X[:5]), gmm.score_samples(X[:5]))


def test_from_estimator_refuses_bad_sources():
    X = np.random.RandomState(0).randn(30, 2)
    with pytest.raises(NotFittedError):
        MaskedGaussianMixture.from_estimator(GaussianMixture(2))
    with pytest.raises(TypeError, match="takes a fitted GaussianMixture; got MaskedFactorAnalysis"):
        MaskedGaussianMixture.from_estimator(MaskedFactorAnalysis())
    with pytest.raises(ValueError, match="covariance_type is taken from the GaussianMixture"):
        MaskedGaussianMixture.from_estimator(GaussianMixture(1).fit(X), covariance_type="diag")


def clusters(n_samples=1500, seed=0):
    """Three well-separated correlated clusters in D=4, and their labels."""
    rng = np.random.RandomState(seed)
    centers, shapes = 6 * rng.randn(3, 4), 0.5 * rng.randn(3, 4, 4) + np.eye(4)
    labels = rng.randint(0, 3, n_samples)
    return centers[labels] + np.einsum("nde,ne->nd", shapes[labels], rng.randn(n_samples, 4)), labels


@pytest.mark.slow
def test_mpt_training_reaches_em_and_recovers_clusters():
    X, labels = clusters()
    em = GaussianMixture(3, random_state=0).fit(X).score(X)
    gmm = MaskedGaussianMixture(3, random_state=0).fit(X)
    lml = gmm.log_marginal_likelihood(X).mean()
    assert em - 0.05 < lml < em + 1e-9
    assert adjusted_rand_score(labels, gmm.predict(X)) >= 0.95
    np.testing.assert_allclose(gmm.score(X), lml, rtol=1e-9)


@pytest.mark.parametrize("covariance_type", ["tied", "spherical"])
def test_mpt_training_of_tied_and_spherical_reaches_em(covariance_type):
    rng = np.random.RandomState(0)
    if covariance_type == "tied":  # two clusters of one correlated shape
        shape = np.array([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.3, -0.4, 0.5]])
        X = rng.randn(400, 3) @ shape.T + 4 * np.repeat([[1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]], 200, 0)
    else:  # round clusters of different spreads
        X = rng.randn(400, 3) * np.repeat([0.5, 1.5], 200)[:, None] + 4 * np.repeat(np.eye(2, 3), 200, 0)
    em = GaussianMixture(2, covariance_type=covariance_type, random_state=0).fit(X)
    gmm = MaskedGaussianMixture(2, covariance_type=covariance_type, random_state=0).fit(X)
    lml = gmm.log_marginal_likelihood(X).mean()
    assert em.score(X) - 0.05 < lml < em.score(X) + 1e-9
    assert gmm.covariances_.shape == em.covariances_.shape
    np.testing.assert_allclose(gmm.score(X), lml, rtol=1e-9)  # chain: exact


@pytest.mark.slow
def test_gridsearch_picks_three_components():
    X, _ = clusters(n_samples=300, seed=1)
    search = GridSearchCV(MaskedGaussianMixture(random_state=0, max_epochs=20), {"n_components": [1, 2, 3, 4, 5]}, cv=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X)
    assert search.best_params_["n_components"] == 3


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_fit_predict_sample_clone_pickle(covariance_type):
    X, labels = clusters(n_samples=200, seed=2)
    gmm = MaskedGaussianMixture(3, covariance_type=covariance_type, max_epochs=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gmm.fit(X)
    proba = gmm.predict_proba(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        np.testing.assert_array_equal(clone(gmm).fit_predict(X), proba.argmax(1))  # seeded: the same fit
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(gmm.transform(X), proba)
    assert adjusted_rand_score(labels, gmm.predict(X)) > 0.9  # the k-means start already separates them
    np.testing.assert_allclose(gmm.inverse_transform(proba[:3]), proba[:3] @ gmm.means_)
    samples, drawn = gmm.sample(4000)
    assert samples.shape == (4000, 4) and set(np.unique(drawn)) <= {0, 1, 2}
    np.testing.assert_array_equal(gmm.sample(5)[0], gmm.sample(5)[0])  # int random_state: same draws
    for k in range(3):
        # sample means within 5 standard errors of the component means
        spread = np.sqrt(np.diagonal(component_covariance(gmm.covariances_, covariance_type, k, 4)))
        error = np.abs(samples[drawn == k].mean(0) - gmm.means_[k]) / (spread / np.sqrt((drawn == k).sum()))
        assert error.max() < 5
    restored = pickle.loads(pickle.dumps(gmm))
    np.testing.assert_array_equal(restored.predict_proba(X[:5]), proba[:5])
    assert clone(gmm).get_params() == gmm.get_params()


@pytest.mark.parametrize(
    "params, X, message",
    [
        ({"covariance_type": "shared"}, np.ones((5, 3)), "covariance_type"),
        ({"n_components": 0}, np.ones((5, 3)), "n_components"),
        ({"n_components": 6}, np.random.RandomState(0).randn(5, 3), r"n_components=6 .* 5 sample\(s\)"),
        ({}, np.full((10, 3), np.inf), "infinity"),
    ],
)
def test_bad_input(params, X, message):
    with pytest.raises(ValueError, match=message):
        MaskedGaussianMixture(**params).fit(X)


def test_bad_sample_count():
    gmm = MaskedGaussianMixture.from_estimator(GaussianMixture(1).fit(np.random.RandomState(0).randn(20, 2)))
    with pytest.raises(ValueError, match="n_samples must be a positive integer; got 0"):
        gmm.sample(0)


@pytest.mark.parametrize("random_state", [0, 2, 5])
def test_the_run_kept_of_n_init_says_once_whether_it_converged(random_state):
    """A cluster of identical points (a k-means start of variance 1e-6 on it) sends some runs
    downhill. The run kept among ``n_init`` is the one warned about, once: only the first run
    used to warn, so a kept run that had not converged passed in silence (``random_state=0``:
    ``converged_=False``, no warning), and a first run's warning could come with a kept run
    that had converged."""
    rng = np.random.RandomState(0)
    X = np.r_[rng.randn(100, 2), rng.randn(100, 2) + [4, 0], np.tile([[10.0, 10.0]], (30, 1))]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mixture = MaskedGaussianMixture(3, n_init=3, random_state=random_state, device="cpu").fit(X)
    convergence = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(convergence) == (0 if mixture.converged_ else 1)
