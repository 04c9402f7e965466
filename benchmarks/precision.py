"""float32 against float64 for every array estimator: the difference in score and the speed ratio.

Each estimator is fitted twice on the same data with the same ``random_state``, once with
``dtype="float64"`` (the default) and once with ``dtype="float32"``; the script prints the
difference of their exact log-marginal likelihoods (where the model has one) and of their
scores on the same data, in nats per sample, and the ratio of CPU seconds (one torch thread,
the minimum of interleaved repeats) of ``fit`` and of ``score``.

Run: ``python benchmarks/precision.py [--repeats 2]``.
"""

import argparse
import time
import warnings

import _common  # noqa: F401  (puts this checkout first on sys.path)
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedLinearVAE, MaskedPPCA, MaskedVAE
from skmpt.datasets import make_ppca


def cases():
    ppca_data = make_ppca(2000, 20, 3, random_state=0).data
    digits = load_digits().data
    binary = (digits > 7).astype(float)
    return [
        ("MaskedPPCA (N=2000, D=20, K=3)", MaskedPPCA(3, max_epochs=60, random_state=0), ppca_data),
        ("MaskedFactorAnalysis (N=2000, D=20, K=3)", MaskedFactorAnalysis(3, max_epochs=60, random_state=0),
         ppca_data),
        ("MaskedGaussianMixture (N=2000, D=20, 3 full)", MaskedGaussianMixture(3, max_epochs=30, random_state=0),
         ppca_data),
        ("MaskedLinearVAE (digits binarised, K=2)", MaskedLinearVAE(2, max_epochs=20, random_state=0), binary),
        ("MaskedVAE (digits, Gaussian, K=2)", MaskedVAE(2, max_epochs=5, score_masks=2, random_state=0), digits),
    ]


def cpu_seconds(function):
    start = time.process_time()
    result = function()
    return time.process_time() - start, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", ConvergenceWarning)
    print(f"{'estimator':<46}{'|dLML|':>10}{'|dscore|':>10}{'fit 64/32':>11}{'score 64/32':>13}")
    for name, estimator, X in cases():
        best = {"float64": [np.inf, np.inf], "float32": [np.inf, np.inf]}
        fitted = {}
        for _ in range(args.repeats):
            for dtype in ("float64", "float32"):  # interleaved: both see the same load
                model = estimator.set_params(dtype=dtype)
                fit_time, model = cpu_seconds(lambda model=model, X=X: model.fit(X))
                score_time, score = cpu_seconds(lambda model=model, X=X: model.score(X))
                best[dtype] = [min(best[dtype][0], fit_time), min(best[dtype][1], score_time)]
                fitted[dtype] = (float(np.mean(model.log_marginal_likelihood(X))), score)
        d_lml = abs(fitted["float64"][0] - fitted["float32"][0])
        d_score = abs(fitted["float64"][1] - fitted["float32"][1])
        fit_ratio = best["float64"][0] / best["float32"][0]
        score_ratio = best["float64"][1] / best["float32"][1]
        print(f"{name:<46}{d_lml:10.2e}{d_score:10.2e}{fit_ratio:10.2f}x{score_ratio:12.2f}x")


if __name__ == "__main__":
    main()
