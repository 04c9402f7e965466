"""The hypothesis strategies draw models that keep the identity."""


import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from support.helpers import make_ppca_module

from skmpt.testing import check_mpt_identity
from skmpt.testing.joints import TabularJoint
from skmpt.testing.strategies import ppca_parameters, tabular_joints


@given(params=ppca_parameters(max_features=5))
def test_ppca_strategy_and_sampled_methods(params):
    module = make_ppca_module(*params)
    X = np.random.RandomState(0).randn(3, params[1].shape[0])
    assert check_mpt_identity(module, X, score_method="chain", score_masks=2, random_state=0).max_rel_discrepancy < 1e-9


@settings(max_examples=30)
@given(joint=tabular_joints(min_features=2, max_features=4))
def test_tabular_joints_are_valid_tables_with_no_empty_configuration(joint):
    assert isinstance(joint, TabularJoint)
    assert 2 <= joint.n_features <= 4 and joint.probabilities.shape == (2**joint.n_features,)
    np.testing.assert_allclose(float(joint.probabilities.sum()), 1.0, rtol=1e-12)
    # every entry is at least 1e-3 of at most 2**D entries of at most 1 before normalising
    assert float(joint.probabilities.min()) >= 1e-3 / 2**joint.n_features
    X = joint.sample(3, random_state=0)
    assert bool(torch.isfinite(joint.masked_log_prob(X, torch.ones(1, joint.n_features, dtype=torch.bool))).all())


@settings(max_examples=30)
@given(params=ppca_parameters(min_features=2, max_features=5, max_components=2))
def test_ppca_parameters_have_consistent_shapes_and_bounded_values(params):
    components, mean, noise_variance = params
    n_components, n_features = components.shape
    assert 2 <= n_features <= 5 and 1 <= n_components <= min(2, n_features)
    assert mean.shape == (n_features,) and components.dtype == mean.dtype == np.float64
    assert np.all(np.abs(components) <= 3.0) and np.all(np.abs(mean) <= 3.0)
    assert 0.05 <= noise_variance <= 5.0


@settings(max_examples=20)
@given(joint=tabular_joints(min_features=1, max_features=1))
def test_one_feature_tables_are_drawn_when_asked(joint):
    assert joint.n_features == 1


def test_strategies_name_the_missing_dependency(monkeypatch):
    monkeypatch.setitem(sys.modules, "hypothesis", None)
    monkeypatch.setitem(sys.modules, "hypothesis.strategies", None)
    for strategy in (tabular_joints, ppca_parameters):
        with pytest.raises(ImportError, match=r"strategies need hypothesis: pip install 'skmpt\[test\]'"):
            strategy()
