"""Data parallelism with :mod:`torch.distributed`: ranks, shards, gathers, DDP and checkpoints.

A script started by ``torchrun --nproc-per-node N`` or ``accelerate launch`` runs once per
process, each told its ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` in its environment.
:func:`init_distributed` reads them (:func:`launcher_ranks`), joins the process group (gloo on
the CPU, NCCL on CUDA, each process on ``cuda:LOCAL_RANK``) and returns a
:class:`DistributedContext`; without a launcher it returns a world of one process, and
everything below runs the same code.

- Scoring is split by :func:`sharded_map`: each rank computes the items of its shard
  (:func:`shard_indices`) and every rank gets all results back in input order. The results
  equal one process's when an item's result depends on the item alone (skmpt seeds a text's
  masks from ``random_state`` and the text, never from its batch or rank).
- Training wraps the model in ``DistributedDataParallel`` (:func:`wrap_model`; gradients are
  averaged over ranks, and :func:`sync_gradients` synchronises only a step's last backward
  pass). :meth:`MLMCurveScorer.fit <skmpt.MLMCurveScorer.fit>` draws the same global batch and the same masks on every
  rank from one shared generator, and each rank computes the loss of its own share of the
  texts, so a step equals one process's step on the whole batch. A caller that wants
  different draws per rank instead seeds them with :func:`rank_generator`.
- :func:`save_checkpoint` and :func:`load_checkpoint` save and restore the model, the
  optimiser, the step and every rank's random states, so that a resumed run continues exactly
  where the interrupted one saved. A run deletes only the checkpoints it wrote itself (the
  ``written`` list it passes), and :func:`check_checkpoint_dir` refuses to start a new run in a
  directory that holds another's.

It needs none of skmpt's models or estimators, so it serves any torch training loop.
"""

import contextlib
import importlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from ._utils import resolve_device

__all__ = [
    "DistributedContext",
    "init_distributed",
    "launcher_ranks",
    "current_context",
    "shard_indices",
    "sharded_map",
    "wrap_model",
    "sync_gradients",
    "rank_generator",
    "check_checkpoint_dir",
    "save_checkpoint",
    "load_checkpoint",
]

_LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")

#: torch modules whose functions take ``group=group.WORLD`` as a default argument, evaluated when the module is
#: imported: imported after the group is joined (transformers' ``from_pretrained`` imports the first), that
#: default holds the world group, and gloo's threads with it, after ``destroy_process_group``, until the
#: interpreter exits, where a rank could abort ("terminate called without an active exception").
#: :func:`init_distributed` imports them before it joins the group, so their default is ``None``.
_MODULES_BINDING_THE_WORLD_GROUP = (
    "torch.distributed.nn.functional",
    "torch.distributed.optim.zero_redundancy_optimizer",
    "torch.distributed.fsdp.sharded_grad_scaler",
)


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands in a data-parallel run.

    Attributes
    ----------
    rank : int
        This process's number, ``0 .. world_size - 1``.
    world_size : int
        Number of processes; 1 without a launcher.
    local_rank : int
        This process's number on its machine; it picks ``cuda:local_rank``.
    device : torch.device
        The device this process computes on.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self):
        """Whether this is rank 0, the process that writes files."""
        return self.rank == 0


def launcher_ranks(environ):
    """``(rank, world_size, local_rank)`` set by a launcher, or ``None`` when none is set.

    Reads ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (which defaults to ``RANK``) without
    joining any process group: a command line uses it to let only rank 0 report.

    Parameters
    ----------
    environ : mapping
        The environment, such as :data:`os.environ`.

    Returns
    -------
    ranks : tuple of (int, int, int) or None

    Raises
    ------
    ValueError
        When the variables are partial, not integers or inconsistent.

    Examples
    --------
    >>> from skmpt.distributed import launcher_ranks
    >>> launcher_ranks({}) is None
    True
    >>> launcher_ranks({"RANK": "1", "WORLD_SIZE": "2"})
    (1, 2, 1)
    """
    present = [name for name in _LAUNCHER_VARIABLES if name in environ]
    if not present:
        return None
    if "RANK" not in environ or "WORLD_SIZE" not in environ:
        raise ValueError(
            f"The environment sets {', '.join(present)} but not both RANK and WORLD_SIZE; start the "
            "processes with torchrun or accelerate launch, which set RANK, WORLD_SIZE and LOCAL_RANK."
        )
    values = {}
    for name in _LAUNCHER_VARIABLES:
        text = environ.get(name, environ["RANK"] if name == "LOCAL_RANK" else None)
        try:
            values[name] = int(text)
        except ValueError:
            raise ValueError(f"The environment variable {name}={text!r} is not an integer.") from None
    rank, world_size, local_rank = (values[name] for name in _LAUNCHER_VARIABLES)
    if world_size < 1 or not 0 <= rank < world_size or local_rank < 0:
        raise ValueError(
            f"The launcher's variables are inconsistent: RANK={rank}, WORLD_SIZE={world_size}, "
            f"LOCAL_RANK={local_rank} (need 0 <= RANK < WORLD_SIZE and LOCAL_RANK >= 0)."
        )
    return rank, world_size, local_rank


def _rank_device(device, local_rank, launched):
    """``device`` resolved for this process: under a launcher, CUDA means ``cuda:local_rank``."""
    resolved = resolve_device(device)
    if launched and resolved.type == "cuda" and (device == "auto" or resolved.index is None):
        if local_rank >= torch.cuda.device_count():
            raise ValueError(
                f"LOCAL_RANK={local_rank} but this machine has {torch.cuda.device_count()} CUDA devices; "
                "start at most one process per GPU."
            )
        return torch.device("cuda", local_rank)
    return resolved


def init_distributed(device="auto", *, backend=None, environ=None):
    """Join the launcher's process group, if there is one, and say where this process stands.

    Without ``RANK`` and ``WORLD_SIZE`` in the environment (no launcher), or with a world of
    one process, no process group is created and the context is rank 0 of 1. A process group
    that already exists (created by the caller, or by an earlier call) is used as it is.

    Before it joins the group, it imports the torch modules that would otherwise bind the world
    group as a default argument when imported later (transformers' ``from_pretrained`` imports
    one): the group, and gloo's threads, then end with ``destroy_process_group``, and no rank
    aborts at interpreter exit.

    Parameters
    ----------
    device : str or torch.device, default="auto"
        ``"auto"`` is CUDA when available, else the CPU; under a launcher, ``"auto"`` and
        ``"cuda"`` mean ``cuda:LOCAL_RANK``, one GPU per process.
    backend : str or None, default=None
        The backend of :func:`torch.distributed.init_process_group`; ``None`` is ``"nccl"``
        on CUDA and ``"gloo"`` on the CPU.
    environ : mapping or None, default=None
        Where to read the launcher's variables; ``None`` is :data:`os.environ`.

    Returns
    -------
    context : DistributedContext

    Examples
    --------
    >>> from skmpt.distributed import init_distributed
    >>> init_distributed("cpu", environ={})
    DistributedContext(rank=0, world_size=1, local_rank=0, device=device(type='cpu'))
    """
    environ = os.environ if environ is None else environ
    launched = launcher_ranks(environ)
    if dist.is_available() and dist.is_initialized():
        local_rank = launched[2] if launched else int(environ.get("LOCAL_RANK", dist.get_rank()))
        device = _rank_device(device, local_rank, launched=True)
        return DistributedContext(dist.get_rank(), dist.get_world_size(), local_rank, device)
    if launched is None or launched[1] == 1:
        local_rank = launched[2] if launched else 0
        return DistributedContext(0, 1, local_rank, _rank_device(device, local_rank, launched is not None))
    rank, world_size, local_rank = launched
    device = _rank_device(device, local_rank, launched=True)
    if not dist.is_available():
        raise RuntimeError("This torch build has no torch.distributed; it cannot run with WORLD_SIZE > 1.")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    for module in _MODULES_BINDING_THE_WORLD_GROUP:
        importlib.import_module(module)
    dist.init_process_group(
        backend or ("nccl" if device.type == "cuda" else "gloo"),
        init_method="env://",
        rank=rank,
        world_size=world_size,
        device_id=device if device.type == "cuda" else None,
    )
    return DistributedContext(rank, world_size, local_rank, device)


def current_context(device=None):
    """This process's place in the process group that exists now, without creating one.

    Parameters
    ----------
    device : torch.device or None, default=None
        Recorded in the context; ``None`` is the CPU.

    Returns
    -------
    context : DistributedContext
        Rank 0 of 1 when no process group is initialised.
    """
    device = torch.device("cpu") if device is None else torch.device(device)
    if not (dist.is_available() and dist.is_initialized()):
        return DistributedContext(device=device)
    local_rank = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
    return DistributedContext(dist.get_rank(), dist.get_world_size(), local_rank, device)


def shard_indices(n_items, rank, world_size, *, strategy="strided", costs=None):
    """The items rank ``rank`` of ``world_size`` computes; the shards partition ``range(n_items)``.

    Parameters
    ----------
    n_items : int
    rank, world_size : int
    strategy : {"strided", "contiguous"}, default="strided"
        ``"strided"`` deals items out like cards (``rank, rank + world_size, ...``);
        ``"contiguous"`` gives each rank one block of consecutive items, the first
        ``n_items % world_size`` blocks one item longer.
    costs : array-like of shape (n_items,) or None, default=None
        The work each item takes (a text's length): items are dealt in decreasing order of
        cost, so that with ``"strided"`` every rank gets a similar share of the work.

    Returns
    -------
    indices : ndarray of int of shape (n_shard,)
        Increasing.

    Examples
    --------
    >>> from skmpt.distributed import shard_indices
    >>> shard_indices(5, 1, 2)
    array([1, 3])
    >>> shard_indices(5, 0, 2, strategy="contiguous")
    array([0, 1, 2])
    >>> shard_indices(4, 0, 2, costs=[1, 9, 8, 2])  # costs 9 and 2; rank 1 gets 8 and 1
    array([1, 3])
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"Need 0 <= rank < world_size; got rank={rank}, world_size={world_size}.")
    if strategy not in ("strided", "contiguous"):
        raise ValueError(f"strategy must be 'strided' or 'contiguous'; got {strategy!r}.")
    order = np.arange(n_items)
    if costs is not None:
        costs = np.asarray(costs, dtype=float)
        if costs.shape != (n_items,):
            raise ValueError(f"costs must have shape ({n_items},); got {costs.shape}.")
        order = np.argsort(-costs, kind="stable")
    if strategy == "strided":
        return np.sort(order[rank::world_size])
    return np.sort(np.array_split(order, world_size)[rank])


def sharded_map(function, n_items, *, context=None, strategy="strided", costs=None):
    """``function(indices)`` on this rank's shard; every rank returns all results in input order.

    Parameters
    ----------
    function : callable
        ``function(indices)`` takes an increasing integer array and returns one result per
        index (a list, or an array whose first axis is the items); results of different
        items may have different shapes. It is called on every rank, also with an empty
        shard, so that it can take part in collective operations.
    n_items : int
    context : DistributedContext or None, default=None
        ``None`` is :func:`current_context`.
    strategy, costs
        How the items are split, as in :func:`shard_indices`.

    Returns
    -------
    results : list of length n_items
        ``results[i]`` is item ``i``'s result, computed on whichever rank held it.

    Examples
    --------
    >>> from skmpt.distributed import sharded_map
    >>> sharded_map(lambda indices: [10 * int(i) for i in indices], 3)
    [0, 10, 20]
    """
    context = current_context() if context is None else context
    indices = shard_indices(n_items, context.rank, context.world_size, strategy=strategy, costs=costs)
    local = list(function(indices))
    if len(local) != len(indices):
        raise ValueError(f"function returned {len(local)} results for a shard of {len(indices)} items.")
    if context.world_size == 1:
        shards = [(indices, local)]
    else:
        # Objects, not tensors: the per-item results may have different shapes.
        shards = [None] * context.world_size
        dist.all_gather_object(shards, (indices, local))
    results, filled = [None] * n_items, np.zeros(n_items, dtype=bool)
    for shard, shard_results in shards:
        for index, result in zip(shard, shard_results, strict=True):
            results[index] = result
        filled[shard] = True
    if not filled.all():  # the ranks disagree about n_items
        raise RuntimeError(f"Items {np.flatnonzero(~filled)[:10].tolist()} were computed by no rank.")
    return results


# ---------------------------------------------------------------------------------------------
# training


def wrap_model(model, context):
    """``model`` in :class:`~torch.nn.parallel.DistributedDataParallel` when the world has
    several processes, else ``model`` itself.

    DDP averages the gradients over ranks at each ``backward``; call it through
    :func:`sync_gradients` when a step accumulates several backward passes.
    """
    if context.world_size == 1:
        return model
    device_ids = [context.device.index] if context.device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


def _inner_module(model):
    """The module a checkpoint saves: the one inside a ``DistributedDataParallel`` wrapper."""
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


def sync_gradients(model, sync):
    """Context for one backward pass of an accumulated step: DDP averages the gradients only
    when ``sync`` is true (the step's last pass); a model without DDP always accumulates.

    Every rank must make the same number of synchronising passes per step: give exactly one
    pass per step ``sync=True`` on every rank.
    """
    if sync or not isinstance(model, torch.nn.parallel.DistributedDataParallel):
        return contextlib.nullcontext()
    return model.no_sync()


def rank_generator(generator, rank):
    """A generator of its own for rank ``rank``, seeded from one draw of the shared ``generator``.

    Every rank draws the same seed (the shared generators are in the same state) and mixes in
    its rank, so ranks draw different masks, reproducibly; the shared generator advances the
    same way on every rank.

    Parameters
    ----------
    generator : torch.Generator
        Seeded alike on every rank.
    rank : int

    Returns
    -------
    generator : torch.Generator
        On the CPU.

    Examples
    --------
    >>> import torch
    >>> from skmpt.distributed import rank_generator
    >>> a = rank_generator(torch.Generator().manual_seed(0), 0)
    >>> b = rank_generator(torch.Generator().manual_seed(0), 1)
    >>> bool(torch.equal(torch.rand(3, generator=a), torch.rand(3, generator=b)))
    False
    """
    seed = int(torch.randint(2**62, (1,), generator=generator))
    mixed = np.random.SeedSequence([seed, rank]).generate_state(2, dtype=np.uint32)
    return torch.Generator(device="cpu").manual_seed(int(mixed[0]) << 31 | int(mixed[1]) >> 1)


_STEP_DIRECTORY = re.compile(r"^step-(\d+)$")


def _random_states(generators):
    state = {name: generator.get_state() for name, generator in generators.items()}
    state["torch"] = torch.get_rng_state()  # dropout and other draws from the global generator
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_random_states(state, generators):
    for name, generator in generators.items():
        if name not in state:
            raise ValueError(f"The checkpoint holds no state of generator {name!r}; it holds {sorted(state)}.")
        generator.set_state(state[name])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _checkpoint_entries(directory):
    """The names in ``directory`` that are checkpoints or look like them, and its ``latest`` file."""
    return sorted(p.name for p in directory.iterdir() if _STEP_DIRECTORY.match(p.name) or p.name == "latest")


def check_checkpoint_dir(directory, *, resume):
    """Refuse, before any training, a ``directory`` a run could not keep its checkpoints in.

    A new run (``resume=False``) never writes beside another run's checkpoints, nor beside
    folders that look like checkpoints (``step-NNNNNNNN``): it would mix them up, and could
    replace them. Resuming needs the ``latest`` file that names the checkpoint to continue,
    whenever the directory holds any.

    Parameters
    ----------
    directory : str or path
        Need not exist yet.
    resume : bool
        Whether the run continues the latest checkpoint of ``directory``.

    Raises
    ------
    ValueError
        When ``directory`` is a file, when a new run would start beside checkpoints, or when
        a run to resume finds checkpoints without ``latest``.

    Examples
    --------
    >>> import tempfile
    >>> from skmpt.distributed import check_checkpoint_dir
    >>> with tempfile.TemporaryDirectory() as directory:
    ...     check_checkpoint_dir(directory, resume=False)  # empty: a new run may start
    """
    directory = Path(directory)
    if directory.is_symlink() and not directory.exists():
        raise ValueError(f"checkpoint_dir={str(directory)!r} is a symbolic link to nothing.")
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"checkpoint_dir={str(directory)!r} is a file, not a directory.")
    if not directory.is_dir():
        # It will be created: the nearest existing ancestor must be a directory.
        ancestor = next(parent for parent in directory.absolute().parents if parent.exists())
        if not ancestor.is_dir():
            raise ValueError(f"checkpoint_dir={str(directory)!r} cannot be created: {str(ancestor)!r} is a file.")
        return
    entries = _checkpoint_entries(directory)
    if entries and not resume:
        raise ValueError(
            f"checkpoint_dir={str(directory)!r} holds the checkpoints of another run ({', '.join(entries[:3])}"
            f"{', ...' if len(entries) > 3 else ''}). A new run never writes beside them nor deletes them: pass "
            "resume=True to continue that run, or give an empty or new checkpoint_dir."
        )
    if entries and resume and "latest" not in entries:
        raise ValueError(
            f"checkpoint_dir={str(directory)!r} holds {', '.join(entries[:3])} but no 'latest' file naming the "
            "checkpoint to resume; it was not written by a run of skmpt, or not to its end."
        )


def save_checkpoint(directory, *, model, optimizer, step, generators=None, extra=None, context=None, keep=1,
                    written=None):
    """Save a training state under ``directory/step-NNNNNNNN``, atomically; rank 0 writes.

    The checkpoint holds the model (``save_pretrained`` for a transformers model, so the
    directory ``model/`` loads with ``from_pretrained``; else its ``state_dict`` in
    ``model.pt``), and in ``trainer_state.pt`` the optimiser's state, the step, ``extra``,
    and each rank's random states (its ``generators`` and torch's global generators). It is
    written to a temporary directory that is then renamed, and the file ``latest`` names it
    only afterwards, so an interruption at any moment leaves the previous checkpoint whole.
    Called on every rank (the random states are gathered); returns once the file is written.

    Only checkpoints this run wrote, listed in ``written``, are ever deleted; a checkpoint of
    the same step that it did not write is an error, never replaced.

    Parameters
    ----------
    directory : str or path
    model : torch.nn.Module
        Possibly wrapped in ``DistributedDataParallel``.
    optimizer : torch.optim.Optimizer
    step : int
        Steps completed.
    generators : dict of str to torch.Generator or None, default=None
        This rank's generators to restore on resume.
    extra : dict or None, default=None
        More training state (history, data order): tensors, numbers, strings and lists or
        dicts of them, what ``torch.load(weights_only=True)`` reads back.
    context : DistributedContext or None, default=None
        ``None`` is :func:`current_context`.
    keep : int, default=1
        Checkpoints of ``written`` kept; older ones are deleted after the new one is in place.
    written : list of pathlib.Path or None, default=None
        The checkpoints this run wrote, oldest first (the caller's list, empty at the start of
        the run): the new one is appended, and all but the last ``keep`` deleted and removed.
        ``None`` deletes nothing.

    Returns
    -------
    path : pathlib.Path
        The new checkpoint's directory.
    """
    if keep < 1:
        raise ValueError(f"keep must be at least 1; got {keep}.")
    context = current_context() if context is None else context
    directory = Path(directory)
    states = _random_states(generators or {})
    if context.world_size > 1:
        gathered = [None] * context.world_size
        dist.all_gather_object(gathered, states)
    else:
        gathered = [states]
    path = directory / f"step-{step:08d}"
    if context.is_main:
        if path.exists() and path not in (written or []):
            raise ValueError(f"{path} exists and was not written by this run; it is never replaced.")
        directory.mkdir(parents=True, exist_ok=True)
        temporary = Path(tempfile.mkdtemp(prefix=f".step-{step:08d}-", dir=directory))
        module = _inner_module(model)
        if hasattr(module, "save_pretrained"):
            module.save_pretrained(temporary / "model")
        else:
            torch.save(module.state_dict(), temporary / "model.pt")
        trainer_state = {
            "step": int(step),
            "world_size": context.world_size,
            "optimizer": optimizer.state_dict(),
            "random_states": gathered,
            "extra": extra or {},
        }
        torch.save(trainer_state, temporary / "trainer_state.pt")
        if path.exists():  # the same step saved again by this run: replace it whole
            shutil.rmtree(path)
            written.remove(path)
        os.replace(temporary, path)
        pointer = directory / "latest.tmp"
        pointer.write_text(path.name + "\n", encoding="utf-8")
        os.replace(pointer, directory / "latest")
        if written is not None:
            written.append(path)
            while len(written) > keep:
                old = written.pop(0)
                if old.exists():
                    shutil.rmtree(old)
    if context.world_size > 1:
        dist.barrier()  # no rank goes on (and may be killed) before the checkpoint exists
    return path


def _damaged(path, what="it is damaged or was not written by save_checkpoint"):
    return ValueError(f"The checkpoint file {path} cannot be read: {what}.")


def _read_trainer_state(path):
    """``trainer_state.pt`` of the checkpoint ``path``, checked; errors name the file."""
    state_file = path / "trainer_state.pt"
    if not state_file.is_file():
        raise ValueError(f"The checkpoint {path} holds no trainer_state.pt.")
    try:
        state = torch.load(state_file, map_location="cpu", weights_only=True)
    except Exception as exc:  # unpickling, zip and I/O errors alike: the file is not one of ours
        # (torch's own message may advise loading with weights_only=False: never do that here)
        raise _damaged(state_file, f"it is damaged or was not written by save_checkpoint ({type(exc).__name__})") \
            from None
    keys = ("step", "world_size", "optimizer", "random_states", "extra")
    if not isinstance(state, dict) or any(key not in state for key in keys):
        raise _damaged(state_file, f"it is not a trainer state (it needs {', '.join(keys)})")
    return state


def _load_model_state(module, path):
    """Load the model saved in checkpoint ``path`` into ``module``; errors name the file."""
    try:
        if (path / "model").is_dir():
            source = path / "model"
            saved = type(module).from_pretrained(source).state_dict()
        else:
            source = path / "model.pt"
            saved = torch.load(source, map_location=next(module.parameters()).device, weights_only=True)
    except Exception as exc:
        raise _damaged(source, f"it is damaged or was not written by save_checkpoint ({type(exc).__name__})") \
            from None
    try:
        module.load_state_dict(saved)
    except (RuntimeError, TypeError, KeyError) as exc:
        message = str(exc).strip().splitlines()[0][:300]
        raise _damaged(source, f"it holds another model than this run's ({message})") from None


def load_checkpoint(directory, *, model, optimizer, generators=None, context=None, check=None):
    """Restore the latest checkpoint of ``directory`` into ``model``, ``optimizer`` and
    ``generators``, on every rank.

    Parameters
    ----------
    directory : str or path
    model : torch.nn.Module
        The same architecture as the saved one; loaded in place.
    optimizer : torch.optim.Optimizer
        Built over ``model``'s parameters; loaded in place.
    generators : dict of str to torch.Generator or None, default=None
        Restored to this rank's saved states, as are torch's global generators.
    context : DistributedContext or None, default=None
        ``None`` is :func:`current_context`.
    check : callable or None, default=None
        ``check(extra, path)`` is called with the saved ``extra`` before anything is restored;
        it raises to refuse a checkpoint of another run.

    Returns
    -------
    checkpoint : dict or None
        ``{"step": int, "extra": dict, "path": pathlib.Path}``, or ``None`` when
        ``directory`` holds no checkpoint yet (a first run).

    Raises
    ------
    ValueError
        Naming the file, when the checkpoint is damaged or foreign (another model, not written
        by :func:`save_checkpoint`), or was saved by another number of processes.
    """
    context = current_context() if context is None else context
    directory = Path(directory)
    pointer = directory / "latest"
    if not pointer.exists():
        return None
    if not pointer.is_file():
        raise _damaged(pointer, "it should be a file naming the latest checkpoint")
    name = pointer.read_text(encoding="utf-8", errors="replace").strip()
    if not _STEP_DIRECTORY.match(name):
        raise _damaged(pointer, f"it should name a checkpoint step-NNNNNNNN of {directory}, not {name[:50]!r}")
    path = directory / name
    state = _read_trainer_state(path)
    if state["world_size"] != context.world_size:
        raise ValueError(
            f"The checkpoint {path} was saved by {state['world_size']} processes; this run has "
            f"{context.world_size}. Resume with the same number of processes, whose random states it holds."
        )
    if check is not None:
        check(state["extra"], path)
    try:  # before the model is touched: random states that do not fit are a damaged file
        _set_random_states(state["random_states"][context.rank], generators or {})
    except (RuntimeError, TypeError, KeyError, IndexError) as exc:
        raise _damaged(path / "trainer_state.pt", f"its random states do not fit ({type(exc).__name__})") from None
    _load_model_state(_inner_module(model), path)
    try:
        optimizer.load_state_dict(state["optimizer"])
    except (ValueError, KeyError, RuntimeError) as exc:
        raise _damaged(path / "trainer_state.pt", f"its optimiser state does not fit this model ({exc})") from None
    return {"step": state["step"], "extra": state["extra"], "path": path}
