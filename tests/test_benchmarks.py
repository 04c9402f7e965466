"""The benchmarks' command lines refuse what they cannot run before any fit."""

import importlib.util
import subprocess
import sys
from pathlib import Path

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


MIXED = Path(__file__).resolve().parents[1] / "benchmarks" / "imputation_mixed.py"


def test_mixed_imputation_benchmark_refuses_an_unknown_imputer():
    run = subprocess.run([sys.executable, str(MIXED), "--methods", "KNN,Foo"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    assert "unknown imputer(s) ['Foo']" in run.stderr and "NRMSE" not in run.stdout
