"""
=====================================================
Imputing missing pixels: digits with a block missing
=====================================================

Each 8x8 digit of scikit-learn's embedded ``load_digits`` loses one random 4x4 block of pixels
(a quarter of the image). Every model is fitted to the incomplete images — masked pre-training
among each image's observed pixels maximises the likelihood of what was observed — and fills
the block with its conditional mean given the observed pixels, ``E[x_mis | x_obs]``, through
:class:`skmpt.MaskedImputer`. :class:`~sklearn.impute.IterativeImputer` is the anchor. The
figure shows originals, the holes, and each imputation; the title of each row gives the
root-mean-square error of the imputed pixels (pixel values in [0, 1]) and the seconds.

Run ``python examples/plot_imputation.py --help`` for options.
"""

import argparse
import time
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.experimental import enable_iterative_imputer  # noqa: E402, F401
from sklearn.impute import IterativeImputer  # noqa: E402

from skmpt import (  # noqa: E402
    MaskedFactorAnalysis,
    MaskedGaussianMixture,
    MaskedImputer,
    MaskedLinearVAE,
    MaskedPPCA,
    MaskedVAE,
)


def punch_blocks(X, rng):
    """``X`` with one random 4x4 block of each 8x8 image set to NaN."""
    holes = np.zeros((len(X), 8, 8), dtype=bool)
    for image, (row, col) in zip(holes, rng.randint(0, 5, (len(X), 2)), strict=True):
        image[row : row + 4, col : col + 4] = True
    holes = holes.reshape(len(X), 64)
    return np.where(holes, np.nan, X), holes


def main(argv=None):
    parser = argparse.ArgumentParser(description="Digits with missing blocks, imputed by each model.")
    parser.add_argument("--n-samples", type=int, default=1000, help="digits used (default 1000)")
    parser.add_argument("--max-epochs", type=int, default=60, help="most epochs of each skmpt fit (default 60)")
    parser.add_argument("--output", default="imputation.png", help="where to save the figure")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", ConvergenceWarning)
    rng = np.random.RandomState(0)
    X = load_digits().data[: args.n_samples] / 16.0
    X_missing, holes = punch_blocks(X, rng)
    common = {"max_epochs": args.max_epochs, "batch_size": 200, "learning_rate": 0.03, "random_state": 0}
    imputers = {
        "PPCA (K=10)": MaskedImputer(MaskedPPCA(10, **common)),
        "factor analysis (K=10)": MaskedImputer(MaskedFactorAnalysis(10, **common)),
        "mixture (10, diag)": MaskedImputer(MaskedGaussianMixture(10, covariance_type="diag", **common)),
        "linear VAE (K=2)": MaskedImputer(MaskedLinearVAE(2, likelihood="gaussian", n_quadrature=8, **common)),
        "VAE (K=4)": MaskedImputer(MaskedVAE(4, hidden_layer_sizes=(64,), **common)),
        "IterativeImputer": IterativeImputer(max_iter=5, random_state=0),
    }
    shown = np.arange(8)
    rows = [("original", X), ("holes", np.where(holes, 0.5, X))]
    for name, imputer in imputers.items():
        start = time.perf_counter()
        imputed = imputer.fit_transform(X_missing)
        seconds = time.perf_counter() - start
        rmse = np.sqrt(np.mean((imputed[holes] - X[holes]) ** 2))
        print(f"{name:24s} RMSE {rmse:.4f}  {seconds:6.1f} s")
        rows.append((f"{name}: RMSE {rmse:.3f}, {seconds:.1f} s", imputed))

    fig, axes = plt.subplots(len(rows), len(shown), figsize=(len(shown), 1.25 * len(rows)),
                             gridspec_kw={"wspace": 0.08, "hspace": 0.3, "left": 0.02, "right": 0.98,
                                          "top": 0.97, "bottom": 0.01})
    for (title, images), row_axes in zip(rows, axes, strict=True):
        for ax, index in zip(row_axes, shown, strict=True):
            ax.imshow(images[index].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        # The row's label above its first image, left out of the layout: the images keep their width.
        row_axes[0].set_title(title, loc="left", fontsize=10).set_in_layout(False)
    fig.savefig(args.output, dpi=100)


if __name__ == "__main__":
    main()
