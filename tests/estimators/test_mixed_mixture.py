"""MaskedMixedMixture: exact EM on tables of numbers and categories, with holes; imputation,
new tables at transform, the categories' checks, and MPT from EM's start."""

import copy
import warnings

import hypothesis
import numpy as np
import pytest
import torch
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

from skmpt import MaskedGaussianMixture, MaskedMixedMixture, MaskedVAE
from skmpt.estimators.gaussian_mixture import em_converged
from skmpt.models.imputation import HolePatterns, gaussian_conditional
from skmpt.models.mixed import MixedMixtureModule
from skmpt.testing import check_masked_model
from support.helpers import saddle_table


def _table(n=400, seed=0, holes=0.0):
    """Two groups: a number near 0 or 5, a category of three (values 1, 2, 9) and a binary one."""
    rng = np.random.RandomState(seed)
    group = rng.randint(0, 2, n)
    number = group * 5 + rng.randn(n)
    other = -group * 2 + 0.5 * rng.randn(n)
    three = np.where(group == 1, rng.choice([1.0, 2.0, 9.0], n, p=[0.7, 0.2, 0.1]),
                     rng.choice([1.0, 2.0, 9.0], n, p=[0.1, 0.2, 0.7]))
    binary = np.where(rng.rand(n) < 0.85, group, 1 - group).astype(float)
    X = np.column_stack([number, three, other, binary])
    if holes:
        X[rng.rand(*X.shape) < holes] = np.nan
        X[np.isnan(X).all(1), 0] = number[np.isnan(X).all(1)]
    return X, group


def test_em_recovers_the_groups_and_each_step_raises_the_likelihood():
    X, group = _table(holes=0.2)
    mixture = MaskedMixedMixture(2, categorical_features=[1, 3], random_state=0).fit(X)
    assert mixture.converged_
    objectives = [h["objective"] for h in mixture.history_]
    assert all(b >= a - 1e-9 for a, b in zip(objectives, objectives[1:], strict=False))
    first = int(np.argmin(mixture.means_[:, 0]))
    np.testing.assert_allclose(sorted(mixture.means_[:, 0]), [0, 5], atol=0.3)
    np.testing.assert_allclose(mixture.category_probabilities_[0][first], [0.1, 0.2, 0.7], atol=0.08)
    assert [c.tolist() for c in mixture.categories_] == [[1.0, 2.0, 9.0], [0.0, 1.0]]
    labels = mixture.predict(X)
    assert max(np.mean(labels == group), np.mean(labels != group)) > 0.95
    # the last step's objective is the likelihood of the fitted model, up to one step's gain
    assert abs(mixture.log_marginal_likelihood(X).mean() - objectives[-1]) < 10 * mixture.tol


def test_the_score_is_the_exact_log_likelihood_and_holes_are_marginalised():
    X, _ = _table(60, holes=0.2)
    mixture = MaskedMixedMixture(2, categorical_features=[1, 3], random_state=0).fit(X)
    np.testing.assert_allclose(mixture.score_samples(X), mixture.log_marginal_likelihood(X), atol=1e-9)
    exhaustive = MaskedMixedMixture(2, categorical_features=[1, 3], score_method="exhaustive", random_state=0).fit(X)
    np.testing.assert_allclose(exhaustive.score_samples(X), mixture.log_marginal_likelihood(X), atol=1e-9)
    report = check_masked_model(mixture, X[~np.isnan(X).any(1)][:6])
    assert report["identity"] < 1e-9


def test_without_categories_em_reaches_gaussian_mixtures_likelihood():
    rng = np.random.RandomState(0)
    X = np.vstack([rng.randn(150, 3), rng.randn(150, 3) @ np.diag([1, 2, 0.5]) + 4])
    for covariance_type in ("full", "diag", "tied", "spherical"):
        ours = MaskedMixedMixture(2, covariance_type=covariance_type, tol=1e-8, random_state=0).fit(X)
        em = GaussianMixture(2, covariance_type=covariance_type, tol=1e-8, random_state=0).fit(X)
        assert abs(ours.score(X) - em.score(X)) < 1e-4, covariance_type
        assert ours.covariances_.shape == em.covariances_.shape


def test_impute_keeps_observed_entries_and_fills_categories_with_categories():
    X, _ = _table(holes=0.25)
    mixture = MaskedMixedMixture(2, categorical_features=[1, 3], random_state=0).fit(X)
    imputed = mixture.impute(X)
    observed = ~np.isnan(X)
    assert np.array_equal(imputed[observed], X[observed])
    assert set(np.unique(imputed[:, 1])) <= {1.0, 2.0, 9.0} and set(np.unique(imputed[:, 3])) <= {0.0, 1.0}
    draws = mixture.sample_missing(X, 3, random_state=0)
    assert np.array_equal(draws[:, observed], np.broadcast_to(X[observed], (3, observed.sum())))
    assert set(np.unique(draws[:, :, 1])) <= {1.0, 2.0, 9.0}


def test_fit_on_one_table_impute_another():
    X_train, _ = _table(400, seed=0)
    X_new, group = _table(200, seed=1)
    truth = X_new.copy()
    X_new[:, 3] = np.nan  # the binary column, to be predicted from the others
    mixture = MaskedMixedMixture(2, categorical_features=[1, 3], random_state=0).fit(X_train)
    imputed = mixture.impute(X_new)
    # the Bayes rate of the binary column given the group is 0.85; the group is nearly known
    assert np.mean(imputed[:, 3] == truth[:, 3]) > 0.8
    assert np.array_equal(imputed[:, :3], X_new[:, :3])


def test_an_unseen_category_is_an_error_naming_the_column():
    X, _ = _table(50)
    mixture = MaskedMixedMixture(2, categorical_features=[1, 3], random_state=0).fit(X)
    X_new = X.copy()
    X_new[0, 1] = 4.0
    with pytest.raises(ValueError, match=r"feature 1 is categorical and holds \[4.0\]"):
        mixture.impute(X_new)


def test_a_column_with_one_category_is_warned_about():
    X, _ = _table(50)
    X[:, 3] = 1.0
    with pytest.warns(UserWarning, match="feature 3 is categorical with one category"):
        MaskedMixedMixture(2, categorical_features=[1, 3], random_state=0).fit(X)


def test_categorical_features_as_a_mask_or_indices_and_its_errors():
    X, _ = _table(80)
    by_index = MaskedMixedMixture(2, categorical_features=[3, 1], random_state=0).fit(X)
    by_mask = MaskedMixedMixture(2, categorical_features=[False, True, False, True], random_state=0).fit(X)
    np.testing.assert_array_equal(by_index.score_samples(X), by_mask.score_samples(X))
    assert by_index.categorical_features_.tolist() == [1, 3] and by_index.numeric_features_.tolist() == [0, 2]
    with pytest.raises(ValueError, match="X has 4 features"):
        MaskedMixedMixture(categorical_features=[4]).fit(X)
    with pytest.raises(ValueError, match="4 booleans"):
        MaskedMixedMixture(categorical_features=[True, False]).fit(X)
    with pytest.raises(ValueError, match="twice"):
        MaskedMixedMixture(categorical_features=[1, 1]).fit(X)


def test_categories_of_any_value_come_back_exactly_in_float32():
    X, _ = _table(100, holes=0.2)
    X[:, 1] = np.where(np.isnan(X[:, 1]), np.nan, X[:, 1] * 0.1 + 1e4)  # 1e4 + 0.1, 0.2, 0.9
    mixture = MaskedMixedMixture(2, categorical_features=[1, 3], dtype="float32", random_state=0).fit(X)
    imputed = mixture.impute(X)
    assert set(np.unique(imputed[:, 1])) <= set(mixture.categories_[0].tolist())
    assert np.array_equal(imputed[~np.isnan(X)], X[~np.isnan(X)])


def test_mpt_from_em_s_start_stays_near_em():
    X, _ = _table(200, holes=0.1)
    em = MaskedMixedMixture(2, categorical_features=[1, 3], random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mpt = MaskedMixedMixture(2, categorical_features=[1, 3], algorithm="mpt", max_epochs=30,
                                 random_state=0).fit(X)
    assert abs(mpt.log_marginal_likelihood(X).mean() - em.log_marginal_likelihood(X).mean()) < 0.05
    assert len(mpt.history_) > mpt.n_iter_  # EM's steps, then MPT's epochs


def test_bic_counts_the_categories():
    X, _ = _table(80)
    mixture = MaskedMixedMixture(2, categorical_features=[1, 3], random_state=0).fit(X)
    # 1 weight, 2 * 2 means, 2 * 3 covariance entries, 2 * (2 + 1) category probabilities
    assert mixture._n_parameters() == 1 + 4 + 6 + 6
    assert np.isfinite(mixture.bic(X))


def test_partial_fit_starts_from_em_and_continues_by_mpt():
    X, _ = _table(200)
    mixture = MaskedMixedMixture(2, categorical_features=[1, 3], random_state=0)
    for chunk in np.array_split(X, 2):
        mixture.partial_fit(chunk)
    other = MaskedMixedMixture(2, categorical_features=[1, 3], random_state=0).fit(X)
    assert abs(mixture.score(X) - other.score(X)) < 0.3


def test_n_init_keeps_the_best_start_and_the_module_keeps_the_contract():
    X, _ = _table(100)
    one = MaskedMixedMixture(3, categorical_features=[1, 3], random_state=0).fit(X)
    best = MaskedMixedMixture(3, categorical_features=[1, 3], n_init=3, random_state=0).fit(X)
    assert best.score(X) >= one.score(X) - 1e-9
    module = best.module_.cpu()  # fitted on CUDA where it is visible (device="auto"); checked on the host's rows
    check_masked_model(module, torch.as_tensor(X[:5]))


def test_a_gaussian_mixture_and_this_one_agree_on_numbers():
    rng = np.random.RandomState(1)
    X = np.vstack([rng.randn(100, 2), rng.randn(100, 2) + 5])
    ours = MaskedMixedMixture(2, random_state=0).fit(X)
    theirs = MaskedGaussianMixture.from_estimator(GaussianMixture(2, random_state=0).fit(X))
    assert abs(ours.score(X) - theirs.score(X)) < 1e-3


def test_given_categories_keep_a_category_fit_did_not_see():
    X, _ = _table(80)
    mixture = MaskedMixedMixture(2, categorical_features=[1, 3], categories=[[1, 2, 9, 11], [0, 1]],
                                 random_state=0).fit(X)
    assert mixture.categories_[0].tolist() == [1.0, 2.0, 9.0, 11.0]
    X_new = X[:3].copy()
    X_new[:, 1] = 11.0
    assert np.isfinite(mixture.score_samples(X_new)).all()
    assert (mixture.score_samples(X_new) < mixture.score_samples(X[:3]) - 5).all()
    with pytest.raises(ValueError, match=r"feature 1 holds \[9.0\], not among its given categories"):
        MaskedMixedMixture(2, categorical_features=[1, 3], categories=[[1, 2], [0, 1]]).fit(X)


def test_count_columns_are_poissons_fitted_by_em():
    rng = np.random.RandomState(0)
    group = rng.randint(0, 2, 600)
    X = np.column_stack([group * 4 + rng.randn(600), rng.poisson(np.where(group, 8.0, 1.5)), group.astype(float)])
    X_holes = X.copy()
    X_holes[rng.rand(*X.shape) < 0.15] = np.nan
    mixture = MaskedMixedMixture(2, categorical_features=[2], count_features=[1], random_state=0).fit(X_holes)
    assert mixture.converged_ and mixture.count_features_.tolist() == [1] and mixture.numeric_features_.tolist() == [0]
    np.testing.assert_allclose(sorted(mixture.rates_[:, 0]), [1.5, 8.0], rtol=0.15)
    assert mixture._n_parameters() == 1 + 2 + 2 + 2 + 2  # weights, means, variances, categories, rates
    np.testing.assert_allclose(mixture.score_samples(X_holes), mixture.log_marginal_likelihood(X_holes), atol=1e-9)
    draws = mixture.sample_missing(X_holes, 2, random_state=0)
    holes = np.isnan(X_holes[:, 1])
    assert np.array_equal(draws[:, holes, 1], np.round(draws[:, holes, 1])) and (draws[:, holes, 1] >= 0).all()
    imputed = mixture.impute(X_holes)
    assert np.corrcoef(imputed[holes, 1], X[holes, 1])[0, 1] > 0.8
    with pytest.raises(ValueError, match=r"feature 1 holds counts, non-negative integers; it holds \[-1.0\]"):
        mixture.impute(np.array([[0.0, -1.0, 1.0]]))
    with pytest.raises(ValueError, match=r"Feature\(s\) \[1\] are both"):
        MaskedMixedMixture(categorical_features=[1], count_features=[1]).fit(X)


def test_counts_and_categories_are_exact_in_float32_and_through_partial_fit():
    rng = np.random.RandomState(1)
    X = np.column_stack([rng.randn(200) + 1e4, rng.poisson(3.0, 200), rng.randint(0, 3, 200) + 0.5])
    mixture = MaskedMixedMixture(2, categorical_features=[2], count_features=[1], dtype="float32",
                                 random_state=0).fit(X)
    assert mixture.offset_[1] == 0 and mixture.offset_[2] == 0 and mixture.offset_[0] != 0
    streamed = MaskedMixedMixture(2, categorical_features=[2], count_features=[1], random_state=0).partial_fit(X)
    assert abs(streamed.score(X) - mixture.score(X)) < 0.5


@pytest.mark.parametrize("estimator", [MaskedMixedMixture(1, random_state=0),
                                       MaskedVAE(1, hidden_layer_sizes=(4,), max_epochs=3, random_state=0)])
def test_large_counts_are_scored_exactly_and_categories_float32_merges_are_refused(estimator):
    # float32 arithmetic had left the Poisson log-pmf of counts near 1e6 up to 1.1 nats off (its terms are
    # about 1e7), and categories 1e8 and 1e8 + 1, one number in float32, had been fitted as the first
    rng = np.random.RandomState(0)
    X = np.column_stack([rng.randn(200), rng.poisson(1e6, 200)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted = clone(estimator).set_params(count_features=[1], dtype="float32").fit(X)
    module = fitted.module_
    counts = torch.as_tensor(X[:, 1], dtype=torch.float64)
    rate = float(module.log_rates.detach()[0, 0]) if hasattr(module, "log_rates") else None
    if rate is not None:  # the mixture: its float32 score against float64 arithmetic on its own parameters
        exact = (counts * rate - np.exp(rate) - torch.lgamma(counts + 1)).numpy()
        numeric = fitted.score_samples(np.column_stack([X[:, 0], np.full(200, np.nan)]))
        assert np.abs(fitted.score_samples(X) - numeric - exact).max() < 1e-2
    X[:, 1] = np.where(rng.rand(200) < 0.3, 1e8, 1e8 + 1)
    with pytest.raises(ValueError, match="categories 100000000.0 and 100000001.0, which dtype='float32'"):
        clone(estimator).set_params(categorical_features=[1], dtype="float32").fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clone(estimator).set_params(categorical_features=[1]).fit(X)  # float64 holds them apart


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_no_component_is_narrower_than_a_column_of_integers_allows(covariance_type):
    # A count of children as a number: mostly 0. Without the floor h^2 / 12 (h = 1) a component sat
    # on the zeros with a variance of 1e-6 of the data's, and the likelihood grew with the components.
    rng = np.random.RandomState(0)
    children = np.minimum(rng.poisson(0.3, 300), 3).astype(float)
    X = np.column_stack([children, rng.randn(300) + children, rng.randint(0, 2, 300)])
    X[rng.rand(*X.shape) < 0.1] = np.nan
    X[np.isnan(X).all(1), 1] = 0.0
    mixture = MaskedMixedMixture(6, categorical_features=[2], covariance_type=covariance_type,
                                 random_state=0).fit(X)
    variances = mixture.module_.gaussian.covariances()
    if variances.ndim == 3:
        variances = variances.diagonal(dim1=-2, dim2=-1)
    assert variances[:, 0].min() >= 1 / 12 * (1 - 1e-9)
    objectives = [h["objective"] for h in mixture.history_]
    assert all(b >= a - 1e-9 for a, b in zip(objectives, objectives[1:], strict=False))
    # a real-valued column keeps its (far smaller) resolution: its floor is no constraint here
    assert variances[:, 1].min() < 1


def test_warm_start_runs_em_from_the_fitted_mixture_and_refuses_what_no_longer_fits_it():
    X, _ = _table(holes=0.2)
    params = {"categorical_features": [1, 3], "categories": [np.array([1.0, 2.0, 9.0]), np.array([0.0, 1.0])]}
    first = MaskedMixedMixture(3, random_state=0, tol=1e-6, **params).fit(X[:200])
    # From its own optimum on the same rows EM stops after the ten steps that judge what is left, where
    # k-means' start takes many more.
    again = copy.deepcopy(first).set_params(warm_start=True).fit(X[:200])
    assert again.n_iter_ == 10 < first.n_iter_
    assert 0 <= again.score(X[:200]) - first.score(X[:200]) < 1e-5
    more = copy.deepcopy(first).set_params(warm_start=True).fit(X)  # every row, in this fit's offset
    assert more.converged_ and more.score(X) >= first.score(X)
    with pytest.raises(ValueError, match="whose covariance_type is 'full'; covariance_type is now 'diag'"):
        copy.deepcopy(first).set_params(warm_start=True, covariance_type="diag").fit(X)
    with pytest.raises(ValueError, match="categories given"):
        MaskedMixedMixture(2, categorical_features=[1, 3], warm_start=True).fit(X).fit(X)


def _row_by_row(module, X, observed):
    """EM's E-step as it was: each row's Gaussian conditional by itself, each row its own "pattern" (and
    ``log pi_k + log p_k(x_o)`` from the masked conditionals' code, row by row too)."""
    numeric = module.numeric_features
    covariances = module.gaussian.covariances()
    covariances = covariances if covariances.ndim == 3 else torch.diag_embed(covariances)
    mean, cov, _ = gaussian_conditional(X[:, numeric], observed[:, numeric], module.gaussian.means.unsqueeze(1),
                                        covariances)
    rows = torch.arange(len(X))
    holes = HolePatterns(observed[:, numeric], observed[:, numeric], rows, rows, [1] * len(X))
    return mean, cov, holes, module._joint(X, observed)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_em_by_pattern_of_holes_is_em_row_by_row(covariance_type, monkeypatch):
    # Four numbers (up to 16 patterns of holes) and two categories: the same fit to 1e-12 either way.
    X, _ = _table(300, seed=2, holes=0.3)
    rng = np.random.RandomState(3)
    extra = np.column_stack([X[:, 0] + rng.randn(300), rng.randn(300)])
    extra[rng.rand(300, 2) < 0.3] = np.nan
    X = np.column_stack([X, extra])
    assert len(np.unique(np.isnan(X[:, [0, 2, 4, 5]]), axis=0)) >= 12

    def fit():
        return MaskedMixedMixture(3, categorical_features=[1, 3], covariance_type=covariance_type,
                                  random_state=0).fit(X)

    fitted = fit()
    monkeypatch.setattr(MixedMixtureModule, "conditional_by_pattern", _row_by_row)
    rowwise = fit()
    assert fitted.n_iter_ == rowwise.n_iter_ > 5
    for name in ("weights_", "means_", "covariances_"):
        np.testing.assert_allclose(getattr(fitted, name), getattr(rowwise, name), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fitted.transform(X), rowwise.transform(X), rtol=1e-12, atol=1e-12)


def test_a_table_of_counts_alone_is_a_mixture_of_poissons_from_its_k_means_start():
    rng = np.random.RandomState(0)
    group = rng.randint(0, 2, 200)
    X = rng.poisson(np.where(group[:, None] == 1, [2.0, 9.0], [9.0, 2.0])).astype(float)
    X[rng.rand(*X.shape) < 0.2] = np.nan
    model = MaskedMixedMixture(2, count_features=[0, 1], random_state=0).fit(X)
    assert model.converged_ and np.isfinite(model.score(X))
    np.testing.assert_allclose(np.sort(model.rates_[:, 0]), [2.0, 9.0], rtol=0.25)  # the two groups found


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_a_table_of_categories_alone_is_a_latent_class_model_with_the_exact_likelihood(covariance_type):
    rng = np.random.RandomState(0)
    group = rng.randint(0, 2, 120)
    X = np.c_[np.where(rng.rand(120) < 0.85, group, 1 - group), np.where(rng.rand(120) < 0.8, 2 * group,
              rng.randint(0, 3, 120))].astype(float)
    X[rng.rand(*X.shape) < 0.2] = np.nan
    model = MaskedMixedMixture(2, categorical_features=[0, 1], covariance_type=covariance_type,
                               random_state=0).fit(X)
    # sum_k pi_k prod_j p_kj(x_j) over the observed categories of each row, by hand
    log_terms = np.tile(np.log(model.weights_), (len(X), 1))
    for j, (categories, probabilities) in enumerate(zip(model.categories_, model.category_probabilities_, strict=True)):
        seen = ~np.isnan(X[:, j])
        log_terms[seen] += np.log(probabilities[:, np.searchsorted(categories, X[seen, j])]).T
    # (atol: a row with nothing observed is zero exactly, the sum by hand up to rounding)
    np.testing.assert_allclose(model.score_samples(X), np.logaddexp.reduce(log_terms, axis=1), rtol=1e-10,
                               atol=1e-15)
    assert model.converged_ and model.means_.shape == (2, 0)
    assert model.covariances_.shape == {"full": (2, 0, 0), "tied": (0, 0)}.get(covariance_type, (2, 0))
    assert model._n_parameters() == 1 + 2 * (1 + 2)  # weights, then K (C_j - 1) per column: no covariance
    filled = model.impute(X)
    assert not np.isnan(filled).any() and np.isin(filled[:, 1], [0, 1, 2]).all()


def test_em_that_says_converged_has_less_than_tol_left_by_the_gaussian_mixtures_rule():
    # Stopped at the first step gaining less than tol, EM said converged_ 0.018 nats per sample short here
    # (after 7 steps); EM's gains judged over ten steps (em_converged) leave 0.0004.
    rng = np.random.RandomState(0)
    group = rng.randint(0, 3, 300)
    X = np.c_[group + rng.randn(300), rng.randn(300) + 0.5 * group,
              np.where(rng.rand(300) < 0.7, group, rng.randint(0, 3, 300))].astype(float)
    X[rng.rand(*X.shape) < 0.3] = np.nan
    X[np.isnan(X).all(1), 0] = 0.0
    params = {"categorical_features": [2], "categories": [np.array([0.0, 1.0, 2.0])], "random_state": 0}
    fitted = MaskedMixedMixture(3, **params).fit(X)
    assert fitted.converged_
    objectives = [record["objective"] for record in fitted.history_]
    assert em_converged(objectives, fitted.tol)
    longer = copy.deepcopy(fitted).set_params(warm_start=True, tol=1e-10, max_epochs=5000).fit(X)
    assert longer.score(X) - fitted.score(X) <= fitted.tol


def test_em_that_crawls_past_a_saddle_is_not_said_converged_there():
    # The Gaussian mixtures' saddle (tests/estimators/test_optimality.py): a tied mixture on rank-2 data
    # with 40 % of entries missing, whose EM gains about 1e-6 nats a step near a saddle. Without a probe
    # this mixture said converged_ there 0.0078 nats per sample short; L-BFGS from there leaves it.
    X = saddle_table()
    fitted = MaskedMixedMixture(3, covariance_type="tied", random_state=0).fit(X)
    assert fitted.converged_
    with warnings.catch_warnings():  # 5000 steps do not reach tol=1e-10: the comparison needs them only near
        warnings.simplefilter("ignore", ConvergenceWarning)
        longer = copy.deepcopy(fitted).set_params(warm_start=True, tol=1e-10, max_epochs=5000).fit(X)
    assert longer.score(X) - fitted.score(X) <= fitted.tol


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag"])
@hypothesis.settings(max_examples=4, deadline=None)
@hypothesis.given(exponents=st.lists(st.floats(-6, 6), min_size=2, max_size=2))
def test_a_fit_is_equivariant_to_each_numeric_columns_scale(covariance_type, exponents):
    # EM ran on the numeric columns divided by one common scale: its k-means start and the 1e-6 added
    # to each covariance then depended on the columns' relative scales, and on penguins (body mass in
    # grams beside bill depths in millimetres) EM said converged_ 0.011 nats per sample below the
    # likelihood's optimum. Each column is now in its own units; the model is equivariant to them.
    X, _ = _table(n=200, holes=0.2)
    scales = np.array([10.0 ** exponents[0], 1.0, 10.0 ** exponents[1], 1.0])  # the numeric columns 0 and 2
    params = {"categorical_features": [1, 3], "covariance_type": covariance_type, "random_state": 0}
    reference = MaskedMixedMixture(2, **params).fit(X).score(X)
    scaled = MaskedMixedMixture(2, **params).fit(X * scales).score(X * scales)
    log_scales = np.mean(~np.isnan(X) @ np.log(scales))
    assert scaled == pytest.approx(reference - log_scales, abs=1e-6 * (1 + abs(reference)))



@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_a_constant_numeric_column_converges_with_its_variance_at_the_floor(covariance_type):
    # The M-step added 1e-6 to the scatter (scikit-learn's reg_covar) before flooring: a constant column,
    # 20 % of it missing, then sat at a variance of 1.17e-6, 0.067 nats per sample below the floor's, and
    # EM and the saddle probe undid each other's steps until max_epochs ran out (ConvergenceWarning).
    rng = np.random.RandomState(1)
    X = np.column_stack([rng.randn(200), 3 * rng.randn(200) + 1, np.full(200, 5.0), rng.choice([0.0, 1.0, 2.0], 200)])
    X[rng.rand(*X.shape) < 0.2] = np.nan
    X[np.isnan(X).all(1), 0] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fitted = MaskedMixedMixture(1, categorical_features=[3], covariance_type=covariance_type,
                                    random_state=0).fit(X)
    assert fitted.converged_ and fitted.n_iter_ < 100
    variances = fitted.covariances_[0] if covariance_type == "diag" else np.diag(fitted.covariances_[0])
    assert variances[2] == pytest.approx(1e-6, rel=1e-2)  # the constant column's spread is taken as 1
