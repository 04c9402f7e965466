"""
==========================================================================
Convergence of the cumulative MPT estimate in the number of masks (Fig. 1)
==========================================================================

Redraws Fig. 1 and Table 1 of Moreno-Muñoz et al. (2023): a PPCA with K=2 at its true
parameters; the sweep estimator ``sum_M S(x; M)`` with P random masks of every size, as a
relative difference to the exact LML, for D=5 and D=50 tokens. The third panel fixes the rate
at 15 % of D=512 tokens: the estimate ``D * S(x; M)`` converges to a *biased* value. PPCA lets
us compute that bias: ``D * S(x; M) - log p(x)`` with many masks of size M (all of them when
there are few enough).

Data: :func:`skmpt.datasets.make_ppca` with N=100 samples (``--n-samples``), K=2, noise
variance 0.5, the entries of ``W`` and ``mu`` standard normal (seed 0), scored at these
generating parameters: nothing is trained. Only the masks are repeated (``--repeats`` seeds,
10); the data and parameters stay fixed. Error bars are the standard deviation over the seeds.

Prints Table 1 (D=50, P = 1, 10, 100: the mean over seeds, the standard deviation of one
estimate and the standard error of the mean) and the fixed-rate bias; saves
``fig1_convergence.png``. Measured: 4.9 s with the defaults on an idle 2-core machine
(2026-11-23; 94 s before the cumulative score became one quadratic form per block of masks).
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from skmpt.datasets import make_ppca  # noqa: E402
from skmpt.masks import mask_size_for_rate, masks_of_sizes  # noqa: E402
from skmpt.models import PPCAModule  # noqa: E402
from skmpt.objectives import cumulative_score, fixed_rate_bias, masked_log_prob_sum, score_at_size  # noqa: E402


def true_model(n_features, n_samples, seed=0):
    data = make_ppca(n_samples, n_features, 2, noise_variance=0.5, random_state=seed)
    module = PPCAModule(torch.as_tensor(data.components), torch.as_tensor(data.mean), 0.5).requires_grad_(False)
    return module, torch.as_tensor(data.data)


def relative_errors(module, X, masks_per_size, repeats, estimate):
    lml = float(module.log_marginal(X).mean())
    runs = np.array([[float(estimate(module, X, P, seed).mean()) for seed in range(repeats)] for P in masks_per_size])
    return (runs - lml) / abs(lml), runs, lml


@torch.no_grad()
def main(argv=None):
    parser = argparse.ArgumentParser(description="Fig. 1 / Table 1: convergence in the number of masks")
    parser.add_argument("--n-samples", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--bias-masks", type=int, default=20000, help="masks for the D=512 bias")
    parser.add_argument("--output", default="fig1_convergence.png")
    args = parser.parse_args(argv)
    masks_per_size = [1, 2, 5, 10, 20, 50, 100]

    def sweep(module, X, P, seed):
        return cumulative_score(module, X, score_method="sweep", score_masks=P, random_state=seed)

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, D in zip(axes[:2], (5, 50), strict=True):
        module, X = true_model(D, args.n_samples)
        rel, runs, lml = relative_errors(module, X, masks_per_size, args.repeats, sweep)
        ax.errorbar(masks_per_size, rel.mean(1), yerr=rel.std(1), marker="o", capsize=3)
        ax.axhline(0, color="k", ls="--", lw=1)
        ax.set(xscale="log", xlabel="masks per size P", ylabel="(MPT - LML) / |LML|", title=f"D={D}, uniform sizes")
        if D == 50:
            print(
                f"Table 1 (D=50, K=2, noise variance 0.5, N={args.n_samples}, true parameters): LML {lml:.2f} "
                f"nats per sample; estimate (mean over the N samples) repeated with {args.repeats} mask seeds:"
            )
            for P in (1, 10, 100):
                row = runs[masks_per_size.index(P)]
                sd = row.std(ddof=1)
                print(
                    f"  P={P:<3d} mean {row.mean():8.2f}, standard deviation of one estimate {sd:.2f}, "
                    f"standard error of the mean of {args.repeats} {sd / np.sqrt(args.repeats):.2f}"
                )

    D, rate = 512, 0.15
    M = mask_size_for_rate(rate, D)
    module, X = true_model(D, args.n_samples)

    def fixed(module, X, P, seed):
        return D * score_at_size(module, X, M, score_masks=P, random_state=seed)

    rel, runs, lml = relative_errors(module, X, masks_per_size, args.repeats, fixed)
    bias = fixed_rate_bias(module, X, rate, score_masks=args.bias_masks, random_state=123)
    # Monte Carlo error of the mean bias: the masks are shared by all samples, so the spread
    # over masks of the sample-mean of (D / M) * sum_{j in m} log p(x_j | x_r), over sqrt(masks).
    per_mask = (D / M) * masked_log_prob_sum(module, X, masks_of_sizes([M] * 2000, D, random_state=7))
    standard_error = float(per_mask.mean(0).std() / np.sqrt(args.bias_masks))
    axes[2].errorbar(masks_per_size, rel.mean(1), yerr=rel.std(1), marker="o", capsize=3, label="D * S(x; M), P masks")
    axes[2].axhline(float(bias.mean()) / abs(lml), color="C3", ls="--", lw=1, label=f"bias ({args.bias_masks} masks)")
    axes[2].axhline(0, color="k", ls="--", lw=1)
    axes[2].set(xscale="log", xlabel="masks P", title=f"D={D}, fixed rate 15 % (M={M})")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"D=512, fixed 15 % (M={M}): true LML {lml:.2f} nats; the fixed-rate estimate converges to")
    print(
        f"  {lml + float(bias.mean()):.2f}, a bias of {float(bias.mean()):+.2f} nats per sample "
        f"({100 * float(bias.mean()) / abs(lml):+.1f} %), computed with {args.bias_masks} masks of size {M}"
    )
    print(f"  (Monte Carlo standard error of that mean over the {args.n_samples} samples: {standard_error:.3f} nats)")
    print(f"saved {args.output}")


if __name__ == "__main__":
    main()
