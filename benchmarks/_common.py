"""Helpers shared by the benchmark scripts (not part of the package)."""

import sys
import time
from pathlib import Path

import numpy as np
import torch

# Measure the checkout this folder belongs to, not whichever skmpt is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skmpt.datasets import make_ppca
from skmpt.models import PPCAModule


def ppca_module(n_features, n_components, *, n_samples=100, noise_variance=0.5, random_state=0):
    """A PPCA module with the true parameters of synthetic data, and that data as a tensor."""
    data = make_ppca(n_samples, n_features, n_components, noise_variance=noise_variance, random_state=random_state)
    module = PPCAModule(
        torch.as_tensor(data.components), torch.as_tensor(data.mean), noise_variance
    ).requires_grad_(False)
    return module, torch.as_tensor(data.data)


def interleaved_minimum(functions, repeats, clock=time.process_time):
    """Minimum seconds of each function by ``clock``, the functions called in turn ``repeats`` times.

    ``time.process_time`` (the default) counts CPU time, which other jobs on the machine barely
    move; interleaving spreads any remaining drift over all the functions alike.
    """
    best = [float("inf")] * len(functions)
    for _ in range(repeats):
        for i, fn in enumerate(functions):
            start = clock()
            fn()
            best[i] = min(best[i], clock() - start)
    return best


def best_time(fn, repeats=3):
    """Best wall-clock seconds of ``repeats`` calls (the least disturbed by other load)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def dense_masked_log_prob_sum(module, X, masks):
    """The paper's method (errata corrected): per mask, invert S_RR of S = W W^T + s2 I."""
    cov = module.covariance()
    mean = module.mean
    out = X.new_empty(X.shape[0], len(masks))
    for p, mask in enumerate(masks):
        rest = ~mask
        gain = cov[mask][:, rest] @ torch.inverse(cov[rest][:, rest])
        mu = mean[mask] + (X[:, rest] - mean[rest]) @ gain.T
        var = cov[mask][:, mask].diagonal() - (gain * cov[mask][:, rest]).sum(-1)
        out[:, p] = (-0.5 * (np.log(2 * np.pi) + var.log() + (X[:, mask] - mu) ** 2 / var)).sum(-1)
    return out
