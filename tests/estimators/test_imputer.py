"""Incomplete data: impute, sample_missing and MaskedImputer."""

import pickle

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from scipy.stats import multivariate_normal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.impute import SimpleImputer
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

from skmpt import (
    MaskedFactorAnalysis,
    MaskedGaussianMixture,
    MaskedImputer,
    MaskedLinearVAE,
    MaskedModelSearch,
    MaskedPPCA,
    MaskedVAE,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _data(n=120, d=5, k=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, k)) @ rng.normal(size=(k, d)) + 0.3 * rng.normal(size=(n, d)) + 2.0
    X_missing = X.copy()
    X_missing[rng.random(X.shape) < 0.25] = np.nan
    X_missing[0] = np.nan  # a row with nothing observed
    X_missing[1] = X[1]  # a complete row
    return X, X_missing


def _conditional_mean(mean, covariance, x):
    """``E[x_m | x_o]`` of one Gaussian, by the textbook formula."""
    o, m = ~np.isnan(x), np.isnan(x)
    out = x.copy()
    out[m] = mean[m] + covariance[np.ix_(m, o)] @ np.linalg.solve(covariance[np.ix_(o, o)], x[o] - mean[o])
    return out


@pytest.mark.parametrize("make", [
    lambda: MaskedPPCA(2, max_epochs=3, random_state=0),
    lambda: MaskedFactorAnalysis(2, max_epochs=3, random_state=0),
])
def test_linear_gaussian_impute_is_the_conditional_mean(make):
    X, X_missing = _data()
    estimator = make().fit(X_missing)
    imputed = estimator.impute(X_missing)
    covariance = estimator.get_covariance()
    expected = np.array([_conditional_mean(estimator.mean_, covariance, x) for x in X_missing])
    np.testing.assert_allclose(imputed, expected, rtol=1e-9, atol=1e-9)
    observed = ~np.isnan(X_missing)
    assert np.array_equal(imputed[observed], X_missing[observed])  # bit for bit
    np.testing.assert_allclose(imputed[0], estimator.mean_, rtol=1e-12)  # nothing observed: the mean


def _full_covariances(gmm):
    """scikit-learn's ``covariances_`` of any type as one (D, D) matrix per component."""
    eye = np.eye(gmm.means_.shape[1])
    return {
        "full": lambda c: c,
        "tied": lambda c: np.repeat(c[None], len(gmm.weights_), 0),
        "diag": lambda c: np.stack([np.diag(v) for v in c]),
        "spherical": lambda c: np.stack([v * eye for v in c]),
    }[gmm.covariance_type](gmm.covariances_)


@pytest.mark.parametrize("covariance_type", ["full", "diag", "tied", "spherical"])
def test_mixture_impute_is_the_responsibility_weighted_conditional_mean(covariance_type):
    _, X_missing = _data()
    gmm = MaskedGaussianMixture(2, covariance_type=covariance_type, max_epochs=3, random_state=0).fit(X_missing)
    covariances = _full_covariances(gmm)
    expected = []
    for x in X_missing:
        o = ~np.isnan(x)
        if not o.any():
            expected.append(gmm.weights_ @ gmm.means_)
            continue
        logs = [np.log(w) + multivariate_normal(m[o], c[np.ix_(o, o)]).logpdf(x[o])
                for w, m, c in zip(gmm.weights_, gmm.means_, covariances, strict=True)]
        weights = np.exp(np.array(logs) - logsumexp(logs))
        expected.append(sum(w * _conditional_mean(m, c, x) for w, m, c in zip(weights, gmm.means_, covariances,
                                                                                strict=True)))
    np.testing.assert_allclose(gmm.impute(X_missing), np.array(expected), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("make", [
    lambda: MaskedPPCA(2, max_epochs=3, random_state=0),
    lambda: MaskedGaussianMixture(2, max_epochs=3, random_state=0),
    lambda: MaskedLinearVAE(1, likelihood="gaussian", n_quadrature=6, max_epochs=2, random_state=0),
    lambda: MaskedVAE(2, hidden_layer_sizes=(6,), max_epochs=2, score_masks=2, random_state=0),
], ids=["ppca", "gmm", "linear_vae", "vae"])
def test_draws_average_to_the_imputation_and_keep_observed_entries(make):
    _, X_missing = _data()
    estimator = make().fit(X_missing)
    draws = estimator.sample_missing(X_missing, 400, random_state=0)
    assert draws.shape == (400, *X_missing.shape)
    observed = ~np.isnan(X_missing)
    assert (draws[:, observed] == X_missing[observed]).all()
    assert np.isfinite(draws).all()
    imputed = estimator.impute(X_missing)
    spread = draws.std(0)[~observed]
    # The draws' mean is the conditional mean within Monte Carlo error (VAE: both are estimates).
    tolerance = 5 * spread / np.sqrt(400) + (0.1 if isinstance(estimator, MaskedVAE) else 1e-9)
    assert (np.abs(draws.mean(0)[~observed] - imputed[~observed]) <= tolerance).mean() > 0.97
    again = estimator.sample_missing(X_missing, 400, random_state=0)
    assert np.array_equal(draws, again)
    with pytest.raises(ValueError, match="n_draws must be a positive integer"):
        estimator.sample_missing(X_missing, 0)


def test_linear_vae_impute_matches_the_grid():
    _, X_missing = _data(d=4)
    vae = MaskedLinearVAE(1, likelihood="gaussian", n_quadrature=8, max_epochs=2, random_state=0,
                          device="cpu").fit(X_missing)  # its module_ meets CPU tensors
    module = vae.module_
    with torch.no_grad():
        nodes, log_weights = module.nodes.numpy(), module.log_weights.numpy()
        activations = (module.nodes @ module.components + module.intercept).numpy()
        sd = float(module.noise_variance) ** 0.5
    expected = []
    for x in X_missing:
        o = ~np.isnan(x)
        log_post = log_weights + (-0.5 * ((x[o] - activations[:, o]) / sd) ** 2).sum(1)
        post = np.exp(log_post - logsumexp(log_post))
        expected.append(np.where(o, x, post @ activations + vae.offset_))
    assert nodes.shape[0] == 8
    np.testing.assert_allclose(vae.impute(X_missing), np.array(expected), rtol=1e-9, atol=1e-9)


def test_vae_imputes_by_importance_sampling_and_says_so():
    assert "MIWAE" in MaskedVAE.impute.__doc__ or "importance" in MaskedVAE.impute.__doc__
    from skmpt.models import VAEModule

    assert "Mattei and Frellsen" in VAEModule.impute.__doc__


def test_masked_imputer_api_pipeline_and_persistence():
    X, X_missing = _data()
    imputer = MaskedImputer(MaskedPPCA(1, max_epochs=5, random_state=0), add_indicator=True)
    out = imputer.fit_transform(X_missing)
    n_indicators = int(np.isnan(X_missing).any(0).sum())
    assert out.shape == (len(X), 5 + n_indicators)
    observed = ~np.isnan(X_missing)
    assert np.array_equal(out[:, :5][observed], X_missing[observed])
    assert np.array_equal(out[:, 5:], np.isnan(X_missing)[:, np.isnan(X_missing).any(0)])
    names = imputer.get_feature_names_out()
    assert list(names[:5]) == [f"x{i}" for i in range(5)] and names[5].startswith("missingindicator_")
    pandas = pytest.importorskip("pandas")
    frame = imputer.set_output(transform="pandas").fit_transform(pandas.DataFrame(X_missing, columns=list("abcde")))
    assert list(frame.columns[:5]) == list("abcde")
    restored = pickle.loads(pickle.dumps(imputer))
    assert clone(imputer).get_params()["estimator"].n_components == 1
    np.testing.assert_array_equal(restored.transform(pandas.DataFrame(X_missing, columns=list("abcde"))), frame)
    pipeline = make_pipeline(MaskedImputer(MaskedPPCA(1, max_epochs=5, random_state=0)), StandardScaler())
    assert np.isfinite(pipeline.fit_transform(X_missing)).all()


def test_polars_output_is_scikit_learns():
    # transform builds its containers itself (to keep a table's columns as they were): polars as
    # scikit-learn's wrapper gives it, the output's names and values.
    polars = pytest.importorskip("polars")
    _, X_missing = _data()
    imputer = MaskedImputer(MaskedPPCA(1, max_epochs=5, random_state=0), add_indicator=True)
    default = imputer.fit_transform(X_missing)
    frame = imputer.set_output(transform="polars").transform(X_missing)
    assert isinstance(frame, polars.DataFrame) and frame.columns == list(imputer.get_feature_names_out())
    np.testing.assert_array_equal(frame.to_numpy(), default)


def test_grid_search_chooses_n_components_by_held_out_likelihood():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2)) @ rng.normal(size=(2, 6)) * 2 + 0.3 * rng.normal(size=(200, 6))
    X[rng.random(X.shape) < 0.2] = np.nan
    search = GridSearchCV(
        MaskedImputer(MaskedPPCA(max_epochs=25, random_state=0)), {"estimator__n_components": [1, 2]}, cv=2
    ).fit(X)
    assert search.best_params_ == {"estimator__n_components": 2}
    scores = search.cv_results_["mean_test_score"]
    assert scores[1] > scores[0]


@pytest.mark.parametrize("sample_posterior", [False, True])
def test_masked_imputer_keeps_observed_entries_of_a_feature_empty_at_fit(sample_posterior):
    """A feature empty at fit (``keep_empty_features=True``): its observed entries at transform are
    returned unchanged and its missing ones are 0, as ``SimpleImputer`` does; every other observed
    entry is unchanged too."""
    _, X_missing = _data()
    train = X_missing.copy()
    train[:, 2] = np.nan
    imputer = MaskedImputer(
        MaskedPPCA(1, max_epochs=2), keep_empty_features=True, sample_posterior=sample_posterior, random_state=0,
    ).fit(train)
    rng = np.random.default_rng(1)
    for _ in range(5):
        X = rng.normal(size=(30, 5))
        X[rng.random(X.shape) < 0.4] = np.nan
        out = imputer.transform(X)
        observed = ~np.isnan(X)
        np.testing.assert_array_equal(out[observed], X[observed])
        assert not np.isnan(out).any()
        reference = SimpleImputer(keep_empty_features=True).fit(train).transform(X)
        np.testing.assert_array_equal(out[:, 2], reference[:, 2])


def test_masked_imputer_errors_and_accepted_cases():
    X, X_missing = _data()
    with pytest.raises(ValueError, match=r"Feature\(s\) \[2\] are missing in every training sample"):
        empty = X_missing.copy()
        empty[:, 2] = np.nan
        MaskedImputer(MaskedPPCA(1, max_epochs=2)).fit(empty)
    kept = MaskedImputer(MaskedPPCA(1, max_epochs=2), keep_empty_features=True).fit(empty)
    out = kept.transform(empty)
    assert out.shape == empty.shape and (out[:, 2] == 0).all()
    with pytest.raises(ValueError, match=r"infinity in feature\(s\) \[3\]"):
        bad = X_missing.copy()
        bad[3, 3] = np.inf
        MaskedImputer(MaskedPPCA(1, max_epochs=2)).fit(bad)
    with pytest.raises(ValueError, match="also a value of binary data"):
        MaskedImputer(MaskedLinearVAE(1, n_quadrature=4, max_epochs=1), missing_values=0).fit((X > 2).astype(float))
    with pytest.raises(ValueError, match=r"NaN in feature\(s\) \[.*missing_values=-1"):
        MaskedImputer(MaskedPPCA(1, max_epochs=2), missing_values=-1).fit(X_missing)
    marked = np.where(np.isnan(X_missing), -1.0, X_missing)
    out = MaskedImputer(MaskedPPCA(1, max_epochs=2, random_state=0), missing_values=-1).fit(marked).transform(marked)
    reference = MaskedImputer(MaskedPPCA(1, max_epochs=2, random_state=0)).fit(X_missing).transform(X_missing)
    np.testing.assert_array_equal(out, reference)
    draws = MaskedImputer(MaskedPPCA(1, max_epochs=2), sample_posterior=True, random_state=0).fit(X_missing)
    first, second = draws.transform(X_missing), draws.transform(X_missing)
    assert not np.array_equal(first, second)  # a fresh draw per call, reproducible from random_state
    np.testing.assert_array_equal(first[~np.isnan(X_missing)], X_missing[~np.isnan(X_missing)])


def test_masked_imputer_passes_check_estimator():
    results = check_estimator(MaskedImputer(MaskedPPCA(1, max_epochs=2)), on_fail=None)
    failed = [(r["check_name"], repr(r["exception"])) for r in results if r["status"] == "failed"]
    assert not failed, failed


def test_default_imputer_chooses_its_model_by_held_out_likelihood():
    _, X_missing = _data(n=40, d=4)
    imputer = MaskedImputer(random_state=0)
    assert imputer.estimator is None
    out = imputer.fit(X_missing).transform(X_missing)
    results = imputer.search_.cv_results_
    assert imputer.estimator_ is imputer.search_.best_estimator_ and not np.isnan(out).any()
    assert set(results["family"]) <= {"full", "fa", "ppca"} and results["mean_test_score"].max() == pytest.approx(
        imputer.search_.best_score_)
    again = MaskedImputer(random_state=0).fit(X_missing)
    np.testing.assert_array_equal(again.search_.cv_results_["mean_test_score"], results["mean_test_score"])
    np.testing.assert_array_equal(again.transform(X_missing), out)


def test_imputer_takes_a_search_as_its_budget():
    _, X_missing = _data(n=40, d=4)
    search = MaskedModelSearch({"ppca": [MaskedPPCA(k, max_epochs=3, random_state=0) for k in (1, 2)]}, max_fits=1,
                               random_state=0)
    imputer = MaskedImputer(search).fit(X_missing)
    assert len(imputer.search_.cv_results_["family"]) == 1 and imputer.estimator_.n_components == 1
    assert MaskedImputer(MaskedPPCA(1, max_epochs=2)).fit(X_missing).search_ is None


def test_wrong_width_at_transform_is_refused():
    _, X_missing = _data(n=40, d=4)
    imputer = MaskedImputer(MaskedPPCA(1, max_epochs=2)).fit(X_missing)
    with pytest.raises(ValueError, match="features"):
        imputer.transform(X_missing[:, :3])


def test_default_imputer_takes_nested_parameters():
    # The GridSearchCV over estimator__n_components, without naming the estimator.
    imputer = MaskedImputer().set_params(estimator__n_components=2, estimator__max_epochs=3)
    assert isinstance(imputer.estimator, MaskedPPCA)
    assert imputer.estimator.n_components == 2 and imputer.estimator.max_epochs == 3
    assert MaskedImputer().get_params()["estimator"] is None


def _self_masked(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) @ np.array([[1.0, 0.7, 0.4], [0.0, 0.7, 0.4], [0.0, 0.0, 0.8]])
    X_missing = np.where(rng.random(X.shape) < 1 / (1 + np.exp(-(3 * X - 1))), np.nan, X)
    return X, X_missing


def test_self_masking_imputes_self_masked_holes_better_than_a_mar_model():
    X, X_missing = _self_masked()
    hidden = np.isnan(X_missing)
    errors = {}
    for missingness in ("mar", "self-masking"):
        imputer = MaskedImputer(missingness=missingness, random_state=0).fit(X_missing)
        imputed = imputer.transform(X_missing)
        assert np.array_equal(imputed[~hidden], X_missing[~hidden])
        errors[missingness] = np.sqrt(np.mean((imputed[hidden] - X[hidden]) ** 2))
    assert errors["self-masking"] < 0.8 * errors["mar"]
    assert imputer.search_ is None and imputer.estimator_.converged_
    assert np.isfinite(imputer.score(X_missing))


def test_self_masking_refuses_an_estimator_or_posterior_draws_before_fitting():
    _, X_missing = _self_masked(n=50)
    with pytest.raises(ValueError, match="estimator=None and sample_posterior=False"):
        MaskedImputer(MaskedPPCA(1), missingness="self-masking").fit(X_missing)
    with pytest.raises(ValueError, match="estimator=None and sample_posterior=False"):
        MaskedImputer(missingness="self-masking", sample_posterior=True).fit(X_missing)
    with pytest.raises(ValueError, match="missingness"):
        MaskedImputer(missingness="mnar").fit(X_missing)


def test_a_marker_of_binary_data_is_refused_before_the_search(monkeypatch):
    # with estimator=None the search chooses models of binary data, and the marker 0 had been refused after it
    binary = (np.random.RandomState(0).randn(60, 4) > 0).astype(float)
    monkeypatch.setattr(MaskedModelSearch, "fit", lambda *args: pytest.fail("searched"))
    with pytest.raises(ValueError, match="missing_values=0 is also a value of binary data"):
        MaskedImputer(missing_values=0).fit(binary)


def test_self_masking_on_one_feature_on_huge_values_and_out_of_iterations():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 1))
    x_missing = np.where(rng.random(x.shape) < 1 / (1 + np.exp(-(3 * x - 1))), np.nan, x)
    hidden = np.isnan(x_missing)
    # one feature (an income column) had failed in NumPy's cov of one column, a 0-d array
    imputed = MaskedImputer(missingness="self-masking").fit_transform(x_missing)
    assert imputed[hidden].mean() > np.nanmean(x_missing) + 0.5  # the holes are large values
    # the trees of fallback="trees", which it never uses, had refused values beyond float32's range
    X, X_missing = _self_masked(n=300)
    huge = MaskedImputer(missingness="self-masking").fit_transform(1e39 * X_missing)
    np.testing.assert_allclose(huge, 1e39 * MaskedImputer(missingness="self-masking").fit_transform(X_missing))
    # a fit out of its L-BFGS iterations had said nothing
    duplicated = np.column_stack([X_missing, X_missing[:, :1]])
    with pytest.warns(ConvergenceWarning, match=r"self-masking model's fit stopped after \d+ L-BFGS iterations"):
        imputer = MaskedImputer(missingness="self-masking").fit(duplicated)
    assert not imputer.estimator_.converged_


def test_self_masking_refuses_a_table_with_categorical_columns_naming_them():
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame({"size": [1.0, np.nan, 3.0, 4.0, 5.0, 2.0], "colour": pd.Categorical(list("rgbrgb"))})
    with pytest.raises(ValueError, match=r"self-masking.*\['colour'\]"):
        MaskedImputer(missingness="self-masking").fit(X)


@pytest.mark.parametrize("table", [False, True])
def test_a_feature_of_one_observed_value_has_it_in_every_hole_exactly(table):
    # The search's mixture averaged its components' means, and the fallback's blend its imputations with the
    # model's: a column of 7.7 came back 7.700000000000001 in its holes.
    rng = np.random.RandomState(0)
    group = rng.randint(0, 3, 150)
    X = np.c_[group * 2.0 + rng.randn(150), np.full(150, 7.7), group + 0.3 * rng.randn(150), rng.randn(150)]
    X[rng.rand(*X.shape) < 0.2] = np.nan
    if table:
        pd = pytest.importorskip("pandas")
        X = pd.DataFrame(X, columns=list("abcd")).assign(k=pd.Categorical(np.array(list("xyz"))[group]))
    filled = np.asarray(MaskedImputer(random_state=0).fit_transform(X))
    holes = np.isnan(np.asarray(X)[:, 1].astype(float))
    assert holes.any() and (filled[holes, 1] == 7.7).all()
