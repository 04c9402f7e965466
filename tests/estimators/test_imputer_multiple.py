"""Multiple imputation: the gallery's Rubin's-rules example runs at a small size and pools correctly."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plot_multiple_imputation.py"


def _example():
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("plot_multiple_imputation", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rubin_interval_pools_within_and_between_variances():
    example = _example()
    low, high = example.rubin_interval([1.0, 1.2, 0.8, 1.0], [0.01] * 4, 1000)
    total = 0.01 + (1 + 1 / 4) * np.var([1.0, 1.2, 0.8, 1.0], ddof=1)
    assert (low + high) / 2 == pytest.approx(1.0)
    assert 2 * 1.96 * np.sqrt(total) < high - low < 2 * 4.0 * np.sqrt(total)


def test_example_runs_small(tmp_path, capsys):
    output = tmp_path / "mi.png"
    _example().main(["--replications", "1", "--n-imputations", "3", "--max-epochs", "5", "--n-samples", "60",
                     "--output", str(output)])
    printed = capsys.readouterr().out
    assert printed.count("coverage") == 3 and output.stat().st_size > 5_000
