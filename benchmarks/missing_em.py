"""MPT on incomplete data reaches the EM optimum: PPCA, factor analysis, full-covariance mixture.

N=2000 samples, D=10 features, K=2 (latent dimensions or components), 20 % of the entries
missing completely at random (seed 1). For each model, EM with missing values (the reference
written in ``tests/support/em_missing.py``) and skmpt's estimator (masked pre-training among each
sample's observed entries) are fitted to the same incomplete data; the script prints the mean
observed-data log-likelihood per sample of both (computed with scipy from each fit's
parameters for EM, ``log_marginal_likelihood`` for skmpt), the gap, and the seconds.
The bounds the issue sets: 0.02 nats per sample (PPCA, FA), 0.05 (mixture).
``tests/estimators/test_missing_em.py`` runs the same comparison at a size the test suite can afford.

Run ``python benchmarks/missing_em.py [--n-samples N] [--models ppca,fa,gmm]``.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from em_missing import gmm_em, incomplete_data, linear_gaussian_em  # noqa: E402

from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedPPCA  # noqa: E402

BOUNDS = {"ppca": 0.02, "fa": 0.02, "gmm": 0.05}


def compare(kind, X, **params):
    """``(EM's mean log p(x_o), its seconds, MPT's, its seconds, the fitted estimator)``."""
    start = time.perf_counter()
    if kind == "gmm":
        reference = gmm_em(X, 2)[-1]
    else:
        reference = linear_gaussian_em(X, 2, isotropic=kind == "ppca")[-1]
    em_seconds = time.perf_counter() - start
    estimator = {"ppca": MaskedPPCA, "fa": MaskedFactorAnalysis, "gmm": MaskedGaussianMixture}[kind](2, **params)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit(X)
    mpt_seconds = time.perf_counter() - start
    return reference, em_seconds, float(estimator.log_marginal_likelihood(X).mean()), mpt_seconds, estimator


def main(argv=None):
    parser = argparse.ArgumentParser(description="MPT on incomplete data against EM with missing values.")
    parser.add_argument("--n-samples", type=int, default=2000)
    parser.add_argument("--models", default="ppca,fa,gmm")
    args = parser.parse_args(argv)
    print(f"{'model':6s} {'EM':>10s} {'s':>6s} {'MPT':>10s} {'s':>6s} {'epochs':>6s} {'gap':>8s} {'bound':>6s}")
    for kind in args.models.split(","):
        X = incomplete_data(kind, args.n_samples)
        em, em_s, mpt, mpt_s, estimator = compare(kind, X, random_state=0)
        print(
            f"{kind:6s} {em:10.5f} {em_s:6.1f} {mpt:10.5f} {mpt_s:6.1f} {estimator.n_iter_:6d} "
            f"{em - mpt:8.4f} {BOUNDS[kind]:6.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
