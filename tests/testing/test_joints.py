"""TabularJoint: a table over {0, 1}**D, conditioned by brute force."""


import itertools

import numpy as np
import pytest
import torch

from skmpt.testing.joints import TabularJoint


def test_tabular_joint_validation():
    with pytest.raises(ValueError, match="shape"):
        TabularJoint(np.ones((2, 3)) / 6)
    with pytest.raises(ValueError, match="sum to one"):
        TabularJoint(np.ones((2, 2)))
    joint = TabularJoint.random(2, random_state=0)
    with pytest.raises(ValueError, match="binary"):
        joint.log_marginal(torch.tensor([[0.5, 1.0]], dtype=torch.float64))


@pytest.fixture(scope="module")
def table():
    return np.random.default_rng(0).dirichlet(np.ones(8)).reshape(2, 2, 2)


ALL = torch.tensor(list(itertools.product([0.0, 1.0], repeat=3)), dtype=torch.float64)


def test_log_marginal_is_the_table_entry(table):
    joint = TabularJoint(table)
    got = joint.log_marginal(ALL)
    assert got.shape == (8,) and got.dtype == torch.float64
    np.testing.assert_allclose(got.exp().numpy(), [table[tuple(int(v) for v in x)] for x in ALL], rtol=1e-14)
    assert joint.n_features == 3 and not joint.stochastic


def test_conditionals_are_ratios_of_table_sums(table):
    joint = TabularJoint(table)
    masks = torch.tensor([[True, False, False], [False, True, True], [True, True, True]])
    got = joint.masked_log_prob(ALL, masks).exp().numpy()
    assert got.shape == (8, 3, 3)
    for n, x in enumerate(ALL.int().tolist()):
        for p, mask in enumerate(masks.tolist()):
            rest = [d for d in range(3) if not mask[d]]

            def total(fixed, x=x):
                return sum(table[c] for c in itertools.product([0, 1], repeat=3) if all(c[d] == x[d] for d in fixed))

            for j in range(3):
                expected = total(rest + [j]) / total(rest) if mask[j] else 1.0  # exp(0) off the mask
                np.testing.assert_allclose(got[n, p, j], expected, rtol=1e-12)


def test_per_sample_masks_give_each_sample_its_own_conditionals(table):
    joint = TabularJoint(table)
    masks = torch.tensor([[True, False, False], [False, True, True]])
    per_sample = masks[torch.tensor([[0], [1]] * 4)]  # (8, 1, 3): alternate masks
    got = joint.masked_log_prob(ALL, per_sample)
    shared = joint.masked_log_prob(ALL, masks)
    torch.testing.assert_close(got[:, 0], shared[torch.arange(8), torch.tensor([0, 1] * 4)])


def test_entries_not_observed_are_summed_out_whatever_they_hold(table):
    joint = TabularJoint(table)
    observed = torch.tensor([True, False, True])
    X = torch.tensor([[1.0, float("nan"), 0.0], [0.0, 7.0, 1.0]], dtype=torch.float64)
    expected = [table[1, :, 0].sum(), table[0, :, 1].sum()]
    np.testing.assert_allclose(joint.log_marginal(X, observed=observed).exp().numpy(), expected, rtol=1e-14)
    # p(x_0 | x_2) with x_1 summed out
    got = joint.masked_log_prob(X, torch.tensor([[True, False, False]]), observed=observed)
    np.testing.assert_allclose(float(got[0, 0, 0].exp()), table[1, :, 0].sum() / table[:, :, 0].sum(), rtol=1e-12)
    assert not got[:, :, 1:].any()
    nothing = joint.log_marginal(X, observed=torch.zeros(2, 3, dtype=torch.bool))
    assert torch.equal(nothing, torch.zeros(2, dtype=torch.float64))


def test_output_takes_the_dtype_of_x(table):
    joint = TabularJoint(table)
    X = ALL.float()
    assert joint.log_marginal(X).dtype == torch.float32
    assert joint.masked_log_prob(X, torch.tensor([[True, False, True]])).dtype == torch.float32


def test_random_tables_are_reproducible_dirichlet_draws():
    a, b = TabularJoint.random(5, random_state=4), TabularJoint.random(5, random_state=4)
    assert torch.equal(a.probabilities, b.probabilities) and a.probabilities.shape == (32,)
    assert not torch.equal(a.probabilities, TabularJoint.random(5, random_state=5).probabilities)
    np.testing.assert_allclose(float(a.probabilities.sum()), 1.0, rtol=1e-12)
    # a small concentration puts most of the mass on a few configurations
    peaked = TabularJoint.random(5, concentration=0.05, random_state=4).probabilities
    assert float(peaked.max()) > float(a.probabilities.max())


def test_draws_are_reproducible_and_follow_the_table(table):
    joint = TabularJoint(table)
    X = joint.sample(20000, random_state=0)
    assert X.shape == (20000, 3) and X.dtype == torch.float64
    assert torch.equal(X, joint.sample(20000, random_state=0))
    index = (X @ torch.tensor([4.0, 2.0, 1.0], dtype=torch.float64)).long()  # row-major index of each draw
    np.testing.assert_allclose(np.bincount(index.numpy(), minlength=8) / 20000, table.reshape(-1), atol=0.01)


@pytest.mark.parametrize(
    ("probabilities", "message"),
    [
        (0.5, r"shape \(2,\) \* n_features; got \(\)"),
        (np.full((2, 2, 2, 1), 1 / 8), r"shape \(2,\) \* n_features; got \(2, 2, 2, 1\)"),
        ([[0.6, -0.1], [0.25, 0.25]], "non-negative and sum to one"),
    ],
)
def test_bad_tables_are_refused(probabilities, message):
    with pytest.raises(ValueError, match=message):
        TabularJoint(probabilities)


def test_non_binary_data_is_refused_in_conditionals_too(table):
    joint = TabularJoint(table)
    with pytest.raises(ValueError, match="TabularJoint models binary data: X must contain only 0 and 1"):
        joint.masked_log_prob(torch.tensor([[0.0, 2.0, 1.0]], dtype=torch.float64), torch.tensor([[True] * 3]))
