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
    monkeypatch.setenv("OMP_NUM_THREADS", str(torch.get_num_threads()))  # torch's number: in effect
    assert fit_threads(10) is None
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setenv("MKL_NUM_THREADS", str(torch.get_num_threads()))
    assert fit_threads(10) is None


def test_a_variable_set_after_torch_started_is_not_a_choice(monkeypatch):
    # dask's nanny sets OMP_NUM_THREADS=1 and MKL_NUM_THREADS=1 in the client's environment before it
    # starts a worker: torch read them long before, and the client keeps torch's own number of threads.
    import skmpt.estimators._trainer as trainer

    monkeypatch.setattr(trainer, "_THREADS_AT_IMPORT", torch.get_num_threads())
    monkeypatch.setenv("OMP_NUM_THREADS", str(torch.get_num_threads() + 1))
    monkeypatch.setenv("MKL_NUM_THREADS", str(torch.get_num_threads() + 1))
    assert fit_threads(SMALL_STEP) == 1
    assert fit_threads(SMALL_STEP + 1) is None


def test_a_fit_and_its_start_run_on_one_thread_in_a_dask_client(monkeypatch):
    # The fit's start (factor analysis' EM steps from the moments) runs inside the one-thread block too.
    import skmpt.estimators._linear_gaussian as linear_gaussian
    import skmpt.estimators._trainer as trainer
    from skmpt import MaskedFactorAnalysis

    monkeypatch.setattr(trainer, "_THREADS_AT_IMPORT", torch.get_num_threads())
    monkeypatch.setenv("OMP_NUM_THREADS", str(torch.get_num_threads() + 1))  # as dask's nanny leaves it
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    seen = []
    start = linear_gaussian.pca_start

    def recording_start(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return start(*args, **kwargs)

    monkeypatch.setattr(linear_gaussian, "pca_start", recording_start)
    X = np.random.RandomState(0).randn(300, 4) @ np.random.RandomState(1).randn(4, 6)
    MaskedFactorAnalysis(2, max_epochs=3, random_state=0, device="cpu").fit(X + np.random.RandomState(2).randn(300, 6))
    assert seen == [1]


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


def test_a_step_from_moments_is_sized_by_one_groups_operations():
    # Each group's objective is computed on its own: threads share out one group's operations.
    from sklearn.utils import Bunch

    from skmpt.estimators._moments import MomentSolver

    solver, params = MomentSolver(), Bunch(n_masks=4, batch_size="auto")
    one = solver.step_size(params, (20_000, 50), [object()])
    assert one == solver.step_size(params, (20_000, 50), [object()] * 6) == 4 * solver.masks_per_step * 50**2
