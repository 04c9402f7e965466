"""One registry of the MPT estimators, read by both halves; renamed parameters warn with the new name."""

import warnings

import pytest

from skmpt import objectives
from skmpt.objectives.vocabulary import MPT_ESTIMATORS, renamed_parameter
from skmpt.text.strategies import ESTIMATOR_METHODS, estimator_strategy


def test_both_halves_read_their_names_from_the_registry():
    assert objectives.SCORE_METHODS == tuple(name for name, e in MPT_ESTIMATORS.items() if e.arrays)
    assert objectives.SCORE_METHODS == ("exhaustive", "sweep", "nested", "chain")  # 0.1.0's, in its order
    assert list(ESTIMATOR_METHODS) == [name for name, e in MPT_ESTIMATORS.items() if e.text]
    assert all(e.description and e.copies for e in MPT_ESTIMATORS.values())


@pytest.mark.parametrize("name", [name for name in ESTIMATOR_METHODS if name != "exhaustive"])
def test_the_pairing_the_registry_states_is_what_the_strategy_declares(name):
    assert estimator_strategy(name, 4).paired == MPT_ESTIMATORS[name].paired


def test_a_renamed_parameter_warns_with_its_new_name_and_the_old_value_wins():
    with pytest.warns(FutureWarning, match=r"f: the parameter method was renamed score_method .* score_method='chain'"):
        assert renamed_parameter("method", "chain", "score_method", "sweep", "f") == "chain"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert renamed_parameter("method", "deprecated", "score_method", "sweep", "f") == "sweep"
