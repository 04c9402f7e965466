"""
=================================================================================
Choosing the masking rate and the number of components with GridSearchCV
=================================================================================

skmpt's estimators are ordinary scikit-learn estimators: they sit in a
:class:`~sklearn.pipeline.Pipeline` and :class:`~sklearn.model_selection.GridSearchCV`
tunes them. Their ``score`` is the cumulative MPT estimate of the held-out log-marginal
likelihood (LML), ``sum_M S(x; M)`` over every mask size, whatever masking rate the model was
trained with, so models trained with different rates are compared on the same scale and the
search can choose the rate as well as the latent dimension.

Two searches over ``mask_rate`` and ``n_components``:

- :class:`~sklearn.preprocessing.StandardScaler` + :class:`skmpt.MaskedPPCA` on data drawn
  from a PPCA with K=3 (:func:`skmpt.datasets.make_ppca`, N=500, D=10, noise variance 0.5),
  beside the same search with scikit-learn's :class:`~sklearn.decomposition.PCA`, whose
  ``score`` is the maximum-likelihood PPCA's LML. Every candidate is scored on data scaled by
  the same fold's scaler, so the scaler's Jacobian is one constant per fold and does not
  change the ranking.
- :class:`~sklearn.preprocessing.Binarizer` + :class:`skmpt.MaskedLinearVAE` (Bernoulli
  pixels) on scikit-learn's 8 x 8 digits.

The top panels show ``cv_results_`` (mean held-out score per candidate; bars: the standard
deviation over the folds); the bottom ones the MPT curve ``S(x; M)`` of each chosen model on
a held-out quarter of the data, whose area is its score. Fixed-rate training optimises one
point of that curve (a biased target), so it is expected to score at most as high as uniform
mask sizes. The chosen parameters are printed, not assumed.

The gallery runs it with small arguments; run the script without arguments for the full
size. Saves ``grid_search.png``.
"""

import argparse
import time
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold, train_test_split  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import Binarizer, StandardScaler  # noqa: E402

from skmpt import MaskedLinearVAE, MaskedPPCA  # noqa: E402
from skmpt.datasets import make_ppca  # noqa: E402


def mask_rate(text):
    return text if text == "uniform" else float(text)


def search(pipeline, grid, X, cv):
    """Fit a GridSearchCV; count the fits that stopped on max_epochs rather than hide them."""
    gs = GridSearchCV(pipeline, grid, cv=cv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        gs.fit(X)
    n_fits = len(gs.cv_results_["params"]) * cv.get_n_splits() + 1
    stopped = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
    for w in caught:
        if not issubclass(w.category, ConvergenceWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return gs, f"{stopped} of {n_fits} fits stopped at max_epochs before converging"


def plot_results(ax, gs, step, n_splits, title):
    """Mean held-out score against n_components, one line per mask_rate."""
    results = gs.cv_results_
    rates = results[f"param_{step}__mask_rate"]
    components = np.asarray(results[f"param_{step}__n_components"], dtype=int)
    for i, rate in enumerate(dict.fromkeys(rates)):
        keep = np.array([r == rate for r in rates])
        label = "uniform mask sizes" if rate == "uniform" else f"mask_rate={rate:g}"
        ax.errorbar(
            components[keep] + 0.04 * i,
            results["mean_test_score"][keep],
            yerr=results["std_test_score"][keep],
            marker="o",
            capsize=3,
            label=label,
        )
    best = gs.best_params_
    ax.axvline(best[f"{step}__n_components"], color="k", lw=0.8, ls=":", label="chosen")
    ax.set(title=title, xlabel="n_components", ylabel=f"mean held-out score over {n_splits} folds (nats)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def plot_curve(ax, model, X_train, X, title, score_masks):
    """The chosen model's MPT curve on held-out data, ``score_masks`` random masks of each size.

    The chosen model refitted with the sweep (the linear VAE's default, one chain ordering, is
    exact for the area but gives a single token's term at each size): scoring options, as every
    parameter, act at the next fit; the same data and random_state give the same model.
    """
    estimator = clone(model[-1]).set_params(score_method="sweep", score_masks=score_masks)
    estimator.fit(model[:-1].transform(X_train))
    rates, curve = estimator.mpt_curve(model[:-1].transform(X))
    mean_curve = curve.mean(0)
    ax.plot(rates, mean_curve, marker=".")
    ax.set(title=title, xlabel="mask rate M / D", ylabel="S(x; M), nats per token")
    return mean_curve.sum()


def main(argv=None):
    parser = argparse.ArgumentParser(description="GridSearchCV over mask_rate and n_components")
    parser.add_argument("--n-samples", type=int, default=500, help="PPCA samples")
    parser.add_argument("--components", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6])
    parser.add_argument("--mask-rates", type=mask_rate, nargs="+", default=["uniform", 0.15, 0.5])
    parser.add_argument("--n-digits", type=int, default=1797, help="digits used (at most 1797)")
    parser.add_argument("--vae-components", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--vae-mask-rates", type=mask_rate, nargs="+", default=["uniform", 0.15])
    parser.add_argument("--n-quadrature", type=int, default=16, help="Gauss-Hermite nodes per latent dimension")
    parser.add_argument("--cv", type=int, default=3)
    parser.add_argument("--curve-masks", type=int, default=20, help="random masks per size for the curves")
    parser.add_argument("--max-epochs", type=int, default=300)
    parser.add_argument("--output", default="grid_search.png")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    cv = KFold(args.cv, shuffle=True, random_state=0)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))

    # PPCA data with three latent dimensions; a quarter held out for the curve.
    X = make_ppca(args.n_samples, 10, 3, noise_variance=0.5, random_state=0).data
    X_train, X_test = train_test_split(X, test_size=0.25, random_state=0)
    ppca = Pipeline(
        [("scale", StandardScaler()), ("ppca", MaskedPPCA(max_epochs=args.max_epochs, device="cpu", random_state=0))]
    )
    grid = {"ppca__n_components": args.components, "ppca__mask_rate": args.mask_rates}
    gs, stopped = search(ppca, grid, X_train, cv)
    pca = GridSearchCV(Pipeline([("scale", StandardScaler()), ("pca", PCA())]), {"pca__n_components": args.components})
    pca.set_params(cv=cv).fit(X_train)
    print(f"PPCA data: N={len(X_train)} for the search (of {args.n_samples}), D=10, true K=3; {stopped}")
    print(f"  GridSearchCV(MaskedPPCA) chose {gs.best_params_}, mean held-out score {gs.best_score_:.4f} nats")
    print(f"  GridSearchCV(PCA) chose {pca.best_params_}, mean held-out score {pca.best_score_:.4f} nats")
    plot_results(axes[0, 0], gs, "ppca", args.cv, "StandardScaler + MaskedPPCA")
    axes[0, 0].plot(args.components, pca.cv_results_["mean_test_score"], "k--", lw=1, label="PCA (ML optimum)")
    axes[0, 0].legend(fontsize=8)
    title = "chosen MaskedPPCA: MPT curve on held-out data"
    area = plot_curve(axes[1, 0], gs.best_estimator_, X_train, X_test, title, args.curve_masks)
    print(
        f"  on {len(X_test)} held-out samples: area under its MPT curve ({args.curve_masks} masks per size) "
        f"{area:.4f} nats, its score {gs.score(X_test):.4f}"
    )

    # Binary digits: Binarizer + the Bernoulli linear VAE.
    digits = load_digits().data[: args.n_digits]
    D_train, D_test = train_test_split(digits, test_size=0.25, random_state=0)
    vae = Pipeline(
        [
            ("binarize", Binarizer(threshold=7.0)),
            (
                "vae",
                MaskedLinearVAE(
                    n_quadrature=args.n_quadrature, max_epochs=args.max_epochs, device="cpu", random_state=0
                ),
            ),
        ]
    )
    grid = {"vae__n_components": args.vae_components, "vae__mask_rate": args.vae_mask_rates}
    gs_vae, stopped = search(vae, grid, D_train, cv)
    print(f"Digits: N={len(D_train)} for the search, D=64 binary pixels; {stopped}")
    print(f"  GridSearchCV(MaskedLinearVAE) chose {gs_vae.best_params_}, mean held-out score {gs_vae.best_score_:.4f}")
    plot_results(axes[0, 1], gs_vae, "vae", args.cv, "Binarizer + MaskedLinearVAE (digits)")
    axes[0, 1].legend(fontsize=8)
    title = "chosen MaskedLinearVAE: MPT curve on held-out digits"
    area = plot_curve(axes[1, 1], gs_vae.best_estimator_, D_train, D_test, title, args.curve_masks)
    print(
        f"  on {len(D_test)} held-out digits: area under its MPT curve ({args.curve_masks} masks per size) "
        f"{area:.4f} nats, its score (one chain, exact) {gs_vae.score(D_test):.4f}"
    )

    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"saved {args.output} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
