"""One source for the documentation of what the array estimators share: parameters and fitted
attributes.

A class docstring names a shared entry by a line holding only ``{name}``; :func:`fill_docstring`
(a class decorator) writes the entry there, as scikit-learn's and GPyTorch's docstring templates
do. A parameter's first line takes its default from the class's own signature, so estimators
with different defaults share one description. ``tests/estimators/test_parameters.py`` checks
that every estimator's text of a shared parameter is this one.
"""

import inspect
import re
import textwrap

__all__ = ["SHARED_ATTRIBUTES", "SHARED_PARAMETERS", "SHARED_SECTIONS", "fill_docstring"]

#: ``name: (type, description)`` of the parameters that two or more array estimators share.
SHARED_PARAMETERS = {
    "mask_rate": (
        '"uniform" or float in (0, 1]',
        'Training masks: ``"uniform"`` draws the mask size uniformly from ``1..D`` (the rate the theory '
        "favours: an unbiased estimate of the log-marginal likelihood); a float masks exactly "
        "``round(mask_rate * D)`` tokens (at least one), which trains towards a biased target "
        "(``D * S(x; M)``).",
    ),
    "n_masks": (
        "int",
        "Masks per sample per training step (the paper's ``P``); more masks lower the gradient noise "
        "that stops Adam short of the optimum.",
    ),
    "score_masks": (
        "int",
        'Masks per size (``score_method="sweep"``) or orderings (``"nested"``, ``"chain"``) of the '
        'cumulative score; not used by ``"exhaustive"``.',
    ),
    "score_method": (
        '{"exhaustive", "sweep", "nested", "chain"}',
        "Estimator of the cumulative score; see :func:`skmpt.objectives.mpt_curve`. "
        '``"exhaustive"`` enumerates every mask (``D <= 20``); ``"chain"`` is exact with one ordering '
        "for a model whose conditionals come from one joint density (every estimator but "
        ":class:`~skmpt.MaskedVAE`).",
    ),
    "solver": (
        '{"auto", "moments", "minibatch"}',
        'How training sees the data. ``"moments"``: through their weighted mean and covariance (per '
        "pattern of observed entries when some are missing), computed in one pass; each step then draws "
        "``16 * n_masks`` masks shared by the samples and costs the same whatever their number, and "
        "training starts from PCA's solution (on complete data). Its objective has the expectation of "
        '``"minibatch"``\'s, so the same optimum. ``"minibatch"``: epochs of shuffled mini-batches of '
        'rows with masks of their own. ``"auto"``: ``"moments"`` for complete data; with missing entries, '
        "the moments of each of the ten most frequent patterns of observed entries that 100 rows or more "
        "share, and mini-batches of the other rows in the same steps (all rows when no pattern is that "
        'frequent); ``partial_fit`` from a first chunk of 1000 rows on. With moments, an epoch of '
        "``history_`` is one step.",
    ),
    "max_epochs": ("int", "Most passes over the data."),
    "batch_size": ('"auto" or int', 'Samples per training step; ``"auto"`` is ``min(200, n_samples)``.'),
    "learning_rate": (
        "float",
        "Adam's initial step size; for a Gaussian likelihood, on data centred and divided by their "
        "overall standard deviation (so the default suits data of any scale).",
    ),
    "tol": ("float", "Improvement of the stopping objective (nats per sample) that counts as progress."),
    "n_iter_no_change": (
        "int",
        "After this many epochs without progress of the stopping objective (the training objective on "
        "a quarter of the samples, at least 100, with masks and noise fixed before training) the step "
        "size is halved (the schedule of torch's ``ReduceLROnPlateau``); the stall after the sixth cut is "
        "convergence.",
    ),
    "monitor": (
        'None or "lml"',
        '``"lml"`` records the log-marginal likelihood of the training data (exact, or importance-sampled '
        "by :class:`~skmpt.MaskedVAE`) in ``history_`` every ``monitor_every`` epochs (a diagnostic; "
        "training does not use it).",
    ),
    "monitor_every": ("int", "Epochs between two ``monitor`` records."),
    "dtype": (
        '{"float64", "float32"}',
        "Precision of the module and of the computations (training sums over samples in float64 "
        "either way).",
    ),
    "device": (
        '{"auto", "cpu", "cuda", "cuda:N"} or torch.device',
        '``"auto"`` uses CUDA when available.',
    ),
    "random_state": (
        "int, RandomState instance or None",
        "Seeds the initialisation, the batches, the training and scoring masks and a stochastic "
        "model's noise (drawn afresh from it at each call, so that with an int every score is "
        "reproducible). Like every parameter, the value of the last ``fit`` is the one used after it.",
    ),
    "verbose": (
        "int",
        'Log one line per epoch (logger ``"skmpt"``, level INFO) when positive; shown on standard error '
        "when logging is not configured.",
    ),
}

#: ``name: (type, description)`` of the fitted attributes shared by the array estimators.
SHARED_ATTRIBUTES = {
    "params_": (
        "dict",
        "The parameters (``get_params(deep=False)``) as they were at the last ``fit`` or "
        "``partial_fit``, validated, in a :class:`~sklearn.utils.Bunch` (``params_.mask_rate`` is "
        "``params_[\"mask_rate\"]``): every method of the fitted estimator reads these, so ``set_params`` "
        "after ``fit`` changes no number until the next ``fit``, as in scikit-learn.",
    ),
    "device_": ("torch.device", "Where the module lives."),
    "n_features_in_": ("int", "Number of features seen during fit."),
    "n_components_": ("int", "The fitted ``n_components`` (``set_params`` does not change a fitted model)."),
    "offset_": (
        "ndarray of shape (n_features,)",
        "Subtracted from the data, in float64, before they are cast to ``dtype``: the training data's "
        "mean for a Gaussian model in float32 (so that an offset does not cost the data's precision), "
        "zeros otherwise.",
    ),
    "feature_names_in_": (
        "ndarray of shape (`n_features_in_`,)",
        "Names of features seen during fit, when ``X`` has string column names.",
    ),
}

#: ``name: text`` of whole sections that methods share (``{estimator}`` is the class's name), written where a
#: line of a method's docstring holds only ``{name}``.
SHARED_SECTIONS = {
    "fit_parameters": """Parameters
----------
X : array-like of shape (n_samples, n_features)
    NaN marks a missing entry.
y : None
    Ignored.
sample_weight : array-like of shape (n_samples,), default=None
    Non-negative weights, as in :meth:`skmpt.MaskedPPCA.fit`.

Returns
-------
self : {estimator}""",
}

_PLACEHOLDER = re.compile(r"^( *)\{(\w+)\}$", re.MULTILINE)


def _default(value):
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _entry(header, description, indent):
    body = textwrap.fill(
        description, width=96, initial_indent=indent + "    ", subsequent_indent=indent + "    ",
        break_long_words=False, break_on_hyphens=False,
    )
    return f"{indent}{header}\n{body}"


def fill_docstring(cls):
    """Class decorator: each line ``{name}`` of ``cls``'s docstring becomes the shared entry of
    ``name``, a parameter (with ``cls``'s default) or a fitted attribute; in the docstring of a method
    defined in ``cls``, the shared section ``name`` (``SHARED_SECTIONS``).

    Examples
    --------
    >>> from skmpt.estimators._docs import fill_docstring
    >>> @fill_docstring
    ... class Example:
    ...     '''An example.
    ...
    ...     Parameters
    ...     ----------
    ...     {tol}
    ...     '''
    ...     def __init__(self, *, tol=0.5):
    ...         self.tol = tol
    >>> print(Example.__doc__.splitlines()[4])
        tol : float, default=0.5
    """
    defaults = {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()}

    def entry(match):
        indent, name = match.groups()
        if name in SHARED_SECTIONS:
            return textwrap.indent(SHARED_SECTIONS[name].format(estimator=cls.__name__), indent)
        if name in SHARED_ATTRIBUTES:
            kind, description = SHARED_ATTRIBUTES[name]
            return _entry(f"{name} : {kind}", description, indent)
        if name not in SHARED_PARAMETERS or name not in defaults:
            raise ValueError(f"{cls.__name__}'s docstring names {{{name}}}, which is neither a shared "
                             f"parameter of its signature nor a shared attribute.")
        kind, description = SHARED_PARAMETERS[name]
        return _entry(f"{name} : {kind}, default={_default(defaults[name])}", description, indent)

    cls.__doc__ = _PLACEHOLDER.sub(entry, cls.__doc__)
    for method in vars(cls).values():
        if inspect.isfunction(method) and method.__doc__:
            method.__doc__ = _PLACEHOLDER.sub(entry, method.__doc__)
    return cls
