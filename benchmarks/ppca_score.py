"""Speed of MaskedPPCA's cumulative score against dense per-mask conditioning.

Prints, for (D, K) in {(512, 2), (512, 16), (256, 8)}, the seconds per mask of

- the paper's method: invert the D_r x D_r block S_RR of the model covariance per mask
  (``dense``), and
- skmpt's: the K x K posterior of z given x_r and per-mask statistics (``skmpt``),

on the same masks (uniform sizes, shared by the samples) and the same samples, in this process,
and their ratio. Then, at D=512, K=2, the time of the chain estimator to the exact LML beside
the time of the paper's sweep with P=100 masks per size (its error is printed too).

    python benchmarks/ppca_score.py [--n-samples 100] [--dense-masks 64]
"""

import argparse
from functools import partial

import torch

from _common import best_time, dense_masked_log_prob_sum, ppca_module
from skmpt.masks import uniform_size_masks
from skmpt.objectives import cumulative_score, masked_log_prob_sum


def main(argv=None):
    parser = argparse.ArgumentParser(description="MaskedPPCA scoring speed against dense conditioning")
    parser.add_argument("--n-samples", type=int, default=100)
    parser.add_argument("--dense-masks", type=int, default=64, help="masks timed for the dense method")
    parser.add_argument("--sweep-masks", type=int, default=100, help="P for the sweep at D=512")
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float64, {args.n_samples} samples")
    print(f"{'D':>5} {'K':>4} {'dense s/mask':>14} {'skmpt s/mask':>14} {'speed-up':>10} {'max |diff|':>11}")
    for n_features, n_components in [(512, 2), (512, 16), (256, 8)]:
        module, X = ppca_module(n_features, n_components, n_samples=args.n_samples)
        masks = uniform_size_masks(args.dense_masks, n_features, random_state=0)
        many = uniform_size_masks(50 * args.dense_masks, n_features, random_state=1)
        with torch.no_grad():
            dense = dense_masked_log_prob_sum(module, X, masks)
            fast = masked_log_prob_sum(module, X, masks)
            dense_time = best_time(partial(dense_masked_log_prob_sum, module, X, masks), repeats=5) / len(masks)
            # The fast path is timed on 50 times more masks (its per-mask cost is tiny).
            fast_time = best_time(partial(masked_log_prob_sum, module, X, many), repeats=5) / len(many)
        diff = float((dense - fast).abs().max())
        print(
            f"{n_features:>5} {n_components:>4} {dense_time:>14.3e} {fast_time:>14.3e} "
            f"{dense_time / fast_time:>9.0f}x {diff:>11.2e}"
        )

    module, X = ppca_module(512, 2, n_samples=args.n_samples)
    with torch.no_grad():
        lml = module.log_marginal(X)
        chain_time = best_time(lambda: cumulative_score(module, X, method="chain", n_masks=1, random_state=0))
        chain = cumulative_score(module, X, method="chain", n_masks=1, random_state=0)
        sweep_time = best_time(
            lambda: cumulative_score(module, X, method="sweep", n_masks=args.sweep_masks, random_state=0), repeats=1
        )
        sweeps = torch.stack(
            [cumulative_score(module, X, method="sweep", n_masks=args.sweep_masks, random_state=s) for s in range(5)]
        )
    sweep_error = (sweeps.mean(1) - lml.mean()).abs()
    print(f"\nD=512, K=2, mean LML {float(lml.mean()):.3f} nats over {args.n_samples} samples")
    print(
        f"chain, 1 ordering:  {chain_time:8.3f} s, max |error| per sample "
        f"{float((chain - lml).abs().max()):.2e} nats (exact)"
    )
    print(
        f"sweep, P={args.sweep_masks}:     {sweep_time:8.3f} s, |error| of the mean over 5 seeds: "
        f"mean {float(sweep_error.mean()):.3f}, max {float(sweep_error.max()):.3f} nats"
    )
    print(f"chain is {sweep_time / chain_time:.0f}x faster than the sweep, and exact")


if __name__ == "__main__":
    main()
