"""Tables as people have them: a pandas DataFrame's columns as numbers for a model, and back.

A column is *numeric* (float or integer dtypes) or *categorical* (bool, pandas ``category``,
strings or other objects); ``column_types`` overrides the reading of the dtypes per column. A
categorical column becomes the index of its category (its ``category`` dtype's order, else its
values sorted), a float for the models; :meth:`TableLayout.decode` puts the model's numbers back
into a copy of the table, filling only its holes, so every observed cell is the one read, with its
column's dtype.
"""

import numbers
import warnings
from collections.abc import Hashable

import numpy as np

__all__ = ["COLUMN_TYPES", "MAX_AUTO_CATEGORIES", "TableLayout", "check_integer_range", "from_polars", "is_polars",
           "is_table", "values_repeat"]

#: The values of ``column_types``: ``"count"`` (non-negative integers, a Poisson) is never read from a dtype.
COLUMN_TYPES = ("numeric", "categorical", "count")

#: A string column read as categorical with more distinct values than this is refused as an
#: identifier (a name, a key), unless ``column_types`` names it categorical.
MAX_AUTO_CATEGORIES = 1000
# A string column whose values do not repeat (:func:`values_repeat`) is warned of as an identifier only
# with more distinct values than this: fewer say nothing (three distinct values in four cells fit a
# category as well as a key).
_FEW_VALUES = 10


def values_repeat(n_distinct, n_observed):
    """Whether a column of text with ``n_distinct`` distinct values in ``n_observed`` observed cells
    reads as a category, whose values repeat, rather than as an identifier (a name, a key, a comment):
    at most :data:`MAX_AUTO_CATEGORIES` distinct values, and at most half as many as the observed
    cells. The one rule of :class:`~skmpt.MaskedImputer`, which warns of a string column that fails it
    (with more than ten distinct values), and of ``skmpt impute``, which passes such a column through
    untouched.

    Examples
    --------
    >>> from skmpt.estimators.tables import values_repeat
    >>> values_repeat(3, 150)  # a species
    True
    >>> values_repeat(140, 150)  # names
    False
    >>> values_repeat(1001, 5000)  # more than MAX_AUTO_CATEGORIES
    False
    """
    return 0 < n_distinct <= min(MAX_AUTO_CATEGORIES, n_observed / 2)


def is_table(X):
    """Whether ``X`` is a pandas DataFrame (pandas is not imported unless it already is).

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.estimators.tables import is_table
    >>> is_table(np.zeros((2, 2)))
    False
    """
    return type(X).__module__.startswith("pandas") and type(X).__name__ == "DataFrame"


def is_polars(X):
    """Whether ``X`` is a polars DataFrame (polars is not imported unless it already is).

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.estimators.tables import is_polars
    >>> is_polars(np.zeros((2, 2)))
    False
    """
    return type(X).__module__.startswith("polars") and type(X).__name__ == "DataFrame"


def from_polars(X):
    """A polars DataFrame ``X`` as a pandas DataFrame whose dtypes are polars' own (nullable integers,
    floats and booleans, strings: pyarrow-backed columns), its ``Categorical`` and ``Enum`` columns
    pandas ``category`` ones of the same categories, unused ones included, so that
    :class:`TableLayout` reads its columns as it reads a pandas table's; anything else as it is (but a
    polars ``LazyFrame``, a query not yet run: a ``TypeError``).

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.estimators.tables import from_polars
    >>> from_polars(np.zeros((2, 2))).shape
    (2, 2)
    """
    if type(X).__module__.startswith("polars") and type(X).__name__ == "LazyFrame":
        raise TypeError("X is a polars LazyFrame, a query not yet run: pass X.collect().")
    if not is_polars(X):
        return X
    try:
        frame = X.to_pandas(use_pyarrow_extension_array=True)
    except ModuleNotFoundError as error:  # polars converts through pyarrow
        raise ImportError(f"A polars DataFrame is read as a pandas one through pyarrow, which is not installed "
                          f"({error}): pip install pandas pyarrow.") from error
    import polars as pl  # a polars table came in: polars is imported already

    for name, dtype in X.schema.items():
        if isinstance(dtype, (pl.Categorical, pl.Enum)):  # as a dictionary, its categories would be its chunks'
            frame[name] = X[name].to_pandas()
    return frame


def _read_kind(series):
    """``"numeric"`` or ``"categorical"`` from a column's dtype."""
    import pandas as pd

    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype) or isinstance(dtype, pd.CategoricalDtype) or _is_dictionary(dtype):
        return "categorical"
    if pd.api.types.is_numeric_dtype(dtype):
        return "numeric"
    if pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype):
        return "categorical"
    raise ValueError(f"Column {series.name!r} has dtype {dtype}, neither numeric nor categorical: convert it (e.g. "
                     f"a date to a number) or drop it.")


def _is_dictionary(dtype):
    """Whether ``dtype`` is pyarrow's dictionary type (``read_parquet(dtype_backend="pyarrow")``'s category)."""
    import pandas as pd

    if not isinstance(dtype, pd.ArrowDtype):
        return False
    import pyarrow

    return pyarrow.types.is_dictionary(dtype.pyarrow_dtype)


def _holds_numbers(dtype):
    """Whether a column of ``dtype`` can hold any number: not a boolean, a category, a pyarrow dictionary or
    a string one (an object column can)."""
    import pandas as pd

    return not (pd.api.types.is_bool_dtype(dtype) or isinstance(dtype, pd.CategoricalDtype) or _is_dictionary(dtype)
                or (pd.api.types.is_string_dtype(dtype) and not pd.api.types.is_object_dtype(dtype)))


def _sorted_categories(values, name):
    """Distinct observed values, sorted (by their text when they are of mixed types); a value that
    cannot be a category (a list, a dict) is an error naming the column."""
    unhashable = [value for value in values if not isinstance(value, Hashable)]
    if unhashable:
        raise ValueError(f"Column {name!r} holds {type(unhashable[0]).__name__} values ({unhashable[0]!r}), which "
                         f"cannot be categories: turn each into a label (e.g. a string) or drop the column.")
    first = {}
    for value in values:  # True == 1 and hash alike: as categories they would be one, its holes filled with either
        other = first.setdefault(value, value)
        if isinstance(other, (bool, np.bool_)) != isinstance(value, (bool, np.bool_)):
            raise ValueError(f"Column {name!r} holds {other!r} and {value!r}, which Python takes for one value: as "
                             f"categories they would be one. Give the column one type (e.g. strings, or booleans).")
    try:
        return sorted(set(values))
    except TypeError:
        return sorted(set(values), key=lambda v: (type(v).__name__, str(v)))


class TableLayout:
    """The columns of a DataFrame seen at fit: their names, dtypes, kinds and categories.

    Parameters
    ----------
    frame : pandas.DataFrame
        The training table; missing cells are ``NaN``, ``None`` or ``pd.NA``.
    column_types : dict of str to {"numeric", "categorical", "count"} or None, default=None
        Overrides the kind read from a column's dtype (e.g. an integer code as categorical, a
        number of visits as a count).
    missing_values : float, default=np.nan
        A numeric marker of missing cells, besides ``NaN``, ``None`` and ``pd.NA``: in numeric
        columns and in categorical ones whose cells are numbers (a code ``-1``; never a boolean).

    Attributes
    ----------
    columns : list
        The column names, in order.
    dtypes : list
        Each column's dtype at fit.
    categorical : ndarray of int
        The categorical columns' positions.
    counts : ndarray of int
        The count columns' positions.
    integers : ndarray of int
        The positions of the columns of whole numbers: counts, and numeric columns of an integer dtype.
    categories : list of list
        Each categorical column's categories (their index is the code a model sees).

    Examples
    --------
    >>> import pandas as pd
    >>> from skmpt.estimators.tables import TableLayout
    >>> frame = pd.DataFrame({"size": [1.5, None, 2.0], "colour": ["red", "blue", None]})
    >>> layout = TableLayout(frame)
    >>> layout.categorical.tolist(), layout.categories
    ([1], [['blue', 'red']])
    >>> layout.encode(frame)
    array([[1.5, 1. ],
           [nan, 0. ],
           [2. , nan]])
    >>> layout.decode(frame, [[1.5, 1.0], [1.7, 0.0], [2.0, 0.0]])["colour"].tolist()
    ['red', 'blue', 'blue']
    """

    def __init__(self, frame, column_types=None, missing_values=np.nan):
        import pandas as pd

        column_types = {} if column_types is None else dict(column_types)
        unknown = set(column_types) - set(frame.columns)
        if unknown:
            raise ValueError(f"column_types names {sorted(map(str, unknown))}, not columns of X.")
        for name, kind in column_types.items():
            if kind not in COLUMN_TYPES:
                raise ValueError(f"column_types[{name!r}] must be one of {COLUMN_TYPES}; got {kind!r}.")
        if not frame.columns.is_unique:
            repeated = frame.columns[frame.columns.duplicated()].unique().tolist()
            raise ValueError(f"X has more than one column named {repeated[:10]}: give each column its own name.")
        self.columns = list(frame.columns)
        self.dtypes = list(frame.dtypes)
        self.missing_values = missing_values
        kinds, self.categories = [], []
        for name in self.columns:
            series = frame[name]
            if pd.api.types.is_complex_dtype(series.dtype):
                raise ValueError(f"Column {name!r} has dtype {series.dtype}: no model imputes complex numbers. Split "
                                 f"it into its real and imaginary parts, two numeric columns.")
            declared = column_types.get(name)
            kind = declared or _read_kind(series)
            if declared in ("numeric", "count") and (
                    pd.api.types.is_bool_dtype(series.dtype) or isinstance(series.dtype, pd.CategoricalDtype)):
                # the holes would come back as a number the dtype cannot hold (a category not among its
                # categories, True for any mean but zero)
                raise ValueError(f"Column {name!r} has dtype {series.dtype} and cannot hold the {kind} values a "
                                 f"model imputes: convert it to numbers first, or leave it categorical.")
            kinds.append(kind)
            if kind == "categorical":
                self.categories.append(self._learn(series, self._marked(series), explicit=name in column_types))
        self.categorical = np.flatnonzero(np.array(kinds) == "categorical")
        self.counts = np.flatnonzero(np.array(kinds) == "count")
        self.integers = np.flatnonzero([kind == "count" or (kind == "numeric" and pd.api.types.is_integer_dtype(dtype))
                                        for kind, dtype in zip(kinds, self.dtypes, strict=True)])

    def _learn(self, series, marked, *, explicit):
        """A categorical column's categories (its dtype's, but the marker; else its observed values but
        those ``marked``), with the warnings and errors that name it, which count the values observed."""
        import pandas as pd

        name = series.name
        values = _sorted_categories(series[~marked].dropna().tolist(), name)
        categories = values
        if isinstance(series.dtype, pd.CategoricalDtype):  # unused categories kept: a later table may hold them
            categories = [value for value in series.dtype.categories if not self._is_marker(value)]
        elif pd.api.types.is_bool_dtype(series.dtype):  # a boolean dtype's two values, as a category dtype's
            categories = [value for value in (False, True) if not self._is_marker(value)]
        if not categories:
            raise ValueError(f"Column {name!r} is categorical and has no observed value: no model can fill it.")
        as_numbers = all(isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_) for value in values)
        numeric = (f" Its values are numbers (an object column, as pd.NA among floats makes one): pass "
                   f"column_types={{{name!r}: 'numeric'}} to model them so." if as_numbers else "")
        if not explicit and len(values) > MAX_AUTO_CATEGORIES:
            raise ValueError(
                f"Column {name!r} holds {len(values)} distinct values: an identifier (a name, a key), not a "
                f"category (more than {MAX_AUTO_CATEGORIES}). Drop it, or pass column_types={{{name!r}: "
                f"'categorical'}} to model it anyway.{numeric}"
            )
        observed = int((series.notna() & ~marked).sum())
        if not explicit and not isinstance(series.dtype, pd.CategoricalDtype) and len(values) > _FEW_VALUES and (
                not values_repeat(len(values), observed)):
            warnings.warn(f"Column {name!r} holds {len(values)} distinct values in {observed} observed cells: "
                          f"more like an identifier (a name, a key) than a category, whose values repeat; its holes "
                          f"get other rows' values. Drop it, or pass column_types={{{name!r}: 'categorical'}} to "
                          f"model it as a category without this warning.{numeric}", UserWarning, stacklevel=4)
        if len(values) == 1:
            warnings.warn(f"Column {name!r} is categorical with one category ({values[0]!r}): the model learns "
                          f"nothing from it, and fills its holes with that category.", UserWarning, stacklevel=4)
        return categories

    def _is_marker(self, value):
        """Whether a cell's ``value`` is the numeric ``missing_values`` (never NaN, a boolean or text)."""
        marker = self.missing_values
        return (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
                and not np.isnan(marker) and bool(value == marker))

    def _marked(self, series):
        """Where a categorical column's cells are the numeric ``missing_values`` (a code ``-1``): holes."""
        if np.isnan(self.missing_values):
            return np.zeros(len(series), dtype=bool)
        return np.array([self._is_marker(value) for value in series.tolist()], dtype=bool)

    def check_columns(self, frame):
        """Refuse a table whose columns are not those seen at fit, in order."""
        if list(frame.columns) != self.columns:
            raise ValueError(f"X has columns {list(frame.columns)[:10]}; fit saw {self.columns[:10]} (same names, "
                             f"same order).")

    def missing(self, frame):
        """Where ``frame``'s cells are missing, a boolean array of its shape."""
        missing = frame.isna().to_numpy().copy()  # pandas' may be read-only (copy-on-write)
        if not (isinstance(self.missing_values, numbers.Real) and np.isnan(self.missing_values)):
            for j, name in enumerate(self.columns):
                if j in self.categorical:
                    missing[:, j] |= self._marked(frame[name])
                else:  # pandas' NA compares to NA (a nullable column): a hole already, not a match
                    missing[:, j] |= (frame[name] == self.missing_values).to_numpy(dtype=bool, na_value=False)
        return missing

    def encode(self, frame):
        """``frame`` as a float64 array: numbers as they are, categories as their codes, NaN where
        a cell is missing; a category not seen at fit is an error naming its column."""
        self.check_columns(frame)
        missing = self.missing(frame)
        out = np.empty(frame.shape, dtype=np.float64)
        codes = dict(zip(self.categorical.tolist(), self.categories, strict=True))
        for j, name in enumerate(self.columns):
            series = frame[name]
            if j not in codes:
                if _holds_numbers(self.dtypes[j]) and not _holds_numbers(series.dtype):
                    raise ValueError(f"Column {name!r} was numeric at fit ({self.dtypes[j]}) and has dtype "
                                     f"{series.dtype} here, which cannot hold the numbers imputed in its holes: "
                                     f"give it a numeric dtype (e.g. X.astype({{{name!r}: 'float64'}})).")
                try:
                    numbers = series.to_numpy(dtype=np.float64, na_value=np.nan)
                except (TypeError, ValueError) as error:
                    raise ValueError(f"Column {name!r} is read as numbers, and it holds values that are not: "
                                     f"{error}.") from None
                values = np.where(missing[:, j], np.nan, numbers)
                bad = ~np.isnan(values) & ((values < 0) | (values != np.round(values)))
                if j in self.counts and bad.any():
                    raise ValueError(f"Column {name!r} holds counts, non-negative integers; it holds "
                                     f"{values[bad][:5].tolist()}.")
                out[:, j] = values
                continue
            index = {category: code for code, category in enumerate(codes[j])}
            observed = series[~missing[:, j]]
            unseen = [value for value in observed.unique().tolist() if value not in index]
            if unseen:
                raise ValueError(f"Column {name!r} holds {unseen[:5]}, categories not seen at fit (those are "
                                 f"{codes[j][:10]}{' ...' if len(codes[j]) > 10 else ''}).")
            out[:, j] = np.nan
            out[~missing[:, j], j] = [index[value] for value in observed.tolist()]
        return out

    def decode(self, frame, values):
        """A copy of ``frame`` with its missing cells filled from ``values`` (the model's array):
        numbers as they are (rounded in an integer column), categories from their codes; every
        observed cell and every column's dtype kept.

        Parameters
        ----------
        frame : pandas.DataFrame
            The table that ``values`` completes.
        values : array-like of shape (n_samples, n_columns)
            Codes in the categorical columns.

        Returns
        -------
        filled : pandas.DataFrame
        """
        import pandas as pd

        values = np.asarray(values, dtype=np.float64)
        missing = self.missing(frame)
        filled = frame.copy()
        codes = dict(zip(self.categorical.tolist(), self.categories, strict=True))
        for j, name in enumerate(self.columns):
            rows = missing[:, j]
            if not rows.any():
                continue
            column, dtype = values[rows, j], frame[name].dtype
            if j in codes:
                categories = np.empty(len(codes[j]), dtype=object)
                categories[:] = codes[j]
                column = categories[np.rint(column).astype(np.intp)]
            else:  # in the column's own (float or integer) dtype, an integer or a count rounded
                # an integer column at fit comes as floats where it has holes (int64 holds no NaN)
                if j in self.integers or pd.api.types.is_integer_dtype(dtype):
                    column = np.rint(column)
                if pd.api.types.is_unsigned_integer_dtype(dtype) and (column < 0).any() and j not in self.counts:
                    raise ValueError(f"Column {name!r} has dtype {dtype}, which holds no negative number; the "
                                     f"model imputes {column[column < 0][:5].tolist()} there, as a Gaussian can. "
                                     f"Declare it a count, non-negative integers (column_types={{{name!r}: "
                                     f"'count'}}).")
                if pd.api.types.is_integer_dtype(dtype):
                    check_integer_range(column, dtype, name)
                column = pd.array(column).astype(dtype)
            source = frame[name]
            if j in codes and rows.all():
                # nothing observed (a column read as float64 NaN, an Int64 or boolean one of NA): the column is
                # its fills, in the dtype of fit (whose integers or booleans hold no hole)
                filled[name] = pd.Series(column, index=frame.index, name=source.name).astype(self.dtypes[j])
                continue
            try:
                filled[name] = _filled(source, rows, column)
            except (TypeError, ValueError):
                # a dtype that cannot hold the categories (a category dtype without a category seen at fit); the
                # fit's dtype can
                filled[name] = _filled(source.astype(self.dtypes[j]), rows, column)
        return filled


def _filled(series, rows, column):
    """``series`` with the values ``column`` at ``rows`` (a boolean mask), in its own dtype (an
    error where the dtype cannot hold them)."""
    import pandas as pd

    dtype = series.dtype
    if pd.api.types.is_numeric_dtype(dtype) and column.dtype == object:
        column = pd.array(list(column)).astype(dtype)  # e.g. float categories of a float column
    series = series.copy()
    series.iloc[np.flatnonzero(rows)] = column  # pandas 2 may upcast where pandas 3 raises
    return series.astype(dtype)


def check_integer_range(values, dtype, name):
    """Refuse integers ``values`` beyond what the integer ``dtype`` of the column ``name`` holds: a
    cast would wrap them around (143 as an int8 is -113). :meth:`TableLayout.decode` and ``skmpt
    impute`` check an integer column's filled holes with it.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.estimators.tables import check_integer_range
    >>> check_integer_range(np.array([3.0, 120.0]), np.dtype("int8"), "age")
    >>> check_integer_range(np.array([143.0]), np.dtype("int8"), "age")
    Traceback (most recent call last):
    ...
    ValueError: Column 'age' has dtype int8, which holds -128 to 127; the model imputes [143.0] there...
    """
    limits = np.iinfo(getattr(dtype, "numpy_dtype", dtype))
    outside = (values < limits.min) | (values > limits.max)
    if outside.any():
        raise ValueError(f"Column {name!r} has dtype {dtype}, which holds {limits.min} to {limits.max}; the model "
                         f"imputes {values[outside][:5].tolist()} there. Give the column a wider dtype (e.g. "
                         f"int64 or Int64).")
