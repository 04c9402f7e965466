"""partial_fit over chunks against fit on all the data: MaskedPPCA, N=20000, D=20, K=3.

The data are fed in 20 chunks over ten passes with the default parameters (the step-size
schedule continues across calls); the script prints both exact mean LMLs, their gap in nats
per sample and the CPU seconds of each (one torch thread).

Run: ``python benchmarks/partial_fit.py``.
"""

import time
import warnings

import _common  # noqa: F401  (puts this checkout first on sys.path)
import numpy as np
import torch
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedPPCA
from skmpt.datasets import make_ppca

PASSES = 10


def main():
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", ConvergenceWarning)
    X = make_ppca(20000, 20, 3, random_state=0).data
    start = time.process_time()
    full = MaskedPPCA(3, random_state=0).fit(X)
    fit_seconds = time.process_time() - start

    chunks = np.array_split(np.random.RandomState(0).permutation(len(X)), 20)
    incremental = MaskedPPCA(3, random_state=0)
    start = time.process_time()
    for _ in range(PASSES):
        for chunk in chunks:
            incremental.partial_fit(X[chunk])
    partial_seconds = time.process_time() - start

    optimum = PCA(3).fit(X).score(X)  # the maximum-likelihood PPCA's mean LML
    lml_full = full.log_marginal_likelihood(X).mean()
    lml_partial = incremental.log_marginal_likelihood(X).mean()
    print(f"fit:         exact mean LML {lml_full:.4f} ({full.n_iter_} epochs, {fit_seconds:.1f} CPU s)")
    print(f"partial_fit: exact mean LML {lml_partial:.4f} (20 chunks x {PASSES} passes, final step size "
          f"{incremental.history_[-1]['learning_rate']:.2g}, "
          f"{partial_seconds:.1f} CPU s)")
    print(f"gap: {lml_full - lml_partial:.4f} nats per sample")
    print(f"below the ML optimum ({optimum:.4f}): fit {optimum - lml_full:.4f}, "
          f"partial_fit {optimum - lml_partial:.4f}")


if __name__ == "__main__":
    main()
