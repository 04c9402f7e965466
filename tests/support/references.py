"""Independent references: dense Gaussian conditionals and the chain rule token by token."""

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from skmpt.masks import nested_masks


@pytest.fixture(autouse=True)
def one_thread():
    """These tests do many tiny linear-algebra calls, which extra threads only slow down."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def dense_conditionals(mean, cov, X, masks):
    """Dense Gaussian conditioning in NumPy, per mask and masked token.

    Returns the per-token ``log N(x_j | mu_j + S_jr S_rr^{-1} (x_r - mu_r), S_jj - S_jr S_rr^{-1} S_rj)``
    of shape (n, P, D), zero at observed positions, and ``log N(x_r | mu_r, S_rr)`` of shape (n, P).
    """
    n_features = len(mean)
    per_token = np.zeros((len(X), len(masks), n_features))
    observed = np.zeros((len(X), len(masks)))
    for p, mask in enumerate(np.asarray(masks)):
        rest = ~mask
        if rest.any():
            observed[:, p] = multivariate_normal(mean[rest], cov[np.ix_(rest, rest)]).logpdf(X[:, rest])
        for j in np.flatnonzero(mask):
            if rest.any():
                gain = np.linalg.solve(cov[np.ix_(rest, rest)], cov[rest, j])
                mu = mean[j] + (X[:, rest] - mean[rest]) @ gain
                var = cov[j, j] - cov[j, rest] @ gain
            else:
                mu, var = np.full(len(X), mean[j]), cov[j, j]
            per_token[:, p, j] = -0.5 * (np.log(2 * np.pi * var) + (X[:, j] - mu) ** 2 / var)
    return per_token, observed


def generic_chain(module, X, orderings):
    """Chain terms from the reference per-token conditionals on nested masks."""
    n, n_features = X.shape
    per_token = module.masked_log_prob(X, nested_masks(orderings).reshape(-1, n_features))
    index = orderings.view(1, len(orderings), -1, 1).expand(n, -1, -1, 1)
    return per_token.reshape(n, len(orderings), n_features, n_features).gather(-1, index).squeeze(-1)
