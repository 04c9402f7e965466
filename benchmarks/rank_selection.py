"""Choosing a PPCA's n_components: held-out MPT score against PCA's "mle", BIC, AIC and cross-validated score.

Data of known rank K (PPCA, D=10, noise variance 0.5, N=300), complete or with 20 % of entries
missing at random; each rule picks n_components in 1..8:

- ``search``: :class:`skmpt.MaskedModelSearch` over ``MaskedPPCA(k)`` (held-out log p(x_o), 20 % of rows);
- ``mle``: ``PCA(n_components="mle")`` (Minka), complete data only;
- ``bic``, ``aic``: ``MaskedPPCA(k).bic(X)`` / ``.aic(X)`` of fits to every row, smallest;
- ``cv``: 5-fold cross-validated ``PCA(k).score`` (complete data only).

Printed: the chosen n_components per seed, and the held-out log-likelihood (nats per sample, exact,
on 1000 fresh rows) of a PPCA of the chosen size. ``python benchmarks/rank_selection.py``.
"""

import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import cross_val_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from skmpt import MaskedModelSearch, MaskedPPCA  # noqa: E402

SIZES = range(1, 9)
FIT = {"max_epochs": 300, "learning_rate": 0.05, "n_iter_no_change": 5, "random_state": 0}


def data(n, rank, seed):
    rng = np.random.RandomState(seed)
    W = rng.randn(rank, 10)
    return lambda m: rng.randn(m, rank) @ W + np.sqrt(0.5) * rng.randn(m, 10)


def main():
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", ConvergenceWarning)
    rules = ("search", "mle", "bic", "aic", "cv")
    print(f"{'rank':>4s} {'holes':>5s} {'seed':>4s}  " + "  ".join(f"{r:>8s}" for r in rules))
    for rank in (2, 5):
        for holes in (0.0, 0.2):
            for seed in range(3):
                draw = data(300, rank, seed)
                X, fresh = draw(300), draw(1000)
                rng = np.random.RandomState(seed + 100)
                X_missing = np.where(rng.rand(*X.shape) < holes, np.nan, X)
                fits = {k: MaskedPPCA(k, **FIT).fit(X_missing) for k in SIZES}
                chosen = {
                    "search": MaskedModelSearch([MaskedPPCA(k, **FIT) for k in SIZES], greedy=False,
                                                random_state=seed).fit(X_missing).best_estimator_.n_components,
                    "bic": min(SIZES, key=lambda k: fits[k].bic(X_missing)),
                    "aic": min(SIZES, key=lambda k: fits[k].aic(X_missing)),
                }
                if holes == 0:
                    chosen["mle"] = PCA(n_components="mle").fit(X).n_components_
                    chosen["cv"] = max(SIZES, key=lambda k: cross_val_score(PCA(k), X, cv=5).mean())
                held = {rule: fits[k].log_marginal_likelihood(fresh).mean() for rule, k in chosen.items()}
                row = "  ".join(f"{chosen[r]:>2d} {held[r]:5.2f}" if r in chosen else f"{'-':>8s}"
                                for r in rules)
                print(f"{rank:4d} {int(holes * 100):4d}% {seed:4d}  {row}", flush=True)


if __name__ == "__main__":
    main()
