"""partial_fit over chunks against fit on all the data: MaskedPPCA, N=20000, D=20, K=3.

The data are fed in 20 chunks over five passes, the step size annealed between passes with
``set_params(learning_rate=...)``; the script prints both exact mean LMLs, their gap in nats
per sample and the CPU seconds of each (one torch thread).

Run: ``python benchmarks/partial_fit.py``.
"""

import time
import warnings

import _common  # noqa: F401  (puts this checkout first on sys.path)
import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedPPCA
from skmpt.datasets import make_ppca

LEARNING_RATES = (0.03, 0.03, 0.01, 0.003, 0.001)  # one pass over the chunks each


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
    for learning_rate in LEARNING_RATES:
        incremental.set_params(learning_rate=learning_rate)
        for chunk in chunks:
            incremental.partial_fit(X[chunk])
    partial_seconds = time.process_time() - start

    lml_full = full.log_marginal_likelihood(X).mean()
    lml_partial = incremental.log_marginal_likelihood(X).mean()
    print(f"fit:         exact mean LML {lml_full:.4f} ({full.n_iter_} epochs, {fit_seconds:.1f} CPU s)")
    print(f"partial_fit: exact mean LML {lml_partial:.4f} (20 chunks x {len(LEARNING_RATES)} passes, "
          f"{partial_seconds:.1f} CPU s)")
    print(f"gap: {lml_full - lml_partial:.4f} nats per sample")


if __name__ == "__main__":
    main()
