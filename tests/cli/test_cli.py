"""The ``skmpt`` command line answers ``--help``, ``--version`` and argument errors without torch.

Each case runs in a fresh interpreter, which must not import torch, transformers, lm_eval or skmpt's
estimators and text packages, and must answer within a bound far below a torch import on a loaded machine.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from skmpt.cli import COMMANDS, main

pytestmark = pytest.mark.installed  # CI runs these against the installed wheel too

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "lm_eval", "sklearn", "skmpt.estimators", "skmpt.text", "skmpt.distributed")

CASES = [
    (["--version"], 0),
    (["--help"], 0),
    *[([name, "--help"], 0) for name in COMMANDS],
    (["lm-eval", "--model", "x", "--bogus"], 2),
    (["mlm-curve", "--model", "m", "--texts", "t", "--out", "o", "--score-masks", "0"], 2),
    (["impute", "in.csv", "-o", "out.csv", "--max-epochs", "0"], 2),
    (["nosuchcommand"], 2),
]


@pytest.mark.parametrize(("argv", "status"), CASES, ids=[" ".join(argv) for argv, _ in CASES])
def test_help_version_and_argument_errors_import_nothing_heavy(argv, status):
    code = (
        "import sys\n"
        "from skmpt.cli import main\n"
        f"try:\n    status = main({argv!r})\n"
        "except SystemExit as exc:\n    status = exc.code or 0\n"
        f"heavy = [name for name in {HEAVY!r} if name in sys.modules]\n"
        "print('STATUS', status, 'HEAVY', heavy, file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(name, None)
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stderr
    assert f"STATUS {status} HEAVY []" in result.stderr, result.stderr
    assert elapsed < 15, f"{argv} took {elapsed:.1f} s"


def _help(capsys, argv):
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", [[], *([name] for name in COMMANDS)], ids=["skmpt", *COMMANDS])
def test_help_has_no_markup_and_one_default_per_option(capsys, argv):
    text = _help(capsys, argv)
    for markup in ("``", ":mod:", ":func:", ":class:", ":meth:", ":data:"):
        assert markup not in text
    for paragraph in text.split("\n  -"):
        assert " ".join(paragraph.split()).count("default") <= 1, paragraph


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_takes_debug(capsys, name):
    assert "--debug" in _help(capsys, [name])
