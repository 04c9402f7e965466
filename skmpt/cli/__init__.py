"""The ``skmpt`` command line (also ``python -m skmpt``): a table of commands.

Each command is a module of this package, named in :data:`COMMANDS`, that uses skmpt's public
API only and defines ``HELP`` (one line for ``skmpt --help``), ``DESCRIPTION``,
``add_arguments(parser)`` and ``run(args)``. What every command needs (its integer arguments,
input and output files, process group) is in :mod:`skmpt.cli.common`. A new command is one
such module and one line of the table.

Every argument is checked before any model loads. An error is one line on standard error, with
exit status 2 for a usage error (a bad argument, a missing file, an output that exists without
``--force``: :class:`UsageError`) and 1 for an error while running; ``--debug`` shows the
traceback. Under ``torchrun`` or ``accelerate launch`` only rank 0 reports.

Importing this package and its command modules loads neither torch nor the models: a command
imports them when it runs, so that ``--help``, ``--version`` and a bad argument answer at once.
"""

import argparse
import importlib
import logging
import os
import re
import sys
import warnings

from .. import __version__

__all__ = ["COMMANDS", "UsageError", "main"]

#: Command name -> module (in this package) that implements it.
COMMANDS = {
    "lm-eval": "skmpt.cli.lm_eval",
    "mlm-curve": "skmpt.cli.mlm_curve",
    "impute": "skmpt.cli.impute",
}


class UsageError(Exception):
    """A bad argument or a missing or protected file: exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{self.prog}: error: {message}")


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds ``(default: ...)`` to an option's help unless it has no default or its help gives one."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS or (
                "default" in (action.help or "")):
            return action.help
        return super()._get_help_string(action)


def _plain(text):
    """``text`` without reST markup (a command's ``DESCRIPTION`` may be its module's docstring)."""
    text = re.sub(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)\s*(?:<[^>]*>)?`", r"\1", text)  # :mod:`x`, :func:`t <x>`
    return re.sub(r"``(.*?)``", r"\1", text, flags=re.DOTALL)


def _parser():
    parser = _Parser(prog="skmpt", description="Masked pre-training tools: " + ", ".join(COMMANDS) + ".",
                     formatter_class=_Formatter)
    parser.add_argument("--version", action="version", version=f"skmpt {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = commands.add_parser(name, help=module.HELP, description=_plain(module.DESCRIPTION),
                                      formatter_class=_Formatter)
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def _one_line(exc):
    return " ".join(str(exc).split()) or type(exc).__name__


def _one_line_warning(message, *args, **kwargs):
    print(f"skmpt: warning: {_one_line(message)}", file=sys.stderr)


def _silent(*args, **kwargs):
    """``showwarning`` of a secondary rank: the main rank shows the same warnings."""


def _secondary_rank():
    """Whether a launcher started this process with a rank other than 0 (it then reports nothing).

    :func:`skmpt.distributed.launcher_ranks` reads the variables and checks them; it imports torch,
    so it is asked only when one of the variables that it reads is set.
    """
    if not any(name in os.environ for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        return False
    from ..distributed import launcher_ranks

    return launcher_ranks(os.environ)[0] != 0


def main(argv=None):
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit status.

    Examples
    --------
    >>> from skmpt.cli import main
    >>> main(["mlm-curve", "--model", "m", "--texts", "t", "--out", "o", "--score-masks", "0"])
    2
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    package_logger = logging.getLogger("skmpt")
    level = package_logger.level
    command = next((word for word in argv if word in COMMANDS), None)
    prefix = "skmpt" if command is None else f"skmpt {command}"
    try:
        args = _parser().parse_args(argv)
        # Under a launcher, only the main process (RANK 0) reports; the others show no messages.
        secondary = _secondary_rank()
        if not getattr(args, "quiet", False) and not secondary:
            package_logger.addHandler(handler)
            package_logger.setLevel(logging.INFO)
        with warnings.catch_warnings():
            # a warning is one line on standard error, as errors are
            warnings.showwarning = _silent if secondary else _one_line_warning
            args.run(args)
    except UsageError as exc:
        if debug:
            raise
        message = _one_line(exc)
        print(message if message.startswith("skmpt") else f"{prefix}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("skmpt: interrupted; no output was written", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            raise
        print(f"{prefix}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    finally:
        package_logger.removeHandler(handler)
        package_logger.setLevel(level)
    return 0
