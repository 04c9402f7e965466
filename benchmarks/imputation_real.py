"""Imputation of real tables: the default ``MaskedImputer()`` against scikit-learn's imputers.

The protocol of the imputation literature (HyperImpute, ReMasker): a complete real table,
standardised; entries removed by a pattern at a rate; every imputer fitted to the incomplete
table and imputing it (``fit_transform``); scores on the removed entries. Patterns:

- ``mcar``: each entry removed with probability ``rate``;
- ``mar``: in every row, the entries of a random half of the features are removed with a
  probability that grows with a logistic of the row's value on one always-observed feature,
  scaled so that ``rate`` of all entries go missing;
- ``mnar``: self-masking, each entry removed with a probability that grows with its own value
  (a logistic of the standardised value), scaled to ``rate``.

Scores: RMSE of the imputed entries; the mean over features of the Wasserstein distance between
the imputed and the true values of the removed entries; the accuracy (classification tables) or
R² (regression) of a 5-fold cross-validated downstream model (logistic or ridge regression) on
the imputed table; CPU seconds of the fit and imputation (one torch thread and one BLAS thread;
the imputers of a case called in turn ``--timing-repeats`` times, each keeping its least time;
one warm-up fit before any timing pays torch's one-time imports); for ``MaskedImputer()``, the
held-out log-likelihood of the observed entries under its chosen model (nats per sample, on the
fifth of the rows its search held out; the other imputers have no likelihood). The last line
sums each imputer's CPU time over the cases and divides it by IterativeImputer's.

Tables: scikit-learn's embedded ``diabetes``, ``wine``, ``breast_cancer`` always; with
``--fetch``, ``california`` (scikit-learn's fetcher, which checks the archive's SHA-256) is
downloaded on first use, subsampled to ``--max-rows`` rows. Imputers: ``SimpleImputer``,
``KNNImputer``, ``IterativeImputer`` with Bayesian ridge, ``IterativeImputer`` with extra trees
(missForest), ``MaskedImputer()``, and, where it is installed (``pip install "skmpt[bench]"``),
miceforest's LightGBM chained equations (``miceforest``; left out of the default run, with a line
saying so, where it is not).

Run ``python benchmarks/imputation_real.py --help``; the user guide's tables are
``python benchmarks/imputation_real.py --patterns mcar --rates 0.2,0.4 --repeats 1 --timing-repeats 3
--methods Simple,KNN,Iterative,MaskedImputer`` and ``python benchmarks/imputation_real.py --repeats 2``
(the full protocol at two repeats instead of ten); its miceforest paragraph is ``python
benchmarks/imputation_real.py --patterns mcar --rates 0.2,0.4 --repeats 1 --methods
Simple,KNN,Iterative,miceforest,MaskedImputer`` (one call per imputer).
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from scipy.stats import wasserstein_distance
from sklearn.datasets import fetch_california_housing, load_breast_cancer, load_diabetes, load_wine
from sklearn.ensemble import ExtraTreesRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.experimental import enable_iterative_imputer  # noqa: F401
from sklearn.impute import IterativeImputer, KNNImputer, SimpleImputer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import cross_val_score
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

try:
    import miceforest
    import pandas as pd
except ImportError:
    miceforest = None

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from skmpt import MaskedImputer  # noqa: E402

EMBEDDED = {"diabetes": load_diabetes, "wine": load_wine, "breast_cancer": load_breast_cancer}
CLASSIFICATION = {"wine", "breast_cancer"}
MICEFOREST_MISSING = 'miceforest is not installed: pip install "skmpt[bench]" (or pip install miceforest)'


class MiceForest:
    """miceforest's LightGBM chained equations with scikit-learn's ``fit_transform``: its defaults
    (random forests, mean matching) for ``iterations`` rounds, one LightGBM thread."""

    def __init__(self, iterations=5, random_state=None):
        self.iterations = iterations
        self.random_state = random_state

    def fit_transform(self, X):
        data = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
        kernel = miceforest.ImputationKernel(data, random_state=self.random_state)
        kernel.mice(self.iterations, num_threads=1)
        return kernel.complete_data().to_numpy()


def load(name, max_rows, rng):
    """The standardised table and its target."""
    if name in EMBEDDED:
        data = EMBEDDED[name]()
    else:
        data = fetch_california_housing()
    X, y = data.data, data.target
    if len(X) > max_rows:
        rows = rng.choice(len(X), max_rows, replace=False)
        X, y = X[rows], y[rows]
    return StandardScaler().fit_transform(X), y


def holes(X, pattern, rate, rng):
    """A boolean array, True where an entry is removed; every row keeps one observed entry."""
    n, d = X.shape
    if pattern == "mcar":
        probability = np.full(X.shape, rate)
    elif pattern == "mnar":
        logits = X
        probability = 1 / (1 + np.exp(-logits))
    else:
        driver = rng.randint(d)
        chosen = rng.rand(n, d) < 0.5
        chosen[:, driver] = False
        probability = np.where(chosen, 1 / (1 + np.exp(-X[:, [driver]])), 0.0)
    probability = np.clip(probability * rate / probability.mean(), 0, 1)
    removed = rng.rand(n, d) < probability
    removed[removed.all(1), 0] = False
    return removed


def imputers(seed):
    makers = {
        "Simple": lambda: SimpleImputer(),
        "KNN": lambda: KNNImputer(),
        "Iterative": lambda: IterativeImputer(max_iter=10, random_state=seed),
        "missForest": lambda: IterativeImputer(
            ExtraTreesRegressor(n_estimators=50, random_state=seed, n_jobs=1), max_iter=5, random_state=seed
        ),
        "MaskedImputer": lambda: MaskedImputer(random_state=seed),
    }
    if miceforest is not None:
        makers["miceforest"] = lambda: MiceForest(random_state=seed)
    return makers


def chosen_methods(parser, methods):
    """The imputers to run: all available by default (saying so when miceforest is missing), else
    the comma-separated ``methods``, each checked."""
    known = imputers(0)
    if methods is None:
        if miceforest is None:
            print(f"miceforest left out: {MICEFOREST_MISSING}", flush=True)
        return list(known)
    methods = methods.split(",")
    if "miceforest" in methods and miceforest is None:
        parser.error(MICEFOREST_MISSING)
    unknown = [method for method in methods if method not in known]
    if unknown:
        parser.error(f"unknown imputer(s) {unknown}; choose among {list(known)}")
    return methods


def downstream(name, X, y):
    model = LogisticRegression(max_iter=1000) if name in CLASSIFICATION else Ridge()
    return float(cross_val_score(model, X, y, cv=5).mean())


def evaluate(name, X, y, removed, imputed):
    rmse = float(np.sqrt(np.mean((imputed[removed] - X[removed]) ** 2)))
    columns = [j for j in range(X.shape[1]) if removed[:, j].any()]
    wasserstein = float(np.mean([wasserstein_distance(imputed[removed[:, j], j], X[removed[:, j], j])
                                 for j in columns]))
    return rmse, wasserstein, downstream(name, imputed, y)


def run_case(name, X, y, removed, makers, methods, timing_repeats=1):
    """Each imputer's (RMSE, Wasserstein, downstream, seconds, held-out log-likelihood); the imputers
    are called in turn ``timing_repeats`` times and each keeps its least CPU time (the scores are
    those of its last call, identical for a fixed seed)."""
    X_missing = np.where(removed, np.nan, X)
    seconds, imputed, held_out = {}, {}, {}
    for _ in range(timing_repeats):
        for method in methods:
            imputer = makers[method]()
            start = time.process_time()
            imputed[method] = np.asarray(imputer.fit_transform(X_missing))
            seconds[method] = min(seconds.get(method, np.inf), time.process_time() - start)
            held_out[method] = imputer.search_.best_score_ if isinstance(imputer, MaskedImputer) else float("nan")
    return {method: (*evaluate(name, X, y, removed, imputed[method]), seconds[method], held_out[method])
            for method in methods}


def main(argv=None):
    parser = argparse.ArgumentParser(description="Imputation of real tables, skmpt against scikit-learn.")
    parser.add_argument("--sets", default="diabetes,wine,breast_cancer",
                        help="comma-separated tables among diabetes, wine, breast_cancer, california")
    parser.add_argument("--fetch", action="store_true", help="allow downloading california (checked by SHA-256)")
    parser.add_argument("--patterns", default="mcar,mar,mnar", help="comma-separated among mcar, mar, mnar")
    parser.add_argument("--rates", default="0.1,0.3,0.5", help="comma-separated missing rates")
    parser.add_argument("--repeats", type=int, default=10, help="patterns drawn per case (seeds 0..repeats-1)")
    parser.add_argument("--methods", default=None,
                        help="comma-separated subset of Simple, KNN, Iterative, missForest, MaskedImputer, "
                             "miceforest (where installed)")
    parser.add_argument("--max-rows", type=int, default=5000, help="rows kept of a larger table")
    parser.add_argument("--timing-repeats", type=int, default=1,
                        help="calls of each imputer per case, in turn; the least CPU time is reported")
    args = parser.parse_args(argv)
    sets = args.sets.split(",")
    if "california" in sets and not args.fetch:
        parser.error("california is downloaded: pass --fetch")
    unknown = sorted(set(sets) - set(EMBEDDED) - {"california"})
    if unknown:
        parser.error(f"unknown table(s) {unknown}")
    methods = chosen_methods(parser, args.methods)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", ConvergenceWarning)
    print(f"{'data':14s} {'holes':10s} {'imputer':14s} {'RMSE':>7s} {'W1':>7s} {'downstr':>7s} {'seconds':>8s} "
          f"{'held-out':>9s}", flush=True)
    seconds = {}
    with threadpool_limits(1):
        # One-time costs (torch's optimiser imports its compiler on the first fit, about 2 s) are
        # paid before timing, as the other imputers' imports are at the top of this file.
        warm = np.random.RandomState(0).randn(200, 4)
        MaskedImputer(random_state=0).fit(np.where(np.random.RandomState(1).rand(200, 4) < 0.1, np.nan, warm))
        for name in sets:
            for pattern in args.patterns.split(","):
                for rate in map(float, args.rates.split(",")):
                    totals = {}
                    for seed in range(args.repeats):
                        rng = np.random.RandomState(seed)
                        X, y = load(name, args.max_rows, np.random.RandomState(0))
                        results = run_case(name, X, y, holes(X, pattern, rate, rng), imputers(seed), methods,
                                           args.timing_repeats)
                        for method, values in results.items():
                            totals.setdefault(method, []).append(values)
                    for method, values in totals.items():
                        mean = np.mean(values, axis=0)
                        seconds[method] = seconds.get(method, 0.0) + mean[3]
                        print(f"{name:14s} {pattern.upper():4s} {int(rate * 100):2d} % {method:14s} "
                              f"{mean[0]:7.3f} {mean[1]:7.3f} {mean[2]:7.3f} {mean[3]:8.2f} {mean[4]:9.2f}", flush=True)
    if "Iterative" in seconds:
        print("CPU seconds in all (mean over repeats), and against IterativeImputer's: " + ", ".join(
            f"{method} {total:.2f} ({total / seconds['Iterative']:.1f}x)" for method, total in seconds.items()))


if __name__ == "__main__":
    main()
