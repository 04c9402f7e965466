"""
==========================================================================
A deep VAE trained by masked pre-training against the ELBO (Fig. 3 bottom)
==========================================================================

Redraws the lower row of Fig. 3 of Moreno-Muñoz et al. (2023): a VAE with MLP encoder and
decoder (256 and 128 hidden units) and a Gaussian likelihood, trained by masked pre-training
with masks of 33 % (the paper's setting) and of uniform size, against the ELBO. Thick curves
are the importance-sampled LML of the training data per epoch, thin ones the training
objective. The paper computed its conditionals by recursive encoding-decoding (pseudo-Gibbs);
skmpt defaults to importance sampling, which converges to the true conditionals, and the
fourth run uses the paper's method.

Data: scikit-learn's embedded digits (pixels 0..16, D=64) and, when the IDX files are found
(``--data-home`` or Debian's ``dataset-fashion-mnist``), N=2000 Fashion-MNIST images scaled to
[0, 1] (D=784). Prints the final LMLs (``--final-lml-samples`` importance samples; the IWAE
literature uses 5000); saves ``fig3_vae.png``. Without arguments the script is a quick
look (2 epochs, 300 Fashion-MNIST images: the gallery's figure); with ``--full`` (40 epochs,
2000 images) both panels took 22 and 24 minutes of CPU time on one thread in two runs
(2026-11-23), most of it Fashion-MNIST's per-epoch LML monitor and its pseudo-Gibbs run.
"""

import argparse
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from skmpt import MaskedVAE  # noqa: E402
from skmpt.datasets import fetch_mnist  # noqa: E402

RUNS = [
    ("MPT 33 %, importance", dict(objective="mpt", mask_rate=0.33)),
    ("MPT uniform, importance", dict(objective="mpt", mask_rate="uniform")),
    ("ELBO", dict(objective="elbo")),
    ("MPT 33 %, pseudo-Gibbs (paper)", dict(objective="mpt", mask_rate=0.33, conditional="pseudo_gibbs")),
]


# Without --full the script is a quick look (what the documentation's gallery runs); --full is
# the paper-size run.
SIZES = {
    "small": dict(n_samples=300, max_epochs=2, n_lml_samples=5, final_lml_samples=20),
    "full": dict(n_samples=2000, max_epochs=40, n_lml_samples=50, final_lml_samples=1000),
}


def datasets(args):
    yield "digits (1797 x 64)", load_digits().data
    try:
        X = fetch_mnist("fashion-mnist", data_home=args.data_home).data[: args.n_samples]
    except FileNotFoundError as exc:
        print(f"Fashion-MNIST skipped: {exc}")
        return
    yield f"Fashion-MNIST ({len(X)} x 784)", X / 255.0


def main(argv=None):
    parser = argparse.ArgumentParser(description="Fig. 3 (lower row): MPT against ELBO for a deep VAE")
    parser.add_argument("--n-samples", type=int, default=None, help="Fashion-MNIST images (300; 2000 with --full)")
    parser.add_argument("--max-epochs", type=int, default=None, help="2; 40 with --full")
    parser.add_argument("--n-lml-samples", type=int, default=None, help="importance samples per image per epoch")
    parser.add_argument("--final-lml-samples", type=int, default=None, help="importance samples for the final LMLs")
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--output", default="fig3_vae.png")
    parser.add_argument("--full", action="store_true", help="the paper-size run (about 25 minutes on one thread)")
    args = parser.parse_args(argv)
    for name, value in SIZES["full" if args.full else "small"].items():
        if getattr(args, name) is None:
            setattr(args, name, value)

    panels = list(datasets(args))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for ax, (name, X) in zip(axes[0], panels, strict=True):
        print(name)
        shown = []  # the LML curves after their first quarter, which set the axis
        for i, (label, params) in enumerate(RUNS):
            vae = MaskedVAE(
                max_epochs=args.max_epochs, n_lml_samples=args.n_lml_samples, monitor="lml", random_state=0, **params
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                vae.fit(X)
            epochs = [h["epoch"] for h in vae.history_]
            ax.plot(epochs, [h["objective"] for h in vae.history_], color=f"C{i}", alpha=0.3, lw=1)
            lml = [h["lml"] for h in vae.history_]
            ax.plot(epochs, lml, color=f"C{i}", lw=2, label=label)
            shown += lml[len(lml) // 4 :]
            final = vae.log_marginal_likelihood(X, n_lml_samples=args.final_lml_samples).mean()
            print(f"  {label:<32} LML {final:10.3f} nats/image ({args.final_lml_samples} importance samples), "
                  f"{vae.n_iter_} epochs")
        ax.set(title=name, xlabel="epoch", ylabel="LML per image (thin: training objective)")
        low, high = min(shown), max(shown)
        ax.set_ylim(low - 0.05 * (high - low) - 1, high + 0.05 * (high - low) + 1)
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"saved {args.output}")


if __name__ == "__main__":
    main()
