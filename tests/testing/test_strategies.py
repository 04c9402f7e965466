"""The hypothesis strategies draw models that keep the identity."""

import numpy as np
from hypothesis import given

from support.helpers import make_ppca_module
from skmpt.testing import check_mpt_identity, ppca_parameters


@given(params=ppca_parameters(max_features=5))
def test_ppca_strategy_and_sampled_methods(params):
    module = make_ppca_module(*params)
    X = np.random.RandomState(0).randn(3, params[1].shape[0])
    assert check_mpt_identity(module, X, method="chain", score_masks=2, random_state=0).max_rel_discrepancy < 1e-9
