"""Leaving the process group of a command: no gloo thread may outlive it.

``torch.distributed.nn.functional`` takes ``group=group.WORLD`` as a default argument, evaluated when
it is imported; transformers' ``from_pretrained`` imports it, after the command joined the group. Its
default then held the world group, and gloo's threads with it, after ``destroy_process_group``, until
the interpreter exited, where a rank of ``torchrun -m skmpt mlm-curve`` aborted about once in twenty
runs ("terminate called without an active exception").
"""

import json
import os
import sys
from pathlib import Path

import pytest
from support.ranks import free_port, run_two_ranks

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task"),
    pytest.mark.installed,  # CI runs it against the installed wheel too: the spawned ranks import skmpt afresh
]


def _native_threads():
    """The names of this process's threads, as the kernel knows them (C++ threads included)."""
    return [Path(f"/proc/self/task/{task}/comm").read_text().strip() for task in os.listdir("/proc/self/task")]


def _rank(rank, port, directory):
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    import torch

    from skmpt.cli.common import process_group
    from skmpt.distributed import sharded_map

    torch.set_num_threads(1)
    with process_group("cpu") as context:
        import torch.distributed.nn.functional  # as loading a model does, after the group is joined

        results = sharded_map(lambda indices: [int(i) for i in indices], 5, context=context)
        inside = _native_threads()
    report = {"results": results, "inside": inside, "after": _native_threads(),
              "default_group": repr(torch.distributed.nn.functional.broadcast.__defaults__)}
    Path(directory, f"rank{rank}.json").write_text(json.dumps(report))


def test_no_gloo_thread_outlives_the_command_process_group(tmp_path):
    run_two_ranks(_rank, (free_port(), str(tmp_path)), timeout=180)
    for rank in range(2):
        report = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert report["results"] == [0, 1, 2, 3, 4]
        assert any("gloo" in name for name in report["inside"]), report["inside"]  # the check can see them
        assert not [name for name in report["after"] if "gloo" in name], report["after"]
        assert report["default_group"] == "(None,)"
