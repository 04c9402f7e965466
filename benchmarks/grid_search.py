"""The design's headline grid: GridSearchCV over MaskedPPCA's n_components x mask_rate, beside PCA's.

GridSearchCV(MaskedPPCA(random_state=0), {"n_components": [1..5], "mask_rate": ["uniform",
0.15, 0.5]}, cv=3, n_jobs=2) on make_ppca(600, 12, 3, noise_variance=0.5, random_state=0).data;
PCA's grid over the same n_components beside it. Printed, for this checkout and (with
``--baseline REF``) for the commit REF, each in a fresh process so the first grid starts its loky
workers:

- wall time and choice of the grid with cold workers (the first grid of the process: the
  workers start and import torch, scikit-learn and skmpt) and with warm workers (a second,
  identical grid); the start-up is their difference, and a worker's imports are timed alone;
- the sum over the grid's fits of their fit and score times (cv_results_), and that sum over
  n_jobs: the wall time that fitting takes with perfect parallelism;
- CPU time with one thread of one fit of MaskedPPCA(3) on 400 x 12 (a fold), its epochs and
  time per epoch; the same for MaskedFactorAnalysis(3) and MaskedGaussianMixture(3);
- where a training epoch's CPU time goes (mask drawing, forward, backward, Adam, the stopping
  rule's forward pass) at D=12, K=3 and at D=256, K=8 (200 samples per step, 4 masks each).

Run from the repository root::

    python benchmarks/grid_search.py                      # this checkout
    python benchmarks/grid_search.py --baseline 2a2841d   # and the commit before issue 24, side by side
    python benchmarks/grid_search.py --quick              # no warm grid, one round, fewer repeats

The grids run once per checkout (wall time, both cores); the single fits and the epoch parts
(CPU time, one thread, the minimum of ``--repeats``) run ``--rounds`` times, the checkouts in
turn, and the minimum is kept.

``--batch-size N`` runs the grid with that batch_size (an optimisation change, to measure only).
``--solver moments`` runs the grid and the single PPCA and FA fits with that ``solver`` (the
folds have 400 rows, below the 1,000 from which ``solver="auto"`` trains from moments); not with
``--baseline`` (a commit before the parameter would refuse it).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRID = {"n_components": [1, 2, 3, 4, 5], "mask_rate": ["uniform", 0.15, 0.5]}
WORKER_IMPORTS = "import sklearn.model_selection, skmpt.estimators"


def _grid(estimator, grid, n_jobs):
    from sklearn.model_selection import GridSearchCV

    start = time.perf_counter()
    search = GridSearchCV(estimator, grid, cv=3, n_jobs=n_jobs).fit(_data())
    wall = time.perf_counter() - start
    results = search.cv_results_
    fitting = float((results["mean_fit_time"] + results["mean_score_time"]).sum() * 3)
    return {"wall": wall, "choice": search.best_params_, "fits_seconds": fitting}


def _data():
    from skmpt.datasets import make_ppca

    return make_ppca(600, 12, 3, noise_variance=0.5, random_state=0).data


def _import_seconds():
    """Seconds a fresh interpreter takes to import what a loky worker imports (the minimum of 3)."""
    code = f"import time; t = time.perf_counter(); {WORKER_IMPORTS}; print(time.perf_counter() - t)"
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True) for _ in range(3)]
    return min(float(run.stdout) for run in runs)


def _one_fit(estimator_class, repeats, **params):
    """CPU seconds (one thread, the minimum of ``repeats``) of one fit on a 400-row fold; epochs."""
    import torch

    torch.set_num_threads(1)
    X = _data()[:400]
    best, epochs = float("inf"), None
    for _ in range(repeats):
        estimator = estimator_class(random_state=0, **params)
        start = time.process_time()
        estimator.fit(X)
        best = min(best, time.process_time() - start)
        epochs = estimator.n_iter_
    return {"seconds": best, "epochs": epochs, "ms_per_epoch": 1e3 * best / epochs}


def _epoch_parts(n_features, n_components, repeats, n_samples=200, n_masks=4):
    """CPU milliseconds (one thread) of each part of a training step, and of the stopping pass."""
    import torch

    from skmpt.masks import uniform_size_masks
    from skmpt.models import PPCAModule
    from skmpt.objectives import mpt_objective

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    module = PPCAModule(
        0.3 * torch.randn(n_components, n_features, generator=g, dtype=torch.float64),
        torch.zeros(n_features, dtype=torch.float64),
        0.5,
    )
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01)  # the trainer's own choice of kernel is timed in fits
    X = torch.randn(n_samples, n_features, generator=g, dtype=torch.float64)
    masks = uniform_size_masks((n_samples, n_masks), n_features, random_state=0)
    state = {}

    def draw():
        uniform_size_masks((n_samples, n_masks), n_features, random_state=g)

    def forward():
        state["loss"] = -mpt_objective(module, X, masks).mean()

    def backward():
        optimizer.zero_grad()
        state["loss"].backward()

    def stopping():
        with torch.no_grad():
            mpt_objective(module, X[: n_samples // 2], masks[: n_samples // 2])

    parts = {
        "masks": draw,
        "forward": forward,
        "backward": backward,
        "adam": optimizer.step,
        "stopping (half)": stopping,
    }
    best = {name: float("inf") for name in parts}
    for _ in range(repeats):
        for name, part in parts.items():  # in order: backward needs forward's graph
            start = time.process_time()
            part()
            best[name] = min(best[name], time.process_time() - start)
    return {name: 1e3 * seconds for name, seconds in best.items()}


def measure(args):
    """The figures of ``args.section`` ("grids" or "fits") for the skmpt first on sys.path."""
    from sklearn.decomposition import PCA

    from skmpt.estimators import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedPPCA

    params = {} if args.batch_size is None else {"batch_size": args.batch_size}
    if args.solver is not None:
        params["solver"] = args.solver
    if args.section == "grids":
        out = {"worker_imports": _import_seconds()}
        out["cold"] = _grid(MaskedPPCA(random_state=0, **params), GRID, args.n_jobs)  # starts the workers
        if not args.quick:
            out["warm"] = _grid(MaskedPPCA(random_state=0, **params), GRID, args.n_jobs)
        out["pca"] = _grid(PCA(), {"n_components": GRID["n_components"]}, args.n_jobs)  # on warm workers
        return out
    repeats = 2 if args.quick else args.repeats
    fits = {
        "MaskedPPCA(3)": _one_fit(MaskedPPCA, repeats, n_components=3, **params),
        "MaskedFactorAnalysis(3)": _one_fit(MaskedFactorAnalysis, repeats, n_components=3, **params),
        "MaskedGaussianMixture(3)": _one_fit(
            MaskedGaussianMixture, repeats, n_components=3, **{k: v for k, v in params.items() if k != "solver"}
        ),
    }
    parts = {f"D={d}, K={k}": _epoch_parts(d, k, 5 if args.quick else 20) for d, k in ((12, 3), (256, 8))}
    return {"fits": fits, "epoch_parts": parts}


def _run(checkout, args, section):
    """``measure`` in a fresh interpreter that imports skmpt from ``checkout`` (its workers too)."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "SKMPT_BENCHMARK_CHECKOUT": str(checkout)}
    command = [
        sys.executable,
        __file__,
        "--json",
        section,
        "--n-jobs",
        str(args.n_jobs),
        "--repeats",
        str(args.repeats),
    ]
    command += ["--quick"] * args.quick + ([] if args.batch_size is None else ["--batch-size", str(args.batch_size)])
    command += [] if args.solver is None else ["--solver", args.solver]
    run = subprocess.run(command, env=env, capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"the run on {checkout} failed:\n{run.stderr}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _minimum(a, b):
    """Element-wise minimum of two nested dicts of the same keys (other leaves from ``b``)."""
    if isinstance(a, dict):
        return {key: _minimum(a[key], b[key]) for key in b}
    return min(a, b) if isinstance(b, float) else b


def _measure_all(checkouts, args):
    """Grids once per checkout; single fits and epoch parts in ``--rounds`` interleaved runs, their minimum."""
    results = {name: _run(path, args, "grids") for name, path in checkouts.items()}
    best = {}
    for _ in range(1 if args.quick else args.rounds):
        for name, path in checkouts.items():
            run = _run(path, args, "fits")
            best[name] = _minimum(best[name], run) if name in best else run
    return {name: {**results[name], **best[name]} for name in checkouts}


def _report(results):
    names = list(results)
    print(f"{'':46s}" + "".join(f"{name:>26s}" for name in names))

    def row(label, values):
        print(f"{label:46s}" + "".join(f"{value:>26s}" for value in values))

    first = results[names[0]]
    row("a worker's imports (s, fresh interpreter)", [f"{r['worker_imports']:.2f}" for r in results.values()])
    row(
        "PCA grid: wall s / choice",
        [f"{r['pca']['wall']:.3f} {r['pca']['choice']['n_components']}" for r in results.values()],
    )
    for key, label in (("cold", "cold workers (first grid)"), ("warm", "warm workers (second grid)")):
        if key not in first:
            continue
        row(f"MaskedPPCA grid, {label}: wall s", [f"{r[key]['wall']:.2f}" for r in results.values()])
        row(
            "  choice",
            [f"{r[key]['choice']['n_components']}, {r[key]['choice']['mask_rate']}" for r in results.values()],
        )
        row(
            "  fits + scores: sum s (/ n_jobs)",
            [f"{r[key]['fits_seconds']:.1f} ({r[key]['fits_seconds'] / 2:.1f})" for r in results.values()],
        )
    if "warm" in first:
        row(
            "start-up (cold - warm wall), s", [f"{r['cold']['wall'] - r['warm']['wall']:.2f}" for r in results.values()]
        )
    for name in first["fits"]:
        row(
            f"{name} on 400 x 12: CPU s, epochs, ms/epoch",
            [
                f"{r['fits'][name]['seconds']:.3f}, {r['fits'][name]['epochs']}, {r['fits'][name]['ms_per_epoch']:.2f}"
                for r in results.values()
            ],
        )
    for shape in first["epoch_parts"]:
        for part in first["epoch_parts"][shape]:
            row(
                f"step at {shape}, n=200, 4 masks: {part} ms",
                [f"{r['epoch_parts'][shape][part]:.3f}" for r in results.values()],
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a git commit to measure beside this checkout")
    parser.add_argument("--quick", action="store_true", help="no warm grid, fewer repeats")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="repeats of the single fits and epoch parts")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--solver", choices=["auto", "moments", "minibatch"], default=None)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs of the single fits and epoch parts")
    parser.add_argument("--json", choices=["grids", "fits"], dest="section", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.section:  # the worker of _run: skmpt from the checkout it was given
        sys.path.insert(0, os.environ.get("SKMPT_BENCHMARK_CHECKOUT", str(ROOT)))
        print(json.dumps(measure(args)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        checkouts = {}
        if args.baseline:
            command = ["git", "-C", str(ROOT), "archive", args.baseline, "skmpt"]
            archive = subprocess.run(command, capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
            checkouts[f"before ({args.baseline})"] = tmp
        checkouts["this checkout"] = ROOT
        results = _measure_all(checkouts, args)
    _report(results)


if __name__ == "__main__":
    main()
