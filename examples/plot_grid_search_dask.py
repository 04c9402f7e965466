"""
=====================================================================
Grid search over masking rates and latent sizes on a dask cluster
=====================================================================

A grid over the training masking rate and ``n_components`` is a set of independent fits:
exactly what joblib hands to a cluster. Here :class:`~sklearn.model_selection.GridSearchCV`
fits :class:`skmpt.MaskedPPCA` on data drawn from a PPCA with ``K = 3`` latent dimensions,
each fit in a worker process of a :class:`dask.distributed.LocalCluster` (one torch thread per
worker, which dask sets), through ``joblib.parallel_backend("dask")``.

Every fit is scored by its cumulative MPT estimate of the log-marginal likelihood, whatever
the rate it was trained with, so scores of different rates are comparable and the search can
choose both at once. The scores are the same, to the last bit, as with ``n_jobs=1``: a fit's
result depends on its ``random_state``, not on the process that runs it.

Give ``--scheduler-address`` to use a running cluster (``dask scheduler`` and ``dask worker``
on several machines) instead of a local one. Without dask installed (``pip install
"skmpt[distributed]"``) the script says so and runs the search with joblib's own processes.
Run ``python examples/plot_grid_search_dask.py --help`` for options.
"""

import argparse
import contextlib
import time

import joblib
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402

from skmpt import MaskedPPCA  # noqa: E402
from skmpt.datasets import make_ppca  # noqa: E402


@contextlib.contextmanager
def dask_backend(n_workers, scheduler_address):
    """joblib's dask backend on a local cluster, or on the cluster at ``scheduler_address``;
    joblib's default processes when dask is not installed."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        print('dask.distributed is not installed (pip install "skmpt[distributed]"): running the search '
              "with joblib's local processes instead.")
        yield "joblib processes"
        return
    with contextlib.ExitStack() as stack:
        if scheduler_address is None:
            cluster = stack.enter_context(
                LocalCluster(n_workers=n_workers, processes=True, threads_per_worker=1, dashboard_address=None)
            )
            scheduler_address = cluster.scheduler_address
        client = stack.enter_context(Client(scheduler_address))
        stack.enter_context(joblib.parallel_backend("dask"))
        yield f"dask cluster at {scheduler_address} ({len(client.scheduler_info()['workers'])} workers)"


def main(argv=None):
    parser = argparse.ArgumentParser(description="GridSearchCV of MaskedPPCA over masking rates and K on dask.")
    parser.add_argument("--n-samples", type=int, default=600, help="samples of the PPCA data (default 600)")
    parser.add_argument("--n-features", type=int, default=10)
    parser.add_argument("--max-epochs", type=int, default=300, help="epoch budget of each fit (default 300)")
    parser.add_argument("--n-workers", type=int, default=2, help="workers of the local cluster (default 2)")
    parser.add_argument("--scheduler-address", default=None, help="a running dask scheduler, e.g. tcp://host:8786")
    parser.add_argument("--output", default="grid_search_dask.png")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    X = make_ppca(args.n_samples, args.n_features, 3, random_state=args.seed).data
    rates = [0.15, 0.5, "uniform"]
    grid = {"mask_rate": rates, "n_components": [1, 2, 3, 4, 5]}
    search = GridSearchCV(
        MaskedPPCA(max_epochs=args.max_epochs, score_masks=10, random_state=args.seed), grid, cv=3, n_jobs=-1
    )
    start = time.perf_counter()
    with dask_backend(args.n_workers, args.scheduler_address) as where:
        search.fit(X)
    seconds = time.perf_counter() - start
    n_fits = 3 * len(search.cv_results_["params"])
    print(f"{n_fits} fits on a {where} in {seconds:.1f} s")
    print(f"best parameters: {search.best_params_} (the data have K = 3)")

    # mean_test_score in the grid's order: mask_rate varies slowest.
    scores = search.cv_results_["mean_test_score"].reshape(len(rates), -1)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for rate, row in zip(rates, scores, strict=True):
        label = "uniform sizes" if rate == "uniform" else f"rate {rate:g}"
        ax.plot(grid["n_components"], row, marker="o", label=label)
    ax.set(xlabel="n_components (K)", ylabel="held-out MPT score, nats/sample",
           title="GridSearchCV on dask: masking rate x K", xticks=grid["n_components"])
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"figure: {args.output}")
    for rate, row in zip(rates, scores, strict=True):
        print(f"  mask_rate={rate!s:<8} " + "  ".join(f"K={k}: {s:8.3f}" for k, s in zip(grid["n_components"], row,
                                                                                           strict=True)))
    return search


if __name__ == "__main__":
    main()
