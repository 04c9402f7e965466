"""Parameter validation: the constraints an estimator or a function declares, checked at fit
or call time, with scikit-learn's wording.

scikit-learn's own helpers for this live in private modules, so skmpt keeps this small copy of
the idea. A constraint is ``None`` (the value None), a type, one of the strings
``"boolean"``, ``"random_state"``, ``"verbose"``, ``"array-like"`` or ``"callable"``, an
:class:`Interval` or an :class:`Options`.

Examples
--------
>>> from numbers import Integral
>>> from skmpt._validation import Interval, validate_parameters
>>> validate_parameters({"n": 0}, {"n": [Interval(Integral, 1, None, closed="left")]}, "f")
Traceback (most recent call last):
...
skmpt._validation.InvalidParameterError: The 'n' parameter of f must be an int in the range [1, inf); got 0.
"""

import functools
import inspect
import numbers
from numbers import Integral, Real

import numpy as np

__all__ = ["Interval", "InvalidParameterError", "Options", "check_positive_int", "is_imputer", "validate_parameters",
           "validated"]


class InvalidParameterError(ValueError, TypeError):
    """A parameter has a value its constraints do not allow (a ``ValueError`` and a
    ``TypeError``, as scikit-learn's error of the same name)."""


class Interval:
    """Numbers of ``kind`` (``Integral`` or ``Real``) between ``left`` and ``right``.

    ``None`` for a bound means unbounded; ``closed`` is ``"left"``, ``"right"``, ``"both"`` or
    ``"neither"``. Booleans are never numbers here.
    """

    def __init__(self, kind, left, right, *, closed):
        if kind not in (Integral, Real) or closed not in ("left", "right", "both", "neither"):
            raise ValueError(f"Interval({kind!r}, closed={closed!r}) is not a valid constraint.")
        self.kind, self.left, self.right, self.closed = kind, left, right, closed

    def is_satisfied_by(self, value):
        if isinstance(value, bool | np.bool_) or not isinstance(value, self.kind):
            return False
        if self.kind is Real and isinstance(value, numbers.Real) and value != value:
            return False  # NaN
        if self.left is not None:
            if value < self.left or (value == self.left and self.closed in ("right", "neither")):
                return False
        if self.right is not None:
            if value > self.right or (value == self.right and self.closed in ("left", "neither")):
                return False
        return True

    def __str__(self):
        left = "-inf" if self.left is None else self.left
        right = "inf" if self.right is None else self.right
        brackets = {"left": "[)", "right": "(]", "both": "[]", "neither": "()"}[self.closed]
        kind = "an int" if self.kind is Integral else "a float"
        return f"{kind} in the range {brackets[0]}{left}, {right}{brackets[1]}"


class Options:
    """One of a fixed set of values (strings, usually)."""

    def __init__(self, options):
        self.options = frozenset(options)

    def is_satisfied_by(self, value):
        return isinstance(value, str | numbers.Number) and not isinstance(value, bool) and value in self.options

    def __str__(self):
        return "a str among {" + ", ".join(repr(option) for option in sorted(self.options, key=str)) + "}"


def is_imputer(value):
    """Whether ``value`` is an imputer: an instance (not a class) with ``fit_transform`` and ``transform``.

    Examples
    --------
    >>> from sklearn.impute import KNNImputer
    >>> from skmpt._validation import is_imputer
    >>> is_imputer(KNNImputer()), is_imputer(KNNImputer), is_imputer("trees")
    (True, False, False)
    """
    return not isinstance(value, type) and all(callable(getattr(value, name, None))
                                                for name in ("fit_transform", "transform"))


def _is_satisfied(constraint, value):
    if constraint is None:
        return value is None
    if isinstance(constraint, Interval | Options):
        return constraint.is_satisfied_by(value)
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    if constraint == "boolean":
        return isinstance(value, bool | np.bool_)
    if constraint == "random_state":
        import torch

        return (
            value is None
            or isinstance(value, np.random.RandomState | np.random.Generator | torch.Generator)
            or (isinstance(value, Integral) and not isinstance(value, bool) and 0 <= value < 2**64)
        )
    if constraint == "numpy_random_state":  # what scikit-learn's check_random_state takes
        return (value is None or isinstance(value, np.random.RandomState)
                or (isinstance(value, Integral) and not isinstance(value, bool) and 0 <= value < 2**32))
    if constraint == "imputer":
        return is_imputer(value)
    if constraint == "verbose":
        return isinstance(value, Integral | bool | np.bool_) and value >= 0
    if constraint == "array-like":
        return hasattr(value, "__len__") or hasattr(value, "__array__") or hasattr(value, "shape")
    if constraint == "callable":
        return callable(value)
    raise ValueError(f"Unknown constraint {constraint!r}.")


def _describe(constraint):
    if constraint is None:
        return "None"
    if isinstance(constraint, type):
        return f"an instance of {constraint.__module__}.{constraint.__qualname__}".replace("builtins.", "")
    words = {
        "boolean": "an instance of bool",
        "random_state": "an int in the range [0, 2**64), an instance of numpy RandomState or Generator, "
        "a torch.Generator or None",
        "numpy_random_state": "an int in the range [0, 2**32), an instance of numpy RandomState or None",
        "imputer": "an imputer (an instance with fit_transform and transform)",
        "verbose": "a non-negative int or a bool",
        "array-like": "an array-like",
        "callable": "a callable",
    }
    return words.get(constraint, str(constraint))


def validate_parameters(params, constraints, caller):
    """Check every ``params[name]`` that has ``constraints[name]``; ``caller`` names the owner.

    Raises
    ------
    InvalidParameterError
        Naming the first parameter that satisfies none of its constraints.
    """
    for name, allowed in constraints.items():
        if name not in params:
            continue
        value = params[name]
        if any(_is_satisfied(constraint, value) for constraint in allowed):
            continue
        described = [_describe(constraint) for constraint in allowed]
        expected = described[0] if len(described) == 1 else f"{', '.join(described[:-1])} or {described[-1]}"
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be {expected}; got {value!r}.")


def validated(constraints):
    """Decorate a function so that its arguments are checked against ``constraints`` first."""

    def decorate(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            validate_parameters(bound.arguments, constraints, function.__name__)
            return function(*args, **kwargs)

        return wrapper

    return decorate


def check_positive_int(value, name):
    """``value`` as an int if it is a positive integer (not a bool), else a ``ValueError`` naming ``name``.

    Examples
    --------
    >>> from skmpt._validation import check_positive_int
    >>> check_positive_int(3, "score_masks")
    3
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}.")
    return int(value)
