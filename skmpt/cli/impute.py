"""``skmpt impute IN -o OUT``: fill the holes of a table with :class:`skmpt.MaskedImputer`.

The table is a CSV (``.csv``), TSV (``.tsv``, ``.tab``) or Parquet (``.parquet``, needs pyarrow,
checked before any work) file. A CSV or TSV is read and written with ``csv``: the header is kept
exactly (duplicate and empty names), every observed cell keeps its text, and a blank line of a
one-column table is a missing cell; both in ``--encoding`` (UTF-8 by default, a byte-order mark
kept as read). A Parquet file is read with pandas and written with pyarrow: its stored index is
kept, and every column keeps its Parquet type (a decimal's precision, ``string`` or
``large_string``, a dictionary's index width, a struct's fields); a float column with holes is
written as float64, an integer one (``int64``, ``Int64``, ...; written by pandas, pyarrow or polars) keeps
its dtype and every observed value, its holes filled with the imputation rounded (as the Python API
fills a DataFrame's). A cell is missing when it is empty, ``NaN``, ``NA``, ``N/A``, ``#N/A``,
``<NA>``, ``null`` or ``None`` (``MISSING_WORDS``, pandas' spellings; any case: a category spelled
so is read as a hole), or equal to ``--missing-values`` (a numeric marker: equal in value, ``-999``
matches ``-999.0``). Every column whose observed cells are all numbers is modelled
and imputed (``--thousands`` reads ``1,234``; without it such a column is refused; one with holes
whose numbers are written with leading zeros, as codes are, is warned about). A column of
text whose values repeat (at most 1000 distinct values, each seen twice on average: a category,
such as a species or a region; the Python API's rule, ``skmpt.estimators.tables.values_repeat``)
is modelled too, and its holes are filled with its most probable
value given the row's other cells, written as the column's own text (its most frequent spelling
as read: `` red`` stays `` red``). Written as Parquet, a missing text cell of a CSV is a null.
``--categorical NAME`` models a column as categorical whatever its cells (codes written as
numbers), its holes filled with one of its observed values as written. A Parquet column of pandas
``category`` dtype is categorical whatever its categories: a hole (null, or ``--missing-values``)
takes one of the dtype's categories and the column keeps its dtype (a category ``"NA"`` is a
category there, not a hole); so is a boolean column, whose holes take True or False. Other text
columns (names,
comments, keys), an ``--index-col`` column and a CSV's first column with an empty name (the index
``DataFrame.to_csv`` writes) are passed through untouched. Rows in messages are data rows numbered
from 1, the header not counted. The imputation is that of the Python API::

    MaskedImputer(random_state=seed).fit_transform(numeric_columns_as_float)

for ``--model auto`` (the family and size chosen by held-out likelihood), or, with categorical
columns, the same imputer on the DataFrame of the numbers beside the categories' texts (a
:class:`skmpt.MaskedMixedMixture` of a size chosen by held-out likelihood); another ``--model``
restricts :class:`skmpt.MaskedModelSearch` to that family (its size still chosen). A table of
categories alone is imputed too (the mixed mixture is then a latent class model); one with no
numeric and no categorical column is refused. The output is written to a
temporary file beside ``OUT`` and renamed when complete; ``OUT`` may not be ``IN``.
"""

import decimal
import logging
import numbers
import os
import warnings
from collections import Counter

import numpy as np

from . import UsageError
from .common import atomic_output, check_outputs, positive_int, random_seed

HELP = "fill the missing cells of a CSV, TSV or Parquet table"
DESCRIPTION = ("Fill the missing cells of the numeric and categorical columns of a table with a latent-variable "
               "model chosen by the held-out likelihood of the observed cells; other text columns and observed cells "
               "are kept as they are.")
MODELS = ("auto", "mixed", "full", "fa", "ppca", "diag", "linear_vae", "vae")
FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".parquet": "parquet"}
#: Spellings of a missing cell besides the empty one (compared in lower case): pandas' default ``na_values``
#: (Excel's ``#N/A`` among them) and ``none``.
MISSING_WORDS = ("nan", "-nan", "na", "n/a", "#n/a", "#n/a n/a", "#na", "<na>", "null", "none", "1.#ind", "-1.#ind",
                 "1.#qnan", "-1.#qnan")

logger = logging.getLogger("skmpt.cli")


def add_arguments(parser):
    """The options of ``skmpt impute``."""
    add = parser.add_argument
    add("input", metavar="IN", help="table to read: .csv, .tsv/.tab or .parquet")
    add("-o", "--out", required=True, help="table to write, in the format of its extension")
    add("--format", choices=sorted(set(FORMATS.values())), default=None,
        help="format of IN and OUT when their extension does not say")
    add("--missing-values", default=None, metavar="MARKER",
        help="a cell equal to MARKER is missing too (besides empty cells and the words pandas reads as missing, in "
             "any case: NaN, NA, N/A, #N/A, <NA>, null, None, ...); a marker that reads as an option, such as -1e5 "
             "or -inf, is given as --missing-values=-1e5")
    add("--index-col", action="append", default=None, metavar="NAME",
        help="a column kept as it is and not modelled (an id, a key); repeat for several. A first column with "
             "an empty name (the index DataFrame.to_csv writes) is kept so without it")
    add("--categorical", action="append", default=None, metavar="NAME",
        help="a column modelled as categorical whatever its cells (codes written as numbers: a zip code, an "
             "occupation code), its holes filled with one of its observed values as written; repeat for several")
    add("--encoding", default="utf-8", metavar="NAME",
        help="the text encoding of a CSV or TSV IN and OUT (default utf-8; e.g. cp1252 or latin-1 for a "
             "spreadsheet's export): the file is written back in it")
    add("--thousands", default=None, metavar="SEP",
        help="the thousands separator of numbers written with one ('1,234' with --thousands ','); without it "
             "such a column is refused")
    add("--model", choices=MODELS, default="auto",
        help="'auto': the family and size chosen by held-out likelihood; a family: its size chosen ('mixed': "
             "Gaussians and categoricals; the other families model numbers only and pass text columns through)")
    add("--max-epochs", type=positive_int, default=None,
        help="most epochs of each candidate's fit (default: the candidates' own, 200)")
    add("--seed", type=random_seed, default=0, help="random_state of the imputer, in [0, 2**32)")
    add("--force", action="store_true", help="overwrite OUT if it exists")
    add("--quiet", action="store_true", help="no progress messages")
    add("--debug", action="store_true", help="show the traceback of an error")


def _format(path, given):
    """The format of ``path``: its extension's, else ``given`` (``--format``); an extension that says
    another format than ``given`` is a ``UsageError`` (a CSV written into ``out.parquet`` would be a
    mislabelled file)."""
    extension = os.path.splitext(str(path))[1].lower()
    fmt = FORMATS.get(extension)
    if fmt is not None and given is not None and given != fmt:
        raise UsageError(f"{str(path)!r} has the extension of {fmt}, and --format says {given}: --format names the "
                         f"format of a file whose extension does not say; drop it, or rename the file")
    fmt = fmt or given
    if fmt is None:
        raise UsageError(f"cannot tell the format of {str(path)!r} from its extension; pass --format "
                         f"({', '.join(sorted(set(FORMATS.values())))})")
    return fmt


def read_table(path, fmt, encoding="utf-8"):
    """``(header, frame)``: the column names exactly as written, and the cells in columns ``0, 1, ...``.

    A CSV or TSV is read with ``csv`` in ``encoding``: every cell is its text as written (unquoted),
    the header is kept as it is (duplicate names, an empty name), and a blank line of a one-column
    table is a missing cell (in a wider table, an error). A Parquet file is read with
    pandas: its columns keep their dtypes and its stored index is the frame's index.

    Examples
    --------
    >>> import os, tempfile
    >>> from skmpt.cli.impute import read_table, write_table
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> with open(path, "w", encoding="utf-8") as file:
    ...     _ = file.write(',a,a\\n0,"1,234",\\n1,7,8\\n')
    >>> header, frame = read_table(path, "csv")
    >>> header, frame.values.tolist()
    (['', 'a', 'a'], [['0', '1,234', ''], ['1', '7', '8']])
    >>> write_table(header, frame, path, "csv", overwrite=True)
    >>> print(open(path, encoding="utf-8").read(), end="")
    ,a,a
    0,"1,234",
    1,7,8
    """
    import csv

    import pandas as pd

    try:
        if fmt == "parquet":
            frame = _pandas_categories(path, _nullable_integers(path, pd.read_parquet(path)))
            header = list(frame.columns)
            return header, frame.set_axis(range(len(header)), axis=1)
        rows = _csv_rows(path, encoding, _dialect(fmt))
        if fmt == "tsv" and len({len(row) for row in rows if row}) > 1:  # quoted cells holding tabs or line
            rows = _csv_rows(path, encoding, _dialect(fmt, quoted=True))  # breaks: a TSV quoted as a CSV (pandas')
    except ImportError as exc:
        raise UsageError(f"reading {fmt} needs a package that is not installed: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{str(path)!r} is not a {fmt} table in {encoding} ({' '.join(str(exc).split())}): if it "
                         f"is text, pass its encoding with --encoding (e.g. cp1252 or latin-1)") from None
    except (ValueError, csv.Error, OSError) as exc:
        raise ValueError(f"{str(path)!r} is not a {fmt} table: {' '.join(str(exc).split())}") from None
    if not rows or any("\0" in cell for row in rows for cell in row):
        raise ValueError(f"{str(path)!r} is not a {fmt} table: {'it is empty' if not rows else 'it holds NUL bytes'}")
    header, rows = rows[0], rows[1:]
    if len(header) == 1:
        rows = [row or [""] for row in rows]  # a blank line is the missing cell of a one-column table
    for number, row in enumerate(rows, start=1):
        if not row:
            raise ValueError(f"{str(path)!r}: data row {number} (1-based, the header not counted) is a blank line "
                             f"in a table of {len(header)} columns; remove it, or write its missing cells between "
                             f"separators")
        if len(row) != len(header):
            raise ValueError(f"{str(path)!r} is not a {fmt} table: data row {number} (1-based, the header not "
                             f"counted) has {len(row)} cells where the header has {len(header)}")
    return header, pd.DataFrame(rows, columns=range(len(header)), dtype=object)


def _nullable_integers(path, frame):
    """``frame``, read by pandas from the Parquet file ``path``, with each integer column that pandas
    read as float64 (one with nulls, written without pandas' metadata: by pyarrow or polars) as the
    nullable integer of its Parquet type, whose values are the file's: float64 rounds integers
    above 2**53 and would be written back as floats."""
    import pandas as pd
    import pyarrow
    import pyarrow.parquet

    fields = [field for field in pyarrow.parquet.read_schema(path) if pyarrow.types.is_integer(field.type)]
    names = list(frame.columns)
    floats = [field for field in fields if names.count(field.name) == 1 and frame[field.name].dtype.kind == "f"]
    if not floats:
        return frame
    table = pyarrow.parquet.read_table(path, columns=[field.name for field in floats])
    frame = frame.copy()
    for field in floats:
        unsigned = pyarrow.types.is_unsigned_integer(field.type)
        dtype = pd.api.types.pandas_dtype(f"{'U' if unsigned else ''}Int{field.type.bit_width}")
        frame[field.name] = pd.array(table.column(field.name).to_pylist(), dtype=dtype)
    return frame


def _pandas_categories(path, frame):
    """``frame``, read by pandas from the Parquet file ``path``, with each column that pandas' metadata
    there says is categorical as a ``category`` column of its observed values: pandas 3 writes a category
    column of integers as plain integers, and reads it back as numbers (float64 where it has nulls)."""
    import json

    import pyarrow.parquet

    metadata = pyarrow.parquet.read_schema(path).metadata or {}
    columns = json.loads(metadata.get(b"pandas", b"{}")).get("columns", [])
    names = list(frame.columns)
    lost = [column["name"] for column in columns if column.get("pandas_type") == "categorical"
            and names.count(column["name"]) == 1 and frame[column["name"]].dtype != "category"]
    return frame.astype(dict.fromkeys(lost, "category")) if lost else frame


def _csv_rows(path, encoding, dialect):
    """Every row of the text table ``path`` read by ``csv`` with ``dialect``; a malformed one is a
    ``csv.Error`` that says on which line of the file it ends."""
    import csv

    with open(path, encoding=encoding, newline="") as file:
        reader = csv.reader(file, **dialect, strict=True)
        try:
            return list(reader)
        except csv.Error as exc:
            raise csv.Error(f"{exc} (line {reader.line_num} of the file)") from None


def _write_rows(text, header, frame, dialect, lineterminator):
    import csv

    writer = csv.writer(text, **dialect, lineterminator=lineterminator)
    writer.writerow(header)
    writer.writerows(frame.itertuples(index=False, name=None))


def _dialect(fmt, quoted=False):
    """``csv``'s options of ``fmt``: a CSV quoted where needed; a TSV has no quoting (a quote is text, a
    cell holds no tab or line break), so every cell is read and written as it is. A TSV whose rows
    are not all as long so read has cells quoted as a CSV's (tabs or line breaks in them, as pandas
    writes them): it is read and written so (``quoted``)."""
    import csv

    if fmt == "csv" or quoted:
        return {"delimiter": "," if fmt == "csv" else "\t"}
    return {"delimiter": "\t", "quoting": csv.QUOTE_NONE, "quotechar": None}


def _line_end(path, encoding):
    """``"\\r\\n"`` if the first line of the text file ``path`` (in ``encoding``) ends so, else ``"\\n"``."""
    with open(path, encoding=encoding, newline="") as file:
        first = file.readline()
    return "\r\n" if first.endswith("\r\n") else "\n"


def write_table(header, frame, path, fmt, overwrite, *, lineterminator="\n", encoding="utf-8", like=None):
    """Write ``frame`` (columns ``0, 1, ...``) under ``header``, as :func:`read_table` reads it back.

    A CSV or TSV is written with ``csv`` (minimal quoting, lines ended by ``lineterminator``) in
    ``encoding``, cell for cell (a cell it cannot encode is an error, and nothing is written); a
    Parquet file with pyarrow, as pandas writes a DataFrame (its columns' dtypes and its index kept),
    each column in its type in the Parquet file ``like`` (the file read, if one was; but a float column
    whose holes were filled, float64), where pandas' round trip would change it: a decimal's
    precision, ``string`` read as ``large_string``, a dictionary's index width, polars' field metadata.
    """
    import csv
    import io

    with atomic_output(path, overwrite=overwrite) as [file]:
        if fmt == "parquet":
            _write_parquet(frame.set_axis(header, axis=1), file, like)
        else:
            text = io.StringIO()
            try:
                _write_rows(text, header, frame, _dialect(fmt), lineterminator)
            except csv.Error:  # a tab or line break in a cell of a TSV: quoted as a CSV's (as pandas writes one)
                text = io.StringIO()
                _write_rows(text, header, frame, _dialect(fmt, quoted=True), lineterminator)
            try:
                encoded = text.getvalue().encode(encoding)
            except UnicodeEncodeError as exc:
                raise ValueError(f"{str(path)!r} cannot be written in {encoding}: {' '.join(str(exc).split())}; pass "
                                 f"another --encoding (e.g. utf-8)") from None
            file.write(encoded)


def _write_parquet(frame, file, like):
    """``frame`` written as Parquet into ``file`` (:func:`write_table`'s), the columns ``like`` holds in
    their type there (but float columns with holes, nulls or NaN: only those are read again)."""
    import pyarrow
    import pyarrow.compute
    import pyarrow.parquet

    table = pyarrow.Table.from_pandas(frame)
    source = pyarrow.schema([]) if like is None else pyarrow.parquet.read_schema(like)
    floats = [field.name for field in source if pyarrow.types.is_floating(field.type)]
    read = pyarrow.parquet.read_table(like, columns=floats) if floats else None  # only they are read again
    for i, field in enumerate(table.schema):
        given = source.field(field.name) if field.name in source.names else None
        if given is None or given.equals(field, check_metadata=True):
            continue
        if field.name in floats and (read.column(field.name).null_count or pyarrow.compute.any(
                pyarrow.compute.is_nan(read.column(field.name))).as_py()):  # a float column with holes: float64
            continue
        try:
            table = table.set_column(i, given, table.column(i).cast(given.type))
        except (pyarrow.ArrowInvalid, pyarrow.ArrowNotImplementedError):
            continue  # a type the values no longer fit: as pandas writes it
    pyarrow.parquet.write_table(table, file)


def _check_encoding(encoding, fmt_in, fmt_out):
    """Refuse an ``--encoding`` that Python does not know, or one given where no file is text."""
    try:
        "".encode(encoding), b"".decode(encoding)  # a text encoding: not a bytes codec (hex, zlib) nor unknown
    except LookupError:
        raise UsageError(f"--encoding {encoding!r} is no text encoding Python knows (e.g. utf-8, cp1252, "
                         f"latin-1)") from None
    if fmt_in == fmt_out == "parquet" and encoding != "utf-8":
        raise UsageError(f"--encoding {encoding!r} applies to CSV and TSV files; IN and OUT are Parquet")


def check_parquet():
    """Raise a :class:`~skmpt.cli.UsageError` unless pandas can read and write Parquet (pyarrow or fastparquet)."""
    import importlib.util

    if not any(importlib.util.find_spec(engine) for engine in ("pyarrow", "fastparquet")):
        raise UsageError("reading or writing parquet needs pyarrow (or fastparquet), which is not installed: "
                         "pip install pyarrow")


#: A number written with a thousands separator: ``1,234``, ``-12,345.5``, ``1 000``. The no-break
#: space is the character itself, not ``\u00a0``: pandas' pyarrow strings match with RE2, which
#: refuses that escape ("invalid escape sequence").
GROUPED = r"[+-]?\d{1,3}(?:[,_' " "\u00a0" r"]\d{3})+(?:\.\d*)?"


def _as_numbers(text, thousands):
    """``text`` (a Series of stripped cells) as floats, ``NaN`` where a cell is no number; with
    ``thousands``, a cell holding it is a number only when grouped by it in threes (``1,234``, not
    ``1,5``, which would be read as 15)."""
    import re

    import pandas as pd

    if thousands:
        separated = np.array(text.str.contains(thousands, regex=False), dtype=bool)
        pattern = rf"[+-]?\d{{1,3}}(?:{re.escape(thousands)}\d{{3}})+(?:\.\d*)?(?:[eE][+-]?\d+)?"
        grouped = np.array(text.str.fullmatch(pattern), dtype=bool)
        text = text.str.replace(thousands, "", regex=False).where(~separated | grouped, "")
    return pd.to_numeric(text, errors="coerce")


def numeric_columns(frame, header, marker, *, thousands=None, index=()):
    """The columns to impute as a float array (NaN where missing), their positions, the missing mask, and a report.

    A column is numeric when every cell that is not missing is a number (``thousands`` removed
    first); a column none of whose cells is a number is text (passed through); the columns at
    positions ``index`` are passed through too. A numeric ``marker`` matches every cell of the
    same value (``-999`` matches ``-999.0``). Refused: a column mixing numbers and text, a text
    column whose cells are numbers written with a thousands separator (unless ``thousands``), a
    numeric column with no observed cell, an infinite observed value. Rows are numbered from 1,
    the header not counted.

    Returns
    -------
    X : ndarray of shape (n_rows, n_numeric)
    positions : list of int
    missing : ndarray of bool of shape (n_rows, n_numeric)
    report : dict
        ``"text"``: position -> number of empty cells of each text column passed through;
        ``"other"``: the same for each column neither numeric nor text (a Parquet date, time, list
        or struct);
        ``"marker"``: the distinct spellings ``marker`` matched.
    """
    import pandas as pd

    value = _as_number(marker)
    positions, values, infinite, report = [], [], {}, {"text": {}, "other": {}, "marker": set()}
    for j in range(frame.shape[1]):
        if j in index:
            continue
        name, column = header[j], frame[j]
        is_text = column.dtype == object or pd.api.types.is_string_dtype(column)
        if not (pd.api.types.is_numeric_dtype(column) or is_text and _plain_cells(column)):
            report["other"][j] = int(column.isna().sum())
            continue
        if not is_text:
            numbers = column.astype(np.float64)
            missing = np.array(numbers.isna(), dtype=bool)
            if value is not None:
                missing |= np.array(numbers == value, dtype=bool)
        else:
            text, missing, matched = text_cells(column, marker)
            report["marker"].update(text[matched])
            numbers = _as_numbers(text.where(~missing, ""), thousands)
            bad = ~missing & np.array(numbers.isna(), dtype=bool)
            grouped = ~missing & np.array(text.str.fullmatch(GROUPED), dtype=bool)
            if bad.any() and grouped[bad].all() and not thousands:
                rows = np.flatnonzero(bad)[:3]
                raise ValueError(f"column {name!r} holds numbers written with a thousands separator (data row(s) "
                                 f"{(rows + 1).tolist()}, 1-based: {[column.iloc[i] for i in rows]}); pass "
                                 f"--thousands SEP (such as --thousands ',') to read them as numbers, or "
                                 f"--index-col {name!r} to pass the column through")
            if bad.any() and not (~missing & ~bad).any():
                report["text"][j] = int(missing.sum())  # a text column: no observed cell is a number
                continue
            if bad.any():
                rows = np.flatnonzero(bad)[:3]
                raise ValueError(f"column {name!r} mixes numbers and text: data row(s) {(rows + 1).tolist()} "
                                 f"(1-based, the header not counted) hold {[column.iloc[i] for i in rows]}; "
                                 f"mark missing cells with --missing-values, or declare the column --categorical "
                                 f"{name!r} if its values are labels (codes, yes/no/1/0)")
            coded = ~missing & np.array(text.str.match(r"[+-]?0\d"), dtype=bool)
            if coded.any() and missing.any():
                rows = np.flatnonzero(coded)[:3]
                warnings.warn(f"column {name!r} holds numbers written with leading zeros (data row(s) "
                              f"{(rows + 1).tolist()}, 1-based: {[column.iloc[i] for i in rows]}), as codes are (a zip "
                              f"code, an account): its holes are filled with numbers; pass --categorical {name!r} to "
                              f"fill them with one of its codes, or --index-col {name!r} to leave them",
                              UserWarning, stacklevel=2)
        numbers = numbers.to_numpy(dtype=np.float64)
        if missing.all():
            raise ValueError(f"column {name!r} has no observed value: nothing can impute it; drop it, or pass it "
                             f"through with --index-col {name!r}")
        rows = np.flatnonzero(~missing & np.isinf(numbers))
        if len(rows):
            infinite[name] = (rows[:3] + 1).tolist()
        positions.append(j)
        values.append(np.where(missing, np.nan, numbers))
    if infinite:
        where = "; ".join(f"{name!r} at data row(s) {rows}" for name, rows in infinite.items())
        raise ValueError(f"column(s) {list(infinite)} hold infinite values ({where}; 1-based, the header not "
                         f"counted): no model can fit or impute them; replace them, or mark them missing with "
                         f"--missing-values")
    X = np.column_stack(values) if values else np.empty((len(frame), 0))
    return X, positions, np.isnan(X), report


def _plain_cells(column):
    """Whether every observed cell of a column of objects is text, bytes, a number or a boolean: a
    Parquet date (``date32``), time, list, struct or map column is none of them, and is passed through."""
    return all(isinstance(cell, (str, bytes, numbers.Number)) for cell in column[column.notna()])


def text_cells(column, marker):
    """A column's cells as stripped text, where they are missing (empty, a word of
    :data:`MISSING_WORDS`, or ``marker``: as text, or equal in value to a numeric one), and where
    ``marker`` matched an observed-looking cell."""
    value = _as_number(marker)
    text = column.astype(object).where(column.notna(), "").astype(str).str.strip()
    missing = np.array((text == "") | text.str.lower().isin(MISSING_WORDS), dtype=bool)
    matched = np.zeros(len(text), dtype=bool)
    if marker is not None:
        matched = np.array(text == marker, dtype=bool)
        if value is not None:
            matched |= np.array(_as_numbers(text, None) == value, dtype=bool)
        matched &= ~missing
        missing |= matched
    return text, missing, matched


def categorical_columns(frame, positions, marker, declared=()):
    """The columns among ``positions`` and ``declared`` to model as categories: position -> their
    cells as stripped text, None where missing.

    A column at ``declared`` (``--categorical``) is categorical whatever its cells; a text column at
    ``positions`` when its observed values repeat (:func:`~skmpt.estimators.tables.values_repeat`: a
    column of names or comments, mostly distinct, is no category). Others are passed through.
    """
    import pandas as pd

    from ..estimators.tables import values_repeat

    columns = {}
    for j in sorted({*positions, *declared}):
        text, missing, _ = text_cells(frame[j], marker)
        observed = text[~missing]
        if j in declared or values_repeat(observed.nunique(), len(observed)):
            columns[j] = pd.Series(np.where(missing, None, text.to_numpy(dtype=object)), dtype=object)
    return columns


def category_columns(frame, index, marker):
    """The columns of pandas ``category`` or boolean dtype (a Parquet table's dictionary and boolean
    columns) outside the positions ``index``: position -> the column as the model reads it, missing
    where null or (a category) equal to ``marker`` (as text, or in value for a numeric one), the
    marker then no category of it.

    Their categories are values (strings, numbers, booleans), not texts to parse: such a column is
    never numeric, and a hole is filled with one of its dtype's categories (True or False).
    """
    import pandas as pd

    value = _as_number(marker)
    columns = {}
    for j in range(frame.shape[1]):
        column = frame[j]
        if j in index:
            continue
        if pd.api.types.is_bool_dtype(column.dtype):  # True and False (holes where a nullable one is null)
            columns[j] = pd.Series(column.to_numpy(dtype=object, na_value=None), dtype=object)
            continue
        if not isinstance(column.dtype, pd.CategoricalDtype):
            continue
        categories = column.cat.categories
        dropped = []
        if marker is not None:
            text = categories.astype(str).str.strip()
            drop = text == marker
            if value is not None:
                drop |= np.array(_as_numbers(pd.Series(text), None) == value, dtype=bool)
            dropped = categories[np.asarray(drop, dtype=bool)].tolist()
        columns[j] = column.cat.remove_categories(dropped).reset_index(drop=True)
    return columns


def _as_number(marker):
    try:
        return None if marker is None else float(marker)
    except ValueError:
        return None


def imputer_for(model, n_features, seed, *, max_epochs=None, verbose=0):
    """The :class:`skmpt.MaskedImputer` that ``--model``, ``--max-epochs`` and ``--seed`` name.

    ``auto`` without ``max_epochs`` is ``MaskedImputer(random_state=seed)``, the default one.
    """
    from ..estimators import MaskedImputer
    from ..estimators.selection import default_candidates

    candidates = None
    if model not in ("auto", "mixed") or max_epochs is not None:
        families = "auto" if model in ("auto", "mixed") else [model]
        candidates = default_candidates(n_features, families=families, random_state=seed)
        for models in candidates.values():
            for candidate in models:
                candidate.set_params(max_epochs=max_epochs or candidate.max_epochs)
    return MaskedImputer(_search(candidates, seed, verbose), random_state=seed)


def _search(candidates, seed, verbose):
    """The :class:`skmpt.MaskedModelSearch` of ``candidates`` (None: the default ones), its progress bar
    shown unless ``--quiet`` (``verbose`` 0)."""
    from ..estimators import MaskedModelSearch

    return MaskedModelSearch(candidates, random_state=seed, verbose=verbose, progress=verbose > 0)


def _formatted(value):
    return repr(float(value))


def _named_positions(header, name, option, stored=()):
    """The positions of the columns called ``name`` (given with ``option``), refused when there is none
    and ``name`` is not in ``stored`` (a Parquet table's index). The first name of a file that begins
    with a byte-order mark is matched without it (the file is written back with it)."""
    header = [column.removeprefix("\ufeff") if j == 0 else column for j, column in enumerate(header)]
    found = [j for j, column in enumerate(header) if column == name]
    if not found and name not in stored:
        raise UsageError(f"{option} {name!r} is no column of IN; its columns are {header}")
    return found


def _declared_positions(header, names, index):
    """Positions of the ``--categorical`` columns: each a column of IN, none kept as index."""
    positions = []
    for name in names or ():
        found = _named_positions(header, name, "--categorical")
        if set(found) & set(index):
            raise UsageError(f"--categorical {name!r} is a column kept as index too (--index-col, or a first column "
                             f"with an empty name): it is either modelled or kept, not both")
        positions += found
    return sorted(set(positions))


def _index_positions(header, names, fmt, stored=()):
    """Positions of the ``--index-col`` columns; for a CSV or TSV, a first column with an empty name too.

    A name of the ``stored`` index of a Parquet table is no column, and is kept anyway
    (:func:`_named_positions`).
    """
    positions = [0] if fmt != "parquet" and header and header[0].removeprefix("\ufeff") == "" else []
    for name in names or ():
        positions += _named_positions(header, name, "--index-col", stored)
    return sorted(set(positions))


def _names(header, positions):
    return [header[j] for j in positions]


def run(args):
    """Read ``args.input``, impute it, write ``args.out``."""
    if not os.path.isfile(args.input):
        raise UsageError(f"IN {args.input!r} is not a file")
    if args.out == "-":
        raise UsageError("--out '-': skmpt impute writes a file (written whole or not at all), not standard output; "
                         "name a file")
    fmt_in, fmt_out = _format(args.input, args.format), _format(args.out, args.format)
    check_outputs({"IN": args.input}, {"--out": args.out}, overwrite=args.force)
    if args.thousands is not None and (len(args.thousands) != 1 or args.thousands in "0123456789.+-eE"):
        raise UsageError(f"--thousands must be one character that is no digit, sign or decimal point; got "
                         f"{args.thousands!r}")
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise UsageError("skmpt impute needs pandas: pip install 'skmpt[impute]'") from None
    if "parquet" in (fmt_in, fmt_out):
        check_parquet()  # before any fit
    _check_encoding(args.encoding, fmt_in, fmt_out)
    header, frame = read_table(args.input, fmt_in, args.encoding)
    if len(frame) < 4:
        raise ValueError(f"{args.input!r} has {len(frame)} rows; at least 4 are needed to choose and fit a model")
    stored = [name for name in frame.index.names if name is not None] if fmt_in == "parquet" else []
    index = _index_positions(header, args.index_col, fmt_in, stored)
    if fmt_out == "parquet" and len(set(header)) < len(header):
        raise UsageError(f"Parquet cannot hold the duplicate column names of IN {header}; write {fmt_in} instead")
    declared = _declared_positions(header, args.categorical, index)
    if declared and args.model not in ("auto", "mixed"):
        raise UsageError(f"--categorical names columns to model as categories, and --model {args.model} models "
                         f"numbers only: use --model auto or mixed")
    typed = category_columns(frame, index, args.missing_values)  # never numbers, whatever their categories
    declared = [j for j in declared if j not in typed]  # categorical already
    X, positions, missing, report = numeric_columns(frame, header, args.missing_values, thousands=args.thousands,
                                                    index=[*index, *typed, *declared])
    categorical = {}
    if args.model in ("auto", "mixed"):  # the numeric families model numbers only: text is passed through
        categorical = categorical_columns(frame, sorted(report["text"]), args.missing_values, declared)
        categorical.update({j: cells for j, cells in typed.items() if cells.notna().any()})
        empty = [header[j] for j in declared if categorical[j].isna().all()]
        if empty:
            raise ValueError(f"column(s) {empty} declared --categorical have no observed value: nothing can impute "
                             f"them; drop them, or pass them through with --index-col")
    report["text"].update({j: int(cells.isna().sum()) for j, cells in typed.items() if j not in categorical})
    if not positions and not categorical:
        if args.model not in ("auto", "mixed"):
            raise ValueError(f"the table has no numeric column to impute, and --model {args.model} models numbers "
                             f"only (text columns are passed through): use --model auto or mixed for categories")
        hint = ""
        if fmt_in != "parquet" and len(header) == 1 and any(separator in str(header[0]) for separator in ";|\t"):
            hint = (f"; its one column is named {header[0]!r}: a table whose cells are separated otherwise than its "
                    f"format's ({fmt_in}) is read as one column (save it as CSV with commas, or as TSV)")
        raise ValueError("the table has no numeric column to impute, and no categorical one (text whose values "
                         "repeat, a category or boolean Parquet column)" + hint)
    passed = [j for j in range(len(header)) if j not in positions and j not in index and j not in categorical]
    logger.info("read %d data rows (numbered 1-based in messages, the header not counted)", len(frame))
    logger.info("modelled: %d numeric columns %s, %d missing cells to fill", len(positions),
                _names(header, positions), int(missing.sum()))
    if categorical:
        logger.info("modelled: %d categorical columns %s, %d missing cells to fill", len(categorical),
                    _names(header, list(categorical)), sum(int(c.isna().sum()) for c in categorical.values()))
    logger.info("passed through unchanged: %s; kept as index: %s", _names(header, passed),
                _names(header, index) + stored)
    if report["marker"]:
        logger.info("--missing-values %r matched the cells %s", args.missing_values, sorted(report["marker"]))
    _warn_holes_left(header, report, categorical)
    if fmt_in == "parquet" and fmt_out != "parquet":  # a CSV read in the encoding can be written in it
        _check_encodable(*_as_text(header, frame), args.out, args.encoding)  # before the fit, not after
        _warn_spelled_missing(header, frame, fmt_out)
    imputed, imputer, filled = _impute(X, positions, categorical, header, args)
    _log_imputer(imputer)
    out = frame.copy()
    for j, cells in categorical.items():  # a hole takes a category's text; observed cells stay as read
        holes = cells.isna().to_numpy()
        if holes.any():
            column = out[j].to_numpy(dtype=object).copy()
            values = filled[j].to_numpy(dtype=object)[holes]
            if j not in typed:  # a category read as stripped text is written as its cells were read, in
                # their most frequent spelling: " red" of a CSV written with ", " between its fields (not a new
                # category "red"), a Python boolean of a Parquet column of them (which Parquet can hold)
                read = {}
                for (text, cell), _ in Counter(zip(cells[~holes], column[~holes], strict=True)).most_common():
                    read.setdefault(text, cell)
                values = [read.get(value, value) for value in values]
            column[holes] = values
            out[j] = pandas.Series(column, index=out.index).astype(out[j].dtype)
    for k, j in enumerate(positions):
        if missing[:, k].any():  # else written back as read, dtype included
            out[j] = _numbers_filled(out[j], missing[:, k], imputed[missing[:, k], k], header[j])
    if fmt_in == "parquet" and fmt_out != "parquet":
        header, out = _as_text(header, out)
    elif fmt_in != "parquet" and fmt_out == "parquet":
        for j in positions:  # the numbers of the text, as pandas reads a column of numbers
            out[j] = _as_numbers(out[j].astype(str).str.strip(), args.thousands)
        for j in [*passed, *index]:  # a missing text cell (empty, "NA", ...) is a null, not the text ""
            out[j] = out[j].where(~text_cells(out[j], None)[1], None)
    write_table(header, out, args.out, fmt_out, args.force,
                lineterminator="\n" if fmt_in == "parquet" else _line_end(args.input, args.encoding),
                encoding=args.encoding, like=args.input if fmt_in == "parquet" else None)


def _log_imputer(imputer):
    """Log the fitted imputer's model, and its fallback where the numbers are a blend with it (or its alone:
    ``--model`` is then not the whole story)."""
    logger.info("imputed with %s", " ".join(repr(imputer.estimator_).split()))
    if imputer.fallback_ is not None:
        logger.info("blended with its fallback %s at the model's weight %.3g (the weight of least error on "
                    "held-out entries hidden again)", " ".join(repr(imputer.fallback_).split()),
                    imputer.fallback_comparison_["model_weight"])


def _check_encodable(header, cells, path, encoding):
    """Refuse a table whose header or text ``cells`` the text encoding cannot hold (the filled cells are
    numbers or categories among the cells)."""
    for text in [*map(str, header), *(cell for column in cells.columns for cell in cells[column].unique())]:
        try:
            text.encode(encoding)
        except UnicodeEncodeError:
            raise ValueError(f"{str(path)!r} cannot be written in {encoding}: it cannot hold the cell {text!r}; pass "
                             f"another --encoding (e.g. utf-8)") from None


def _warn_holes_left(header, report, categorical):
    """Warn of the columns passed through with holes (:func:`numeric_columns`' ``report``), which stay empty: text
    columns not modelled as ``categorical``, and columns neither numeric nor text (a Parquet date or time)."""
    holes = {header[j]: n for j, n in report["text"].items() if n and j not in categorical}
    if holes:
        warnings.warn(f"text column(s) {holes} (column: empty cells) are passed through with their empty cells "
                      f"left empty; only numeric columns are imputed", UserWarning, stacklevel=3)
    holes = {header[j]: n for j, n in report["other"].items() if n}
    if holes:
        warnings.warn(f"column(s) {holes} (column: empty cells) hold neither numbers nor text (dates, times, lists) "
                      f"and are passed through with their empty cells left empty", UserWarning, stacklevel=3)


def _warn_spelled_missing(header, frame, fmt):
    """Warn of a Parquet table's observed text cells that a CSV or TSV (``fmt``) would read back as holes: empty, or
    a word of :data:`MISSING_WORDS` (a category ``"NA"``), which this command and pandas take for missing."""
    import pandas as pd

    found, types = {}, pd.api.types
    for j in range(frame.shape[1]):
        column = frame[j]
        dtype = column.dtype
        if types.is_object_dtype(dtype) or types.is_string_dtype(dtype) or isinstance(dtype, pd.CategoricalDtype):
            text = column[column.notna()].astype(str).str.strip()
            spelled = sorted(set(text[(text == "") | text.str.lower().isin(MISSING_WORDS)]))
            if spelled:
                found[header[j]] = spelled
    if found:
        warnings.warn(f"column(s) {found} (column: spellings) hold observed cells that a {fmt.upper()} spells as "
                      f"missing: read back (by this command or pandas), they are holes; write Parquet to keep them",
                      UserWarning, stacklevel=3)


def _numbers_filled(column, holes, values, name):
    """The numeric column ``column`` (named ``name``) with ``values`` at ``holes``: text cells filled
    with text, a Parquet integer column in its dtype (:func:`_integers_filled`), a decimal one with
    decimals of its most decimal places, a float one as float64."""
    import pandas as pd

    if column.dtype == object or pd.api.types.is_string_dtype(column):
        filled = column.to_numpy(dtype=object).copy()
        read = filled[~holes]
        if len(read) and all(isinstance(cell, decimal.Decimal) for cell in read):  # a Parquet decimal column:
            # decimals at its most decimal places, which its type can hold (text would be an error at the end)
            places = decimal.Decimal(1).scaleb(-max(max(-cell.as_tuple().exponent, 0) for cell in read))
            filled[holes] = [decimal.Decimal(_formatted(v)).quantize(places) for v in values]
        else:  # text cells: filled with text
            filled[holes] = [_formatted(v) for v in values]
        return filled
    if pd.api.types.is_integer_dtype(column.dtype):  # its dtype and values kept (ids above 2**53)
        return _integers_filled(column, holes, values, name)
    filled = column.to_numpy(dtype=np.float64, na_value=np.nan, copy=True)  # float64, as the filled values are
    filled[holes] = values
    return filled


def _integers_filled(column, holes, values, name):
    """The integer ``column`` (a pandas Series: int64, Int64, ...) with ``values`` rounded at ``holes``,
    in its own dtype: its observed integers as read (a float64 column would change those above 2**53),
    as the Python API fills an integer column of a DataFrame. A value the dtype cannot hold is an error."""
    import pandas as pd

    from ..estimators.tables import check_integer_range

    rounded = np.rint(values)
    check_integer_range(rounded, column.dtype, name)
    filled = column.copy()
    filled.iloc[np.flatnonzero(holes)] = pd.array(rounded.astype(np.int64)).astype(column.dtype)
    return filled


def _impute(X, positions, categorical, header, args):
    """``(imputed numbers, imputer, filled table or None)``: the numeric columns ``X`` imputed as the
    Python API imputes them, or, with ``categorical`` columns, the DataFrame of both imputed by the
    default imputer, its columns named as in ``header`` (so are they in its warnings and errors;
    a name that is empty or not unique among them gets its position) and numbered ``0, 1, ...`` by
    their positions in the table on return."""
    import pandas as pd

    verbose = 0 if args.quiet else 1
    from ..estimators import MaskedImputer, MaskedMixedMixture
    from ..estimators.imputer import table_candidates

    epochs = {} if args.max_epochs is None else {"max_epochs": args.max_epochs}
    if not categorical:
        imputer = imputer_for(args.model, len(positions), args.seed, max_epochs=args.max_epochs, verbose=verbose)
        if args.model == "mixed":  # numbers only: the mixed mixture is a Gaussian mixture fitted by EM
            candidates = {"mixed": [MaskedMixedMixture(k, random_state=args.seed, **epochs) for k in (1, 2, 4, 8)]}
            imputer.set_params(estimator=_search(candidates, args.seed, verbose))
        return imputer.fit_transform(X), imputer, None

    columns = {**{j: X[:, k] for k, j in enumerate(positions)}, **categorical}
    order = sorted(columns)
    names = [str(header[j]).removeprefix("\ufeff") for j in order]  # as written, without a byte-order mark
    labels = [name if name and names.count(name) == 1 else f"{name} (column {j + 1})" for j, name in zip(
        order, names, strict=True)]
    if len(set(labels)) < len(labels):
        labels = [f"column {j + 1}" for j in order]
    label = dict(zip(order, labels, strict=True))
    table = pd.DataFrame({label[j]: columns[j] for j in order})
    candidates = None  # the default imputer's, unless --model mixed leaves out the VAE or --max-epochs caps them
    if args.model == "mixed" or epochs:
        candidates = table_candidates(len(table), table.shape[1], random_state=args.seed)
        if args.model == "mixed":
            candidates.pop("vae", None)  # none on tables of more than 20,000 rows
        candidates = {family: [model.set_params(**epochs) for model in models] for family, models in candidates.items()}
    imputer = MaskedImputer(_search(candidates, args.seed, verbose), random_state=args.seed,
                            column_types={label[j]: "categorical" for j in categorical})
    filled = imputer.set_output(transform="pandas").fit_transform(table).set_axis(order, axis=1)
    return filled[positions].to_numpy(dtype=np.float64), imputer, filled


def _as_text(header, frame):
    """A Parquet table as text cells: a stored index (any but the default ``0, 1, ...``) as the first columns."""
    import pandas as pd

    index = frame.index
    if not (index.equals(pd.RangeIndex(len(frame))) and index.names == [None]):
        names = [f"level_{i}" if name is None else name for i, name in enumerate(index.names)]
        frame = pd.concat([index.to_frame(index=False, name=names), frame.reset_index(drop=True)], axis=1)
        header = [*names, *header]
        frame = frame.set_axis(range(len(header)), axis=1)
    return header, frame.astype(object).where(frame.notna(), "").astype(str)
