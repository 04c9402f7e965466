"""Small helpers shared by the tests."""

import contextlib

import pytest
import torch


def make_ppca_module(components, mean, noise_variance):
    from skmpt.models import PPCAModule

    return PPCAModule(
        torch.as_tensor(components, dtype=torch.float64),
        torch.as_tensor(mean, dtype=torch.float64),
        float(noise_variance),
    )


requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


class Tempered:
    """Conditionals of a joint raised to a power and renormalised: consistent only at power 1."""

    def __init__(self, joint, power):
        self.joint, self.power = joint, power

    def log_marginal(self, X):
        return self.joint.log_marginal(X)

    def masked_log_prob(self, X, masks):
        log_p = self.joint.masked_log_prob(X, masks)
        log_q = torch.log1p(-log_p.exp())  # the other value of each binary token, same context
        tempered = self.power * log_p - torch.logaddexp(self.power * log_p, self.power * log_q)
        return torch.where(masks, tempered, torch.zeros_like(tempered))


@contextlib.contextmanager
def two_process_client():
    """A dask ``distributed.Client`` on a ``LocalCluster`` of two worker processes of one thread each
    (no dashboard), closed on exit; skips the test when distributed is not installed."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, death_timeout=60
        ) as cluster,
        distributed.Client(cluster, timeout=60) as client,
    ):
        yield client


def saddle_table():
    """Rank-2 data of 300 rows and 5 columns, standardised, 40 % of entries missing: a tied mixture of
    3 components fitted by EM from its k-means start (seed 0) crawls near a saddle, gaining about 1e-6
    nats a step for 100 steps before it leaves."""
    import numpy as np

    rng = np.random.RandomState(0)
    W = rng.randn(2, 5)
    X = rng.randn(300, 2) @ W + rng.randn(300, 5) * rng.uniform(0.3, 1.0, 5) + rng.randn(5)
    X = (X - X.mean(0)) / X.std(0)
    X[np.random.RandomState(1).rand(*X.shape) < 0.4] = np.nan
    X[np.isnan(X).all(1), 0] = 0.0
    return X
