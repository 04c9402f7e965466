"""MLMCurveScorer's per-token and per-word outputs: PLL-word-l2r against minicons, and their cost.

A small BERT (``--hidden`` units, 2 layers, built from a configuration and seeded) with a
WordPiece tokenizer of 300 pieces trained on skmpt's WordNet sentences, so that most words are
split into several tokens, is saved to a temporary directory and scores ``--n-texts``
sentences.

1. **Agreement with minicons.** minicons' ``MaskedLMScorer.sequence_score`` with
   ``PLL_metric="original"`` and ``"within_word_l2r"`` (summed over tokens) against
   :meth:`~skmpt.MLMCurveScorer.pseudo_log_likelihood` with the same ``metric``, both running
   the model in float64: the largest difference per text, absolute and relative (minicons
   returns its sums as float32 numbers, so the relative difference is float32's rounding).
   minicons 0.3.39 needs transformers < 5, so it runs in a virtual environment of its own,
   given by ``--minicons-python``; one that reuses the installed torch::

       python -m venv --system-site-packages /tmp/minicons-venv
       echo "$VIRTUAL_ENV/lib/python3.11/site-packages" \\
           > /tmp/minicons-venv/lib/python3.11/site-packages/base.pth
       /tmp/minicons-venv/bin/pip install --no-deps minicons==0.3.39 transformers==4.57.6 \\
           huggingface_hub==0.36.0 tokenizers==0.22.1 wonderwords

2. **Cost** of each output against the plain PLL: CPU seconds of one torch thread
   (``time.process_time``), best of ``--repeats`` runs interleaved, same texts.

    python benchmarks/mlm_outputs.py --minicons-python /tmp/minicons-venv/bin/python
"""

import argparse
import json
import subprocess
import tempfile
import textwrap
import time

import numpy as np
import torch
from _common import interleaved_minimum

from skmpt import MLMCurveScorer
from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

MINICONS_CHILD = textwrap.dedent(
    """
    import json, sys
    import torch
    torch.set_num_threads(1)
    from minicons import scorer
    from transformers import AutoModelForMaskedLM, PreTrainedTokenizerFast
    args = json.loads(sys.argv[1])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=args["model"] + "/tokenizer.json", pad_token="[PAD]", unk_token="[UNK]",
        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
    )
    model = AutoModelForMaskedLM.from_pretrained(args["model"], torch_dtype=torch.float64)
    mlm = scorer.MaskedLMScorer(model, device="cpu", tokenizer=tokenizer)
    out = {}
    for metric in ("original", "within_word_l2r"):
        out[metric] = [mlm.sequence_score([text], reduction=lambda x: x.sum(0).item(), PLL_metric=metric)[0]
                       for text in args["texts"]]
    print(json.dumps(out))
    """
)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minicons-python", default=None, help="python of a venv with minicons and transformers<5")
    parser.add_argument("--n-texts", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from transformers import BertConfig, BertForMaskedLM

    corpus = load_wordnet_sentences()
    tokenizer = make_wordpiece_tokenizer(corpus[:2000], vocab_size=300)
    texts = corpus[2000 : 2000 + args.n_texts]
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=args.hidden, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=2 * args.hidden, max_position_embeddings=128)
    torch.manual_seed(0)
    model = BertForMaskedLM(config).double().eval()  # float64: the two tools agree to rounding
    n_tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)
    n_words = sum(len(t.split()) for t in texts)
    print(f"{len(texts)} texts, {n_tokens} tokens, {n_words} words (whitespace); BERT {args.hidden}x2, V=300")
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, mask_rates=[0.15, 0.5, 0.85], score_masks=4,
                            random_state=0).fit()
    ours = {metric: scorer.pseudo_log_likelihood(texts, metric=metric) for metric in ("original", "within_word_l2r")}
    if args.minicons_python:
        with tempfile.TemporaryDirectory() as directory:
            model.save_pretrained(directory)
            tokenizer.save_pretrained(directory)
            child = subprocess.run([args.minicons_python, "-c", MINICONS_CHILD,
                                    json.dumps({"model": directory, "texts": texts})],
                                   capture_output=True, text=True, check=True)
        theirs = json.loads(child.stdout.strip().splitlines()[-1])
        for metric in ours:
            gap = np.abs(ours[metric] - np.asarray(theirs[metric]))
            print(f"PLL {metric:16s} skmpt vs minicons: largest |difference| {gap.max():.2e} nats per text, "
                  f"{(gap / np.abs(ours[metric])).max():.1e} relative (PLLs {ours[metric].mean():.3f} on average)")
        l2r_gap = np.abs(ours["original"] - ours["within_word_l2r"]).max()
        print(f"(the two metrics differ by up to {l2r_gap:.2e} nats per text; minicons returns float32 sums)")

    scorer = MLMCurveScorer(model.float(), tokenizer=tokenizer, mask_rates=[0.15, 0.5, 0.85], score_masks=4,
                            random_state=0).fit()
    outputs = {
        "pseudo_log_likelihood (plain PLL)": lambda: scorer.pseudo_log_likelihood(texts),
        "pseudo_log_likelihood(metric='within_word_l2r')": lambda: scorer.pseudo_log_likelihood(
            texts, metric="within_word_l2r"),
        "token_scores()": lambda: scorer.token_scores(texts),
        "token_scores(level='word')": lambda: scorer.token_scores(texts, level="word"),
        "pseudo_perplexity(level='word')": lambda: scorer.pseudo_perplexity(texts, level="word"),
        "transform() [3 rates x 4 masks]": lambda: scorer.transform(texts),
        "transform(return_std=True)": lambda: scorer.transform(texts, return_std=True),
        "token_scores(curve=True)": lambda: scorer.token_scores(texts, curve=True),
        "score_samples() [sweep, 4 masks]": lambda: scorer.score_samples(texts),
        "score_samples(return_std=True)": lambda: scorer.score_samples(texts, return_std=True),
        "inconsistency(return_std=True) [4 orderings]": lambda: scorer.inconsistency(texts, return_std=True),
    }
    seconds = interleaved_minimum(list(outputs.values()), args.repeats, clock=time.process_time)
    print(f"\nCPU seconds, one thread, best of {args.repeats}:")
    for (name, _), value in zip(outputs.items(), seconds, strict=True):
        print(f"  {name:48s} {value:7.3f} s  {value / seconds[0]:5.2f} x PLL")


if __name__ == "__main__":
    main()
