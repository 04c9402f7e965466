import subprocess
import sys

import pytest

pytestmark = pytest.mark.installed  # CI runs these against the installed wheel too


def test_import_skmpt_is_light():
    """``import skmpt`` loads neither torch nor scikit-learn; estimators load on first use."""
    code = (
        "import sys, skmpt; "
        "assert 'torch' not in sys.modules and 'sklearn' not in sys.modules, sorted(sys.modules); "
        "skmpt.MaskedPPCA; assert 'torch' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_names():
    import skmpt

    for name in skmpt.__all__:
        assert getattr(skmpt, name) is not None
    assert set(skmpt.__all__) <= set(dir(skmpt))


def test_import_skmpt_cli_is_light():
    """The command line's table and its commands' options load without torch: ``--help`` answers at once."""
    code = (
        "import sys, skmpt.cli, skmpt.cli.common, skmpt.cli.impute, skmpt.cli.lm_eval, skmpt.cli.mlm_curve; "
        "heavy = [name for name in ('torch', 'transformers', 'lm_eval', 'sklearn') if name in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
