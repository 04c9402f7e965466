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
cleanly. The file handling, the integer arguments and the process group are
:mod:`skmpt.cli.common`'s, which every command shares.
"""

import argparse
import csv
import importlib.util
import io
import logging
import os
import sys
import warnings

from skmpt.cli import UsageError
from skmpt.cli.common import (
    atomic_output,
    check_outputs,
    non_negative_int,
    positive_int,
    library_bars,
    process_group,
    random_seed,
    read_lines,
)

__all__ = ["DEFAULT_RATES", "DESCRIPTION", "HELP", "add_arguments", "run"]

HELP = "MPT curve and cumulative score of a masked language model"
DESCRIPTION = "MPT curve, cumulative MPT estimate of log p(x) and paper's area of each text of a file."

logger = logging.getLogger("skmpt.cli")

#: ``--mask-rates`` by default: the scorer's ``DEFAULT_MASK_RATES``, spelled out.
DEFAULT_RATES = "0.01:0.99:0.01"

#: ``--dtype``'s names: those of ``skmpt._utils.DTYPES``, written out so that ``--help`` needs no torch
#: (tests/cli/test_mlm_curve.py checks that they are the same).
_DTYPE_NAMES = ("float64", "float32", "bfloat16", "float16")


def _mask_rates(text):
    """``--mask-rates``, read and checked by :func:`skmpt.masks.parse_mask_rates`."""
    from skmpt.masks import parse_mask_rates

    try:
        return parse_mask_rates(text)
    except ValueError as exc:
        message = str(exc).rstrip(".")
        raise argparse.ArgumentTypeError(message if repr(text) in message else f"{message} (from {text!r})") from None


def _at_least_two(text):
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2 (room for the special tokens); got {value}")
    return value


def add_arguments(parser):
    """The options of ``skmpt mlm-curve``."""
    add = parser.add_argument
    add("--model", required=True,
        help="name or directory for AutoModelForMaskedLM.from_pretrained (AutoModel with --trust-remote-code); "
             "'antiberty': the installed AntiBERTy, as skmpt.text.load_antiberty loads it")
    add("--tokenizer", default=None, help="name or directory of the tokenizer (None: the model's)")
    add("--texts", required=True, help="UTF-8 file with one text per line ('-' for standard input)")
    add("--out", required=True, help="CSV file to write ('-' for standard output)")
    add("--plot", default=None, help="PNG file for the mean curve (needs matplotlib)")
    add("--force", action="store_true", help="overwrite --out and --plot if they exist")
    add("--mask-rates", type=_mask_rates, default=DEFAULT_RATES,
        help="'start:stop:step' (stop included) or 'r1,r2,...'")
    add("--score-masks", type=positive_int, default=10, help="random masks per mask size, or orderings for the chain")
    add("--score-method", choices=["sweep", "chain"], default="sweep", help="estimator of the cumulative score")
    add("--unit", choices=["nats", "bits"], default="nats", help="unit of every log-probability written")
    add("--whole-word-masking", action="store_true", help="draw the curve's masks over words, not tokens")
    add("--std", action="store_true", help="add the column score_std, the score's Monte Carlo standard error")
    add("--pll", choices=["original", "within_word_l2r"], default=None,
        help="add the column pll, the pseudo-log-likelihood with this metric")
    add("--score-batch-size", type=positive_int, default=64, help="most masked copies per forward pass")
    add("--max-batch-tokens", type=positive_int, default=16384, help="most tokens per forward pass")
    add("--max-length", type=_at_least_two, default=512, help="longest text in tokens; longer ones are truncated")
    add("--device", default="auto", help="'auto', 'cpu', 'cuda' or 'cuda:N'")
    add("--dtype", choices=["auto", *_DTYPE_NAMES], default="auto",
        help="dtype the model runs in; 'auto': the checkpoint's own (bfloat16 is faster on a GPU or a CPU with "
             "bfloat16 units, and differs by about 1e-3 nats per token)")
    add("--revision", default=None, help="hub revision of the model (branch, tag or commit)")
    add("--local-files-only", action="store_true", help="never use the network, only the local cache")
    add("--trust-remote-code", action="store_true", help="allow a hub model's own code to run")
    add("--mask-token-id", type=non_negative_int, default=None,
        help="id that masks a token, for a tokenizer without a mask token (MDLM: 50257 with GPT-2's)")
    add("--shift-logits", action="store_true", help="the logits at position i predict token i + 1 (Dream)")
    add("--timestep-arg", default=None, metavar="NAME",
        help="pass each masked copy's masking rate M/L to the model's forward as NAME (a time-conditioned model)")
    add("--random-state", type=random_seed, default=0, help="seed of the masks, in [0, 2**32)")
    add("--quiet", action="store_true", help="no progress bar and no messages")
    add("--debug", action="store_true", help="show the traceback of an error")


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
    lines = read_lines(path, "--texts")
    if not any(line.strip() for line in lines):
        raise UsageError(f"--texts {path!r} holds no text (it is empty or blank)")
    return list(range(1, len(lines) + 1)), lines


def _validate(args):
    """Every check that needs no model; returns the texts with their line numbers."""
    if args.plot == "-":
        raise UsageError("--plot must be a file, not '-'")
    check_outputs({"--texts": args.texts}, {"--out": args.out, "--plot": args.plot}, overwrite=args.force)
    if args.std and args.score_masks < 2:
        raise UsageError(f"--std needs --score-masks 2 or more (a standard deviation); got {args.score_masks}")
    if args.plot is not None:
        _check_plot_format(args.plot)
    texts = _read_texts(args.texts)
    from skmpt.text.loading import check_hub_name, check_local_path

    try:
        check_local_path(args.model, "--model")
        if args.model != "antiberty" or os.path.exists(args.model):  # "antiberty": the installed one
            check_hub_name(args.model, "--model", revision=args.revision, local_files_only=args.local_files_only)
        if args.tokenizer is not None:
            check_local_path(args.tokenizer, "--tokenizer")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return texts


class _TimestepArgument:
    """``--timestep-arg NAME``: the timestep hook giving each copy's masking rate as ``NAME``."""

    def __init__(self, name):
        self.name = name

    def __call__(self, rate):
        return {self.name: rate}


def _score_file(args, line_numbers, lines, context):
    from skmpt.objectives import curve_area
    from skmpt.text import MLMCurveScorer, encode_texts, load_antiberty

    options = {"revision": args.revision, "local_files_only": args.local_files_only,
               "trust_remote_code": args.trust_remote_code}
    if context.is_main:
        logger.info("loading: the model %s", args.model)
    model, tokenizer = args.model, args.tokenizer
    if model == "antiberty" and not os.path.exists(model):  # the installed AntiBERTy, not a hub name
        model, own = load_antiberty()
        tokenizer = own if tokenizer is None else tokenizer
    scorer = MLMCurveScorer(
        model,
        tokenizer=tokenizer,
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
    stages = _stages(args, scorer)
    encoded = encode_texts(texts, scorer.tokenizer_, scorer.max_length_, names=names,
                           word_ids=any(stage.needs_words for stage in stages))
    lengths = encoded.n_tokens
    if context.is_main:
        copies, passes = _work(scorer, stages, encoded)
        logger.info("this run scores %d masked copies in about %d forward passes (of at most %d copies each); "
                    "fewer --mask-rates or --score-masks spend fewer", copies, passes, args.score_batch_size)
    with warnings.catch_warnings():  # the truncation and unknown-token warnings were given once, just above
        warnings.filterwarnings("ignore", message=".* longer than max_length", category=UserWarning)
        warnings.filterwarnings("ignore", message=".* tokens the tokenizer does not know", category=UserWarning)
        stages = ["the curve S(x; M)", "the score", *(["the pseudo-log-likelihood"] if args.pll is not None else [])]
        if context.is_main:  # the bars that follow, one per stage, are the scorer's "scoring" bars
            logger.info("scoring: %d texts, %s", len(texts), ", then ".join(stages))
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

    writers = []  # (path, write(file)) of each output file; both are written, or neither
    if args.out != "-":
        writers.append((args.out, lambda file: file.write(table)))
    if args.plot is not None:
        writers.append((args.plot, lambda file: _plot(file, scorer, curve, args)))
    with atomic_output(*(path for path, _ in writers), overwrite=args.force) as files:
        for (_, write), file in zip(writers, files, strict=True):
            write(file)
    if args.out == "-":
        sys.stdout.write(table.decode("utf-8"))
        sys.stdout.flush()
    logger.info(
        "%d texts, %d blank line(s), mean score %.3f %s, mean paper area %.2f%s%s",
        len(texts), len(lines) - len(texts), scores.mean(), args.unit, areas.mean(),
        "" if args.out == "-" else f": {args.out}", "" if args.plot is None else f", figure: {args.plot}",
    )


def _stages(args, scorer):
    """The scoring strategies that the scorer runs for the curve, the score and ``--pll``, in that order."""
    from skmpt.text.strategies import CurveMasks, SingleTokenMasks, WholeWordMasks, estimator_strategy

    stages = [CurveMasks(scorer.mask_rates_, args.score_masks),
              estimator_strategy(args.score_method, args.score_masks, return_std=args.std)]
    if args.whole_word_masking:
        stages = [WholeWordMasks(stage) for stage in stages]
    return stages + ([SingleTokenMasks(args.pll)] if args.pll is not None else [])


def _work(scorer, stages, encoded):
    """``(masked copies, forward passes)`` that ``stages`` spend on the texts, cut into passes by the scorer's
    runner (at most ``--score-batch-size`` copies and ``--max-batch-tokens`` tokens each)."""
    words = encoded.word_ids or [None] * len(encoded)
    copies = passes = 0
    for stage in stages:
        counts = [int(stage.n_copies(int(n), w)) for n, w in zip(encoded.n_tokens, words, strict=True)]
        copies += sum(counts)
        # the runner reads only how many copies each text has: a range of that length stands for them
        passes += sum(1 for _ in scorer.runner_.batches(encoded, [(range(count),) for count in counts]))
    return copies, passes


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
    # Under torchrun or accelerate launch every process scores its share of the texts.
    with process_group(args.device) as context, library_bars(shown=not args.quiet and context.is_main):
        _score_file(args, line_numbers, lines, context)
