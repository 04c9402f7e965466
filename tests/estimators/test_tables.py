"""DataFrames in, the same DataFrame out: MaskedImputer on tables of numbers and categories."""

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import config_context
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from skmpt import MaskedImputer, MaskedMixedMixture, MaskedModelSearch, MaskedPPCA
from skmpt.estimators.tables import MAX_AUTO_CATEGORIES, TableLayout

pd = pytest.importorskip("pandas")
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _frame(n=200, seed=0):
    """Two groups behind every column, one column of each dtype a table may hold."""
    rng = np.random.RandomState(seed)
    group = rng.randint(0, 2, n)
    noisy = np.where(rng.rand(n) < 0.9, group, 1 - group)
    return pd.DataFrame({
        "length": group * 4 + rng.randn(n),
        "width": (group * 2 + rng.randn(n)).astype(np.float32),
        "count": pd.array(rng.poisson(2 + 3 * group), dtype="Int64"),
        "species": pd.Categorical(np.where(noisy, "adelie", "gentoo"), categories=["gentoo", "adelie"]),
        "island": np.where(noisy, "biscoe", "dream").astype(object),
        "name": pd.array(np.where(noisy, "x", "y"), dtype="string"),
        "ok": pd.array(noisy == 1, dtype="boolean"),
    }, index=pd.Index(np.arange(n) * 3 + 7, name="id"))


def _holes(frame, rate=0.2, seed=1):
    rng = np.random.RandomState(seed)
    holed = frame.copy()
    for name in frame.columns:
        holed.loc[rng.rand(len(frame)) < rate, name] = None
    return holed


def _imputer(**params):
    return MaskedImputer(MaskedMixedMixture(2, random_state=0), random_state=0, **params)


def test_the_same_table_comes_back_with_its_holes_filled():
    truth = _frame()
    holed = _holes(truth)
    out = _imputer().set_output(transform="pandas").fit_transform(holed)
    assert list(out.columns) == list(holed.columns) and out.index.equals(holed.index)
    assert list(out.dtypes) == list(holed.dtypes)
    assert not out.isna().any().any()
    observed = holed.notna()
    for name in holed.columns:
        assert out[name][observed[name]].equals(holed[name][observed[name]]), name
    assert set(out["island"]) <= {"biscoe", "dream"} and set(out["species"]) <= {"gentoo", "adelie"}
    # the groups are nearly known from the other columns: categorical holes are mostly right
    for name in ("species", "island", "name", "ok"):
        hole = holed[name].isna()
        assert (out[name][hole] == truth[name][hole]).mean() > 0.8, name
    assert (out["count"][holed["count"].isna()] >= 0).all()


@pytest.mark.parametrize("columns", [pd.Index(["a", "b", "c"], name="feature"), pd.RangeIndex(3),
                                     pd.Index([10, 20, 30], name="year")])
def test_the_columns_keep_their_labels_type_and_name(columns):
    # scikit-learn's set_output wrapper assigns get_feature_names_out to the columns: their name was
    # lost and integer labels became objects.
    rng = np.random.RandomState(0)
    values = np.where(rng.rand(60, 3) < 0.2, np.nan, rng.randn(60, 3))
    holed = pd.DataFrame(values, columns=columns, index=pd.Index(np.arange(60) + 100, name="id"))
    imputer = MaskedImputer(MaskedPPCA(1, random_state=0), random_state=0, fallback=None)
    out = imputer.set_output(transform="pandas").fit_transform(holed)
    pd.testing.assert_index_equal(out.columns, holed.columns, exact=True)
    pd.testing.assert_index_equal(out.index, holed.index, exact=True)
    pd.testing.assert_frame_equal(out[holed.notna()], holed)
    np.testing.assert_array_equal(out.to_numpy(), clone(imputer).set_output(transform="default").fit_transform(holed))
    with config_context(transform_output="pandas"):  # the global choice too
        pd.testing.assert_frame_equal(clone(imputer).set_output(transform=None).fit_transform(holed), out)
    with warnings.catch_warnings():  # scikit-learn's "X does not have valid feature names", for string labels
        warnings.simplefilter("ignore", UserWarning)
        array = imputer.transform(values)  # fitted on a table, given an array: the names of the fit, no index
    assert list(array.columns) == list(holed.columns) and array.index.equals(pd.RangeIndex(60))
    with pytest.raises(ValueError, match="'default', 'pandas', 'polars' or None"):
        imputer.set_output(transform="numpy")


def test_default_output_is_an_object_array_and_the_choice_is_a_mixed_mixture():
    holed = _holes(_frame())
    imputer = MaskedImputer(random_state=0).fit(holed)
    assert isinstance(imputer.estimator_, MaskedMixedMixture)
    assert imputer.search_.cv_results_["family"][0] == "mixed"
    out = imputer.transform(holed)
    assert out.dtype == object and out.shape == holed.shape
    assert set(out[:, 4]) <= {"biscoe", "dream"}


@settings(max_examples=15)
@given(seed=st.integers(0, 10_000), rate=st.sampled_from([0.1, 0.3, 0.5]), posterior=st.booleans())
def test_observed_cells_and_dtypes_are_kept_for_any_table_and_hole_pattern(seed, rate, posterior):
    rng = np.random.RandomState(seed)
    n = int(rng.randint(12, 40))
    frame = _holes(_frame(n, seed=seed), rate=rate, seed=seed + 1)
    for name in frame.columns:  # every column keeps something observed
        if frame[name].isna().all():
            frame.loc[frame.index[0], name] = _frame(n, seed=seed)[name].iloc[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a column may hold one category in a small table
        out = _imputer(sample_posterior=posterior).set_output(transform="pandas").fit_transform(frame)
    assert list(out.dtypes) == list(frame.dtypes) and out.index.equals(frame.index)
    assert not out.isna().any().any()
    for name in frame.columns:
        seen = frame[name].notna()
        assert out[name][seen].equals(frame[name][seen]), name
        if isinstance(frame[name].dtype, pd.CategoricalDtype) or frame[name].dtype == object:
            assert set(out[name]) <= set(frame[name].dropna()), name


def test_fit_on_one_table_transform_another():
    train, test = _frame(300, seed=0), _frame(100, seed=5)
    holed = test.copy()
    holed["species"] = pd.Categorical([None] * len(test), categories=["gentoo", "adelie"])
    imputer = _imputer().set_output(transform="pandas").fit(_holes(train))
    out = imputer.transform(holed)
    assert (out["species"] == test["species"]).mean() > 0.8
    # the model learned at fit, not on the rows it is given: rows are imputed alone as in a batch
    alone = pd.concat([imputer.transform(holed.iloc[[i]]) for i in range(5)])
    assert alone.equals(out.iloc[:5])


def test_sample_posterior_draws_categories_of_the_column():
    holed = _holes(_frame())
    out = _imputer(sample_posterior=True).set_output(transform="pandas").fit_transform(holed)
    assert set(out["island"]) <= {"biscoe", "dream"}
    assert out["ok"].dtype == "boolean" and not out["ok"].isna().any()


def test_an_unseen_category_at_transform_names_the_column():
    imputer = _imputer().fit(_holes(_frame()))
    new = _frame(5)
    new.loc[new.index[0], "island"] = "torgersen"
    with pytest.raises(ValueError, match=r"Column 'island' holds \['torgersen'\], categories not seen at fit"):
        imputer.transform(new)


def test_a_column_of_one_category_is_warned_about_by_name():
    frame = _frame()
    frame["island"] = "biscoe"
    with pytest.warns(UserWarning, match="Column 'island' is categorical with one category"):
        _imputer().fit(frame)


def test_an_identifier_column_is_refused_by_name_unless_declared():
    frame = _frame(MAX_AUTO_CATEGORIES + 1)
    frame["key"] = [f"row{i}" for i in range(len(frame))]
    with pytest.raises(ValueError, match=r"Column 'key' holds 1001 distinct values: an identifier"):
        TableLayout(frame)
    assert len(TableLayout(frame, {"key": "categorical"}).categories[-1]) == MAX_AUTO_CATEGORIES + 1


def test_a_column_of_mostly_distinct_text_is_warned_about_as_an_identifier_unless_declared():
    frame = _frame(200)
    frame["key"] = [f"person_{i:04d}" for i in range(len(frame))]
    with pytest.warns(UserWarning, match=r"Column 'key' holds 200 distinct values in 200 observed cells: more like an "
                                         r"identifier"):
        TableLayout(frame)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        TableLayout(frame, {"key": "categorical"})  # declared: modelled without a word
        TableLayout(frame.iloc[:8])  # eight values say nothing of a key
        TableLayout(frame.assign(key=pd.Categorical(frame["key"])))  # categories the user gave
    # numbers in an object column (pd.NA among floats makes one): the warning says how to model them as numbers
    numbers = pd.Series([pd.NA, *np.random.RandomState(0).randn(199).round(3)], dtype=object)
    with pytest.warns(UserWarning, match=r"Its values are numbers .* column_types=\{'key': 'numeric'\}"):
        TableLayout(frame.assign(key=numbers))
    layout = TableLayout(frame.assign(key=numbers), {"key": "numeric"})
    assert layout.columns.index("key") not in layout.categorical


def test_column_types_override_the_dtypes():
    frame = _frame()
    frame["rating"] = np.random.RandomState(0).randint(1, 4, len(frame))
    layout = TableLayout(frame, {"rating": "categorical", "island": "categorical"})
    assert frame.columns[layout.categorical].tolist() == ["species", "island", "name", "ok", "rating"]
    with pytest.raises(ValueError, match="column_types names"):
        TableLayout(frame, {"nope": "numeric"})
    with pytest.raises(ValueError, match=r"column_types\['rating'\] must be one of"):
        TableLayout(frame, {"rating": "ordinal"})
    with pytest.raises(ValueError, match="X is not one"):
        MaskedImputer(column_types={"a": "numeric"}).fit(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="dtype datetime64"):
        TableLayout(pd.DataFrame({"when": pd.to_datetime(["2020-01-01", "2021-01-01"])}))


def test_a_numeric_only_estimator_is_refused_for_categories():
    with pytest.raises(ValueError, match=r"Column\(s\) \['species', 'island', 'name', 'ok'\] of X are categorical"):
        MaskedImputer(MaskedPPCA(1)).fit(_holes(_frame()))
    # a search's estimator__n_components on MaskedImputer() makes it a MaskedPPCA: the error says how it came there
    with pytest.raises(ValueError, match=r"makes it a MaskedPPCA: set estimator=MaskedMixedMixture"):
        MaskedImputer().set_params(estimator__n_components=2).fit(_holes(_frame()))


def test_feature_names_indicator_column_transformer_and_pipeline():
    holed = _holes(_frame())
    imputer = _imputer(add_indicator=True).set_output(transform="pandas").fit(holed)
    out = imputer.transform(holed)
    assert list(out.columns) == list(imputer.get_feature_names_out())
    assert list(out.columns[:7]) == list(holed.columns) and out.columns[7].startswith("missingindicator_")
    columns = ["length", "species", "island"]
    transformer = ColumnTransformer([("impute", _imputer(), columns)], remainder="drop").set_output(transform="pandas")
    result = transformer.fit_transform(holed)
    assert list(result.columns) == [f"impute__{c}" for c in columns]
    assert result["impute__species"].dtype == holed["species"].dtype and not result.isna().any().any()
    y = _frame()["species"] == "adelie"
    encode = ColumnTransformer([("one_hot", OneHotEncoder(), ["species", "island", "name", "ok"])],
                               remainder="passthrough")
    pipeline = make_pipeline(_imputer().set_output(transform="pandas"), encode, LogisticRegression(max_iter=500))
    assert pipeline.fit(holed, y).score(holed, y) > 0.8


def test_numeric_tables_keep_their_array_output():
    rng = np.random.RandomState(0)
    frame = pd.DataFrame(rng.randn(60, 3), columns=list("abc"))
    frame.iloc[rng.rand(60, 3) < 0.2] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        imputer = MaskedImputer(MaskedPPCA(1, max_epochs=5, random_state=0)).fit(frame)
        array = imputer.transform(frame)
        assert array.dtype == np.float64
        warnings.simplefilter("ignore", UserWarning)  # an array where fit saw names: scikit-learn's warning
        np.testing.assert_array_equal(array, imputer.transform(frame.to_numpy()))
        out = imputer.set_output(transform="pandas").transform(frame)
    assert list(out.dtypes) == [np.float64] * 3 and np.array_equal(out.to_numpy(), array)



@pytest.mark.parametrize("dtype", ["Int64", np.int64])
def test_the_output_container_does_not_change_the_values(dtype):
    # A hole of an integer column came back rounded in a DataFrame (its dtype) and unrounded in the
    # array of the same transform: the container decided the number.
    rng = np.random.RandomState(0)
    a = rng.randn(80)
    frame = pd.DataFrame({"a": a, "k": pd.array(np.round(10 + 3 * a + rng.randn(80)).astype(int), dtype=dtype)})
    holes = frame.copy()
    holes.loc[[4, 5], "a"] = np.nan
    if dtype == "Int64":
        holes.loc[[1, 2, 3], "k"] = pd.NA
    imputer = MaskedImputer(random_state=0).fit(holes)
    new = frame.assign(k=frame["k"].astype("Int64" if dtype == "Int64" else np.float64))  # int64 holds no NaN
    new.loc[[1, 2, 3], "k"] = pd.NA if dtype == "Int64" else np.nan
    for table in (holes, new):
        array = imputer.set_output(transform="default").transform(table)
        out = imputer.set_output(transform="pandas").transform(table)
        assert array.dtype == np.float64
        np.testing.assert_array_equal(array, out.to_numpy(dtype=np.float64))
        assert np.array_equal(array[:, 1], np.round(array[:, 1]))

def test_the_output_choice_survives_clone_and_pipelines_and_follows_the_global_configuration():
    frame = _holes(_frame(60))
    small = dict(estimator=MaskedMixedMixture(1, random_state=0), random_state=0)
    assert isinstance(clone(MaskedImputer(**small).set_output(transform="pandas")).fit_transform(frame), pd.DataFrame)
    pipeline = clone(make_pipeline(MaskedImputer(**small)).set_output(transform="pandas"))
    assert isinstance(pipeline.fit_transform(frame), pd.DataFrame)
    with config_context(transform_output="pandas"):
        assert isinstance(MaskedImputer(**small).fit_transform(frame), pd.DataFrame)
        # the estimator's own choice wins over the global one
        assert isinstance(MaskedImputer(**small).set_output(transform="default").fit_transform(frame), np.ndarray)
    assert isinstance(MaskedImputer(**small).fit_transform(frame), np.ndarray)


def test_a_count_column_is_a_poisson_and_comes_back_as_integers():
    truth = _frame(300)
    holed = _holes(truth)
    imputer = MaskedImputer(random_state=0, column_types={"count": "count"}).set_output(transform="pandas")
    out = imputer.fit_transform(holed)
    assert imputer.estimator_.count_features_.tolist() == [2] and out["count"].dtype == "Int64"
    hole = holed["count"].isna()
    assert (out["count"][hole] >= 0).all()
    # the groups' rates are 2 and 5: the filled counts follow the group (Poisson noise caps the correlation at
    # about 0.6; a fill that ignored the other columns would be uncorrelated)
    assert np.corrcoef(out["count"][hole].astype(float), truth["count"][hole].astype(float))[0, 1] > 0.3
    bad = holed.copy()
    bad.loc[bad.index[0], "count"] = -3
    with pytest.raises(ValueError, match=r"Column 'count' holds counts, non-negative integers; it holds \[-3.0\]"):
        imputer.transform(bad)


def test_an_integer_the_columns_dtype_cannot_hold_is_refused_not_wrapped_around():
    a = np.random.RandomState(0).uniform(0, 1, 100)
    frame = pd.DataFrame({"a": a, "v": pd.array(np.round(a * 120), dtype="Int8")})
    frame.loc[0, "a"], frame.loc[0, "v"] = 1.2, pd.NA  # its conditional mean is about 143, beyond int8's 127
    imputer = MaskedImputer(MaskedMixedMixture(1), fallback=None).set_output(transform="pandas")
    with pytest.raises(ValueError, match=r"'v' has dtype Int8, which holds -128 to 127"):
        imputer.fit_transform(frame)
    assert imputer.fit_transform(frame.astype({"v": "Int64"})).loc[0, "v"] > 127


@pytest.mark.parametrize("column", [pd.Categorical([10, 20, 30] * 20), pd.array([True, False, False] * 20,
                                                                                 dtype="boolean")])
def test_a_column_whose_dtype_cannot_hold_numbers_is_refused_as_numeric(column):
    frame = pd.DataFrame({"a": np.arange(60.0), "c": column})
    frame.loc[:4, "c"] = np.nan  # as numbers their holes came back empty (a category) or True (any mean but 0)
    with pytest.raises(ValueError, match=r"Column 'c' has dtype .* cannot hold the numeric values"):
        MaskedImputer(MaskedMixedMixture(1), column_types={"c": "numeric"}).fit(frame)


def test_repeated_column_names_are_refused_by_name():
    frame = pd.DataFrame(np.random.RandomState(0).randn(20, 2), columns=["a", "a"])
    with pytest.raises(ValueError, match=r"more than one column named \['a'\]"):
        MaskedImputer().fit(frame)


def test_a_numeric_marker_in_a_table_of_one_dtype():
    X = np.random.RandomState(0).randn(100, 3)
    X[:10, 0] = -1.0
    out = MaskedImputer(MaskedPPCA(1), missing_values=-1.0).set_output(transform="pandas").fit_transform(
        pd.DataFrame(X, columns=list("abc")))
    assert (out["a"][:10] != -1.0).all() and np.array_equal(out.to_numpy()[10:], X[10:])


def test_a_numeric_marker_beside_pandas_na_in_a_nullable_column():
    rng = np.random.RandomState(0)
    frame = pd.DataFrame({"a": rng.randn(60), "b": pd.array(rng.randint(0, 9, 60), dtype="Int64"),
                          "c": pd.array(rng.randn(60), dtype="Float64")})
    frame.loc[3, "a"], frame.loc[5, "b"], frame.loc[[6, 7], "c"] = -999, pd.NA, [pd.NA, -999]
    out = MaskedImputer(MaskedPPCA(1), missing_values=-999).set_output(transform="pandas").fit_transform(frame)
    filled = [(3, "a"), (5, "b"), (6, "c"), (7, "c")]
    assert all(pd.notna(out.loc[row, name]) and out.loc[row, name] != -999 for row, name in filled)
    assert out.dtypes.tolist() == frame.dtypes.tolist()
    kept = frame.drop(index=[3, 5, 6, 7])
    pd.testing.assert_frame_equal(out.drop(index=[3, 5, 6, 7]), kept)


def test_a_numeric_marker_is_a_hole_in_categorical_columns_too_but_never_a_boolean():
    # it had been learned as a category: its cells came back as the marker, and NaN holes could take it
    rng = np.random.RandomState(2)
    group = rng.randint(0, 2, 200)
    frame = pd.DataFrame({"x": group * 3.0 + rng.randn(200), "code": np.where(group == 1, 20, 10),
                          "kind": pd.Categorical(np.where(group == 1, 7, 3)), "flag": group == 1})
    marked = rng.rand(200) < 0.3
    frame.loc[marked, "code"] = -1
    frame["kind"] = frame["kind"].cat.add_categories([-1])
    frame.loc[marked, "kind"] = -1
    imputer = MaskedImputer(MaskedMixedMixture(2, random_state=0), missing_values=-1, random_state=0,
                            column_types={"code": "categorical"}).set_output(transform="pandas")
    out = imputer.fit_transform(frame)
    assert imputer.table_.categories[:2] == [[10, 20], [3, 7]]
    assert set(out.loc[marked, "code"]) <= {10, 20} and set(out.loc[marked, "kind"]) <= {3, 7}
    assert (out.loc[marked, "code"] == np.where(group[marked] == 1, 20, 10)).mean() > 0.9  # x tells the group
    pd.testing.assert_frame_equal(out[~marked], frame[~marked])  # True == 1, and flag is no marker's
    assert out["flag"].tolist() == frame["flag"].tolist()


def test_column_kinds_a_given_model_names_otherwise_than_the_table_are_refused():
    # the table's kinds had replaced the model's in silence: a count modelled as a Gaussian, filled with fractions
    rng = np.random.RandomState(0)
    group = rng.randint(0, 2, 100)
    frame = pd.DataFrame({"x": group * 3.0 + rng.randn(100), "visits": rng.poisson(0.5 + 3 * group).astype(float),
                          "grp": np.array(["a", "b"])[group]})
    frame.loc[rng.rand(100) < 0.2, "visits"] = np.nan
    with pytest.raises(ValueError, match=r"count_features=\[1\]\) makes column\(s\) \['visits'\] count, where the "
                                         r"table's dtypes and column_types make \[\] so: .* column_types=\{'visits': "
                                         r"'count'\}"):
        MaskedImputer(MaskedMixedMixture(2, count_features=[1])).fit(frame)
    with pytest.raises(ValueError, match=r"categorical_features=\[0\]\) makes column\(s\) \['x'\] categorical"):
        MaskedImputer(MaskedModelSearch([MaskedMixedMixture(2, categorical_features=[0])])).fit(frame)
    agreeing = MaskedMixedMixture(2, count_features=[1], categorical_features=[2], random_state=0)
    out = MaskedImputer(agreeing, column_types={"visits": "count"}).set_output(transform="pandas").fit_transform(frame)
    assert (out["visits"] == np.round(out["visits"])).all()


def test_negative_imputations_in_an_unsigned_column_point_to_a_count():
    # the advice had been a wider dtype (Int64), which then held the negative number of children drawn
    rng = np.random.RandomState(16)
    group = rng.randint(0, 2, 150)
    frame = pd.DataFrame({"x": group * 3.0 + rng.randn(150), "c": np.array(["a", "b"])[group],
                          "kids": pd.array(rng.poisson(0.3 + 2 * group), dtype="UInt8")})
    frame.loc[rng.rand(150) < 0.3, "kids"] = pd.NA
    imputer = MaskedImputer(MaskedMixedMixture(2, random_state=0), sample_posterior=True, random_state=0)
    with pytest.raises(ValueError, match=r"Column 'kids' has dtype UInt8, which holds no negative number; .* "
                                         r"Declare it a count, non-negative integers \(column_types=\{'kids': 'count'"):
        for seed in range(5):  # a draw below zero, in one of these
            imputer.set_params(random_state=seed).set_output(transform="pandas").fit_transform(frame)
    out = imputer.set_params(column_types={"kids": "count"}).fit_transform(frame)
    assert out["kids"].dtype == frame["kids"].dtype and (out["kids"] >= 0).all()


def test_categories_are_counted_by_the_values_observed():
    # a category dtype keeping 1500 categories of a larger table was refused as an identifier; one observed
    # category among its dtype's was not warned about
    rng = np.random.RandomState(0)
    zones = pd.Categorical(rng.choice(["z1", "z2", "z3"], 300), categories=[f"z{i}" for i in range(1500)])
    frame = pd.DataFrame({"zone": zones, "x": rng.randn(300)})
    frame.loc[rng.rand(300) < 0.2, "zone"] = np.nan
    imputer = MaskedImputer(MaskedMixedMixture(1, random_state=0)).set_output(transform="pandas")
    out = imputer.fit_transform(frame)
    assert len(imputer.table_.categories[0]) == 1500 and out["zone"].dtype == frame["zone"].dtype
    assert set(out["zone"]) <= {"z1", "z2", "z3"}
    frame["zone"] = pd.Categorical(["z1"] * 300, categories=["z0", "z1"])
    frame.loc[::5, "zone"] = np.nan
    with pytest.warns(UserWarning, match=r"Column 'zone' is categorical with one category \('z1'\)"):
        MaskedImputer(MaskedMixedMixture(1, random_state=0)).fit(frame)


def test_a_pyarrow_dictionary_column_is_categorical():
    # read_parquet(dtype_backend="pyarrow")'s category: it had been refused as neither numeric nor categorical
    pa = pytest.importorskip("pyarrow")
    rng = np.random.RandomState(0)
    group = rng.randint(0, 2, 120)
    frame = pd.DataFrame({"x": group * 3.0 + rng.randn(120), "colour": np.array(["red", "blue"])[group]})
    frame.loc[rng.rand(120) < 0.2, "colour"] = None
    frame = frame.astype({"x": "double[pyarrow]", "colour": pd.ArrowDtype(pa.dictionary(pa.int8(), pa.string()))})
    out = MaskedImputer(MaskedMixedMixture(2, random_state=0), random_state=0).set_output(
        transform="pandas").fit_transform(frame)
    assert out["colour"].dtype == frame["colour"].dtype and out["colour"].notna().all()
    assert out["colour"][frame["colour"].notna()].tolist() == frame["colour"].dropna().tolist()


def test_text_columns_given_to_an_estimator_of_numbers_are_refused_by_name():
    frame = pd.DataFrame({"x": np.arange(40.0), "c": ["red", "blue"] * 20, "d": pd.Categorical(["p", "q"] * 20)})
    for estimator in (MaskedMixedMixture(2, categorical_features=[1]), MaskedPPCA(1)):
        with pytest.raises(ValueError, match=r"X has column\(s\) that are not numbers: \[\('c', .*\), \('d', "
                                             r"'category'\)\].*MaskedImputer reads"):
            estimator.fit(frame)
    codes = frame.assign(c=(frame["c"] == "red").astype(int), d=pd.Categorical([0, 1] * 20))
    assert MaskedMixedMixture(2, categorical_features=[1, 2], random_state=0).fit(codes).n_features_in_ == 3


def test_indicators_beside_multiindex_columns_raise_no_pandas_deprecation():
    rng = np.random.RandomState(0)
    frame = pd.DataFrame({("a", "x"): rng.randn(60), ("b", "c"): ["p", "q"] * 30})
    frame.iloc[3, 0], frame.iloc[5, 1] = np.nan, None
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        warnings.simplefilter("error", FutureWarning)
        out = _imputer(add_indicator=True).set_output(transform="pandas").fit_transform(frame)
    assert out.shape == (60, 4) and out.iloc[:, 2:].sum().tolist() == [1, 1]


def test_a_category_the_given_dtype_cannot_hold_comes_back_in_the_fits_dtype():
    rng = np.random.RandomState(0)
    a = rng.randn(100)
    frame = pd.DataFrame({"a": a, "c": pd.Categorical(np.where(a < -0.5, "x", np.where(a < 0.5, "y", "z")))})
    imputer = MaskedImputer(MaskedMixedMixture(3, random_state=0)).set_output(transform="pandas").fit(frame)
    # the holes' column without the category "z" (and, below, read as float64: missing in every row)
    out = imputer.transform(pd.DataFrame({"a": [3.0], "c": pd.Categorical([None], categories=["x", "y"])}))
    assert out["c"].tolist() == ["z"] and out["c"].dtype == frame["c"].dtype
    out = imputer.transform(pd.DataFrame({"a": [3.0, -3.0], "c": [np.nan, np.nan]}))
    assert out["c"].tolist() == ["z", "x"] and out["c"].dtype == frame["c"].dtype
    # a boolean column and one of integer categories, missing in every new row: they had come back as floats
    flags = frame.assign(b=a > 0, k=pd.Categorical(np.where(a > 0, 2, 1)))
    imputer = MaskedImputer(MaskedMixedMixture(2, random_state=0)).set_output(transform="pandas").fit(flags)
    out = imputer.transform(pd.DataFrame({"a": [3.0, -3.0], "c": ["z", "x"], "b": np.nan, "k": np.nan}))
    assert out["b"].tolist() == [True, False] and out["b"].dtype == bool
    assert out["k"].tolist() == [2, 1] and out["k"].dtype == flags["k"].dtype
    floats = pd.DataFrame({"a": a, "k": np.where(a < 0, 1.0, 2.0)})
    floats.loc[:9, "k"] = np.nan
    out = MaskedImputer(MaskedMixedMixture(2, random_state=0), column_types={"k": "categorical"}).set_output(
        transform="pandas").fit_transform(floats)
    assert set(out["k"][:10]) <= {1.0, 2.0} and out["k"].dtype == np.float64


@pytest.mark.parametrize("blank", [np.nan, pd.NA])
def test_a_category_missing_in_every_new_row_comes_back_in_a_fits_dtype_that_holds_no_hole(blank):
    # the fit's int64, bool or pyarrow dictionary dtype, cast a column of holes, had failed in pandas
    rng = np.random.RandomState(0)
    a = rng.randn(100)
    frame = pd.DataFrame({"a": a, "code": np.where(a > 0, 20, 10), "b": a > 0, "d": np.where(a > 0, "u", "v")})
    if blank is pd.NA:
        pa = pytest.importorskip("pyarrow")
        frame["d"] = frame["d"].astype(pd.ArrowDtype(pa.dictionary(pa.int32(), pa.string())))
    imputer = MaskedImputer(MaskedMixedMixture(2, random_state=0), column_types={"code": "categorical"})
    imputer.set_output(transform="pandas").fit(frame)
    new = pd.DataFrame({"a": [3.0, -3.0], "code": [blank, blank], "b": [blank, blank], "d": [blank, blank]})
    if blank is pd.NA:
        new = new.astype({"code": "Int64", "b": "boolean"})
    out = imputer.transform(new)
    assert out["code"].tolist() == [20, 10] and out["b"].tolist() == [True, False]
    assert out["d"].tolist() == ["u", "v"] and list(out.dtypes) == list(frame.dtypes)


@pytest.mark.parametrize("dtype", ["boolean", "category", "string"])
def test_a_numeric_column_given_a_dtype_that_cannot_hold_numbers_is_refused_by_name(dtype):
    # a float 0/1 column given as boolean had its holes filled with True for any mean but 0, as a category
    # it kept its holes, as strings it got '0.42'
    rng = np.random.RandomState(0)
    frame = pd.DataFrame({"a": rng.randn(100), "smoker": (rng.rand(100) < 0.3).astype(float)})
    imputer = MaskedImputer(MaskedPPCA(1, random_state=0)).fit(frame)
    new = pd.DataFrame({"a": [0.1, 0.2], "smoker": [1.0, None]}).astype({"smoker": dtype})
    with pytest.raises(ValueError, match="Column 'smoker' was numeric at fit"):
        imputer.transform(new)


def test_an_empty_categorical_column_kept_leaves_the_others_their_kinds():
    rng = np.random.RandomState(0)
    frame = pd.DataFrame({"e": pd.Categorical([None] * 60, categories=["u", "v"]), "n": rng.randint(0, 2, 60) * 1.0,
                          "c": rng.choice(["x", "y", "z"], 60), "g": rng.randn(60)})
    frame.loc[:9, "n"] = np.nan
    imputer = MaskedImputer(MaskedMixedMixture(2, random_state=0), keep_empty_features=True).fit(frame)
    assert imputer.estimator_.categorical_features == [1]  # "c" among the modelled n, c, g
    assert len(np.unique(imputer.transform(frame)[:10, 1].astype(float))) > 1  # "n" by its mean, not a mode


@pytest.mark.parametrize("dtype", ["boolean", "bool[pyarrow]"])
def test_an_empty_boolean_column_kept_takes_a_value_of_its_dtype(dtype):
    # A boolean dtype's values are False and True, as a category dtype's are its categories: an empty column of
    # it had been refused as having no category to fill it with, keep_empty_features=True or not.
    if dtype == "bool[pyarrow]":
        pytest.importorskip("pyarrow")
    rng = np.random.RandomState(0)
    frame = pd.DataFrame({"x": rng.randn(60), "y": rng.randn(60), "e": pd.array([None] * 60, dtype=dtype)})
    out = MaskedImputer(random_state=0, keep_empty_features=True).set_output(transform="pandas").fit_transform(frame)
    assert out["e"].dtype == frame["e"].dtype and (out["e"] == False).all()  # noqa: E712 (the first value, as "u")
    with pytest.raises(ValueError, match=r"Feature\(s\) \['e'\] are missing in every training sample"):
        MaskedImputer(random_state=0).fit(frame)


def test_a_table_of_categories_alone_is_imputed_by_a_latent_class_model():
    rng = np.random.RandomState(0)
    group = rng.randint(0, 2, 150)
    truth = pd.DataFrame({"a": np.where(rng.rand(150) < 0.9, group, 1 - group).astype(str),
                          "b": pd.Categorical(np.where(rng.rand(150) < 0.9, group, 1 - group), categories=[1, 0]),
                          "c": pd.array(np.where(rng.rand(150) < 0.9, group, 1 - group) == 1, dtype="boolean")})
    holed = _holes(truth, rate=0.2)
    out = MaskedImputer(random_state=0).set_output(transform="pandas").fit_transform(holed)
    assert out.dtypes.tolist() == truth.dtypes.tolist() and not out.isna().any().any()
    observed = holed.notna().to_numpy()
    assert (out.to_numpy()[observed] == holed.to_numpy()[observed]).all()
    # the columns share their group: the others predict a hole far better than the column's mode
    wrong = (out.to_numpy()[~observed] != truth.to_numpy()[~observed]).mean()
    mode = (holed.mode().iloc[0].to_numpy()[np.nonzero(~observed)[1]] != truth.to_numpy()[~observed]).mean()
    assert wrong < 0.2 and wrong < mode / 2  # 0.14 against 0.35 here


def test_a_single_categorical_column_is_imputed_with_the_default_fallback():
    frame = pd.DataFrame({"colour": pd.Series(["red", "blue", None, "blue"] * 20, dtype=object)})
    out = MaskedImputer(random_state=0).set_output(transform="pandas").fit_transform(frame)
    assert out["colour"].notna().all() and out["colour"][frame["colour"].notna()].equals(frame["colour"].dropna())


def test_non_string_column_labels_come_back_as_they_were():
    rng = np.random.RandomState(0)
    frame = pd.DataFrame({3: rng.randn(60), 1: rng.randn(60), 2: rng.choice(["x", "y"], 60)})
    frame.loc[:5, 3] = np.nan
    imputer = MaskedImputer(MaskedMixedMixture(1)).set_output(transform="pandas")
    assert imputer.fit_transform(frame).columns.tolist() == [3, 1, 2]
    tuples = frame.set_axis(pd.MultiIndex.from_tuples([("a", 1), ("a", 2), ("b", 1)]), axis=1)
    assert imputer.fit(tuples).get_feature_names_out().tolist() == [("a", 1), ("a", 2), ("b", 1)]
    assert imputer.transform(tuples).columns.equals(tuples.columns)
    # with the indicator, scikit-learn's names: a next step refuses labels mixing integers and strings
    pipeline = make_pipeline(imputer.set_params(add_indicator=True), OneHotEncoder(handle_unknown="ignore"))
    names = pipeline.fit(frame)[0].get_feature_names_out().tolist()
    assert names == ["x0", "x1", "x2", "missingindicator_x0"] and pipeline.transform(frame).shape[0] == 60


@pytest.mark.parametrize(("column", "message"), [
    (np.arange(30) * (1 + 1j), r"Column 'z' has dtype complex128: no model imputes complex numbers"),
    ([[1, 2]] * 30, r"Column 'z' holds list values \(\[1, 2\]\), which cannot be categories"),
])
def test_columns_no_model_can_hold_are_refused_by_name(column, message):
    frame = pd.DataFrame({"a": np.arange(30.0), "z": column})
    frame.loc[:2, "a"] = np.nan
    with pytest.raises(ValueError, match=message):
        MaskedImputer().fit(frame)


def test_an_indicator_column_named_as_a_column_of_the_table_is_refused():
    rng = np.random.RandomState(0)
    frame = pd.DataFrame({"f": rng.randn(50), "c": rng.choice(["x", "y"], 50), "missingindicator_f": 7.0})
    frame.loc[:4, "f"] = np.nan  # the indicator of "f" would have overwritten the user's column
    with pytest.raises(ValueError, match=r"add_indicator=True names columns \['missingindicator_f'\]"):
        MaskedImputer(MaskedMixedMixture(2, random_state=0), add_indicator=True).fit(frame)


def test_an_integer_column_at_fit_is_filled_with_integers_where_it_comes_as_floats():
    rng = np.random.RandomState(0)
    a = rng.randn(100)
    frame = pd.DataFrame({"a": a, "k": np.round(3 * a).astype(np.int64) + 10, "c": rng.choice(["x", "y"], 100)})
    imputer = MaskedImputer(MaskedMixedMixture(2, random_state=0)).set_output(transform="pandas").fit(frame)
    new = pd.DataFrame({"a": [0.33, -0.71], "k": [np.nan, np.nan], "c": ["x", "y"]})  # int64 holds no NaN
    filled = imputer.transform(new)["k"]
    assert (filled == np.round(filled)).all() and filled.dtype == np.float64


@pytest.mark.parametrize("estimator", [MaskedPPCA(1, random_state=0), MaskedMixedMixture(2, random_state=0)])
def test_an_array_after_a_tables_fit_gets_whole_numbers_in_its_integer_and_count_columns(estimator):
    # they had come back as the model's fractions (an array took none of the table's rounding)
    rng = np.random.RandomState(0)
    a = rng.randn(200)
    frame = pd.DataFrame({"a": a, "k": np.round(3 * a).astype(np.int64) + 10, "v": rng.poisson(np.exp(a))})
    kinds = {"v": "count"} if isinstance(estimator, MaskedMixedMixture) else None
    imputer = MaskedImputer(estimator, column_types=kinds).fit(frame)
    new = np.array([[0.33, np.nan, np.nan], [np.nan, 12.0, np.nan], [-0.71, np.nan, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # scikit-learn's: X has no feature names
        filled = imputer.transform(new)
    assert np.array_equal(filled[:, 1:], np.round(filled[:, 1:]))
    assert filled[1, 0] != np.round(filled[1, 0]) and filled[1, 1] == 12.0 and filled[2, 2] == 1.0


def test_errors_about_columns_name_them():
    frame = pd.DataFrame({"a": np.arange(20.0), "s": ["u", "v"] * 10, "e": [np.nan] * 20, "c": ["x", "y"] * 10})
    with pytest.raises(ValueError, match=r"Column 's' is read as numbers"):
        MaskedImputer(MaskedMixedMixture(1), column_types={"s": "numeric"}).fit(frame.drop(columns="e"))
    with pytest.raises(ValueError, match=r"Feature\(s\) \['e'\] are missing in every training sample"):
        MaskedImputer(MaskedMixedMixture(1)).fit(frame.drop(columns="s"))
    infinite = frame.drop(columns=["s", "e"]).assign(b=np.inf)
    with pytest.raises(ValueError, match=r"contains infinity in column\(s\) \['b'\]"):
        MaskedImputer(MaskedMixedMixture(1)).fit(infinite)


def test_a_date_declared_numeric_is_imputed_as_a_date():
    frame = pd.DataFrame({"a": np.arange(60.0), "d": pd.date_range("2020-01-01", periods=60), "c": ["x", "y"] * 30})
    frame.loc[:4, "d"] = pd.NaT
    out = MaskedImputer(MaskedMixedMixture(1), column_types={"d": "numeric"}).set_output(
        transform="pandas").fit_transform(frame)
    assert out["d"].dtype == frame["d"].dtype and out["d"].notna().all() and out["d"][5:].equals(frame["d"][5:])


@pytest.mark.parametrize("shape", [(0, 0), (4, 0), (0, 2)])
@pytest.mark.parametrize("estimator", [MaskedImputer(), MaskedPPCA(1), MaskedMixedMixture(1)])
def test_a_table_without_rows_or_columns_is_refused_by_its_shape(estimator, shape):
    # NumPy's "at least one array or dtype is required" (no columns), or the imputer's "missing in every
    # training sample" (no rows), named something else.
    table = pd.DataFrame(np.zeros(shape), columns=[f"x{j}" for j in range(shape[1])])
    with pytest.raises(ValueError, match=rf"Found array with .*shape={re.escape(str(shape))}.* required by "):
        clone(estimator).fit(table)


@pytest.mark.parametrize(("flag", "number"), [(True, 1), (False, 0.0), (np.True_, 1)])
def test_a_boolean_and_a_number_python_takes_for_one_are_refused_as_categories(flag, number):
    # True and 1 hash alike: they became one category, and a hole took either.
    column = np.array([[flag, number, "x"][k % 3] for k in range(30)], dtype=object)
    column[[2, 5]] = None
    frame = pd.DataFrame({"a": np.arange(30.0), "m": column})
    with pytest.raises(ValueError, match=r"Column 'm' holds .* which Python takes for one value"):
        MaskedImputer(MaskedMixedMixture(1)).fit(frame)


def test_a_constant_columns_holes_are_filled_with_its_value_exactly():
    # The mixed mixture's EM divided every numeric column by one scale shared with the others, and a
    # column of 5.0 beside a category came back 5.0 and 4.999999999999999.
    rng = np.random.RandomState(1)
    frame = pd.DataFrame({"a": rng.randn(60), "c": 5.0, "b": rng.randn(60) * 3 + 1,
                          "k": pd.Categorical(rng.choice(["x", "y"], 60))})
    holed = frame.mask(rng.rand(*frame.shape) < 0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        filled = MaskedImputer(random_state=0).set_output(transform="pandas").fit_transform(holed)
    assert (filled["c"] == 5.0).all()


def _polars_frame(pl, n=150, seed=1):
    """A polars table with a column of each dtype, about 20 % of each column's cells null."""
    rng = np.random.RandomState(seed)
    group = rng.randint(0, 2, n)

    def holed(values):
        return [None if hole else value for value, hole in zip(values.tolist(), rng.rand(n) < 0.2, strict=True)]

    return pl.DataFrame({
        "length": holed(group * 4 + rng.randn(n)),
        "kids": pl.Series(holed(rng.poisson(1 + 2 * group)), dtype=pl.UInt8),
        "width": pl.Series(holed(group * 2 + rng.randn(n)), dtype=pl.Float32),
        "ok": holed(group == 1),
        "island": holed(np.where(group, "biscoe", "dream")),
        "species": pl.Series(holed(np.where(group, "adelie", "gentoo")), dtype=pl.Categorical),
        "sex": pl.Series(holed(np.where(rng.rand(n) < 0.5, "f", "m")), dtype=pl.Enum(["m", "f", "x"])),
    })


def test_a_polars_table_comes_back_in_polars_with_its_dtypes_and_the_pandas_tables_imputations():
    # a polars table had been refused ("could not convert string to float"), and a polars output
    # held its numeric columns as polars Object
    pl = pytest.importorskip("polars")
    pytest.importorskip("pyarrow")
    table = _polars_frame(pl)
    imputer = _imputer().set_output(transform="polars")
    out = imputer.fit_transform(table)
    assert isinstance(out, pl.DataFrame) and out.schema == table.schema
    assert out.null_count().sum_horizontal().item() == 0
    for name in table.columns:
        observed = table[name].is_not_null()
        assert out[name].filter(observed).equals(table[name].filter(observed)), name
    # the same table in pandas: the same model, imputations and score
    frame = table.to_pandas()
    reference = _imputer().set_output(transform="pandas").fit(frame)
    expected = reference.transform(frame)
    np.testing.assert_allclose(out["length"].to_numpy(), expected["length"].to_numpy())
    assert out["species"].cast(pl.String).to_list() == expected["species"].astype(str).tolist()
    assert imputer.score(table) == pytest.approx(reference.score(frame), rel=1e-9)
    # a pandas table with set_output(transform="polars"): the columns' dtypes, not polars Object
    numbers = _imputer().set_output(transform="polars").fit_transform(_holes(_frame())[["length", "width", "count"]])
    assert numbers.dtypes == [pl.Float64, pl.Float32, pl.Int64]
    with pytest.raises(TypeError, match="polars LazyFrame, a query not yet run: pass X.collect()"):
        _imputer().fit(table.lazy())  # it had failed in NumPy's "setting an array element with a sequence"
