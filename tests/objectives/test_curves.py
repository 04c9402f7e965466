"""Reductions of computed MPT curves: mask sums to S(x; M), a curve to its area, against explicit sums."""

import numpy as np
import pytest
import torch

from skmpt.objectives.curves import curve_area, mean_over_masks


def test_mean_over_masks_is_the_groupwise_mean_of_sum_over_size():
    rng = np.random.default_rng(0)
    sums = -rng.random((3, 2, 12))  # (..., n_groups * score_masks) with 3 groups of 4
    sizes = np.repeat([1, 2, 5], 4)
    got = mean_over_masks(sums, sizes, 4)
    assert got.shape == (3, 2, 3)
    expected = np.empty((3, 2, 3))
    for g in range(3):
        expected[..., g] = sum(sums[..., 4 * g + i] / sizes[4 * g + i] for i in range(4)) / 4
    np.testing.assert_allclose(got, expected, rtol=1e-14)


def test_mean_over_masks_takes_tensors_and_keeps_their_dtype():
    sums = torch.tensor([[-2.0, -4.0, -3.0, -9.0]], dtype=torch.float32)
    got = mean_over_masks(sums, torch.tensor([1, 1, 3, 3]), 2)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    torch.testing.assert_close(got, torch.tensor([[-3.0, -2.0]]))
    # one mask per group: just sum / size; per-sample sizes broadcast too
    per_sample = mean_over_masks(np.array([[-2.0, -6.0], [-3.0, -3.0]]), np.array([[1, 2], [3, 1]]), 1)
    np.testing.assert_allclose(per_sample, [[-2.0, -3.0], [-1.0, -3.0]])


@pytest.mark.parametrize("score_masks", [0, -1, 2.5, "2"])
def test_mean_over_masks_refuses_a_bad_group_size(score_masks):
    with pytest.raises((ValueError, TypeError), match="score_masks"):
        mean_over_masks(np.zeros(4), np.ones(4), score_masks)


def test_mean_over_masks_refuses_masks_that_do_not_split_into_groups():
    with pytest.raises(ValueError, match="5 masks do not split into groups of score_masks=2"):
        mean_over_masks(np.zeros(5), np.ones(5), 2)


def test_curve_area_is_a_left_riemann_sum_from_zero():
    rng = np.random.default_rng(1)
    rates = np.sort(rng.choice(np.arange(1, 100), 7, replace=False)) / 100
    curve = -rng.random((4, 7))
    expected = np.array([sum((rates[i] - (rates[i - 1] if i else 0.0)) * row[i] for i in range(7)) for row in curve])
    np.testing.assert_allclose(curve_area(curve, rates), expected, rtol=1e-14)
    np.testing.assert_allclose(curve_area(curve, rates, scale=512), 512 * expected, rtol=1e-14)


def test_curve_area_with_rates_m_over_d_is_the_cumulative_score():
    D = 9
    curve = -np.arange(1.0, D + 1)[None] * np.array([[1.0], [0.5]])
    area = curve_area(curve, np.arange(1, D + 1) / D, scale=D)
    assert area.shape == (2,) and area.dtype == np.float64
    np.testing.assert_allclose(area, curve.sum(-1), rtol=1e-14)
    # a list, a tensor and a single curve are accepted
    assert curve_area(torch.tensor([-1.0, -3.0]).tolist(), [0.5, 1.0]).shape == ()
    np.testing.assert_allclose(curve_area(torch.tensor([-1.0, -3.0]), [0.5, 1.0]), -2.0)


@pytest.mark.parametrize(
    ("curve", "rates", "message"),
    [
        (np.zeros((2, 3)), [0.2, 0.5], "one value per rate; got shapes \\(2, 3\\) and \\(2,\\)"),
        (np.zeros(2), [[0.2, 0.5]], "one value per rate"),
        (np.zeros(2), [0.5, 0.5], r"strictly increasing in \(0, 1\]; got \[0.5, 0.5\]"),
        (np.zeros(2), [0.6, 0.3], "strictly increasing"),
        (np.zeros(2), [0.0, 0.5], "strictly increasing"),
        (np.zeros(2), [0.5, 1.5], "strictly increasing"),
    ],
)
def test_curve_area_refuses_rates_that_do_not_fit(curve, rates, message):
    with pytest.raises(ValueError, match=message):
        curve_area(curve, rates)
