"""
=====================================================================
Scoring a saved masked LM on a text file: random and trained (Fig. 5)
=====================================================================

The paper's Fig. 5 (right) draws the MPT curve ``S(x; M)`` of BERT at random initialisation
and after pre-training. Here the same comparison goes through the path a user takes with
their own checkpoint: a directory written by ``save_pretrained`` (weights and tokenizer), a
text file with one sentence per line, and the ``skmpt mlm-curve`` command line, which writes
one CSV row per line.

To stay small and offline, the two checkpoints are made here: a BERT with a WordPiece
vocabulary learnt from skmpt's embedded WordNet sentences, saved once at random
initialisation and once after a few hundred steps of masked pre-training with uniformly
random mask sizes. Replace ``--model`` by any masked LM directory or hub name to score your
own. The random model's curve is flat at ``-log V``, the uniform prediction. After the
gallery's short training the curve lies well above it but is still nearly flat: the model has
learnt which words are frequent, little yet about context, so hiding more of the sentence
costs it little. A longer run (``--max-steps 1500``, or ``mlm_pretraining_curve.py --full``)
gives the curve that falls with the masking rate, as BERT's does in the paper.

Run as it is, the script used 63 s of CPU time (``time``, 2 shared CPU cores), training included.
"""

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from skmpt import MLMCurveScorer  # noqa: E402
from skmpt.cli import main as skmpt_command_line  # noqa: E402
from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer  # noqa: E402


def save_checkpoints(directory, train, args):
    """A random and a pre-trained small BERT, each saved with its tokenizer."""
    from transformers import BertConfig

    tokenizer = make_wordpiece_tokenizer(train, vocab_size=args.vocab_size)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=args.hidden_size, num_hidden_layers=2,
                        num_attention_heads=1, intermediate_size=4 * args.hidden_size, max_position_embeddings=128)
    random_model = MLMCurveScorer(config, tokenizer=tokenizer, random_state=0).fit()
    trained = MLMCurveScorer(config, tokenizer=tokenizer, max_steps=args.max_steps, mask_rate="uniform",
                             batch_size=32, learning_rate=2e-3, random_state=0).fit(train)
    paths = {}
    for label, scorer in (("random init.", random_model), ("pre-trained", trained)):
        paths[label] = directory / label.replace(" ", "-").rstrip(".")
        scorer.model_.save_pretrained(paths[label])
        tokenizer.save_pretrained(paths[label])
    return paths, len(tokenizer)


def main(argv=None):
    # Not __doc__: the documentation gallery runs the script with its docstring removed.
    parser = argparse.ArgumentParser(description="Scoring a saved masked LM on a text file: random and trained")
    parser.add_argument("--n-train", type=int, default=3000, help="training sentences")
    parser.add_argument("--max-steps", type=int, default=150, help="MPT steps of 32 sentences")
    parser.add_argument("--n-eval", type=int, default=20, help="sentences in the scored text file")
    parser.add_argument("--score-masks", type=int, default=2, help="random masks per mask size")
    parser.add_argument("--vocab-size", type=int, default=1000)
    parser.add_argument("--hidden-size", type=int, default=32)
    parser.add_argument("--output", default="mlm_saved_model.png")
    args = parser.parse_args(argv)

    sentences = load_wordnet_sentences()
    train, test = train_test_split(sentences, test_size=args.n_eval, random_state=0)
    with tempfile.TemporaryDirectory() as workdir:
        workdir = Path(workdir)
        paths, vocab_size = save_checkpoints(workdir, train[: args.n_train], args)
        texts = workdir / "sentences.txt"
        texts.write_text("\n".join(test) + "\n", encoding="utf-8")
        curves = {}
        for label, model in paths.items():
            out = workdir / f"{model.name}.csv"
            status = skmpt_command_line(["mlm-curve", "--model", str(model), "--texts", str(texts), "--out", str(out),
                                         "--mask-rates", "0.1:0.9:0.1", "--score-masks", str(args.score_masks),
                                         "--device", "cpu", "--quiet"])
            if status != 0:
                raise SystemExit(status)
            curves[label] = pd.read_csv(out)

    rates = np.array([float(column[2:]) for column in curves["pre-trained"].columns if column.startswith("S@")])
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
    for ax, (label, table) in zip(axes, curves.items(), strict=True):
        values = table.filter(like="S@").to_numpy()
        print(f"{label:<13} mean cumulative score {table['score'].mean():8.2f} nats per sentence, "
              f"{table['score'].sum() / table['n_tokens'].sum():6.3f} per token")
        ax.plot(100 * rates, values.mean(0), marker=".", label="mean over sentences")
        ax.fill_between(100 * rates, *np.percentile(values, [25, 75], axis=0), alpha=0.3, label="quartiles")
        ax.axhline(-np.log(vocab_size), color="grey", lw=0.8, ls=":", label="-log V")
        ax.set(title=label, xlabel="% of tokens masked")
    axes[0].set_ylabel("S(x; M), nats per token")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"figure: {args.output}")


if __name__ == "__main__":
    main()
