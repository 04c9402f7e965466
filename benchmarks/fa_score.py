"""MaskedFactorAnalysis's exhaustive cumulative score: the quadratic form that factor analysis
now shares with PPCA (``weighted_log_prob_sum``) against the per-mask sums the contract's
default forms (what factor analysis ran before it had the fast path).

D=14 (16383 masks), K=3, n=2000; CPU time with one torch thread, the minimum of interleaved
repeats; both paths in this process, and their scores compared.

Run: ``python benchmarks/fa_score.py`` on a quiet machine.
"""

import _common  # noqa: F401  (puts this checkout first on sys.path)
import torch
from _common import interleaved_minimum

from skmpt import objectives
from skmpt.models import FactorAnalysisModule, MaskedModel


class PerMaskFactorAnalysis(FactorAnalysisModule):
    """The same model, scored through the contract's default weighted sum (per-mask sums)."""

    weighted_log_prob_sum = MaskedModel.weighted_log_prob_sum


def main():
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    n, D, K = 2000, 14, 3
    W = torch.randn(K, D, generator=g, dtype=torch.float64)
    psi = torch.rand(D, generator=g, dtype=torch.float64) + 0.2
    mean = torch.randn(D, generator=g, dtype=torch.float64)
    X = torch.randn(n, D, generator=g, dtype=torch.float64) + mean
    fast, slow = FactorAnalysisModule(W, mean, psi), PerMaskFactorAnalysis(W, mean, psi)
    with torch.no_grad():
        a = objectives.cumulative_score(fast, X, score_method="exhaustive")
        b = objectives.cumulative_score(slow, X, score_method="exhaustive")
        per_mask, quadratic = interleaved_minimum(
            [
                lambda: objectives.cumulative_score(slow, X, score_method="exhaustive"),
                lambda: objectives.cumulative_score(fast, X, score_method="exhaustive"),
            ],
            repeats=3,
        )
    print(f"max relative difference of the scores: {float(((a - b) / b).abs().max()):.1e}")
    print(f"per-mask sums   {per_mask:.3f} CPU s")
    print(f"quadratic form  {quadratic:.3f} CPU s")
    print(f"speed-up: {per_mask / quadratic:.1f}x")


if __name__ == "__main__":
    main()
