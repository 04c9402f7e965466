"""
========================================================
The area under the MPT curve is the LML (Fig. 4, Fig. 5)
========================================================

Redraws Fig. 4 of Moreno-Muñoz et al. (2023): the curve ``S(x; M)`` of a trained PPCA against
the masking rate ``M / D``; the area under it, ``sum_M S(x; M)``, estimates the log-marginal
likelihood. With P=1 random mask per size the curve is noisy; with P=100 it is smooth; with a
latent space of K=50 the predictive probabilities decay from about 50 % masking. Black lines
mark the rates 15 % and 85 %. A fourth panel redraws Fig. 5 (left): the curve after 1, 3, 10
and 30 epochs of MPT training and at convergence; it is flat at initialisation and its area
rises to the LML.

Prints each area beside the exact LML; saves ``fig4_area.png``. About a minute on 2 CPU cores.
"""

import argparse
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from skmpt import MaskedPPCA  # noqa: E402
from skmpt.datasets import make_ppca  # noqa: E402


def draw(ax, ppca, X, label, **plot_kwargs):
    rates, curve = ppca.mpt_curve(X)
    mean_curve = curve.mean(0)
    ax.plot(rates, mean_curve, label=label, **plot_kwargs)
    return rates, mean_curve


def main(argv=None):
    parser = argparse.ArgumentParser(description="Fig. 4 and Fig. 5 (left): the area under the MPT curve")
    parser.add_argument("--n-samples", type=int, default=2000)
    parser.add_argument("--output", default="fig4_area.png")
    args = parser.parse_args(argv)

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    X = make_ppca(args.n_samples, 50, 2, random_state=0).data
    ppca = MaskedPPCA(2, random_state=0).fit(X)
    exact = ppca.log_marginal_likelihood(X).mean()
    for ax, P in zip(axes[:2], (1, 100), strict=True):
        ppca.set_params(score_masks=P)
        rates, mean_curve = draw(ax, ppca, X, f"P={P}", color="C0")
        ax.fill_between(rates, mean_curve, mean_curve.min() - 0.5, alpha=0.25, color="C0")
        ax.set_title(f"D=50, K=2, P={P}: area {mean_curve.sum():.2f} (LML {exact:.2f})", fontsize=9)
        print(f"D=50,  K=2,  P={P:<3d}: area under the curve {mean_curve.sum():9.3f}, exact LML {exact:9.3f}")

    # K=50 costs 25 times more per mask than K=2: fit on half the samples, draw on 200.
    X = make_ppca(args.n_samples // 2, 100, 50, random_state=1).data
    wide = MaskedPPCA(50, random_state=0).fit(X)
    X = X[:200]
    exact = wide.log_marginal_likelihood(X).mean()
    rates, mean_curve = draw(axes[2], wide, X, "P=100", color="C2")
    axes[2].fill_between(rates, mean_curve, mean_curve.min() - 0.5, alpha=0.25, color="C2")
    axes[2].set_title(f"D=100, K=50: area {mean_curve.sum():.1f} (LML {exact:.1f})", fontsize=9)
    print(f"D=100, K=50, P=100: area under the curve {mean_curve.sum():9.3f}, exact LML {exact:9.3f}")

    X = make_ppca(args.n_samples, 50, 2, random_state=0).data
    for i, epochs in enumerate((1, 3, 10, 30, None)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            # The same seed replays the same training run, stopped after `epochs` epochs.
            model = MaskedPPCA(2, random_state=0, max_epochs=epochs or 300).fit(X)
        label = f"{model.n_iter_} epochs" if epochs else f"converged ({model.n_iter_})"
        _, mean_curve = draw(axes[3], model, X, label, color=plt.cm.viridis(i / 4))
        exact = model.log_marginal_likelihood(X).mean()
        print(f"after {model.n_iter_:>3d} epochs: area {mean_curve.sum():9.3f}, exact LML {exact:9.3f}")
    axes[3].set_title("Fig. 5 (left): the curve during training", fontsize=9)
    axes[3].legend(fontsize=7)

    for ax in axes:
        for rate in (0.15, 0.85):
            ax.axvline(rate, color="k", lw=0.8)
        ax.set_xlabel("masking rate M / D")
    axes[0].set_ylabel("S(x; M), nats per token")
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"saved {args.output}")


if __name__ == "__main__":
    main()
