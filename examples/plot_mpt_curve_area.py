"""
========================================================
The area under the MPT curve is the LML (Fig. 4, Fig. 5)
========================================================

Redraws Fig. 4 of Moreno-Muñoz et al. (2023): the curve ``S(x; M)`` of a trained PPCA against
the masking rate ``M / D``; the area under it, ``sum_M S(x; M)``, estimates the log-marginal
likelihood. With P=1 random mask per size the curve is noisy; with P=100 it is smooth; with a
latent space of K=50 the predictive probabilities decay from about 50 % masking. Black lines
mark the rates 15 % and 85 %. A fourth panel redraws Fig. 5 (left): the curve at a random
initialisation, before any training step, then after 1, 3, 10 and 30 epochs of MPT training
and at convergence; it is flat at initialisation and its area rises to the LML.

Data: :func:`skmpt.datasets.make_ppca` with noise variance 0.5 and the entries of ``W`` and
``mu`` standard normal; N=2000 (``--n-samples``), D=50, K=2 (seed 0) for the first, second and
fourth panels, N=1000, D=100, K=50 (seed 1) for the third. The curves are averages over the
samples of one draw of masks (P per size, ``random_state=0``); the models are fitted by
:class:`skmpt.MaskedPPCA` with uniform mask sizes (``random_state=0``). The random
initialisation is drawn as :class:`~skmpt.MaskedPPCA` draws its own (``W`` with entries
``0.1 N(0, 1)`` on the standardised data, ``mu`` the data mean, ``sigma^2`` their overall
variance), from its own seed.

Prints each area beside the exact LML; saves ``fig4_area.png``. Measured: 3 min 50 s and
4 min 39 s in two runs with the defaults on 2 idle CPU cores (most of it the K=50 fit; 30
minutes when the cores were shared with other jobs).
"""

import argparse
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from skmpt import MaskedPPCA  # noqa: E402
from skmpt.datasets import make_ppca  # noqa: E402
from skmpt.models import PPCAModule  # noqa: E402
from skmpt.objectives import mpt_curve  # noqa: E402


def draw(ax, ppca, X, label, **plot_kwargs):
    rates, curve = ppca.mpt_curve(X)
    mean_curve = curve.mean(0)
    ax.plot(rates, mean_curve, label=label, **plot_kwargs)
    return rates, mean_curve


@torch.no_grad()
def random_initialisation(X, n_components, seed):
    """A PPCA module initialised as MaskedPPCA initialises one, before any training step."""
    X = torch.as_tensor(X)
    center = X.mean(0)
    scale = (X - center).square().mean().sqrt()
    generator = torch.Generator().manual_seed(seed)
    components = 0.1 * torch.randn(n_components, X.shape[1], generator=generator, dtype=X.dtype)
    module = PPCAModule(components, X.new_zeros(X.shape[1]), X.new_ones(())).requires_grad_(False)
    return module.unstandardize_(center, scale)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Fig. 4 and Fig. 5 (left): the area under the MPT curve")
    parser.add_argument("--n-samples", type=int, default=2000)
    parser.add_argument("--max-epochs", type=int, default=300, help="training budget of every fit")
    parser.add_argument("--output", default="fig4_area.png")
    args = parser.parse_args(argv)

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    X = make_ppca(args.n_samples, 50, 2, random_state=0).data
    # score_method="sweep": the paper's estimator, P random masks of every size (the default,
    # the chain, is exact for PPCA and would make every curve's area the LML).
    # score_masks is read at fit (set_params acts at the next fit): one fit per P, the same model
    # (the same random_state), scored with P masks of every size.
    for ax, P in zip(axes[:2], (1, 100), strict=True):
        ppca = MaskedPPCA(2, score_method="sweep", score_masks=P, max_epochs=args.max_epochs, random_state=0).fit(X)
        exact = ppca.log_marginal_likelihood(X).mean()
        rates, mean_curve = draw(ax, ppca, X, f"P={P}", color="C0")
        ax.fill_between(rates, mean_curve, mean_curve.min() - 0.5, alpha=0.25, color="C0")
        ax.set_title(f"D=50, K=2, P={P}: area {mean_curve.sum():.2f} (LML {exact:.2f})", fontsize=9)
        print(f"D=50,  K=2,  P={P:<3d}: area under the curve {mean_curve.sum():9.3f}, exact LML {exact:9.3f}")

    # K=50 costs 25 times more per mask than K=2: fit on half the samples, draw on 200.
    X = make_ppca(args.n_samples // 2, 100, 50, random_state=1).data
    wide = MaskedPPCA(50, score_method="sweep", score_masks=100, max_epochs=args.max_epochs, random_state=0).fit(X)
    X = X[:200]
    exact = wide.log_marginal_likelihood(X).mean()
    rates, mean_curve = draw(axes[2], wide, X, "P=100", color="C2")
    axes[2].fill_between(rates, mean_curve, mean_curve.min() - 0.5, alpha=0.25, color="C2")
    axes[2].set_title(f"D=100, K=50: area {mean_curve.sum():.1f} (LML {exact:.1f})", fontsize=9)
    print(f"D=100, K=50, P=100: area under the curve {mean_curve.sum():9.3f}, exact LML {exact:9.3f}")

    data = make_ppca(args.n_samples, 50, 2, random_state=0)
    X = data.data
    init = random_initialisation(X, 2, seed=0)
    generating = PPCAModule(torch.as_tensor(data.components), torch.as_tensor(data.mean), data.noise_variance)
    with torch.no_grad():
        X_t = torch.as_tensor(X)
        print(f"D=50,  K=2: LML of the generating parameters {float(generating.log_marginal(X_t).mean()):9.3f}")
        mean_curve = mpt_curve(init, X_t, score_masks=100, random_state=0).mean(0).numpy()
        exact = float(init.log_marginal(X_t).mean())
    rates = np.arange(1, X.shape[1] + 1) / X.shape[1]
    axes[3].plot(rates, mean_curve, label="random init. (0 epochs)", color="0.5", ls="--")
    print(f"random initialisation: area {mean_curve.sum():9.3f}, exact LML {exact:9.3f}")
    for i, epochs in enumerate((1, 3, 10, 30, None)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            # The same seed replays the same training run, stopped after `epochs` epochs.
            model = MaskedPPCA(
                2, score_method="sweep", score_masks=100, random_state=0, max_epochs=epochs or args.max_epochs
            ).fit(X)
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
