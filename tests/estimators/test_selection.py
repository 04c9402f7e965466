"""MaskedModelSearch: the choice of a model by the held-out score of the observed entries."""

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA, FactorAnalysis
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedLinearVAE, MaskedModelSearch, MaskedPPCA
from skmpt.estimators.selection import default_candidates

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
FAST = {"max_epochs": 60, "batch_size": 200, "learning_rate": 0.05, "n_iter_no_change": 5, "random_state": 0}


def _low_rank(n=300, d=8, k=3, seed=0, missing=0.2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, k)) @ (2 * rng.normal(size=(k, d))) + 0.3 * rng.normal(size=(n, d))
    X[rng.random(X.shape) < missing] = np.nan
    return X


def test_search_scores_every_candidate_on_held_out_rows_and_keeps_the_best():
    X = _low_rank(n=200, d=6, k=2, missing=0.0)
    candidates = [MaskedPPCA(k, **FAST) for k in (1, 2, 3)]
    search = MaskedModelSearch(candidates, greedy=False, random_state=0).fit(X)
    results = search.cv_results_
    assert list(results["n_components"]) == [1, 2, 3]
    for key in ("mean_test_score", "std_error", "std_error_difference", "fit_time", "score_time", "n_parameters",
                "n_iter", "rank_test_score"):
        assert results[key].shape == (3,), key
    assert search.best_index_ == int(np.argmax(results["mean_test_score"])) and search.best_index_ > 0
    assert results["rank_test_score"][search.best_index_] == 1
    assert results["std_error_difference"][search.best_index_] == 0
    assert (results["std_error"] > 0).all() and (results["n_parameters"] == [13, 19, 25]).all()
    # One component is far worse than the true two, by many standard errors.
    assert results["mean_test_score"][1] - results["mean_test_score"][0] > 5 * results["std_error_difference"][0]
    assert search.best_estimator_.n_components == results["n_components"][search.best_index_]


def test_search_is_reproducible_and_greedy_stops_a_family():
    X = _low_rank(n=150, d=5, k=1, missing=0.0)
    # The same candidate twice: the second does not improve on the first, so the family stops there.
    candidates = {"ppca": [MaskedPPCA(1, **FAST), MaskedPPCA(1, **FAST), MaskedPPCA(3, **FAST)]}
    first = MaskedModelSearch(candidates, random_state=0).fit(X)
    second = MaskedModelSearch(candidates, random_state=0).fit(X)
    np.testing.assert_array_equal(first.cv_results_["mean_test_score"], second.cv_results_["mean_test_score"])
    assert list(first.cv_results_["n_components"]) == [1, 1]
    assert len(MaskedModelSearch(candidates, greedy=False, random_state=0).fit(X).cv_results_["family"]) == 3


def test_max_fits_goes_round_robin_over_families():
    X = _low_rank(n=120)
    candidates = {"ppca": [MaskedPPCA(k, **FAST) for k in (1, 2)],
                  "fa": [MaskedFactorAnalysis(k, **FAST) for k in (1, 2)]}
    search = MaskedModelSearch(candidates, greedy=False, max_fits=3, random_state=0).fit(X)
    assert list(search.cv_results_["family"]) == ["ppca", "fa", "ppca"]


def test_one_se_rule_takes_the_fewest_parameters_within_a_standard_error():
    X = _low_rank(n=150, d=6, k=2, missing=0.0)
    search = MaskedModelSearch([MaskedPPCA(k, **FAST) for k in (2, 4)], greedy=False, rule="one_se",
                               random_state=0).fit(X)
    results = search.cv_results_
    top = int(np.argmax(results["mean_test_score"]))
    close = results["mean_test_score"][top] - results["mean_test_score"] <= results["std_error_difference"]
    assert results["n_parameters"][search.best_index_] == results["n_parameters"][close].min()


def test_default_candidates_by_data_kind():
    gaussian = default_candidates(6, random_state=0)
    assert list(gaussian) == ["full", "fa", "ppca"]
    assert all(isinstance(m, MaskedGaussianMixture) for m in gaussian["full"])
    assert [m.n_components for m in gaussian["fa"]] == [1, 2, 4]
    binary = default_candidates(6, binary=True)
    assert list(binary) == ["linear_vae"] and binary["linear_vae"][0].likelihood == "bernoulli"
    with pytest.raises(ValueError, match="families"):
        default_candidates(6, families="gaussian")
    with pytest.raises(ValueError, match="Unknown"):
        default_candidates(6, families=["tied"])


def test_default_full_mixtures_start_from_em_and_fit_the_observed_entries():
    # A full mixture in 30 features has 495 free parameters a component: with 20,000 observed
    # entries (20 per parameter of 2 components) the search tries 1 and 2 components, not 3; with
    # 19,000 only 1; with no count, every size.
    limited = default_candidates(30, n_observed=20_000)["full"]
    assert [m.n_components for m in limited] == [1, 2]
    assert [m.n_components for m in default_candidates(30, n_observed=19_000)["full"]] == [1]
    assert all(m.init_params == "em" for m in limited)
    assert [m.n_components for m in default_candidates(30)["full"]] == [1, 2, 3]
    assert [m.n_components for m in default_candidates(30, n_observed=10)["full"]] == [1]


def test_a_family_far_behind_the_leader_is_dropped():
    # Rank-6 data: PPCA(1) -> PPCA(2) gains about one component's share, and five more are
    # missing, so a third size could not catch up with PPCA(6); without greed it is fitted.
    X = _low_rank(n=300, d=10, k=6, missing=0.1)
    families = {"right": [MaskedPPCA(6, **FAST)], "poor": [MaskedPPCA(k, **FAST) for k in (1, 2, 3)]}
    greedy = MaskedModelSearch(families, refit=False, random_state=0).fit(X)
    assert list(greedy.cv_results_["family"]) == ["right", "poor", "poor"]
    every = MaskedModelSearch(families, greedy=False, refit=False, random_state=0).fit(X)
    assert list(every.cv_results_["n_components"]) == [6, 1, 2, 3]


def test_default_search_on_binary_data_fits_bernoulli_linear_vaes():
    rng = np.random.default_rng(0)
    X = (rng.random((80, 4)) < 0.5).astype(float)
    X[rng.random(X.shape) < 0.1] = np.nan
    search = MaskedModelSearch(max_fits=1, random_state=0).fit(X)
    assert isinstance(search.best_estimator_, MaskedLinearVAE)


def test_bad_input_is_refused_before_fitting():
    X = _low_rank(n=40)
    with pytest.raises(ValueError, match="non-empty list"):
        MaskedModelSearch([]).fit(X)
    with pytest.raises(ValueError, match="non-empty list"):
        MaskedModelSearch({"ppca": []}).fit(X)
    X[:, 2] = np.nan
    with pytest.raises(ValueError, match=r"Feature\(s\) \[2\] are never observed"):
        MaskedModelSearch([MaskedPPCA(1)]).fit(X)
    with pytest.raises(ValueError, match="validation_fraction"):
        MaskedModelSearch([MaskedPPCA(1)], validation_fraction=0.99).fit(_low_rank(n=10))
    with pytest.raises(ValueError, match="rule"):
        MaskedModelSearch([MaskedPPCA(1)], rule="bic").fit(_low_rank(n=40))


@pytest.mark.parametrize("criterion", ["likelihood", "conditional", "remask", "likelihood_remask"])
def test_every_criterion_ranks_the_true_rank_above_a_smaller_one(criterion):
    X = _low_rank(n=300, d=6, k=2, missing=0.2)
    candidates = [MaskedPPCA(k, **FAST) for k in (1, 2)]
    search = MaskedModelSearch(candidates, greedy=False, criterion=criterion, random_state=0).fit(X)
    scores = search.cv_results_["mean_test_score"]
    assert scores[1] - scores[0] > 3 * search.cv_results_["std_error_difference"][0]
    assert search.best_index_ == 1 and search.best_score_ == scores[1]
    if criterion == "remask":
        # Minus a mean squared error of standardised features: between -2 (worse than the mean) and 0.
        assert -1.0 < scores[1] < 0.0
    elif criterion == "conditional":
        # A part of the row's log-likelihood: larger than the whole row's (the joint).
        likelihood = MaskedModelSearch(candidates, greedy=False, random_state=0).fit(X).cv_results_["mean_test_score"]
        assert (scores > likelihood).all()


def test_conditional_criterion_is_the_joint_minus_the_rest():
    X = _low_rank(n=200, d=5, k=2, missing=0.1)
    search = MaskedModelSearch([MaskedPPCA(2, **FAST)], criterion="conditional", refit=False, random_state=0).fit(X)
    # With nothing hidden again the conditional would be 0: the score is a real conditional, negative here.
    assert search.best_score_ < 0
    full = MaskedModelSearch([MaskedPPCA(2, **FAST)], refit=False, random_state=0).fit(X)
    assert full.best_score_ < search.best_score_


class _WildOnEveryRow(MaskedPPCA):
    """A PPCA whose fit to more than 250 rows (the refit to all 300) is thrown far off."""

    def fit(self, X, y=None, sample_weight=None):
        super().fit(X, y, sample_weight)
        if len(X) > 250:
            with torch.no_grad():  # the model of x - 50: its mean moved by 50 in every feature
                shift, unit = torch.tensor(50.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64)
                self.module_.unstandardize_(shift, unit)
        return self


@pytest.mark.parametrize("criterion", ["likelihood", "remask"])
def test_a_refit_far_below_its_selection_score_is_not_used(criterion):
    X = _low_rank(n=300, d=6, k=2, missing=0.2)
    candidates = {"wild": [_WildOnEveryRow(2, **FAST)], "ppca": [MaskedPPCA(1, **FAST)]}
    search = MaskedModelSearch(candidates, greedy=False, criterion=criterion, random_state=0).fit(X)
    scores = search.cv_results_["mean_test_score"]
    assert scores[0] > scores[1]  # the wild one is the better candidate on the training rows
    assert search.rejected_refits_ == [0] and search.best_index_ == 1
    assert search.best_estimator_.n_components == 1 and not isinstance(search.best_estimator_, _WildOnEveryRow)
    assert np.isfinite(search.best_estimator_.score(X)) and search.best_estimator_.score(X) > -50


def test_the_fallbacks_weight_is_that_of_the_candidate_whose_refit_is_used():
    # the blend's weight had been measured with the chosen candidate, whose refit was set aside, and applied to
    # the next candidate's
    from sklearn.impute import SimpleImputer

    X = _low_rank(n=300, d=6, k=2, missing=0.2)
    both = {"wild": [_WildOnEveryRow(2, **FAST)], "ppca": [MaskedPPCA(1, **FAST)]}
    search = MaskedModelSearch(both, greedy=False, fallback=SimpleImputer(), random_state=0).fit(X)
    assert search.rejected_refits_ == [0] and search.best_index_ == 1
    alone = MaskedModelSearch({"ppca": [MaskedPPCA(1, **FAST)]}, fallback=SimpleImputer(), random_state=0).fit(X)
    for key in ("model_error", "model_weight", "blend_error"):
        assert search.fallback_comparison_[key] == pytest.approx(alone.fallback_comparison_[key], rel=1e-12)
    chosen = MaskedModelSearch(both, greedy=False, fallback=SimpleImputer(), refit=False, random_state=0).fit(X)
    assert chosen.fallback_comparison_["model_error"] < 0.9 * search.fallback_comparison_["model_error"]


class _ImputesOffByThree(MaskedPPCA):
    """A PPCA whose likelihood is its own but whose imputations are three off in every entry."""

    def impute(self, X):
        return super().impute(X) + 3.0


def test_likelihood_remask_sets_aside_a_choice_whose_remask_error_is_significantly_higher():
    X = _low_rank(n=300, d=6, k=2, missing=0.2)
    candidates = {"off": [_ImputesOffByThree(2, **FAST)], "ppca": [MaskedPPCA(1, **FAST)]}
    by_likelihood = MaskedModelSearch(candidates, greedy=False, refit=False, random_state=0).fit(X)
    assert by_likelihood.best_index_ == 0  # the rank-2 model is the likelihood's choice
    search = MaskedModelSearch(candidates, greedy=False, refit=False, criterion="likelihood_remask",
                               random_state=0).fit(X)
    np.testing.assert_array_equal(search.cv_results_["mean_test_score"], by_likelihood.cv_results_["mean_test_score"])
    remask = search.cv_results_["mean_remask_score"]
    assert remask[0] < -3 and remask[1] > -1 and search.best_index_ == 1
    assert search.best_score_ == search.cv_results_["mean_test_score"][1]


def test_likelihood_remask_keeps_the_likelihoods_choice_where_the_remask_difference_is_not_significant():
    X = _low_rank(n=300, d=6, k=2, missing=0.2)
    candidates = [MaskedPPCA(k, **FAST) for k in (2, 3)]  # the true rank and one more: near-equal imputations
    search = MaskedModelSearch(candidates, greedy=False, refit=False, criterion="likelihood_remask",
                               random_state=0).fit(X)
    scores, remask = search.cv_results_["mean_test_score"], search.cv_results_["mean_remask_score"]
    assert abs(remask[0] - remask[1]) < 0.01
    assert search.best_index_ == int(np.argmax(scores))


def test_every_refit_wild_keeps_the_candidate_fitted_to_the_training_rows_and_warns():
    X = _low_rank(n=300, d=6, k=2, missing=0.2)
    with pytest.warns(ConvergenceWarning, match="Every refit"):
        search = MaskedModelSearch([_WildOnEveryRow(2, **FAST)], random_state=0).fit(X)
    assert search.rejected_refits_ == [0] and search.best_index_ == 0
    assert search.best_estimator_.score(X) > -50


class _RecordsStart(MaskedGaussianMixture):
    """A mixture that records whether its last fit continued a fitted one; a continued fit says it
    converged, unless ``wild="unconverged"``, and is thrown far off on more than 250 rows when
    ``wild`` is True."""

    wild = False

    def fit(self, X, y=None, sample_weight=None):
        self.continued_ = self.warm_start and hasattr(self, "module_")
        super().fit(X, y, sample_weight)
        if self.continued_:  # the search's handling is under test, not how far a continuation gets
            self.converged_ = self.wild != "unconverged"
        if self.wild is True and self.continued_ and len(X) > 250:
            with torch.no_grad():  # the model of x - 50, as _WildOnEveryRow's
                shift, unit = torch.tensor(50.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64)
                self.module_.unstandardize_(shift, unit)
        return self


@pytest.mark.parametrize("wild", [False, True, "unconverged"])
def test_the_refit_of_a_mixture_continues_its_fit_unless_that_lands_far_below(wild):
    X = _low_rank(n=300, d=4, k=2, missing=0.2)
    fast = {**FAST, "max_epochs": 3, "learning_rate": 1e-3}
    candidate = type("_Wild", (_RecordsStart,), {"wild": wild}) if wild else _RecordsStart
    search = MaskedModelSearch([candidate(1, **fast)], random_state=0).fit(X)
    refitted = search.best_estimator_
    assert refitted.n_features_in_ == 4 and search.rejected_refits_ == [] and refitted.warm_start is False
    # Continued from the candidate's fit to the 240 training rows (no new start); when that
    # continuation scores far below the selection score, or did not converge, the candidate is
    # refitted from its start.
    assert refitted.continued_ is (not wild)
    assert refitted.score(X) > search.best_score_ - 1


def test_a_candidate_that_rows_outside_its_subsample_throw_far_off_is_refitted_from_its_start():
    X = _low_rank(n=400, d=4, k=2, missing=0.1)
    X[:3] = 30.0  # three outlying rows, none among the 100 the search draws with random_state=1
    fast = {**FAST, "max_epochs": 3, "learning_rate": 1e-3}
    chosen = MaskedModelSearch([_RecordsStart(1, **fast)], max_samples=100, refit=False, random_state=1).fit(X)
    assert chosen.best_estimator_.score(X) < chosen.best_score_ - 10  # the premise: far off on every row
    search = MaskedModelSearch([_RecordsStart(1, **fast)], max_samples=100, random_state=1).fit(X)
    assert search.best_estimator_.continued_ is False  # fitted from its start (not continued)


class _CountsScoredRows(_RecordsStart):
    """Counts the rows it is asked to score."""

    def score_samples(self, X):
        type(self).scored += len(X)
        return super().score_samples(X)


def test_a_search_of_every_row_continues_its_fit_without_scoring_the_rows_again():
    X = _low_rank(n=300, d=4, k=2, missing=0.2)
    fast = {**FAST, "max_epochs": 3, "learning_rate": 1e-3}
    counting = type("_Counts", (_CountsScoredRows,), {"scored": 0})
    search = MaskedModelSearch([counting(1, **fast)], random_state=0).fit(X)
    assert search.best_estimator_.continued_
    # The 60 held-out rows, scored once by the search and once after the refit; no row again to
    # decide whether to continue (every row was fitted or scored by the search).
    assert counting.scored == 2 * 60


def test_max_samples_fits_the_candidates_to_a_subset_and_refits_to_every_row():
    X = _low_rank(n=400, d=5, k=2, missing=0.1)
    search = MaskedModelSearch([MaskedPPCA(2, **FAST)], max_samples=100, random_state=0).fit(X)
    assert search.cv_results_["n_iter"].shape == (1,)
    # 100 rows: 80 to fit, 20 held out (their standard error is wider than with 80 held-out rows).
    every = MaskedModelSearch([MaskedPPCA(2, **FAST)], max_samples=None, random_state=0).fit(X)
    assert search.cv_results_["std_error"][0] > every.cv_results_["std_error"][0]
    assert search.best_estimator_.n_features_in_ == 5
    with pytest.raises(ValueError, match="max_samples"):
        MaskedModelSearch([MaskedPPCA(1)], max_samples=2).fit(X)


def test_progress_shows_only_on_a_long_search(capsys):
    X = _low_rank(n=100, d=4, k=1, missing=0.1)
    MaskedModelSearch([MaskedPPCA(1, **FAST)], random_state=0).fit(X)
    assert "MaskedModelSearch" not in capsys.readouterr().err  # well under three seconds


def test_progress_shows_at_a_refit_to_many_more_rows_than_the_candidates_saw(capsys):
    X = _low_rank(n=400, d=4, k=1, missing=0.1)
    MaskedModelSearch([MaskedPPCA(1, **FAST)], max_samples=100, random_state=0).fit(X)  # 80 rows, then 400
    assert "MaskedModelSearch" in capsys.readouterr().err
    MaskedModelSearch([MaskedPPCA(1, **FAST)], max_samples=100, progress=False, random_state=0).fit(X)
    assert "MaskedModelSearch" not in capsys.readouterr().err


def test_an_unknown_criterion_is_refused():
    with pytest.raises(ValueError, match="criterion"):
        MaskedModelSearch([MaskedPPCA(1)], criterion="bic").fit(_low_rank(n=40))


def test_linear_candidates_are_fitted_to_the_gaussians_moments():
    # On complete data the one-component Gaussian is the sample mean and covariance, so the PPCA fitted
    # to its moments is PCA's maximum-likelihood PPCA of the rows (up to the Gaussian's variance floor).
    X = _low_rank(n=200, d=12, k=2, missing=0.0)
    gaussian = MaskedGaussianMixture(1, init_params="em", **{**FAST, "max_epochs": 2})  # at EM's optimum
    families = {"full": [gaussian], "ppca": [MaskedPPCA(2, **FAST)]}
    search = MaskedModelSearch(families, random_state=0).fit(X)
    assert list(search.cv_results_["fitted_by"]) == ["fit", "moments"]
    assert search.cv_results_["n_iter"][1] == 0 and search.best_index_ == 1  # 2 components of 12 features
    # The chosen candidate's refit is its own fit (MPT epochs), not a moment fit: with the PPCA's
    # default training it reaches the maximum-likelihood PPCA of every row, PCA's (whose
    # covariance divides by n - 1, the maximum likelihood by n).
    families["ppca"] = [MaskedPPCA(2, random_state=0)]
    refitted = MaskedModelSearch(families, random_state=0).fit(X).best_estimator_
    assert isinstance(refitted, MaskedPPCA) and refitted.n_iter_ > 0
    expected = PCA(2).fit(X).get_covariance() * (len(X) - 1) / len(X)
    np.testing.assert_allclose(refitted.get_covariance(), expected, rtol=5e-3,
                               atol=1e-3 * np.abs(expected).max())
    # "mpt" fits each candidate itself (epochs); a family fitted before the Gaussian is fitted itself too.
    own = MaskedModelSearch(families, linear_fit="mpt", refit=False, random_state=0).fit(X)
    assert list(own.cv_results_["fitted_by"]) == ["fit", "fit"] and own.cv_results_["n_iter"][1] > 0
    first = MaskedModelSearch({"ppca": families["ppca"], "full": families["full"]}, refit=False, random_state=0)
    assert list(first.fit(X).cv_results_["fitted_by"]) == ["fit", "fit"]
    with pytest.raises(ValueError, match="linear_fit"):
        MaskedModelSearch(families, linear_fit="em").fit(X)


def test_a_factor_analysis_fitted_to_the_moments_ends_within_candidate_tol_of_their_optimum():
    # EM on the moments stops where what is left to gain is less than candidate_tol (nats per
    # sample), not where one iteration gains little: features whose noise spans two decades, where
    # factor analysis' EM crawls.
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 3)) @ rng.normal(size=(3, 10)) + rng.normal(size=(500, 10)) * np.geomspace(0.02, 1, 10)
    gaussian = MaskedGaussianMixture(1, init_params="em", **{**FAST, "max_epochs": 2})
    # The same split: the Gaussian alone is the training rows' mean and covariance.
    moments = MaskedModelSearch({"full": [gaussian]}, refit=False, random_state=0).fit(X).best_estimator_
    families = {"full": [gaussian], "fa": [MaskedFactorAnalysis(3, **FAST)]}
    search = MaskedModelSearch(families, refit=False, random_state=0).fit(X)
    assert list(search.cv_results_["fitted_by"]) == ["fit", "moments"] and search.best_index_ == 1
    mean, covariance = moments.means_[0], moments.covariances_[0]
    d = len(mean)
    values, vectors = np.linalg.eigh(covariance)
    spread = vectors * np.sqrt(values * d)  # 2 d rows of exactly this mean and covariance
    rows = np.vstack([mean + spread.T, mean - spread.T])
    optimum = FactorAnalysis(3, tol=1e-12, max_iter=100_000).fit(rows)

    def log_likelihood(model_covariance):  # per sample, of data of these moments
        return -0.5 * (d * np.log(2 * np.pi) + np.linalg.slogdet(model_covariance)[1]
                       + np.trace(np.linalg.solve(model_covariance, covariance)))

    gap = log_likelihood(optimum.get_covariance()) - log_likelihood(search.best_estimator_.get_covariance())
    assert -1e-6 < gap < 2 * search.candidate_tol  # the check extrapolates what is left


def test_factor_analyses_of_the_moments_are_equivariant_to_each_features_scale():
    # scikit-learn's EM had started from a noise of one in every unit: columns on scales 1e-2 ... 1e2 ended at
    # another optimum (one factor 1.04 nats per row lower) and the search chose another model
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 2)) @ rng.normal(size=(2, 5)) + rng.uniform(0.1, 2.0, 5) * rng.normal(size=(200, 5))
    X[rng.random(X.shape) < 0.2] = np.nan
    scale = np.array([1, 10, 0.1, 100, 0.01])
    families = {"full": [MaskedGaussianMixture(1, init_params="em", **FAST)],
                "fa": [MaskedFactorAnalysis(k, **FAST) for k in (1, 2)]}
    results = [MaskedModelSearch(families, refit=False, greedy=False, random_state=0).fit(X * c).cv_results_
               for c in (1.0, scale)]
    held_out = np.zeros(len(X), dtype=bool)
    held_out[np.random.RandomState(0).permutation(len(X))[:40]] = True  # validation_fraction=0.2
    shift = np.mean(~np.isnan(X[held_out]) @ np.log(scale))  # the log-Jacobian of the held-out rows
    assert list(results[0]["fitted_by"]) == ["fit", "moments", "moments"]
    np.testing.assert_allclose(results[1]["mean_test_score"] + shift, results[0]["mean_test_score"], atol=1e-6)


def test_the_refit_of_a_factor_analysis_fitted_to_the_moments_continues_it_by_em_with_holes():
    X = _low_rank(n=400, d=8, k=2, missing=0.2)
    gaussian = MaskedGaussianMixture(1, init_params="em", **{**FAST, "max_epochs": 2})
    search = MaskedModelSearch({"full": [gaussian], "fa": [MaskedFactorAnalysis(2, **FAST)]}, random_state=0).fit(X)
    assert list(search.cv_results_["fitted_by"]) == ["fit", "moments"] and search.best_index_ == 1
    refitted = search.best_estimator_
    # The moment fit continued to every row by EM with holes, to the optimum: no epoch of MPT.
    assert refitted.n_iter_ == 0 and refitted.converged_ and refitted.warm_start is False
    assert refitted._optimality_gap(X, None) <= refitted.tol


class _CountsRows(MaskedPPCA):
    """A PPCA that records the rows and the tol of its last fit."""

    def fit(self, X, y=None, sample_weight=None):
        self.rows_seen_, self.tol_seen_ = len(X), self.tol
        return super().fit(X, y, sample_weight)


def test_candidates_rank_at_candidate_tol_and_the_refit_trains_to_its_own_on_at_most_refit_max_samples():
    X = _low_rank(n=400, d=5, k=2, missing=0.1)
    fast = {**FAST, "max_epochs": 5}
    candidate = MaskedModelSearch([_CountsRows(2, **fast)], max_samples=None, refit=False, random_state=0).fit(X)
    assert candidate.best_estimator_.tol_seen_ == 1e-2 and candidate.best_estimator_.rows_seen_ == 320
    assert candidate.best_estimator_.tol == 1e-3  # its parameters are the candidate's (a clone refits as given)
    search = MaskedModelSearch([_CountsRows(2, **fast)], max_samples=None, refit_max_samples=100,
                               random_state=0).fit(X)
    assert search.best_estimator_.tol_seen_ == 1e-3 and search.best_estimator_.rows_seen_ == 100
    own = MaskedModelSearch([_CountsRows(2, **fast, tol=0.1)], candidate_tol=None, refit=False, random_state=0)
    assert own.fit(X).best_estimator_.tol_seen_ == 0.1  # a looser tol of its own is kept
    every = MaskedModelSearch([_CountsRows(2, **fast)], refit_max_samples=None, random_state=0).fit(X)
    assert every.best_estimator_.rows_seen_ == 400
    with pytest.raises(ValueError, match="refit_max_samples"):
        MaskedModelSearch([MaskedPPCA(1)], refit_max_samples=2).fit(X)
    with pytest.raises(ValueError, match="candidate_tol"):
        MaskedModelSearch([MaskedPPCA(1)], candidate_tol=0).fit(X)


def test_a_candidate_that_is_no_model_is_refused_before_any_fit(monkeypatch):
    # it had failed with an AttributeError on its get_params after the models before it were fitted
    X = np.random.RandomState(0).randn(40, 3)
    monkeypatch.setattr(MaskedPPCA, "fit", lambda *args, **kwargs: pytest.fail("fitted"))
    for candidates in ([MaskedPPCA(1), "ppca"], {"linear": [MaskedPPCA(1)], "other": [MaskedPPCA]}):
        with pytest.raises(ValueError, match=r"candidates must be estimators with fit, get_params and score_samples"):
            MaskedModelSearch(candidates).fit(X)


@pytest.mark.parametrize("criterion", ["conditional", "remask"])
def test_a_criterion_of_entries_hidden_again_needs_rows_with_two_observed_entries(criterion):
    # one feature: no held-out entry could be hidden, every candidate had scored 0 and the first was kept
    rng = np.random.default_rng(3)
    x = np.r_[rng.normal(-3, 0.5, 60), rng.normal(3, 0.5, 60)][:, None]
    x[rng.random(x.shape) < 0.2] = np.nan
    with pytest.raises(ValueError, match=f"criterion='{criterion}' scores the entries of held-out rows hidden "
                                         f"again, and none of the 24 held-out rows has two observed entries"):
        MaskedModelSearch(criterion=criterion, random_state=0).fit(x)


def test_held_out_rows_that_alone_observe_features_are_an_error_naming_them():
    # every held-out row was the only one observing a feature: all went to training, and the first candidate's fit
    # had failed on "0 sample(s)"
    rng = np.random.default_rng(0)
    X = np.full((12, 13), np.nan)
    X[np.arange(12), np.arange(12)] = rng.normal(size=12)
    X[:, 12] = rng.normal(size=12)
    with pytest.raises(ValueError, match=r"Of 2 held-out rows, 0 remain .* Features observed in fewer than two "
                                         r"rows: \[0, 1, 2"):
        MaskedModelSearch(random_state=0).fit(X)


def test_moment_fits_of_a_constant_feature_far_from_zero_keep_its_spread():
    # the moment-matched rows, its mean plus a spread, had lost the spread at 1e15 in floating point: the PCA's
    # noise was 0 and the search failed ("its PPCA is degenerate")
    rng = np.random.default_rng(0)
    X = np.c_[rng.normal(size=(60, 2)), np.full(60, 1e15)]
    X[rng.random(X.shape) < 0.2] = np.nan
    search = MaskedModelSearch(greedy=False, random_state=0).fit(X)
    assert "moments" in set(search.cv_results_["fitted_by"])
    assert np.all(search.best_estimator_.impute(X)[:, 2] == 1e15)


def test_the_moments_of_a_gaussian_short_of_its_optimum_fit_no_candidate():
    # a listed Gaussian stopped after an epoch from a random start had given its moments to the factor analyses,
    # which then ranked about a nat per row below their own fits
    X = _low_rank(n=300, d=6, k=2, missing=0.2)
    short = MaskedGaussianMixture(1, init_params="random", max_epochs=1, random_state=0)
    families = {"full": [short], "fa": [MaskedFactorAnalysis(2, **FAST)]}
    search = MaskedModelSearch(families, greedy=False, refit=False, random_state=0).fit(X)
    assert list(search.cv_results_["fitted_by"]) == ["fit", "fit"]
    converged = {"full": [MaskedGaussianMixture(1, init_params="em", **FAST)], "fa": families["fa"]}
    search = MaskedModelSearch(converged, greedy=False, refit=False, random_state=0).fit(X)
    assert list(search.cv_results_["fitted_by"]) == ["fit", "moments"]
