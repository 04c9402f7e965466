"""The estimators of sum_M S(x; M): each one's expectation is the enumeration's, read from a table of every mask."""

import numpy as np
import pytest
import torch

from skmpt.text.strategies import (AllocatedSizeMasks, BalancedMasks, ChainMasks, ControlledMasks, ExhaustiveMasks,
                                   NestedMasks, _allocated_sizes, _balanced_windows, _size_allocation,
                                   _stratified_sizes, estimator_strategy, least_variance_estimator, pilot_variances)

LENGTH = 5


@pytest.fixture(scope="module")
def table():
    """A log-probability for each token under each of the 31 masks: conditionals of no joint at all."""
    masked, _ = ExhaustiveMasks().copies(LENGTH, None)
    values = -np.random.default_rng(0).gamma(2.0, 1.0, masked.shape)
    return np.where(masked.numpy(), values, np.nan)


def estimate(table, strategy, seed):
    masked, targets = strategy.copies(LENGTH, torch.Generator().manual_seed(seed))
    rows = masked.numpy() @ (2 ** np.arange(LENGTH))
    values = np.where(targets.numpy(), table[np.maximum(rows, 1) - 1], np.nan)
    if not strategy.per_target:
        values = np.nansum(values, 1)
    return strategy.draws(masked, values).mean()


@pytest.mark.parametrize("method", ["stratified", "balanced", "allocated", "adjusted", "controlled", "antithetic",
                                    "nested", "chain", "sweep", "uniform", "low_discrepancy", "time"])
def test_every_estimator_has_the_enumerations_expectation(table, method):
    exact = ExhaustiveMasks().reduce(torch.from_numpy(~np.isnan(table)), np.nansum(table, 1))
    estimates = np.array([estimate(table, estimator_strategy(method, 4), seed) for seed in range(1500)])
    error = estimates.std(ddof=1) / np.sqrt(len(estimates))
    assert abs(estimates.mean() - exact) < 4 * error + 1e-12


def test_stratified_sizes_are_each_uniform():
    # every start gives each copy a size; over the starts each copy's size is uniform on 1..L
    sizes = np.array([_stratified_sizes(7, 3, torch.Generator().manual_seed(seed)) for seed in range(3000)])
    for column in sizes.T:
        counts = np.bincount(column, minlength=4)[1:] / len(column)
        assert np.allclose(counts, 1 / 3, atol=0.04)
    # the spacing rounds down: LLaDA's rounding of halves to even would favour even sizes here
    assert sorted(_stratified_sizes(4, 6, torch.Generator().manual_seed(0)) - 1) in ([0, 1, 3, 4], [1, 2, 4, 5],
                                                                                   [0, 2, 3, 5])


@pytest.mark.parametrize(("copies", "exponent", "control"), [(9, 0.25, False), (4, 1.5, False), (21, 0.25, True)])
def test_allocated_sizes_keep_the_enumerations_expectation_whether_a_size_always_has_a_copy_or_not(table, copies,
                                                                                                    exponent, control):
    # 8 copies over sizes 1..4: every size expects more than one copy (each size's mean); 3 copies at exponent 1.5:
    # size 1 expects 1.8, the others less than one (their sum over the expected count); 20 copies of 5 tokens: the
    # fitted control variate (4 copies per token)
    expected = _size_allocation(copies - 1, LENGTH - 1, exponent)
    assert (expected >= 1).all() if copies != 4 else (expected >= 1).tolist() == [True, False, False, False]
    strategy = AllocatedSizeMasks(copies, exponent=exponent, control=control)
    exact = ExhaustiveMasks().reduce(torch.from_numpy(~np.isnan(table)), np.nansum(table, 1))
    estimates = np.array([estimate(table, strategy, seed) for seed in range(1500)])
    assert abs(estimates.mean() - exact) < 4 * estimates.std(ddof=1) / np.sqrt(len(estimates))
    # systematic sampling: each size gets floor or ceil of its expected copies, and on average exactly them
    counts = np.array([np.bincount(_allocated_sizes(copies - 1, LENGTH - 1, exponent,
                                                    torch.Generator().manual_seed(seed)), minlength=LENGTH)[1:]
                       for seed in range(2000)])
    assert ((counts == np.floor(expected)) | (counts == np.ceil(expected))).all()
    assert np.allclose(counts.mean(0), expected, atol=0.05)
    masked, targets = strategy.copies(LENGTH, torch.Generator().manual_seed(0))
    assert masked[0].all() and not masked[1:].all(1).any()  # the all-masked copy once, first
    if control:  # the control variate is used: the draws differ from those without it
        values = np.where(targets.numpy(), table[masked.numpy() @ (2 ** np.arange(LENGTH)) - 1], np.nan)
        plain = AllocatedSizeMasks(copies, exponent=exponent).draws(masked, np.nansum(values, 1))
        assert not np.allclose(strategy.draws(masked, values), plain)
    # without the all-masked copy (a later round's), its values given: the same draws from the other copies
    carried = AllocatedSizeMasks(copies - 1, exponent=exponent, control=control, full=False)
    targets = targets.numpy()
    values = np.where(targets, table[masked.numpy() @ (2 ** np.arange(LENGTH)) - 1], np.nan)
    values = values if control else np.nansum(values, 1)
    assert np.allclose(carried.draws(masked[1:], values[1:], full_values=values[0]), strategy.draws(masked, values))
    assert carried.copies(LENGTH, torch.Generator().manual_seed(0))[0].all(1).sum() == 0
    with pytest.raises(ValueError, match="full_values is needed"):
        carried.draws(masked[1:], values[1:])
    with pytest.raises(ValueError, match="score_masks >= 3"):
        AllocatedSizeMasks(2, return_std=True)
    with pytest.raises(ValueError, match="exponent must be a finite number >= 0"):
        AllocatedSizeMasks(4, exponent=-1.0)


@pytest.mark.parametrize("control", [False, True])
def test_allocated_standard_errors_leave_the_sizes_differences_out_and_are_calibrated(table, control):
    strategy = AllocatedSizeMasks(33, return_std=True, control=control)  # 32 copies over 4 sizes: 7 or more each
    exact = ExhaustiveMasks().reduce(torch.from_numpy(~np.isnan(table)), np.nansum(table, 1))
    z = []
    for seed in range(300):
        masked, targets = strategy.copies(LENGTH, torch.Generator().manual_seed(seed))
        values = np.where(targets.numpy(), table[masked.numpy() @ (2 ** np.arange(LENGTH)) - 1], np.nan)
        value, std = strategy.reduce(masked, values if control else np.nansum(values, 1))
        z.append((value - exact) / std)
    assert abs(np.mean(z)) < 4 / np.sqrt(len(z)) and 0.85 < np.std(z) < 1.2
    # log p = -1 per token at every size: no error at all, though the sizes' weighed terms differ
    masked, _ = strategy.copies(LENGTH, torch.Generator().manual_seed(0))
    value, std = strategy.reduce(masked, np.where(masked.numpy(), -1.0, np.nan) if control else -masked.sum(1).numpy())
    assert value == pytest.approx(-LENGTH) and std == pytest.approx(0.0, abs=1e-12)


def test_the_adjusted_control_removes_additive_token_effects_and_costs_little_where_they_explain_nothing(table):
    effects = np.random.default_rng(1).normal(-3.0, 2.0, 12)
    spread = {}
    for control in (False, True):  # additive token effects: what the control variate takes out
        strategy = AllocatedSizeMasks(49, control=control)  # 48 copies: 4 per token, enough to fit the control
        found = []
        for seed in range(60):
            masked, _ = strategy.copies(12, torch.Generator().manual_seed(seed))
            values = np.where(masked.numpy(), effects, np.nan)
            found.append(strategy.draws(masked, values if control else np.nansum(values, 1)).mean())
        spread[control] = np.var(found)
    assert spread[True] < 0.01 * spread[False]
    # masking a token lowers the others' log-probabilities (a pair's effect): the second control variate takes it out
    pairs = np.random.default_rng(2).normal(0.0, 0.5, 12)
    found = {False: [], True: []}
    for seed in range(60):
        masked, _ = AllocatedSizeMasks(49).copies(12, torch.Generator().manual_seed(seed))
        held = masked.numpy()
        values = np.where(held, effects + (held @ pairs)[:, None] - pairs, np.nan)
        for control in (False, True):
            found[control].append(AllocatedSizeMasks(49, control=control).draws(
                masked, values if control else np.nansum(values, 1)).mean())
    assert np.var(found[True]) < 1e-6 * np.var(found[False])
    mixed = table - np.nanmean(table, 0)  # the table's interactions alone: no token is harder than another
    for control in (False, True):
        strategy = AllocatedSizeMasks(33, control=control)
        found = []
        for seed in range(300):
            masked, _ = strategy.copies(LENGTH, torch.Generator().manual_seed(seed))
            values = np.where(masked.numpy(), mixed[masked.numpy() @ (2 ** np.arange(LENGTH)) - 1], np.nan)
            found.append(strategy.draws(masked, values if control else np.nansum(values, 1)).mean())
        spread[control] = np.var(found)
    assert spread[True] < 1.3 * spread[False]  # the fitted coefficient stays near 0
    # fewer than 4 copies per token: no control variate, the draws are allocated's
    masked, _ = AllocatedSizeMasks(19).copies(LENGTH, torch.Generator().manual_seed(0))
    values = np.where(masked.numpy(), mixed[masked.numpy() @ (2 ** np.arange(LENGTH)) - 1], np.nan)
    assert np.array_equal(AllocatedSizeMasks(19, control=True).draws(masked, values),
                          AllocatedSizeMasks(19).draws(masked, np.nansum(values, 1)))


def test_antithetic_orderings_come_in_reversed_pairs():
    masked, targets = ChainMasks(4, antithetic=True).copies(LENGTH, torch.Generator().manual_seed(0))
    order = targets.numpy().reshape(4, LENGTH, LENGTH).argmax(2)  # the token each step adds
    assert (order[1] == order[0][::-1]).all() and (order[3] == order[2][::-1]).all()
    with pytest.raises(ValueError, match="pairs"):
        ChainMasks(3, antithetic=True)
    with pytest.raises(ValueError, match="pairs"):
        NestedMasks(3)


def test_the_control_variate_removes_the_spread_of_additive_token_effects():
    masked, _ = ControlledMasks(8).copies(LENGTH, torch.Generator().manual_seed(1))
    effects = np.array([-0.5, -3.0, -1.0, -6.0, -2.0])
    values = np.where(masked.numpy(), effects, np.nan)  # each token as hard whatever else is masked
    controlled = ControlledMasks(8).draws(masked, values)
    plain = estimator_strategy("stratified", 8).draws(masked, np.nansum(values, 1))
    assert controlled.std() < 0.05 * plain.std()
    assert controlled.mean() == pytest.approx(effects.sum(), abs=0.05)


def test_balanced_windows_cover_each_position_nearly_equally_often_and_each_alone_is_uniform():
    masked = _balanced_windows([4, 4, 4, 2, 2, 2], 7, torch.Generator().manual_seed(0))
    assert masked.sum(1).tolist() == [4, 4, 4, 2, 2, 2]
    for rows in (slice(0, 3), slice(3, 6)):
        counts = masked[rows].sum(0)
        assert int(counts.max() - counts.min()) <= 1  # 12 (or 6) slots over 7 positions: 1 or 2 (0 or 1) each
    # one window's mask, over seeds: every position is in it with probability M / L
    first = np.array([_balanced_windows([3, 3], 6, torch.Generator().manual_seed(s))[0].numpy() for s in range(3000)])
    assert np.allclose(first.mean(0), 0.5, atol=0.04)


def test_balanced_masks_run_the_all_masked_copy_once_and_spread_less_than_llada_on_additive_effects(table):
    masked, _ = BalancedMasks(9).copies(LENGTH, torch.Generator().manual_seed(0))
    assert masked[0].all() and not masked[1:].all(1).any()
    with pytest.raises(ValueError, match="score_masks >= 3"):
        BalancedMasks(2, return_std=True)
    effects = np.random.default_rng(1).normal(-3.0, 2.0, 12)
    spread = {}  # additive token effects: what balancing positions within a size cancels
    for name in ("balanced", "stratified"):
        strategy = estimator_strategy(name, 48)  # 4 copies per size: balance needs several
        draws = []
        for seed in range(300):
            copies, _ = strategy.copies(12, torch.Generator().manual_seed(seed))
            draws.append(strategy.draws(copies, copies.numpy() @ effects).mean())
        spread[name] = np.var(draws)
    assert spread["balanced"] < 0.5 * spread["stratified"]


def test_the_pilot_chooses_the_control_variate_only_where_token_effects_explain_the_spread(table):
    masked, _ = ControlledMasks(16).copies(LENGTH, torch.Generator().manual_seed(0))
    additive = np.where(masked.numpy(), np.array([-0.5, -3.0, -1.0, -6.0, -2.0]), np.nan)
    assert least_variance_estimator(pilot_variances(masked, additive)) == "controlled"
    rows = masked.numpy() @ (2 ** np.arange(LENGTH))
    mixed = table[rows - 1] - np.nanmean(table, 0)  # the table's interactions alone: no token is harder than another
    variances = pilot_variances(masked, mixed)
    assert variances["controlled"] > 0.5 * variances["terms"]
    assert least_variance_estimator(variances) == "balanced"


def test_nested_orderings_share_the_all_masked_copy(table):
    strategy = NestedMasks(4, return_std=True)
    masked, _ = strategy.copies(LENGTH, torch.Generator().manual_seed(1))
    assert len(masked) == strategy.n_copies(LENGTH) == 4 * (LENGTH - 1) + 1
    assert masked[0].all() and not masked[1:].all(1).any()  # the all-masked copy once, first
    # each ordering's copies are nested, one more token each
    sizes = masked[1:].sum(1).reshape(4, LENGTH - 1)
    assert (sizes == torch.arange(1, LENGTH)).all()
    rows = masked.numpy() @ (2 ** np.arange(LENGTH))
    values = np.where(masked.numpy(), table[rows - 1], np.nan)
    value, std = strategy.reduce(masked, values)
    assert std > 0 and value == pytest.approx(strategy.draws(masked, values).mean())
    with pytest.raises(ValueError,
                       match="'score_masks' parameter of NestedMasks must be an int in the range \\[1, inf\\)"):
        NestedMasks(0)
    with pytest.raises(ValueError, match="at least 2"):
        NestedMasks(1, return_std=True, antithetic=False)
    with pytest.raises(ValueError, match="chain_weight must be a finite number"):
        NestedMasks(2, chain_weight=float("nan"))


def test_the_nested_chain_weight_keeps_the_expectation(table):
    exact = ExhaustiveMasks().reduce(torch.from_numpy(~np.isnan(table)), np.nansum(table, 1))
    for weight in (0.0, 0.7):  # the default, 1, is in the test of every estimator
        strategy = NestedMasks(2, chain_weight=weight)
        estimates = np.array([estimate(table, strategy, seed) for seed in range(1500)])
        assert abs(estimates.mean() - exact) < 4 * estimates.std(ddof=1) / np.sqrt(len(estimates)) + 1e-12


def test_least_variance_estimator_falls_back_to_the_named_estimator():
    spread = {"terms": 1.0, "controlled": 0.9}
    assert least_variance_estimator(spread, otherwise="nested") == "nested"
    assert least_variance_estimator({"terms": 1.0, "controlled": 0.1}, otherwise="nested") == "controlled"
    with pytest.raises(ValueError, match="otherwise"):
        least_variance_estimator(spread, otherwise="auto")



def test_n_masks_is_renamed_score_masks_with_a_future_warning():
    from skmpt.text.strategies import CurveMasks, SweepMasks, TimeMasks

    for make in (lambda: SweepMasks(n_masks=3), lambda: TimeMasks(n_masks=3), lambda: BalancedMasks(n_masks=3),
                 lambda: CurveMasks([0.5], n_masks=3), lambda: NestedMasks(n_masks=4), lambda: ChainMasks(n_masks=3)):
        with pytest.warns(FutureWarning, match="the parameter n_masks was renamed score_masks"):
            assert make().score_masks in (3, 4)
    with pytest.warns(FutureWarning, match="estimator_strategy: the parameter method was renamed score_method"):
        assert type(estimator_strategy(method="chain", score_masks=2)) is ChainMasks


@pytest.mark.parametrize("name", ["size_masks", "chain_masks", "within_word_l2r_masks", "stratified_sizes",
                                  "balanced_windows", "token_effects"])
def test_the_0_1_0_mask_helpers_warn_and_still_work(name):
    import skmpt.text.strategies as strategies

    with pytest.warns(FutureWarning, match=rf"skmpt.text.strategies.{name} is deprecated since 0.2.0"):
        helper = getattr(strategies, name)
    assert callable(helper) and helper.__name__ == f"_{name}"
    with pytest.raises(AttributeError, match="has no attribute 'no_such_helper'"):
        _ = strategies.no_such_helper
