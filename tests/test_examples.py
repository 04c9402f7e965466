"""The README's main job keeps working."""

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_prints_estimates_and_saves_curve(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    output = tmp_path / "curve.png"
    _load("plot_mpt_demo").main(["--output", str(output), "--score-masks", "10", "--n-components", "3"])
    printed = capsys.readouterr().out
    for line in ("MPT estimate of the LML", "exact LML of the fitted model", "PCA.score"):
        assert line in printed
    assert output.stat().st_size > 10_000
