"""Every registered estimator's fitted ``module_`` keeps the masked-model contract.

The estimators come from :data:`skmpt.estimators.ESTIMATORS`, the registry the common tests and
the API reference read: a new estimator is checked here without an edit.
"""

import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from skmpt.estimators import ESTIMATORS
from skmpt.testing import check_masked_model

CONFIGURATIONS = [
    pytest.param(cls, params, id=f"{name}-{i}")
    for name, (cls, configurations) in ESTIMATORS.items()
    for i, params in enumerate(configurations)
]


@pytest.mark.parametrize("cls, params", CONFIGURATIONS)
def test_fitted_module_keeps_the_contract(cls, params):
    rng = np.random.RandomState(0)
    X = rng.randn(40, 4) @ rng.randn(4, 4)
    if {**cls().get_params(), **params}.get("likelihood") == "bernoulli":
        X = (X > 0).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        estimator = cls(**params, random_state=0, device="cpu").fit(X)
    module = estimator.module_
    report = check_masked_model(module, torch.as_tensor(X[:5], dtype=torch.float64))
    for key in ("masked_log_prob output", "masked_log_prob_sum"):
        assert report[key] <= 1e-9, (key, report[key])
