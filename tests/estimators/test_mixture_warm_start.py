"""``MaskedGaussianMixture(warm_start=True)``: a refit continues the fitted mixture only when it still matches.

A warm start refitted after ``set_params(n_components=3)`` used to keep its 2-component model and
report ``n_components_ = 3`` (its ``bic`` then counted the wrong parameters), and data of another
width gave a raw numpy broadcast error; both are a ``ValueError`` naming what changed, before the
fitted mixture changes. A huge learning rate is the library's ``FloatingPointError``.
"""

import copy
import functools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedGaussianMixture
from skmpt.estimators import gaussian_mixture

COVARIANCE_TYPES = ["full", "diag", "spherical", "tied"]


def _data(n_features=3, seed=0):
    rng = np.random.RandomState(seed)
    return np.vstack([rng.randn(30, n_features), rng.randn(30, n_features) + 4])


@functools.cache
def _fitted(covariance_type):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return MaskedGaussianMixture(2, covariance_type=covariance_type, warm_start=True, max_epochs=2,
                                     random_state=0, device="cpu").fit(_data())


def _state(mixture):
    return {name: np.copy(value) for name, value in vars(mixture).items() if name.endswith("_")
            and isinstance(value, np.ndarray)}


@settings(max_examples=20, deadline=None)
@given(covariance_type=st.sampled_from(COVARIANCE_TYPES), new_type=st.sampled_from(COVARIANCE_TYPES),
       n_components=st.integers(1, 4), n_features=st.integers(1, 5))
def test_a_warm_start_that_no_longer_matches_is_refused_before_anything_changes(covariance_type, new_type,
                                                                               n_components, n_features):
    mixture = copy.deepcopy(_fitted(covariance_type))
    before = _state(mixture)
    mixture.set_params(covariance_type=new_type, n_components=n_components)
    if (new_type, n_components, n_features) == (covariance_type, 2, 3):
        return  # it matches: the refit continues (next test)
    if new_type != covariance_type:  # the first mismatch is named
        message = f"whose covariance_type is '{covariance_type}'; covariance_type is now '{new_type}'"
    elif n_components != 2:
        message = f"whose n_components is 2; n_components is now {n_components}"
    else:
        message = f"of 3 features; X has {n_features}"
    with pytest.raises(ValueError, match=message):
        mixture.fit(_data(n_features, seed=1))
    assert mixture.n_components_ == 2 and mixture.n_features_in_ == 3
    after = _state(mixture)
    assert after.keys() == before.keys()
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)


def test_a_warm_start_that_matches_continues_and_counts_its_own_parameters():
    mixture = copy.deepcopy(_fitted("full"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mixture.fit(_data(seed=1))
    assert mixture.n_components_ == 2
    X = _data(seed=2)
    # bic = -2 log L + p log n: the full 2-component mixture in 3 dimensions has p = 19 parameters
    n_parameters = (mixture.bic(X) + 2 * mixture.score(X) * len(X)) / np.log(len(X))
    assert n_parameters == pytest.approx(19)


def test_a_mixture_that_diverges_says_so_and_names_the_learning_rate():
    with pytest.raises(FloatingPointError, match=r"(?i)diverged.*learning_rate"):
        MaskedGaussianMixture(2, learning_rate=1e3, max_epochs=30, random_state=0, device="cpu").fit(_data())


def test_a_warm_start_with_em_runs_em_from_the_fitted_parameters(monkeypatch):
    # The refit of a mixture fitted on a subsample (MaskedModelSearch's candidates): EM from its
    # parameters on every row, not from a new k-means start, then MPT.
    X = _data(n_features=4)
    X[np.random.RandomState(1).rand(*X.shape) < 0.2] = np.nan
    options = {"init_params": "em", "learning_rate": 1e-3, "n_iter_no_change": 1, "random_state": 0}
    with warnings.catch_warnings():  # 20 rows: a component's covariance runs down to the floor
        warnings.simplefilter("ignore", ConvergenceWarning)
        subsample = MaskedGaussianMixture(2, **options).fit(X[::3])
    climb, starts = gaussian_mixture.em_climb, []

    def recorded(X, observed, weights, params, *args, **kwargs):
        starts.append(params)
        return climb(X, observed, weights, params, *args, **kwargs)

    monkeypatch.setattr(gaussian_mixture, "em_start", None)  # no k-means start
    monkeypatch.setattr(gaussian_mixture, "em_climb", recorded)
    refit = copy.deepcopy(subsample).set_params(warm_start=True).fit(X)
    assert len(starts) == 1
    assert refit.converged_
    assert refit.score(X) > subsample.score(X) + 0.01  # converged_: EM's check says at the optimum
    # the components keep the subsample's order: each refitted mean is nearest its own start
    distances = ((refit.means_[:, None] - subsample.means_[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(distances.argmin(1), [0, 1])
