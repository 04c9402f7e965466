"""``skmpt mlm-curve --model DIR --texts FILE --out curve.csv``: MPT curves of a masked LM.

Writes one CSV row per line of the texts file: its line number, its number of tokens, the
cumulative MPT estimate of ``log p(x)`` (with ``--std``, its standard error ``score_std``;
with ``--pll METRIC``, the pseudo-log-likelihood ``pll``), the paper's area and ``S(x; M)`` at
each masking rate, in ``--unit`` (nats or bits);
a blank line gets a row with its line number and empty cells. With ``--plot``, a figure of the
mean curve.

Outputs are written to a temporary file beside the target and renamed at the end, so an
interrupted run leaves no partial file; an existing file is never overwritten without
``--force``, and the ``--texts`` input is never written to. ``--force`` keeps the replaced
file's permissions, and an output that is a symbolic link stays one: the file it points to is
replaced. Under ``torchrun`` every process
scores its share of the texts and rank 0 alone writes; the process group is left, and the
threads that could outlive it stopped, before the command returns, so a finished run exits
cleanly.
"""

import argparse
import csv
import importlib.util
import io
import logging
import os
import stat
import sys
import tempfile
import warnings

from skmpt.cli import UsageError
from skmpt.distributed import init_distributed, launcher_ranks
from skmpt.masks import parse_mask_rates
from skmpt.objectives import curve_area
from skmpt._utils import DTYPES
from skmpt.text import MLMCurveScorer, encode_texts
from skmpt.text.loading import check_local_path

__all__ = ["DEFAULT_RATES", "DESCRIPTION", "HELP", "add_arguments", "run"]

HELP = "MPT curve and cumulative score of a masked language model"
DESCRIPTION = "MPT curve, cumulative MPT estimate of log p(x) and paper's area of each text of a file."

logger = logging.getLogger("skmpt.cli")

#: ``--mask-rates`` by default: the scorer's ``DEFAULT_MASK_RATES``, spelled out.
DEFAULT_RATES = "0.01:0.99:0.01"


def _mask_rates(text):
    """``--mask-rates``, read and checked by :func:`skmpt.masks.parse_mask_rates`."""
    try:
        return parse_mask_rates(text)
    except ValueError as exc:
        message = str(exc).rstrip(".")
        raise argparse.ArgumentTypeError(message if repr(text) in message else f"{message} (from {text!r})") from None


def _integer(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _positive_int(text):
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {value}")
    return value


def _non_negative_int(text):
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer; got {value}")
    return value


def _at_least_two(text):
    value = _positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2 (room for the special tokens); got {value}")
    return value


def add_arguments(parser):
    """The options of ``skmpt mlm-curve``."""
    add = parser.add_argument
    add("--model", required=True,
        help="name or directory for AutoModelForMaskedLM.from_pretrained (AutoModel with --trust-remote-code)")
    add("--tokenizer", default=None, help="name or directory of the tokenizer (None: the model's)")
    add("--texts", required=True, help="UTF-8 file with one text per line ('-' for standard input)")
    add("--out", required=True, help="CSV file to write ('-' for standard output)")
    add("--plot", default=None, help="PNG file for the mean curve (needs matplotlib)")
    add("--force", action="store_true", help="overwrite --out and --plot if they exist")
    add("--mask-rates", type=_mask_rates, default=DEFAULT_RATES,
        help="'start:stop:step' (stop included) or 'r1,r2,...'")
    add("--score-masks", type=_positive_int, default=10, help="random masks per mask size, or orderings for the chain")
    add("--score-method", choices=["sweep", "chain"], default="sweep", help="estimator of the cumulative score")
    add("--unit", choices=["nats", "bits"], default="nats", help="unit of every log-probability written")
    add("--whole-word-masking", action="store_true", help="draw the curve's masks over words, not tokens")
    add("--std", action="store_true", help="add the column score_std, the score's Monte Carlo standard error")
    add("--pll", choices=["original", "within_word_l2r"], default=None,
        help="add the column pll, the pseudo-log-likelihood with this metric")
    add("--score-batch-size", type=_positive_int, default=64, help="most masked copies per forward pass")
    add("--max-batch-tokens", type=_positive_int, default=16384, help="most tokens per forward pass")
    add("--max-length", type=_at_least_two, default=512, help="longest text in tokens; longer ones are truncated")
    add("--device", default="auto", help="'auto', 'cpu', 'cuda' or 'cuda:N'")
    add("--dtype", choices=["auto", *DTYPES], default="auto",
        help="dtype the model runs in; 'auto': the checkpoint's own (bfloat16 is faster on a GPU or a CPU with "
             "bfloat16 units, and differs by about 1e-3 nats per token)")
    add("--revision", default=None, help="hub revision of the model (branch, tag or commit)")
    add("--local-files-only", action="store_true", help="never use the network, only the local cache")
    add("--trust-remote-code", action="store_true", help="allow a hub model's own code to run")
    add("--mask-token-id", type=_non_negative_int, default=None,
        help="id that masks a token, for a tokenizer without a mask token (MDLM: 50257 with GPT-2's)")
    add("--shift-logits", action="store_true", help="the logits at position i predict token i + 1 (Dream)")
    add("--timestep-arg", default=None, metavar="NAME",
        help="pass each masked copy's masking rate M/L to the model's forward as NAME (a time-conditioned model)")
    add("--random-state", type=int, default=0, help="seed of the masks")
    add("--quiet", action="store_true", help="no progress bar and no messages")
    add("--debug", action="store_true", help="show the traceback of an error")
def _same_file(a, b):
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def _check_output(path, option, args):
    """``path`` may be written: its directory exists, it is not the input, it is new or ``--force``."""
    directory = os.path.dirname(os.path.realpath(path))  # a symbolic link's target is written
    if not os.path.isdir(directory):
        raise UsageError(f"{option} {path!r}: the directory {directory!r} does not exist")
    if os.path.isdir(path):
        raise UsageError(f"{option} {path!r} is a directory")
    if args.texts != "-" and _same_file(path, args.texts):
        raise UsageError(f"{option} {path!r} is the --texts input; it is never written to")
    if os.path.exists(path) and not args.force:
        raise UsageError(f"{option} {path!r} exists; pass --force to overwrite it")


def _plot_format(path):
    """The format of ``--plot``: its extension, lower case, or ``png`` without one."""
    return os.path.splitext(path)[1][1:].lower() or "png"


def _check_plot_format(path):
    """matplotlib is installed and writes the format of ``--plot``: checked before any scoring."""
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--plot needs matplotlib, which is not installed")
    from matplotlib.figure import Figure

    formats = Figure().canvas.get_supported_filetypes()
    if _plot_format(path) not in formats:
        raise UsageError(
            f"--plot {path!r}: matplotlib cannot write .{_plot_format(path)} files; use one of the extensions "
            f"{', '.join(sorted(formats))}"
        )


def _read_texts(path):
    """``(line_numbers, texts)`` of every line, blank ones included (1-based numbers)."""
    if path != "-" and os.path.isdir(path):
        raise UsageError(f"--texts {path!r} is a directory, not a file of texts")
    if path != "-" and not os.path.isfile(path):
        raise UsageError(f"--texts {path!r}: no such file")
    stream = sys.stdin if path == "-" else open(path, encoding="utf-8")
    try:
        lines = [line.rstrip("\r\n") for line in stream]
    except UnicodeDecodeError as exc:
        raise UsageError(f"--texts {path!r} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    finally:
        if stream is not sys.stdin:
            stream.close()
    if not any(line.strip() for line in lines):
        raise UsageError(f"--texts {path!r} holds no text (it is empty or blank)")
    return list(range(1, len(lines) + 1)), lines


def _validate(args):
    """Every check that needs no model; returns the texts with their line numbers."""
    if args.out != "-":
        _check_output(args.out, "--out", args)
    if args.std and args.score_masks < 2:
        raise UsageError(f"--std needs --score-masks 2 or more (a standard deviation); got {args.score_masks}")
    if args.plot is not None:
        if args.plot == "-":
            raise UsageError("--plot must be a file, not '-'")
        _check_output(args.plot, "--plot", args)
        if args.out != "-" and _same_file(args.plot, args.out):
            raise UsageError("--plot and --out are the same file")
        _check_plot_format(args.plot)
    try:
        check_local_path(args.model, "--model")
        if args.tokenizer is not None:
            check_local_path(args.tokenizer, "--tokenizer")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return _read_texts(args.texts)


class _TimestepArgument:
    """``--timestep-arg NAME``: the timestep hook giving each copy's masking rate as ``NAME``."""

    def __init__(self, name):
        self.name = name

    def __call__(self, rate):
        return {self.name: rate}


def _atomic_write(path, write, suffix=""):
    """Write through ``write(file)`` to a temporary file beside ``path``; returns ``(temporary, target)``.

    The caller renames the temporary file to the target: ``path`` itself, or the file a symbolic
    link ``path`` points to (the link is kept and the file it names replaced). A replaced file's
    permissions are kept; a new file gets those a plain ``open()`` would give.
    """
    target = os.path.realpath(path)
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=f".{os.path.basename(target)}.",
                                         suffix=f".tmp{suffix}")
    if os.path.exists(target):
        mode = stat.S_IMODE(os.stat(target).st_mode)
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(temporary, mode)
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
    except BaseException:
        os.unlink(temporary)
        raise
    return temporary, target


def _score_file(args, line_numbers, lines, context):
    options = {"revision": args.revision, "local_files_only": args.local_files_only,
               "trust_remote_code": args.trust_remote_code}
    scorer = MLMCurveScorer(
        args.model,
        tokenizer=args.tokenizer,
        mask_rates=args.mask_rates,
        score_masks=args.score_masks,
        score_method=args.score_method,
        unit=args.unit,
        whole_word_masking=args.whole_word_masking,
        score_batch_size=args.score_batch_size,
        max_batch_tokens=args.max_batch_tokens,
        max_length=args.max_length,
        device=args.device,
        dtype=args.dtype,
        model_kwargs={key: value for key, value in options.items() if value},
        mask_token_id=args.mask_token_id,
        shift_logits=args.shift_logits,
        timestep_fn=None if args.timestep_arg is None else _TimestepArgument(args.timestep_arg),
        random_state=args.random_state,
        verbose=int(not args.quiet and context.is_main),
    ).fit()
    if context.is_main:
        logger.info("the model runs in %s (--dtype %s)", str(scorer.dtype_).removeprefix("torch."), args.dtype)
    kept = [i for i, line in enumerate(lines) if line.strip()]
    texts = [lines[i] for i in kept]
    names = [f"line {line_numbers[i]}" for i in kept]
    lengths = encode_texts(texts, scorer.tokenizer_, scorer.max_length_, names=names).n_tokens
    with warnings.catch_warnings():  # the truncation warning was given once, just above
        warnings.filterwarnings("ignore", message=".* longer than max_length", category=UserWarning)
        curve = scorer.transform(texts)
        scores = scorer.score_samples(texts, return_std=args.std)
        extra = {}  # the optional columns, each one value per text
        if args.std:
            scores, extra["score_std"] = scores
        if args.pll is not None:
            extra["pll"] = scorer.pseudo_log_likelihood(texts, metric=args.pll)
    areas = curve_area(curve, scorer.mask_rates_, scale=512)
    if not context.is_main:  # every rank holds all results; the main one writes them, once
        return

    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(["line", "n_tokens", "score", *extra, "paper_area", *scorer.get_feature_names_out()])
    rows = {i: [lengths[k], scores[k], *(v[k] for v in extra.values()), areas[k], *curve[k]]
            for k, i in enumerate(kept)}
    for i, number in enumerate(line_numbers):
        writer.writerow([number, *rows.get(i, [""] * (3 + len(extra) + curve.shape[1]))])
    table = buffer.getvalue().encode("utf-8")

    temporaries = []
    try:
        if args.out != "-":
            temporaries.append(_atomic_write(args.out, lambda file: file.write(table)))
        if args.plot is not None:
            temporaries.append(_atomic_write(args.plot, lambda file: _plot(file, scorer, curve, args),
                                             os.path.splitext(args.plot)[1]))
        for _, target in temporaries:
            if os.path.exists(target) and not args.force:
                raise UsageError(f"{target!r} appeared while scoring; pass --force to overwrite it")
        for temporary, target in temporaries:
            os.replace(temporary, target)
    finally:
        for temporary, _ in temporaries:
            if os.path.exists(temporary):
                os.unlink(temporary)
    if args.out == "-":
        sys.stdout.write(table.decode("utf-8"))
        sys.stdout.flush()
    logger.info(
        "%d texts, %d blank line(s), mean score %.3f %s, mean paper area %.2f%s%s",
        len(texts), len(lines) - len(texts), scores.mean(), args.unit, areas.mean(),
        "" if args.out == "-" else f": {args.out}", "" if args.plot is None else f", figure: {args.plot}",
    )


def _plot(file, scorer, curve, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(100 * scorer.mask_rates_, curve.mean(0), marker=".")
    ax.set(xlabel="% of tokens masked", ylabel=f"S(x; M), {args.unit} per token", title=str(args.model))
    fig.tight_layout()
    fig.savefig(file, dpi=120, format=_plot_format(args.plot))
    plt.close(fig)


def run(args):
    """Score the texts of ``args.texts`` and write the CSV (and the figure); rank 0 writes."""
    line_numbers, lines = _validate(args)
    import torch.distributed as dist

    launched = launcher_ranks(os.environ) is not None
    if launched:
        # no thread may outlive the process group: the tokenizers' pool and tqdm's monitor
        # would otherwise still run at interpreter exit, where the C++ runtime aborts on them
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from tqdm import tqdm

        tqdm.monitor_interval = 0
    # Under torchrun or accelerate launch every process scores its share of the texts; the
    # group is joined here so that it is also left here, when the last collective is done.
    joined = dist.is_available() and not dist.is_initialized()
    context = init_distributed(args.device)
    try:
        _score_file(args, line_numbers, lines, context)
        if joined and dist.is_initialized():
            dist.barrier()  # every rank leaves together, once rank 0 has written
    finally:
        if joined and dist.is_initialized():
            dist.destroy_process_group()
