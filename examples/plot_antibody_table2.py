"""
===========================================================================
The paper's Table 2 on a real pretrained masked LM: AntiBERTy on antibodies
===========================================================================

Table 2 of the paper reports the area under the MPT curve of BERT-base at random
initialisation and after pre-training: pre-training raises it far above the random model's.
No English BERT with its masked-LM head installs offline, but one real pretrained masked LM
does: AntiBERTy (8 layers of 512 units, trained on 558 million antibody sequences), whose
``antiberty==0.1.3`` wheel ships its checkpoint. :func:`skmpt.text.load_antiberty` turns it
into a ``transformers`` ``BertForMaskedLM`` and a tokenizer with one token per residue.

The texts are the variable domains of the heavy (VH) and light (VL) chains of five
therapeutic antibodies (``examples/antibody_sequences.csv``, with their public source). Three
rows, as in Table 2 plus a control:

- the pretrained model on the real sequences;
- the same architecture at random initialisation on the same sequences;
- the pretrained model on the same sequences with their residues shuffled (same composition,
  no antibody structure).

For each: the pseudo-log-likelihood per residue, the cumulative MPT estimate of ``log p(x)``
(per residue), the paper's area (``512 * sum_r dr S(x; r)``) and the MPT curves.

Run as it is (the gallery's size: the first 20 residues of the two trastuzumab chains, 9
rates, one mask or ordering each) it took 18 s of CPU on one thread, loading included;
``--full`` scores complete domains at the paper's 99 rates (``--full --n-sequences 4``: the
trastuzumab and adalimumab chains, the run of :doc:`/reproducing`).
"""

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from skmpt import MLMCurveScorer  # noqa: E402
from skmpt.masks import parse_mask_rates  # noqa: E402
from skmpt.text import load_antiberty  # noqa: E402


def data_file():
    try:
        return Path(__file__).resolve().parent / "antibody_sequences.csv"
    except NameError:  # run by sphinx-gallery, from the examples folder
        return Path("antibody_sequences.csv").resolve()


def shuffled(sequences, random_state=0):
    """Each sequence with its residues in a random order: the same composition, no structure."""
    rng = np.random.default_rng(random_state)
    return ["".join(rng.permutation(list(sequence))) for sequence in sequences]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Table 2 of the paper on AntiBERTy.")
    parser.add_argument("--full", action="store_true", help="whole domains, 99 rates, all ten chains by default")
    parser.add_argument("--n-sequences", type=int, default=None, help="chains scored (default 2, or 10 with --full)")
    parser.add_argument("--max-residues", type=int, default=20, help="residues kept per chain (ignored with --full)")
    parser.add_argument("--mask-rates", default="0.1:0.9:0.1", help="rates of the curve (--full: 0.01:0.99:0.01)")
    parser.add_argument("--score-masks", type=int, default=1, help="masks per rate, and orderings of the chain")
    parser.add_argument("--output", default=None, help="also save the figure to this file")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    start = time.process_time()
    table = pd.read_csv(data_file(), comment="#")
    n_sequences = args.n_sequences or (len(table) if args.full else 2)
    table = table.iloc[:n_sequences]
    names = list(table["name"] + " " + table["chain"])
    if args.full:
        args.mask_rates, sequences = "0.01:0.99:0.01", list(table["sequence"])
    else:
        sequences = [s[: args.max_residues] for s in table["sequence"]]
    rates = parse_mask_rates(args.mask_rates)
    pretrained, tokenizer = load_antiberty()
    random_model, _ = load_antiberty(pretrained=False, random_state=0)
    rows, curves = [], {}
    settings = [("pretrained", pretrained, sequences), ("random init.", random_model, sequences),
                ("pretrained, shuffled", pretrained, shuffled(sequences))]
    lengths = np.array([len(s) for s in sequences])
    for label, model, texts in settings:
        # the chain: one ordering costs L copies, like the PLL; its mean is the cumulative estimate
        scorer = MLMCurveScorer(model, tokenizer=tokenizer, mask_rates=rates, score_masks=args.score_masks,
                                score_method="chain", random_state=0).fit()
        curve = scorer.transform(texts)
        rows.append({
            "model, sequences": label,
            "PLL per residue": np.mean(scorer.pseudo_log_likelihood(texts) / lengths),
            "cumulative per residue": np.mean(scorer.score_samples(texts) / lengths),
            "paper area": np.mean(scorer.paper_area(texts)),
        })
        curves[label] = curve.mean(0)
    result = pd.DataFrame(rows).set_index("model, sequences")
    seconds = time.process_time() - start
    print(f"{len(sequences)} chains ({', '.join(names)}), {lengths.sum()} residues, {len(rates)} rates, "
          f"{args.score_masks} mask(s) per rate")
    print(result.round(3).to_string())
    print(f"CPU time (one thread): {seconds:.0f} s")

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, curve in curves.items():
        ax.plot(rates, curve, marker="o" if len(rates) < 20 else None, label=label)
    ax.axhline(-np.log(20), color="grey", linestyle=":", label="uniform over 20 residues")
    ax.set_xlabel("masking rate")
    ax.set_ylabel("S(x; M), nats per masked residue")
    ax.set_title("AntiBERTy: MPT curves of antibody variable domains")
    ax.legend()
    fig.tight_layout()
    if args.output:
        fig.savefig(args.output, dpi=120)
    return result


if __name__ == "__main__":
    main()
