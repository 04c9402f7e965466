import itertools
import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from skmpt import masks


def test_fixed_rate_exact_size_and_floor():
    m = masks.fixed_rate_masks((50, 3), 10, 0.15, random_state=0)
    assert m.shape == (50, 3, 10) and m.dtype == torch.bool
    assert (m.sum(-1) == 2).all()  # round(1.5) = 2
    assert (masks.fixed_rate_masks(20, 4, 0.01, random_state=0).sum(-1) == 1).all()
    assert (masks.fixed_rate_masks(5, 4, 1.0, random_state=0).sum(-1) == 4).all()
    assert masks.mask_size_for_rate(0.15, 512) == round(0.15 * 512)


@pytest.mark.parametrize("rate", [0, -0.1, 1.5, "half", True, float("nan")])
def test_fixed_rate_rejects_bad_rates(rate):
    with pytest.raises(ValueError, match="rate"):
        masks.fixed_rate_masks(2, 4, rate)


def test_uniform_sizes_cover_range_evenly():
    m = masks.uniform_size_masks(20000, 5, random_state=0)
    counts = np.bincount(m.sum(-1).numpy(), minlength=6)[1:]
    assert counts.min() > 0
    # Each size has probability 1/5; 20000 draws give a standard error of about 57.
    np.testing.assert_allclose(counts, 4000, atol=300)


def test_random_masks_are_uniform_over_subsets():
    m = masks.masks_of_sizes([2] * 30000, 4, random_state=1)
    codes = (m.long() * torch.tensor([1, 2, 4, 8])).sum(-1)
    counts = torch.bincount(codes, minlength=16)
    present = counts[counts > 0]
    assert len(present) == math.comb(4, 2)
    np.testing.assert_allclose(present.numpy(), 5000, atol=300)


def test_reproducible_and_device():
    a = masks.uniform_size_masks((3, 2), 7, random_state=42)
    b = masks.uniform_size_masks((3, 2), 7, random_state=42)
    assert torch.equal(a, b)
    assert masks.uniform_size_masks(2, 3, random_state=0, device="cpu").device.type == "cpu"


def test_check_generator_accepts_numpy_and_rejects_junk():
    g1 = masks.check_generator(np.random.RandomState(3))
    g2 = masks.check_generator(np.random.RandomState(3))
    assert torch.equal(torch.rand(4, generator=g1), torch.rand(4, generator=g2))
    masks.check_generator(np.random.default_rng(0))
    g = torch.Generator()
    assert masks.check_generator(g) is g
    with pytest.raises(ValueError, match="random_state"):
        masks.check_generator("seed")


def test_all_masks_counts_and_limits():
    every = masks.all_masks(5)
    assert every.shape == (31, 5)
    assert len({tuple(row) for row in every.tolist()}) == 31
    assert masks.all_masks(6, 3).shape == (20, 6)
    with pytest.raises(ValueError, match=r"D=21 .*D <= 20"):
        masks.all_masks(21)
    with pytest.raises(ValueError, match="comb"):
        masks.all_masks(60, 30)
    with pytest.raises(ValueError, match="size"):
        masks.all_masks(4, 5)


def test_sizes_out_of_range():
    with pytest.raises(ValueError, match="1..3"):
        masks.masks_of_sizes([0, 2], 3)


def test_nested_masks_grow_by_the_ordering():
    orderings = masks.random_orderings(4, 6, random_state=0)
    nested = masks.nested_masks(orderings)
    assert nested.shape == (4, 6, 6)
    assert (nested.sum(-1) == torch.arange(1, 7)).all()
    added = nested.long().diff(dim=-2, prepend=torch.zeros(4, 1, 6, dtype=torch.long))
    # Step t adds exactly the ordering's t-th feature.
    assert torch.equal(added.argmax(-1), orderings)


def test_sample_masks_dispatch():
    assert (masks.sample_masks(0.5, 3, 4, random_state=0).sum(-1) == 2).all()
    with pytest.raises(ValueError, match="uniform"):
        masks.sample_masks("unform", 3, 4)


@pytest.mark.parametrize("sizes", [[1.7], [2.0], [True], np.array([1.5]), torch.tensor([1.0]), ["2"]])
def test_sizes_must_be_integers_never_truncated(sizes):
    with pytest.raises(TypeError, match="Mask sizes must be integers"):
        masks.masks_of_sizes(sizes, 3)


def test_integer_sizes_of_any_integer_type():
    for sizes in ([1, 3], np.array([1, 3], dtype=np.int32), torch.tensor([1, 3], dtype=torch.int16)):
        assert masks.masks_of_sizes(sizes, 3, random_state=0).sum(-1).tolist() == [1, 3]


@pytest.mark.parametrize("seed", [2**64, -1, 2**100])
def test_seeds_outside_torch_range_are_errors(seed):
    with pytest.raises(ValueError, match=r"random_state must lie in \[0, 2\*\*64\)"):
        masks.check_generator(seed)
    assert masks.check_generator(2**64 - 1).initial_seed() == 2**64 - 1


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_every_subset_of_a_size_is_equally_likely(size):
    # Chi-square over all comb(6, size) subsets: a sampler that favoured some positions (or
    # returned the wrong size) would fail; the seed is fixed, so the test is deterministic.
    n_features, n_draws = 6, 12000
    m = masks.masks_of_sizes([size] * n_draws, n_features, random_state=size)
    assert bool((m.sum(-1) == size).all())
    codes = (m.long() << torch.arange(n_features)).sum(-1)
    counts = torch.bincount(codes, minlength=2**n_features).numpy()
    subsets = [sum(1 << j for j in c) for c in itertools.combinations(range(n_features), size)]
    assert counts.sum() == counts[subsets].sum()
    assert chisquare(counts[subsets]).pvalue > 1e-3


def test_one_sort_sampler_takes_the_lowest_ranks_of_its_noise():
    # The mask is the set of features whose uniform noise ranks below the size: the same
    # subset as ranking the noise with two sorts, drawn with one.
    sizes = torch.randint(1, 41, (300,), generator=torch.Generator().manual_seed(0))
    m = masks.masks_of_sizes(sizes, 40, random_state=7)
    noise = torch.rand(300, 40, generator=torch.Generator().manual_seed(7))
    assert torch.equal(m, noise.argsort(-1).argsort(-1) < sizes.unsqueeze(-1))


def test_integer_ranking_orders_uniforms_as_the_float_sort_does():
    # The sampler sorts the float32 noise's bit patterns as integers (faster); the order must
    # be the float order, ties included, so that a seed keeps giving the same masks.
    g = torch.Generator().manual_seed(0)
    noise = torch.cat([torch.rand(200, 64, generator=g), torch.randint(0, 8, (200, 64), generator=g) / 8.0])
    assert torch.equal(masks._rank_order(noise), noise.argsort(dim=-1))
