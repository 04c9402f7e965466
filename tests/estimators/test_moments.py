"""Training the linear-Gaussian estimators from the data's moments (``solver="moments"``): the
optimum of training on rows, from one pass over the data, with weights, missing-data patterns
and ``partial_fit``."""

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA

from skmpt import MaskedFactorAnalysis, MaskedPPCA
from skmpt.estimators._data import standardization
from skmpt.estimators._moments import moment_standardization
from skmpt.objectives import Moments


def _data(n=3000, n_features=8, rank=2, seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(n, rank) @ rng.randn(rank, n_features) + 0.5 * rng.randn(n, n_features) + 3.0


def test_ppca_from_moments_reaches_the_maximum_likelihood():
    X = _data()
    ppca = MaskedPPCA(2, solver="moments", random_state=0, device="cpu").fit(X)
    assert ppca.converged_
    assert abs(ppca.log_marginal_likelihood(X).mean() - PCA(2).fit(X).score(X)) < 0.002


@pytest.mark.parametrize("estimator", [MaskedPPCA, MaskedFactorAnalysis])
def test_moments_and_minibatches_reach_the_same_optimum(estimator):
    X = _data(n=1500)
    params = {"random_state": 0, "device": "cpu", "mask_rate": 0.3}
    rows = estimator(2, solver="minibatch", **params).fit(X)
    moments = estimator(2, solver="moments", **params).fit(X)
    # the fixed-rate objective both maximise, D * S(x; M) (measured 0.0031 apart for factor analysis)
    rows_objective, moments_objective = ((e.fixed_rate_bias(X, 0.3) + e.log_marginal_likelihood(X)).mean()
                                         for e in (rows, moments))
    assert abs(rows_objective - moments_objective) < 0.005


def test_auto_trains_complete_data_from_moments_at_any_size():
    for n in (400, 1000):
        X = _data(n=n)
        auto = MaskedPPCA(2, random_state=0, device="cpu").fit(X)
        forced = MaskedPPCA(2, solver="moments", random_state=0, device="cpu").fit(X)
        np.testing.assert_array_equal(auto.components_, forced.components_)
    rows = MaskedPPCA(2, solver="minibatch", random_state=0, device="cpu").fit(X)
    assert not np.array_equal(rows.components_, auto.components_)


def test_moments_give_the_units_of_the_rows():
    X = torch.as_tensor(_data(n=500))
    units, moments = moment_standardization(Moments.from_samples(X))
    center, scale = standardization(X, "gaussian")
    torch.testing.assert_close(units[0], center)
    torch.testing.assert_close(units[1], scale)
    torch.testing.assert_close(moments.covariance, Moments.from_samples((X - center) / scale).covariance)
    assert moment_standardization(Moments.from_samples(torch.ones(5, 3, dtype=torch.float64))) is None


def test_fit_from_moments_leaves_the_callers_array_alone():
    X = _data(n=300)
    before = X.copy()
    MaskedPPCA(2, random_state=0, device="cpu").fit(X)
    np.testing.assert_array_equal(X, before)


def test_mle_from_moments_chooses_as_pca():
    X = _data(n=400, n_features=10, rank=3)
    chosen = MaskedPPCA("mle", random_state=0, device="cpu").fit(X).n_components_
    assert chosen == PCA("mle").fit(X).n_components_ == 3
    assert MaskedPPCA(0.9, random_state=0, device="cpu").fit(X).n_components_ == PCA(0.9).fit(X).n_components_


def _mixed_patterns(n=1500, seed=0):
    """Rows of two frequent patterns of missing entries (1,000 and 200 rows) and rows of rare ones."""
    X = _data(n=n, seed=seed)
    rng = np.random.RandomState(seed)
    X[:1000, 0] = np.nan
    X[1000:1200, [2, 5]] = np.nan
    rare = rng.rand(n - 1200, X.shape[1]) < 0.25
    rare[:, 4] = False
    X[1200:][rare] = np.nan
    return X


def test_auto_mixes_moments_of_frequent_patterns_with_rows_of_rare_ones():
    X = _mixed_patterns()
    params = {"random_state": 0, "device": "cpu"}
    mixed = MaskedPPCA(2, **params).fit(X)
    observed = torch.as_tensor(~np.isnan(X))
    groups, part = mixed._solver().groups(torch.as_tensor(np.nan_to_num(X)), observed, None)
    _, counts = np.unique(~np.isnan(X), axis=0, return_counts=True)
    frequent = counts >= 100
    assert sorted(round(g.share * len(X)) for g in groups) == sorted(counts[frequent])
    assert len(groups) == 2
    assert part.X.shape[0] == counts[~frequent].sum() > 200
    assert abs(sum(g.share for g in groups) + part.share - 1) < 1e-12
    rows = MaskedPPCA(2, solver="minibatch", **params).fit(X)
    # One objective of the same expectation: the same optimum, up to the steps' noise.
    assert abs(mixed.log_marginal_likelihood(X).mean() - rows.log_marginal_likelihood(X).mean()) < 0.01


def test_integer_weights_are_repeated_rows():
    X = _data(n=1200)
    weights = np.random.RandomState(1).randint(0, 3, len(X))
    params = {"solver": "moments", "random_state": 0, "device": "cpu"}
    weighted = MaskedFactorAnalysis(2, **params).fit(X, sample_weight=weights)
    repeated = MaskedFactorAnalysis(2, **params).fit(np.repeat(X, weights, axis=0))
    np.testing.assert_allclose(weighted.score(X), repeated.score(X), rtol=1e-6)


def test_missing_entries_are_grouped_by_pattern():
    X = _data(n=2000)
    X[:500, 0] = np.nan
    X[500:900, [2, 5]] = np.nan
    params = {"random_state": 0, "device": "cpu"}
    moments = MaskedPPCA(2, solver="moments", **params).fit(X)
    rows = MaskedPPCA(2, solver="minibatch", **params).fit(X)
    assert abs(moments.score(X) - rows.score(X)) < 0.01


def test_partial_fit_accumulates_the_moments_of_every_chunk():
    X = _data(n=3000)
    params = {"solver": "moments", "random_state": 0, "device": "cpu"}
    streamed = MaskedPPCA(2, **params)
    for chunk in np.array_split(X, 3):
        streamed.partial_fit(chunk)
    assert streamed.n_iter_ == 3 and len(streamed.history_) == 3
    assert abs(streamed.score(X) - PCA(2).fit(X).score(X)) < 0.002


def test_a_start_at_pcas_solution_counts_its_smaller_steps_as_cuts():
    ppca = MaskedPPCA(2, random_state=0, device="cpu").fit(_data(n=500))
    rates = sorted({record["learning_rate"] for record in ppca.history_}, reverse=True)
    # Adam starts at a tenth of learning_rate, three of the schedule's halvings; four more end the stall.
    np.testing.assert_allclose(rates, [0.003 / 2**i for i in range(4)])
    assert ppca.converged_ and ppca.n_iter_ < 10 * 5


def test_the_solver_parameter_is_read_in_one_place():
    from skmpt.estimators._moments import MomentSolver, choose_solver
    from skmpt.estimators._trainer import MiniBatchSolver

    X = _data(n=200)
    assert type(choose_solver("minibatch")) is MiniBatchSolver
    for solver in ("auto", "moments"):
        chosen = MaskedPPCA(2, solver=solver, device="cpu").fit(X)._solver()
        assert isinstance(chosen, MomentSolver) and chosen.mode == solver and chosen.start_from is not None
    assert type(MaskedPPCA(2, solver="minibatch", device="cpu").fit(X)._solver()) is MiniBatchSolver
    # factor analysis with its own first noise variances starts from them, not from PCA's solution
    given = MaskedFactorAnalysis(2, noise_variance_init=np.ones(8), device="cpu", max_epochs=2)
    with pytest.warns(Warning):
        assert given.fit(X)._solver().start_from is None


def test_partial_fit_keeps_the_solver_of_its_first_call():
    X = _data(n=3000)
    ppca = MaskedPPCA(2, solver="moments", random_state=0, device="cpu")
    ppca.partial_fit(X[:1500])
    ppca.set_params(solver="minibatch")  # acts at the next fit: the stream goes on from moments
    ppca.partial_fit(X[1500:])
    state = ppca._partial_fit_state
    assert state.solver.mode == "moments"
    assert float(state.groups[0].moments.weight) == 3000
