"""MaskedImputer: scikit-learn's imputer API around any skmpt array estimator."""

import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.experimental import enable_iterative_imputer  # noqa: F401 (makes IterativeImputer importable)
from sklearn.impute import IterativeImputer, MissingIndicator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._utils import OutputChoiceMixin
from .._validation import Options, is_imputer, validate_parameters
from ..models.missingness import SelfMaskingGaussian
from ._dask import as_dask_array, check_collection, is_dask_collection, map_rows, seeded_rows_of_block
from .tables import TableLayout, from_polars, is_polars, is_table
from .mixed_mixture import MaskedMixedMixture
from .ppca import MaskedPPCA
from .selection import MaskedModelSearch, default_candidates
from .vae import MaskedVAE

__all__ = ["MaskedImputer", "table_candidates"]

# Components of the mixed mixtures MaskedImputer() tries on a table with categorical columns (the
# search stops at the first that does not raise the held-out likelihood).
_MIXED_SIZES = (1, 2, 4, 8, 16)
# A VAE candidate fits for up to 200 epochs over the rows (the search's at most max_samples, then
# every row if it wins): tens of times a mixture's EM. So the search tries one VAE, the family's
# smallest, and only on tables of at most this many rows, so that the refit stays within minutes on
# one core (cost rules, set from CPU time, not from the accuracy of any benchmark).
_VAE_MAX_ROWS = 20_000
# fallback="trees": chained extra-trees, a lighter missForest. Chosen on the tuning tables of
# benchmarks/imputation_real.py (4 tables, MCAR and self-masking at 20 and 40 %, 3 seeds) among eight
# settings by RMSE against the 50-tree missForest and CPU time: 10 trees, leaves of 3 rows, every
# feature per split, 2 rounds imputed 0.9 % worse than missForest (geometric mean), at most 1.7-4.1
# times IterativeImputer's CPU per table; 20 trees, half the features, 3 rounds: 2.0 % worse, 3.7-7.5.
_TREES = {"n_estimators": 10, "min_samples_leaf": 3}
_TREE_ROUNDS = 2
# fallback="trees" on a table with categorical columns: per categorical column, missForest's classifier
# (50 extra trees, here on bootstrap samples, for their out-of-bag guesses) against the model's most
# probable category (the model refitted to the other half of the rows: both guess entries they were
# not fitted to), on every observed entry of the column; the classifier fills the column's holes
# where it is wrong less often by more than _CATEGORICAL_Z standard errors of the paired difference.
# The level is the usual one-sided 5 % (set when the model was judged on the rows it was fitted to,
# and kept: on the mixed tuning tables the two comparisons gave the same PFC within noise).
_CLASSIFIER = {"n_estimators": 50}
_CATEGORICAL_Z = 1.645


class ChainedTrees(IterativeImputer):
    """The imputer of ``fallback="trees"``: scikit-learn's :class:`~sklearn.impute.IterativeImputer`
    (an :class:`~sklearn.ensemble.ExtraTreesRegressor` by default) on each column's
    ``(x - mean) / std``, its imputations mapped back to the column's units.

    scikit-learn's trees read their inputs in float32, whose resolution is relative to a value's
    size: on columns as given, a shift of one column by 1e6 moved the imputations of every column,
    values beyond float32's range (1e50) could not be read, and a column spanning less than 1e-7
    looked constant. Standardised, the imputations move with a column's units (up to float64's
    rounding), as the models' do. Parameters as :class:`~sklearn.impute.IterativeImputer`'s.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.estimators.imputer import ChainedTrees
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(-2, 2, 200)
    >>> X = np.c_[x, np.sin(3 * x)] + 0.01 * rng.normal(size=(200, 2))
    >>> X[rng.random(200) < 0.2, 1] = np.nan
    >>> shifted = X + [0.0, 1e6]
    >>> filled = ChainedTrees(max_iter=2, random_state=0).fit_transform(X)
    >>> moved = ChainedTrees(max_iter=2, random_state=0).fit_transform(shifted)
    >>> bool(np.allclose(moved - [0.0, 1e6], filled, atol=1e-6))
    True
    """

    def fit_transform(self, X, y=None, **params):
        """Fit to ``X`` (NaN where missing) standardised per column, and fill its holes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
        **params : dict
            As :meth:`sklearn.impute.IterativeImputer.fit_transform` takes them.

        Returns
        -------
        X_imputed : ndarray of shape (n_samples, n_features)
            The observed entries as given.
        """
        X = check_array(X, dtype=np.float64, ensure_all_finite="allow-nan", input_name="X")  # infinity: an error
        with warnings.catch_warnings():  # a column with no observed entry: scikit-learn's own warning follows
            warnings.simplefilter("ignore", RuntimeWarning)
            center = np.nan_to_num(np.nanmean(X, 0))
            deviation = X - center
            largest = np.nan_to_num(np.nanmax(np.abs(deviation), 0, initial=0.0))
            unit = np.where(largest > 0, largest, 1.0)  # divided before squaring: no square overflows
            scale = unit * np.sqrt(np.nan_to_num(np.nanmean((deviation / unit) ** 2, 0)))
        self.center_, self.scale_ = center, np.where(scale > 0, scale, 1.0)
        return self._back(super().fit_transform((X - self.center_) / self.scale_, y, **params), X)

    def transform(self, X):
        """Fill the holes of ``X`` (NaN where missing) in the units of the fit.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_imputed : ndarray of shape (n_samples, n_features)
            The observed entries as given.
        """
        check_is_fitted(self)
        X = check_array(X, dtype=np.float64, ensure_all_finite="allow-nan", input_name="X")
        if X.shape[1] != self.n_features_in_:  # before NumPy's broadcasting error
            raise ValueError(f"X has {X.shape[1]} features, but ChainedTrees was fitted to {self.n_features_in_}.")
        return self._back(super().transform((X - self.center_) / self.scale_), X)

    def _back(self, Z, X):
        """``Z`` in ``X``'s units where ``X`` is missing, ``X`` elsewhere."""
        return np.where(np.isnan(X), self.center_ + self.scale_ * np.asarray(Z, dtype=np.float64), X)


def _chained_trees(random_state):
    """The ``fallback="trees"`` of a fit: :class:`ChainedTrees` of extra trees, seeded by ``random_state``."""
    trees = ExtraTreesRegressor(**_TREES, random_state=random_state, n_jobs=1)
    return ChainedTrees(trees, max_iter=_TREE_ROUNDS, random_state=random_state)


def table_candidates(n_samples, n_features, *, random_state=None):
    """The candidates ``MaskedImputer(estimator=None)`` chooses among on a table with categorical or
    count columns: mixtures of 1, 2, 4, 8 and 16 components (a size only where the table has ten rows
    per component) and, on tables of at most 20,000 rows, a VAE of 2 latent dimensions.

    They are not yet told which columns are categorical: :class:`~skmpt.MaskedImputer` tells each
    candidate of a :class:`~skmpt.MaskedModelSearch` its table's columns, so a search of these, their
    parameters set (e.g. ``max_epochs``) or a family left out, is the default search so changed.

    Parameters
    ----------
    n_samples : int
        Rows of the table.
    n_features : int
        Its columns the model imputes.
    random_state : int or None, default=None
        Each candidate's.

    Returns
    -------
    candidates : dict of str to list
        ``{"mixed": [MaskedMixedMixture, ...], "vae": [MaskedVAE]}`` (no ``"vae"`` on more rows).

    Examples
    --------
    >>> from skmpt.estimators.imputer import table_candidates
    >>> candidates = table_candidates(50, 3, random_state=0)
    >>> [model.n_components for model in candidates["mixed"]], list(candidates)
    ([1, 2, 4], ['mixed', 'vae'])
    """
    sizes = [k for k in _MIXED_SIZES if k == 1 or 10 * k <= n_samples]
    families = {"mixed": [MaskedMixedMixture(k, random_state=random_state) for k in sizes]}
    if n_samples <= _VAE_MAX_ROWS:
        families["vae"] = default_candidates(n_features, families=("vae",), n_samples=n_samples,
                                             random_state=random_state)["vae"][:1]
    return families


def _check_for_trees(X):
    """Before any fit: a ``ValueError`` where the rows ``X`` (NaN where missing; None: not checked)
    hold values beyond float32's range, which the classifiers of ``categorical_fallback_`` (scikit-learn's
    trees) read their inputs in, and a warning naming the columns whose observed values span less than
    1e-7, which they take for constant (the chained trees of ``fallback="trees"`` read standardised
    columns: :class:`ChainedTrees`)."""
    if X is None or not X.size:
        return
    largest = float(np.nanmax(np.abs(X), initial=0.0))
    if largest > float(np.finfo(np.float32).max):
        raise ValueError(f"X holds values as large as {largest:.3g}, beyond float32's range, in which the trees of "
                         f"fallback='trees' read them: rescale X (e.g. with StandardScaler; the model's likelihood "
                         f"of c * X is that of X minus n_features * log(c)) or pass fallback=None.")
    span = np.nanmax(X, axis=0, initial=-np.inf) - np.nanmin(X, axis=0, initial=np.inf)
    narrow = np.flatnonzero((span > 0) & (span < 1e-7))
    if narrow.size:
        warnings.warn(f"Feature(s) {narrow[:10].tolist()} span less than 1e-7, which the trees of fallback='trees' "
                      f"take for constant: rescale X (e.g. with StandardScaler) for them to help impute.",
                      UserWarning, stacklevel=4)


def _least(x, axis, keepdims):
    """The least value of ``x`` along ``axis`` that is not NaN (``inf`` where none is), as dask's reductions call it."""
    return np.fmin.reduce(x, axis=axis, initial=np.inf, keepdims=keepdims)


def _largest(x, axis, keepdims):
    """The largest value of ``x`` along ``axis`` that is not NaN (``-inf`` where none is)."""
    return np.fmax.reduce(x, axis=axis, initial=-np.inf, keepdims=keepdims)


def _constant_values(low, high):
    """Each feature's one value where its observed entries (from ``low`` to ``high``) hold only one, else NaN.

    Every model of the search fills such a feature's holes with its value only up to rounding (a
    mixture's mean of its components' means, a blend with the fallback: 7.700000000000001 for 7.7).
    """
    return np.where(low == high, low, np.nan)


def _is_trees(imputer):
    """Whether an entry of ``fallback`` is the string ``"trees"`` (an imputer is not, whatever its ``__eq__``)."""
    return isinstance(imputer, str) and imputer == "trees"


def _has_trees(fallback):
    """Whether ``fallback`` is ``"trees"`` or a list (or tuple) of imputers with ``"trees"`` in it."""
    return any(map(_is_trees, fallback)) if isinstance(fallback, (list, tuple)) else _is_trees(fallback)


def _halves(observed, seed):
    """Which rows are in the second of two random halves that each observe every feature (``observed``:
    the observed entries), or None where a feature is observed in fewer than two rows."""
    if (observed.sum(0) < 2).any():
        return None
    second = np.random.default_rng(seed).permutation(len(observed)) % 2 == 1
    for half in (False, True):
        for feature in np.flatnonzero(~observed[second == half].any(0)):
            second[np.flatnonzero((second != half) & observed[:, feature])[0]] = half
    both = observed[second].any(0).all() and observed[~second].any(0).all()
    return second if both else None


def _cross_fitted_guesses(model, X, columns, seed, tol):
    """``model``'s most probable category of each of ``columns`` at every row of ``X`` where it is
    observed (NaN elsewhere), by a clone of ``model`` fitted (from its start, to ``tol`` where that is
    looser than its own) to the other half of the rows, given the rest of the row; None where the
    rows do not split into two halves that each observe every feature."""
    second = _halves(~np.isnan(X), seed)
    if second is None:
        return None
    guesses = np.full((len(X), len(columns)), np.nan)
    refit = clone(model)
    if tol is not None:
        refit.set_params(tol=max(model.tol, tol))
    for half in (False, True):
        with warnings.catch_warnings():  # a refit of the comparison, not the model the imputer uses
            warnings.simplefilter("ignore", ConvergenceWarning)
            fitted = clone(refit).fit(X[second != half])
        for i, j in enumerate(columns):
            rows = np.flatnonzero((second == half) & ~np.isnan(X[:, j]))
            hidden = X[rows]
            hidden[:, j] = np.nan
            guesses[rows, i] = fitted.impute(hidden)[:, j]
    return guesses


def _compare_classifier(model, guesses, X, j, seed):
    """The most probable categories ``guesses`` of column ``j`` (from :func:`_cross_fitted_guesses`)
    against an out-of-bag :class:`~sklearn.ensemble.ExtraTreesClassifier`'s, on every row of ``X``
    where ``j`` is observed.

    The classifier's inputs are the row's other columns with ``model``'s imputations in their holes
    (``j`` hidden), as at ``transform``, where the column's holes sit beside the model's imputations of
    the others. Returns the comparison (errors are shares of wrong guesses, the standard error that of
    their difference paired over the rows) and the fitted classifier.
    """
    rows = ~np.isnan(X[:, j])
    hidden = X[rows]
    target = hidden[:, j].copy()
    hidden[:, j] = np.nan
    filled = model.impute(hidden)
    classifier = ExtraTreesClassifier(**_CLASSIFIER, bootstrap=True, oob_score=True, random_state=seed, n_jobs=1)
    with warnings.catch_warnings():  # a row in every bootstrap sample has no out-of-bag guess: left out below
        warnings.simplefilter("ignore", UserWarning)
        classifier.fit(np.delete(filled, j, axis=1), target)
    votes = classifier.oob_decision_function_
    judged = votes.sum(1) > 0
    model_wrong = guesses[rows][judged] != target[judged]
    classifier_wrong = classifier.classes_[votes[judged].argmax(1)] != target[judged]
    gain = model_wrong.astype(float) - classifier_wrong
    std_error = float(gain.std(ddof=1) / np.sqrt(len(gain))) if len(gain) > 1 else np.inf
    comparison = {"model_error": float(model_wrong.mean()), "fallback_error": float(classifier_wrong.mean()),
                  "std_error": std_error, "n_entries": int(judged.sum()),
                  "chosen": bool(gain.mean() > _CATEGORICAL_Z * std_error)}
    return comparison, classifier


def _feature_set(features):
    """The positions a model's ``categorical_features`` or ``count_features`` name (indices or a boolean mask)."""
    features = np.asarray(features)
    return set((np.flatnonzero(features) if features.dtype == bool else features.ravel()).tolist())


def _is_nan(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value != value


def _trains_from_moments(estimator):
    """Whether ``estimator`` fits a dask collection out of core (PPCA and factor analysis train from moments)."""
    return getattr(estimator, "solver", None) in ("auto", "moments")


def _missing_mask(X, missing_values):
    """Where ``X`` holds the marker ``missing_values`` (NaN compares by ``isnan``)."""
    return np.isnan(X) if _is_nan(missing_values) else X == missing_values


class MaskedImputer(OutputChoiceMixin, TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):
    """Impute missing values with a latent-variable model fitted to the observed entries.

    The ``estimator`` (an skmpt array estimator) is fitted to the incomplete data: masked
    pre-training among each sample's observed entries maximises the likelihood of what was
    observed, ``log p(x_o)``, which is the right target when the data are missing at random.
    ``transform`` then fills each missing entry with its conditional mean given the observed
    ones, ``E[x_mis | x_obs]`` (or, with ``sample_posterior=True``, a draw from
    ``p(x_mis | x_obs)``, for multiple imputation); observed entries are returned untouched.
    Exact for PPCA, factor analysis, the Gaussian mixtures and the linear VAE; the deep VAE
    imputes by self-normalised importance sampling (MIWAE). A feature whose observed entries at
    fit all hold one value has that value in its holes exactly (where a model's mean of it, or its
    blend with the fallback, would come within rounding of it, or, for PPCA's isotropic noise,
    near it), but for ``sample_posterior=True``.

    Parameters
    ----------
    estimator : skmpt array estimator, MaskedModelSearch or None, default=None
        The model, cloned at fit. ``None`` chooses it: ``MaskedModelSearch(random_state=random_state)``
        fits the default candidates (Gaussian mixtures, factor analysis and PPCA of several
        sizes; Bernoulli linear VAEs for binary data) and keeps the one whose held-out
        log-likelihood of the observed entries is highest. A :class:`MaskedModelSearch` sets
        the candidates and the budget of that choice. Nested parameters with the default mean a
        PPCA: ``MaskedImputer().set_params(estimator__n_components=2)`` sets ``estimator`` to
        ``MaskedPPCA(n_components=2)``, so ``GridSearchCV`` can search
        ``estimator__n_components`` without naming the estimator.
    missing_values : float or int, default=np.nan
        The marker of a missing entry. A numeric marker is taken as missing wherever it occurs
        (as scikit-learn's imputers do), so it must not also be a value the data can take: a
        binary-likelihood estimator with a marker of 0 or 1 is refused, since every real 0
        (or 1) would become missing; with a numeric marker, NaN in an array ``X`` is an error. In
        a DataFrame, whose columns of text or categories hold their holes as ``NaN``, ``None`` or
        ``pd.NA``, those are holes beside the marker, which marks numeric cells of categorical
        columns too (a code ``-1``; never a boolean).
    sample_posterior : bool, default=False
        Draw each missing entry from ``p(x_mis | x_obs)`` instead of taking its mean.
    add_indicator : bool, default=False
        Append a :class:`~sklearn.impute.MissingIndicator`'s columns (features with missing
        values at fit time) to the output.
    keep_empty_features : bool, default=False
        Keep features missing in every training sample: their missing entries are imputed with
        0 (in a categorical column, its first category) and their observed entries (at
        ``transform``) are returned unchanged, as scikit-learn's imputers do; if False such a feature
        is an error, since no model can learn it. A categorical column with no observed value and no
        categories of its own dtype (a category dtype's, a boolean's False and True) is an error either
        way: there is no category to fill it with.
    random_state : int, RandomState instance or None, default=None
        The draws of ``sample_posterior=True``, and the choice of the model with
        ``estimator=None``.
    missingness : {"mar", "self-masking"}, default="mar"
        How entries went missing. ``"mar"``: at random given the observed ones (the model of
        the data alone, fitted to what was observed). ``"self-masking"``: an entry's chance to be
        missing depends on its own value (the largest incomes left blank, a sensor that
        saturates): a full-covariance Gaussian and a logistic ``p(missing | x_j)`` per feature
        (:class:`~skmpt.models.missingness.SelfMaskingGaussian`) are fitted together by maximum
        likelihood of what was observed, and each entry is imputed by its mean given the
        observed ones *and* that it went missing. It needs ``estimator=None`` and
        ``sample_posterior=False``.
    column_types : dict of str to {"numeric", "categorical", "count"} or None, default=None
        For a pandas DataFrame: the kind of a column where its dtype should not decide (by default
        float and integer columns are numeric; bool, ``category``, string and object columns
        categorical), e.g. ``{"rating": "categorical"}`` for integer codes or ``{"visits": "count"}``
        for a Poisson column (its holes filled with the conditional mean, rounded). A table with
        categorical or count columns is modelled by :class:`MaskedMixedMixture` or :class:`MaskedVAE`
        (one head per column type): ``estimator=None`` chooses among mixtures of 1, 2, 4, 8, 16
        components and (tables of at most 20,000 rows) a VAE of 2 latent dimensions by held-out
        likelihood; a
        ``MaskedMixedMixture`` or ``MaskedVAE`` given (alone, or as a candidate of a
        :class:`MaskedModelSearch`) is told the categorical and count columns; another estimator is an
        error. ``transform`` fills a categorical
        hole with its most probable category (a draw with ``sample_posterior=True``) and, with
        ``set_output(transform="pandas")``, returns the table with its columns, index and dtypes
        (as an object array otherwise). A polars DataFrame is read as the pandas one of the same
        dtypes, and ``set_output(transform="polars")`` gives it back in its own schema. A category
        not seen at fit, or a string column of more than 1000 distinct values (an identifier), is an
        error naming the column; a column of one category, or a string column whose distinct values
        are more than half its observed cells (and more than 10), is warned about by name.
    fallback : "trees", imputer or None, default="trees"
        An imputer compared with the chosen model where the imputer chooses it (``estimator`` None or a
        :class:`MaskedModelSearch`), and blended with it by what each imputes on the user's own rows:
        the search's held-out rows get a share of their observed entries hidden again (the table's
        missing rate), the fallback is fitted once to every row of the search with those entries
        blanked, the chosen model as fitted to the training rows only imputes the same entries, and a
        hole is filled with ``w`` times the model's imputation plus ``1 - w`` times the fallback's,
        ``w`` in [0, 1] the weight of least squared error on those entries (each feature scaled by
        its variance; ``fallback_comparison_["model_weight"]``): the model alone at ``w = 1``, the
        fallback alone at ``w = 0``. The model is refitted to every row only where it alone imputes
        those entries better than the fallback alone. ``"trees"``: scikit-learn's
        :class:`~sklearn.impute.IterativeImputer` with an :class:`~sklearn.ensemble.ExtraTreesRegressor`
        of 10 trees (leaves of at least 3 rows) and 2 rounds, a lighter missForest, seeded by
        ``random_state``, on standardised columns (:class:`~skmpt.estimators.imputer.ChainedTrees`);
        it follows the nonlinear and skewed relations no Gaussian model does. An
        imputer (with ``fit_transform`` and ``transform``, all columns out, e.g. ``KNNImputer()``), or
        a list (or tuple) of them (``"trees"`` may be one), lighter first (a later one fitted only where the
        best so far beats the model, and kept where it imputes significantly better; see
        :class:`MaskedModelSearch`'s ``fallback``), is compared as given; None switches the
        comparison off (the model imputes, as in skmpt 0.1.0). A :class:`MaskedModelSearch` given
        as ``estimator`` with a ``fallback`` of its own keeps it where this one is its default
        ``"trees"``; any other value beside it is a ``ValueError`` (set it on one).
        Never used with ``sample_posterior=True`` (the trees give no draws),
        ``missingness="self-masking"`` or a table with categorical or count columns; with a dask
        collection the fallback is fitted to the search's sample of rows and imputes each chunk.
        On a table with categorical columns where the search chose a :class:`MaskedMixedMixture`
        (not a :class:`MaskedVAE`, whose conditionals by importance sampling would make the comparison
        cost more than the model), ``"trees"`` (alone or in a list) is compared per categorical column
        instead (``categorical_fallback_``): missForest's classifier, an
        :class:`~sklearn.ensemble.ExtraTreesClassifier` of 50 trees on the other columns (the model's
        imputations in their holes), out of bag, against the model's most probable category given the
        rest of the row (the model refitted from its start to the other half of the rows, so that
        neither guesses an entry it was fitted to), on every observed entry of the column; the
        classifier fills the column's holes where it is wrong less often by more than 1.645 standard
        errors of the paired difference (a one-sided test at 5 %).

    Attributes
    ----------
    estimator_ : estimator
        The fitted model, on the features observed at fit time (the chosen one when
        ``estimator`` is None or a :class:`MaskedModelSearch`; a
        :class:`~skmpt.models.missingness.SelfMaskingGaussian` with ``missingness="self-masking"``).
        Where the fallback alone imputed better than the model alone, the chosen model as the search
        fitted it to its training rows (it has the lesser weight in the blend, if any: it is not
        refitted to every row).
    search_ : MaskedModelSearch or None
        The fitted search that chose ``estimator_`` (its ``cv_results_`` has every candidate's
        held-out score, standard error and time); None when ``estimator`` is a model.
    fallback_ : imputer or None
        The fitted ``fallback`` where it has a weight in the blend (``model_weight`` below 1;
        ``transform`` fills the holes with the blend, with the fallback alone at weight 0;
        ``estimator_`` stays the fitted model, and ``score`` is its own), else None.
    fallback_comparison_ : dict or None
        Where the fallback was compared: ``model_error`` and ``fallback_error``, the mean squared
        errors of the entries hidden again (features scaled to unit variance), ``std_error``, the
        standard error of their difference paired over the held-out rows, ``chosen`` (the fallback
        alone imputed them better), ``model_weight`` (``w`` of the blend), ``blend_error`` (the
        blend's mean squared error there, at most the lower of the two), ``fallback_errors`` (the
        mean squared error of each imputer of the fallback fitted, in order), ``fallback_index``
        (the position in a list of fallbacks of the one kept; 0 for one imputer) and ``n_entries``
        (the entries hidden again); else None, and where no entry could be hidden again (one column;
        held-out rows of one observed entry each).
    categorical_fallback_ : dict or None
        With ``fallback="trees"`` (or ``"trees"`` in a list of fallbacks), ``sample_posterior=False``
        and a search that chose a :class:`MaskedMixedMixture`, on a DataFrame with categorical columns:
        for each such column (of two categories or more) its comparison, a dict of ``model_error`` (the
        share of the column's observed entries the model guesses wrong from the rest of the row, each
        guessed by a refit to the other half of the rows, to the search's ``candidate_tol``: two refits
        in all), ``fallback_error`` (the classifier's share, each entry guessed by the trees whose
        bootstrap sample left it out), ``std_error`` (of their difference paired over the entries),
        ``n_entries``, ``chosen`` and ``classifier`` (the fitted classifier that fills the column's
        holes at ``transform``, where chosen; else None). None otherwise, and where a feature is
        observed in fewer than two rows (no two halves of the rows both observe it).
    indicator_ : MissingIndicator or None
        With ``add_indicator=True``.
    table_ : TableLayout or None
        The columns of the DataFrame seen at fit (names, dtypes, kinds, categories); None for an array.
    params_ : dict
        The parameters as they were at the last ``fit``: ``transform`` and ``score`` read these
        (``missing_values``, ``sample_posterior``), so ``set_params`` acts at the next ``fit``.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Where ``X`` has string column names.

    See Also
    --------
    sklearn.impute.IterativeImputer : Imputes by regressing each feature on the others in turn.
    MaskedModelSearch : The choice of the model by held-out likelihood.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt import MaskedImputer, MaskedPPCA
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 1)) @ rng.normal(size=(1, 4)) + 0.1 * rng.normal(size=(200, 4))
    >>> X_missing = X.copy()
    >>> X_missing[rng.random(X.shape) < 0.2] = np.nan
    >>> imputer = MaskedImputer(MaskedPPCA(1, random_state=0)).fit(X_missing)
    >>> X_imputed = imputer.transform(X_missing)
    >>> bool(np.isnan(X_imputed).any()), bool((X_imputed[~np.isnan(X_missing)] == X[~np.isnan(X_missing)]).all())
    (False, True)

    On a curve no Gaussian model follows (three noisy copies of ``x``, then ``sin 4x`` and ``cos 4x``),
    the chained trees impute better on the held-out rows and fill the holes:

    >>> x = rng.uniform(-2, 2, 300)
    >>> X = np.c_[x, x, x, np.sin(4 * x), np.cos(4 * x)] + 0.05 * rng.normal(size=(300, 5))
    >>> X_missing = np.where(rng.random(X.shape) < 0.2, np.nan, X)
    >>> imputer = MaskedImputer(random_state=0).fit(X_missing)
    >>> type(imputer.fallback_).__name__, imputer.fallback_comparison_["chosen"]
    ('ChainedTrees', True)
    >>> comparison = imputer.fallback_comparison_
    >>> bool(comparison["fallback_error"] < comparison["model_error"])
    True
    """

    _parameter_constraints: dict = {
        "estimator": [None, object],
        "missing_values": [numbers.Real],
        "sample_posterior": ["boolean"],
        "add_indicator": ["boolean"],
        "keep_empty_features": ["boolean"],
        "random_state": ["numpy_random_state"],
        "missingness": [Options({"mar", "self-masking"})],
        "column_types": [None, dict],
        "fallback": [None, Options({"trees"}), "imputer", list, tuple],
    }

    def __init__(
        self, estimator=None, *, missing_values=np.nan, sample_posterior=False, add_indicator=False,
        keep_empty_features=False, random_state=None, missingness="mar", column_types=None, fallback="trees",
    ):
        self.estimator = estimator
        self.missing_values = missing_values
        self.sample_posterior = sample_posterior
        self.add_indicator = add_indicator
        self.keep_empty_features = keep_empty_features
        self.random_state = random_state
        self.missingness = missingness
        self.column_types = column_types
        self.fallback = fallback

    def set_params(self, **params):
        """Set parameters; ``estimator__<name>`` with ``estimator=None`` sets it on ``MaskedPPCA()``.

        Parameters
        ----------
        **params : dict

        Returns
        -------
        self : MaskedImputer
        """
        nested = any(key.startswith("estimator__") for key in params)
        if nested and params.get("estimator", self.estimator) is None:
            params = {**params, "estimator": MaskedPPCA()}
        return super().set_params(**params)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # ------------------------------------------------------------------ data
    def _validate(self, X, *, reset):
        """``X`` as float64 with NaN at the missing entries, and the missing mask (``missing_values``
        as it was at fit)."""
        missing_values = self.params_["missing_values"]
        if is_table(X) and not all(X.shape):  # scikit-learn's check of an array's shape, which a table skips
            raise ValueError(f"Found array with {X.shape[0]} sample(s) and {X.shape[1]} feature(s) (shape={X.shape}) "
                             f"while a minimum of 1 of each is required by {type(self).__name__}.")
        if reset:
            self.table_ = self._layout(X)
        if self.table_ is not None and (is_table(X) or len(self.table_.categorical)):
            validate_data(self, X, reset=reset, skip_check_array=True)
            if not is_table(X):
                raise ValueError("This imputer was fitted on a DataFrame with categorical columns; pass a DataFrame.")
            X = self.table_.encode(X)
            missing_values = np.nan  # encode marks every missing cell with NaN
        else:
            X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite=False, copy=True)
        infinite = np.flatnonzero(np.isinf(X).any(0)).tolist()
        if infinite:
            where = (f"column(s) {[self.table_.columns[j] for j in infinite[:10]]}" if self.table_ is not None
                     else f"feature(s) {infinite[:10]}")
            raise ValueError(f"Input X contains infinity in {where}: no model can fit or impute it. Replace it, or "
                             f"mark it missing.")
        if not _is_nan(missing_values) and np.isnan(X).any():
            raise ValueError(f"Input X contains NaN in feature(s) {np.flatnonzero(np.isnan(X).any(0))[:10].tolist()}"
                             f", but missing_values={missing_values!r}: mark every missing entry with that marker.")
        missing = _missing_mask(X, missing_values)
        X[missing] = np.nan
        return X, missing

    # ------------------------------------------------------------------ tables (DataFrames)
    def _layout(self, X):
        """The :class:`~skmpt.estimators.tables.TableLayout` of a DataFrame ``X`` at fit; None for an array."""
        column_types = self.params_["column_types"]
        if not is_table(X):
            if column_types is not None:
                raise ValueError("column_types names columns of a pandas DataFrame, but X is not one.")
            return None
        return TableLayout(X, column_types, self.params_["missing_values"])

    def _mixed_columns(self):
        """The names of the table's categorical and count columns, which only the mixed families model
        (an empty list for an array, or a table of numbers)."""
        table = self.table_
        return [] if table is None else [table.columns[j] for j in [*table.categorical, *table.counts]]

    def _for_table(self, estimator, n_samples):
        """``estimator`` (or each candidate of a :class:`MaskedModelSearch` given) told the table's
        categorical columns (and their categories, all of them, so that a split missing a rare one
        still knows it), a model of numbers only an error; for a search without candidates, the mixed
        mixtures and the smallest VAE told them, for tables of at most ``_VAE_MAX_ROWS`` rows."""
        table = self.table_
        if not self._mixed_columns():
            return estimator
        position = np.flatnonzero(self._valid)
        # the model's columns are the valid ones (keep_empty_features=True keeps an empty column out of it)
        kept = self._valid[table.categorical]
        mixed = {"categorical_features": np.searchsorted(position, table.categorical[kept]).tolist(),
                 "count_features": np.searchsorted(position, table.counts[self._valid[table.counts]]).tolist(),
                 "categories": [np.arange(len(c), dtype=np.float64)
                                for c, modelled in zip(table.categories, kept, strict=True) if modelled]}
        names = self._mixed_columns()

        def told(model):
            if isinstance(model, (MaskedMixedMixture, MaskedVAE)):
                for key in ("categorical_features", "count_features"):
                    own = model.get_params()[key]
                    if own is not None and _feature_set(own) != set(mixed[key]):
                        kind = "categorical" if key == "categorical_features" else "count"
                        theirs = [table.columns[position[j]] if -len(position) <= j < len(position) else j
                                  for j in sorted(_feature_set(own))]
                        read = [table.columns[j] for j in position[mixed[key]]]
                        example = f"{{{(theirs or read)[0]!r}: {kind!r}}}"
                        raise ValueError(
                            f"{type(model).__name__}({key}={own!r}) makes column(s) {theirs[:10]} {kind}, where the "
                            f"table's dtypes and column_types make {read[:10]} so: declare the columns' kinds with "
                            f"MaskedImputer's column_types (e.g. column_types={example}) and leave {key} unset.")
                return clone(model).set_params(**mixed)
            nested = (" (set_params(estimator__...) on an imputer without an estimator makes it a MaskedPPCA: set "
                      "estimator=MaskedMixedMixture() first, whose n_components a search can then vary)"
                      if isinstance(model, MaskedPPCA) else "")
            raise ValueError(f"Column(s) {names[:10]} of X are categorical or counts, and {type(model).__name__} "
                             f"models numbers only{nested}: impute them with MaskedMixedMixture or MaskedVAE (or "
                             f"estimator=None), or declare them numeric with column_types.")

        if not isinstance(estimator, MaskedModelSearch):
            return told(estimator)
        given = estimator.candidates
        if isinstance(given, list | tuple):
            return clone(estimator).set_params(candidates=[told(model) for model in given])
        if isinstance(given, dict) and all(isinstance(models, list | tuple) for models in given.values()):
            return clone(estimator).set_params(candidates={family: [told(model) for model in models]
                                                           for family, models in given.items()})
        if given is None:
            families = table_candidates(n_samples, len(position), random_state=estimator.random_state)
            return clone(estimator).set_params(candidates={family: [model.set_params(**mixed) for model in models]
                                                           for family, models in families.items()})
        return estimator  # candidates the search refuses by name

    def _table_output(self, original, out, X):
        """``transform``'s output for a DataFrame: the table with its holes filled, columns, index and
        dtypes as given (indicator columns after), or as an array (of objects with categories). The
        values are the table's whatever the container: a hole of an integer column is rounded in an
        array too."""
        frame = self.table_.decode(original, out)
        container = self._output_container()
        if container not in ("pandas", "polars") and not len(self.table_.categorical):
            values = frame.to_numpy(dtype=np.float64, na_value=np.nan)
            return np.hstack([values, self.indicator_.transform(X)]) if self.indicator_ is not None else values
        if self.indicator_ is not None:
            names = self.get_feature_names_out()  # scikit-learn's x0, ... where labels are not strings
            indicator = self.indicator_.transform(X)
            import pandas as pd  # a DataFrame came in: pandas is imported already

            # concatenated, not assigned: assigning a flat name to MultiIndex columns is deprecated in pandas
            columns = pd.DataFrame(indicator, index=frame.index,
                                   columns=[str(name) for name in names[len(self.table_.columns):]])
            frame = pd.concat([frame, columns], axis=1)
            frame.columns = names
        return frame if container in ("pandas", "polars") else frame.to_numpy(dtype=object)

    def _check_marker(self, estimator, likelihood=None):
        """Refuse a marker of 0 or 1 for a model of binary data (``estimator``'s likelihood, or ``likelihood``)."""
        likelihood = likelihood or getattr(estimator, "likelihood", "gaussian")
        if not _is_nan(self.missing_values) and likelihood == "bernoulli" and self.missing_values in (0, 1):
            raise ValueError(
                f"missing_values={self.missing_values!r} is also a value of binary data: with "
                f"likelihood='bernoulli' every real {self.missing_values!r} would be taken as missing. "
                f"Mark missing entries with np.nan (or another value outside {{0, 1}})."
            )

    # ------------------------------------------------------------------ fit / transform
    def fit(self, X, y=None):
        """Fit the estimator to the observed entries of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            ``missing_values`` marks the missing entries. A dask array or DataFrame is never gathered
            into one process: :class:`MaskedPPCA` and :class:`MaskedFactorAnalysis` fit it out of core;
            ``estimator=None`` (or a :class:`MaskedModelSearch`) chooses the model on ``max_samples``
            rows drawn at random, chunk by chunk, and refits it to every row (out of core from
            moments, or by streaming the chunks through the chosen model's ``partial_fit``).
        y : None
            Ignored.

        Returns
        -------
        self : MaskedImputer
        """
        params = self.get_params(deep=False)
        validate_parameters(params, self._parameter_constraints, type(self).__name__)
        if isinstance(self.fallback, (list, tuple)) and not (
                self.fallback and all(_is_trees(imputer) or is_imputer(imputer) for imputer in self.fallback)):
            raise ValueError(f"fallback must be None, \"trees\", an imputer (an instance with fit_transform and "
                             f"transform) or a non-empty list of them; got {self.fallback!r}.")
        self.params_ = params
        self_masking = self.missingness == "self-masking"
        if self_masking and (self.estimator is not None or self.sample_posterior):
            raise ValueError(f"missingness='self-masking' fits its own model, a Gaussian with a logistic per feature, "
                             f"and imputes means: it needs estimator=None and sample_posterior=False; got "
                             f"estimator={self.estimator!r}, sample_posterior={self.sample_posterior!r}.")
        random_state = check_random_state(self.random_state)
        estimator = self.estimator
        if estimator is None:
            estimator = MaskedModelSearch(random_state=self._seed(random_state))
        if not isinstance(estimator, MaskedModelSearch):
            self._check_marker(estimator)
        if is_dask_collection(X):
            return self._fit_collection(X, estimator, random_state)
        X, missing = self._validate(from_polars(X), reset=True)
        self._valid = self._features_to_model(missing.all(0))
        self._constants = _constant_values(np.nanmin(np.where(missing, np.inf, X), 0)[self._valid],
                                           np.nanmax(np.where(missing, -np.inf, X), 0)[self._valid])
        mixed = self._mixed_columns()
        if isinstance(estimator, MaskedModelSearch) and estimator.candidates is None and not mixed and np.isin(
                X[~missing], (0.0, 1.0)).all():  # the search will choose among models of binary data: before it
            self._check_marker(estimator, "bernoulli")
        if self_masking and mixed:
            raise ValueError(f"missingness='self-masking' models numeric columns only; column(s) {mixed[:10]} of X "
                             f"are categorical or counts. Use missingness='mar', or declare them numeric with "
                             f"column_types.")
        self.indicator_ = (
            MissingIndicator(missing_values=np.nan, error_on_new=False).fit(X) if self.add_indicator else None
        )
        if self.indicator_ is not None and self.table_ is not None:  # before any fit
            columns = [str(name) for name in self.table_.columns]
            taken = sorted(set(self.indicator_.get_feature_names_out(columns)) & set(columns))
            if taken:  # the output's indicator column would overwrite the user's
                raise ValueError(f"add_indicator=True names columns {taken}, which X has already: rename them.")
        if self_masking:  # its own model, without the search or its fallback
            fitted = SelfMaskingGaussian.fit(X[:, self._valid])
            if not fitted.converged_:
                warnings.warn(f"The self-masking model's fit stopped after {fitted.n_iter_} L-BFGS iterations, short "
                              f"of its optimum (converged_ False); its imputations may be off. Nearly collinear "
                              f"columns slow it: drop duplicates.", ConvergenceWarning, stacklevel=2)
        else:
            estimator = self._with_fallback(self._for_table(estimator, len(X)), random_state, X[:, self._valid])
            fitted = clone(estimator).fit(X[:, self._valid])
        if isinstance(fitted, MaskedModelSearch):
            self.search_, self.estimator_ = fitted, fitted.best_estimator_
            self._check_marker(self.estimator_)
        else:
            self.search_, self.estimator_ = None, fitted
        self._keep_fallback()
        self.categorical_fallback_ = self._compare_classifiers(X[:, self._valid], random_state)
        self.random_state_ = random_state
        return self

    def _seed(self, random_state):
        """The ``random_state`` of an estimator the imputer makes: its own where that is None or an
        int, else a draw from ``random_state``, the fit's :class:`~numpy.random.RandomState`."""
        seed = self.random_state
        if seed is None or isinstance(seed, numbers.Integral):
            return seed
        return int(random_state.randint(np.iinfo(np.int32).max))

    def _with_fallback(self, estimator, random_state, X=None):
        """A :class:`MaskedModelSearch` ``estimator`` given the ``fallback`` to compare with its choice:
        None where it is never used (``sample_posterior=True``, categorical or count columns); any
        other ``estimator`` as it is. The rows ``X`` (NaN where missing; None for a dask collection) of
        a table with categorical columns are checked for what the classifiers of
        ``categorical_fallback_`` can read (:func:`_check_for_trees`)."""
        if not isinstance(estimator, MaskedModelSearch):
            return estimator
        mixed = self._mixed_columns()
        fallback = self._fallback_in_effect(estimator)
        trees = not self.sample_posterior and _has_trees(fallback)
        if trees and mixed and len(self.table_.categorical):  # the classifiers of categorical_fallback_
            _check_for_trees(X)
        if self.sample_posterior or mixed:
            fallback = None
        elif trees:
            seed = self._seed(random_state)
            fallback = (_chained_trees(seed) if _is_trees(fallback) else
                        [_chained_trees(seed) if _is_trees(imputer) else imputer for imputer in fallback])
        return clone(estimator).set_params(fallback=fallback)

    def _fallback_in_effect(self, estimator):
        """The fallback a :class:`MaskedModelSearch` ``estimator`` compares: the imputer's, or the
        search's own where the imputer's is its default ``"trees"`` (a ``ValueError`` where both are set)."""
        own = estimator.get_params()["fallback"] if isinstance(estimator, MaskedModelSearch) else None
        if own is None:
            return self.fallback
        if _is_trees(self.fallback):
            return own
        raise ValueError(f"fallback is set on both the MaskedImputer ({self.fallback!r}) and its MaskedModelSearch "
                         f"({own!r}): set it on one (the imputer's fallback='trees', its default, leaves the "
                         f"search's own).")

    def _uses_trees(self):
        """Whether the fallback in effect has ``"trees"`` (:func:`_has_trees`)."""
        return _has_trees(self._fallback_in_effect(self.estimator))

    def _keep_fallback(self):
        """``fallback_`` and ``fallback_comparison_`` from the fitted search (None without one)."""
        search = self.search_
        self.fallback_ = None if search is None else search.fallback_
        self.fallback_comparison_ = None if search is None else search.fallback_comparison_

    def _compare_classifiers(self, X, random_state):
        """``categorical_fallback_``: with ``"trees"`` as (or in) ``fallback`` and a search, each categorical column (of
        two categories or more) of the table ``X`` (the modelled features) compared with a classifier.

        Only where the model is a :class:`MaskedMixedMixture`, whose conditionals are exact and cheap: a
        :class:`MaskedVAE` imputes by importance sampling, and its guesses of each categorical column
        (one imputation of the table per column) took the imputer's CPU time above missForest's on the
        held-out table HousePrices (1.07 to 1.30 times, six categorical columns) and the fresh Wage."""
        table = self.table_
        if (not self._uses_trees() or self.search_ is None or self.sample_posterior or table is None
                or not len(table.categorical) or not isinstance(self.estimator_, MaskedMixedMixture)):
            return None
        if X.shape[1] < 2:
            return {}  # no other column for a classifier to predict it from
        seed = self._seed(random_state)
        position = np.flatnonzero(self._valid)
        names, columns = [], []
        for column in table.categorical[self._valid[table.categorical]]:
            j = int(np.searchsorted(position, column))
            if len(np.unique(X[~np.isnan(X[:, j]), j])) >= 2:
                names.append(table.columns[column])
                columns.append(j)
        if not columns:
            return {}
        # The refits are fitted to the search's candidate_tol, as the candidates it ranked (on Salaries
        # at 40 % holes, 8 components: 0.07 CPU s each instead of 0.19 at the model's tol of 1e-3).
        guesses = _cross_fitted_guesses(self.estimator_, X, columns, seed, self.search_.candidate_tol)
        if guesses is None:
            return None
        result = {}
        for i, (name, j) in enumerate(zip(names, columns, strict=True)):
            comparison, classifier = _compare_classifier(self.estimator_, guesses[:, i], X, j, seed)
            result[name] = {**comparison, "classifier": classifier if comparison["chosen"] else None}
        return result

    def _features_to_model(self, empty):
        """The features the model sees: those not missing in every training sample (``empty``), which
        are an error unless ``keep_empty_features``."""
        if empty.any() and not self.keep_empty_features:
            features = np.flatnonzero(empty)[:10].tolist()
            named = features if self.table_ is None else [self.table_.columns[j] for j in features]
            raise ValueError(
                f"Feature(s) {named} are missing in every training sample: "
                f"no model can impute them. Drop them, or pass keep_empty_features=True to keep them "
                f"(imputed with 0)."
            )
        return ~empty

    def _fit_collection(self, X, estimator, random_state):
        """:meth:`fit` for a dask collection ``X``, never gathered into one process: an estimator that
        trains from moments is fitted out of core; a :class:`MaskedModelSearch` chooses on a random
        sample of ``max_samples`` rows (taken chunk by chunk) and refits the chosen model to every row,
        out of core when it trains from moments, else by streaming the chunks through its
        ``partial_fit`` from the sample's fit."""
        import dask
        import dask.array as da

        name = type(estimator).__name__
        if self.missingness == "self-masking":
            raise TypeError("missingness='self-masking' fits on rows, so fit does not take a dask collection; fit "
                            "the imputer on a sample of rows computed into memory, then transform the collection.")
        if self.column_types is not None:
            raise ValueError("column_types names columns of a pandas DataFrame; a dask collection is read as numbers.")
        searches = isinstance(estimator, MaskedModelSearch)
        if searches and estimator.max_samples is None:
            raise ValueError("MaskedModelSearch(max_samples=None) would choose the model on every row, gathered "
                             "into one process: give the search a max_samples for a dask collection X.")
        if not searches and not _trains_from_moments(estimator):
            raise TypeError(
                f"{name} trains on rows, so MaskedImputer.fit does not take a dask collection with it; "
                f"MaskedPPCA and MaskedFactorAnalysis (solver='auto' or 'moments') fit out of core, and "
                f"estimator=None chooses a model on a sample of rows. Or fit the imputer on a sample of rows "
                f"computed into memory (X[rows].compute()), then transform the collection."
            )
        check_collection(self, X, reset=True)
        self.table_ = None
        estimator = self._with_fallback(estimator, random_state)
        X = as_dask_array(X).astype(np.float64)
        marker = self.missing_values
        counts = [da.isinf(X).sum(0), da.isnan(X).sum(0)]
        if not _is_nan(marker):
            X = da.where(X == marker, np.nan, X)
        # One pass over the chunks; the least and largest observed values by np.fmin and np.fmax from an identity
        # (da.nanmin fails on a chunk of no rows).
        low, high = (da.reduction(X, fold, fold, axis=0, dtype=X.dtype) for fold in (_least, _largest))
        infinite, nans, missing, low, high = dask.compute(*counts, da.isnan(X).sum(0), low, high)
        if infinite.any():
            raise ValueError(f"Input X contains infinity in feature(s) {np.flatnonzero(infinite)[:10].tolist()}: no "
                             f"model can fit or impute it. Replace it, or mark it missing.")
        if not _is_nan(marker) and nans.any():
            raise ValueError(f"Input X contains NaN in feature(s) {np.flatnonzero(nans)[:10].tolist()}, but "
                             f"missing_values={marker!r}: mark every missing entry with that marker.")
        self._valid = self._features_to_model(missing == X.shape[0])
        self._constants = _constant_values(low[self._valid], high[self._valid])
        part = X[:, self._valid]
        if searches:
            n_samples = part.shape[0]
            rows = np.arange(n_samples)
            if n_samples > estimator.max_samples:
                rows = np.sort(random_state.choice(n_samples, estimator.max_samples, replace=False))
            self.search_ = clone(estimator).set_params(refit=False).fit(part[rows].compute())
            self.search_.set_params(refit=estimator.refit)
            fitted = self.search_.best_estimator_
            if estimator.refit and self.search_.refits_model_:
                fitted = clone(fitted).fit(part) if _trains_from_moments(fitted) else fitted.partial_fit(part)
            self.search_.best_estimator_ = self.estimator_ = fitted
            self._check_marker(fitted)
        else:
            self.search_, self.estimator_ = None, clone(estimator).fit(part)
        self._keep_fallback()
        self.categorical_fallback_ = None
        # The indicator's columns: the features with a missing entry (it reads no more than that).
        holes = np.where(missing > 0, np.nan, 0.0)[None]
        self.indicator_ = None
        if self.add_indicator:
            self.indicator_ = MissingIndicator(missing_values=np.nan, error_on_new=False).fit(holes)
        self.random_state_ = random_state
        return self

    def transform(self, X):
        """Fill the missing entries of ``X``; the observed ones are returned untouched.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_imputed : ndarray of shape (n_samples, n_features) or (n_samples, n_features + n_indicators)
            A dask array with ``X``'s row chunks when ``X`` is a dask array or DataFrame: each chunk is
            imputed in the worker that holds it (with ``sample_posterior=True``, from its own seed), so
            the result can be written (``to_parquet``, ``to_zarr``) without one process holding it.
        """
        check_is_fitted(self)
        if is_dask_collection(X):
            seed = int(self.random_state_.randint(np.iinfo(np.int32).max))
            width = self.n_features_in_ + (0 if self.indicator_ is None else len(self.indicator_.features_))
            return map_rows(self, "transform", X, (width,), function=seeded_rows_of_block, seed=seed)
        given, original = X, from_polars(X)  # a polars table read as pandas, its output given back in polars
        X, missing = self._validate(original, reset=False)
        out = np.where(missing, 0.0, X)
        part = X[:, self._valid]
        if self.params_["sample_posterior"]:
            seed = int(self.random_state_.randint(np.iinfo(np.int32).max))
            out[:, self._valid] = self.estimator_.sample_missing(part, 1, random_state=seed)[0]
        elif self.fallback_ is not None:
            # A copy: an imputer with copy=False fills its input, which the model must still see with holes.
            imputed = np.asarray(self.fallback_.transform(part.copy()), dtype=np.float64)
            weight = self.fallback_comparison_["model_weight"]
            if weight > 0:  # the blend of the two, at the weight measured on the held-out rows (about the
                # fallback's value: where the two agree, on a constant column, that value exactly)
                imputed = imputed + weight * (self.estimator_.impute(part) - imputed)
            out[:, self._valid] = np.where(missing[:, self._valid], imputed, part)
        else:
            out[:, self._valid] = self._impute_categories(self.estimator_.impute(part), missing[:, self._valid])
        if not self.params_["sample_posterior"]:  # a feature of one value at fit: its holes that value exactly
            constant = missing[:, self._valid] & ~np.isnan(self._constants)
            out[:, self._valid] = np.where(constant, self._constants, out[:, self._valid])
        if self.table_ is not None and is_table(original):
            return self._in_container(self._table_output(original, out, X), given)
        if self.table_ is not None:  # an array after a table's fit: its whole-number columns' holes rounded as there
            whole = self.table_.integers
            out[:, whole] = np.where(missing[:, whole], np.rint(out[:, whole]), out[:, whole])
        if self.indicator_ is not None:
            out = np.hstack([out, self.indicator_.transform(X)])
        return self._in_container(out, given)

    def _in_container(self, out, given):
        """``transform``'s output ``out`` in the container ``set_output`` chose, as scikit-learn's wrapper
        would give it (columns ``get_feature_names_out``, the index of ``given``, the input), except a
        DataFrame built from the table given, which is returned as it is: its columns keep their labels'
        type and name, and their dtypes (in polars, the dtypes of a polars table given)."""
        container = self._output_container()
        if container == "pandas" and not is_table(out):
            import pandas as pd

            index = given.index if is_table(given) else None
            return pd.DataFrame(out, index=index, columns=self.get_feature_names_out())
        if container == "polars":
            import polars as pl

            if not is_table(out):
                return pl.DataFrame(out, schema=[str(name) for name in self.get_feature_names_out()], orient="row")
            frame = pl.from_pandas(out.set_axis([str(name) for name in out.columns], axis=1))
            # polars' dtypes that pandas has not (an Enum, a Categorical read as a dictionary) back as given
            return frame.cast(dict(given.schema)) if is_polars(given) else frame
        return out

    def _impute_categories(self, imputed, missing):
        """The model's imputations ``imputed`` (of the modelled features), each categorical column that
        ``categorical_fallback_`` gave to its classifier filled by it at its holes (``missing``), from the
        model's imputations of the other columns."""
        comparisons = self.categorical_fallback_ or {}
        position = np.flatnonzero(self._valid)
        filled = imputed.copy()
        for name, comparison in comparisons.items():
            j = int(np.searchsorted(position, self.table_.columns.index(name)))
            holes = missing[:, j]
            if comparison["chosen"] and holes.any():
                filled[holes, j] = comparison["classifier"].predict(np.delete(imputed[holes], j, axis=1))
        return filled

    def score(self, X, y=None):
        """Mean log-likelihood of the observed entries of ``X`` under the fitted model.

        The held-out observed-data log-likelihood, ``log p(x_o)`` per sample (the estimator's
        own ``score`` on ``X`` with its missing entries marginalised out): what
        :class:`~sklearn.model_selection.GridSearchCV` maximises to choose, e.g.,
        ``estimator__n_components``. With ``missingness="self-masking"`` it is ``log p(x_o, m)``,
        the observed entries *and* which entries are missing, which the other models leave out: the
        two are not on one scale, so a search over ``missingness`` by this score compares nothing
        (nor could the rows alone tell the two apart; see the user guide).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        score : float
            Nats per sample.
        """
        check_is_fitted(self)
        X, _ = self._validate(from_polars(X), reset=False)
        return self.estimator_.score(X[:, self._valid])

    def get_feature_names_out(self, input_features=None):
        """Output feature names: the input features, then the indicator's.

        A DataFrame's column labels that are not all strings (integers, tuples), which scikit-learn
        does not keep as ``feature_names_in_``, are given as they are, so that
        ``set_output(transform="pandas")`` returns the columns of the table given; with
        ``add_indicator=True`` the names are scikit-learn's ``x0, x1, ...`` and
        ``missingindicator_x0, ...`` (strings, which the next step of a pipeline needs: labels that
        mix integers and strings are refused by scikit-learn's estimators).

        Parameters
        ----------
        input_features : array-like of str or None, default=None

        Returns
        -------
        feature_names_out : ndarray of str
        """
        check_is_fitted(self)
        names = getattr(self, "feature_names_in_", None)
        if input_features is not None:
            input_features = np.asarray(input_features, dtype=object)
            if len(input_features) != self.n_features_in_ or (
                names is not None and not np.array_equal(input_features, names)
            ):
                raise ValueError(
                    f"input_features must be the {self.n_features_in_} feature names seen at fit; "
                    f"got {list(input_features)}."
                )
            names = input_features
        if names is None and self.table_ is not None and self.indicator_ is None:
            # a DataFrame's labels that are not all strings (scikit-learn keeps none of them), tuples whole
            names = np.fromiter(self.table_.columns, dtype=object, count=len(self.table_.columns))
        if names is None:
            names = np.asarray([f"x{i}" for i in range(self.n_features_in_)], dtype=object)
        if self.indicator_ is None:
            return np.asarray(names, dtype=object)
        return np.concatenate([names, self.indicator_.get_feature_names_out(names)]).astype(object)
