"""Importance-sampling diagnostics against their closed forms on weights whose answer is known."""

import math

import numpy as np
import pytest

from skmpt.models import importance_diagnostics
from skmpt.models.importance import (effective_sample_size, log_mean_standard_error, pareto_k_threshold,
                                     pareto_khat)


def test_effective_sample_size_and_standard_error_of_known_weights():
    log_weights = np.array([[0.0, 0.0, 0.0, 0.0], [np.log(3.0), 0.0, -np.inf, -np.inf]])
    np.testing.assert_allclose(effective_sample_size(log_weights), [4.0, 16 / 10])
    # se(log mean w) = s / (sqrt(S) mean w) with the unbiased variance s^2 of the weights
    w = np.array([3.0, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(log_mean_standard_error(log_weights), [0.0, w.std(ddof=1) / (2 * w.mean())])
    assert np.isnan(log_mean_standard_error(np.zeros((2, 1)))).all()


def test_the_diagnostics_hold_the_estimate_and_flag_heavy_tails():
    rng = np.random.RandomState(0)
    light, heavy = 0.3 * rng.randn(2000), np.log(rng.pareto(1.25, size=2000) + 1)
    d = importance_diagnostics(np.stack([light, heavy]))
    np.testing.assert_allclose(d["log_mean"], np.log(np.exp(np.stack([light, heavy])).mean(1)))
    assert d["reliable"].tolist() == [True, False]
    assert d["pareto_k"][0] < 0.5 < 0.7 < d["pareto_k"][1]


@pytest.mark.parametrize("shape", [0.2, 0.5, 0.9])
def test_pareto_khat_recovers_the_shape_of_a_generalised_pareto_tail(shape):
    rng = np.random.RandomState(1)
    draws = (rng.uniform(size=(20, 4000)) ** -shape - 1) / shape  # generalised Pareto of shape k
    assert abs(np.median(pareto_khat(np.log(draws + 1e-300))) - shape) < 0.1


def test_pareto_k_threshold_is_the_published_rule():
    assert pareto_k_threshold(10) == 0.0  # too few draws: never reliable
    assert pareto_k_threshold(100) == pytest.approx(0.5)
    assert pareto_k_threshold(2200) == pytest.approx(min(1 - 1 / math.log10(2200), 0.7)) == 0.7
    assert np.isinf(pareto_khat(np.zeros((3, 20)))).all()  # fewer than five weights in the tail
