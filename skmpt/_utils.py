"""What every layer of skmpt shares: random generators, devices and dtypes, and the one
memory budget that sizes every chunk of work.

Nothing here imports another skmpt module; every other module may import from here.
"""

import contextlib
import contextvars
import functools
import numbers
import platform
import time
from pathlib import Path

import numpy as np
import torch

__all__ = [
    "BFLOAT16_TOLERANCE",
    "DTYPES",
    "auto_dtype",
    "check_generator",
    "chunk_budget",
    "get_working_memory",
    "native_bfloat16",
    "resolve_device",
    "resolve_dtype",
    "seeded",
    "working_memory",
]

#: Names of the torch dtypes skmpt accepts for a ``dtype`` parameter. The array estimators
#: take the first two; the masked-LM scorer takes all four (and "auto").
DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

#: Largest difference, in nats per token, between a masked LM's bfloat16 and float32 scores
#: that ``dtype="auto"`` accepts (:func:`auto_dtype`): measured by ``benchmarks/mlm_curve.py``
#: on AntiBERTy and a random BERT of its shape, whose bfloat16 scores stay below it.
BFLOAT16_TOLERANCE = 0.01

#: bfloat16 matrix products must be this many times faster than float32 ones for
#: :func:`native_bfloat16` to count a CPU's bfloat16 units as native.
_BFLOAT16_SPEEDUP = 1.5

#: Default of :func:`working_memory`, in MiB: 2**24 float64 numbers.
DEFAULT_WORKING_MEMORY = 128

_working_memory = contextvars.ContextVar("skmpt_working_memory", default=DEFAULT_WORKING_MEMORY)


def get_working_memory():
    """The memory, in MiB, that one chunk of masks, copies or samples may take (default 128).

    Examples
    --------
    >>> import skmpt
    >>> skmpt.get_working_memory()
    128
    """
    return _working_memory.get()


@contextlib.contextmanager
def working_memory(mib):
    """Context manager that sets the memory one chunk of work may take, in MiB.

    As scikit-learn's ``working_memory`` setting: every chunked computation of skmpt (masks
    scored at once, masked copies per forward pass, importance samples, quadrature grids) sizes
    its chunks from it, so a smaller value trades speed for peak memory. Results do not depend
    on it beyond floating-point rounding.

    Parameters
    ----------
    mib : int or float
        Positive.

    Examples
    --------
    >>> import skmpt
    >>> with skmpt.working_memory(16):
    ...     skmpt.get_working_memory()
    16
    """
    if isinstance(mib, bool) or not isinstance(mib, numbers.Real) or not 0 < mib < float("inf"):
        raise ValueError(f"working_memory must be a positive, finite number of MiB; got {mib!r}.")
    token = _working_memory.set(mib)
    try:
        yield
    finally:
        _working_memory.reset(token)


def chunk_budget(fraction=1.0, itemsize=8):
    """How many numbers of ``itemsize`` bytes a chunk may hold: ``fraction`` of the working memory.

    Examples
    --------
    >>> from skmpt._utils import chunk_budget
    >>> chunk_budget() == 2**24
    True
    """
    return max(1, int(get_working_memory() * 2**20 * fraction) // itemsize)


def check_generator(random_state=None):
    """Turn ``random_state`` into a CPU :class:`torch.Generator`.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState, numpy.random.Generator \
            or torch.Generator, default=None
        ``None`` draws a fresh seed from NumPy's global state (so ``np.random.seed``
        makes it reproducible, as everywhere in scikit-learn); an int seeds the generator;
        a NumPy random state or generator supplies the seed; a torch generator is returned
        as it is. An int must lie in ``[0, 2**64)``.

    Returns
    -------
    generator : torch.Generator

    Examples
    --------
    >>> import torch
    >>> from skmpt.masks import check_generator
    >>> g = check_generator(0)
    >>> bool(torch.equal(torch.rand(3, generator=g), torch.rand(3, generator=check_generator(0))))
    True
    """
    if isinstance(random_state, torch.Generator):
        return random_state
    if random_state is None:
        seed = int(np.random.randint(np.iinfo(np.int32).max))
    elif isinstance(random_state, np.random.RandomState):
        seed = int(random_state.randint(np.iinfo(np.int32).max))
    elif isinstance(random_state, np.random.Generator):
        seed = int(random_state.integers(np.iinfo(np.int64).max))
    elif isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        seed = int(random_state)
        if not 0 <= seed < 2**64:
            raise ValueError(f"An int random_state must lie in [0, 2**64) (a torch seed); got {seed}.")
    else:
        raise ValueError(
            f"random_state must be None, an int, a numpy RandomState or Generator, or a "
            f"torch.Generator; got {random_state!r}."
        )
    return torch.Generator(device="cpu").manual_seed(seed)


def resolve_device(device):
    """``"auto"`` is CUDA when available, else the CPU; a CUDA device must exist.

    Examples
    --------
    >>> from skmpt._utils import resolve_device
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; got {device!r}.") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was asked for, but CUDA is not available; use 'auto' or 'cpu'.")
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; got {device!r}.")
    return resolved


def resolve_dtype(dtype):
    """The torch dtype a ``dtype`` parameter names: a name of :data:`DTYPES` or a torch dtype.

    Examples
    --------
    >>> from skmpt._utils import resolve_dtype
    >>> resolve_dtype("float32")
    torch.float32
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype]
    except (KeyError, TypeError):
        raise ValueError(f"dtype must be one of {sorted(DTYPES)} or a torch.dtype; got {dtype!r}.") from None


@functools.cache
def _cpu_flags():
    """The CPU's feature flags from ``/proc/cpuinfo`` (Linux), or ``None`` where there is no such
    file; read once per process (every scorer's ``fit`` with ``dtype="auto"`` asks)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    flags = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86, ARM
            flags.update(value.split())
    return frozenset(flags)


@functools.cache
def _cpu_bfloat16_speedup():
    """How many times faster one (64 x 512) @ (512 x 512) product runs in bfloat16 than in float32.

    The product is laid out as ``torch.nn.Linear`` computes it; the best of three interleaved
    runs of each, in CPU time, with torch's current threads. Measured once per process (about
    2 ms where bfloat16 is native, 0.1 s where it is emulated).
    """
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(64, 512, generator=generator)
    weight = torch.randn(512, 512, generator=generator)
    pairs = [(inputs, weight), (inputs.bfloat16(), weight.bfloat16())]
    best = [float("inf")] * 2
    with torch.inference_mode():
        for a, w in pairs:  # one untimed run each: the kernels' first call sets them up
            torch.nn.functional.linear(a, w)
        for _ in range(3):
            for i, (a, w) in enumerate(pairs):
                start = time.process_time()
                for _ in range(4):
                    torch.nn.functional.linear(a, w)
                best[i] = min(best[i], time.process_time() - start)
    return best[0] / max(best[1], 1e-9)


def native_bfloat16(device):
    """Whether ``device`` multiplies bfloat16 matrices natively, faster than float32.

    CUDA: compute capability 8.0 or above (``torch.cuda.is_bf16_supported(including_emulation=
    False)``). CPU: on Linux, the processor must list ``amx_bf16`` or ``avx512_bf16`` (x86) or
    ``bf16`` (ARM) among its flags, and then, as everywhere else, one bfloat16 matrix product
    must run at least 1.5 times faster than in float32 (a one-off probe, cached for the
    process): torch emulates bfloat16 on processors without such units, several times slower
    than float32.

    Parameters
    ----------
    device : torch.device or str

    Returns
    -------
    native : bool

    Examples
    --------
    >>> import torch
    >>> from skmpt._utils import native_bfloat16
    >>> isinstance(native_bfloat16(torch.device("cpu")), bool)
    True
    """
    device = torch.device(device)
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    if device.type != "cpu":
        return False
    flags = _cpu_flags()
    if flags is not None and platform.machine().lower() in ("x86_64", "amd64", "i686", "aarch64", "arm64"):
        if not flags & {"amx_bf16", "avx512_bf16", "bf16"}:
            return False
    return _cpu_bfloat16_speedup() >= _BFLOAT16_SPEEDUP


def auto_dtype(device, model_dtype=torch.float32):
    """The dtype ``dtype="auto"`` runs a masked LM in on ``device``.

    bfloat16 for a float32 model on a device with native bfloat16 matrix units
    (:func:`native_bfloat16`), where bfloat16 scores differ from float32 ones by less than
    ``BFLOAT16_TOLERANCE`` nats per token on the models measured; the model's own dtype
    everywhere else: float32 on a processor that emulates bfloat16 (it would be slower and less
    exact), and a float64, float16 or bfloat16 model as it was given or saved.

    Parameters
    ----------
    device : torch.device or str
    model_dtype : torch.dtype, default=torch.float32
        The dtype of the model's floating-point parameters.

    Returns
    -------
    dtype : torch.dtype

    Examples
    --------
    >>> import torch
    >>> from skmpt._utils import auto_dtype
    >>> auto_dtype(torch.device("cpu"), torch.float64)
    torch.float64
    """
    if model_dtype == torch.float32 and native_bfloat16(device):
        return torch.bfloat16
    return model_dtype


@contextlib.contextmanager
def seeded(seed, device):
    """torch's global generators seeded with ``seed`` inside the block, and restored after.

    The CPU generator is seeded, and the CUDA generator of ``device`` when it is a CUDA device;
    no other. (``torch.manual_seed`` would also queue the seeding of every CUDA device, recording
    a stack trace each time: a millisecond per call, which the stopping rule pays every epoch.)

    Examples
    --------
    >>> import torch
    >>> from skmpt._utils import seeded
    >>> with seeded(0, torch.device("cpu")):
    ...     a = torch.rand(2)
    >>> with seeded(0, torch.device("cpu")):
    ...     b = torch.rand(2)
    >>> bool(torch.equal(a, b))
    True
    """
    devices = []
    if device.type == "cuda":
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=devices):  # initialises CUDA, filling its default_generators
        torch.default_generator.manual_seed(seed)
        for index in devices:
            torch.cuda.default_generators[index].manual_seed(seed)
        yield
