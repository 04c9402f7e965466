"""Every Python block of the README runs as written, offline, each in a fresh interpreter.

A block that needs the network says so on the line before it (``<!-- needs network -->``) and
is skipped; none does today.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"(<!-- needs network -->\n)?```python\n(.*?)```", re.DOTALL)


def python_blocks(path):
    """``(line, needs_network, code)`` of each fenced Python block of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    return [(text[: match.start(2)].count("\n"), bool(match.group(1)), match.group(2))
            for match in BLOCK.finditer(text)]


def test_the_readme_has_its_blocks():
    assert len(python_blocks(README)) >= 4


@pytest.mark.parametrize("line, needs_network, code", python_blocks(README),
                         ids=[f"README.md:{line}" for line, _, _ in python_blocks(README)])
def test_a_readme_block_runs_as_written(line, needs_network, code, tmp_path):
    if needs_network:
        pytest.skip("the block needs the network")
    if "transformers" in code:
        pytest.importorskip("transformers")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(README.parent), *sys.path]), "HF_HUB_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, f"README.md line {line} failed:\n{result.stderr[-3000:]}"
