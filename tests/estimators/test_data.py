"""Data as training sees them (``skmpt/estimators/_data.py``): units, missing entries, weights."""

import math

import numpy as np
import pytest
import torch

from skmpt.estimators._data import (
    check_sample_weight,
    fill_missing,
    log_jacobian,
    standardization,
    training_rows,
    weighted_mean,
)


def test_standardization_gives_mean_zero_and_unit_mean_variance():
    X = torch.as_tensor(np.random.RandomState(0).randn(50, 3) * [1.0, 10.0, 0.1] + 5.0)
    center, scale = standardization(X, "gaussian")
    Z = (X - center) / scale
    torch.testing.assert_close(Z.mean(0), torch.zeros(3, dtype=X.dtype), atol=1e-12, rtol=0)
    assert abs(float(Z.square().mean()) - 1.0) < 1e-12


def test_standardization_of_observed_entries_ignores_the_missing_ones():
    X = torch.tensor([[1.0, 2.0], [3.0, 1e9], [5.0, 6.0]], dtype=torch.float64)
    observed = torch.tensor([[True, True], [True, False], [True, True]])
    center, _ = standardization(X, "gaussian", observed)
    torch.testing.assert_close(center, torch.tensor([3.0, 4.0], dtype=torch.float64))
    filled = fill_missing(X, observed)
    assert filled[1, 1] == 0 and filled[0, 1] == 2.0 and fill_missing(X, None) is X


def test_standardization_per_feature_gives_each_observed_column_its_own_spread():
    X = torch.tensor([[1.0, 2.0, 7.0], [3.0, 1e9, 7.0], [5.0, 6.0, 7.0]], dtype=torch.float64)
    observed = torch.tensor([[True, True, True], [True, False, True], [True, True, False]])
    center, scale = standardization(X, "gaussian", observed, per_feature=True)
    torch.testing.assert_close(center, torch.tensor([3.0, 4.0, 7.0], dtype=torch.float64))
    # Root-mean-square deviations of the observed entries; one for the constant column.
    torch.testing.assert_close(scale, torch.tensor([math.sqrt(8 / 3), 2.0, 1.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="observed"):
        standardization(X, "gaussian", per_feature=True)
    tiny = torch.tensor([[0.0, 1.0], [1e-200, 2.0]], dtype=torch.float64)  # a spread float64's variances cannot hold
    with pytest.raises(ValueError, match="spread"):
        standardization(tiny, "gaussian", torch.ones_like(tiny, dtype=torch.bool), per_feature=True)


def test_binary_data_are_not_rescaled():
    center, scale = standardization(torch.tensor([[0.0, 1.0], [1.0, 1.0]]), "bernoulli")
    assert center.tolist() == [0.0, 0.0] and float(scale) == 1.0


def test_log_jacobian_counts_the_observed_entries():
    X, scale = torch.zeros(2, 4, dtype=torch.float64), torch.tensor(math.e, dtype=torch.float64)
    assert log_jacobian(X, scale) == -4.0
    observed = torch.tensor([[True, True, False, False], [True, True, True, True]])
    assert log_jacobian(X, scale, observed) == -3.0


def test_sample_weights_are_checked_and_scaled():
    assert check_sample_weight(None, 3) is None
    np.testing.assert_array_equal(check_sample_weight([2, 4, 0], 3), [0.5, 1.0, 0.0])
    for bad, message in [([1, 2], "shape"), ([1, np.nan, 1], "NaN"), ([1, -1, 1], "non-negative"), ([0, 0, 0], "zero")]:
        with pytest.raises(ValueError, match=message):
            check_sample_weight(bad, 3)
    X = torch.arange(6, dtype=torch.float64).reshape(3, 2)
    rows, observed, weights = training_rows(X, None, [1.0, 0.0, 3.0])
    assert rows.tolist() == [[0.0, 1.0], [4.0, 5.0]] and observed is None and weights.tolist() == [0.5, 1.5]
    assert weighted_mean(np.array([1.0, 3.0]), [1, 3]) == pytest.approx(2.5, rel=1e-15)
