"""
==========================================================
Multiple imputation: Rubin's rules and their coverage
==========================================================

A regression coefficient is estimated from a table with holes by multiple imputation: the
table is completed ``--n-imputations`` times with draws of the missing entries, the regression
is fitted to each completed table, and Rubin's rules pool the estimates (their mean) and their
variances (the mean within-imputation variance plus ``1 + 1/m`` times the variance between
imputations) into a 95 % interval with Barnard and Rubin's degrees of freedom. Repeated over
``--replications`` tables, the share of intervals that contain the true coefficient is the
coverage, nominally 95 %.

Draws that ignore the uncertainty of the fitted model are too close to each other and the
intervals too narrow. Here each imputation refits the model (a full-covariance Gaussian,
``MaskedGaussianMixture(1)``) to a bootstrap resample of the rows, then draws the missing entries
of the original table from ``p(x_mis | x_obs)`` with ``sample_missing`` (bootstrap multiple
imputation); a single fit with ``sample_posterior=True`` draws is shown too. The anchor is
:class:`~sklearn.impute.IterativeImputer` with ``sample_posterior=True`` and a new seed per
imputation.

Run ``python examples/plot_multiple_imputation.py --help`` for options.
"""

import argparse
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.experimental import enable_iterative_imputer  # noqa: E402, F401
from sklearn.impute import IterativeImputer  # noqa: E402

from skmpt import MaskedGaussianMixture, MaskedImputer  # noqa: E402

TRUE_COEFFICIENT = 1.0


def table(n_samples, rng):
    """Three correlated covariates and ``y = x0 + 0.5 x1 + noise``; 30 % of the covariates missing."""
    covariance = np.array([[1.0, 0.6, 0.3], [0.6, 1.0, 0.5], [0.3, 0.5, 1.0]])
    X = rng.multivariate_normal(np.zeros(3), covariance, n_samples)
    y = TRUE_COEFFICIENT * X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=n_samples)
    data = np.column_stack([X, y])
    holes = rng.random(data.shape) < 0.3
    holes[:, 3] = False  # the outcome is observed
    return np.where(holes, np.nan, data)


def coefficient(data):
    """Least-squares coefficient of x0 and its variance."""
    design = np.column_stack([np.ones(len(data)), data[:, :3]])
    beta, *_ = np.linalg.lstsq(design, data[:, 3], rcond=None)
    residual = data[:, 3] - design @ beta
    sigma2 = residual @ residual / (len(data) - design.shape[1])
    return beta[1], sigma2 * np.linalg.inv(design.T @ design)[1, 1]


def rubin_interval(estimates, variances, n_samples):
    """Rubin's pooled estimate and 95 % interval (Barnard-Rubin degrees of freedom)."""
    m = len(estimates)
    mean, within, between = np.mean(estimates), np.mean(variances), np.var(estimates, ddof=1)
    total = within + (1 + 1 / m) * between
    share = (1 + 1 / m) * between / total
    df_complete = n_samples - 4
    df_large = (m - 1) / max(share, 1e-12) ** 2
    df_observed = (df_complete + 1) / (df_complete + 3) * df_complete * (1 - share)
    df = 1 / (1 / df_large + 1 / df_observed)
    half = stats.t.ppf(0.975, df) * np.sqrt(total)
    return mean - half, mean + half


def skmpt_bootstrap(data, m, max_epochs, rng):
    completed = []
    for _ in range(m):
        rows = rng.integers(len(data), size=len(data))
        model = MaskedGaussianMixture(1, max_epochs=max_epochs, learning_rate=0.05, n_iter_no_change=5,
                                      random_state=int(rng.integers(2**31))).fit(data[rows])
        completed.append(model.sample_missing(data, 1, random_state=int(rng.integers(2**31)))[0])
    return completed


def skmpt_one_fit(data, m, max_epochs, rng):
    imputer = MaskedImputer(MaskedGaussianMixture(1, max_epochs=max_epochs, learning_rate=0.05, n_iter_no_change=5,
                                                  random_state=0),
                            sample_posterior=True, random_state=int(rng.integers(2**31))).fit(data)
    return [imputer.transform(data) for _ in range(m)]


def iterative(data, m, max_epochs, rng):
    return [IterativeImputer(sample_posterior=True, max_iter=10, random_state=int(rng.integers(2**31)))
            .fit_transform(data) for _ in range(m)]


METHODS = {"skmpt, bootstrap + draws": skmpt_bootstrap, "skmpt, one fit + draws": skmpt_one_fit,
           "IterativeImputer(sample_posterior)": iterative}


def main(argv=None):
    parser = argparse.ArgumentParser(description="Coverage of Rubin's-rules intervals after multiple imputation.")
    parser.add_argument("--n-samples", type=int, default=200, help="rows of each table")
    parser.add_argument("--n-imputations", type=int, default=20, help="imputations per table")
    parser.add_argument("--replications", type=int, default=40, help="tables drawn")
    parser.add_argument("--max-epochs", type=int, default=100, help="most epochs of each skmpt fit")
    parser.add_argument("--output", default="multiple_imputation.png", help="figure file")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", ConvergenceWarning)
    rng = np.random.default_rng(0)
    covered = {name: [] for name in METHODS}
    widths = {name: [] for name in METHODS}
    for _ in range(args.replications):
        data = table(args.n_samples, rng)
        for name, method in METHODS.items():
            pairs = [coefficient(done) for done in method(data, args.n_imputations, args.max_epochs, rng)]
            low, high = rubin_interval(*zip(*pairs, strict=True), args.n_samples)
            covered[name].append(low <= TRUE_COEFFICIENT <= high)
            widths[name].append(high - low)
    for name in METHODS:
        print(f"{name:36s} coverage {np.mean(covered[name]):.2f}  mean width {np.mean(widths[name]):.3f}  "
              f"({args.replications} tables, {args.n_imputations} imputations)")
    fig, ax = plt.subplots(figsize=(6, 2.5))
    ax.barh(list(METHODS), [np.mean(covered[name]) for name in METHODS])
    ax.axvline(0.95, color="k", linestyle="--", label="nominal 95 %")
    ax.set_xlim(0, 1)
    ax.set_xlabel("coverage of the 95 % interval")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(args.output, dpi=100)


if __name__ == "__main__":
    main()
