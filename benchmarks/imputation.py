"""Imputation accuracy and time: skmpt's imputers against scikit-learn's, on the same holes.

For each data set and pattern of holes, every imputer is fitted to the incomplete data and
imputes it (``fit_transform``); the table gives the root-mean-square error of the imputed
entries against the hidden true values, and the CPU seconds of the fit and imputation (one
torch thread; the minimum of ``--repeats`` runs, the imputers of a case called in turn). Take
the seconds on a quiet machine (``uptime`` load below 1). The imputers: ``SimpleImputer``
(feature means), ``KNNImputer`` (5 neighbours), ``IterativeImputer`` (Bayesian ridge, 10
rounds), and :class:`skmpt.MaskedImputer` around
``MaskedPPCA``, ``MaskedFactorAnalysis``, ``MaskedGaussianMixture``, ``MaskedLinearVAE``
(Gaussian likelihood) and ``MaskedVAE``.

Data (``--sets``):

- ``ppca``, ``fa``, ``gmm``, ``nonlinear``: drawn from a PPCA (D=50, K=5), a factor analysis
  (D=50, K=5, noise variances from 0.05 to 2), a two-component full-covariance mixture (D=10)
  and a non-linear latent model (x = tanh(A z) B + noise, D=20, K=2), with 10 %, 30 % and 50 %
  of entries missing completely at random (MCAR), and one missing-not-at-random pattern (MNAR:
  each entry above its feature's 70th percentile is missing with probability 0.6), where the
  likelihood of the observed entries is no longer the right target;
- ``diabetes``, ``wine``, ``breast_cancer``: scikit-learn's embedded data sets, standardised,
  20 % MCAR holes from seed 0;
- ``digits``: the embedded 8x8 digits, each image missing one random 4x4 block of pixels.

Run ``python benchmarks/imputation.py --help``; ``--quick`` runs a reduced configuration.
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.experimental import enable_iterative_imputer  # noqa: F401
from sklearn.impute import IterativeImputer, KNNImputer, SimpleImputer
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import interleaved_minimum  # noqa: E402

from skmpt import (  # noqa: E402
    MaskedFactorAnalysis,
    MaskedGaussianMixture,
    MaskedImputer,
    MaskedLinearVAE,
    MaskedPPCA,
    MaskedVAE,
)


def synthetic(kind, n_samples, rng):
    if kind in ("ppca", "fa"):
        D, K = 50, 5
        noise = 0.5 if kind == "ppca" else np.exp(rng.uniform(np.log(0.05), np.log(2.0), D))
        return rng.randn(n_samples, K) @ rng.randn(K, D) + rng.randn(D) + rng.randn(n_samples, D) * np.sqrt(noise)
    if kind == "gmm":
        D = 10
        means = 2.0 * rng.randn(2, D)
        shapes = [a @ a.T / D + 0.3 * np.eye(D) for a in rng.randn(2, D, D)]
        labels = rng.rand(n_samples) < 0.4
        draws = [rng.multivariate_normal(m, s, n_samples) for m, s in zip(means, shapes, strict=True)]
        return np.where(labels[:, None], draws[0], draws[1])
    D, K = 20, 2
    hidden = np.tanh(rng.randn(n_samples, K) @ rng.randn(K, 16) * 1.5)
    return hidden @ rng.randn(16, D) + 0.3 * rng.randn(n_samples, D)


def mcar(X, rate, rng):
    holes = rng.rand(*X.shape) < rate
    holes[holes.all(1), 0] = False  # keep one observed entry per row
    return holes


def mnar(X, rng):
    holes = (X > np.percentile(X, 70, axis=0)) & (rng.rand(*X.shape) < 0.6)
    holes[holes.all(1), 0] = False
    return holes


def digit_blocks(X, rng):
    holes = np.zeros(X.shape, dtype=bool).reshape(-1, 8, 8)
    for image, (row, col) in zip(holes, rng.randint(0, 5, (len(X), 2)), strict=True):
        image[row : row + 4, col : col + 4] = True
    return holes.reshape(len(X), 64)


SETS = ("ppca", "fa", "gmm", "nonlinear", "diabetes", "wine", "breast_cancer", "digits")


def cases(sets, n_samples):
    for seed, kind in enumerate(("ppca", "fa", "gmm", "nonlinear")):
        if kind not in sets:
            continue
        # A seed per set: its data do not depend on which other sets run.
        X = synthetic(kind, n_samples, np.random.RandomState(seed))
        for rate in (0.1, 0.3, 0.5):
            yield kind, f"MCAR {int(rate * 100)} %", X, mcar(X, rate, np.random.RandomState(1))
        yield kind, "MNAR (top 30 %)", X, mnar(X, np.random.RandomState(1))
    loaders = {"diabetes": load_diabetes, "wine": load_wine, "breast_cancer": load_breast_cancer}
    for name, load in loaders.items():
        if name in sets:
            X = StandardScaler().fit_transform(load().data)
            yield name, "MCAR 20 %", X, mcar(X, 0.2, np.random.RandomState(0))
    if "digits" in sets:
        X = load_digits().data / 16.0
        yield "digits", "4x4 block", X, digit_blocks(X, np.random.RandomState(0))


def imputers(n_features, max_epochs):
    K = min(5, n_features - 1)
    common = {"random_state": 0, "max_epochs": max_epochs, "batch_size": 500, "learning_rate": 0.03, "n_masks": 1}
    return {
        "SimpleImputer": lambda: SimpleImputer(),
        "KNNImputer": lambda: KNNImputer(),
        "IterativeImputer": lambda: IterativeImputer(max_iter=10, random_state=0),
        "PPCA": lambda: MaskedImputer(MaskedPPCA(K, **common)),
        "FA": lambda: MaskedImputer(MaskedFactorAnalysis(K, **common)),
        "mixture": lambda: MaskedImputer(MaskedGaussianMixture(2, **common)),
        "linear VAE": lambda: MaskedImputer(MaskedLinearVAE(2, likelihood="gaussian", n_quadrature=8, **common)),
        "VAE": lambda: MaskedImputer(
            MaskedVAE(2, hidden_layer_sizes=(32,), **{**common, "max_epochs": max_epochs // 2})
        ),
    }


def _fit_transform(results, method, make, X_missing):
    """A call that fits a fresh ``make()`` to ``X_missing`` and keeps its imputation in ``results``."""

    def run():
        results[method] = make().fit_transform(X_missing)

    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description="Imputation RMSE and time, skmpt against scikit-learn.")
    parser.add_argument("--n-samples", type=int, default=1000, help="samples of each synthetic set (default 1000)")
    parser.add_argument("--max-epochs", type=int, default=300,
                        help="most epochs of each skmpt fit (default 300, the estimators' own)")
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated subset of the data sets")
    parser.add_argument("--methods", default=None, help="comma-separated subset of the imputers")
    parser.add_argument("--quick", action="store_true", help="300 samples, 30 epochs")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each imputer (default 3)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.quick:
        args.n_samples, args.max_epochs = 300, 30
    warnings.simplefilter("ignore", ConvergenceWarning)
    sets = set(args.sets.split(","))
    if not sets <= set(SETS):
        parser.error(f"unknown data set(s) {sorted(sets - set(SETS))}; choose among {list(SETS)}")
    methods = None if args.methods is None else args.methods.split(",")
    unknown = sorted(set(methods or ()) - set(imputers(2, 1)))
    if unknown:
        parser.error(f"unknown imputer(s) {unknown}; choose among {sorted(imputers(2, 1))}")
    print(f"{'data':14s} {'holes':17s} {'imputer':17s} {'RMSE':>8s} {'seconds':>8s}", flush=True)
    for name, pattern, X, holes in cases(sets, args.n_samples):
        X_missing = np.where(holes, np.nan, X)
        available = imputers(X.shape[1], args.max_epochs)
        chosen = {method: available[method] for method in methods or available}
        imputed = {}
        runs = [_fit_transform(imputed, method, make, X_missing) for method, make in chosen.items()]
        seconds = interleaved_minimum(runs, args.repeats)
        for method, time_taken in zip(chosen, seconds, strict=True):
            if imputed[method].shape != X.shape:
                raise RuntimeError(f"{method} dropped columns on {name}")
            rmse = float(np.sqrt(np.mean((imputed[method][holes] - X[holes]) ** 2)))
            print(f"{name:14s} {pattern:17s} {method:17s} {rmse:8.4f} {time_taken:8.2f}", flush=True)

if __name__ == "__main__":
    main()
