"""``skmpt impute``: tables read and written as they were, holes filled as the Python API fills them."""

import importlib.util
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pd = pytest.importorskip("pandas")

from skmpt.cli import COMMANDS, main  # noqa: E402
from skmpt.cli.impute import imputer_for  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
FAST = ["--model", "ppca", "--max-epochs", "2", "--quiet"]

TABLE = "name,a,b,c,city\nx,1.5,2,,Paris\ny,2.5,,3.0,Rome\nz,,4,5,NA\nw,4.5,5,6.5,Oslo\nv,5,6.1,7,Lima\nu,6,7,8,Rome\n"


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_impute_is_registered():
    assert COMMANDS["impute"] == "skmpt.cli.impute"


def test_csv_keeps_header_order_text_and_observed_cells_and_equals_the_api(tmp_path):
    source = _write(tmp_path / "in.csv", TABLE)
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), *FAST]) == 0
    written = out.read_text(encoding="utf-8").splitlines()
    original = TABLE.splitlines()
    assert written[0] == original[0]
    for before, after in zip(original[1:], written[1:], strict=True):
        for cell, new in zip(before.split(","), after.split(","), strict=True):
            assert new == cell or cell == "", (cell, new)
    X = np.array([[1.5, 2, np.nan], [2.5, np.nan, 3.0], [np.nan, 4, 5], [4.5, 5, 6.5], [5, 6.1, 7], [6, 7, 8]])
    expected = imputer_for("ppca", 3, 0, max_epochs=2).fit_transform(X)
    got = pd.read_csv(out)[["a", "b", "c"]].to_numpy()
    np.testing.assert_array_equal(got, expected)


def test_auto_model_is_the_default_imputer(tmp_path):
    from skmpt import MaskedImputer

    imputer = imputer_for("auto", 3, 7)
    assert imputer.random_state == 7 and imputer.estimator.candidates is None
    assert imputer.estimator.random_state == 7
    assert MaskedImputer(random_state=7).get_params()["estimator"] is None


def test_tsv_and_a_marker(tmp_path):
    source = _write(tmp_path / "in.tsv", TABLE.replace(",", "\t").replace("\t\t", "\t-999\t"))
    out = tmp_path / "out.tsv"
    assert main(["impute", str(source), "-o", str(out), "--missing-values", "-999", *FAST]) == 0
    table = pd.read_csv(out, sep="\t")
    assert not table[["a", "b", "c"]].isna().any().any() and (table[["a", "b", "c"]] != -999).all().all()


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow is not installed")
def test_parquet(tmp_path):
    frame = pd.DataFrame({"a": [1.0, np.nan, 3, 4, 5, 6], "b": [2.0, 3, np.nan, 5, 6, 7], "t": list("abcdef")})
    source = tmp_path / "in.parquet"
    frame.to_parquet(source)
    out = tmp_path / "out.parquet"
    assert main(["impute", str(source), "-o", str(out), *FAST]) == 0
    result = pd.read_parquet(out)
    assert list(result.columns) == ["a", "b", "t"] and not result.isna().any().any()
    assert (result["t"] == frame["t"]).all()


@pytest.mark.parametrize("text, message", [
    ("a,b\n1,2\n3,x\n5,6\n7,8\n", "mixes numbers and text"),
    ("a,b\n1,\n3,\n5,\n7,\n", "no observed value"),
    ("a,b\nu,v\nw,x\ny,z\nq,r\n", "no numeric column"),
    ("a,b\n1,2\n", "at least 4"),
    ("a,b,c\n1,2,3\ninf,4,5\n5,-inf,7\n7,8,9\n", "column(s) ['a', 'b'] hold infinite values ('a' at data row(s) [2]"),
    ('n,m\n"1,234",1\n"2,345",2\n,3\n"4,000",4\n5,6\n', "column 'n' holds numbers written with a thousands"),
    ("n,m\n1 000,1\n2 345,2\n,3\n4 000,4\n5,6\n", "pass --thousands SEP"),
])
def test_bad_tables_are_refused_before_fitting(tmp_path, capsys, text, message):
    source = _write(tmp_path / "in.csv", text)
    assert main(["impute", str(source), "-o", str(tmp_path / "out.csv"), *FAST]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("marker", ["-1", "-1.0", "-1.00", "-1e0"])
def test_a_numeric_marker_matches_every_spelling_of_its_value(tmp_path, marker):
    source = _write(tmp_path / "in.csv", "a,b\n-1,2\n-1.0,3\n4,5\n6,7\n8,9\n")
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), f"--missing-values={marker}", *FAST]) == 0
    rows = [line.split(",") for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows[0] == ["a", "b"] and [row[1] for row in rows[1:]] == ["2", "3", "5", "7", "9"]
    assert [row[0] for row in rows[3:]] == ["4", "6", "8"]
    assert all(float(row[0]) != -1 for row in rows[1:3])


def test_files_that_are_not_tables(tmp_path, capsys):
    binary = tmp_path / "in.csv"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe" * 20)
    assert main(["impute", str(binary), "-o", str(tmp_path / "out.csv"), *FAST]) == 1
    assert "is not a csv table" in capsys.readouterr().err
    ragged = _write(tmp_path / "ragged.csv", "a,b\n1,2\n3\n4,5\n6,7\n")
    assert main(["impute", str(ragged), "-o", str(tmp_path / "out.csv"), *FAST]) == 1
    assert "data row 2 (1-based, the header not counted) has 1 cells" in capsys.readouterr().err


def test_output_never_replaces_its_input_and_is_not_overwritten_without_force(tmp_path, capsys):
    source = _write(tmp_path / "in.csv", TABLE)
    assert main(["impute", str(source), "-o", str(source), "--force", *FAST]) == 2
    assert source.read_text(encoding="utf-8") == TABLE
    out = _write(tmp_path / "out.csv", "keep")
    assert main(["impute", str(source), "-o", str(out), *FAST]) == 2
    assert out.read_text(encoding="utf-8") == "keep"
    assert main(["impute", str(source), "-o", str(tmp_path / "out.xyz"), *FAST]) == 2
    assert "--format" in capsys.readouterr().err


CELLS = st.one_of(st.integers(-99, 99).map(str), st.floats(-50, 50, allow_nan=False).map(lambda v: f"{v:.3f}"))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.one_of(CELLS, st.just("")), min_size=3, max_size=3), min_size=5, max_size=9),
       st.sampled_from(["", "NaN", "NA"]))
def test_observed_cells_are_written_back_unchanged(tmp_path, rows, spelling):
    rows = [["1", "2", "3"], *rows]  # every column observed
    text = "a,b,c\n" + "\n".join(",".join(cell or spelling for cell in row) for row in rows) + "\n"
    source = _write(tmp_path / "in.csv", text)
    out = tmp_path / "out.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["impute", str(source), "-o", str(out), "--force", *FAST]) == 0
    written = [line.split(",") for line in out.read_text(encoding="utf-8").splitlines()[1:]]
    for row, new in zip(rows, written, strict=True):
        for cell, value in zip(row, new, strict=True):
            assert value == cell if cell else np.isfinite(float(value))
