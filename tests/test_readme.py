"""Every Python block of the README and of the user guide's pages below runs as written, offline.

Each block runs in a fresh interpreter, in a temporary directory. A block that needs the network
says so just before it (``<!-- needs network -->`` in Markdown, a ``.. needs network: why``
comment in reST) and is skipped; none of the README's does.
"""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# the pages checked so far; the others' blocks (incomplete_data, scaling, ...) are still sketches
USER_GUIDE = [ROOT / "docs" / "user_guide" / f"{name}.rst" for name in ("mlm_curves", "diffusion", "errors", "data")]
MARKDOWN_BLOCK = re.compile(r"(<!-- needs network -->\n)?```python\n(.*?)```", re.DOTALL)
REST_BLOCK = re.compile(r"(\.\. needs network[^\n]*\n\n)?\.\. code-block:: python\n\n((?:(?:   [^\n]*)?\n)+)")


def python_blocks(path):
    """``(line, needs_network, code)`` of each Python block of a Markdown or reST file."""
    text = path.read_text(encoding="utf-8")
    pattern = MARKDOWN_BLOCK if path.suffix == ".md" else REST_BLOCK
    return [(text[: match.start(2)].count("\n") + 1, bool(match.group(1)), textwrap.dedent(match.group(2)))
            for match in pattern.finditer(text)]


BLOCKS = [(path, *block) for path in (README, *USER_GUIDE) for block in python_blocks(path)]


def test_the_blocks_are_found():
    assert len(python_blocks(README)) >= 4
    assert [needs for path, _, needs, _ in BLOCKS if path.suffix == ".rst"] == [True, False, False, True]


@pytest.mark.parametrize("path, line, needs_network, code", [
    # CI runs the README's blocks against the installed wheel too: a user's first lines
    pytest.param(*block, marks=[pytest.mark.installed] if block[0] == README else [], id=f"{block[0].name}:{block[1]}")
    for block in BLOCKS])
def test_a_block_runs_as_written(path, line, needs_network, code, tmp_path):
    if needs_network:
        pytest.skip("the block needs the network")
    for package in ("transformers", "antiberty"):  # load_antiberty needs the antiberty wheel
        if package in code:
            pytest.importorskip(package)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(README.parent), *sys.path]), "HF_HUB_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, f"{path.name} line {line} failed:\n{result.stderr[-3000:]}"
