"""Dask arrays and DataFrames as input (skmpt/estimators/_dask.py through the estimators).

The estimators that train from moments reduce a dask collection chunk by chunk and must equal the
in-memory fit on the same rows, whatever the chunking (an empty chunk and a one-row chunk included),
with holes in some chunks and not in others; per-row outputs come back as dask arrays with the
input's row chunks. Most tests run on the threaded scheduler; those marked ``cluster`` on a
``LocalCluster`` of two worker processes, where the chunks are summarised and scored in the workers.
"""

import warnings

import numpy as np
import pytest
from sklearn.base import clone

from support.helpers import two_process_client

from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedImputer, MaskedModelSearch, MaskedPPCA

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

ESTIMATORS = [MaskedPPCA, MaskedFactorAnalysis]
CHUNKINGS = [100, (250, 1, 0, 249), (1, 498, 1), (500,)]


def _data(n=500, n_features=8, holes=False, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 3) @ rng.randn(3, n_features) + 0.5 * rng.randn(n, n_features) + 3.0
    if holes:  # none in the first 200 rows, one frequent pattern, then scattered holes
        X[200:350, 2] = np.nan
        rare = rng.rand(n - 350, n_features) < 0.1
        X[350:][rare] = np.nan
    return X


def _fit(cls, X, **params):
    params = {"random_state": 0, "device": "cpu", "max_epochs": 40, **params}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_epochs is small: a ConvergenceWarning, the same for both
        return cls(3, **params).fit(X)


def _assert_same_fit(chunked, in_memory, rtol):
    assert chunked.n_iter_ == in_memory.n_iter_
    for name in ("components_", "mean_", "noise_variance_"):
        a, b = np.asarray(getattr(chunked, name)), np.asarray(getattr(in_memory, name))
        assert np.abs(a - b).max() <= rtol * np.abs(b).max(), name


@pytest.fixture
def threads():
    with dask.config.set(scheduler="threads"):
        yield


@pytest.mark.usefixtures("threads")
@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_complete_data_fit_equals_in_memory(cls, chunks):
    X = _data()
    in_memory = _fit(cls, X)
    chunked = _fit(cls, da.from_array(X, chunks=(chunks, X.shape[1])))
    _assert_same_fit(chunked, in_memory, 1e-10)
    assert chunked.offset_.shape == (X.shape[1],)


@pytest.mark.usefixtures("threads")
@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("solver", ["auto", "moments"])
@pytest.mark.parametrize("chunks", [(200, 1, 0, 149, 150), 64])
def test_incomplete_data_fit_equals_in_memory(cls, solver, chunks):
    # The first chunk is complete, the others have holes: a frequent pattern (moments) and rare ones (rows).
    X = _data(holes=True)
    in_memory = _fit(cls, X, solver=solver, max_epochs=20)
    chunked = _fit(cls, da.from_array(X, chunks=(chunks, X.shape[1])), solver=solver, max_epochs=20)
    _assert_same_fit(chunked, in_memory, 1e-10)


@pytest.mark.usefixtures("threads")
def test_incomplete_data_without_frequent_pattern_trains_on_the_gathered_rows():
    X = _data(300)
    X[np.random.RandomState(1).rand(*X.shape) < 0.2] = np.nan
    in_memory = _fit(MaskedPPCA, X, max_epochs=5)
    _assert_same_fit(_fit(MaskedPPCA, da.from_array(X, chunks=(70, 8)), max_epochs=5), in_memory, 1e-10)


@pytest.mark.usefixtures("threads")
@pytest.mark.parametrize("n_components", ["mle", 0.8])
@pytest.mark.parametrize("holes", [False, True])
def test_data_driven_n_components_as_in_memory(n_components, holes):
    X = _data(holes=holes)
    in_memory = MaskedPPCA(n_components, random_state=0, device="cpu", max_epochs=2)
    chunked = MaskedPPCA(n_components, random_state=0, device="cpu", max_epochs=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        in_memory.fit(X)
        chunked.fit(da.from_array(X, chunks=(90, 8)))
    assert chunked.n_components_ == in_memory.n_components_


@pytest.mark.usefixtures("threads")
@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("holes", [False, True])
def test_per_row_outputs_are_dask_arrays_with_the_input_chunks(cls, holes):
    X = _data(holes=holes)
    fitted = _fit(cls, X)
    chunks = (250, 1, 0, 249)
    X_dask = da.from_array(X, chunks=(chunks, X.shape[1]))
    for method, width in [("score_samples", None), ("log_marginal_likelihood", None), ("transform", 3),
                          ("impute", X.shape[1])]:
        out = getattr(fitted, method)(X_dask)
        assert isinstance(out, da.Array), method
        assert out.chunks[0] == chunks, method
        expected = getattr(fitted, method)(X)
        assert out.shape == expected.shape, method
        assert out.ndim == 1 if width is None else out.shape[1] == width, method
        np.testing.assert_allclose(out.compute(), expected, rtol=1e-12, atol=1e-12, err_msg=method)
    assert fitted.score(X_dask) == pytest.approx(fitted.score(X), rel=1e-13)
    weights = np.arange(len(X)) % 3
    assert fitted.score(X_dask, sample_weight=weights) == pytest.approx(fitted.score(X, sample_weight=weights),
                                                                        rel=1e-13)


@pytest.mark.usefixtures("threads")
def test_dask_dataframe_keeps_column_names():
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X = _data(holes=True)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    chunked = _fit(MaskedPPCA, dd.from_pandas(frame, npartitions=3))
    in_memory = _fit(MaskedPPCA, frame)
    _assert_same_fit(chunked, in_memory, 1e-10)
    assert list(chunked.feature_names_in_) == list(frame.columns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning about feature names
        Z = chunked.transform(dd.from_pandas(frame, npartitions=3))
    np.testing.assert_allclose(Z.compute(), in_memory.transform(frame), rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="feature names"):
        chunked.transform(dd.from_pandas(frame.rename(columns={"f0": "g"}), npartitions=2))


@pytest.mark.usefixtures("threads")
def test_imputer_transform_maps_over_chunks(tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    pytest.importorskip("pyarrow")
    X = _data(holes=True)
    imputer = MaskedImputer(MaskedPPCA(2, random_state=0, device="cpu"), add_indicator=True).fit(X)
    out = imputer.transform(da.from_array(X, chunks=(120, 8)))
    assert isinstance(out, da.Array) and out.chunks[0] == (120, 120, 120, 120, 20)
    np.testing.assert_array_equal(out.compute(), imputer.transform(X))
    columns = [f"c{i}" for i in range(out.shape[1])]
    dd.from_dask_array(out, columns=columns).to_parquet(tmp_path / "imputed")
    np.testing.assert_array_equal(dd.read_parquet(tmp_path / "imputed").compute().to_numpy(), imputer.transform(X))


@pytest.mark.usefixtures("threads")
def test_imputer_draws_differ_between_chunks_and_repeat_with_the_seed():
    X = np.tile(_data(100, holes=False), (2, 1))
    X[:, 0] = np.nan
    X[:5, 0] = 1.0  # observed somewhere: the feature is learnt
    draws = []
    for _ in range(2):
        imputer = MaskedImputer(MaskedPPCA(2, random_state=0, device="cpu"), sample_posterior=True,
                                random_state=0).fit(X)
        draws.append(imputer.transform(da.from_array(X, chunks=(100, 8))).compute())
    np.testing.assert_array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[0][105:110, 0], draws[0][5:10, 0])  # equal rows, their own draws
    assert not np.isnan(draws[0]).any()


@pytest.mark.usefixtures("threads")
@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("n_components", [3, "mle"])
@pytest.mark.parametrize("dask_weights", [False, True])
def test_weighted_fit_equals_in_memory(cls, n_components, dask_weights):
    if n_components == "mle" and cls is MaskedFactorAnalysis:
        pytest.skip("factor analysis takes an integer n_components")
    X = _data()
    weights = np.random.RandomState(1).gamma(0.5, size=len(X))
    weights[:40] = 0.0  # rows that do not count, a whole chunk among them
    X_dask = da.from_array(X, chunks=((40, 160, 1, 299), 8))
    given = da.from_array(weights, chunks=100) if dask_weights else weights
    chunked, in_memory = _weighted_fits_agree(cls(n_components, random_state=0, device="cpu", max_epochs=40),
                                              X, X_dask, weights, given)
    assert chunked.score(X_dask, sample_weight=given) == pytest.approx(in_memory.score(X, sample_weight=weights),
                                                                        rel=1e-9)


def _weighted_fits_agree(estimator, X, X_dask, weights, given):
    """Fit clones of ``estimator`` to ``X`` with ``weights`` in memory and to ``X_dask`` with ``given``; check
    that they agree to 1e-10 and that the weights matter (the unweighted fit of 3 components differs); return
    both."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_epochs is small: a ConvergenceWarning, the same for both
        in_memory = clone(estimator).fit(X, sample_weight=weights)
        chunked = clone(estimator).fit(X_dask, sample_weight=given)
        unweighted = clone(estimator).set_params(n_components=3).fit(X)
    assert chunked.n_components_ == in_memory.n_components_
    _assert_same_fit(chunked, in_memory, 1e-10)
    assert np.abs(chunked.components_ - unweighted.components_).max() > 1e-3  # the weights matter
    return chunked, in_memory


@pytest.mark.usefixtures("threads")
@pytest.mark.parametrize(("cls", "solver", "n_components", "dask_weights"), [
    (MaskedPPCA, "auto", 3, False), (MaskedPPCA, "moments", "mle", True), (MaskedFactorAnalysis, "auto", 3, True),
    (MaskedFactorAnalysis, "moments", 3, False),
])
def test_weighted_fit_with_missing_entries_equals_in_memory(cls, solver, n_components, dask_weights):
    # Holes in some chunks and not others; rows of no weight in a complete chunk, among the frequent pattern
    # and among the rare ones (trained by rows beside the moments with "auto"), a one-row and an empty chunk.
    X = _data(holes=True)
    weights = np.random.RandomState(1).gamma(0.5, size=len(X))
    weights[:40] = weights[210:230] = weights[400:420] = 0.0
    X_dask = da.from_array(X, chunks=((40, 160, 1, 0, 149, 150), 8))
    given = da.from_array(weights, chunks=100) if dask_weights else weights
    _weighted_fits_agree(cls(n_components, random_state=0, device="cpu", max_epochs=20, solver=solver),
                         X, X_dask, weights, given)


@pytest.mark.usefixtures("threads")
def test_weighted_fit_without_frequent_pattern_weighs_the_gathered_rows():
    X = _data(300)
    X[np.random.RandomState(1).rand(*X.shape) < 0.2] = np.nan
    weights = np.random.RandomState(2).gamma(0.5, size=len(X))
    weights[:30] = 0.0
    params = {"random_state": 0, "device": "cpu", "max_epochs": 3}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_epochs is small: a ConvergenceWarning, the same for both
        in_memory = MaskedPPCA(2, **params).fit(X, sample_weight=weights)
        chunked = MaskedPPCA(2, **params).fit(da.from_array(X, chunks=(100, 8)), sample_weight=weights)
    _assert_same_fit(chunked, in_memory, 1e-10)


@pytest.mark.usefixtures("threads")
def test_weighted_partial_fit_streams_each_chunk_with_its_weights():
    X = _data()
    weights = np.random.RandomState(1).gamma(0.5, size=len(X))
    weights[:200] = 0.0  # a chunk of no weight holds nothing to learn from
    chunked = MaskedGaussianMixture(2, random_state=0, device="cpu").partial_fit(
        da.from_array(X, chunks=(200, 8)), sample_weight=da.from_array(weights, chunks=100))
    one_by_one = MaskedGaussianMixture(2, random_state=0, device="cpu")
    for start in range(200, len(X), 200):
        one_by_one.partial_fit(X[start:start + 200], sample_weight=weights[start:start + 200])
    assert chunked.n_iter_ == one_by_one.n_iter_ == 2
    np.testing.assert_allclose(chunked.means_, one_by_one.means_, rtol=1e-12)


@pytest.mark.usefixtures("threads")
def test_partial_fit_streams_the_chunks():
    X = _data()
    chunked = MaskedGaussianMixture(2, random_state=0, device="cpu").partial_fit(da.from_array(X, chunks=(200, 8)))
    one_by_one = MaskedGaussianMixture(2, random_state=0, device="cpu")
    for start in range(0, len(X), 200):
        one_by_one.partial_fit(X[start:start + 200])
    assert chunked.n_iter_ == one_by_one.n_iter_ == 3
    np.testing.assert_array_equal(chunked.means_, one_by_one.means_)


@pytest.mark.usefixtures("threads")
def test_estimators_that_need_rows_refuse_fit_naming_partial_fit():
    X = da.from_array(_data(), chunks=(100, 8))
    with pytest.raises(TypeError, match="partial_fit"):
        MaskedGaussianMixture(2).fit(X)
    with pytest.raises(TypeError, match="partial_fit"):
        MaskedPPCA(2, solver="minibatch").fit(X)


@pytest.mark.usefixtures("threads")
def test_bad_chunked_input_is_refused_before_training():
    X = _data()
    X[3, 2] = np.inf
    with pytest.raises(ValueError, match="infinite"):
        MaskedPPCA(2).fit(da.from_array(X, chunks=(100, 8)))
    X = _data()
    X[:, 4] = np.nan
    with pytest.raises(ValueError, match=r"Feature\(s\) \[4\]"):
        MaskedPPCA(2).fit(da.from_array(X, chunks=(100, 8)))
    X, weights = _data(holes=True), np.ones(500)
    X[:150, 5], weights[150:] = np.nan, 0.0  # feature 5 is observed only in rows of no weight
    with pytest.raises(ValueError, match=r"Feature\(s\) \[5\] are observed only in samples of zero sample_weight"):
        MaskedPPCA(2).fit(da.from_array(X, chunks=(100, 8)), sample_weight=weights)
    with pytest.raises(ValueError, match="one weight per sample"):
        MaskedPPCA(2).fit(da.from_array(_data(), chunks=(100, 8)), sample_weight=da.ones(499, chunks=100))
    with pytest.raises(ValueError, match="non-negative"):
        MaskedPPCA(2).fit(da.from_array(_data(), chunks=(100, 8)), sample_weight=-da.ones(500, chunks=100))
    with pytest.raises(ValueError, match="1 sample\\(s\\) a positive weight"):
        MaskedPPCA(2).fit(da.from_array(_data(), chunks=(100, 8)), sample_weight=(da.arange(500, chunks=100) == 7))
    with pytest.raises(ValueError, match="at most the number of features"):
        MaskedPPCA(9).fit(da.from_array(_data(), chunks=(100, 8)))
    with pytest.raises(ValueError, match="at least 2"):
        MaskedPPCA(1).fit(da.from_array(_data()[:1], chunks=(1, 8)))
    with pytest.raises(ValueError, match="overflows float32"):
        MaskedPPCA(2, dtype="float32").fit(da.from_array(_data() * 1e30, chunks=(100, 8)))
    fitted = _fit(MaskedPPCA, _data())
    with pytest.raises(ValueError, match="features"):
        fitted.transform(da.from_array(_data()[:, :5], chunks=(100, 5)))


@pytest.mark.usefixtures("threads")
def test_float32_fit_from_chunks_is_close():
    X = _data()
    in_memory = _fit(MaskedPPCA, X, dtype="float32")
    chunked = _fit(MaskedPPCA, da.from_array(X.astype(np.float32), chunks=(100, 8)), dtype="float32")
    assert chunked.components_.dtype == np.float32
    np.testing.assert_allclose(chunked.get_covariance(), in_memory.get_covariance(), rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------- MaskedImputer.fit on a collection
def _imputer(estimator, **params):
    return MaskedImputer(estimator, random_state=0, **params)


# max_epochs is small: a ConvergenceWarning, the same for both fits
quiet = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _assert_same_imputer(chunked, in_memory, X):
    _assert_same_fit(chunked.estimator_, in_memory.estimator_, 1e-10)
    np.testing.assert_array_equal(chunked._valid, in_memory._valid)
    imputed = chunked.transform(da.from_array(X, chunks=(100, X.shape[1]))).compute()
    np.testing.assert_allclose(imputed, in_memory.transform(X), rtol=1e-9, atol=1e-9)


@quiet
@pytest.mark.usefixtures("threads")
@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("holes", [False, True])
def test_imputer_fit_from_moments_equals_in_memory(cls, holes, monkeypatch):
    X = _data(holes=holes)
    estimator = cls(3, random_state=0, device="cpu", max_epochs=40)
    in_memory = _imputer(estimator).fit(X)
    # Never gathered: a dask collection turned into one NumPy array is an error here.
    monkeypatch.setattr(da.Array, "__array__", lambda *args, **kwargs: pytest.fail("gathered"))
    chunked = _imputer(estimator).fit(da.from_array(X, chunks=((250, 1, 0, 249), 8)))
    monkeypatch.undo()
    assert chunked.search_ is None and chunked.n_features_in_ == 8
    _assert_same_imputer(chunked, in_memory, X)


@quiet
@pytest.mark.usefixtures("threads")
def test_imputer_fit_on_a_dask_dataframe_equals_in_memory():
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X = _data(holes=True)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(8)])
    estimator = MaskedPPCA(3, random_state=0, device="cpu", max_epochs=40)
    chunked = _imputer(estimator).fit(dd.from_pandas(frame, npartitions=3))
    assert list(chunked.feature_names_in_) == list(frame.columns)
    _assert_same_imputer(chunked, _imputer(estimator).fit(X), X.copy())


@quiet
@pytest.mark.usefixtures("threads")
def test_imputer_fit_collection_marker_empty_features_and_indicator_as_in_memory():
    X = _data(holes=True)
    X[:, 5] = np.nan  # missing everywhere
    X = np.where(np.isnan(X), -1.0, X)
    params = {"missing_values": -1.0, "keep_empty_features": True, "add_indicator": True}
    estimator = MaskedPPCA(2, random_state=0, device="cpu", max_epochs=40)
    in_memory = _imputer(estimator, **params).fit(X)
    chunked = _imputer(estimator, **params).fit(da.from_array(X, chunks=(150, 8)))
    np.testing.assert_array_equal(chunked.indicator_.features_, in_memory.indicator_.features_)
    _assert_same_imputer(chunked, in_memory, X)
    with pytest.raises(ValueError, match=r"Feature\(s\) \[5\] are missing in every training sample"):
        _imputer(estimator, missing_values=-1.0).fit(da.from_array(X, chunks=(150, 8)))
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"contains NaN in feature\(s\) \[1\], but missing_values=-1.0"):
        _imputer(estimator, **params).fit(da.from_array(X, chunks=(150, 8)))
    X[3, 1] = np.inf
    with pytest.raises(ValueError, match=r"contains infinity in feature\(s\) \[1\]"):
        _imputer(estimator, **params).fit(da.from_array(X, chunks=(150, 8)))


@quiet
@pytest.mark.usefixtures("threads")
def test_imputer_search_chooses_on_a_sample_and_refits_from_moments():
    X = _data(n=1000, holes=True)
    X_dask = da.from_array(X, chunks=(300, 8))
    search = MaskedModelSearch({"ppca": [MaskedPPCA(k, random_state=0, device="cpu", max_epochs=40) for k in (1, 3)]},
                               max_samples=300, random_state=0, progress=False)
    imputer = _imputer(search).fit(X_dask)
    assert imputer.search_.refit and imputer.search_.best_estimator_ is imputer.estimator_
    # The chosen model refitted to every row, out of core: the in-memory fit of the same model.
    in_memory = MaskedPPCA(imputer.estimator_.n_components, random_state=0, device="cpu", max_epochs=40).fit(X)
    _assert_same_fit(imputer.estimator_, in_memory, 1e-10)
    assert imputer.transform(X_dask).compute().shape == X.shape
    with pytest.raises(ValueError, match="give the search a max_samples"):
        _imputer(search.set_params(max_samples=None)).fit(X_dask)


@quiet
@pytest.mark.usefixtures("threads")
def test_imputer_search_streams_a_row_model_through_partial_fit(monkeypatch):
    X = _data(n=1000, holes=True)
    calls = []
    original = MaskedGaussianMixture.partial_fit
    monkeypatch.setattr(MaskedGaussianMixture, "partial_fit",
                        lambda self, X, *args, **kwargs: calls.append(len(X)) or original(self, X, *args, **kwargs))
    search = MaskedModelSearch([MaskedGaussianMixture(1, random_state=0, device="cpu", max_epochs=5)],
                               max_samples=200, random_state=0, progress=False)
    imputer = _imputer(search).fit(da.from_array(X, chunks=(400, 8)))
    assert calls[1:] == [400, 400, 200]  # the collection, then each chunk
    assert np.isfinite(imputer.transform(X)).all()


@pytest.mark.usefixtures("threads")
def test_imputer_fit_collection_refuses_what_needs_rows():
    X_dask = da.from_array(_data(holes=True), chunks=(100, 8))
    with pytest.raises(TypeError, match="MaskedGaussianMixture trains on rows.*X\\[rows\\].compute"):
        MaskedImputer(MaskedGaussianMixture(2)).fit(X_dask)
    with pytest.raises(TypeError, match="self-masking"):
        MaskedImputer(missingness="self-masking").fit(X_dask)


# ---------------------------------------------------------------------- on a cluster of two processes
@pytest.fixture(scope="module")
def client():
    with two_process_client() as client:
        yield client


@pytest.mark.parametrize("holes", [False, True])
def test_fit_and_outputs_on_a_local_cluster_equal_in_memory(client, holes):
    X = _data(holes=holes)
    X_dask = da.from_array(X, chunks=((250, 1, 0, 249), 8))
    for cls in ESTIMATORS:
        in_memory = _fit(cls, X)
        chunked = _fit(cls, X_dask)
        _assert_same_fit(chunked, in_memory, 1e-10)
        scores = chunked.score_samples(X_dask)
        assert scores.chunks[0] == (250, 1, 0, 249)
        np.testing.assert_allclose(scores.compute(), in_memory.score_samples(X), rtol=1e-9)
    # The chunks were summarised in the workers, not here.
    assert set(client.run(lambda: "skmpt.estimators._dask" in __import__("sys").modules).values()) == {True}


@quiet
def test_imputer_fit_on_a_local_cluster_equals_in_memory(client):
    X = _data(holes=True)
    estimator = MaskedFactorAnalysis(3, random_state=0, device="cpu", max_epochs=40)
    chunked = _imputer(estimator).fit(da.from_array(X, chunks=((250, 1, 0, 249), 8)))
    _assert_same_imputer(chunked, _imputer(estimator).fit(X), X)


@quiet
def test_weighted_fit_on_a_local_cluster_equals_in_memory(client):
    X = _data()
    weights = np.random.RandomState(1).gamma(0.5, size=len(X))
    for cls in ESTIMATORS:
        in_memory = cls(3, random_state=0, device="cpu", max_epochs=40).fit(X, sample_weight=weights)
        chunked = cls(3, random_state=0, device="cpu", max_epochs=40).fit(
            da.from_array(X, chunks=((250, 1, 0, 249), 8)), sample_weight=da.from_array(weights, chunks=200))
        _assert_same_fit(chunked, in_memory, 1e-10)


@quiet
def test_imputer_fit_on_chunks_fills_a_feature_of_one_value_with_it_exactly():
    # The least and largest observed values are folded over the chunks (one of no rows among them).
    X = _data(holes=True)
    X[:, 2] = np.where(np.isnan(X[:, 2]), np.nan, 7.7)
    imputer = _imputer(MaskedPPCA(3, random_state=0, device="cpu", max_epochs=40)).fit(
        da.from_array(X, chunks=((250, 1, 0, 249), 8)))
    filled = imputer.transform(da.from_array(X, chunks=(100, 8))).compute()
    assert np.isnan(X[:, 2]).any() and (filled[:, 2] == 7.7).all()
