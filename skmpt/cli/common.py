"""What every command of the ``skmpt`` command line shares: its errors, integer arguments, files and process group.

A command (a module named in :data:`skmpt.cli.COMMANDS`) builds on these instead of writing its own:

- :class:`skmpt.cli.UsageError` (raised here, defined beside :func:`skmpt.cli.main` that catches it):
  a bad argument or a missing or protected file, reported on one line with exit status 2 (any
  other exception exits with 1).
- :func:`integer`, :func:`positive_int`, :func:`non_negative_int`, :func:`random_seed`: ``type=`` of an ``argparse``
  option, whose message names the value (``'2.7' is not an integer``, ``must be a positive
  integer; got 0``).
- :func:`read_lines`: a UTF-8 file of one item per line (``-``: standard input), checked to exist.
- :func:`check_outputs`: before any work, every output may be written: its folder exists, it is not
  a folder, not one of the inputs, not another output, and new unless ``overwrite`` (``--force``).
- :func:`atomic_output`: outputs written to temporary files beside their targets and renamed when
  all are written, so that an interrupted command leaves no partial file.
- :func:`process_group`: under ``torchrun`` or ``accelerate launch``, the process group joined for
  the command and left before it returns, so that no rank aborts at exit.
- :func:`library_bars`: the progress bars of the libraries underneath (Hugging Face hub downloads,
  transformers' weight loading) hidden for ``--quiet`` and restored after the command.

In both mappings of :func:`check_outputs`, ``-`` (a standard stream) and ``None`` (an option not
given) are no files and are skipped: a command that refuses ``-`` for an option says so itself.
"""

import argparse
import contextlib
import os
import stat
import sys
import tempfile

from . import UsageError

__all__ = [
    "integer",
    "positive_int",
    "non_negative_int",
    "random_seed",
    "read_lines",
    "check_outputs",
    "atomic_output",
    "process_group",
    "library_bars",
]


def integer(text):
    """An integer argument (``type=integer`` of an ``argparse`` option).

    Parameters
    ----------
    text : str
        The argument as written on the command line.

    Returns
    -------
    value : int

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not an integer (``'2.7'``, ``'True'``, ``'nan'``); the message quotes it.

    Examples
    --------
    >>> from skmpt.cli.common import integer
    >>> integer("-3")
    -3
    >>> integer("2.7")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: '2.7' is not an integer
    """
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def positive_int(text):
    """An integer argument of at least 1 (``type=positive_int``), such as a number of masks.

    Parameters
    ----------
    text : str
        The argument as written on the command line.

    Returns
    -------
    value : int

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not an integer, or is less than 1; the message gives the value.

    Examples
    --------
    >>> from skmpt.cli.common import positive_int
    >>> positive_int("3")
    3
    >>> positive_int("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a positive integer; got 0
    """
    value = integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {value}")
    return value


def non_negative_int(text):
    """An integer argument of at least 0 (``type=non_negative_int``), such as a token id.

    Parameters
    ----------
    text : str
        The argument as written on the command line.

    Returns
    -------
    value : int

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not an integer, or is negative; the message gives the value.

    Examples
    --------
    >>> from skmpt.cli.common import non_negative_int
    >>> non_negative_int("0")
    0
    >>> non_negative_int("-1")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a non-negative integer; got -1
    """
    value = integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer; got {value}")
    return value


def random_seed(text):
    """A seed argument (``type=random_seed``): an integer in ``[0, 2**32)``, what NumPy's ``RandomState`` takes.

    Parameters
    ----------
    text : str
        The argument as written on the command line.

    Returns
    -------
    value : int

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not an integer in that range; the message gives the value.

    Examples
    --------
    >>> from skmpt.cli.common import random_seed
    >>> random_seed("4294967295")
    4294967295
    >>> random_seed("4294967296")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer in [0, 2**32); got 4294967296
    """
    value = integer(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32); got {value}")
    return value


def read_lines(path, option):
    """Every line of a UTF-8 file (``-``: standard input), without its line break, blank lines included.

    Parameters
    ----------
    path : str or path-like
        The file, or ``"-"`` for standard input.
    option : str
        The option that named it (``"--texts"``), for the messages.

    Returns
    -------
    lines : list of str
        Line ``i + 1`` of the file is ``lines[i]``.

    Raises
    ------
    UsageError
        If ``path`` is a folder, does not exist, or is not UTF-8 text.

    Examples
    --------
    >>> import os, tempfile
    >>> from skmpt.cli.common import read_lines
    >>> path = os.path.join(tempfile.mkdtemp(), "texts.txt")
    >>> with open(path, "w", encoding="utf-8") as file:
    ...     _ = file.write("a b\\n\\nb a\\n")
    >>> read_lines(path, "--texts")
    ['a b', '', 'b a']
    >>> read_lines(os.path.dirname(path), "--texts")
    Traceback (most recent call last):
    ...
    skmpt.cli.UsageError: --texts '...' is a directory, not a file of texts
    """
    path = os.fspath(path)
    if path != "-" and os.path.isdir(path):
        raise UsageError(f"{option} {path!r} is a directory, not a file of texts")
    if path != "-" and not os.path.isfile(path):
        raise UsageError(f"{option} {path!r}: no such file")
    stream = sys.stdin if path == "-" else open(path, encoding="utf-8")
    try:
        return [line.rstrip("\r\n") for line in stream]
    except UnicodeDecodeError as exc:
        raise UsageError(f"{option} {path!r} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    finally:
        if stream is not sys.stdin:
            stream.close()


def _files(paths):
    """``(option, path)`` of the options that name a file: not ``None``, not ``-``."""
    return [(option, os.fspath(path)) for option, path in paths.items() if path is not None and path != "-"]


def _same_file(a, b):
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(inputs, outputs, *, overwrite=False):
    """Check, before any work, that every output may be written; a ``UsageError`` names the first that may not.

    An output may be written when its folder exists and a file can be made in it (for a symbolic
    link, the folder of the file it points to, which is the file written), it is not a folder nor
    another file that is not a regular one (a device such as ``/dev/null``, a pipe: the output would
    replace it), it is none of the inputs and no other output, and it does not exist yet unless
    ``overwrite``. :func:`atomic_output` checks again
    at the end that no output appeared meanwhile.

    Parameters
    ----------
    inputs : dict of str to str or path-like or None
        Option -> file the command reads (``{"--texts": "texts.txt"}``); ``None`` and ``"-"`` are skipped.
    outputs : dict of str to str or path-like or None
        Option -> file the command writes, checked in this order; ``None`` and ``"-"`` are skipped.
    overwrite : bool, default=False
        Whether an existing output may be replaced (the command's ``--force``). An input is never.

    Raises
    ------
    UsageError
        If an output's folder is missing or cannot be written to, or it is a folder, not a regular
        file, an input, another output, or an existing file while ``overwrite`` is false.

    Examples
    --------
    >>> import os, tempfile
    >>> from skmpt.cli.common import check_outputs
    >>> folder = tempfile.mkdtemp()
    >>> texts, out = os.path.join(folder, "texts.txt"), os.path.join(folder, "curve.csv")
    >>> check_outputs({"--texts": texts}, {"--out": out, "--plot": None})
    >>> check_outputs({"--texts": texts}, {"--out": texts}, overwrite=True)
    Traceback (most recent call last):
    ...
    skmpt.cli.UsageError: --out '...texts.txt' is the --texts input; it is never written to
    """
    inputs, outputs = _files(inputs), _files(outputs)
    for number, (option, path) in enumerate(outputs):
        directory = os.path.dirname(os.path.realpath(path))  # a symbolic link's target is written
        if not os.path.isdir(directory):
            raise UsageError(f"{option} {path!r}: the directory {directory!r} does not exist")
        try:  # a file made there and removed: a read-only folder or file system is known before the work
            with tempfile.TemporaryFile(dir=directory):
                pass
        except OSError as error:
            raise UsageError(f"{option} {path!r}: no file can be written in the directory {directory!r} "
                             f"({error.strerror or error})") from None
        if os.path.isdir(path):
            raise UsageError(f"{option} {path!r} is a directory")
        if os.path.exists(path) and not os.path.isfile(path):  # a device, a pipe, a socket: never replaced
            raise UsageError(f"{option} {path!r} is not a regular file (a device, a pipe or a socket), which "
                             f"the output would replace; name a file")
        for input_option, input_path in inputs:
            if _same_file(path, input_path):
                raise UsageError(f"{option} {path!r} is the {input_option} input; it is never written to")
        if os.path.exists(path) and not overwrite:
            raise UsageError(f"{option} {path!r} exists; pass --force to overwrite it")
        for earlier, earlier_path in outputs[:number]:
            if _same_file(path, earlier_path):
                raise UsageError(f"{option} and {earlier} are the same file")


def _temporary_beside(path):
    """``(file, temporary, target)``: a binary file open on a new temporary file in the folder of ``target``.

    ``target`` is ``path`` itself, or the file a symbolic link ``path`` points to (so that the link
    stays and the file it names is replaced). The temporary file has the permissions of the file
    it replaces, or those a plain ``open()`` gives a new file.
    """
    target = os.path.realpath(path)
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=f".{os.path.basename(target)}.",
                                         suffix=".tmp" + os.path.splitext(target)[1])
    if os.path.exists(target):
        mode = stat.S_IMODE(os.stat(target).st_mode)
    else:
        umask = os.umask(0)  # the only way to read the umask is to set it
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(temporary, mode)
    return os.fdopen(handle, "wb"), temporary, target


@contextlib.contextmanager
def atomic_output(*paths, overwrite=False):
    """Write files all at once or not at all: temporary files beside them, renamed when the block ends without error.

    Each path gets a binary file opened on a temporary file in its own folder. When the ``with``
    block ends normally, the files are closed, checked not to have appeared meanwhile (unless
    ``overwrite``) and renamed onto their paths with :func:`os.replace`, which is atomic on one
    file system; when it raises (``KeyboardInterrupt`` included), every temporary file is removed
    and no path is touched. A path that is a symbolic link stays one: the file it points to is
    replaced. A replaced file keeps its permissions.

    Parameters
    ----------
    *paths : str or path-like
        The files to write (not ``-``: write standard output after the block).
    overwrite : bool, default=False
        Whether a file that exists when the block ends may be replaced (the command's ``--force``).

    Yields
    ------
    files : list of file objects
        One binary file per path, in the order of ``paths``.

    Raises
    ------
    UsageError
        If a path exists when the block ends while ``overwrite`` is false; nothing is written.

    Examples
    --------
    >>> import os, tempfile
    >>> from skmpt.cli.common import atomic_output
    >>> path = os.path.join(tempfile.mkdtemp(), "curve.csv")
    >>> with atomic_output(path) as [file]:
    ...     _ = file.write(b"line,score\\n")
    >>> open(path).read()
    'line,score\\n'
    >>> with atomic_output(path) as [file]:
    ...     _ = file.write(b"line,score\\n")
    Traceback (most recent call last):
    ...
    skmpt.cli.UsageError: '...curve.csv' appeared while the command ran; pass --force to overwrite it
    >>> os.listdir(os.path.dirname(path))  # no temporary file is left
    ['curve.csv']
    """
    opened = []
    try:
        for path in paths:
            opened.append(_temporary_beside(os.fspath(path)))
        yield [file for file, _, _ in opened]
        for file, _, _ in opened:
            file.close()
        for _, _, target in opened:
            if os.path.exists(target) and not overwrite:
                raise UsageError(f"{target!r} appeared while the command ran; pass --force to overwrite it")
        for _, temporary, target in opened:
            os.replace(temporary, target)
    finally:
        for file, temporary, _ in opened:
            file.close()
            if os.path.exists(temporary):
                os.unlink(temporary)


@contextlib.contextmanager
def process_group(device="auto"):
    """The command's processes: under a launcher, the process group joined on entry and left on exit.

    Under ``torchrun`` or ``accelerate launch`` (:func:`skmpt.distributed.launcher_ranks`), every
    process runs the command; the group is joined here (:func:`skmpt.distributed.init_distributed`)
    so that it is also left here: when the block ends normally the ranks wait for each other (one
    of them may still be writing), and in every case the group is destroyed before the command
    returns, so that no rank aborts at exit: gloo's threads end with the group (no torch module
    keeps it, see :func:`skmpt.distributed.init_distributed`), and the threads that could outlive
    it (the tokenizers' pool, tqdm's monitor) are not started under a launcher. A group that the
    caller had joined already is left to the caller. Without a launcher it is a world of one process.

    Parameters
    ----------
    device : str or torch.device, default="auto"
        The device of :func:`skmpt.distributed.init_distributed` (under a launcher, each process
        takes ``cuda:LOCAL_RANK`` on CUDA).

    Yields
    ------
    context : skmpt.distributed.DistributedContext
        This process's rank, the world size and its device; ``context.is_main`` is the process
        that writes the outputs.

    Examples
    --------
    >>> from skmpt.cli.common import process_group
    >>> with process_group("cpu") as context:
    ...     print(context.world_size, context.is_main)
    1 True
    """
    import torch.distributed as dist  # imported when a command runs, not for its --help

    from ..distributed import init_distributed, launcher_ranks

    if launcher_ranks(os.environ) is not None:
        # no thread may outlive the process group: the tokenizers' pool and tqdm's monitor
        # would otherwise still run at interpreter exit, where the C++ runtime aborts on them
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from tqdm import tqdm

        tqdm.monitor_interval = 0
    joined = dist.is_available() and not dist.is_initialized()
    context = init_distributed(device)
    try:
        yield context
        if joined and dist.is_initialized():
            dist.barrier()  # every rank leaves together, once the main one has written
    finally:
        if joined and dist.is_initialized():
            dist.destroy_process_group()


@contextlib.contextmanager
def library_bars(shown):
    """Within the block, the libraries' own progress bars are shown or hidden, and restored after it.

    Hugging Face hub's download bars and transformers' ("Loading weights") are switched by their
    own settings; skmpt's bars follow ``verbose``. Libraries not installed are left alone.

    Parameters
    ----------
    shown : bool
        ``False`` for ``--quiet``.

    Examples
    --------
    >>> from skmpt.cli.common import library_bars
    >>> with library_bars(shown=False):
    ...     pass
    """
    switches = []  # (is_disabled, disable, enable) of each library
    with contextlib.suppress(ImportError):
        from huggingface_hub import utils as hub

        switches.append((hub.are_progress_bars_disabled, hub.disable_progress_bars, hub.enable_progress_bars))
    with contextlib.suppress(ImportError):
        from transformers.utils import logging as transformers_logging

        switches.append((lambda: not transformers_logging.is_progress_bar_enabled(),
                         transformers_logging.disable_progress_bar, transformers_logging.enable_progress_bar))
    before = [is_disabled() for is_disabled, _, _ in switches]
    if not shown:
        for _, disable, _ in switches:
            disable()
    try:
        yield
    finally:
        for (_, disable, enable), disabled in zip(switches, before, strict=True):
            (disable if disabled else enable)()
