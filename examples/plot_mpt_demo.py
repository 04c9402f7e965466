"""
================================================================
Masked pre-training estimates the log-marginal likelihood (demo)
================================================================

Fit :class:`skmpt.MaskedPPCA` to scikit-learn's embedded handwritten digits (1797 images,
64 pixels, no download) by masked pre-training, then compare three numbers per image:

- the cumulative MPT estimate ``sum_M S(x; M)`` (``score``),
- the exact log-marginal likelihood of the fitted model (closed form),
- ``sklearn.decomposition.PCA.score``, the log-likelihood of the maximum-likelihood PPCA.

The MPT curve ``S(x; M)`` against the masking rate ``M / D`` is saved as a PNG; the area
under it is the estimate.

Run ``python examples/plot_mpt_demo.py --help`` for options.
"""

import argparse
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402

from skmpt import MaskedPPCA  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Fit MaskedPPCA to the digits, score it by MPT and compare with the exact LML."
    )
    parser.add_argument("--n-components", type=int, default=8, help="latent dimension K (default 8)")
    parser.add_argument("--score-masks", type=int, default=100, help="random masks per mask size (default 100)")
    parser.add_argument("--output", default="mpt_curve_digits.png", help="where to save the curve")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    X = load_digits().data
    start = time.perf_counter()
    # The paper's estimator: score_masks random masks of every size (MaskedPPCA's default,
    # score_method="chain", is exact for PPCA and would equal the exact LML below).
    ppca = MaskedPPCA(
        args.n_components, score_method="sweep", score_masks=args.score_masks, random_state=args.seed
    ).fit(X)
    fit_seconds = time.perf_counter() - start

    mpt = ppca.score(X)
    exact = ppca.log_marginal_likelihood(X).mean()
    pca = PCA(args.n_components).fit(X).score(X)
    rates, curve = ppca.mpt_curve(X)

    print(f"digits: {X.shape[0]} images x {X.shape[1]} pixels, K={args.n_components}")
    print(f"fit by MPT (uniform mask sizes): {ppca.n_iter_} epochs in {fit_seconds:.1f} s")
    print(f"{'MPT estimate of the LML (score)':<42}{mpt:10.3f} nats/image")
    print(f"{'exact LML of the fitted model':<42}{exact:10.3f} nats/image")
    print(f"{'PCA.score (maximum-likelihood PPCA)':<42}{pca:10.3f} nats/image")

    mean_curve = curve.mean(0)
    low, high = np.percentile(curve, [10, 90], axis=0)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.fill_between(rates, low, high, alpha=0.25, label="10-90 % of images")
    ax.plot(rates, mean_curve, lw=2, label=f"mean; sum over M = {mean_curve.sum():.1f} nats")
    ax.set_xlabel("masking rate M / D")
    ax.set_ylabel("S(x; M), nats per masked pixel")
    ax.set_title(f"MPT curve of MaskedPPCA on digits\n(exact LML {exact:.1f}, MPT estimate {mpt:.1f})")
    ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"saved the MPT curve to {args.output}")


if __name__ == "__main__":
    main()
