"""Dask collections as input: statistics reduced chunk by chunk, per-row outputs mapped over chunks.

A dask array (or a dask DataFrame) is never gathered into one process. ``fit`` of an estimator that
trains from moments reduces, on whatever scheduler is active (a ``distributed.Client``, the threaded
scheduler), each chunk to :class:`ChunkSummary` (per-feature statistics of the observed entries and
the counts of the patterns of observed entries; the chunk's moments when it is complete) and merges
the summaries pairwise in a tree; incomplete data take a second pass, :class:`PatternMoments`: the
moments of the frequent patterns and the rows of the rare ones. Moments merge exactly (Chan, Golub
and LeVeque's pairwise update), so the result does not depend on the chunking. Per-row methods run
on each chunk in the workers (:func:`map_rows`) and return dask arrays with the input's row chunks;
``partial_fit`` streams a collection's chunks one at a time (:func:`iter_blocks`).

dask is imported only when the input is a dask collection: it is an optional dependency.
"""

import copy
from dataclasses import dataclass, field

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from ._data import check_sample_weight

__all__ = [
    "ChunkSummary",
    "PatternMoments",
    "as_dask_array",
    "check_collection",
    "collection_weights",
    "dask_mean",
    "is_dask_collection",
    "iter_blocks",
    "map_rows",
    "merge_pattern_moments",
    "merge_summaries",
    "pattern_key",
    "pattern_moments_of_chunk",
    "pattern_of_key",
    "reduce_chunks",
    "seeded_rows_of_block",
    "summarize_chunk",
]


def is_dask_collection(X):
    """Whether ``X`` is a dask array or DataFrame (without importing dask when it is not)."""
    return type(X).__module__.split(".")[0] in ("dask", "dask_expr") and hasattr(X, "__dask_graph__")


def _frame_meta(X):
    """An empty pandas frame with a dask DataFrame's columns and dtypes, for scikit-learn's checks of names."""
    import pandas as pd

    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in X.dtypes.items()})


def check_collection(estimator, X, *, reset):
    """Check (``reset``: record) ``n_features_in_`` and ``feature_names_in_`` from a dask collection's
    columns, without reading its chunks."""
    meta = _frame_meta(X) if hasattr(X, "dtypes") and hasattr(X, "columns") else X
    validate_data(estimator, meta, reset=reset, skip_check_array=True)


def as_dask_array(X):
    """A dask collection as a 2-D dask array of numbers with known row chunks and one column chunk.

    A dask DataFrame's partition lengths are computed (one pass that reads no value twice).
    """
    if hasattr(X, "to_dask_array"):
        X = X.to_dask_array(lengths=True)
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D dask array of shape (n_samples, n_features); got {X.ndim} dimension(s).")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"X must hold numbers; the dask collection has dtype {X.dtype}.")
    if any(np.isnan(size) for size in X.chunks[0]):
        X = X.compute_chunk_sizes()
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    return X


# ====================================================================== reductions
def _tree(parts, merge):
    """Merge delayed ``parts`` pairwise, neighbours first (the order of the chunks is kept)."""
    import dask

    merge = dask.delayed(merge, pure=True)
    while len(parts) > 1:
        parts = [merge(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def reduce_chunks(X, summarize, merge, *args, weights=None):
    """``summarize(chunk, weights_chunk, *args)`` of every row chunk of the dask array ``X`` with its part of
    the 1-D dask array ``weights`` of ``X``'s row chunks (None without ``weights``), merged by ``merge`` in a
    tree, computed on the active scheduler: no process holds more than a chunk and two summaries."""
    import dask

    blocks = X.to_delayed().ravel()
    summary = dask.delayed(summarize, pure=True)
    if weights is None:
        parts = [summary(block, None, *args) for block in blocks]
    else:
        parts = [summary(block, w, *args) for block, w in zip(blocks, weights.to_delayed().ravel(), strict=True)]
    return dask.compute(_tree(parts, merge))[0]


def collection_weights(sample_weight, X):
    """``sample_weight`` for the rows of the dask array ``X`` (a NumPy array, or a dask array or Series
    of ``X``'s length): ``(weights, counted)``, the weights as a dask array of ``X``'s row chunks divided
    by their largest value (as :func:`~skmpt.estimators._data.check_sample_weight` scales them), and
    their sum as given (the number of samples they count; infinity when it overflows). The checks
    ``check_sample_weight`` makes, in one pass over the weights."""
    import dask
    import dask.array as da

    if not is_dask_collection(sample_weight):
        weights = check_sample_weight(sample_weight, X.shape[0])
        with np.errstate(over="ignore"):
            counted = float(np.sum(np.asarray(sample_weight, dtype=np.float64)))
        return da.from_array(weights, chunks=(X.chunks[0],)), counted
    weights = sample_weight.to_dask_array(lengths=True) if hasattr(sample_weight, "to_dask_array") else sample_weight
    if weights.ndim != 1 or weights.shape[0] != X.shape[0]:
        raise ValueError(
            f"sample_weight must have shape ({X.shape[0]},), one weight per sample; got shape {weights.shape}."
        )
    weights = weights.astype(np.float64).rechunk((X.chunks[0],))
    finite, smallest, largest = dask.compute(da.isfinite(weights).all(), weights.min(), weights.max())
    if not finite:
        raise ValueError("sample_weight holds NaN or infinite values.")
    if smallest < 0:
        raise ValueError(f"sample_weight must be non-negative; its smallest value is {smallest:.6g}.")
    if largest <= 0:
        raise ValueError("sample_weight sums to zero: no sample would count.")
    scaled = weights / largest
    with np.errstate(over="ignore"):
        return scaled, float(scaled.sum().compute()) * float(largest)


def _merge_moments(a, b):
    """Two ``(weight, mean, scatter)`` triples (the scatter about the mean, not divided) as one."""
    (n_a, mean_a, scatter_a), (n_b, mean_b, scatter_b) = a, b
    if n_a == 0:
        return b
    if n_b == 0:
        return a
    n = n_a + n_b
    delta = mean_b - mean_a
    return n, mean_a + delta * (n_b / n), scatter_a + scatter_b + np.outer(delta, delta) * (n_a * n_b / n)


def _moments_of(rows, weights=None):
    """``(n, mean, scatter)`` of float64 ``rows`` (weighted by ``weights``: ``n`` is their sum)."""
    n = len(rows) if weights is None else float(weights.sum())
    if n == 0:
        return 0, np.zeros(rows.shape[1]), np.zeros((rows.shape[1], rows.shape[1]))
    if weights is None:
        mean = rows.mean(0)
        centred = rows - mean
        return n, mean, centred.T @ centred
    mean = weights @ rows / n
    centred = rows - mean
    return n, mean, (centred * weights[:, None]).T @ centred


def pattern_key(observed):
    """The bytes naming a pattern of observed entries (rows of ``observed``: one key each); sorting the
    keys sorts the patterns as ``torch.unique(observed, dim=0)`` does (``False`` before ``True``)."""
    return np.packbits(observed, axis=-1)


def pattern_of_key(key, n_features):
    """The boolean pattern of observed entries a :func:`pattern_key` names."""
    return np.unpackbits(np.frombuffer(key, dtype=np.uint8))[:n_features].astype(bool)


@dataclass
class ChunkSummary:
    """What the first pass keeps of a chunk of rows (all float64 NumPy).

    ``n_samples``; per feature, the ``count``, ``mean`` and scatter ``m2`` of its observed entries,
    and the smallest (``low``) and largest (``high``) of them; ``n_infinite`` entries; ``patterns``: the number of
    rows of each pattern of observed entries (keyed by :func:`pattern_key`); ``moments``: the rows'
    ``(n, mean, scatter)`` while every entry so far is observed, else None (weighted when the
    chunks were summarised with weights: then ``n`` is the weights' sum); ``positive``: the (unweighted)
    summary of the rows of positive weight, which training sees (None without weights).
    """

    n_samples: int
    count: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_infinite: int
    patterns: dict = field(default_factory=dict)
    moments: tuple = None
    positive: "ChunkSummary" = None


def summarize_chunk(chunk, weights=None):
    """The :class:`ChunkSummary` of a chunk of rows (any numeric dtype; NaN marks a missing entry), its
    moments weighted by the chunk's ``weights`` (non-negative; None: equal)."""
    X = np.asarray(chunk, dtype=np.float64)
    n_features = X.shape[1]
    positive = None if weights is None else summarize_chunk(X[np.asarray(weights) > 0])
    if len(X) and np.isfinite(X.sum(0)).all():  # complete and finite (NaN or infinity makes a sum non-finite)
        moments = _moments_of(X, weights)
        if weights is None:
            mean, m2 = moments[1], moments[2].diagonal().copy()
        else:
            mean = X.mean(0)
            m2 = ((X - mean) ** 2).sum(0)
        return ChunkSummary(len(X), np.full(n_features, float(len(X))), mean, m2, X.min(0), X.max(0), 0,
                            {bytes(pattern_key(np.ones(n_features, dtype=bool))): len(X)}, moments, positive)
    infinite = np.isinf(X)
    n_infinite = int(infinite.sum())
    observed = ~np.isnan(X)
    complete = bool(observed.all())
    count = observed.sum(0).astype(np.float64)
    filled = np.where(observed & ~infinite, X, 0.0)
    mean = np.divide(filled.sum(0), count, out=np.zeros(n_features), where=count > 0)
    m2 = (np.where(observed & ~infinite, X - mean, 0.0) ** 2).sum(0)
    low = np.where(observed, X, np.inf).min(0, initial=np.inf)
    high = np.where(observed, X, -np.inf).max(0, initial=-np.inf)
    keys, counts = np.unique(pattern_key(observed), axis=0, return_counts=True) if len(X) else ((), ())
    patterns = {bytes(k): int(c) for k, c in zip(keys, counts, strict=True)}
    moments = _moments_of(X, weights) if complete and not n_infinite else None
    return ChunkSummary(len(X), count, mean, m2, low, high, n_infinite, patterns, moments, positive)


def merge_summaries(a, b):
    """The :class:`ChunkSummary` of two chunks together."""
    count = a.count + b.count
    share = np.divide(b.count, count, out=np.zeros_like(count), where=count > 0)
    delta = b.mean - a.mean
    patterns = dict(a.patterns)
    for key, value in b.patterns.items():
        patterns[key] = patterns.get(key, 0) + value
    moments = None if a.moments is None or b.moments is None else _merge_moments(a.moments, b.moments)
    positive = None if a.positive is None else merge_summaries(a.positive, b.positive)
    return ChunkSummary(
        a.n_samples + b.n_samples, count, a.mean + share * delta, a.m2 + b.m2 + delta**2 * share * a.count,
        np.minimum(a.low, b.low), np.maximum(a.high, b.high), a.n_infinite + b.n_infinite, patterns, moments,
        positive,
    )


@dataclass
class PatternMoments:
    """What the second pass over incomplete data keeps of the rows that count (of positive weight): ``groups``,
    the ``(n, mean, scatter)`` of the rows of each grouped pattern (missing entries at zero; weighted: ``n``
    is the weights' sum), keyed by :func:`pattern_key`; ``rows``, the other rows in their order (float64, NaN
    where missing) and ``row_weights``, their weights (None without weights); ``gram``, the sum of ``x x^T``
    of the rows in the training units ``(x - center) / scale`` with missing entries at zero, and
    ``weighted``, their weights' sum, weighted sum and weighted sum of ``x x^T`` (None without weights)."""

    groups: dict
    rows: np.ndarray
    gram: np.ndarray
    row_weights: np.ndarray = None
    weighted: tuple = None


def pattern_moments_of_chunk(chunk, weights, grouped, center, scale):
    """The :class:`PatternMoments` of a chunk with its ``weights`` (None: equal; rows of zero weight are
    left out): the moments of the rows whose pattern is in ``grouped`` (a set of keys), the other rows,
    and the Gram matrix in the units ``(center, scale)``."""
    X = np.asarray(chunk, dtype=np.float64)
    if weights is not None:
        keep = np.asarray(weights) > 0
        X, weights = X[keep], np.asarray(weights, dtype=np.float64)[keep]
    observed = ~np.isnan(X)
    filled = np.where(observed, X, 0.0)
    standardized = np.where(observed, (X - center) / scale, 0.0)
    keys = [bytes(k) for k in pattern_key(observed)]
    in_group = np.array([key in grouped for key in keys], dtype=bool)
    groups = {}
    for key in sorted({key for key, kept in zip(keys, in_group, strict=True) if kept}):
        rows = np.array([k == key for k in keys], dtype=bool)
        groups[key] = _moments_of(filled[rows], None if weights is None else weights[rows])
    gram = standardized.T @ standardized
    if weights is None:
        return PatternMoments(groups, X[~in_group], gram)
    weighted = (weights.sum(), weights @ standardized, (standardized * weights[:, None]).T @ standardized)
    return PatternMoments(groups, X[~in_group], gram, weights[~in_group], weighted)


def merge_pattern_moments(a, b):
    """The :class:`PatternMoments` of two chunks together, ``a``'s rows before ``b``'s."""
    groups = dict(a.groups)
    for key, moments in b.groups.items():
        groups[key] = moments if key not in groups else _merge_moments(groups[key], moments)
    rows, gram = np.concatenate([a.rows, b.rows]), a.gram + b.gram
    if a.weighted is None:
        return PatternMoments(groups, rows, gram)
    weighted = tuple(x + y for x, y in zip(a.weighted, b.weighted, strict=True))
    return PatternMoments(groups, rows, gram, np.concatenate([a.row_weights, b.row_weights]), weighted)


# ====================================================================== per-row outputs
def _block_input(block, columns):
    """A chunk as the estimator takes it: a pandas frame with the fitted columns, or the array."""
    if columns is None:
        return block
    import pandas as pd

    return pd.DataFrame(block, columns=columns)


def _rows_of_block(block, estimator, method, columns, tail):
    if block.shape[0] == 0:  # an empty chunk: the estimators refuse zero rows
        return np.zeros((0, *tail))
    return getattr(estimator, method)(_block_input(block, columns))


def seeded_rows_of_block(block, estimator, method, columns, tail, seed, block_id=None):
    """:func:`map_rows`' function for an estimator that draws from its ``random_state_``: each chunk
    draws from its own generator, seeded by ``seed`` and the chunk's index (reproducible, and
    independent of the other chunks' draws)."""
    estimator = copy.copy(estimator)
    estimator.random_state_ = np.random.RandomState([seed, block_id[0]])
    return _rows_of_block(block, estimator, method, columns, tail)


def map_rows(estimator, method, X, tail=(), function=_rows_of_block, **kwargs):
    """``estimator.<method>`` of every row chunk of the dask collection ``X``, run where the chunk is: a dask
    array of shape ``(n_samples, *tail)`` with ``X``'s row chunks (float64). ``X``'s width and column
    names are checked against the fitted ones first. ``function(block, estimator, method, columns, tail,
    **kwargs)`` computes a chunk's rows (a chunk of zero rows included)."""
    check_is_fitted(estimator)
    check_collection(estimator, X, reset=False)
    columns = getattr(estimator, "feature_names_in_", None) if hasattr(X, "columns") else None
    X = as_dask_array(X)
    chunks = (X.chunks[0], *((size,) for size in tail))
    drop = None if tail else 1  # a 1-D output has no column axis
    return X.map_blocks(
        function, estimator, method, columns, tail, **kwargs, dtype=np.float64, chunks=chunks,
        drop_axis=drop, meta=np.empty((0,) * (1 + len(tail)), dtype=np.float64),
    )


def dask_mean(values, sample_weight=None):
    """The mean of a 1-D dask array ``values`` (weighted by ``sample_weight``: see
    :func:`collection_weights`), computed."""
    if sample_weight is None:
        return float(values.mean().compute())
    weights = collection_weights(sample_weight, values[:, None])[0]
    return float(((values * weights).sum() / weights.sum()).compute())


def iter_blocks(X):
    """The row chunks of a dask collection as NumPy arrays (pandas frames for a DataFrame), one at a time."""
    import dask

    if hasattr(X, "to_delayed") and hasattr(X, "columns"):
        for partition in X.to_delayed():
            yield dask.compute(partition)[0]
        return
    for block in X.to_delayed().ravel():
        yield dask.compute(block)[0]
