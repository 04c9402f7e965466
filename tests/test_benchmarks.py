"""The benchmarks' command lines refuse what they cannot run before any fit."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "imputation_real.py"


def _run(*argv):
    return subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=120)


def test_imputation_benchmark_refuses_an_unknown_imputer():
    run = _run("--methods", "Simple,Foo")
    assert run.returncode == 2
    assert "unknown imputer(s) ['Foo']" in run.stderr and "MaskedImputer" in run.stderr
    assert "RMSE" not in run.stdout  # stopped before the table's header, let alone a fit


@pytest.mark.skipif(importlib.util.find_spec("miceforest") is not None, reason="miceforest is installed")
def test_imputation_benchmark_says_how_to_install_miceforest():
    run = _run("--methods", "miceforest")
    assert run.returncode == 2
    assert 'pip install "skmpt[bench]"' in run.stderr


def test_imputation_benchmark_refuses_an_unknown_table_before_any_fit():
    run = _run("--sets", "diabetes,atlantis", "--methods", "Simple")
    assert run.returncode == 2
    assert "unknown table(s) ['atlantis']" in run.stderr and "RMSE" not in run.stdout


def test_self_masking_holes_hide_only_each_columns_largest_values():
    spec = importlib.util.spec_from_file_location("imputation_real", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.RandomState(0)
    X = rng.randn(2000, 3)
    X[:, 2] = rng.randint(2, size=2000)  # a column of two values: still only its largest quarter
    removed = module.holes(X, "self", 0.2, np.random.RandomState(1))
    for j in range(3):
        ranks = X[:, j].argsort(kind="stable").argsort()
        assert (ranks[removed[:, j]] >= 2000 - 500).all()  # the largest 25 % (0.2 / 0.8)
        assert abs(removed[:, j].mean() - 0.2) < 0.03  # each hidden with probability 0.8
    assert module.SPLIT["macrodata"] == "held-out" and module.SPLIT["diabetes"] == "tuning"
MIXED = Path(__file__).resolve().parents[1] / "benchmarks" / "imputation_mixed.py"


def test_mixed_imputation_benchmark_refuses_an_unknown_imputer():
    run = subprocess.run([sys.executable, str(MIXED), "--methods", "KNN,Foo"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    assert "unknown imputer(s) ['Foo']" in run.stderr and "NRMSE" not in run.stdout


def test_mixed_imputation_benchmark_refuses_an_unknown_table_and_keeps_its_held_out_tables_apart():
    run = subprocess.run([sys.executable, str(MIXED), "--tables", "penguins,atlantis", "--methods", "KNN"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "unknown table(s) ['atlantis']" in run.stderr and "NRMSE" not in run.stdout
    spec = importlib.util.spec_from_file_location("imputation_mixed", MIXED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tuning, held_out, fresh = (set(module.SETS[name]) for name in ("tuning", "held-out", "fresh"))
    assert not tuning & held_out and not tuning & fresh and not held_out & fresh
    assert tuning | held_out | fresh == set(module.TABLES)


def test_mixed_imputation_benchmark_records_a_failed_miceforest_run_and_raises_any_other_imputers_error():
    spec = importlib.util.spec_from_file_location("imputation_mixed", MIXED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class Failing(module.MeanMode):
        def fit(self, frame):
            raise ValueError("data must be finite")

    rng = np.random.default_rng(0)
    truth = pd.DataFrame({"x": rng.normal(size=40), "c": pd.Categorical(rng.choice(["a", "b"], 40))})
    target = pd.Series(rng.normal(size=40))
    removed = module.holes(truth, 0.2, rng)
    module.imputers = lambda seed: {"miceforest": Failing, "Mean/mode": module.MeanMode, "KNN": Failing}
    results = module.run_case(truth, target, removed, "same", 0, ["miceforest", "Mean/mode"])
    assert results["miceforest"] == "failed (data must be finite)"
    assert len(results["Mean/mode"]) == 4  # the other imputers still scored
    with pytest.raises(ValueError, match="data must be finite"):  # only miceforest's failures are recorded
        module.run_case(truth, target, removed, "same", 0, ["KNN"])


def test_mixed_imputation_benchmarks_missforest_classifies_each_category_from_the_other_columns():
    spec = importlib.util.spec_from_file_location("imputation_mixed", MIXED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.default_rng(0)
    x = rng.normal(size=300)
    # Three categories told by x; the one-hot missForest's regressions fill most holes with the mode.
    labels = np.where(x < -0.3, "low", np.where(x < 0.6, "mid", "high"))
    truth = pd.DataFrame({"x": x, "y": x + 0.1 * rng.normal(size=300), "c": pd.Categorical(labels)})
    removed = module.holes(truth, 0.2, rng)
    removed[:, 0] = False  # x always tells the category
    holed = truth.mask(removed)
    imputer = module.MissForestClassifiers(0, n_estimators=10, rounds=2).fit(holed.iloc[:200])
    for frame in (holed.iloc[:200], holed.iloc[200:]):  # the training rows and new rows
        out = imputer.transform(frame)
        assert list(out.dtypes) == list(frame.dtypes) and not out.isna().any().any()
        observed = frame.notna().to_numpy()
        assert (out.to_numpy()[observed] == frame.to_numpy()[observed]).all()
        holes = frame["c"].isna().to_numpy()
        assert (out["c"].to_numpy()[holes] == truth.loc[frame.index, "c"].to_numpy()[holes]).mean() > 0.8
