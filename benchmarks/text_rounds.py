"""Variance of the budgeted estimator on long continuations, in one request and in rounds, against LLaDA's.

A continuation of more than a dozen tokens has too many masks to enumerate (the tables of
``text_estimator_variance.py``), so this script reads its forward passes from a simulated model:
each masked token's log-probability is its own difficulty (drawn once), lowered by 0.05 nats for
every other masked token, plus independent noise of standard deviation 0.3. For each length and
budget, :class:`skmpt.text.estimation.BudgetedEstimator` is repeated with ``--seeds`` seeds with
``score_method="stratified"`` (LLaDA's estimator, skmpt's rounding) and ``"auto"`` (the default),
once as one request and once in rounds (``target_se`` too small to reach: the rounds of
``target_se`` and of a question's choices with ``adaptive=True``, ``round_passes=16``), and the
ratio of the two variances is printed (above 1: ``auto`` spreads less at the same passes).

Example::

    python benchmarks/text_rounds.py --seeds 200
"""

import argparse

import numpy as np
import torch

from skmpt.text import EncodedTexts
from skmpt.text.estimation import BudgetedEstimator


class SimulatedModel:
    """The runner of the module docstring's model over ``length`` tokens; ``seed`` draws its noise."""

    def __init__(self, length, seed):
        self.difficulty = np.random.default_rng(0).normal(-2.0, 1.0, length)
        self.rng = np.random.default_rng(seed)

    def run_copies(self, encoded, copies, *, per_target=False, progress=None):
        found = []
        for masked, _ in copies:
            masked = masked.numpy()
            values = self.difficulty - 0.05 * masked.sum(1, keepdims=True) + 0.3 * self.rng.normal(size=masked.shape)
            values = np.where(masked, values, np.nan)
            found.append(values if per_target else np.nansum(values, 1))
        return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="12:128,20:128,32:128,40:256,64:256",
                        help="comma-separated tokens:forward-passes (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=200, help="repeats of each estimator (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        cases = [tuple(map(int, case.split(":"))) for case in args.cases.split(",")]
    except ValueError:
        cases = []
    if not cases or any(len(case) != 2 or case[0] < 2 or case[1] < 3 for case in cases):
        parser.error(f"--cases must be tokens:passes pairs with at least 2 tokens and 3 passes; got {args.cases!r}")
    if args.seeds < 2:
        parser.error(f"--seeds must be at least 2 (a variance); got {args.seeds}")
    torch.set_num_threads(1)
    print(f"{'tokens':>6}  {'passes':>6}  {'mode':6}  {'var LLaDA':>9}  {'var auto':>9}  LLaDA / auto")
    for length, budget in cases:
        encoded = EncodedTexts([torch.zeros(length + 2, dtype=torch.long)], [torch.arange(1, length + 1)])
        for mode, target_se in (("single", None), ("rounds", 1e-9)):
            variance = {}
            for method in ("stratified", "auto"):
                estimates = [BudgetedEstimator(SimulatedModel(length, seed), score_method=method,
                                               max_forward_passes=budget, target_se=target_se,
                                               seed=seed).estimate(encoded, ["k"])[0].log_likelihood
                             for seed in range(args.seeds)]
                variance[method] = np.var(estimates, ddof=1)
            print(f"{length:>6}  {budget:>6}  {mode:6}  {variance['stratified']:9.4f}  {variance['auto']:9.4f}  "
                  f"{variance['stratified'] / variance['auto']:.2f}", flush=True)


if __name__ == "__main__":
    main()
