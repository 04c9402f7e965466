import pickle
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import multivariate_normal
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from support.helpers import make_ppca_module, requires_cuda
from skmpt import MaskedPPCA, objectives, working_memory
from skmpt.masks import all_masks, nested_masks, random_orderings
from skmpt.testing import check_mpt_identity, ppca_parameters


def _dense_conditionals(components, mean, noise_variance, X, masks):
    """The paper's method, errata corrected: condition S = W W^T + s2 I densely per mask."""
    S = components.T @ components + noise_variance * np.eye(len(mean))
    out = np.zeros((len(X), len(masks), len(mean)))
    for p, mask in enumerate(masks):
        rest = ~mask
        for j in np.flatnonzero(mask):
            if rest.any():
                gain = np.linalg.solve(S[np.ix_(rest, rest)], S[rest, j])
                mu = mean[j] + (X[:, rest] - mean[rest]) @ gain
                var = S[j, j] - S[j, rest] @ gain
            else:
                mu, var = np.full(len(X), mean[j]), S[j, j]
            out[:, p, j] = -0.5 * (np.log(2 * np.pi * var) + (X[:, j] - mu) ** 2 / var)
    return out


@given(params=ppca_parameters(max_features=7), seed=st.integers(0, 2**16))
def test_exhaustive_score_is_closed_form_lml(params, seed):
    components, mean, noise_variance = params
    module = make_ppca_module(components, mean, noise_variance)
    rng = np.random.RandomState(seed)
    X = rng.randn(5, len(mean)) * 2 + mean
    with torch.no_grad():
        X_t = torch.as_tensor(X)
        cumulative = objectives.cumulative_score(module, X_t, score_method="exhaustive").numpy()
        closed = module.log_marginal(X_t).numpy()
    reference = multivariate_normal(mean, components.T @ components + noise_variance * np.eye(len(mean))).logpdf(X)
    np.testing.assert_allclose(closed, np.atleast_1d(reference), rtol=1e-9)
    np.testing.assert_allclose(cumulative, closed, rtol=1e-9)


@given(params=ppca_parameters(max_features=5), seed=st.integers(0, 2**16))
def test_conditionals_match_dense_conditioning(params, seed):
    components, mean, noise_variance = params
    module = make_ppca_module(components, mean, noise_variance)
    X = np.random.RandomState(seed).randn(3, len(mean)) + mean
    masks = all_masks(len(mean))
    with torch.no_grad():
        per_token = module.masked_log_prob(torch.as_tensor(X), masks).numpy()
        sums = module.masked_log_prob_sum(torch.as_tensor(X), masks).numpy()
        per_sample = module.masked_log_prob_sum(torch.as_tensor(X), masks.expand(3, -1, -1)).numpy()
    dense = _dense_conditionals(components, mean, noise_variance, X, masks.numpy())
    np.testing.assert_allclose(per_token, dense, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(sums, dense.sum(-1), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(per_sample, sums, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n_features", range(1, 8))
def test_fitted_exhaustive_score_equals_lml(n_features):
    rng = np.random.RandomState(n_features)
    X = rng.randn(60, 1) @ rng.randn(1, n_features) + rng.randn(60, n_features)
    ppca = MaskedPPCA(n_components=1, score_method="exhaustive", max_epochs=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ppca.fit(X)
    np.testing.assert_allclose(ppca.score_samples(X), ppca.log_marginal_likelihood(X), rtol=1e-9)
    report = check_mpt_identity(ppca, X)
    assert report.max_abs_discrepancy < 1e-9


def test_chain_score_is_exact_and_sweep_close(ppca_data):
    ppca = MaskedPPCA(random_state=0, score_method="chain", score_masks=1).fit(ppca_data[:500])
    lml = ppca.log_marginal_likelihood(ppca_data)
    np.testing.assert_allclose(ppca.score_samples(ppca_data), lml, rtol=1e-9)
    # The score's options act at fit, like every parameter; they do not change training.
    sweep = clone(ppca).set_params(score_method="sweep", score_masks=400).fit(ppca_data[:500])
    np.testing.assert_array_equal(sweep.log_marginal_likelihood(ppca_data), lml)
    # The sweep is an estimate; with 400 masks per size its mean error is a few hundredths.
    assert 0 < abs(sweep.score(ppca_data) - lml.mean()) < 0.05


@pytest.mark.parametrize("mask_rate, tolerance", [("uniform", 0.02), (0.2, 0.05)])
def test_mpt_training_reaches_maximum_likelihood(ppca_data, mask_rate, tolerance):
    """N=2000, D=10, K=2 (Fig. 2): MPT lands next to the closed-form ML PPCA."""
    ml = PCA(n_components=2).fit(ppca_data).score(ppca_data)
    ppca = MaskedPPCA(n_components=2, mask_rate=mask_rate, monitor="lml", random_state=0).fit(ppca_data)
    lml = ppca.log_marginal_likelihood(ppca_data).mean()
    assert ml - tolerance < lml <= ml + 1e-9
    assert set(ppca.history_[0]) == {"epoch", "objective", "stopping_objective", "learning_rate", "lml", "seconds"}
    assert ppca.n_iter_ == len(ppca.history_) and ppca.converged_
    # the exact LML went up during training
    assert ppca.history_[-1]["lml"] > ppca.history_[0]["lml"]


def test_fixed_rate_bias_is_what_fixed_rate_training_targets(ppca_data):
    ppca = MaskedPPCA(n_components=2, random_state=0, max_epochs=30, device="cpu").fit(ppca_data[:300])
    X = ppca_data[:50]
    bias = ppca.fixed_rate_bias(X, 0.2)  # exact: all comb(10, 2) masks
    masks = all_masks(10, 2)
    with torch.no_grad():
        X_t = torch.as_tensor(X)
        target = (10 / 2) * ppca.module_.masked_log_prob_sum(X_t, masks).mean(-1).numpy()
    np.testing.assert_allclose(bias, target - ppca.log_marginal_likelihood(X), rtol=1e-10)
    sampled = ppca.fixed_rate_bias(X, 0.2, score_masks=2000)
    assert abs(sampled.mean() - bias.mean()) < 0.1


def test_score_does_not_depend_on_training_mask_rate(ppca_data):
    ppca = MaskedPPCA(random_state=0, max_epochs=20).fit(ppca_data[:200])
    before = ppca.score(ppca_data[:100])
    ppca.set_params(mask_rate=0.15, n_masks=7)  # acts at the next fit, which scores with the same masks
    assert ppca.score(ppca_data[:100]) == before


def test_gridsearch_recovers_latent_dimension():
    # D=20 and N=300: every superfluous component costs a visible overfitting penalty on
    # held-out folds (with D=8, N=600 even the closed-form PCA cannot tell K=3 from K=5).
    rng = np.random.RandomState(0)
    X = rng.randn(300, 3) @ (2 * rng.randn(3, 20)) + rng.randn(300, 20)
    search = GridSearchCV(
        MaskedPPCA(random_state=0, score_method="chain", score_masks=1),
        {"n_components": [1, 2, 3, 4, 5], "mask_rate": ["uniform", 0.2]},
        cv=3,
    ).fit(X)
    assert search.best_params_["n_components"] == 3


def test_transform_inverse_transform_covariance(ppca_data):
    ppca = MaskedPPCA(random_state=0, max_epochs=30).fit(ppca_data[:300])
    W, mu, s2 = ppca.components_, ppca.mean_, ppca.noise_variance_
    Z = ppca.transform(ppca_data[:20])
    M = W @ W.T + s2 * np.eye(2)
    np.testing.assert_allclose(Z, np.linalg.solve(M, W @ (ppca_data[:20] - mu).T).T, rtol=1e-8)
    np.testing.assert_allclose(ppca.inverse_transform(Z), Z @ W + mu)
    cov = ppca.get_covariance()
    np.testing.assert_allclose(cov, W.T @ W + s2 * np.eye(10), rtol=1e-10)
    np.testing.assert_allclose(ppca.get_precision() @ cov, np.eye(10), atol=1e-8)
    with pytest.raises(ValueError, match="n_components"):
        ppca.inverse_transform(np.zeros((2, 3)))


def test_pipeline_clone_pickle_pandas(ppca_data):
    pd = pytest.importorskip("pandas")
    pipe = make_pipeline(StandardScaler(), MaskedPPCA(random_state=0, max_epochs=20))
    pipe.fit(ppca_data[:200])
    restored = pickle.loads(pickle.dumps(pipe))
    np.testing.assert_array_equal(restored.transform(ppca_data[:5]), pipe.transform(ppca_data[:5]))
    assert restored.score(ppca_data[:50]) == pipe.score(ppca_data[:50])
    assert clone(pipe[-1]).get_params() == pipe[-1].get_params()
    frame = pd.DataFrame(ppca_data[:200], columns=[f"f{i}" for i in range(10)])
    out = MaskedPPCA(random_state=0, max_epochs=5).set_output(transform="pandas").fit(frame).transform(frame)
    assert list(out.columns) == ["maskedppca0", "maskedppca1"]


def test_scale_equivariance(ppca_data):
    """Training standardises by one scale: scaled data give scaled parameters."""
    X = ppca_data[:300]
    a = MaskedPPCA(random_state=0, max_epochs=15, monitor="lml").fit(X)
    b = MaskedPPCA(random_state=0, max_epochs=15, monitor="lml").fit(1000 * X + 7)
    np.testing.assert_allclose(b.components_, 1000 * a.components_, rtol=1e-6)
    np.testing.assert_allclose(b.noise_variance_, 1e6 * a.noise_variance_, rtol=1e-6)
    shift = -10 * np.log(1000)
    np.testing.assert_allclose(b.history_[-1]["lml"], a.history_[-1]["lml"] + shift, rtol=1e-8)


def test_convergence_warning_and_verbose(ppca_data, caplog):
    caplog.set_level("INFO", logger="skmpt")
    # From a random start (mini-batches), two epochs stop short of the closed-form optimum.
    with pytest.warns(ConvergenceWarning, match="stopped short of the optimum") as record:
        MaskedPPCA(max_epochs=2, solver="minibatch", verbose=1, random_state=0).fit(ppca_data[:100])
    # The warning points at the line that called fit, past scikit-learn's _fit_context.
    assert record[0].filename == __file__
    lines = [r.getMessage() for r in caplog.records if r.name == "skmpt"]
    assert len(lines) == 2 and lines[0].startswith("epoch=1, objective=")


@pytest.mark.parametrize(
    "X, message",
    [
        (np.full((10, 3), np.nan), "NaN"),
        (np.full((10, 3), np.inf), "infinity"),
        (np.ones(10), "2D array"),
        (np.ones((10, 3)) * 1j, "Complex"),
        (np.ones((1, 3)), "1 sample"),
        (np.ones((10, 1)), r"n_components=2 .* 1 feature\(s\)"),
    ],
)
def test_bad_training_data(X, message):
    with pytest.raises(ValueError, match=message):
        MaskedPPCA().fit(X)


def test_exhaustive_scoring_refused_before_training_when_too_wide():
    with pytest.raises(ValueError, match="score_method=.exhaustive. .* at most 20 features; X has 21"):
        MaskedPPCA(score_method="exhaustive").fit(np.random.RandomState(0).randn(30, 21))


@pytest.mark.parametrize(
    "params, message",
    [
        ({"n_components": 0}, "n_components"),
        ({"mask_rate": 1.5}, "mask_rate"),
        ({"mask_rate": "half"}, "mask_rate"),
        ({"n_masks": 0}, "n_masks"),
        ({"score_masks": "some"}, "score_masks"),
        ({"score_method": "all"}, "score_method"),
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"batch_size": 0}, "batch_size"),
        ({"device": "tpu"}, "device"),
    ],
)
def test_bad_parameters(params, message):
    X = np.random.RandomState(0).randn(20, 3)
    with pytest.raises(ValueError, match=message):
        MaskedPPCA(**params).fit(X)


def test_wrong_width_after_fit(ppca_data):
    ppca = MaskedPPCA(max_epochs=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ppca.fit(ppca_data[:50])
    for method in (ppca.score_samples, ppca.transform, ppca.log_marginal_likelihood, ppca.mpt_curve):
        with pytest.raises(ValueError, match="10 features"):
            method(ppca_data[:5, :4])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without CUDA")
def test_cuda_requested_without_cuda():
    with pytest.raises(ValueError, match="CUDA is not available"):
        MaskedPPCA(device="cuda").fit(np.random.RandomState(0).randn(20, 3))


def test_gpu_pickle_loads_on_cpu_with_warning(ppca_data, monkeypatch):
    ppca = MaskedPPCA(max_epochs=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ppca.fit(ppca_data[:50])
    state = ppca.__getstate__()
    state["device_"] = torch.device("cuda")  # as if fitted on a GPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    restored = MaskedPPCA.__new__(MaskedPPCA)
    with pytest.warns(UserWarning, match="loaded on the CPU"):
        restored.__setstate__(state)
    assert restored.device_.type == "cpu"
    np.testing.assert_allclose(restored.transform(ppca_data[:3]), ppca.transform(ppca_data[:3]))


def test_mpt_curve_rows_sum_to_score(ppca_data):
    ppca = MaskedPPCA(max_epochs=10, random_state=0, score_masks=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ppca.fit(ppca_data[:100])
    rates, curve = ppca.mpt_curve(ppca_data[:7])
    np.testing.assert_allclose(rates, np.arange(1, 11) / 10)
    assert curve.shape == (7, 10)
    np.testing.assert_allclose(curve.sum(1), ppca.score_samples(ppca_data[:7]), rtol=1e-12)


@requires_cuda
def test_cuda_fit_matches_cpu(ppca_data):
    cpu = MaskedPPCA(device="cpu", random_state=0, max_epochs=20).fit(ppca_data[:300])
    gpu = MaskedPPCA(device="cuda", random_state=0, max_epochs=20).fit(ppca_data[:300])
    np.testing.assert_allclose(gpu.components_, cpu.components_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gpu.score_samples(ppca_data[:50]), cpu.score_samples(ppca_data[:50]), rtol=1e-8)
    restored = pickle.loads(pickle.dumps(gpu))
    assert restored.device_.type == "cuda"


@given(params=ppca_parameters(max_features=6), seed=st.integers(0, 2**16))
def test_rank_one_chain_matches_generic_chain(params, seed):
    components, mean, noise_variance = params
    module = make_ppca_module(components, mean, noise_variance)
    X = torch.as_tensor(np.random.RandomState(seed).randn(4, len(mean)) + mean)
    orderings = random_orderings(3, len(mean), random_state=seed)
    with torch.no_grad():
        fast = module.chain_log_prob(X, orderings)
        per_token = module.masked_log_prob(X, nested_masks(orderings).reshape(-1, len(mean)))
        lml = module.log_marginal(X)
    generic = per_token.reshape(4, 3, len(mean), len(mean)).gather(
        -1, orderings.view(1, 3, -1, 1).expand(4, -1, -1, 1)
    ).squeeze(-1)
    np.testing.assert_allclose(fast.numpy(), generic.numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(fast.sum(-1).numpy(), lml.numpy()[:, None].repeat(3, 1), rtol=1e-9)


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode])
def test_fit_inside_no_grad_block(ppca_data, context):
    with context(), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ppca = MaskedPPCA(max_epochs=3, monitor="lml", solver="minibatch", random_state=0).fit(ppca_data[:100])
        scores = ppca.score_samples(ppca_data[:5])
    assert ppca.history_[-1]["lml"] > ppca.history_[0]["lml"]
    np.testing.assert_allclose(scores, ppca.score_samples(ppca_data[:5]))


def test_conditional_log_prob_for_power_users(ppca_data):
    ppca = MaskedPPCA(max_epochs=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ppca.fit(ppca_data[:100])
    X = ppca_data[:4]
    masks = np.zeros((2, 10), dtype=bool)
    masks[0, :3] = masks[1, 5] = True
    out = ppca.conditional_log_prob(X, masks)
    dense = _dense_conditionals(ppca.components_, ppca.mean_, ppca.noise_variance_, X, masks)
    np.testing.assert_allclose(out, dense, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(ppca.conditional_log_prob(X, np.broadcast_to(masks.astype(int), (4, 2, 10))), out)
    with pytest.raises(ValueError, match=r"shape \(n_masks, 10\)"):
        ppca.conditional_log_prob(X, masks[:, :4])
    with pytest.raises(ValueError, match="boolean"):
        ppca.conditional_log_prob(X, masks * 0.5)
    with pytest.raises(ValueError, match="X has 4 samples"):
        ppca.conditional_log_prob(X, np.ones((3, 2, 10), dtype=bool))


def test_shared_mask_fast_path_in_any_chunks_matches_per_sample_path(monkeypatch):
    # The shared-mask path (one matrix product over all masks, chunked as the module asks)
    # must give the per-sample path's sums whatever the chunk, and the closed-form LML.
    rng = np.random.RandomState(0)
    components, mean = rng.randn(3, 9), rng.randn(9)
    module = make_ppca_module(components, mean, 0.7)
    X = torch.as_tensor(rng.randn(4, 9) * 2 + mean)
    masks = all_masks(9)
    with torch.no_grad():
        shared = module.masked_log_prob_sum(X, masks)
        per_sample = module.masked_log_prob_sum(X, masks.expand(4, -1, -1))
        whole = objectives.cumulative_score(module, X, score_method="exhaustive")
        monkeypatch.setattr(type(module), "shared_mask_chunk", lambda self, n_samples: 7)
        chunked = objectives.cumulative_score(module, X, score_method="exhaustive")
        lml = module.log_marginal(X)
    np.testing.assert_allclose(shared.numpy(), per_sample.numpy(), rtol=1e-10)
    np.testing.assert_allclose(chunked.numpy(), whole.numpy(), rtol=1e-12)
    np.testing.assert_allclose(whole.numpy(), lml.numpy(), rtol=1e-9)


@pytest.mark.parametrize("n_samples", [2, 64])
def test_weighted_sum_over_masks_matches_dense_conditioning(n_samples):
    # With 2 samples the module contracts per-mask sums; with 64 it adds all masks into one
    # D x D quadratic form first (cheaper when n (2K + 1) > K D). Both, in one chunk of
    # masks or many, must give the dense conditionals' weighted sums.
    rng = np.random.RandomState(1)
    components, mean = rng.randn(3, 9), rng.randn(9)
    module = make_ppca_module(components, mean, 0.7)
    X = rng.randn(n_samples, 9) * 2 + mean
    masks = all_masks(9)
    weights = torch.as_tensor(rng.rand(len(masks)))
    dense = _dense_conditionals(components, mean, 0.7, X, masks.numpy()).sum(-1) @ weights.numpy()
    for numbers in (2**22, 100):
        # The form's chunks hold a sixteenth of the working memory: `numbers` float64s.
        with torch.no_grad(), working_memory(numbers * 16 * 8 / 2**20):
            total = module.weighted_log_prob_sum(torch.as_tensor(X), masks, weights)
        np.testing.assert_allclose(total.numpy(), dense, rtol=1e-9)


@pytest.mark.parametrize("method", ["exhaustive", "sweep", "nested"])
def test_cumulative_score_is_the_sum_of_the_curve(method):
    # cumulative_score weighs all masks in one quadratic form; mpt_curve keeps the sizes
    # apart. Same masks, same numbers.
    rng = np.random.RandomState(2)
    module = make_ppca_module(rng.randn(2, 8), rng.randn(8), 0.5)
    X = torch.as_tensor(rng.randn(50, 8))
    with torch.no_grad():
        score = objectives.cumulative_score(module, X, score_method=method, score_masks=3, random_state=0)
        curve = objectives.mpt_curve(module, X, score_method=method, score_masks=3, random_state=0)
        lml = module.log_marginal(X)
    np.testing.assert_allclose(score.numpy(), curve.sum(-1).numpy(), rtol=1e-10)
    if method == "exhaustive":
        np.testing.assert_allclose(score.numpy(), lml.numpy(), rtol=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_a_constant_feature_with_holes_is_fitted_with_the_searchs_settings(seed):
    # SQUAREM's jump had taken a posterior's precision past positive definiteness in floating point (the
    # constant feature's noise at the floor): torch's LinAlgError, in 4 of these 5 seeds, from the search's refit
    from skmpt.estimators.selection import default_candidates

    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 2)) @ (2 * rng.normal(size=(2, 4))) + 0.3 * rng.normal(size=(200, 4))
    X[rng.random(X.shape) < 0.2] = np.nan
    X = np.c_[X, np.full(200, 3.0)]
    model = default_candidates(5, n_samples=200, random_state=seed)["ppca"][-1].fit(X)
    assert np.isfinite(model.score(X)) and np.allclose(model.impute(X)[:, -1], 3.0)
