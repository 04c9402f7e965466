"""The intra-op threads of a fit: one for small steps, torch's own for large ones, the user's
own choice whenever there is one, and torch's setting restored after."""

import numpy as np
import torch

from skmpt import MaskedPPCA
from skmpt.estimators._trainer import SMALL_STEP, fit_threads, intra_op_threads


def test_small_steps_run_on_one_thread_large_ones_on_torchs(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    import skmpt.estimators._trainer as trainer

    monkeypatch.setattr(trainer, "_THREADS_AT_IMPORT", torch.get_num_threads())
    assert fit_threads(SMALL_STEP) == 1
    assert fit_threads(SMALL_STEP + 1) is None


def test_a_users_own_setting_wins(monkeypatch):
    import skmpt.estimators._trainer as trainer

    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setattr(trainer, "_THREADS_AT_IMPORT", torch.get_num_threads() + 1)  # set since import
    assert fit_threads(10) is None
    monkeypatch.setattr(trainer, "_THREADS_AT_IMPORT", torch.get_num_threads())
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert fit_threads(10) is None


def test_a_fit_restores_torchs_threads(monkeypatch):
    import skmpt.estimators._trainer as trainer

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)  # tests/conftest.py runs the tests on one: two, torch's own, must come back
    monkeypatch.setattr(trainer, "_THREADS_AT_IMPORT", 2)  # so that the small fit below runs on one
    try:
        with intra_op_threads(1):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        MaskedPPCA(1, max_epochs=2, random_state=0, device="cpu").fit(np.random.RandomState(0).randn(50, 3))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)
