"""
============================================================
Pre-training a tiny masked diffusion LM and sampling from it
============================================================

``MLMCurveScorer.fit(mask_rate="uniform")`` draws a uniformly random number of masked tokens
per sentence and maximises ``(L / M) * sum log p`` of the masked ones: masked-diffusion training
with the linear schedule (RADD's ``k_DCE``; MDLM's loss has the same expectation). Its negative
ELBO is ``-sum_M S(x; M)``, so the perplexity bound ``exp(NELBO / L)`` of held-out sentences
comes from the curve, here by the chain with its standard error
(:func:`skmpt.text.masked_diffusion_bound`).

A tiny bidirectional transformer (a two-layer BERT) is trained on skmpt's embedded WordNet
sentences; the bound on held-out sentences is reported at random initialisation (about the
vocabulary's size: uniform predictions) and after training. Then a few sentences are drawn by
any-order generation (:func:`skmpt.text.sample_any_order`): every token starts masked and is
revealed in a random order, each drawn from the model's conditional given those before it, the
chain's nested masks run forwards. The gallery runs 100 steps on 2000 sentences: the bound falls
from 250 (the vocabulary's size) at random initialisation to about 133; ``--max-steps 2000``
gives a better model. See :ref:`diffusion` for the formulas of MDLM, RADD, MD4, LLaDA and Dream.
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from skmpt import MLMCurveScorer  # noqa: E402
from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer  # noqa: E402
from skmpt.text import masked_diffusion_bound, sample_any_order  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description="Pre-training a tiny masked diffusion LM and sampling from it")
    parser.add_argument("--n-train", type=int, default=3000, help="training sentences")
    parser.add_argument("--n-test", type=int, default=40, help="held-out sentences")
    parser.add_argument("--max-steps", type=int, default=300, help="training steps of 32 sentences")
    parser.add_argument("--orderings", type=int, default=4, help="random orderings of the chain per sentence")
    parser.add_argument("--vocab-size", type=int, default=250)
    parser.add_argument("--hidden-size", type=int, default=32)
    parser.add_argument("--output", default="masked_diffusion.png")
    args = parser.parse_args(argv)

    from transformers import BertConfig

    sentences = load_wordnet_sentences()
    train, test = train_test_split(sentences, test_size=args.n_test, random_state=0)
    train = train[: args.n_train]
    tokenizer = make_wordpiece_tokenizer(train, vocab_size=args.vocab_size)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=args.hidden_size, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=2 * args.hidden_size, max_position_embeddings=128)
    common = {"tokenizer": tokenizer, "device": "cpu", "random_state": 0, "max_length": 128}
    before = MLMCurveScorer(config, **common).fit()
    after = MLMCurveScorer(config, mask_rate="uniform", max_steps=args.max_steps, batch_size=32,
                           learning_rate=3e-3, **common).fit(train)

    bounds = {}
    for label, scorer in (("random init.", before), ("trained", after)):
        bound = masked_diffusion_bound(scorer.runner_, test, score_method="chain", score_masks=args.orderings,
                                       random_state=0)
        bounds[label] = bound
        print(f"{label:<13} standard error of NELBO per sentence: median {np.median(bound.nelbo_std):.3f} nats")
        print(f"{label:<13} perplexity bound on {len(test)} held-out sentences: "
              f"{bound.corpus_perplexity:7.1f} +- {bound.corpus_perplexity_std:.2f} "
              f"(NELBO {bound.nelbo.sum() / bound.n_tokens.sum():.3f} nats per token; vocabulary {len(tokenizer)})")

    print("samples by any-order generation (12 tokens each):")
    for text in sample_any_order(after.runner_, 4, 12, random_state=0):
        print("  ", text.replace(" ##", ""))

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    steps = [entry["step"] for entry in after.history_]
    axes[0].plot(steps, [entry["loss"] for entry in after.history_], lw=0.8)
    axes[0].set(xlabel="training step", ylabel="loss, nats per token", title="masked-diffusion training")
    for label, bound in bounds.items():
        per_token = bound.nelbo / bound.n_tokens
        axes[1].errorbar(np.arange(len(per_token)), per_token, yerr=bound.nelbo_std / bound.n_tokens, fmt=".",
                         label=f"{label}: perplexity bound {bound.corpus_perplexity:.0f}")
    axes[1].set(xlabel="held-out sentence", ylabel="NELBO / L, nats per token", title="bound with standard errors")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"figure: {args.output}")


if __name__ == "__main__":
    main()
