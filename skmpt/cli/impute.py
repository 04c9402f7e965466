"""``skmpt impute IN -o OUT``: fill the holes of a table with :class:`skmpt.MaskedImputer`.

The table is a CSV (``.csv``), TSV (``.tsv``, ``.tab``) or Parquet (``.parquet``, needs pyarrow)
file read with pandas. A cell is missing when it is empty, ``NaN``/``NA``/``null`` (any case), or
equal to ``--missing-values``. Every column whose observed cells are all numbers is imputed; a
column of text is passed through untouched; the header and the order of the columns are kept, and
every observed cell is written back as it was read (only missing cells of the numeric columns get
new text). The imputation is that of the Python API::

    MaskedImputer(random_state=seed).fit_transform(numeric_columns_as_float)

for ``--model auto`` (the family and size chosen by held-out likelihood); another ``--model``
restricts :class:`skmpt.MaskedModelSearch` to that family (its size still chosen). The output is written to a
temporary file beside ``OUT`` and renamed when complete; ``OUT`` may not be ``IN``.
"""

import logging
import os

import numpy as np

from . import UsageError
from .common import atomic_output, check_outputs, non_negative_int, positive_int

HELP = "fill the missing cells of a CSV, TSV or Parquet table"
DESCRIPTION = ("Fill the missing cells of the numeric columns of a table with a latent-variable model chosen by the "
               "held-out likelihood of the observed cells; text columns and observed cells are kept as they are.")
MODELS = ("auto", "full", "fa", "ppca", "diag", "linear_vae", "vae")
FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".parquet": "parquet"}
#: Spellings of a missing cell besides the empty one (compared in lower case).
MISSING_WORDS = ("nan", "na", "n/a", "null", "none")

logger = logging.getLogger("skmpt.cli")


def add_arguments(parser):
    """The options of ``skmpt impute``."""
    add = parser.add_argument
    add("input", metavar="IN", help="table to read: .csv, .tsv/.tab or .parquet")
    add("-o", "--out", required=True, help="table to write, in the format of its extension")
    add("--format", choices=sorted(set(FORMATS.values())), default=None,
        help="format of IN and OUT when their extension does not say")
    add("--missing-values", default=None, metavar="MARKER",
        help="a cell equal to MARKER is missing too (besides empty cells and NaN)")
    add("--model", choices=MODELS, default="auto",
        help="'auto': the family and size chosen by held-out likelihood; a family: its size chosen")
    add("--max-epochs", type=positive_int, default=None,
        help="most epochs of each candidate's fit (default: the candidates' own, 200)")
    add("--seed", type=non_negative_int, default=0, help="random_state of the imputer")
    add("--force", action="store_true", help="overwrite OUT if it exists")
    add("--quiet", action="store_true", help="no progress messages")
    add("--debug", action="store_true", help="show the traceback of an error")


def _format(path, given):
    fmt = given or FORMATS.get(os.path.splitext(str(path))[1].lower())
    if fmt is None:
        raise UsageError(f"cannot tell the format of {str(path)!r} from its extension; pass --format "
                         f"({', '.join(sorted(set(FORMATS.values())))})")
    return fmt


def read_table(path, fmt):
    """The table as a DataFrame of text cells (CSV, TSV) or typed columns (Parquet)."""
    import pandas as pd

    try:
        if fmt == "parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, sep="," if fmt == "csv" else "\t", dtype=str, keep_default_na=False,
                           na_filter=False, skip_blank_lines=True)
    except ImportError as exc:
        raise UsageError(f"reading {fmt} needs a package that is not installed: {exc}") from None
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError, OSError) as exc:
        raise ValueError(f"{str(path)!r} is not a {fmt} table: {' '.join(str(exc).split())}") from None


def numeric_columns(table, marker):
    """The columns to impute as a float array (NaN where missing), their names, and the missing mask.

    A column is numeric when every cell that is not missing is a number; a column none of whose
    cells is a number is text (passed through); a column mixing the two, a numeric column with no
    observed cell, and a ``marker`` that equals a number of the data written otherwise are errors.
    """
    import pandas as pd

    names, values, infinite = [], [], {}
    for name in table.columns:
        column = table[name]
        is_text = column.dtype == object or pd.api.types.is_string_dtype(column)
        text = column.astype(str).str.strip() if is_text else None
        if text is None and not pd.api.types.is_numeric_dtype(column):
            continue
        if text is None:
            numbers = column.astype(np.float64)
            missing = np.array(numbers.isna(), dtype=bool)
        else:
            missing = np.array((text == "") | text.str.lower().isin(MISSING_WORDS), dtype=bool)
            if marker is not None:
                missing |= np.array(text == marker, dtype=bool)
            numbers = pd.to_numeric(text.where(~missing), errors="coerce")
            bad = ~missing & np.array(numbers.isna(), dtype=bool)
            if bad.any() and not (~missing & ~bad).any():
                continue  # a text column: no observed cell is a number
            if bad.any():
                rows = np.flatnonzero(bad)[:3]
                raise ValueError(f"column {name!r} mixes numbers and text: row(s) {(rows + 1).tolist()} hold "
                                 f"{[column.iloc[i] for i in rows]}; mark missing cells with --missing-values")
        if marker is not None and text is None:
            missing |= np.array(numbers == _as_number(marker), dtype=bool)
        _check_marker(name, numbers.to_numpy(dtype=np.float64), missing, marker, text)
        if missing.all():
            raise ValueError(f"column {name!r} has no observed value: nothing can impute it; drop it")
        rows = np.flatnonzero(~missing & np.isinf(numbers.to_numpy(dtype=np.float64)))
        if len(rows):
            infinite[name] = (rows[:3] + 1).tolist()
        names.append(name)
        values.append(np.where(missing, np.nan, numbers.to_numpy(dtype=np.float64)))
    if infinite:
        where = "; ".join(f"{name!r} at row(s) {rows}" for name, rows in infinite.items())
        raise ValueError(f"column(s) {list(infinite)} hold infinite values ({where}): no model can fit or "
                         f"impute them; replace them, or mark them missing with --missing-values")
    if not names:
        raise ValueError("the table has no numeric column to impute")
    X = np.column_stack(values)
    return X, names, np.isnan(X)


def _as_number(marker):
    try:
        return float(marker)
    except ValueError:
        return None


def _check_marker(name, numbers, missing, marker, text):
    """A numeric marker written differently in the data (``-1`` and ``-1.0``) is ambiguous: refuse it."""
    value = None if marker is None else _as_number(marker)
    if value is None or text is None:
        return
    clash = ~missing & (numbers == value)
    if clash.any():
        row = int(np.flatnonzero(clash)[0])
        raise ValueError(f"--missing-values {marker!r} collides with the value {text.iloc[row]!r} of column "
                         f"{name!r} (row {row + 1}): is it missing or a number? Choose a marker that the data "
                         f"never hold")


def imputer_for(model, n_features, seed, *, max_epochs=None, verbose=0):
    """The :class:`skmpt.MaskedImputer` that ``--model``, ``--max-epochs`` and ``--seed`` name.

    ``auto`` without ``max_epochs`` is ``MaskedImputer(random_state=seed)``, the default one.
    """
    from ..estimators import MaskedImputer, MaskedModelSearch
    from ..estimators.selection import default_candidates

    candidates = None
    if model != "auto" or max_epochs is not None:
        families = "auto" if model == "auto" else [model]
        candidates = default_candidates(n_features, families=families, random_state=seed)
        for models in candidates.values():
            for candidate in models:
                candidate.set_params(max_epochs=max_epochs or candidate.max_epochs)
    return MaskedImputer(MaskedModelSearch(candidates, random_state=seed, verbose=verbose), random_state=seed)


def _formatted(value):
    return repr(float(value))


def run(args):
    """Read ``args.input``, impute it, write ``args.out``."""
    if not os.path.isfile(args.input):
        raise UsageError(f"IN {args.input!r} is not a file")
    fmt_in, fmt_out = _format(args.input, args.format), _format(args.out, args.format)
    check_outputs({"IN": args.input}, {"--out": args.out}, overwrite=args.force)
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise UsageError("skmpt impute needs pandas: pip install 'skmpt[impute]'") from None
    table = read_table(args.input, fmt_in)
    if len(table) < 4:
        raise ValueError(f"{args.input!r} has {len(table)} rows; at least 4 are needed to choose and fit a model")
    X, names, missing = numeric_columns(table, args.missing_values)
    logger.info("read %d rows; imputing %d missing cells of %d numeric columns (%d text columns kept)",
                len(table), int(missing.sum()), len(names), table.shape[1] - len(names))
    imputer = imputer_for(args.model, len(names), args.seed, max_epochs=args.max_epochs,
                          verbose=0 if args.quiet else 1)
    imputed = imputer.fit_transform(X)
    logger.info("imputed with %s", " ".join(repr(imputer.estimator_).split()))
    out = table.copy()
    for j, name in enumerate(names):
        if fmt_in == "parquet" or fmt_out == "parquet":
            out[name] = imputed[:, j]  # observed entries come back from transform bit for bit
        else:
            filled = [_formatted(v) for v in imputed[missing[:, j], j]]
            column = out[name].to_numpy(dtype=object).copy()
            column[missing[:, j]] = filled
            out[name] = column
    _write(out, args.out, fmt_out, args.force)


def _write(table, path, fmt, overwrite):
    with atomic_output(path, overwrite=overwrite) as [file]:
        if fmt == "parquet":
            try:
                table.to_parquet(file, index=False)
            except ImportError as exc:
                raise UsageError(f"writing parquet needs a package that is not installed: {exc}") from None
        else:
            file.write(table.to_csv(index=False, sep="," if fmt == "csv" else "\t").encode("utf-8"))
