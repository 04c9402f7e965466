"""
================================================================
The MPT curve of a masked language model (Fig. 5 right, Table 2)
================================================================

A small BERT with a WordPiece vocabulary learnt from skmpt's embedded WordNet sentences is
scored at random initialisation, then pre-trained by masked pre-training twice: with BERT's
fixed 15 % rate and with uniformly random mask sizes (the objective whose expectation is
``log p(x)``). For each model we draw the MPT curve ``S(x; M)`` over masking rates 1..99 % on
held-out sentences and print three numbers per sentence, averaged: the cumulative estimate
``sum_{M=1..L} S(x; M)`` of ``log p(x)``, the pseudo-log-likelihood ``L S(x; 1)``, and the
paper's area ``512 * sum_r 0.01 S`` (Table 2's unit).

At random initialisation the curve is flat near ``-log V``, as in the paper's Fig. 5; after
pre-training it rises, most at low masking rates, and falls towards the right. Without
arguments the script is a quick look (a 64-unit BERT, 40 steps: the gallery's figure);
``--full`` trains a 128-unit BERT for 1500 steps of 64 sentences (9 minutes on one CPU thread,
2026-11-23), the run the documentation reports.

``--model bert-base-uncased --glue-dir DIR`` (a checkpoint name or directory that
``transformers`` can load, and GLUE's official TSV files) prints the Table 2 rows instead:
the paper's area for random initialisation and the pre-trained checkpoint on AX, CoLA, QNLI
and MRPC (``--n-eval`` texts of each task's first text column; the paper does not say which
it scored). Nothing here downloads anything unless such a name is given.
"""

import argparse
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from skmpt import MLMCurveScorer  # noqa: E402
from skmpt.datasets import load_glue, load_wordnet_sentences, make_wordpiece_tokenizer  # noqa: E402

GLUE_TASKS = [("ax", "test"), ("cola", "validation"), ("qnli", "validation"), ("mrpc", "validation")]


# Without --full the script is a quick look (what the documentation's gallery runs); --full is
# the run whose numbers the documentation reports.
SIZES = {
    "small": dict(n_train=3000, max_steps=40, n_eval=20, score_masks=1, hidden_size=64, vocab_size=2000),
    "full": dict(n_train=40000, max_steps=1500, n_eval=100, score_masks=2, hidden_size=128, vocab_size=4000),
}


def summary(name, scorer, texts):
    lengths = scorer._encode(texts).n_tokens
    cumulative = scorer.score_samples(texts)
    pll = scorer.pseudo_log_likelihood(texts)
    area = scorer.paper_area(texts)
    print(
        f"{name:<28} cumulative {cumulative.mean():9.2f}  ({cumulative.sum() / lengths.sum():6.3f} per token)  "
        f"PLL {pll.mean():9.2f}  paper area {area.mean():9.2f}"
    )


def small_bert(args):
    from transformers import BertConfig

    sentences = load_wordnet_sentences()
    train, test = train_test_split(sentences, test_size=args.n_eval, random_state=0)
    train = train[: args.n_train]
    tokenizer = make_wordpiece_tokenizer(train, vocab_size=args.vocab_size)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=args.hidden_size,
        num_hidden_layers=args.n_layers,
        num_attention_heads=max(1, args.hidden_size // 64),
        intermediate_size=4 * args.hidden_size,
        max_position_embeddings=128,
    )
    common = dict(tokenizer=tokenizer, score_masks=args.score_masks, random_state=0, batch_size=64)
    runs = [("random init.", MLMCurveScorer(config, **common))]
    for label, rate in (("MPT, fixed 15 %", 0.15), ("MPT, uniform sizes", "uniform")):
        scorer = MLMCurveScorer(
            config, max_steps=args.max_steps, mask_rate=rate, learning_rate=args.learning_rate, **common
        )
        runs.append((label, scorer))
    print(f"{len(train)} training and {len(test)} held-out sentences, vocabulary {len(tokenizer)}, -log V = "
          f"{-np.log(len(tokenizer)):.3f}")
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, scorer in runs:
        start = time.perf_counter()
        scorer.fit(train)
        fitted = time.perf_counter() - start
        curve = scorer.transform(test)
        summary(f"{label} ({fitted:.0f} s)", scorer, test)
        ax.plot(100 * scorer.mask_rates_, curve.mean(0), label=label)
    ax.axhline(-np.log(len(tokenizer)), color="grey", lw=0.8, ls=":", label="-log V")
    ax.set(xlabel="% of tokens masked", ylabel="S(x; M), nats per token", title="Small BERT on WordNet sentences")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"figure: {args.output}")


def table_2(args):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(args.model)
    scorers = {
        "random init.": MLMCurveScorer(config, tokenizer=args.model, score_masks=args.score_masks,
                                       random_state=0).fit(),
        "pre-trained": MLMCurveScorer(args.model, score_masks=args.score_masks, random_state=0).fit(),
    }
    for task, split in GLUE_TASKS:
        data = load_glue(task, split, data_dir=args.glue_dir)
        texts = data[data.column_names[0]][: args.n_eval]
        for label, scorer in scorers.items():
            summary(f"{task} {label}", scorer, texts)


def main(argv=None):
    parser = argparse.ArgumentParser(description="The MPT curve of a masked LM before and after pre-training")
    parser.add_argument("--n-train", type=int, default=None, help="training sentences")
    parser.add_argument("--n-eval", type=int, default=None, help="held-out sentences (texts per task with --model)")
    parser.add_argument("--max-steps", type=int, default=None, help="MPT steps of 64 sentences")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--vocab-size", type=int, default=None)
    parser.add_argument("--hidden-size", type=int, default=None)
    parser.add_argument("--n-layers", type=int, default=2)
    parser.add_argument("--score-masks", type=int, default=None, help="masks per size for the curves and the sweep")
    parser.add_argument("--model", default=None, help="a checkpoint: prints Table 2's rows (needs --glue-dir)")
    parser.add_argument("--glue-dir", default=None, help="directory with GLUE's official TSV files")
    parser.add_argument("--output", default="mlm_pretraining_curve.png")
    parser.add_argument(
        "--full", action="store_true", help="the run the documentation reports (about 9 min on one thread)"
    )
    args = parser.parse_args(argv)
    for name, value in SIZES["full" if args.full else "small"].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.model is not None:
        if args.glue_dir is None:
            parser.error("--model needs --glue-dir (GLUE's TSV files: CoLA/, QNLI/, MRPC/, diagnostic/)")
        table_2(args)
    else:
        small_bert(args)


if __name__ == "__main__":
    main()
