"""Speed of MaskedPPCA's cumulative score: fraction of the matmul rate, before and after.

For (D, K) in {(256, 8), (512, 16), (512, 2)}, n=512 samples and P=512 masks shared by the
samples (the sweep with 512 // D masks per size), prints CPU seconds (``time.process_time``,
one torch thread, the minimum of interleaved repeats) of

- ``matmul``: a float64 matrix product ``(n, D) @ (D, P K)``, the same multiply-add count
  ``n P D K`` (the in-process baseline);
- ``before``: ``cumulative_score`` with the PPCA module of commit ``BEFORE`` (loaded with
  ``git show``), through today's objectives and masks (the issue's baseline);
- ``per-mask``: today's module scored through its per-mask sums, each contracted with its
  weight (the previous revision's path);
- ``after``: ``cumulative_score`` with today's module, which adds all masks into one
  ``D x D`` quadratic form (``PPCAModule.weighted_log_prob_sum``);

the fraction of the matmul rate of each (``matmul / time``) and the largest difference of
the scores. The same for ``matmul`` and ``after`` in wall time with all cores follows. Then,
per configuration, the speed-up of the masked sums over dense per-mask conditioning (the
paper's method, timed on ``--dense-masks`` masks) and the time of drawing the P masks with
two sorts (the previous sampler) and with one (today's).

Per-mask sums need ``2 K + 1`` weighted sums over the ``D`` tokens for each sample and mask
(the quadratic form has rank ``2 K`` plus a diagonal), so their fraction is at most about
``K / (2 K + 1)``. The quadratic form costs ``P K D^2`` for the masks plus ``n D^2`` for the
samples, against ``n P D K`` for the baseline: at ``n = 512`` it is that count at ``D = 512``
and half of it at ``D = 256``.

    python benchmarks/ppca_score.py [--repeats 5] [--dense-masks 32]
"""

import argparse
import importlib.util
import os
from functools import partial
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from _common import dense_masked_log_prob_sum, interleaved_minimum, ppca_module
from skmpt.masks import uniform_size_masks
from skmpt.models import MaskedModel, PPCAModule
from skmpt.objectives import cumulative_score, masked_log_prob_sum

#: The last commit before the one-GEMM rewrite of ``PPCAModule.masked_log_prob_sum``.
BEFORE = "cce2468"


def load_before():
    """``PPCAModule`` as it was at commit ``BEFORE``."""
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(
        ["git", "show", f"{BEFORE}:skmpt/models/ppca.py"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "ppca_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("ppca_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PPCAModule


class PerMaskPPCA(PPCAModule):
    """Today's module scored through its per-mask sums, as before the quadratic form."""

    weighted_log_prob_sum = MaskedModel.weighted_log_prob_sum


def two_sort_masks(sizes, n_features, generator):
    """The previous sampler: rank the noise with a second sort."""
    noise = torch.rand(*sizes.shape, n_features, generator=generator)
    return noise.argsort(dim=-1).argsort(dim=-1) < sizes.unsqueeze(-1)


def main(argv=None):
    parser = argparse.ArgumentParser(description="MaskedPPCA scoring against the matmul rate")
    parser.add_argument("--n-samples", type=int, default=512)
    parser.add_argument("--n-masks", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dense-masks", type=int, default=32, help="masks timed for the dense method")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    Before = load_before()
    n, P = args.n_samples, args.n_masks
    print(f"torch {torch.__version__}, 1 thread, float64, CPU time; n={n} samples, P={P} masks, before = {BEFORE}")
    header = (
        f"{'D':>4} {'K':>3} {'matmul s':>9} {'before s':>9} {'per-mask s':>10} {'after s':>9} {'before':>7} "
        f"{'per-mask':>8} {'after':>7} {'speed-up':>8} {'max |diff|':>10}"
    )
    print(header)
    rows, wall = [], []
    for D, K in [(256, 8), (512, 16), (512, 2)]:
        module, X = ppca_module(D, K, n_samples=n)
        params = (module.components.clone(), module.mean.clone(), module.noise_variance.clone())
        before = Before(*params).requires_grad_(False)
        per_mask = PerMaskPPCA(*params).requires_grad_(False)
        a = torch.randn(n, D, dtype=torch.float64)
        b = torch.randn(D, P * K, dtype=torch.float64)
        per_size = max(1, P // D)
        with torch.no_grad():

            def score(m, X=X, per_size=per_size):
                return cumulative_score(m, X, score_method="sweep", score_masks=per_size, random_state=0)

            def matmul(a=a, b=b):
                return a @ b

            functions = [matmul, partial(score, before), partial(score, per_mask), partial(score, module)]
            t_mm, t_before, t_per_mask, t_after = interleaved_minimum(functions, args.repeats)
            reference = score(before)
            diff = max(float((score(m) - reference).abs().max()) for m in (per_mask, module))
            torch.set_num_threads(os.cpu_count())
            wall_clock = interleaved_minimum([matmul, partial(score, module)], args.repeats, time.perf_counter)
            wall.append((D, K, *wall_clock))
            torch.set_num_threads(1)
        rows.append((D, K, t_mm, t_before, t_per_mask, t_after))
        print(
            f"{D:>4} {K:>3} {t_mm:>9.4f} {t_before:>9.4f} {t_per_mask:>10.4f} {t_after:>9.4f} "
            f"{t_mm / t_before:>7.1%} {t_mm / t_per_mask:>8.1%} {t_mm / t_after:>7.1%} "
            f"{t_before / t_after:>7.2f}x {diff:>10.1e}"
        )
    print(f"\nwall time, {os.cpu_count()} threads:")
    print(f"{'D':>4} {'K':>3} {'matmul s':>9} {'after s':>9} {'after':>7}")
    for D, K, w_mm, w_after in wall:
        print(f"{D:>4} {K:>3} {w_mm:>9.4f} {w_after:>9.4f} {w_mm / w_after:>7.1%}")

    print(
        f"\n{'D':>4} {'K':>3} {'dense s/mask':>13} {'skmpt s/mask':>13} {'speed-up':>9} {'max |diff|':>10}"
        "   masks: two sorts, one sort"
    )
    for D, K in [(256, 8), (512, 16), (512, 2)]:
        module, X = ppca_module(D, K, n_samples=n)
        masks = uniform_size_masks(args.dense_masks, D, random_state=0)
        many = uniform_size_masks(P, D, random_state=1)
        sizes = many.sum(-1)
        with torch.no_grad():
            dense = dense_masked_log_prob_sum(module, X, masks)
            diff = float((dense - masked_log_prob_sum(module, X, masks)).abs().max())
            t_dense, t_fast = interleaved_minimum(
                [partial(dense_masked_log_prob_sum, module, X, masks), partial(masked_log_prob_sum, module, X, many)],
                max(1, args.repeats // 2),
            )
        g = torch.Generator()
        t_two, t_one = interleaved_minimum(
            [partial(two_sort_masks, sizes, D, g), partial(uniform_size_masks, P, D, random_state=g)], args.repeats
        )
        t_dense, t_fast = t_dense / len(masks), t_fast / len(many)
        print(
            f"{D:>4} {K:>3} {t_dense:>13.3e} {t_fast:>13.3e} {t_dense / t_fast:>8.0f}x {diff:>10.1e}   "
            f"{t_two * 1e3:.1f} ms, {t_one * 1e3:.1f} ms"
        )
    return rows


if __name__ == "__main__":
    sys.exit(main() and 0)
