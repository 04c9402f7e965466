"""Every estimator, the MLM scorer and the command line give the numbers recorded in
``tests/data/golden.npz`` (see ``tests/support/golden.py``).

float64 results are held to 1e-12 relative. The masked LM's outputs (``mlm_*`` and the command
line's ``cli/*``) come from a float32 model: its matrix products are summed in an order that
depends on the processor's vector units (AVX2, AVX-512, AMX) and on the number of threads, so the
same seeded call differs by up to 7e-9 relative between two x86-64 CPUs (measured between the
recording machine and an AVX-512 BF16 one). They are held to 1e-6 relative, a few float32 roundings
of a sum of log-probabilities: a bound that holds on any x86-64 CPU and still catches any change of
masks, of the model or of the reduction (each changes them by far more).
"""

import numpy as np
import pytest

pytest.importorskip("transformers")

from support.golden import GOLDEN, golden_outputs  # noqa: E402

#: Relative tolerance of the outputs of the float32 masked LM (see the module's docstring).
FLOAT32_RTOL = 1e-6


def test_outputs_equal_the_recorded_ones(tmp_path):
    recorded = np.load(GOLDEN)
    outputs = golden_outputs(tmp_path)
    assert sorted(outputs) == sorted(recorded.files)
    for name in recorded.files:
        rtol = FLOAT32_RTOL if name.startswith(("mlm_", "cli/")) else 1e-12
        np.testing.assert_allclose(outputs[name], recorded[name], rtol=rtol, atol=0, err_msg=name)
