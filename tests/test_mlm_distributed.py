"""MLMCurveScorer under a launcher: 2 CPU processes (gloo) give the numbers of one process."""

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from test_cli import TEXTS, model_dir  # noqa: E402, F401  (the fixture: a tiny saved BERT)

from skmpt import __main__ as cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _rows(path):
    return list(csv.reader(path.open(encoding="utf-8")))


def test_command_line_under_torchrun_writes_one_complete_csv_from_rank_0(model_dir, tmp_path, capsys):  # noqa: F811
    pytest.importorskip("matplotlib")
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun is not installed")
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    arguments = ["mlm-curve", "--model", str(model_dir), "--texts", str(texts), "--mask-rates", "0.25,0.5",
                 "--n-masks", "3", "--device", "cpu", "--random-state", "0"]
    one = tmp_path / "one.csv"
    assert cli.main([*arguments, "--out", str(one), "--quiet"]) == 0

    runs = tmp_path / "runs"
    runs.mkdir()
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    done = subprocess.run(
        [torchrun, "--standalone", "--nproc-per-node", "2", "-m", "skmpt", *arguments,
         "--out", str(runs / "two.csv"), "--plot", str(runs / "two.png")],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # One CSV and one figure, written by rank 0 alone: no second copy, no temporary left behind.
    assert sorted(p.name for p in runs.iterdir()) == ["two.csv", "two.png"]
    assert done.stderr.count("mean score") == 1, done.stderr  # the closing message, once
    two, single = _rows(runs / "two.csv"), _rows(one)
    assert two[0] == single[0] and [r[0] for r in two] == [r[0] for r in single]  # every line, in order
    for got, want in zip(two[1:], single[1:], strict=True):
        assert (got[1] == "") == (want[1] == "")  # blank lines stay blank
        if want[1]:
            # float32 encoder: a text scored in another batch differs by rounding only
            np.testing.assert_allclose(np.array(got[1:], float), np.array(want[1:], float), rtol=1e-5)
