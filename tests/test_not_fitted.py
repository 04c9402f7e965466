"""Every method of every estimator that needs a fitted model raises ``NotFittedError`` before ``fit``.

The table is built from the classes themselves: each public method that is not a fit, a
constructor or one of scikit-learn's parameter and metadata setters is called on a fresh
estimator with arguments of the right kind, so a method added later is checked too.
"""

import inspect

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import skmpt
from skmpt.estimators import ESTIMATORS

CLASSES = [cls for cls, _ in ESTIMATORS.values()] + [skmpt.MLMCurveScorer, skmpt.MaskedImputer]

#: Methods that need no fitted model: they fit, build an estimator or set its parameters.
NEEDS_NO_FIT = {"fit", "fit_predict", "fit_transform", "partial_fit", "from_estimator", "get_params", "set_params",
                "get_metadata_routing", "set_output"}


def _arguments(cls, method):
    """Arguments of the right kind for each of ``method``'s required parameters."""
    texts = cls is skmpt.MLMCurveScorer
    X = ["a b c", "b a"] if texts else np.array([[0.5, np.nan, 1.0], [1.0, 2.0, -1.0]])
    values = {"X": X, "Z": np.zeros((2, 1)), "masks": np.array([[True, False, False], [False, True, False]]),
              "mask_rate": 0.5, "contexts": ["a"], "continuations": [" b"]}
    parameters = list(inspect.signature(method).parameters.values())[1:]
    return {p.name: values[p.name] for p in parameters
            if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _methods():
    for cls in CLASSES:
        for name, _ in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_") or name in NEEDS_NO_FIT or name.startswith("set_") and name.endswith("_request"):
                continue
            yield pytest.param(cls, name, id=f"{cls.__name__}.{name}")


def test_the_table_covers_the_methods():
    """Known methods that need a fit are in the table (a rename would otherwise empty it unseen)."""
    ids = {param.id for param in _methods()}
    assert {"MLMCurveScorer.transform", "MLMCurveScorer.score", "MaskedPPCA.sample_missing",
            "MaskedImputer.transform", "MaskedGaussianMixture.predict_proba"} <= ids


@pytest.mark.parametrize(("cls", "name"), list(_methods()))
def test_method_before_fit_raises_not_fitted(cls, name):
    estimator = cls()
    method = getattr(estimator, name)
    with pytest.raises(NotFittedError):
        method(**_arguments(cls, getattr(cls, name)))
