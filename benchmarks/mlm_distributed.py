"""Texts per second of MLMCurveScorer.transform with 1 and 2 processes under torchrun.

Builds a small BERT from a configuration (``--hidden`` units, ``--layers`` layers) and a WordPiece
tokenizer trained on skmpt's WordNet sentences, saves both to a temporary directory, and scores
``--n-texts`` texts (WordNet sentences joined four at a time, about 40 tokens each) with
``MLMCurveScorer(...).transform`` under ``torchrun --standalone --nproc-per-node N`` for each N of
``--processes``. On the CPU (gloo) each process gets ``cores // N`` torch threads, so every run
uses the same cores; on CUDA (NCCL) each process uses ``cuda:LOCAL_RANK``.

Every rank must return the whole curve in input order; the script prints, per N, the best
texts/s of ``--repeats`` timed calls, the speed-up over N=1, whether the ranks' results agree,
and the largest difference from the 1-process curve (which should be rounding only: a text's
masks depend on ``random_state`` and the text, not on the rank that scores it).

    python benchmarks/mlm_distributed.py                       # CPU, 1 and 2 processes
    python benchmarks/mlm_distributed.py --device cuda --processes 1 2 4

The workers import skmpt from the checkout this script belongs to (``PYTHONPATH``). Each rank
scores its share of the texts (``skmpt.distributed.sharded_map``, dealt by work) and the ranks
gather the results, so the speed-up is bounded by the cores (or GPUs) the processes really get:
on a machine shared with other work, the figures say more about the load than about skmpt.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _worker(args):
    """One rank under torchrun: fit, time ``transform``, write this rank's result."""
    import torch

    from skmpt import MLMCurveScorer
    from skmpt.distributed import init_distributed

    context = init_distributed(args.device)
    texts = json.loads(Path(args.texts).read_text(encoding="utf-8"))
    scorer = MLMCurveScorer(
        args.model, mask_rates=np.linspace(0.1, 0.9, args.n_rates), score_masks=args.score_masks,
        device=str(context.device), random_state=0,
    ).fit()
    scorer.transform(texts[: 2 * context.world_size])  # warm-up
    best, curve = float("inf"), None
    for _ in range(args.repeats):
        if context.world_size > 1:
            torch.distributed.barrier()
        start = time.perf_counter()
        curve = scorer.transform(texts)
        best = min(best, time.perf_counter() - start)
    np.save(Path(args.out) / f"rank{context.rank}.npy", curve)
    if context.is_main:
        (Path(args.out) / "seconds.json").write_text(json.dumps({"seconds": best}), encoding="utf-8")
    if context.world_size > 1:
        torch.distributed.destroy_process_group()


def _prepare(args, directory):
    """Save a small BERT and its tokenizer, and the texts, under ``directory``."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    sentences = load_wordnet_sentences()
    texts = [" ".join(sentences[i : i + 4]) for i in range(0, 4 * args.n_texts, 4)]
    tokenizer = make_wordpiece_tokenizer(sentences[:20000], vocab_size=4000)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.hidden // 64), intermediate_size=4 * args.hidden,
    )
    torch.manual_seed(0)
    BertForMaskedLM(config).save_pretrained(directory / "model")
    tokenizer.save_pretrained(directory / "model")
    (directory / "texts.json").write_text(json.dumps(texts), encoding="utf-8")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--device", default="cpu", help="cpu (gloo) or cuda (NCCL, one GPU per process)")
    parser.add_argument("--n-texts", type=int, default=64)
    parser.add_argument("--n-rates", type=int, default=5)
    parser.add_argument("--score-masks", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--texts", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args)
    if 1 not in args.processes:
        parser.error("--processes must include 1, the baseline.")

    cores = os.cpu_count()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _prepare(args, tmp)
        results = {}
        for n in sorted(args.processes):
            out = tmp / f"run{n}"
            out.mkdir()
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
            if args.device == "cpu":
                env["OMP_NUM_THREADS"] = str(max(1, cores // n))  # the same cores for every N
            command = [
                sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
                __file__, "--worker", "--model", str(tmp / "model"), "--texts", str(tmp / "texts.json"),
                "--out", str(out), "--device", args.device, "--n-rates", str(args.n_rates),
                "--score-masks", str(args.score_masks), "--repeats", str(args.repeats),
            ]
            subprocess.run(command, env=env, check=True)
            curves = [np.load(out / f"rank{r}.npy") for r in range(n)]
            seconds = json.loads((out / "seconds.json").read_text(encoding="utf-8"))["seconds"]
            results[n] = (seconds, curves)

        base_seconds, (base_curve,) = results[1]
        print(
            f"{args.n_texts} texts, {args.n_rates} rates x {args.score_masks} masks, BERT {args.hidden} hidden x "
            f"{args.layers} layers, {args.device}, {cores} cores"
        )
        print(f"{'processes':>9} {'texts/s':>9} {'speed-up':>9} {'ranks agree':>12} {'max |diff| vs 1':>16}")
        for n, (seconds, curves) in results.items():
            agree = all(np.array_equal(c, curves[0]) for c in curves)
            diff = float(np.abs(curves[0] - base_curve).max())
            print(f"{n:9d} {args.n_texts / seconds:9.1f} {base_seconds / seconds:8.2f}x {str(agree):>12} {diff:16.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
