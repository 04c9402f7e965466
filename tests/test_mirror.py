"""Tests mirror the modules: every public module of skmpt has its own test file.

``skmpt/<package>/<module>.py`` is tested in ``tests/<package>/test_<module>.py``, and a top-level
``skmpt/<module>.py`` in ``tests/test_<module>.py`` (or ``tests/<module>/test_<module>.py`` when its
tests need a folder of their own). Left out: ``__init__.py`` and ``__main__.py`` (what they gather is
tested where it is defined) and private modules ``_name.py``, which hold the implementation of a public
module and are tested through it (``models/_chains.py`` through the models' chains, in
``tests/models/test_chains.py`` too when its maths needs it).
"""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "skmpt"


def _public_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        if not path.name.startswith("_"):
            yield path.relative_to(ROOT).as_posix()


def _test_files(module):
    """Where ``module``'s tests may live, the first being the one named in a failure."""
    parts = Path(module).with_suffix("").parts[1:]
    if len(parts) == 1:
        return [f"tests/test_{parts[0]}.py", f"tests/{parts[0]}/test_{parts[0]}.py"]
    return [f"tests/{'/'.join(parts[:-1])}/test_{parts[-1]}.py"]


@pytest.mark.parametrize("module", list(_public_modules()))
def test_every_public_module_has_its_test_file(module):
    files = _test_files(module)
    assert any((ROOT / name).is_file() for name in files), f"{module} has no test file: write {files[0]}"
