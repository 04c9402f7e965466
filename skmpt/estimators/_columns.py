"""The categorical and count columns of an estimator of mixed tables, as one mixin.

:class:`TableColumnsMixin` reads ``categorical_features``, ``count_features`` and ``categories``
from ``params_``, learns ``categories_``, checks the values of every call against them, keeps the
categories and counts unshifted in float32, and snaps the outputs' categories to their exact
values: the column handling that :class:`~skmpt.estimators.MaskedMixedMixture` and
:class:`~skmpt.estimators.MaskedVAE` share.
"""

import warnings

import numpy as np
import torch
from sklearn.utils.validation import check_array

__all__ = ["TableColumnsMixin", "feature_label"]


def feature_label(estimator, index):
    """``feature 3 ('species')`` when the estimator knows its feature names, else ``feature 3``."""
    names = getattr(estimator, "feature_names_in_", None)
    return f"feature {index}" if names is None else f"feature {index} ({names[index]!r})"


class TableColumnsMixin:
    """Categorical and count columns for an estimator of :mod:`skmpt.estimators._base` (listed first
    among its bases). Fitted attributes: ``categorical_features_``, ``count_features_``,
    ``numeric_features_`` and ``categories_``."""

    def _warm_start_source(self, X, shaping, noun=None):
        """The base's check (``shaping`` with the column parameters), and a ``ValueError`` when
        categorical columns have ``categories="auto"`` (the fitted categories are not kept)."""
        source = super()._warm_start_source(X, (*shaping, "categorical_features", "count_features", "categories"), noun)
        if source is not None and len(self.categorical_features_) and isinstance(self.categories, str):
            name = type(self).__name__
            raise ValueError(f"warm_start=True with categorical columns needs categories given (the fitted {name} "
                             f"keeps its own): pass categories=[...], e.g. the fitted categories_.")
        return source

    def _resolve_columns(self, name, n_features):
        """The parameter ``name`` (``categorical_features`` or ``count_features``) as sorted column
        indices, checked against ``n_features``."""
        given = self.params_[name]
        if given is None:
            return np.zeros(0, dtype=np.intp)
        given = np.asarray(given)
        if given.dtype == bool:
            if given.shape != (n_features,):
                raise ValueError(f"{name} as a mask must hold {n_features} booleans (one per "
                                 f"feature); got shape {given.shape}.")
            return np.flatnonzero(given)
        if given.ndim != 1 or not np.issubdtype(given.dtype, np.integer) and given.size:
            raise ValueError(f"{name} must be column indices or a boolean mask; got {given!r}.")
        indices = given.astype(np.intp)
        if indices.size and (indices.min() < 0 or indices.max() >= n_features):
            raise ValueError(f"{name} holds {indices.tolist()}, but X has {n_features} features.")
        if len(np.unique(indices)) != len(indices):
            raise ValueError(f"{name} names a column twice: {indices.tolist()}.")
        return np.sort(indices)

    def _discrete(self, n_features):
        """The categorical and count columns, checked to be apart."""
        categorical = self._resolve_columns("categorical_features", n_features)
        count = self._resolve_columns("count_features", n_features)
        both = np.intersect1d(categorical, count)
        if both.size:
            raise ValueError(f"Feature(s) {both.tolist()} are both in categorical_features and in count_features.")
        return np.union1d(categorical, count).astype(np.intp)

    def _offset(self, center, dtype):
        # Categories and counts are read as values: never shifted (only numbers lose precision).
        offset = np.array(super()._offset(center, dtype), dtype=np.float64)
        offset[self._discrete(len(center))] = 0.0
        return offset

    def _to_tensor(self, X, *, reset):
        """As the base's, with the categorical columns' values checked: learned at ``fit``
        (``categories_``), and at any other call among them (an error naming the column)."""
        X_t, observed = super()._to_tensor(X, reset=reset)
        n_features = X_t.shape[1]
        if reset:
            self.categorical_features_ = self._resolve_columns("categorical_features", n_features)
            self.count_features_ = self._resolve_columns("count_features", n_features)
            self.numeric_features_ = np.setdiff1d(np.arange(n_features), self._discrete(n_features))
        # Only columns of categories or counts are read back as values (a numeric tensor stays where it is).
        discrete = len(self.categorical_features_) + len(self.count_features_)
        values = np.empty((0, n_features))
        if discrete:
            values = check_array(X, dtype=np.float64, ensure_all_finite="allow-nan")
        for j in self.count_features_:
            column = values[:, j]
            bad = ~np.isnan(column) & ((column < 0) | (column != np.round(column)))
            if bad.any():
                raise ValueError(f"{feature_label(self, j)} holds counts, non-negative integers; it holds "
                                 f"{column[bad][:5].tolist()}.")
        if reset:
            self.categories_ = self._learn_categories(values)
            self._check_categories_apart(X_t.dtype)
            return X_t, observed
        for j, categories in zip(self.categorical_features_, self.categories_, strict=True):
            column = values[:, j]
            unseen = np.setdiff1d(column[~np.isnan(column)], categories)
            if unseen.size:
                raise ValueError(f"{feature_label(self, j)} is categorical and holds {unseen[:5].tolist()}, not among "
                                 f"the categories seen at fit {categories[:10].tolist()}.")
        return X_t, observed

    def _learn_categories(self, values):
        """``categories_`` from the training array ``values``: the values seen, or the ones given
        (sorted), which must hold every value seen."""
        columns = values[:, self.categorical_features_].T
        seen = [np.unique(column[~np.isnan(column)]) for column in columns]
        given = self.params_.categories
        if isinstance(given, str):  # "auto"
            return seen
        if len(given) != len(seen):
            raise ValueError(f"categories holds {len(given)} arrays, but there are {len(seen)} categorical features.")
        categories = []
        for j, values_seen, values_given in zip(self.categorical_features_, seen, given, strict=True):
            values_given = np.unique(np.asarray(values_given, dtype=np.float64))
            unknown = np.setdiff1d(values_seen, values_given)
            if unknown.size or not np.isfinite(values_given).all():
                raise ValueError(f"{feature_label(self, j)} holds {unknown[:5].tolist()}, not among its given "
                                 f"categories {values_given[:10].tolist()} (which must be finite numbers).")
            categories.append(values_given)
        return categories

    def _check_categories_apart(self, dtype):
        """Refuse categories that the module's ``dtype`` holds as one number (1e8 and 1e8 + 1 in float32):
        every entry of either would be read as the first."""
        for j, categories in zip(self.categorical_features_, self.categories_, strict=True):
            held = torch.as_tensor(categories, dtype=dtype).cpu().numpy()
            same = np.flatnonzero(held[1:] == held[:-1])  # categories_ are sorted
            if same.size:
                a, b = float(categories[same[0]]), float(categories[same[0] + 1])
                name = str(dtype).removeprefix("torch.")
                raise ValueError(f"{feature_label(self, j)} has categories {a!r} and {b!r}, which dtype={name!r} "
                                 f"holds as one number: fit with dtype='float64', or code the categories 0, 1, 2, ...")

    def _category_values(self, center=None, scale=None):
        """The categories as tensors in the module's units: ``(categories - offset_ - center) / scale``."""
        dtype, device = self._dtype, self.device_
        values = []
        for j, categories in zip(self.categorical_features_, self.categories_, strict=True):
            value = torch.as_tensor(categories - self.offset_[j], dtype=dtype, device=device)
            if center is not None:
                value = (value - center[j]) / scale.reshape(-1)[0 if scale.numel() == 1 else j]
            values.append(value)
        return values

    def _check_data(self, X):
        """The base's checks, and a warning for a categorical column of one category learned at ``fit``."""
        super()._check_data(X)
        for j, categories in zip(self.categorical_features_, self.categories_, strict=True):
            # With categories given, a column of one category is the caller's choice.
            if len(categories) == 1 and isinstance(self.params_.categories, str):
                warnings.warn(f"{feature_label(self, j)} is categorical with one category ({categories[0]!r}) "
                              f"at fit: the model learns nothing from it.", UserWarning, stacklevel=6)

    def _snap(self, values, *, counts=False):
        """Categorical columns of ``values`` (``(..., n_features)``) at their nearest category,
        exactly: the units' round trip may leave a category a rounding error away; with
        ``counts``, count columns (draws) at their integers for the same reason."""
        if counts:
            values[..., self.count_features_] = np.rint(values[..., self.count_features_])
        for j, categories in zip(self.categorical_features_, self.categories_, strict=True):
            column = values[..., j]
            nearest = np.abs(column[..., None] - categories).argmin(-1)
            values[..., j] = categories[nearest]
        return values

    def impute(self, X):
        """A missing number's conditional mean, a missing category's most probable value, given
        each sample's observed entries; observed entries as they are.

        Exact for :class:`~skmpt.MaskedMixedMixture`; for :class:`~skmpt.MaskedVAE`, by
        self-normalised importance sampling over ``z`` given the observed entries (MIWAE).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN marks a missing entry.

        Returns
        -------
        X_imputed : ndarray of shape (n_samples, n_features)
        """
        return self._snap(super().impute(X))

    def sample_missing(self, X, n_draws=1, random_state=None):
        """Draws of each sample's missing entries from ``p(x_mis | x_obs)``.

        Exact for :class:`~skmpt.MaskedMixedMixture`; for :class:`~skmpt.MaskedVAE`, by sampling
        importance resampling of ``z`` given the observed entries, among particles drawn until their
        effective sample size reaches 100 (at most 1000), as ``impute`` draws them.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN marks a missing entry.
        n_draws : int, default=1
        random_state : int, RandomState instance or None, default=None

        Returns
        -------
        X_draws : ndarray of shape (n_draws, n_samples, n_features)
        """
        return self._snap(super().sample_missing(X, n_draws, random_state), counts=True)

    def inverse_transform(self, Z):
        """The numeric mean and each column's most probable category given ``Z``: component
        probabilities for :class:`~skmpt.MaskedMixedMixture`, latent codes for :class:`~skmpt.MaskedVAE`.

        Parameters
        ----------
        Z : array-like of shape (n_samples, n_components)

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        """
        return self._snap(super().inverse_transform(Z))
