"""MaskedImputer's fallback: chained extra-trees compared with the chosen model on the search's held-out rows."""

import numpy as np
import pytest
from sklearn.experimental import enable_iterative_imputer  # noqa: F401
from sklearn.impute import IterativeImputer, KNNImputer

from skmpt import MaskedImputer, MaskedModelSearch, MaskedPPCA

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _curve(n=300, seed=0, rate=0.2):
    """A one-dimensional curve in five columns (three noisy copies of x, sin 4x, cos 4x): no Gaussian
    predicts sin 4x from x, trees do."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    X = np.c_[x, x, x, np.sin(4 * x), np.cos(4 * x)] + 0.05 * rng.normal(size=(n, 5))
    return X, np.where(rng.random(X.shape) < rate, np.nan, X)


def _plane(n=300, seed=0, rate=0.2):
    """A rank-2 Gaussian table in six columns: the Gaussian models are right."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2)) @ rng.normal(size=(2, 6)) + 0.1 * rng.normal(size=(n, 6))
    return X, np.where(rng.random(X.shape) < rate, np.nan, X)


def _rmse(imputed, X, X_missing):
    holes = np.isnan(X_missing)
    return float(np.sqrt(np.mean((imputed[holes] - X[holes]) ** 2)))


def test_trees_are_chosen_where_they_clearly_win_and_impute_new_rows():
    X, X_missing = _curve()
    imputer = MaskedImputer(random_state=0).fit(X_missing)
    comparison = imputer.fallback_comparison_
    assert isinstance(imputer.fallback_, IterativeImputer) and comparison["chosen"]
    assert comparison["fallback_error"] < comparison["model_error"] - 2 * comparison["std_error"]
    imputed = imputer.transform(X_missing)
    observed = ~np.isnan(X_missing)
    assert np.array_equal(imputed[observed], X_missing[observed])  # bit for bit
    assert _rmse(imputed, X, X_missing) < 0.5 * _rmse(imputer.estimator_.impute(X_missing), X, X_missing)
    # New rows: the fitted trees fill their holes; estimator_ stays the latent model.
    X_new, X_new_missing = _curve(100, seed=1)
    new = imputer.transform(X_new_missing)
    holes = np.isnan(X_new_missing)
    np.testing.assert_array_equal(new[holes], imputer.fallback_.transform(X_new_missing)[holes])
    assert np.array_equal(new[~holes], X_new_missing[~holes])
    assert imputer.score(X_new_missing) == imputer.estimator_.score(X_new_missing)


def test_the_latent_model_is_kept_on_a_low_rank_gaussian_table():
    X, X_missing = _plane()
    imputer = MaskedImputer(random_state=0).fit(X_missing)
    comparison = imputer.fallback_comparison_
    assert imputer.fallback_ is None and not comparison["chosen"]
    assert comparison["model_error"] < comparison["fallback_error"]
    # Equal to rounding (a copy's BLAS path differs from the original array's by 1e-14).
    np.testing.assert_allclose(imputer.transform(X_missing), imputer.estimator_.impute(X_missing), rtol=1e-10)


@pytest.mark.parametrize("table", [_curve, _plane])
def test_switched_off_the_search_and_its_model_are_unchanged(table):
    _, X_missing = table()
    off = MaskedImputer(random_state=0, fallback=None).fit(X_missing)
    on = MaskedImputer(random_state=0).fit(X_missing)
    assert off.fallback_ is None and off.fallback_comparison_ is None
    assert off.search_.get_params()["fallback"] is None
    # The comparison runs after the refit and draws nothing the search uses: the same choice and fit.
    assert on.search_.best_index_ == off.search_.best_index_
    np.testing.assert_allclose(on.estimator_.impute(X_missing), off.transform(X_missing), rtol=1e-10)


def test_the_random_state_fixes_the_trees():
    _, X_missing = _curve()
    first, second = (MaskedImputer(random_state=3).fit(X_missing) for _ in range(2))
    assert first.fallback_ is not None
    np.testing.assert_array_equal(first.transform(X_missing), second.transform(X_missing))
    assert first.fallback_comparison_ == second.fallback_comparison_


def test_an_imputer_given_as_fallback_is_compared_as_given():
    _, X_missing = _plane()
    imputer = MaskedImputer(random_state=0, fallback=KNNImputer()).fit(X_missing)
    assert isinstance(imputer.search_.get_params()["fallback"], KNNImputer)
    assert imputer.fallback_ is None and imputer.fallback_comparison_["fallback_error"] > 0


@pytest.mark.parametrize("fallback", ["tree", 3, object()])
def test_a_bad_fallback_is_refused_by_name_before_fitting(fallback, monkeypatch):
    monkeypatch.setattr(MaskedModelSearch, "fit", lambda *args: pytest.fail("fitted"))
    with pytest.raises(ValueError, match="'fallback' parameter of MaskedImputer"):
        MaskedImputer(fallback=fallback).fit(_plane(20)[1])


def test_the_search_refuses_a_fallback_that_is_not_an_imputer():
    with pytest.raises(ValueError, match="fallback must be None or an imputer"):
        MaskedModelSearch([MaskedPPCA(1)], fallback="trees").fit(_plane(20)[1])
    with pytest.raises(ValueError, match="returned 1 columns for 6: it must impute every column"):
        MaskedModelSearch([MaskedPPCA(1, max_epochs=2)], fallback=MaskedPPCA(1)).fit(_plane(20)[1])


def test_draws_self_masking_and_a_given_model_never_use_the_fallback():
    _, X_missing = _curve(100)
    for imputer in (MaskedImputer(sample_posterior=True, random_state=0),
                    MaskedImputer(missingness="self-masking", random_state=0),
                    MaskedImputer(MaskedPPCA(2, random_state=0), random_state=0)):
        imputer.fit(X_missing)
        assert imputer.fallback_ is None and imputer.fallback_comparison_ is None
        if imputer.search_ is not None:
            assert imputer.search_.get_params()["fallback"] is None


def _checkerboard(n=400, seed=0, rate=0.2, predictable=True):
    """A DataFrame of two uniform numbers (each with a noisy copy) and a categorical ``side``: the
    colour of the 4 x 4 checkerboard square they fall in (trees tell it from the numbers, a mixture
    of few Gaussian components hardly) or a coin toss; ``rate`` of every cell missing."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(seed)
    xy = rng.uniform(-1, 1, (n, 2))
    X = np.c_[xy, xy + 0.05 * rng.normal(size=(n, 2))]
    up = np.sin(np.pi * 2 * xy[:, 0]) * np.sin(np.pi * 2 * xy[:, 1]) > 0 if predictable else rng.random(n) < 0.5
    side = np.where(up, "up", "down").astype(object)
    holed = side.copy()
    holed[rng.random(n) < rate] = None
    columns = ["x", "y", "x2", "y2"]
    X_missing = np.where(rng.random(X.shape) < rate, np.nan, X)
    return (pd.DataFrame(X, columns=columns).assign(side=side),
            pd.DataFrame(X_missing, columns=columns).assign(side=pd.Categorical(holed, categories=["down", "up"])))


def test_a_table_with_categorical_columns_compares_classifier_trees_and_keeps_the_table():
    truth, frame = _checkerboard()
    imputer = MaskedImputer(random_state=0).set_output(transform="pandas").fit(frame)
    assert imputer.search_.get_params()["fallback"].get_params()["categorical_features"] == [4]
    assert imputer.fallback_comparison_["chosen"] and imputer.fallback_ is not None
    out = imputer.transform(frame)
    assert list(out.dtypes) == list(frame.dtypes) and list(out.columns) == list(frame.columns)
    assert not out.isna().any().any() and set(out["side"]) == {"up", "down"}
    observed = frame.notna().to_numpy()
    assert (out.to_numpy()[observed] == frame.to_numpy()[observed]).all()
    holes = frame["side"].isna().to_numpy()
    assert (out["side"].to_numpy()[holes] == truth["side"].to_numpy()[holes]).mean() > 0.75  # a coin: 0.5
    # The numbers' holes are the model's (the trees compete for the categories only).
    numbers = imputer.estimator_.impute(imputer.table_.encode(frame))[:, :4]
    expected = np.where(observed[:, :4], frame.iloc[:, :4].to_numpy(dtype=float), numbers)
    np.testing.assert_allclose(out.iloc[:, :4].to_numpy(dtype=float), expected, rtol=1e-10)
    # New rows are imputed by the fitted trees, as well as the training rows.
    new_truth, new = _checkerboard(seed=1)
    new_out = imputer.transform(new)
    holes = new["side"].isna().to_numpy()
    assert (new_out["side"].to_numpy()[holes] == new_truth["side"].to_numpy()[holes]).mean() > 0.7
    # An imputer given as fallback does not know the categories: never used on such a table.
    given = MaskedImputer(random_state=0, fallback=KNNImputer()).fit(frame)
    assert given.fallback_ is None and given.fallback_comparison_ is None


def test_a_table_of_numbers_and_counts_never_uses_the_fallback():
    pd = pytest.importorskip("pandas")
    X, X_missing = _curve(150)
    frame = pd.DataFrame(X_missing, columns=list("abcde")).assign(visits=np.round(np.exp(X[:, 0])))
    imputer = MaskedImputer(random_state=0, column_types={"visits": "count"}).fit(frame)
    assert imputer.fallback_ is None and imputer.fallback_comparison_ is None


def test_an_unpredictable_category_beside_a_gaussian_table_keeps_the_model():
    _, frame = _checkerboard(seed=1, predictable=False)
    imputer = MaskedImputer(random_state=0).fit(frame)
    assert imputer.fallback_comparison_ is not None and imputer.fallback_ is None


def test_mixed_trees_classify_categories_and_replay_on_new_rows():
    from skmpt.estimators.imputer import _MixedTrees

    rng = np.random.default_rng(0)
    codes = rng.integers(0, 3, 400).astype(float)
    X = np.c_[codes + 0.1 * rng.normal(size=400), rng.normal(size=400), codes]  # the number says the category
    X_missing = np.where(rng.random(X.shape) < 0.2, np.nan, X)
    train, new = X_missing[:300], X_missing[300:]
    trees = _MixedTrees([2], random_state=0)
    imputed = trees.fit_transform(train)
    holes = np.isnan(train)
    told = holes[:, 2] & ~holes[:, 0]  # category missing, the number that tells it observed
    assert set(imputed[holes[:, 2], 2]) <= {0.0, 1.0, 2.0} and (imputed[told, 2] == codes[:300][told]).mean() > 0.95
    np.testing.assert_array_equal(imputed[~holes], train[~holes])
    np.testing.assert_array_equal(trees.transform(train), imputed)
    np.testing.assert_array_equal(_MixedTrees([2], random_state=0).fit_transform(train), imputed)
    assert not np.array_equal(_MixedTrees([2], random_state=1).fit_transform(train), imputed)
    out, holes = trees.transform(new), np.isnan(new)
    np.testing.assert_array_equal(out[~holes], new[~holes])
    told = holes[:, 2] & ~holes[:, 0]
    assert set(out[holes[:, 2], 2]) <= {0.0, 1.0, 2.0} and (out[told, 2] == codes[300:][told]).mean() > 0.95


def test_dask_input_chooses_on_the_sample_and_imputes_each_chunk():
    da = pytest.importorskip("dask.array")
    _, X_missing = _curve()
    imputer = MaskedImputer(random_state=0).fit(da.from_array(X_missing, chunks=(100, 5)))
    assert imputer.fallback_ is not None
    out = imputer.transform(da.from_array(X_missing, chunks=(100, 5))).compute()
    np.testing.assert_array_equal(out, imputer.transform(X_missing))
