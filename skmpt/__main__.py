"""Command line: ``python -m skmpt mlm-curve --model DIR --texts FILE --out curve.csv``.

Writes one CSV row per text (its number of tokens, the cumulative MPT estimate of
``log p(x)``, the paper's area and ``S(x; M)`` at each masking rate) and, with ``--plot``,
a figure of the mean curve.
"""

import argparse
import csv
import sys

import numpy as np


def _rates(text):
    """``"0.01:0.99:0.01"`` (start:stop:step, stop included) or ``"0.15,0.5"``."""
    if ":" in text:
        start, stop, step = (float(part) for part in text.split(":"))
        return np.round(np.arange(start, stop + step / 2, step), 10)
    return np.array([float(part) for part in text.split(",")])


def _read_texts(path):
    stream = sys.stdin if path == "-" else open(path, encoding="utf-8")
    with stream:
        return [line.rstrip("\n") for line in stream if line.strip()]


def _parser():
    parser = argparse.ArgumentParser(prog="python -m skmpt", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    curve = commands.add_parser("mlm-curve", help="MPT curve and cumulative score of a masked language model")
    curve.add_argument("--model", required=True, help="name or directory for AutoModelForMaskedLM.from_pretrained")
    curve.add_argument("--tokenizer", default=None, help="name or directory of the tokenizer (default: the model's)")
    curve.add_argument("--texts", required=True, help="file with one text per line ('-' for standard input)")
    curve.add_argument("--out", required=True, help="CSV file to write")
    curve.add_argument("--plot", default=None, help="PNG file for the mean curve (needs matplotlib)")
    curve.add_argument("--mask-rates", type=_rates, default=None, help="'start:stop:step' or 'r1,r2,...'")
    curve.add_argument("--n-masks", type=int, default=10)
    curve.add_argument("--score-method", choices=["sweep", "chain"], default="sweep")
    curve.add_argument("--batch-size", type=int, default=64)
    curve.add_argument("--max-batch-tokens", type=int, default=16384)
    curve.add_argument("--max-length", type=int, default=512)
    curve.add_argument("--device", default="auto")
    curve.add_argument("--random-state", type=int, default=0)
    curve.add_argument("--verbose", action="store_true")
    return parser


def _mlm_curve(args):
    from ._mlm import MLMCurveScorer, _area

    scorer = MLMCurveScorer(
        args.model,
        tokenizer=args.tokenizer,
        mask_rates=args.mask_rates,
        n_masks=args.n_masks,
        score_method=args.score_method,
        batch_size=args.batch_size,
        max_batch_tokens=args.max_batch_tokens,
        max_length=args.max_length,
        device=args.device,
        random_state=args.random_state,
        verbose=int(args.verbose),
    ).fit()
    texts = _read_texts(args.texts)
    curve = scorer.transform(texts)
    scores = scorer.score_samples(texts)
    areas = _area(curve, scorer.mask_rates_)
    lengths = scorer._encode(texts).n_tokens
    with open(args.out, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "n_tokens", "score", "paper_area", *(f"S@{r:g}" for r in scorer.mask_rates_)])
        for index in range(len(texts)):
            writer.writerow([index, lengths[index], scores[index], areas[index], *curve[index]])
    print(f"{len(texts)} texts, mean score {scores.mean():.3f} nats, mean paper area {areas.mean():.2f}: {args.out}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot(100 * scorer.mask_rates_, curve.mean(0), marker=".")
        ax.set(xlabel="% of tokens masked", ylabel="S(x; M), nats per token", title=str(args.model))
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"figure: {args.plot}")


def main(argv=None):
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``)."""
    args = _parser().parse_args(argv)
    if args.command == "mlm-curve":
        _mlm_curve(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
