"""Every estimator, the MLM scorer and the command line give the numbers recorded in
``tests/data/golden.npz`` (see ``tests/golden.py``), to 1e-12 relative."""

import numpy as np
import pytest

pytest.importorskip("transformers")

from golden import GOLDEN, golden_outputs  # noqa: E402


def test_outputs_equal_the_recorded_ones(tmp_path):
    recorded = np.load(GOLDEN)
    outputs = golden_outputs(tmp_path)
    assert sorted(outputs) == sorted(recorded.files)
    for name in recorded.files:
        np.testing.assert_allclose(outputs[name], recorded[name], rtol=1e-12, atol=0, err_msg=name)
