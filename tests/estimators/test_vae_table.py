"""MaskedVAE on tables of numbers, categories and counts (categorical_features, count_features)."""

import copy
import functools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedVAE


def mixed_table(n=200, seed=0):
    """A number and a larger one, a category of three values (2), a binary column (4), a count (3)."""
    rng = np.random.RandomState(seed)
    group = rng.randint(0, 3, n)
    return np.column_stack([group * 3 + rng.randn(n), 100 * (group + rng.randn(n)), group,
                            rng.poisson(1 + 2 * group), rng.rand(n) < 0.2 + 0.3 * group]).astype(float)


def fit(X, **params):
    settings = {"n_components": 2, "hidden_layer_sizes": (16,), "categorical_features": [2, 4],
                "count_features": [3], "max_epochs": 20, "random_state": 0, **params}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return MaskedVAE(**settings).fit(X)


def with_holes(X, rate=0.2, seed=1):
    holes = np.random.RandomState(seed).rand(*X.shape) < rate
    return np.where(holes, np.nan, X), holes


def test_fitted_columns_and_categories():
    vae = fit(mixed_table())
    assert vae.categorical_features_.tolist() == [2, 4] and vae.count_features_.tolist() == [3]
    assert vae.numeric_features_.tolist() == [0, 1]
    assert [c.tolist() for c in vae.categories_] == [[0.0, 1.0, 2.0], [0.0, 1.0]]
    assert vae.module_.likelihood.width == 2 + 3 + 2 + 1


def test_a_category_never_observed_starts_improbable_and_is_never_drawn():
    X, _ = with_holes(mixed_table())
    given = [np.array([0.0, 1.0, 2.0, 7.0]), np.array([0.0, 1.0])]  # 7 is a category fit never sees
    vae = fit(X, categories=given)
    observed = X[:, 2][~np.isnan(X[:, 2])]
    assert [c.tolist() for c in vae.category_counts_] == [
        [int((observed == v).sum()) for v in given[0]], [int((X[:, 4] == v).sum()) for v in given[1]]]
    draws = vae.sample_missing(X, 20, random_state=0)[:, np.isnan(X[:, 2]), 2]
    assert draws.size > 500 and not (draws == 7.0).any() and set(np.unique(draws)) <= {0.0, 1.0, 2.0}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_impute_keeps_observed_entries_and_fills_categories_with_categories(dtype):
    X = mixed_table()
    X_holes, holes = with_holes(X)
    vae = fit(X_holes, dtype=dtype)
    imputed = vae.impute(X_holes)
    assert np.array_equal(imputed[~holes], X[~holes])
    assert set(np.unique(imputed[:, 2])) <= {0.0, 1.0, 2.0} and set(np.unique(imputed[:, 4])) <= {0.0, 1.0}
    assert (imputed[:, 3] >= 0).all()
    draws = vae.sample_missing(X_holes, 3, random_state=0)
    assert np.array_equal(draws[:, ~holes], np.broadcast_to(X[~holes], (3, (~holes).sum())))
    assert np.array_equal(draws[..., 3], np.rint(draws[..., 3])) and set(np.unique(draws[..., 2])) <= {0.0, 1.0, 2.0}


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**16), st.floats(0.05, 0.6))
def test_observed_entries_are_never_changed_by_impute(seed, rate):
    X = mixed_table(40, seed % 7)
    X_holes, holes = with_holes(X, rate, seed)
    X_holes[0] = X[0]  # every column observed somewhere
    imputed = fitted().impute(X_holes)
    assert np.array_equal(imputed[~np.isnan(X_holes)], X_holes[~np.isnan(X_holes)])
    assert not np.isnan(imputed).any()


@functools.cache
def fitted():
    return fit(mixed_table(), max_epochs=3)


def test_it_learns_the_categories_from_the_other_columns():
    X = mixed_table(400)
    X_holes = X.copy()
    X_holes[::2, 2] = np.nan  # the category of every other row is missing; the numbers tell it
    vae = fit(X_holes, max_epochs=300, learning_rate=1e-2)
    accuracy = (vae.impute(X_holes)[::2, 2] == X[::2, 2]).mean()
    majority = np.bincount(X[::2, 2].astype(int)).max() / len(X[::2])
    assert accuracy > 0.9 > majority + 0.4, (accuracy, majority)


def test_scores_and_their_diagnostics():
    X = mixed_table()
    vae = fit(X, n_lml_samples=200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        log_marginal, diagnostics = vae.log_marginal_likelihood(X[:10], return_diagnostics=True)
        conditional = vae.conditional_diagnostics(X[:5], np.eye(5, dtype=bool))
    assert np.isfinite(log_marginal).all() and diagnostics.ess.shape == (10,)
    assert conditional.standard_error.shape == (5, 5, 5)
    assert np.isfinite(vae.score(with_holes(X)[0]))


def test_errors_name_the_problem():
    X = mixed_table(50)
    with pytest.raises(ValueError, match="likelihood must be 'gaussian'"):
        fit(X, likelihood="bernoulli")
    bad = X.copy()
    bad[0, 3] = 1.5
    with pytest.raises(ValueError, match=r"feature 3 holds counts"):
        fit(bad)
    vae = fit(X, max_epochs=2)
    unseen = X[:2].copy()
    unseen[0, 2] = 7.0
    with pytest.raises(ValueError, match=r"feature 2 is categorical and holds \[7.0\]"):
        vae.impute(unseen)


def test_without_table_columns_the_vae_is_unchanged():
    X = mixed_table(60)[:, :2]
    plain = MaskedVAE(1, hidden_layer_sizes=(4,), max_epochs=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = clone(plain).fit(X).score(X)
        b = clone(plain).set_params(categorical_features=[], count_features=None).fit(X).score(X)
    assert a == b


def _frame(n=80):
    import pandas as pd

    X = mixed_table(n)
    group = pd.Categorical(np.array(["x", "y", "z"])[X[:, 2].astype(int)])
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "group": group})
    holes = np.random.RandomState(2).rand(*frame.shape) < 0.2
    return frame.mask(holes), holes


def test_the_imputer_searches_the_vae_beside_the_mixtures_on_a_table():
    import pandas as pd

    from skmpt import MaskedImputer

    frame, holes = _frame()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imputer = MaskedImputer(random_state=0).set_output(transform="pandas").fit(frame)
        out = imputer.transform(frame)
    families = set(imputer.search_.cv_results_["family"])
    assert families == {"mixed", "vae"}
    vae = [c for c in imputer.search_.candidates["vae"]]
    assert len(vae) == 1 and vae[0].categorical_features == [2]
    assert out.notna().all().all()
    pd.testing.assert_frame_equal(out.mask(holes), frame)


def test_a_vae_given_to_the_imputer_is_told_the_columns():
    import pandas as pd

    from skmpt import MaskedImputer

    frame, holes = _frame()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imputer = MaskedImputer(MaskedVAE(2, hidden_layer_sizes=(8,), max_epochs=5, random_state=0))
        out = imputer.set_output(transform="pandas").fit(frame).transform(frame)
    assert imputer.estimator_.categorical_features_.tolist() == [2]
    assert set(out["group"]) <= {"x", "y", "z"}
    pd.testing.assert_frame_equal(out.mask(holes), frame)


def test_warm_start_continues_the_fitted_vae_and_refuses_what_no_longer_fits_it():
    X, _ = with_holes(mixed_table())
    categories = [np.arange(3.0), np.arange(2.0)]
    first = fit(X[:100], categories=categories, max_epochs=5)
    # One epoch of a step too small to move anything: the networks are the fitted ones, in the new
    # rows' units (a new start would draw other weights).
    warm = copy.deepcopy(first).set_params(warm_start=True, max_epochs=1, learning_rate=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warm.fit(X)
    np.testing.assert_allclose(warm.impute(X), first.impute(X), rtol=1e-6, atol=1e-6)
    assert warm.n_iter_ == 1
    with pytest.raises(ValueError, match="whose n_components is 2; n_components is now 3"):
        copy.deepcopy(first).set_params(warm_start=True, n_components=3).fit(X)
    with pytest.raises(ValueError, match="categories given"):
        fit(X[:100], max_epochs=1).set_params(warm_start=True).fit(X)
    with pytest.raises(ValueError, match="of 5 features; X has 4"):
        copy.deepcopy(first).set_params(warm_start=True).fit(X[:, :4])


def test_a_count_head_starts_at_its_columns_mean_rate():
    # the log-rate had started at 0 (a rate of 1): counts of about 1e4 were imputed as 33 to 50 after
    # 100 epochs, where the same column as a Gaussian was imputed near its mean
    rng = np.random.RandomState(0)
    X = np.column_stack([rng.randn(300), rng.randn(300), rng.poisson(1e4, 300).astype(float)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        vae = MaskedVAE(1, hidden_layer_sizes=(16,), count_features=[2], max_epochs=100, random_state=0).fit(X)
    holes = X[:5].copy()
    holes[:, 2] = np.nan
    np.testing.assert_allclose(vae.impute(holes)[:, 2], X[:, 2].mean(), rtol=0.02)
    assert vae.score(X) > -12  # the mixed mixture's optimum is -8.85; from a rate of 1 it was -237
