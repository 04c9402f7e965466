"""Two CPU processes under a bounded time: what the tests of several ranks share."""

import socket
import time

import pytest


def free_port():
    """A free TCP port on the loopback address, for a process group's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_two_ranks(target, args, timeout):
    """Spawn ``target(rank, *args)`` for ranks 0 and 1; kill both and fail the test past ``timeout`` seconds."""
    import torch

    processes = torch.multiprocessing.start_processes(target, args=args, nprocs=2, join=False, start_method="spawn")
    deadline = time.monotonic() + timeout
    while not processes.join(timeout=2):
        if time.monotonic() > deadline:
            for process in processes.processes:
                process.kill()
            pytest.fail(f"The 2 spawned ranks did not finish within {timeout} s.")
