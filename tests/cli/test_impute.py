"""``skmpt impute``: tables read and written as they were, holes filled as the Python API fills them."""

import os
import importlib.util
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pd = pytest.importorskip("pandas")

from skmpt.cli import COMMANDS, main  # noqa: E402
from skmpt.cli.impute import GROUPED, imputer_for  # noqa: E402

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


def test_a_table_of_categories_alone_is_imputed_and_a_numeric_family_refuses_it(tmp_path, capsys):
    rows = ["x,p", "y,q"] * 6 + [",q", "x,", "y,q"]
    source = _write(tmp_path / "in.csv", "a,b\n" + "\n".join(rows) + "\n")
    assert main(["impute", str(source), "-o", str(tmp_path / "out.csv"), "--quiet"]) == 0
    lines = (tmp_path / "out.csv").read_text().splitlines()
    assert lines[:13] == ["a,b", *rows[:12]] and lines[15] == "y,q"  # observed rows as read
    assert lines[13:15] == ["y,q", "x,p"]  # "q" comes with "y" in every full row, "x" with "p"
    assert main(["impute", str(source), "-o", str(tmp_path / "ppca.csv"), *FAST]) == 1
    assert "and --model ppca models numbers only (text columns are passed through)" in capsys.readouterr().err


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
    blank = _write(tmp_path / "blank.csv", "a,b\n1,2\n\n4,5\n6,7\n8,9\n")
    assert main(["impute", str(blank), "-o", str(tmp_path / "out.csv"), *FAST]) == 1
    assert "data row 2 (1-based, the header not counted) is a blank line in a table of 2" in capsys.readouterr().err


def test_output_never_replaces_its_input_and_is_not_overwritten_without_force(tmp_path, capsys):
    source = _write(tmp_path / "in.csv", TABLE)
    assert main(["impute", str(source), "-o", str(source), "--force", *FAST]) == 2
    assert source.read_text(encoding="utf-8") == TABLE
    out = _write(tmp_path / "out.csv", "keep")
    assert main(["impute", str(source), "-o", str(out), *FAST]) == 2
    assert out.read_text(encoding="utf-8") == "keep"
    assert main(["impute", str(source), "-o", str(tmp_path / "out.xyz"), *FAST]) == 2
    assert "--format" in capsys.readouterr().err


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc, where no file can be made")
def test_an_output_folder_no_file_can_be_written_in_is_refused_before_fitting(tmp_path, capsys, monkeypatch):
    # it had been found after the whole fit, by the temporary file's name
    source = _write(tmp_path / "in.csv", TABLE)
    monkeypatch.setattr("skmpt.cli.impute._impute", lambda *args: pytest.fail("the imputer ran"))
    assert main(["impute", str(source), "-o", "/proc/out.csv", *FAST]) == 2
    assert "no file can be written in the directory '/proc'" in capsys.readouterr().err


def test_codes_a_foreign_separator_and_a_malformed_line_are_named(tmp_path, capsys):
    codes = _write(tmp_path / "zip.csv", "zip,v\n00501,1\n01002,2\n,3\n02134,4\n10001,5\n02139,6\n")
    assert main(["impute", str(codes), "-o", str(tmp_path / "out.csv"), *FAST]) == 0
    assert "column 'zip' holds numbers written with leading zeros" in capsys.readouterr().err
    semicolons = _write(tmp_path / "semi.csv", "a;b\n1;2\n3;\n5;6\n7;8\n")
    assert main(["impute", str(semicolons), "-o", str(tmp_path / "semi_out.csv"), "--quiet"]) == 1
    assert "its one column is named 'a;b'" in capsys.readouterr().err
    malformed = _write(tmp_path / "bad.csv", 'a,b\n1,2\n3,"x"y\n5,6\n7,8\n')
    assert main(["impute", str(malformed), "-o", str(tmp_path / "bad_out.csv"), "--quiet"]) == 1
    assert "(line 3 of the file)" in capsys.readouterr().err


def test_a_seed_numpy_cannot_take_is_a_usage_error_naming_seed(tmp_path, capsys):
    source = _write(tmp_path / "in.csv", TABLE)
    assert main(["impute", str(source), "-o", str(tmp_path / "out.csv"), "--seed", str(2**32), *FAST]) == 2
    assert "argument --seed: must be an integer in [0, 2**32)" in capsys.readouterr().err


def test_an_extension_that_says_another_format_than_format_is_refused(tmp_path, capsys):
    text = _write(tmp_path / "data.txt", TABLE)  # a CSV whose extension does not say
    assert main(["impute", str(text), "-o", str(tmp_path / "out.parquet"), "--format", "csv", *FAST]) == 2
    assert "'...out.parquet' has the extension of parquet, and --format says csv" in capsys.readouterr().err.replace(
        str(tmp_path) + os.sep, "...")
    assert main(["impute", str(text), "-o", str(tmp_path / "out.txt"), "--format", "csv", *FAST]) == 0
    assert not (tmp_path / "out.parquet").exists()


def test_an_output_that_is_no_regular_file_or_is_standard_output_is_refused(tmp_path, capsys):
    source = _write(tmp_path / "in.csv", TABLE)
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    assert main(["impute", str(source), "-o", str(fifo), "--force", *FAST]) == 2
    assert "is not a regular file" in capsys.readouterr().err
    assert fifo.is_fifo()
    assert main(["impute", str(source), "-o", "-", "--format", "csv", *FAST]) == 2
    assert "--out '-'" in capsys.readouterr().err


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


# --- a user's file kept as it was read ------------------------------------------------------


def _cells(path, delimiter=","):
    import csv

    with open(path, encoding="utf-8", newline="") as file:
        return list(csv.reader(file, delimiter=delimiter))


def test_blank_lines_of_a_one_column_table_are_holes(tmp_path):
    source = _write(tmp_path / "in.csv", "v\n1.0\n2.0\n\n4.0\n5.0\n\n7.0\n8.0\n")
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), *FAST]) == 0
    column = [row[0] for row in _cells(out)]
    assert len(column) == 9 and column[0] == "v"
    assert [column[i] for i in (1, 2, 4, 5, 7, 8)] == ["1.0", "2.0", "4.0", "5.0", "7.0", "8.0"]
    assert np.isfinite([float(column[3]), float(column[6])]).all()


@pytest.mark.parametrize("header", [["a", "a", "b"], ["", "x", "y"], ["Unnamed: 0", "x", "x.1"], [" s ", "é", "q\"r"]])
def test_headers_are_written_back_exactly(tmp_path, header):
    import csv
    import io

    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows([header, *[[str(i), str(i * 2 % 5), ""] for i in range(5)]])
    text = text.getvalue().replace("\n0,0,\n", "\n0,0,7\n")  # the last column observed once
    source = _write(tmp_path / "in.csv", text)
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), *FAST]) == 0
    assert _cells(out)[0] == header


def test_the_unnamed_index_of_to_csv_and_index_col_are_kept_and_not_modelled(tmp_path, capsys):
    frame = pd.DataFrame({"id": [101, 102, 103, 104, 105], "x": [1.0, np.nan, 3, 4, 5.5], "y": [2.0, 3, 4, 6, 7]})
    source = tmp_path / "in.csv"
    frame.to_csv(source)
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), "--index-col", "id", "--model", "ppca",
                 "--max-epochs", "2"]) == 0
    err = capsys.readouterr().err
    assert "modelled: 2 numeric columns ['x', 'y']" in err and "kept as index: ['', 'id']" in err
    assert "1-based" in err
    written, read = _cells(out), _cells(source)
    assert written[0] == ["", "id", "x", "y"]
    assert [row[:2] for row in written] == [row[:2] for row in read]
    assert main(["impute", str(source), "-o", str(out), "--index-col", "nope", "--force", *FAST]) == 2
    assert "--index-col 'nope' is no column" in capsys.readouterr().err


def test_line_ends_are_kept_and_duplicate_names_are_not_written_to_parquet(tmp_path, monkeypatch, capsys):
    import skmpt.cli.impute as impute

    source = _write(tmp_path / "in.csv", "a,a\r\n1,2\r\n,3\r\n4,\r\n5,6\r\n7,8\r\n")
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), *FAST]) == 0
    lines = out.read_bytes().split(b"\r\n")
    assert lines[:2] == [b"a,a", b"1,2"] and lines[-1] == b"" and len(lines) == 7
    monkeypatch.setattr(impute, "imputer_for", lambda *a, **k: pytest.fail("fitted before checking the names"))
    assert main(["impute", str(source), "-o", str(tmp_path / "out.parquet"), *FAST]) == 2
    assert "Parquet cannot hold the duplicate column names" in capsys.readouterr().err


def test_a_byte_order_mark_is_kept_and_does_not_hide_the_first_columns_name(tmp_path):
    text = "\ufeffid,a,b\n" + "".join(f"k{i},{i},{'' if i % 3 == 0 else 2 * i + 1}\n" for i in range(8))
    source, out = _write(tmp_path / "in.csv", text), tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), "--index-col", "id", *FAST]) == 0
    written = out.read_text(encoding="utf-8")
    assert written.startswith("\ufeffid,a,b\n") and [line.split(",")[0] for line in written.splitlines()[1:]] == [
        f"k{i}" for i in range(8)]


def test_thousands_separators_are_read_with_thousands(tmp_path):
    source = _write(tmp_path / "in.csv", 'n,m\n"1,234",1\n"2,345",2\n,3\n"4,000",4\n5,6\n')
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), "--thousands", ",", *FAST]) == 0
    cells = _cells(out)
    assert [row[0] for row in cells[:3]] == ["n", "1,234", "2,345"] and np.isfinite(float(cells[3][0]))
    assert main(["impute", str(source), "-o", str(out), "--thousands", ".", "--force", *FAST]) == 2


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow is not installed")
def test_the_thousands_pattern_compiles_in_re2_as_pyarrow_strings_match_it():
    # pandas matches its pyarrow-backed strings with RE2, which refused the escape "\u00a0" the pattern had.
    import pyarrow as pa
    import pyarrow.compute as pc

    cells = pa.array(["1,234", "-12,345.5", "1\u00a0000", "1 000", "12", "x"])
    found = pc.match_substring_regex(cells, f"^(?:{GROUPED})$").to_pylist()
    assert found == [True, True, True, True, False, False]


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow is not installed")
def test_parquet_keeps_its_index_and_the_dtypes_of_complete_columns(tmp_path):
    frame = pd.DataFrame({"key": list("pqrstu"), "id": np.array([2**60 + 1, 2**53 + 1, 5, 6, 7, 8], dtype=np.int64),
                          "flag": [True, False, True, True, False, True], "x": [1.0, np.nan, 3, 4, 5, 6.5],
                          "n": pd.array([1, None, 3, 4, 5, 6], dtype="Int64")}).set_index("key")
    source, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    frame.to_parquet(source)
    assert main(["impute", str(source), "-o", str(out), "--index-col", "key", "--index-col", "id", *FAST]) == 0
    result = pd.read_parquet(out)
    pd.testing.assert_index_equal(result.index, frame.index)
    pd.testing.assert_frame_equal(result[["id", "flag"]], frame[["id", "flag"]])
    assert result["x"].dtype == np.float64 and not result.isna().any().any()
    assert result["n"].dtype == frame["n"].dtype and (result["n"].drop("q") == frame["n"].drop("q")).all()
    assert main(["impute", str(source), "-o", str(tmp_path / "out.csv"), *FAST]) == 0
    cells = _cells(tmp_path / "out.csv")
    assert cells[0] == ["key", "id", "flag", "x", "n"] and cells[1][:3] == ["p", str(2**60 + 1), "True"]


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow is not installed")
def test_integer_columns_with_nulls_of_a_parquet_file_without_pandas_metadata_keep_their_type_and_values(tmp_path):
    # written by pyarrow (or polars), pandas read them as float64: 2**60 + 7 became 1.152921504606847e+18, the
    # holes were filled with fractions, and the columns were written back as doubles (an --index-col one too)
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.RandomState(0)
    x = rng.randn(40)
    holes = rng.rand(40) < 0.2
    table = pa.table({"id": pa.array([None if h else 2**60 + 7 * i for i, h in enumerate(holes)], pa.int64()),
                      "x": pa.array(x), "kids": pa.array([None if h else int(abs(v) * 3) for v, h in
                                                          zip(x, holes[::-1], strict=True)], pa.uint8())})
    source, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(table, source)
    assert main(["impute", str(source), "-o", str(out), *FAST]) == 0
    result = pq.read_table(out)
    assert result.schema.field("id").type == pa.int64() and result.schema.field("kids").type == pa.uint8()
    for name in ("id", "kids"):
        read, written = table.column(name).to_pylist(), result.column(name).to_pylist()
        assert all(w == r for r, w in zip(read, written, strict=True) if r is not None)
        assert all(isinstance(w, int) for w in written)
    assert main(["impute", str(source), "-o", str(out), "--force", "--index-col", "id", *FAST]) == 0
    assert pq.read_table(out).column("id").to_pylist() == table.column("id").to_pylist()


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow is not installed")
def test_parquet_columns_keep_their_types_through_pandas_round_trip(tmp_path):
    # pandas' round trip had written decimal128(12, 2) as decimal128(3, 2), string as large_string, a dictionary's
    # int32 indices as int8 and a struct of int64 as one of double
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.RandomState(0)
    x = rng.randn(40)
    hole = rng.rand(40) < 0.2
    colour = pa.array([None if h else c for c, h in zip(rng.choice(["red", "blue"], 40), hole[::-1], strict=True)])
    table = pa.table({"x": pa.array([None if h else v for v, h in zip(x, hole, strict=True)]),
                      "y": pa.array(x + 0.1 * rng.randn(40)),
                      "price": pa.array([decimal.Decimal(f"{v:.2f}") for v in x], pa.decimal128(12, 2)),
                      "name": pa.array([f"n{i}" for i in range(40)], pa.string()),
                      "colour": colour.dictionary_encode().cast(pa.dictionary(pa.int32(), pa.string())),
                      "extra": pa.array([None if h else {"a": i} for i, h in enumerate(hole)])})
    source, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    # a float column whose holes are NaN rather than nulls is filled, and written as float64 as documented
    pq.write_table(table.append_column("z", pa.array(np.where(hole, np.nan, x).astype(np.float32))), source)
    assert main(["impute", str(source), "-o", str(out), "--model", "mixed", "--max-epochs", "2", "--quiet"]) == 0
    result = pq.read_table(out)
    assert result.schema.field("z").type == pa.float64()
    assert result.drop_columns("z").schema.remove_metadata() == table.schema.remove_metadata()
    for name in ("y", "price", "name", "extra"):
        assert result.column(name).to_pylist() == table.column(name).to_pylist()
    assert result.column("x").null_count == 0 and result.column("colour").null_count == 0


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow is not installed")
def test_date_columns_with_holes_are_passed_through_and_said_so(tmp_path, capsys):
    rng = np.random.RandomState(0)
    x = rng.randn(12)
    frame = pd.DataFrame({"when": pd.date_range("2026-01-01", periods=12), "x": x, "y": x + 0.1 * rng.randn(12)})
    frame.loc[[2, 5], "when"] = pd.NaT
    frame.loc[[1, 7], "y"] = np.nan
    source, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    frame.to_parquet(source)
    assert main(["impute", str(source), "-o", str(out), *FAST]) == 0
    assert "column(s) {'when': 2} (column: empty cells) hold neither numbers nor text" in capsys.readouterr().err
    result = pd.read_parquet(out)
    pd.testing.assert_series_equal(result["when"], frame["when"])
    assert not result["y"].isna().any()
    assert main(["impute", str(source), "-o", str(out), "--force", "--index-col", "when", *FAST]) == 0
    assert "hold neither" not in capsys.readouterr().err  # an index column is kept as read, holes included


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow is not installed")
def test_parquet_dates_times_and_lists_with_holes_are_passed_through_and_said_so(tmp_path, capsys):
    # date32 and time64 columns (objects in pandas) had been imputed as categories, and a list column whose
    # values repeat had failed after the fit ("unhashable type: 'numpy.ndarray'")
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.RandomState(0)
    x = rng.randn(30)
    pick = rng.randint(0, 3, 30)
    hole = rng.rand(30) < 0.2
    table = pa.table({"x": pa.array([None if h else v for v, h in zip(x, hole, strict=True)]),
                      "y": pa.array(x + 0.1 * rng.randn(30)),
                      "day": pa.array([None if h else datetime.date(2026, 1, 1 + int(i)) for i, h in
                                       zip(pick, hole[::-1], strict=True)], pa.date32()),
                      "at": pa.array([datetime.time(int(i)) for i in pick], pa.time64("us")),
                      "tags": pa.array([None if h else [int(i)] for i, h in zip(pick, hole, strict=True)],
                                       pa.list_(pa.int64()))})
    source, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(table, source)
    assert main(["impute", str(source), "-o", str(out), *FAST]) == 0
    n = int(hole.sum())
    assert f"{{'day': {n}, 'tags': {n}}} (column: empty cells) hold neither numbers nor text" in capsys.readouterr().err
    result = pq.read_table(out)
    for name in ("day", "at", "tags"):
        assert result.column(name).to_pylist() == table.column(name).to_pylist()
    assert result.column("x").null_count == 0


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow is not installed")
def test_parquet_cells_a_csv_would_read_as_holes_are_warned_about(tmp_path, capsys):
    rng = np.random.RandomState(0)
    x = rng.randn(12)
    frame = pd.DataFrame({"region": pd.Categorical(["NA", "EU"] * 6), "note": ["ok"] * 11 + ["null"],
                          "x": x, "y": x + 0.1 * rng.randn(12)})
    frame.loc[[1, 7], "y"] = np.nan
    source = tmp_path / "in.parquet"
    frame.to_parquet(source)
    assert main(["impute", str(source), "-o", str(tmp_path / "out.csv"), *FAST]) == 0
    err = capsys.readouterr().err
    assert "column(s) {'region': ['NA'], 'note': ['null']} (column: spellings) hold observed cells" in err
    assert main(["impute", str(source), "-o", str(tmp_path / "out.parquet"), *FAST]) == 0
    assert "spells as missing" not in capsys.readouterr().err
    assert pd.read_parquet(tmp_path / "out.parquet")["region"].tolist() == frame["region"].tolist()


def test_a_parquet_engine_is_checked_before_any_fit(tmp_path, monkeypatch, capsys):
    import skmpt.cli.impute as impute

    source = _write(tmp_path / "in.csv", TABLE)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("pyarrow", "fastparquet") else find_spec(name, *a))
    monkeypatch.setattr(impute, "imputer_for", lambda *a, **k: pytest.fail("fitted before checking the writer"))
    assert main(["impute", str(source), "-o", str(tmp_path / "out.parquet"), *FAST]) == 2
    assert "parquet needs pyarrow" in capsys.readouterr().err


TEXT = st.sampled_from(["x", "Paris", "a, b", 'say "hi"', "tab\there", "é"])


@st.composite
def tables(draw, fmt):
    """A DataFrame of 4 to 7 rows: int, big int, float, bool, text and digit columns, some with holes; its index."""
    n = draw(st.integers(4, 7))
    kinds = draw(st.lists(st.sampled_from(["int", "big", "float", "bool", "text", "digits"]), min_size=1, max_size=4))
    kinds.append("float")  # at least one numeric column
    names = draw(st.lists(st.sampled_from(["a", "b", "", "a b", "x,y"]), min_size=len(kinds), max_size=len(kinds),
                          unique=fmt == "parquet"))
    columns = []
    for kind in kinds:
        holes = [0] * n if kind in ("big", "bool") else draw(st.lists(st.booleans(), min_size=n, max_size=n))
        holes[draw(st.integers(0, n - 1))] = False  # one cell observed at least
        if kind == "int":
            values = pd.array([None if h else draw(st.integers(-9, 9)) for h in holes], dtype="Int64")
        elif kind == "big":
            values = np.array([2**60 + draw(st.integers(0, 99)) for _ in holes], dtype=np.int64)
        elif kind == "float":
            values = np.array([np.nan if h else draw(st.floats(-50, 50, width=32)) for h in holes])
        elif kind == "bool":
            values = np.array([draw(st.booleans()) for _ in holes])
        elif kind == "digits":  # numbers stored as text
            values = np.array([None if h else str(draw(st.integers(-99, 99))) for h in holes], dtype=object)
        else:
            values = np.array([None if h else draw(TEXT) for h in holes], dtype=object)
        columns.append(pd.Series(values))
    frame = pd.concat(columns, axis=1).set_axis(names, axis=1)
    index = draw(st.sampled_from([None, "key"]))
    if index:
        frame.index = pd.Index([f"k{i}" for i in range(n)], name=index)
    return frame, kinds


@pytest.mark.parametrize("fmt", ["csv", "tsv", "parquet"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_table_comes_back_cell_for_cell_with_its_holes_filled(tmp_path, fmt, data):
    if fmt == "parquet" and importlib.util.find_spec("pyarrow") is None:
        pytest.skip("pyarrow is not installed")
    frame, kinds = data.draw(tables(fmt))
    source, out = tmp_path / f"in.{fmt}", tmp_path / f"out.{fmt}"
    if fmt == "parquet":
        frame.to_parquet(source)
    else:
        frame.to_csv(source, sep="," if fmt == "csv" else "\t", index=frame.index.name is not None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["impute", str(source), "-o", str(out), "--force", *FAST]) == 0
    if fmt == "parquet":
        before, after = pd.read_parquet(source), pd.read_parquet(out)
        pd.testing.assert_index_equal(after.index, before.index)
        assert list(after.columns) == list(before.columns)
        for j, kind in enumerate(kinds):
            old, new = before.iloc[:, j], after.iloc[:, j]
            observed = old.notna().to_numpy()
            if kind == "text" or not old.isna().any():
                pd.testing.assert_series_equal(new, old)
            elif kind == "digits":  # text cells: the filled ones are numbers written as text
                assert new.dtype == old.dtype and (new[observed] == old[observed]).all()
                assert np.isfinite(new[~observed].astype(float)).all()
            else:  # float64, or an integer column in its dtype
                assert new.dtype == (old.dtype if kind == "int" else np.float64) and new.notna().all()
                np.testing.assert_array_equal(new[observed], old[observed])
        return
    delimiter = "," if fmt == "csv" else "\t"
    before, after = _cells(source, delimiter), _cells(out, delimiter)
    assert after[0] == before[0] and len(after) == len(before)
    shift = 1 if frame.index.name is not None else 0
    for old_row, new_row in zip(before[1:], after[1:], strict=True):
        assert len(new_row) == len(old_row)
        for j, (old, new) in enumerate(zip(old_row, new_row, strict=True)):
            unnamed_index = j == 0 and before[0][0] == ""  # kept as DataFrame.to_csv's index, not modelled
            numeric = j >= shift and kinds[j - shift] in ("int", "float", "big", "digits") and not unnamed_index
            if old or not numeric:
                assert new == old
            else:
                assert np.isfinite(float(new))


def _categories_table():
    """40 rows of light Adelies and heavy Gentoos; row 4 (1-based) a heavy one and row 7 a light one
    without species."""
    rng = np.random.RandomState(0)
    rows = []
    for i in range(40):
        heavy = i % 2 == 1
        mass = f"{(5 if heavy else 1) + 0.2 * rng.randn():.2f}"
        length = f"{(2 if heavy else 0) + 0.1 * rng.randn():.2f}"
        species = "Gentoo" if heavy else "Adelie"
        if i == 3:
            species = ""
        elif i == 6:
            species = "NA"
        elif i in (4, 9):
            mass, length = "", length if i == 4 else ""
        rows.append(f"p{i},{mass},{species},{length}\n")
    return "name,mass,species,len\n" + "".join(rows)


CATEGORIES = _categories_table()


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_categorical_holes_are_filled_with_a_category_of_the_column(tmp_path, fmt, capsys):
    if fmt == "parquet" and importlib.util.find_spec("pyarrow") is None:
        pytest.skip("pyarrow is not installed")
    source = _write(tmp_path / "in.csv", CATEGORIES)
    if fmt == "parquet":
        frame = pd.read_csv(source, keep_default_na=True)
        source = tmp_path / "in.parquet"
        frame.to_parquet(source)
    out = tmp_path / f"out.{fmt}"
    assert main(["impute", str(source), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "modelled: 1 categorical columns ['species'], 2 missing cells to fill" in err
    assert "passed through unchanged: ['name']" in err  # names are all distinct: no category
    if fmt == "csv":
        before, after = _cells(source), _cells(out)
        for old_row, new_row in zip(before, after, strict=True):
            assert [new for old, new in zip(old_row, new_row, strict=True) if old not in ("", "NA")] == [
                old for old in old_row if old not in ("", "NA")]
        species = [row[2] for row in after[1:]]
    else:
        before, after = pd.read_parquet(source), pd.read_parquet(out)
        assert list(after.dtypes) == [before["name"].dtype, np.float64, before["species"].dtype, np.float64]
        species = after["species"].tolist()
    # rows 4 and 7 (1-based) are a heavy Gentoo and a light Adelie
    assert species[3] == "Gentoo" and species[6] == "Adelie"
    # a numeric family models numbers only: the text is passed through as read, and said so
    assert main(["impute", str(source), "-o", str(out), "--force", "--model", "ppca", "--quiet"]) == 0
    assert "text column(s) {'species': 2}" in capsys.readouterr().err


def test_parquet_category_columns_are_filled_with_their_categories_and_keep_their_dtypes(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    rng = np.random.RandomState(0)
    group = rng.randint(0, 2, 40)
    frame = pd.DataFrame({
        "mass": group * 3 + rng.randn(40),
        "species": pd.Categorical(np.where(group, "Gentoo", "Adelie"), categories=["Adelie", "Chinstrap", "Gentoo"]),
        "region": pd.Categorical(np.where(group, "NA", "EU")),  # "NA" (North America) is a category, not a hole
        "grade": pd.Categorical(np.where(rng.rand(40) < 0.2, "?", np.where(group, "high", "low"))),
    }, index=pd.Index(np.arange(40) + 100, name="id"))
    for name in frame.columns:
        frame.loc[rng.rand(40) < 0.15, name] = None
    source, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    frame.to_parquet(source)
    before = pd.read_parquet(source)
    assert main(["impute", str(source), "-o", str(out), "--missing-values", "?", "--model", "mixed"]) == 0
    assert "modelled: 3 categorical columns ['species', 'region', 'grade']" in capsys.readouterr().err
    after = pd.read_parquet(out)
    assert list(after.dtypes) == list(before.dtypes) and after.index.equals(before.index)
    assert not after.isna().any().any() and "?" not in set(after["grade"])
    observed = before.notna() & (before["grade"] != "?").to_frame().reindex(columns=before.columns, fill_value=True)
    for name in before.columns:
        assert after[name][observed[name]].equals(before[name][observed[name]]), name
    truth = {"species": np.where(group, "Gentoo", "Adelie"), "region": np.where(group, "NA", "EU")}
    for name, values in truth.items():
        holes = before[name].isna().to_numpy()
        assert (after[name].to_numpy()[holes] == values[holes]).mean() > 0.8, name
    # a numeric family models numbers only: the category columns pass through with their holes, and are named
    assert main(["impute", str(source), "-o", str(out), "--force", "--model", "ppca", "--max-epochs", "2"]) == 0
    assert "'species': " in capsys.readouterr().err
    assert pd.read_parquet(out)["species"].equals(before["species"])


def test_parquet_boolean_columns_are_categories_filled_with_true_or_false(tmp_path):
    # a nullable boolean was modelled as a number (its holes written as fractions, True as 1.0); Python
    # booleans with nulls (an object column) were filled with the text "True", which Parquet cannot hold
    parquet = pytest.importorskip("pyarrow.parquet")
    a = np.random.RandomState(0).randn(80)
    loose = np.array(a > 0, dtype=object)
    loose[:8] = None
    frame = pd.DataFrame({"x": a, "nullable": pd.array(a > 0, dtype="boolean"), "loose": loose})
    frame.loc[:7, "nullable"] = pd.NA
    source, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    frame.to_parquet(source)
    before = pd.read_parquet(source)
    assert main(["impute", str(source), "-o", str(out), "--quiet"]) == 0
    after = pd.read_parquet(out)
    assert parquet.read_schema(out).types == parquet.read_schema(source).types  # pandas reads "loose" as bool now
    for name in ("nullable", "loose"):
        assert after[name][8:].tolist() == before[name][8:].tolist(), name
        assert [type(value) for value in after[name][:8]] == [type(value) for value in after[name][8:16]], name
        assert (after[name][:8].to_numpy(dtype=bool) == (a[:8] > 0)).mean() >= 0.75, name


def test_model_mixed_on_numbers_is_a_gaussian_mixture_by_em(tmp_path):
    source = _write(tmp_path / "in.csv", "a,b\n1,2\n2,\n3,4\n,5\n5,6\n6,7\n")
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), "--model", "mixed", "--quiet"]) == 0
    assert not pd.read_csv(out).isna().any().any()


def test_model_mixed_and_max_epochs_reach_the_candidates_of_a_table_with_categories(tmp_path, capsys):
    # both were dropped with a categorical column: the default search (mixtures and a VAE, their own epochs) ran
    rng = np.random.RandomState(0)
    group = rng.randint(0, 2, 80)
    lines = [f"{g * 3 + a:.3f},{'' if r < 0.15 else ('hi' if g else 'lo')}" for g, a, r in
             zip(group, rng.randn(80), rng.rand(80), strict=True)]
    source = _write(tmp_path / "in.csv", "x,level\n" + "\n".join(lines) + "\n")
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), "--model", "mixed", "--max-epochs", "3"]) == 0
    log = capsys.readouterr().err
    assert "vae(" not in log and "imputed with MaskedMixedMixture(" in log and "max_epochs=3" in log
    assert main(["impute", str(source), "-o", str(out), "--force", "--max-epochs", "3"]) == 0
    log = capsys.readouterr().err
    assert "vae(" in log and "max_epochs=3" in log.split("imputed with")[1]


def test_a_filled_category_is_spelled_as_read_and_a_missing_text_cell_is_a_parquet_null(tmp_path):
    # ", red" had been filled as "red", a new category; empty text cells had become the text "" in Parquet
    source = _write(tmp_path / "in.csv", "v, g,note\n1, red,a\n2, blue,\n3,,NA\n4, red,b\n5, blue,c\n6, red,d\n"
                                         "7, blue,e\n8, red,f\n")
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), "--quiet"]) == 0
    assert set(pd.read_csv(out)[" g"]) == {" red", " blue"}
    pytest.importorskip("pyarrow")
    assert main(["impute", str(source), "-o", str(tmp_path / "out.parquet"), "--quiet"]) == 0
    note = pd.read_parquet(tmp_path / "out.parquet")["note"]
    assert note.isna().tolist() == [False, True, True, False, False, False, False, False]


def test_a_parquet_decimal_column_is_filled_with_decimals_of_its_places(tmp_path):
    # its holes had been filled with text, which pyarrow refused after the whole fit
    parquet = pytest.importorskip("pyarrow.parquet")
    import decimal

    rng = np.random.RandomState(0)
    a = rng.randn(30)
    cells = [decimal.Decimal(f"{2 * v:.2f}") for v in a]
    cells[3] = cells[7] = None
    source, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pd.DataFrame({"price": cells, "x": a + 0.1 * rng.randn(30)}).to_parquet(source)
    assert main(["impute", str(source), "-o", str(out), "--quiet"]) == 0
    filled = pd.read_parquet(out)["price"]
    assert parquet.read_schema(out).types == parquet.read_schema(source).types
    assert [filled[i].as_tuple().exponent for i in (3, 7)] == [-2, -2]
    assert [filled[i] for i in range(30) if i not in (3, 7)] == [cells[i] for i in range(30) if i not in (3, 7)]
    assert abs(float(filled[3]) - 2 * a[3]) < 1.0  # the other column says where it is


def _coded_table(n_rows=60):
    """Two numeric columns and a group written as a number code ('10', '20', '30'), 15 % of it missing."""
    rng = np.random.RandomState(0)
    group = rng.randint(0, 3, n_rows)
    code = np.array(["10", "20", "30"])[group].astype(object)
    code[rng.rand(n_rows) < 0.15] = ""
    lines = [f"{2.0 * g + 0.3 * a:.3f},{-g + 0.3 * b:.3f},{c}" for g, a, b, c in
             zip(group, rng.randn(n_rows), rng.randn(n_rows), code, strict=True)]
    return "x,y,code\n" + "\n".join(lines) + "\n", group


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_column_declared_categorical_is_filled_with_its_own_codes(tmp_path, fmt, capsys):
    # Codes written as numbers were modelled as numbers: their holes got 9.43..., 21.05...
    text, group = _coded_table()
    source = _write(tmp_path / "in.csv", text)
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
        frame = pd.read_csv(source)
        frame["code"] = frame["code"].astype("Int64")
        source = tmp_path / "in.parquet"
        frame.to_parquet(source)
    out = tmp_path / f"out.{fmt}"
    assert main(["impute", str(source), "-o", str(out), "--categorical", "code"]) == 0
    assert "modelled: 1 categorical columns ['code']" in capsys.readouterr().err
    if fmt == "csv":
        before, after = _cells(source), _cells(out)
        holes = [i for i, row in enumerate(before[1:]) if row[2] == ""]
        for old_row, new_row in zip(before, after, strict=True):
            assert [new for old, new in zip(old_row, new_row, strict=True) if old] == [old for old in old_row if old]
        filled = [after[1 + i][2] for i in holes]
    else:
        before, after = pd.read_parquet(source), pd.read_parquet(out)
        assert list(after.dtypes) == list(before.dtypes)
        holes = np.flatnonzero(before["code"].isna().to_numpy())
        assert after["code"][before["code"].notna()].equals(before["code"][before["code"].notna()])
        filled = [str(value) for value in after["code"].to_numpy()[holes]]
    assert set(filled) <= {"10", "20", "30"}
    assert np.mean([value == str(10 * (group[i] + 1)) for value, i in zip(filled, holes, strict=True)]) >= 0.8


@pytest.mark.parametrize(("options", "message"), [
    (["--categorical", "nope"], "--categorical 'nope' is no column of IN"),
    (["--categorical", "code", "--model", "ppca"], "--model ppca models numbers only"),
    (["--categorical", "code", "--index-col", "code"], "is a column kept as index too"),
])
def test_bad_categorical_declarations_are_refused_before_fitting(tmp_path, capsys, options, message):
    source = _write(tmp_path / "in.csv", _coded_table()[0])
    assert main(["impute", str(source), "-o", str(tmp_path / "out.csv"), *options]) != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out.csv").exists()


def test_a_column_declared_categorical_without_an_observed_value_is_refused(tmp_path, capsys):
    source = _write(tmp_path / "in.csv", "a,b,c\n1,2,\n2,3,\n3,5,\n4,4,\n5,6,\n")
    assert main(["impute", str(source), "-o", str(tmp_path / "out.csv"), "--categorical", "c"]) != 0
    assert "declared --categorical have no observed value" in capsys.readouterr().err


@pytest.mark.parametrize(("n_distinct", "n_rows"), [(11, 22), (12, 22), (21, 22), (11, 40)])
def test_a_text_column_is_modelled_by_the_cli_where_the_api_reads_it_as_a_category(n_distinct, n_rows):
    # One rule (values_repeat) for both: the CLI models a text column the Python API would take without
    # calling it an identifier, and passes through one it would warn of.
    from skmpt.cli.impute import categorical_columns
    from skmpt.estimators.tables import TableLayout

    cells = [f"v{i % n_distinct}" for i in range(n_rows)]
    modelled = 0 in categorical_columns(pd.DataFrame({0: cells}, dtype=object), [0], None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        TableLayout(pd.DataFrame({"c": cells}))
    warned = any("more like an identifier" in str(warning.message) for warning in caught)
    assert modelled != warned
    assert modelled == (n_distinct <= n_rows / 2)


def test_a_table_in_another_encoding_is_read_and_written_back_in_it(tmp_path, capsys):
    # A spreadsheet's cp1252 export was refused as "not a csv table"; with --encoding it is read, and
    # written back in its own encoding, every observed cell's bytes as they were.
    cities = ["Zürich", "São Paulo", "Zürich", "Málaga", "São Paulo", "Málaga"] * 3
    rows = [f"{i},{city},{'' if i % 5 == 2 else 1.5 * i + (city == 'Zürich')},{'€' if i % 2 else 'kr'}"
            for i, city in enumerate(cities)]
    rows[4] = "4,,7.0,€"
    text = "id,city,price,currency\r\n" + "\r\n".join(rows) + "\r\n"
    source = tmp_path / "in.csv"
    source.write_bytes(text.encode("cp1252"))
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), "--encoding", "cp1252", "--quiet"]) == 0
    written = out.read_bytes().decode("cp1252").split("\r\n")
    before = text.split("\r\n")
    assert len(written) == len(before) and written[0] == before[0]
    for old, new in zip(before[1:], written[1:], strict=True):
        assert [n for o, n in zip(old.split(","), new.split(","), strict=True) if o] == [o for o in old.split(",") if o]
    assert written[5].split(",")[1] in {"Zürich", "São Paulo", "Málaga"}


def test_an_unreadable_encoding_says_so_and_writes_nothing(tmp_path, capsys):
    source = tmp_path / "in.csv"
    source.write_bytes("a,b\n1,Zürich\n2,\n3,Zürich\n4,Bern\n5,Bern\n".encode("cp1252"))
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out)]) != 0
    assert "is not a csv table in utf-8" in capsys.readouterr().err
    for encoding, message in [("no-such-codec", "is no text encoding"), ("hex", "is no text encoding")]:
        assert main(["impute", str(source), "-o", str(out), "--encoding", encoding]) != 0
        assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_cell_the_output_encoding_cannot_hold_is_refused_before_the_fit(tmp_path, capsys, monkeypatch):
    pytest.importorskip("pyarrow")
    source = tmp_path / "in.parquet"
    pd.DataFrame({"x": [1.0, None, 3.0, 4.0, 5.0], "y": [2.0, 3.0, None, 5.0, 6.0],
                  "note": ["€", "a", "b", "c", "d"]}).to_parquet(source)
    out = tmp_path / "out.csv"
    import skmpt.cli.impute as impute

    monkeypatch.setattr(impute, "imputer_for", lambda *a, **k: pytest.fail("fitted before checking the encoding"))
    assert main(["impute", str(source), "-o", str(out), "--encoding", "ascii", *FAST]) != 0
    assert "cannot be written in ascii: it cannot hold the cell '€'" in capsys.readouterr().err
    assert not out.exists()


def test_parquet_integer_columns_keep_their_dtype_and_every_observed_value(tmp_path):
    # Written as float64 they lost their observed integers above 2**53 (9007199254740993 became ...992).
    pytest.importorskip("pyarrow")
    big = 2**53
    source, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    frame = pd.DataFrame({"a": [0.1, None, 0.3, 0.4, 0.5, 0.2, 0.7],
                          "id": pd.array([big + 1, None, big + 3, big + 4, big + 5, big + 6, big + 7], dtype="Int64"),
                          "n": np.array([1, 2, 3, 4, -999, 6, 7], dtype=np.int64)})
    frame.to_parquet(source)
    assert main(["impute", str(source), "-o", str(out), "--missing-values", "-999", *FAST]) == 0
    written = pd.read_parquet(out)
    assert list(written.dtypes) == list(frame.dtypes)
    assert written["id"].notna().all() and (written["id"].drop(1) == frame["id"].drop(1)).all()
    assert (written["n"].drop(4) == frame["n"].drop(4)).all() and written["n"][4] != -999
    assert main(["impute", str(source), "-o", str(tmp_path / "out.csv"), *FAST]) == 0
    assert _cells(tmp_path / "out.csv")[1][1] == str(big + 1)


def test_a_tsv_has_no_quoting_so_quotes_are_text_kept_as_written(tmp_path):
    text = 'a\tb\tnote\n\t0.2\tHe said "hi"\n0.1\t0.2\t"quoted"\n0.3\t0.6\t5" screen\n0.4\t0.8\ty\n0.5\t1.0\tz\n'
    source, out = _write(tmp_path / "in.tsv", text), tmp_path / "out.tsv"
    assert main(["impute", str(source), "-o", str(out), *FAST]) == 0
    written = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row[2] for row in written] == [line.split("\t")[2] for line in text.splitlines()]


def test_a_thousands_separator_read_only_where_it_groups_digits_by_three(tmp_path, capsys):
    # "1,5" was read as 15 with --thousands ','
    source = _write(tmp_path / "in.csv", 'a,b\n"1,234",2\n"1,5",3\n"2,000",\n"3,100",5\n"4,000",6\n')
    assert main(["impute", str(source), "-o", str(tmp_path / "out.csv"), "--thousands", ",", *FAST]) != 0
    assert "column 'a' mixes numbers and text" in capsys.readouterr().err
    assert not (tmp_path / "out.csv").exists()


def test_quiet_turns_the_search_progress_bar_off():
    assert imputer_for("auto", 3, 0, verbose=0).estimator.progress is False
    assert imputer_for("auto", 3, 0, verbose=1).estimator.progress is True


def test_warnings_about_a_column_name_it_as_the_table_does(tmp_path, capsys):
    # They named the imputer's internal column ('c1'), not the user's.
    source = _write(tmp_path / "in.csv", "\ufeffa,flag,flag\n1.5,yes,u\n2.5,yes,v\n3.5,,u\n4.5,yes,v\n5.5,yes,\n")
    assert main(["impute", str(source), "-o", str(tmp_path / "out.csv"), "--quiet"]) == 0
    messages = capsys.readouterr().err
    assert "Column 'flag (column 2)' is categorical with one category ('yes')" in messages
    assert "'c1'" not in messages


def test_pandas_spellings_of_a_missing_cell_are_holes(tmp_path):
    # Excel's "#N/A" and pandas' "<NA>" had been read as text: the numeric column refused, "-NaN" written as a
    # category into the holes of a text column.
    rows = [f"{1.5 + k},{2.0 * k},{'ab'[k % 2]}" for k in range(12)]
    rows[2], rows[5], rows[7] = "#N/A,4.0,a", "6.5,<NA>,-NaN", "8.5,14.0,#n/a"
    source = _write(tmp_path / "in.csv", "x,y,c\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out.csv"
    assert main(["impute", str(source), "-o", str(out), "--quiet"]) == 0
    written = pd.read_csv(out, keep_default_na=False)
    assert written["x"].dtype.kind == "f" and written["y"].dtype.kind == "f"
    assert set(written["c"]) == {"a", "b"}


def test_the_fallbacks_part_in_the_numbers_is_logged(tmp_path, capsys):
    # --model ppca and --model vae had written the same file, saying only "imputed with MaskedPPCA(...)" and
    # "MaskedVAE(...)": the fallback's trees had filled every hole at weight 1.
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, 150)
    X = np.c_[x, x, np.sin(4 * x), np.cos(4 * x)] + 0.05 * rng.normal(size=(150, 4))
    X[rng.random(X.shape) < 0.2] = np.nan
    source = tmp_path / "in.csv"
    pd.DataFrame(X, columns=list("abcd")).to_csv(source, index=False)
    assert main(["impute", str(source), "-o", str(tmp_path / "out.csv"), "--model", "ppca"]) == 0
    assert "blended with its fallback ChainedTrees(" in capsys.readouterr().err


def test_a_parquet_category_column_of_integers_is_filled_with_its_categories(tmp_path):
    # pandas 3 writes a category column of integers as plain int64 (its metadata says "categorical") and reads
    # it back as float64: its holes had been filled with numbers such as 4, 8 and 11.
    pytest.importorskip("pyarrow")
    rng = np.random.RandomState(18)
    group = rng.randint(0, 2, 80)
    x = np.where(rng.rand(80) < 0.15, np.nan, group * 2 + rng.randn(80))
    grade = pd.Series(pd.Categorical(group * 10 + 5)).mask(rng.rand(80) < 0.15)
    source, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pd.DataFrame({"x": x, "grade": grade}).to_parquet(source)
    assert main(["impute", str(source), "-o", str(out), "--quiet"]) == 0
    filled = pd.read_parquet(out)["grade"]
    assert grade.isna().any() and filled.notna().all() and set(filled.astype(int)) <= {5, 15}
