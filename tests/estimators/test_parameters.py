"""The parameter table of the user guide against the code, and the shared parameters' one source.

Every public ``__init__`` parameter of every registered estimator, of the imputer and of the
scorer is in ``docs/user_guide/parameters.rst``; every name there is a parameter of one of them
(or of one of their methods); and each shared parameter reads the same in every estimator.
"""

import inspect
import re
from pathlib import Path

import pytest
from numpydoc.docscrape import ClassDoc, FunctionDoc

from skmpt import MaskedGaussianMixture, MaskedImputer, MaskedMixedMixture, MaskedVAE, MLMCurveScorer
from skmpt.estimators import ESTIMATORS
from skmpt.estimators._docs import SHARED_ATTRIBUTES, SHARED_PARAMETERS

TABLE = Path(__file__).resolve().parents[2] / "docs" / "user_guide" / "parameters.rst"
CLASSES = [cls for cls, _ in ESTIMATORS.values()] + [MaskedImputer, MLMCurveScorer]


def _table_names():
    """The names of the table's first column (a row may name several: ``a``, ``b``)."""
    rows = re.findall(r"^   \* - (.+)$", TABLE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {name for row in rows[1:] for name in re.findall(r"``(\w+)``", row)}


def _init_parameters(cls):
    return {name for name in inspect.signature(cls.__init__).parameters if name != "self"}


def _method_parameters(cls):
    names = set()
    for method_name, method in inspect.getmembers(cls, callable):
        if not method_name.startswith("_") and not inspect.isclass(method):
            names |= set(inspect.signature(method).parameters) - {"self", "cls", "X", "y"}
    return names


def test_the_table_has_every_parameter_and_nothing_else():
    table = _table_names()
    for cls in CLASSES:
        missing = _init_parameters(cls) - table
        assert not missing, f"{cls.__name__}'s parameter(s) {sorted(missing)} are not in {TABLE.name}"
    known = set().union(*(_init_parameters(cls) | _method_parameters(cls) for cls in CLASSES))
    assert not table - known, f"{TABLE.name} names {sorted(table - known)}, a parameter of nothing"


def _documented(cls, section):
    return {p.name: p for p in ClassDoc(cls)[section]}


@pytest.mark.parametrize("name", sorted(SHARED_PARAMETERS))
def test_a_shared_parameter_reads_the_same_in_every_estimator(name):
    kind, description = SHARED_PARAMETERS[name]
    sharing = [cls for cls, _ in ESTIMATORS.values() if name in inspect.signature(cls.__init__).parameters]
    assert len(sharing) >= 2, f"{name} is a parameter of {len(sharing)} estimator(s): not a shared one"
    for cls in sharing:
        entry = _documented(cls, "Parameters")[name]
        default = inspect.signature(cls.__init__).parameters[name].default
        assert entry.type.startswith(f"{kind}, default="), (cls.__name__, entry.type)
        assert entry.type.endswith(f'"{default}"' if isinstance(default, str) else repr(default))
        assert " ".join(entry.desc) == description, cls.__name__


@pytest.mark.parametrize("name", sorted(SHARED_ATTRIBUTES))
def test_a_shared_attribute_reads_the_same_in_every_estimator(name):
    kind, description = SHARED_ATTRIBUTES[name]
    for cls, _ in ESTIMATORS.values():
        entry = _documented(cls, "Attributes")[name]
        assert (entry.type, " ".join(entry.desc)) == (kind, description), cls.__name__


def test_every_documented_parameter_is_a_parameter_and_every_parameter_is_documented():
    for cls, _ in ESTIMATORS.values():
        assert list(_documented(cls, "Parameters")) == list(inspect.signature(cls.__init__).parameters)[1:]


@pytest.mark.parametrize("cls", [MaskedGaussianMixture, MaskedMixedMixture, MaskedVAE])
def test_fit_s_shared_parameters_read_the_same_and_return_the_estimator(cls):
    doc = FunctionDoc(cls.fit)
    assert [p.name for p in doc["Parameters"]] == ["X", "y", "sample_weight"]
    assert [" ".join(p.desc) for p in doc["Parameters"]] == [
        "NaN marks a missing entry.", "Ignored.", "Non-negative weights, as in :meth:`skmpt.MaskedPPCA.fit`."]
    assert [(p.name, p.type) for p in doc["Returns"]] == [("self", cls.__name__)]
    assert "{" not in cls.fit.__doc__
