"""Spread of the cumulative MPT estimators of the LML at equal numbers of conditionals.

The paper's Table 1 setting: a PPCA with K=2 at its true parameters, D=50 tokens, the sweep
with P = 1, 10 and 100 random masks of every size. A sweep with P masks per size evaluates
P * D * (D + 1) / 2 conditionals; the same count buys P nested orderings (every masked token of
each nested mask) or P * (D + 1) / 2 chain orderings (one token per nested mask). Each estimator
is repeated with --repeats seeds; the table gives the mean over samples of the estimate, its
spread (standard deviation over the seeds) and the median per-sample spread, with the exact LML
beside them. Paper, Table 1: -60.44 ± 0.47 (P=1), -60.22 ± 0.12 (P=10), -60.34 ± 0.03 (P=100).

    python benchmarks/estimator_variance.py [--n-features 50] [--repeats 20]
"""

import argparse
import time

import torch

from _common import ppca_module
from skmpt.objectives import cumulative_score


def main(argv=None):
    parser = argparse.ArgumentParser(description="Spread of MPT estimators of the LML")
    parser.add_argument("--n-features", type=int, default=50)
    parser.add_argument("--n-samples", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    D = args.n_features
    module, X = ppca_module(D, 2, n_samples=args.n_samples)
    with torch.no_grad():
        lml = module.log_marginal(X)
    print(f"PPCA D={D}, K=2, {args.n_samples} samples, {args.repeats} seeds; exact LML {float(lml.mean()):.3f} nats")
    print(
        f"{'method':<8} {'P':>4} {'orderings':>9} {'conditionals':>12} {'estimate':>9} "
        f"{'spread':>8} {'per-sample':>10} {'seconds':>8}"
    )
    for P in (1, 10, 100):
        conditionals = P * D * (D + 1) // 2
        for method, score_masks in (("sweep", P), ("nested", P), ("chain", P * (D + 1) // 2)):
            start = time.perf_counter()
            with torch.no_grad():
                runs = torch.stack(
                    [
                        cumulative_score(module, X, score_method=method, score_masks=score_masks, random_state=seed)
                        for seed in range(args.repeats)
                    ]
                )
            seconds = (time.perf_counter() - start) / args.repeats
            means = runs.mean(1)
            per_sample = runs.std(0).median()
            orderings = "-" if method == "sweep" else str(score_masks)
            print(
                f"{method:<8} {P:>4} {orderings:>9} {conditionals:>12} {float(means.mean()):>9.3f} "
                f"{float(means.std()):>8.4f} {float(per_sample):>10.4f} {seconds:>8.3f}"
            )


if __name__ == "__main__":
    main()
