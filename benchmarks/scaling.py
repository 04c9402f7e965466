"""How the cost of each estimator grows with D, K, n and the number of masks, from one command.

For each estimator a base configuration is timed while one factor at a time takes three
values; the exponent ``b`` of ``time ~ factor**b`` is the least-squares slope of log time
against log factor. Times are CPU seconds (``time.process_time``, one torch thread, the
minimum of ``--repeats`` calls): ``score`` is ``score_samples`` of a fitted estimator with its
default scoring method, ``epoch`` one training epoch (``fit`` with ``max_epochs=1``, so it
includes the estimator's per-epoch bookkeeping). For MaskedPPCA the cumulative score (the
sweep, ``P = score_masks * D`` shared masks) is also given as a fraction of the rate of a
float64 matmul of the baseline's multiply-add count ``n P D K``.

MLMCurveScorer (a BERT built from a configuration: 2 layers, a 1000-piece WordPiece
vocabulary) is timed the same way with ``D`` the tokens per text, ``K`` the hidden size,
``n`` the number of texts and ``masks`` the sweep's masks per size; it has no epoch.

Last, the exact scores of the tractable models against their closed form (issue 24): for
MaskedPPCA and MaskedFactorAnalysis at (D, K) = (64, 4), (256, 8), (512, 16) and
MaskedGaussianMixture (full and diag) with C = 5 and 10 components at D = 16, 64, 512, on
n = 2000 samples, the CPU time of ``score_samples`` with ``score_method="chain",
score_masks=1`` (one ordering) and ``score_method="sweep", score_masks=1`` (one mask per
size) as multiples of ``log_marginal_likelihood`` on the same data (the baseline, timed in
the same process, interleaved), beside the targets (3x and 5x). ``before`` is the same
estimator with the model module of commit ``BEFORE`` (loaded with ``git show``, the
previous fast paths) through today's objectives; the full mixtures' sweep is not run at
D = 512, nor the previous code's mixture sweep at D > 64 (``-``: hours or tens of GB).
The largest relative difference of the scores from the previous code's is printed too.
The estimators are fitted for one epoch on 200 of the samples (40 at D = 512; the parameters
do not matter for the cost). The differences from the previous code are rounding at the
fitted covariances' condition number: a mixture fitted for one epoch on 200 samples at
D = 64 has covariances of condition number about 3e7, and there the chain of either code
differs from the closed form by about 3e-10 relative.

Rows (``--only rows``): the default fit of every estimator against the number of rows, 1,000 to
1,000,000 (``--max-rows`` limits it), beside scikit-learn's PCA, FactorAnalysis, GaussianMixture
and IterativeImputer, with what each reaches: the mean log-likelihood per sample on 10,000 held-out
rows (the exact one of each fitted model; MaskedVAE's importance-sampled), or for the imputers the
root-mean-square error of their imputations of 10 % of the held-out entries. CPU seconds of one
``fit`` (one thread; the minimum of ``--repeats``), in a table and a JSON file; ``--plot PATH``
draws them on log-log axes (the user guide's figure)::

    python benchmarks/scaling.py --only rows --max-rows 100000 --json rows.json --plot docs/images/scaling_rows.png
    python benchmarks/scaling.py --only rows --min-rows 10000 --max-rows 1000000 --cases MaskedPPCA PCA

After each case run at 10,000 and 100,000 rows, its growth between them. ``--cases`` picks cases by
a part of their names; ``--max-rows 1000000`` adds a million rows.

Ratio (``--only ratio``): the default fit of MaskedPPCA and MaskedFactorAnalysis on 100,000 x 50
rank-5 rows (``--ratio-rows``) as a multiple of PCA's and FactorAnalysis's CPU time, timed in turn
in one process (the minimum of ``--repeats``), with the log-likelihood per sample each reaches.

Grid (``--only grid``): the design's grid, ``GridSearchCV(MaskedPPCA(random_state=0),
{"n_components": [1..5], "mask_rate": ["uniform", 0.15, 0.5]}, cv=3, n_jobs=2)`` on
``make_ppca(600, 12, 3, noise_variance=0.5, random_state=0).data``: wall time with fresh loky
workers (they start and import torch) and again with the same workers, the CPU time of the same
grid with ``n_jobs=1`` in this process, and the size each chooses.

Memory (``--only memory``): the peak resident memory a default ``MaskedPPCA(5).fit`` adds to a process
holding 1,000,000 x 50 rows (``--memory-rows``), with 4 and with 16 masks per row, each in a fresh process.

Dask (``--only dask``): a dask array of ``--dask-rows`` x 50 float32 rows of rank 5 plus noise,
generated chunk by chunk in the workers (``--chunk-rows`` rows per chunk; never held whole
anywhere), on a ``distributed.LocalCluster`` of 2 worker processes of one thread each with
``memory_limit="4GB"``: ``MaskedPPCA(5)`` and ``MaskedFactorAnalysis(5)`` fit it (from its moments,
reduced chunk by chunk) and score it (``score``: ``score_samples`` mapped over the chunks, then
their mean), beside dask-ml's ``PCA(5, svd_solver="tsqr")`` fit on the same array; then the same
array with 10 % of its entries missing (half the rows miss one of five blocks of 10 columns: six
patterns of observed entries, each trained from its moments; dask-ml's PCA takes no NaN), and
``MaskedImputer(MaskedPPCA(5))`` fitted on the collection itself (out of core: its model from the
moments) and writing the imputed array to Parquet. Wall seconds and the peak resident memory of each
worker (sampled every 20 ms during each step, torch and skmpt imported), with each fit's time as a
multiple of dask-ml's; ``--dask-data complete`` runs the complete array only. Needs ``pip install
"skmpt[bench]"`` (dask-ml). dask-ml 2025.1.0's fit gathers the whole array into one task (a
MemoryError at 10^8 rows after 44 minutes); ``--dask-baseline tsqr`` times the same computation
without that task instead. Measured at 4,000,000 and at 10^8 rows (the user guide's scaling page has
the tables)::

    python benchmarks/scaling.py --only dask --dask-rows 4000000
    python benchmarks/scaling.py --only dask --dask-rows 100000000 --chunk-rows 500000 --dask-baseline tsqr

    python benchmarks/scaling.py [--repeats 2] [--quick] [--only exact|rows|ratio|grid|memory|dask] [--max-rows N]
"""

import argparse
import copy
from functools import partial
import importlib.util
import json
from pathlib import Path
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
from sklearn.base import clone
import torch

from _common import interleaved_minimum
from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedImputer, MaskedLinearVAE, MaskedPPCA, MaskedVAE


def data(estimator, n, D, K, rng):
    Z = rng.randn(n, K)
    X = Z @ rng.randn(K, D) + 0.5 * rng.randn(n, D)
    if estimator is MaskedLinearVAE:
        return (X > 0).astype(float)
    return X


#: estimator, fixed parameters, base (D, K, n, masks), the values each factor takes, masks parameter
CONFIGS = [
    (
        MaskedPPCA, {}, dict(D=256, K=8, n=512, masks=1),
        dict(D=[128, 256, 512], K=[4, 8, 16], n=[256, 512, 1024], masks=[1, 2, 4]),
    ),
    (
        MaskedLinearVAE, {}, dict(D=64, K=2, n=1024, masks=1),
        dict(D=[32, 64, 128], K=[1, 2, 3], n=[512, 1024, 2048], masks=[1, 2, 4]),
    ),
    (
        MaskedFactorAnalysis, {}, dict(D=64, K=4, n=512, masks=1),
        dict(D=[32, 64, 128], K=[2, 4, 8], n=[256, 512, 1024], masks=[1, 2, 4]),
    ),
    (
        MaskedGaussianMixture, {}, dict(D=16, K=4, n=512, masks=1),
        dict(D=[8, 16, 32], K=[2, 4, 8], n=[256, 512, 1024], masks=[1, 2, 4]),
    ),
    (
        MaskedVAE,
        {"hidden_layer_sizes": (128,), "n_particles": 8, "n_lml_samples": 10},
        dict(D=32, K=4, n=512, masks=1),
        dict(D=[16, 32, 64], K=[2, 4, 8], n=[256, 512, 1024], masks=[1, 2, 4]),
    ),
]


def measure(estimator, fixed, D, K, n, masks, repeats, rng):
    X = data(estimator, n, D, K, rng)
    params = dict(fixed, n_components=K, score_masks=masks, random_state=0, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (epoch,) = interleaved_minimum([lambda: estimator(max_epochs=1, **params).fit(X)], repeats)
        fitted = estimator(max_epochs=1, **params).fit(X)
        with torch.no_grad():
            (score,) = interleaved_minimum([partial(fitted.score_samples, X)], repeats)
    return score, epoch


def mlm_setup():
    """A WordPiece tokenizer and a pool of WordNet words to cut texts of a given length from."""
    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    sentences = load_wordnet_sentences()
    return make_wordpiece_tokenizer(sentences[:5000], vocab_size=1000), " ".join(sentences[5000:8000]).split()


def mlm_texts(tokenizer, words, n, length):
    """``n`` texts of about ``length`` tokens each, consecutive runs of ``words``."""
    texts, start = [], 0
    for _ in range(n):
        stop = start + 1
        while len(tokenizer(" ".join(words[start:stop]), add_special_tokens=False)["input_ids"]) < length:
            stop += 1
        texts.append(" ".join(words[start:stop]))
        start = stop
    return texts


def measure_mlm(tokenizer, words, D, K, n, masks, repeats):
    from transformers import BertConfig, BertForMaskedLM

    from skmpt import MLMCurveScorer

    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=K, num_hidden_layers=2, num_attention_heads=max(1, K // 32),
        intermediate_size=4 * K, max_position_embeddings=512,
    )
    torch.manual_seed(0)
    model = BertForMaskedLM(config).eval()
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, score_masks=masks, random_state=0, device="cpu").fit()
    texts = mlm_texts(tokenizer, words, n, D)
    return interleaved_minimum([partial(scorer.score_samples, texts)], repeats)[0]


#: The last commit before the exact scores at the cost of the closed form (issue 24).
BEFORE = "2a2841d"

#: (estimator, fixed parameters, D, K or C, whether the previous code can run the sweep here)
EXACT_CONFIGS = [
    *[(MaskedPPCA, {}, D, K, True) for D, K in [(64, 4), (256, 8), (512, 16)]],
    *[(MaskedFactorAnalysis, {}, D, K, True) for D, K in [(64, 4), (256, 8), (512, 16)]],
    *[
        (MaskedGaussianMixture, {"covariance_type": kind}, D, C, D <= 64)
        for kind in ("full", "diag")
        for C in (5, 10)
        for D in (16, 64, 512)
    ],
]


def load_before(path):
    """The module ``skmpt/models/<path>`` as it was at commit ``BEFORE``, imported in ``skmpt.models``."""
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(
        ["git", "show", f"{BEFORE}:skmpt/models/{path}"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    file = Path(tempfile.mkdtemp()) / path
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(f"skmpt.models.before_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def with_module_class(fitted, cls):
    """A copy of ``fitted`` whose module is an instance of ``cls`` with the same parameters."""
    other = copy.deepcopy(fitted)
    other.module_.__class__ = cls
    return other


def exact_scores(repeats, quick, rng):
    """The ratios of the chain and the sweep to the closed form, after and before."""
    before = {
        "linear_gaussian": load_before("linear_gaussian.py"),
        "gaussian_mixture": load_before("gaussian_mixture.py"),
    }
    n = 2000
    print(f"\nExact scores against the closed form: n={n}, CPU seconds, 1 thread, minimum of {repeats}; "
          f"before = {BEFORE}")
    print("| model | D | K or C | log_marginal_likelihood s | chain | before | sweep | before | target "
          "| max rel. diff |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for estimator, fixed, D, K, sweep_before in EXACT_CONFIGS:
        if quick and (D > 64 or K > 5):
            continue
        X = data(estimator, n, D, K, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # A full covariance at D = 512 trains on per-sample conditioning sets: few rows.
            rows = 200 if D <= 64 else 40
            fitted = estimator(n_components=K, max_epochs=1, random_state=0, device="cpu", **fixed).fit(X[:rows])
        old_module = before[type(fitted.module_).__module__.rsplit(".", 1)[-1]]
        scorers = {}
        for method in ("chain", "sweep"):
            with warnings.catch_warnings():  # the score's options act at fit: the same fit, scored by `method`
                warnings.simplefilter("ignore")
                now = clone(fitted).set_params(score_method=method, score_masks=1).fit(X[:rows])
            scorers[method] = now
            scorers[method, "before"] = with_module_class(now, getattr(old_module, type(fitted.module_).__name__))
        functions = {"lml": partial(fitted.log_marginal_likelihood, X)}
        for key, scorer in scorers.items():
            if key == ("sweep", "before") and not sweep_before:
                continue
            if key == "sweep" and fixed.get("covariance_type") == "full" and D > 64:
                continue  # tens of GB: one D x D factor per mask and component
            functions[key] = partial(scorer.score_samples, X)
        with torch.no_grad():
            times = dict(zip(functions, interleaved_minimum(list(functions.values()), repeats), strict=True))
            differences = []
            for method in ("chain", "sweep"):
                if (method, "before") in functions and method in functions:
                    new, old = scorers[method].score_samples(X), scorers[method, "before"].score_samples(X)
                    differences.append(float(np.max(np.abs(new - old) / np.abs(old))))
        base = times["lml"]

        def ratio(key, base=base, times=times):
            return f"{times[key] / base:.1f}x" if key in times else "-"

        name = estimator.__name__ + (f" {fixed['covariance_type']}" if fixed else "")
        print(
            f"| {name} | {D} | {K} | {base:.4f} | {ratio('chain')} | {ratio(('chain', 'before'))} | "
            f"{ratio('sweep')} | {ratio(('sweep', 'before'))} | 3x, 5x | "
            f"{max(differences, default=float('nan')):.1e} |",
            flush=True,
        )


def slope(values, times):
    return np.polyfit(np.log(values), np.log(times), 1)[0]


def _linear_data(n, rng, D=50, K=5):
    """Rows of a rank-``K`` table of ``D`` features with noise, and the same mixing for held-out rows."""
    mixing = np.random.RandomState(1).randn(K, D)
    return rng.randn(n, K) @ mixing + 0.5 * rng.randn(n, D)


def _mixture_data(n, rng, D=10):
    centres = np.random.RandomState(1).randn(3, D) * 3
    return centres[rng.randint(3, size=n)] + rng.randn(n, D)


def _binary_data(n, rng, D=20):
    return (_linear_data(n, rng, D=D, K=2) > 0).astype(float)


def _with_holes(X, rng, rate=0.1):
    holes = X.copy()
    holes[rng.rand(*X.shape) < rate] = np.nan
    return holes


def _imputation_rmse(imputer, X, rng):
    holes = _with_holes(X, rng)
    missing = np.isnan(holes)
    completed = imputer.impute(holes) if hasattr(imputer, "impute") else imputer.transform(holes)
    return float(np.sqrt(np.mean((completed[missing] - X[missing]) ** 2)))


def rows_cases():
    """(name, make data, make estimator, what it reaches on held-out rows) for the rows table."""
    from sklearn.decomposition import PCA, FactorAnalysis
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer
    from sklearn.mixture import GaussianMixture

    def lml(estimator, X, rng):
        return float(np.mean(estimator.log_marginal_likelihood(X)))

    def sk_score(estimator, X, rng):
        return float(estimator.score(X))

    cpu = {"device": "cpu", "random_state": 0}
    return [
        ("PCA (scikit-learn)", _linear_data, lambda: PCA(5), sk_score),
        ("MaskedPPCA", _linear_data, lambda: MaskedPPCA(5, **cpu), lml),
        ("FactorAnalysis (scikit-learn)", _linear_data, lambda: FactorAnalysis(5, random_state=0), sk_score),
        ("MaskedFactorAnalysis", _linear_data, lambda: MaskedFactorAnalysis(5, **cpu), lml),
        ("GaussianMixture (scikit-learn, EM)", _mixture_data, lambda: GaussianMixture(3, random_state=0), sk_score),
        ("MaskedGaussianMixture", _mixture_data, lambda: MaskedGaussianMixture(3, **cpu), lml),
        ("MaskedLinearVAE", _binary_data, lambda: MaskedLinearVAE(2, **cpu), lml),
        ("MaskedVAE", _mixture_data, lambda: MaskedVAE(2, **cpu), lml),
        ("IterativeImputer (scikit-learn)", lambda n, rng: _with_holes(_linear_data(n, rng), rng),
         lambda: IterativeImputer(random_state=0), None),
        ("MaskedPPCA on 10 % missing", lambda n, rng: _with_holes(_linear_data(n, rng), rng),
         lambda: MaskedPPCA(5, **cpu), None),
        ("MaskedImputer(MaskedPPCA) on 10 % missing", lambda n, rng: _with_holes(_linear_data(n, rng), rng),
         lambda: MaskedImputer(MaskedPPCA(5, **cpu), random_state=0), None),
    ]


def rows_table(max_rows, repeats, json_path=None, plot_path=None, only=None, min_rows=1_000):
    """Fit time against rows for every estimator beside scikit-learn's (see the module docstring);
    ``only``: the cases whose name holds one of these strings; the growth from 10,000 to 100,000 rows
    after each case that ran both."""
    sizes = [n for n in (1_000, 10_000, 100_000, 1_000_000) if min_rows <= n <= max_rows]
    results = {}
    with warnings.catch_warnings():  # torch's first-call set-up is not the first case's cost
        warnings.simplefilter("ignore")
        MaskedPPCA(2, device="cpu").fit(_linear_data(1000, np.random.RandomState(0)))
    print(f"torch {torch.__version__}, 1 thread, CPU seconds of fit, minimum of {repeats}")
    print("| estimator | rows | fit s | reaches |")
    print("| --- | --- | --- | --- |")
    for name, make, build, reached in rows_cases():
        if only and not any(part in name for part in only):
            continue
        for n in sizes:
            X = make(n, np.random.RandomState(n))
            held_out = (_linear_data if reached is None else make)(10_000, np.random.RandomState(7))
            times = []
            for _ in range(repeats):
                estimator = build()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    start = time.process_time()
                    estimator.fit(X)
                    times.append(time.process_time() - start)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = reached(estimator, held_out, None) if reached else _imputation_rmse(
                    estimator, held_out, np.random.RandomState(8))
            unit = "nats/sample" if reached else "RMSE"
            results.setdefault(name, []).append({"rows": n, "seconds": min(times), "reaches": value, "unit": unit})
            print(f"| {name} | {n:,} | {min(times):.3g} | {value:.4f} {unit} |", flush=True)
        seconds = {r["rows"]: r["seconds"] for r in results.get(name, [])}
        if 10_000 in seconds and 100_000 in seconds:
            print(f"| {name} | growth 10k -> 100k | {seconds[100_000] / seconds[10_000]:.2f}x | |", flush=True)
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=1))
    if plot_path:
        plot_rows(results, plot_path)
    return results


def plot_rows(results, path):
    """Log-log plot of fit time against rows, one line per estimator (scikit-learn's dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 4.5))
    for name, rows in results.items():
        style = "--" if "scikit-learn" in name else "-"
        axes.loglog([r["rows"] for r in rows], [r["seconds"] for r in rows], style, marker="o", label=name)
    axes.set_xlabel("rows")
    axes.set_ylabel("CPU seconds of fit (one thread)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def _ratio_data(n):
    """The ratio's table: rank 5 in 50 features plus unit noise, from ``default_rng(0)``."""
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, 5)) @ rng.standard_normal((5, 50)) + rng.standard_normal((n, 50))


def ratio_table(n_rows, repeats):
    """The default fit of MaskedPPCA and MaskedFactorAnalysis as a multiple of scikit-learn's PCA and
    FactorAnalysis on the same rows, timed in turn in this process, and the log-likelihood per sample
    each reaches on the training rows (the maximum-likelihood fits' is the optimum)."""
    from sklearn.decomposition import PCA, FactorAnalysis

    X = _ratio_data(n_rows)
    print(f"{n_rows:,} x 50, rank 5; torch {torch.__version__}, 1 thread, CPU s, minimum of {repeats} interleaved")
    print("| estimator | fit s | baseline | baseline s | ratio | log-likelihood | baseline's | difference |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for masked, baseline in [(MaskedPPCA(5), PCA(5)), (MaskedFactorAnalysis(5), FactorAnalysis(5, random_state=0))]:
        def fit(estimator, key, fitted):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fitted[key] = clone(estimator).fit(X)

        clone(masked).fit(X[:2000])  # torch's first-call set-up is not the fit's cost
        fitted = {}
        functions = [partial(fit, masked, "mine", fitted), partial(fit, baseline, "theirs", fitted)]
        mine, theirs = interleaved_minimum(functions, repeats)
        reached = float(np.mean(fitted["mine"].log_marginal_likelihood(X)))
        optimum = float(fitted["theirs"].score(X))
        print(
            f"| {type(masked).__name__} | {mine:.4f} | {type(baseline).__name__} | {theirs:.4f} | "
            f"{mine / theirs:.1f}x | {reached:.6f} | {optimum:.6f} | {reached - optimum:.2e} |",
            flush=True,
        )


def grid_table():
    """The design's grid (see the module docstring): wall seconds with fresh and with the same loky
    workers (``n_jobs=2``), CPU seconds with ``n_jobs=1`` in this process, and what each chooses."""
    from sklearn.model_selection import GridSearchCV

    from skmpt.datasets import make_ppca

    X = make_ppca(600, 12, 3, noise_variance=0.5, random_state=0).data
    grid = {"n_components": [1, 2, 3, 4, 5], "mask_rate": ["uniform", 0.15, 0.5]}
    print(f"GridSearchCV(MaskedPPCA(random_state=0), {grid}, cv=3) on 600 x 12 of rank 3")
    print("| run | wall s | CPU s (this process) | chosen |")
    print("| --- | --- | --- | --- |")
    for run, n_jobs in [("n_jobs=2, fresh workers", 2), ("n_jobs=2, same workers", 2), ("n_jobs=1", 1)]:
        wall, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            search = GridSearchCV(MaskedPPCA(random_state=0), grid, cv=3, n_jobs=n_jobs).fit(X)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"| {run} | {wall:.2f} | {cpu:.2f} | {search.best_params_} |", flush=True)


MEMORY_CODE = """
import resource, sys, time
import numpy as np, torch
torch.set_num_threads(1)
from skmpt import MaskedPPCA
n_rows, n_masks = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
mixing, X = rng.standard_normal((5, 50)), np.empty((n_rows, 50))
for start in range(0, n_rows, 10_000):  # in chunks: the process's peak before the fit is the data's
    rows = X[start : start + 10_000]
    rows[:] = rng.standard_normal((len(rows), 5)) @ mixing + rng.standard_normal((len(rows), 50))
MaskedPPCA(5).fit(X[:1000])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.process_time()
MaskedPPCA(5, n_masks=n_masks).fit(X)
seconds = time.process_time() - start
print(X.nbytes / 2**20, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 2**10, seconds)
"""


def memory_table(n_rows):
    """Peak resident memory that ``MaskedPPCA(5, n_masks=...).fit`` adds to a process holding ``n_rows`` x 50
    rows, for 4 and 16 masks per row (each in a fresh process: the peak is the process's own)."""
    print(f"MaskedPPCA(5).fit on {n_rows:,} x 50 (default solver), peak RSS over the data's, one thread")
    print("| n_masks | data MiB | peak RSS added MiB | fit CPU s |")
    print("| --- | --- | --- | --- |")
    for n_masks in (4, 16):
        run = subprocess.run([sys.executable, "-c", MEMORY_CODE, str(n_rows), str(n_masks)], capture_output=True,
                             text=True, check=True)
        data, added, seconds = map(float, run.stdout.split())
        print(f"| {n_masks} | {data:.0f} | {added:.0f} | {seconds:.2f} |", flush=True)


#: The dask table's data: 50 features of rank 5 plus noise; the missing entries' blocks of columns.
DASK_FEATURES, DASK_RANK, DASK_BLOCKS = 50, 5, 5


def _dask_chunk(seed, n_rows, missing, block_id=None):
    """One chunk of the dask table's rows, from its own seed (the chunk's index)."""
    rng = np.random.default_rng([seed, block_id[0]])
    loadings = np.random.default_rng(seed).standard_normal((DASK_RANK, DASK_FEATURES))
    X = (rng.standard_normal((n_rows, DASK_RANK)) @ loadings + 0.5 * rng.standard_normal((n_rows, DASK_FEATURES)))
    X = X.astype(np.float32)
    if missing:  # half the rows miss one block of 10 columns: 10 % of the entries
        width = DASK_FEATURES // DASK_BLOCKS
        block = rng.integers(0, 2 * DASK_BLOCKS, n_rows)
        for b in range(DASK_BLOCKS):
            X[np.ix_(block == b, np.arange(b * width, (b + 1) * width))] = np.nan
    return X


def _dask_array(n_rows, chunk_rows, missing):
    import dask.array as da

    chunks = (tuple(min(chunk_rows, n_rows - start) for start in range(0, n_rows, chunk_rows)), (DASK_FEATURES,))
    return da.map_blocks(lambda block_id=None: _dask_chunk(0, chunk_rows, missing, block_id)[: chunks[0][block_id[0]]],
                         chunks=chunks, dtype=np.float32, meta=np.empty((0, 0), dtype=np.float32))


def _start_sampling():
    """In a worker: a thread that keeps the largest resident memory seen, sampled every 20 ms."""
    import threading

    import psutil

    state = {"peak": 0, "stop": threading.Event()}

    def sample():
        process = psutil.Process()
        while not state["stop"].wait(0.02):
            state["peak"] = max(state["peak"], process.memory_info().rss)

    state["peak"] = psutil.Process().memory_info().rss
    threading.Thread(target=sample, daemon=True).start()
    sys.modules["__main__"].__dict__["_skmpt_memory"] = state


def _stop_sampling():
    state = sys.modules["__main__"].__dict__.pop("_skmpt_memory")
    state["stop"].set()
    return round(state["peak"] / 2**20)


def _cpu_seconds():
    """This process's CPU seconds (user and system, every thread)."""
    import psutil

    times = psutil.Process().cpu_times()
    return times.user + times.system


def _dask_step(client, function):
    """Wall seconds of ``function()``, the CPU seconds it took (the workers' and this process's, which
    holds the scheduler: on a loaded machine a steadier measure than the wall time) and each worker's
    peak resident MB meanwhile (torch and skmpt imported)."""
    client.run(lambda: __import__("skmpt") and None)
    client.run(_start_sampling)
    workers = client.run(_cpu_seconds)
    start, cpu = time.perf_counter(), _cpu_seconds()
    result = function()
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    cpu += sum(value - workers[name] for name, value in client.run(_cpu_seconds).items())
    peaks = sorted(client.run(_stop_sampling).values())
    return (seconds, cpu), peaks, result


def _tsqr_svd(X):
    """What dask-ml's ``PCA(svd_solver="tsqr").fit`` computes (the column means, then the leading
    singular values and vectors of the centred array by ``dask.array.linalg.svd``: tsqr), without
    its ``delayed(lambda x: x.shape)(X)``, a task whose input is the whole array (dask-ml 2025.1.0
    with dask 2026.8: a MemoryError once the array outgrows a worker)."""
    import dask
    import dask.array as da

    _, singular_values, components = da.linalg.svd(X - X.mean(0))
    return dask.compute(singular_values[:DASK_RANK], components[:DASK_RANK])


def dask_table(n_rows, chunk_rows, kinds=("complete", "missing"), baseline_kind="dask-ml"):
    from dask_ml.decomposition import PCA as DaskPCA
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    print(f"{n_rows} x {DASK_FEATURES} float32 in chunks of {chunk_rows} rows; LocalCluster of 2 worker "
          f"processes (1 thread each, memory_limit 4GB); wall seconds, peak RSS per worker in MB", flush=True)
    print("| data | step | wall s | CPU s | x dask-ml tsqr (wall, CPU) | peak MB per worker | result |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with (LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="4GB",
                       dashboard_address=None) as cluster, Client(cluster) as client):
        for missing in [kind == "missing" for kind in kinds]:
            X = _dask_array(n_rows, chunk_rows, missing)
            label = "10 % missing" if missing else "complete"
            baseline = None
            if not missing and baseline_kind == "dask-ml":
                baseline, peaks, pca = _dask_step(client, lambda X=X: DaskPCA(DASK_RANK, svd_solver="tsqr").fit(X))
                print(f"| {label} | dask-ml PCA tsqr fit | {baseline[0]:.1f} | {baseline[1]:.1f} | 1, 1 | {peaks} | "
                      f"explained variance {pca.explained_variance_.sum():.4g} |", flush=True)
            elif not missing:
                baseline, peaks, (singular_values, _) = _dask_step(client, lambda X=X: _tsqr_svd(X))
                print(f"| {label} | tsqr SVD (dask-ml's path) | {baseline[0]:.1f} | {baseline[1]:.1f} | 1, 1 | "
                      f"{peaks} | explained variance {(singular_values**2).sum() / (n_rows - 1):.4g} |", flush=True)
            for estimator in (MaskedPPCA, MaskedFactorAnalysis):
                def fit(estimator=estimator, X=X):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        return estimator(DASK_RANK, random_state=0, device="cpu").fit(X)

                seconds, peaks, fitted = _dask_step(client, fit)
                ratio = "-" if baseline is None else f"{seconds[0] / baseline[0]:.2f}, {seconds[1] / baseline[1]:.2f}"
                print(f"| {label} | {estimator.__name__} fit | {seconds[0]:.1f} | {seconds[1]:.1f} | {ratio} | "
                      f"{peaks} | "
                      f"{fitted.n_iter_} steps, converged {fitted.converged_} |", flush=True)
                seconds, peaks, score = _dask_step(client, lambda fitted=fitted, X=X: fitted.score(X))
                print(f"| {label} | {estimator.__name__} score | {seconds[0]:.1f} | {seconds[1]:.1f} | - | {peaks} | "
                      f"{score:.4f} nats per row |", flush=True)
        if "missing" not in kinds:
            return
        def fit_imputer():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return MaskedImputer(MaskedPPCA(DASK_RANK, random_state=0, device="cpu")).fit(X)

        seconds, peaks, imputer = _dask_step(client, fit_imputer)
        print(f"| 10 % missing | MaskedImputer fit | {seconds[0]:.1f} | {seconds[1]:.1f} | - | {peaks} | "
              f"{imputer.estimator_.n_iter_} steps, converged {imputer.estimator_.converged_} |", flush=True)
        with tempfile.TemporaryDirectory() as folder:
            columns = [f"x{j}" for j in range(DASK_FEATURES)]

            def write():
                dd.from_dask_array(imputer.transform(X), columns=columns).to_parquet(folder)

            seconds, peaks, _ = _dask_step(client, write)
            size = sum(path.stat().st_size for path in Path(folder).rglob("*.parquet")) / 2**20
            print(f"| 10 % missing | MaskedImputer transform to Parquet | {seconds[0]:.1f} | {seconds[1]:.1f} | - | "
                  f"{peaks} | "
                  f"{size:.0f} MB written |", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="exact scores at D <= 64 and K <= 5 only")
    parser.add_argument("--only", choices=["exact", "rows", "ratio", "grid", "memory", "dask"],
                        help="run the exact scores', the rows', the ratio's, the grid's, the memory's or the dask "
                             "table only")
    parser.add_argument("--dask-rows", type=int, default=4_000_000, help="rows of the dask table's array")
    parser.add_argument("--chunk-rows", type=int, default=250_000, help="rows per chunk of the dask table's array")
    parser.add_argument("--dask-data", nargs="+", choices=["complete", "missing"], default=["complete", "missing"],
                        help="the dask table's data: complete, with 10 %% missing, or both")
    parser.add_argument("--dask-baseline", choices=["dask-ml", "tsqr"], default="dask-ml",
                        help="the dask table's baseline: dask-ml's PCA(svd_solver='tsqr'), or the same computation "
                             "without its task that gathers the array (dask-ml fails once the array outgrows a "
                             "worker)")
    parser.add_argument("--memory-rows", type=int, default=1_000_000, help="rows of the memory's table")
    parser.add_argument("--ratio-rows", type=int, default=100_000, help="rows of the ratio's table")
    parser.add_argument("--max-rows", type=int, default=100_000,
                        help="largest number of rows of the rows' table (1000000 adds a million)")
    parser.add_argument("--min-rows", type=int, default=1_000, help="smallest number of rows of the rows' table")
    parser.add_argument("--cases", nargs="+", help="rows' table: only the cases whose name holds one of these")
    parser.add_argument("--json", help="write the rows' table to this JSON file")
    parser.add_argument("--plot", help="draw the rows' table as a log-log PNG at this path")
    args = parser.parse_args(argv)
    if args.only == "memory":
        memory_table(args.memory_rows)
        return
    if args.only == "dask":  # the workers are processes of one thread each
        dask_table(args.dask_rows, args.chunk_rows, args.dask_data, args.dask_baseline)
        return
    if args.only == "grid":  # before this process sets its own threads: the workers would inherit them
        grid_table()
        return
    torch.set_num_threads(1)
    rng = np.random.RandomState(0)
    if args.only == "rows":
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            rows_table(args.max_rows, args.repeats, args.json, args.plot, args.cases, args.min_rows)
        return
    if args.only == "exact":
        exact_scores(args.repeats, args.quick, rng)
        return
    if args.only == "ratio":
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            ratio_table(args.ratio_rows, args.repeats)
        return
    print(f"torch {torch.__version__}, 1 thread, CPU seconds, minimum of {args.repeats}")
    print("| estimator | factor | values | score s | score exponent | epoch s | epoch exponent |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for estimator, fixed, base, grid in CONFIGS:
        for factor, values in grid.items():
            scores, epochs = [], []
            for value in values:
                s, e = measure(estimator, fixed, **dict(base, **{factor: value}), repeats=args.repeats, rng=rng)
                scores.append(s)
                epochs.append(e)
            print(
                f"| {estimator.__name__} | {factor} | {', '.join(map(str, values))} | "
                f"{', '.join(f'{t:.3g}' for t in scores)} | {slope(values, scores):.2f} | "
                f"{', '.join(f'{t:.3g}' for t in epochs)} | {slope(values, epochs):.2f} |",
                flush=True,
            )
    tokenizer, words = mlm_setup()
    base = dict(D=32, K=64, n=8, masks=1)
    for factor, values in dict(D=[16, 32, 64], K=[32, 64, 128], n=[4, 8, 16], masks=[1, 2, 4]).items():
        scores = [measure_mlm(tokenizer, words, **dict(base, **{factor: v}), repeats=args.repeats) for v in values]
        print(
            f"| MLMCurveScorer | {factor} | {', '.join(map(str, values))} | "
            f"{', '.join(f'{t:.3g}' for t in scores)} | {slope(values, scores):.2f} | | |",
            flush=True,
        )
    print("\nMaskedPPCA score (sweep, P = masks * D shared masks) as a fraction of the matmul rate:")
    print("| D | K | n | P | score s | matmul s | fraction |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for D, K, n, masks in [(128, 4, 256, 1), (256, 8, 512, 2), (512, 16, 512, 1), (512, 2, 512, 1)]:
        X = data(MaskedPPCA, n, D, K, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = MaskedPPCA(
                n_components=K, score_method="sweep", score_masks=masks, max_epochs=1, random_state=0, device="cpu"
            ).fit(X)
        a, b = torch.randn(n, D, dtype=torch.float64), torch.randn(D, masks * D * K, dtype=torch.float64)
        functions = [partial(fitted.score_samples, X), partial(torch.matmul, a, b)]
        score, matmul = interleaved_minimum(functions, args.repeats + 1)
        print(f"| {D} | {K} | {n} | {masks * D} | {score:.4f} | {matmul:.4f} | {matmul / score:.1%} |", flush=True)
    exact_scores(args.repeats, args.quick, rng)


if __name__ == "__main__":
    main()
