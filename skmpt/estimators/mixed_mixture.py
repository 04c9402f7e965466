r"""Mixtures over tables of numbers and categories, fitted by exact EM or by masked pre-training.

.. math::

    p(x) = \sum_k \pi_k\, \mathcal N(x_N \mid \mu_k, \Sigma_k) \prod_{j \in C} \theta_{kj}[x_j]

(:class:`~skmpt.models.mixed.MixedMixtureModule`). Its likelihood of the observed entries is
exact, and so is EM on it with entries missing at random: the E-step takes each component's
conditional Gaussian of the missing numeric entries and drops the missing categories from the
product; the M-step is closed-form. The conditionals come from one joint density, so the
cumulative MPT score is the log-marginal likelihood (Moreno-Muñoz, Recasens and Hauberg, 2023).
"""

import copy
import time
import warnings
from numbers import Integral

import numpy as np
import torch
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .._utils import check_generator, lbfgs_descent
from .._validation import Interval, Options, check_positive_int
from ..models.imputation import hole_patterns
from ..models.mixed import MixedMixtureModule
from ._base import _BaseMaskedEstimator, _InformationCriteriaMixin
from ._columns import TableColumnsMixin
from ._data import standardization
from ._docs import fill_docstring
from .gaussian_mixture import (EVALUATION_STEPS, PROBE_EVALUATIONS, PROBE_TOL, em_converged, em_parameters, floored,
                               module_of, sklearn_covariances)

__all__ = ["MaskedMixedMixture", "mixed_em", "resolution_floor"]

# The least variance of a covariance in the M-step, in every direction (on standardised numeric
# columns; GaussianMixture's reg_covar is added instead): a component of one point keeps a positive
# definite covariance.
_REG_COVAR = 1e-6
# Added to every category's count in the M-step: a category a component never saw keeps a
# finite log-probability (a Dirichlet prior of 1 + 1e-6, far below one sample's weight). The
# weights sum to one, so such a category takes 1e-6 / pi_k of its component's probability: EM's
# fixed point is about 1e-6 nats per sample below the likelihood's optimum for each category some
# component never saw, the least ``tol`` it can be judged converged at.
_PSEUDOCOUNT = 1e-6
# EM steps of the start that MPT continues from (algorithm="mpt", and partial_fit's first call).
_EM_START_STEPS = 20


def _initial_responsibilities(X_n, observed_n, codes, observed_c, sizes, n_components, seed, counted):
    """One-hot k-means labels ``(n, K)`` of the standardised numeric columns (missing at 0) beside
    the one-hot categories (missing as zeros) and the counts (``counted``: their values and where
    they are observed), each count column standardised by its observed entries (missing at 0)."""
    n_samples = X_n.shape[0]
    if n_components == 1:
        return X_n.new_ones(n_samples, 1)
    parts = [torch.where(observed_n, X_n, torch.zeros_like(X_n))]
    for j, size in enumerate(sizes):
        one_hot = torch.nn.functional.one_hot(codes[:, j], size).to(X_n.dtype)
        parts.append(one_hot * observed_c[:, j : j + 1])
    counts, seen = counted
    total = seen.sum(0).clamp_min(1)
    center = (counts * seen).sum(0) / total
    spread = (((counts - center) * seen).square().sum(0) / total).sqrt()
    parts.append((counts - center) / torch.where(spread > 0, spread, torch.ones_like(spread)) * seen)
    data = torch.cat(parts, 1).cpu().numpy()
    labels = KMeans(n_components, n_init=1, random_state=seed).fit(data).labels_
    return X_n.new_tensor(np.eye(n_components)[labels])


def resolution_floor(X, observed):
    """Each column's resolution floor ``h_j^2 / 12``: ``h_j`` the smallest gap between the distinct
    values observed in column ``j`` (0 for a column of one value), shape ``(n_features,)``.

    ``h^2 / 12`` is the variance of a value spread evenly over its cell of width ``h``. A component
    narrower than that in a column of integers (a count of children, a year) would put its density
    on one value, and its likelihood would grow without bound; for a column of real measurements
    ``h`` is far below the spread and the floor does nothing.

    Examples
    --------
    >>> import torch
    >>> from skmpt.estimators.mixed_mixture import resolution_floor
    >>> X = torch.tensor([[0.0, 0.5], [2.0, 0.25], [1.0, 0.5], [1.0, 0.1]], dtype=torch.float64)
    >>> (resolution_floor(X, torch.ones_like(X, dtype=torch.bool)) * 12).tolist()
    [1.0, 0.0225]
    """
    floors = []
    for column, seen in zip(X.T, observed.T, strict=True):
        gaps = column[seen].unique().diff()  # sorted distinct values
        floors.append(gaps.min().square() / 12 if gaps.numel() else X.new_zeros(()))
    return torch.stack(floors) if floors else X.new_zeros(0)


def _category_codes(X, category_values, numeric, categorical, count):
    """Each categorical entry's index among its column's ``category_values`` by the module's own
    nearest-value rule (:meth:`~skmpt.models.mixed.MixedMixtureModule.codes`), so that EM and the
    likelihood see one table."""
    sizes = [len(v) for v in category_values]
    reader = MixedMixtureModule(
        X.new_ones(1), X.new_zeros(1, len(numeric)), X.new_ones(1), [X.new_ones(1, s) / s for s in sizes],
        category_values, numeric, categorical, "spherical", count_features=count)
    return reader.codes(X)


def _numeric_units(X, observed, weights, covariance_type):
    """``(center, scale, X_n, jacobian, floor)`` of EM's run on the numeric columns ``X``: each centred
    and divided by its observed spread (all by one scale for ``"spherical"``, whose variance is one for
    every column), ``X_n`` the table so standardised (zero at the holes), ``jacobian`` the weighted mean
    over the rows of the log-scales of their observed entries, and the columns' resolution floors in
    those units. Each column in its own units, EM, its k-means start and its floors are equivariant to
    each column's scale, as the model is."""
    center, scale = standardization(X, "gaussian", observed, per_feature=covariance_type != "spherical")
    X_n = torch.where(observed, (X - center) / scale, torch.zeros_like(X))
    jacobian = float(weights @ (observed.to(X.dtype) @ scale.log().expand(X.shape[1]))) / float(weights.sum())
    return center, scale, X_n, jacobian, resolution_floor(X, observed) / scale**2


def _k_means_start(X_n, observed_n, codes, observed_c, sizes, n_components, covariance_type, seed, counted, weights,
                   floor):
    """EM's first parameters as :func:`_given_start` gives them, from the M-step of the k-means labels of
    :func:`_initial_responsibilities` (a missing number at its component's mean, with unit variance)."""
    holes = hole_patterns(observed_n)
    missing = torch.diag_embed((~holes.patterns).to(X_n.dtype)).expand(n_components, -1, -1, -1)
    resp = _initial_responsibilities(X_n, observed_n, codes, observed_c, sizes, n_components, seed, counted)
    return _m_step(resp * weights[:, None], X_n.expand(n_components, *X_n.shape), missing, holes, codes, observed_c,
                   sizes, covariance_type, *counted, floor)


def _m_step(resp, mean, cov, holes, codes, observed_c, sizes, covariance_type, counts, observed_p, floor):
    """Closed-form maximisation given responsibilities ``resp`` (``(n, K)``, sample weights in),
    the numeric entries' conditional means ``(K, n, D_N)`` and each pattern of holes' conditional
    covariance ``(K, U, D_N, D_N)`` (:class:`~skmpt.models.imputation.HolePatterns` ``holes``):
    ``(weights, means, covariances, probabilities, rates)``. The covariances are the scatter's, at
    least ``floor`` (per numeric column, and at least ``_REG_COVAR``) in every direction: the M-step
    restricted to the covariances the module holds (:func:`~skmpt.estimators.gaussian_mixture.floored`),
    as the Gaussian mixtures' is. ``_REG_COVAR`` added to the scatter, scikit-learn's way, moved EM's
    fixed point off the likelihood's optimum where the scatter is that small: a constant column's
    variance sat at 1.17e-6 with 20 % of it missing, 0.067 nats per sample below the floor's, and EM and
    the saddle probe undid each other's steps until ``max_iter`` ran out."""
    floor = floor.clamp_min(_REG_COVAR)
    totals = resp.sum(0) + 10 * torch.finfo(resp.dtype).eps  # guard against empty components
    means = torch.einsum("nk,knd->kd", resp, mean) / totals.unsqueeze(-1)
    residual = mean - means.unsqueeze(1)
    by_pattern = resp.new_zeros(len(holes.patterns), resp.shape[1]).index_add_(0, holes.index, resp)  # (U, K)
    scatter = torch.einsum("nk,knd,kne->kde", resp, residual, residual) + torch.einsum("uk,kude->kde", by_pattern, cov)
    if covariance_type == "full":
        covariances = floored(scatter / totals.view(-1, 1, 1), floor)
    elif covariance_type == "tied":
        covariances = floored(scatter.sum(0) / totals.sum(), floor)
    else:
        covariances = scatter.diagonal(dim1=-2, dim2=-1) / totals.unsqueeze(-1)
        if covariance_type == "spherical":  # sigma^2 I is at least diag(floor) when sigma^2 is at least its largest
            covariances = (covariances.mean(-1).clamp_min(floor.max()) if covariances.shape[-1]
                           else covariances.new_ones(len(totals)))
        else:
            covariances = torch.maximum(covariances, floor)
    probabilities = []
    for j, size in enumerate(sizes):
        one_hot = torch.nn.functional.one_hot(codes[:, j], size).to(resp.dtype) * observed_c[:, j : j + 1]
        tally = resp.T @ one_hot + _PSEUDOCOUNT  # (K, C_j)
        probabilities.append(tally / tally.sum(-1, keepdim=True))
    # The pseudo-count keeps a component that saw only zeros at a positive (tiny) rate.
    rates = (resp.T @ (counts * observed_p) + _PSEUDOCOUNT) / (resp.T @ observed_p + _PSEUDOCOUNT)
    return totals / totals.sum(), means, covariances, probabilities, rates


def mixed_em(X, observed, weights, category_values, numeric_features, categorical_features, n_components,
             covariance_type, *, seed, tol, max_iter, count_features=(), count_units=None, start=None):
    """Fit a :class:`~skmpt.models.mixed.MixedMixtureModule` by EM on the observed entries.

    Each step raises ``sum_i w_i log p(x_i,o)`` (exact; covariances at least ``resolution_floor``) until less than
    ``tol`` nats per sample is left to gain (:func:`~skmpt.estimators.gaussian_mixture.em_converged`, the Gaussian
    mixtures' rule) and L-BFGS from there gains less than ``tol`` too (a saddle probe, whose evaluations count
    two steps each of ``max_iter``; EM goes on from where it got otherwise). Each numeric column is centred and
    divided by its observed spread for the run (all by one scale for ``"spherical"``), and mapped back: the fit
    is equivariant to each column's scale, as the model is.

    Parameters
    ----------
    X : torch.Tensor of shape (n_samples, n_features)
        Any finite value at the entries not observed; a categorical entry is one of its column's ``category_values``.
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features)
    weights : torch.Tensor of shape (n_samples,)
        Non-negative.
    category_values : list of torch.Tensor
        Each categorical column's values.
    numeric_features, categorical_features : sequence of int
    n_components : int
    covariance_type : {"full", "tied", "diag", "spherical"}
    seed : int
        Of the k-means start.
    tol : float
        Nats per sample. The categories' pseudo-count holds EM about 1e-6 below the likelihood's
        optimum per category some component never saw: a smaller ``tol`` is not reached there.
    max_iter : int
    count_features : sequence of int, default=()
        Columns of non-negative integer counts (Poisson).
    count_units : tuple of torch.Tensor, default=None
        ``(zero, unit)``: a count is ``(x - zero) / unit`` (None: ``x`` itself).
    start : MixedMixtureModule, default=None
        EM's first parameters, in the units of ``X`` (a fitted mixture's); None: the k-means start.

    Returns
    -------
    module : MixedMixtureModule
        In the units of ``X``.
    history : list of dict
        One per step: ``epoch``, ``objective`` (the weighted mean log-likelihood of the observed
        entries before the step, in the units of ``X``), ``seconds``.
    converged : bool

    Examples
    --------
    >>> import torch
    >>> from skmpt.estimators.mixed_mixture import mixed_em
    >>> g = torch.Generator().manual_seed(0)
    >>> labels = torch.randint(0, 2, (200,), generator=g)
    >>> X = torch.stack([labels * 4.0 + torch.randn(200, generator=g, dtype=torch.float64), labels.double()], 1)
    >>> observed = torch.ones_like(X, dtype=torch.bool)
    >>> module, history, converged = mixed_em(X, observed, torch.ones(200, dtype=torch.float64),
    ...     [torch.tensor([0.0, 1.0], dtype=torch.float64)], [0], [1], 2, "full", seed=0, tol=1e-5, max_iter=50)
    >>> converged, sorted(module.log_weights.exp().round(decimals=1).tolist())
    (True, [0.5, 0.5])
    """
    numeric, categorical, count = list(numeric_features), list(categorical_features), list(count_features)
    sizes = [len(v) for v in category_values]
    codes = _category_codes(X, category_values, numeric, categorical, count)
    zero, unit, counted = _count_table(X, observed, count, count_units)
    observed_n, observed_c = observed[:, numeric], observed[:, categorical].to(X.dtype)
    center, scale, X_n, jacobian, floor = _numeric_units(X[:, numeric], observed_n, weights, covariance_type)
    weights = weights / weights.sum()
    params = (_given_start(start, center, scale, sizes) if start is not None else _k_means_start(
        X_n, observed_n, codes, observed_c, sizes, n_components, covariance_type, seed, counted, weights, floor))

    def build(weights, means, covariances, probabilities, rates):
        module = MixedMixtureModule(weights, means, covariances, probabilities, category_values, numeric, categorical,
                                    covariance_type, count_features=count, rates=rates)
        module.count_zero.copy_(zero)
        module.count_unit.copy_(unit)
        return module

    rows = torch.cat([X_n, X[:, categorical], X[:, count]], 1)[:, _column_order(numeric, categorical, count)]
    history, values, converged, spent = [], [], False, 0
    while spent < max_iter:
        start = time.perf_counter()
        module = build(*params)
        with torch.no_grad():
            mean, cov, holes, log_joint = module.conditional_by_pattern(rows, observed)
        value = float(weights @ torch.logsumexp(log_joint, -1))
        resp = torch.softmax(log_joint, -1) * weights[:, None]
        params = _m_step(resp, mean, cov, holes, codes, observed_c, sizes, covariance_type, *counted, floor)
        history.append({"epoch": len(history) + 1, "objective": value - jacobian,
                        "seconds": time.perf_counter() - start})
        values.append(value)
        spent += 1
        if em_converged(values, tol):
            probed, gain, evaluations = _saddle_probe(build(*params), rows, observed, weights, floor, tol)
            spent += EVALUATION_STEPS * evaluations
            if converged := gain < tol:
                break
            params, values = _em_parameters_of(probed, sizes), []  # the probe ran in EM's units
    module = build(*params)
    with torch.no_grad():
        module.gaussian.unstandardize_(center, scale)
    return module, history, converged


def _saddle_probe(module, rows, observed, weights, floor, tol):
    """``(module, gain, evaluations)``: L-BFGS on the exact log-likelihood of the observed entries from
    the mixture ``module`` that EM says is within ``tol`` of the optimum, at most ``PROBE_EVALUATIONS``
    of it and its gradient, covariances kept at least ``floor`` (EM's, with ``_REG_COVAR``), and what it
    gained (zero where it did not gain: the module then unchanged). Near a saddle EM's gains shrink as
    they do near a maximum, then grow as it leaves, which no extrapolation of them can foresee (the
    Gaussian mixtures' :func:`~skmpt.estimators.gaussian_mixture.saddle_probe`); quasi-Newton steps
    learn the curvature that EM crawls along."""
    covariance_type = module.gaussian.covariance_type
    floor = floor.clamp_min(_REG_COVAR)  # as the M-step keeps it: a spherical variance at least the largest
    if covariance_type == "spherical" and len(floor):
        floor = floor.max().expand(len(floor))
    probed = copy.deepcopy(module)
    probed.gaussian = module_of(em_parameters(module.gaussian), floor, covariance_type)

    def value():
        return weights @ probed.log_marginal(rows, observed=observed)

    def evaluate():
        loss = -value()
        loss.backward()
        return float(loss.detach())

    with torch.no_grad():
        before = float(value())
    try:
        with torch.enable_grad():
            evaluations = lbfgs_descent(list(probed.parameters()), evaluate, PROBE_TOL * tol, PROBE_EVALUATIONS)
        with torch.no_grad():
            gain = float(value()) - before
    except torch.linalg.LinAlgError:  # a covariance no longer positive definite
        return module, 0.0, PROBE_EVALUATIONS
    return (probed, gain, evaluations) if gain > 0 else (module, 0.0, evaluations)


def _given_start(start, center, scale, sizes):
    """EM's first ``(weights, means, covariances, probabilities, rates)`` from the mixture ``start``
    (in the units of ``X``), its Gaussians in the standardised units ``(x - center) / scale``."""
    module = copy.deepcopy(start)
    with torch.no_grad():
        module.gaussian.unstandardize_(-center / scale, 1 / scale)
    return _em_parameters_of(module, sizes)


def _em_parameters_of(module, sizes):
    """``(weights, means, covariances, probabilities, rates)`` of the mixture ``module`` as :func:`_m_step`
    returns them (covariances in ``covariance_type``'s layout, each categorical column's ``sizes`` kept)."""
    with torch.no_grad():
        covariances = module.gaussian.covariances()
        if module.covariance_type == "tied":
            covariances = covariances[0]
        elif module.covariance_type == "spherical":
            covariances = covariances[:, 0]
        probabilities = [p[:, :size] for p, size in zip(module.category_log_probs().exp(), sizes, strict=True)]
        return module.log_weights.exp(), module.gaussian.means, covariances, probabilities, module.log_rates.exp()


def _count_table(X, observed, count, count_units):
    """``(zero, unit, (counts, observed))`` of the count columns ``count`` of ``X`` (a count is
    ``(x - zero) / unit``, rounded; ``count_units`` None: ``x`` itself)."""
    zero, unit = count_units if count_units is not None else (X.new_zeros(len(count)), X.new_ones(len(count)))
    counts = ((X[:, count] - zero) / unit).round().clamp_min(0)
    return zero, unit, (counts, observed[:, count].to(X.dtype))


def _column_order(*groups):
    """The permutation putting columns listed as ``[*groups[0], *groups[1], ...]`` back in their order."""
    return torch.as_tensor([j for group in groups for j in group], dtype=torch.long).argsort()


@fill_docstring
class MaskedMixedMixture(_InformationCriteriaMixin, TableColumnsMixin, _BaseMaskedEstimator):
    """Mixture of Gaussians and categoricals for tables of numbers and categories, exact throughout.

    Each component holds a Gaussian over the numeric columns (the covariance types of
    :class:`MaskedGaussianMixture`) and an independent categorical over each categorical column
    (a binary column is a categorical of two categories: a Bernoulli), and a Poisson over each
    count column (``count_features``). Its log-likelihood, its
    masked conditionals and the likelihood of rows with holes are exact: a missing category drops
    out of each component's product, a missing number out of its Gaussian. ``fit`` runs EM, exact
    with holes (``algorithm="em"``), or continues EM's start by masked pre-training
    (``algorithm="mpt"``); ``impute`` fills a missing number with its conditional mean and a
    missing category with its most probable value given the observed entries. EM keeps each
    component's variance of a numeric column at least ``h^2 / 12``, ``h`` the smallest gap between
    the column's values (``skmpt.estimators.mixed_mixture.resolution_floor``): on a column of
    integers a component cannot collapse onto one value, whose density, and the likelihood, would
    grow without bound.

    Without numeric columns (every column categorical or a count) it is a latent class model: no
    component has a Gaussian, ``means_`` and ``covariances_`` are empty (``(K, 0, 0)`` full,
    ``(0, 0)`` tied, ``(K, 0)`` diagonal and spherical), ``covariance_type`` has nothing to fit
    and counts no parameter.

    A categorical column holds numbers: each distinct value seen at ``fit`` is a category
    (``categories_``); a value not seen at ``fit`` is an error naming the column. Tables of
    strings or of pandas categories are encoded for it by :class:`MaskedImputer`.

    Parameters
    ----------
    n_components : int, default=1
        Number of mixture components ``K``, at most the number of training samples.
    categorical_features : array-like of int or of bool, or None, default=None
        The categorical columns, by index or by a mask of ``n_features`` booleans; None: every
        column is numeric (the model is then a Gaussian mixture).
    count_features : array-like of int or of bool, or None, default=None
        The count columns (non-negative integers), each a Poisson per component, by index or mask;
        a missing count is imputed with its conditional mean (a real number) and drawn as an integer.
    categories : "auto" or list of array-like, default="auto"
        Each categorical column's categories: ``"auto"`` learns them from the values ``fit`` sees;
        a list (one array per categorical column, in column order) fixes them, as
        :class:`~sklearn.preprocessing.OneHotEncoder`'s ``categories`` (a category that ``fit``
        does not see keeps a small probability; a value outside them is an error).
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
        Each component's covariance of the numeric columns, as in :class:`MaskedGaussianMixture`.
    algorithm : {"em", "mpt"}, default="em"
        ``"em"``: EM on the observed entries until what is left to gain, extrapolated from the last
        ten steps' gains, is less than ``tol`` nats per sample, at most ``max_epochs`` steps (each
        step is exact and raises the observed-data likelihood).
        ``"mpt"``: 20 EM steps at most, then masked pre-training from there (the other training
        parameters apply to it).
    n_init : int, default=1
        Starts (k-means on the standardised numbers beside the one-hot categories) to run; the
        fit of highest log-likelihood on the training data is kept. The first uses ``random_state``,
        the others seeds drawn from it.
    {mask_rate}
    {n_masks}
    {score_masks}
    {score_method}
    {max_epochs}
    {batch_size}
    {learning_rate}
    {tol}
    {n_iter_no_change}
    {monitor}
    {monitor_every}
    {dtype}
    {device}
    {random_state}
    {verbose}
    warm_start : bool, default=False
        ``fit`` on a fitted mixture starts EM from its parameters (one start, no k-means), as
        :class:`~sklearn.mixture.GaussianMixture`'s ``warm_start``: a refit to more rows costs the
        steps it still needs. ``n_components``, ``covariance_type``, the columns and (with
        categorical columns, given) ``categories`` must be those it was fitted with, and the data's
        width, else a ``ValueError``.

    Attributes
    ----------
    categorical_features_ : ndarray of int
        The categorical columns, sorted.
    count_features_ : ndarray of int
        The count columns, sorted.
    numeric_features_ : ndarray of int
        The other columns.
    categories_ : list of ndarray
        Each categorical column's categories, sorted (as :class:`~sklearn.preprocessing.OneHotEncoder`).
    weights_ : ndarray of shape (n_components,)
        Mixing proportions ``pi_k``.
    means_ : ndarray of shape (n_components, n_numeric)
        Each component's mean of the numeric columns.
    covariances_ : ndarray
        Each component's covariance of the numeric columns, in
        :class:`~sklearn.mixture.GaussianMixture`'s layout of ``covariance_type``.
    category_probabilities_ : list of ndarray
        One per categorical column, of shape (n_components, n_categories): ``theta_kj``.
    rates_ : ndarray of shape (n_components, n_count)
        Each component's Poisson rate of each count column.
    module_ : MixedMixtureModule
        The fitted torch module.
    {params_}
    {device_}
    history_ : list of dict
        One dict per EM step (``epoch``, ``objective``: the mean log-likelihood of the observed
        entries before the step, ``seconds``), then per MPT epoch with ``algorithm="mpt"``.
    n_iter_ : int
        EM steps (``algorithm="em"``) or MPT epochs run.
    converged_ : bool
        Whether the last stage stopped on ``tol``.
    {n_features_in_}
    {n_components_}
    {offset_}
    {feature_names_in_}

    See Also
    --------
    MaskedGaussianMixture : the numeric case.
    MaskedImputer : imputes DataFrames with it when they have categorical columns.

    References
    ----------
    Moreno-Muñoz, Recasens and Hauberg (2023). On masked pre-training and the marginal
    likelihood. NeurIPS.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt import MaskedMixedMixture
    >>> rng = np.random.RandomState(0)
    >>> group = rng.randint(0, 2, 300)
    >>> X = np.column_stack([group * 5 + rng.randn(300), np.where(rng.rand(300) < 0.9, group, 1 - group)])
    >>> X[rng.rand(*X.shape) < 0.1] = np.nan
    >>> mixture = MaskedMixedMixture(2, categorical_features=[1], random_state=0).fit(X)
    >>> [c.tolist() for c in mixture.categories_]
    [[0.0, 1.0]]
    >>> mixture.impute(np.array([[5.2, np.nan], [np.nan, 0.0]])).round(1).tolist()
    [[5.2, 1.0], [0.6, 0.0]]
    """

    _parameter_constraints: dict = {
        **_BaseMaskedEstimator._parameter_constraints,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "categorical_features": [None, "array-like"],
        "count_features": [None, "array-like"],
        "categories": [Options({"auto"}), list],
        "covariance_type": [Options({"full", "tied", "diag", "spherical"})],
        "algorithm": [Options({"em", "mpt"})],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "warm_start": ["boolean"],
    }

    def __init__(
        self, n_components=1, *, categorical_features=None, count_features=None, categories="auto",
        covariance_type="full", algorithm="em", n_init=1,
        mask_rate="uniform", n_masks=1, score_masks=1, score_method="chain", max_epochs=300, batch_size="auto",
        learning_rate=0.001, tol=1e-3, n_iter_no_change=10, monitor=None, monitor_every=1, dtype="float64",
        device="auto", random_state=None, verbose=0, warm_start=False
    ):
        self.n_components = n_components
        self.categorical_features = categorical_features
        self.count_features = count_features
        self.categories = categories
        self.covariance_type = covariance_type
        self.algorithm = algorithm
        self.n_init = n_init
        self.mask_rate = mask_rate
        self.n_masks = n_masks
        self.score_masks = score_masks
        self.score_method = score_method
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.monitor = monitor
        self.monitor_every = monitor_every
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    # ------------------------------------------------------------------ data
    def _check_data(self, X):
        super()._check_data(X)
        if self.params_.n_components > X.shape[0]:
            raise ValueError(f"n_components={self.params_.n_components} must be at most the number of samples, "
                             f"but X has {X.shape[0]} sample(s).")

    # ------------------------------------------------------------------ training
    def _covariance_type(self):
        """``covariance_type``; ``"diag"`` without numeric features (a latent class model), where
        every type has no covariance to fit (and a spherical one would count a variance of nothing)."""
        return self.params_.covariance_type if len(self.numeric_features_) else "diag"

    def _em(self, X_t, observed, weights, seed, max_iter, start=None):
        """EM from the k-means start of ``seed`` (or from the mixture ``start``): ``(module, history, converged)``."""
        if observed is None:
            observed = torch.ones(X_t.shape, dtype=torch.bool, device=X_t.device)
        if weights is None:
            weights = X_t.new_ones(X_t.shape[0])
        return mixed_em(X_t, observed, weights, self._category_values(), self.numeric_features_.tolist(),
                        self.categorical_features_.tolist(), self.params_.n_components, self._covariance_type(),
                        seed=seed, tol=self.params_.tol, max_iter=max_iter,
                        count_features=self.count_features_.tolist(), start=start)

    def _build_module(self, X, generator, units):
        # partial_fit's first call: EM's start on the standardised chunk, every entry taken as observed.
        seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
        observed = torch.ones(X.shape, dtype=torch.bool, device=X.device)
        values = self._category_values(*units)
        center, scale = units
        count = torch.as_tensor(self.count_features_, dtype=torch.long, device=X.device)
        unit = (1 / scale).reshape(-1).expand(X.shape[1])[count]
        return mixed_em(X, observed, X.new_ones(X.shape[0]), values, self.numeric_features_.tolist(),
                        self.categorical_features_.tolist(), self.params_.n_components, self._covariance_type(),
                        seed=seed, tol=self.params_.tol, max_iter=_EM_START_STEPS,
                        count_features=self.count_features_.tolist(), count_units=(-center[count] * unit, unit))[0]

    def fit(self, X, y=None, sample_weight=None):
        """Fit by EM on the observed entries (``algorithm="em"``), or by MPT from EM's start; EM
        starts from the fitted mixture with ``warm_start=True``.

        {fit_parameters}
        """
        previous = self._warm_start_source(X, ("n_components", "covariance_type"))
        self._set_params_()
        X_t, observed, weights = self._validate_training_data(X, reset=True, sample_weight=sample_weight)
        self.n_components_ = self.params_.n_components
        max_iter = self.params_.max_epochs if self.params_.algorithm == "em" else _EM_START_STEPS
        seeds = torch.randint(2**31 - 1, (self.params_.n_init,), generator=check_generator(self.params_.random_state))
        start = None
        if previous is not None:  # the fitted mixture, from its units (x - its offset_) to this fit's
            start = copy.deepcopy(previous[0]).to(device=X_t.device, dtype=X_t.dtype)
            with torch.no_grad():
                start.unstandardize_(X_t.new_tensor(previous[1] - self.offset_), X_t.new_ones(()))
            seeds = seeds[:1]
        best = None
        for seed in seeds.tolist():
            with torch.no_grad():
                module, history, converged = self._em(X_t, observed, weights, seed, max_iter, start)
                values = module.log_marginal(X_t, observed=observed)
                value = float((values * (1 if weights is None else weights)).mean())
            if best is None or value > best[0]:
                best = (value, module, history, converged)
        _, module, history, converged = best
        if self.params_.algorithm == "mpt":
            self._fit(X, sample_weight, random_state=self.params_.random_state, previous=(module, self.offset_.copy()))
            self.history_ = history + self.history_
            return self
        self.module_, self.history_, self.n_iter_, self.converged_ = module, history, len(history), converged
        self._set_fitted_attributes()
        if not converged:
            warnings.warn(f"{type(self).__name__}'s EM stopped after max_epochs={self.params_.max_epochs} steps "
                          f"with more than tol={self.params_.tol} nats per sample left to gain; "
                          f"raise max_epochs.", ConvergenceWarning, stacklevel=2)
        return self

    def _set_fitted_attributes(self):
        module = self.module_
        numeric = self.numeric_features_
        with torch.no_grad():
            self.weights_ = module.log_weights.exp().cpu().numpy()
            self.means_ = module.gaussian.means.detach().cpu().numpy().astype(np.float64) + self.offset_[numeric]
            if len(numeric):
                self.covariances_, _, _ = sklearn_covariances(module.gaussian)
            else:  # a latent class model: covariance_type's layout, empty
                K = self.n_components_
                self.covariances_ = np.empty({"full": (K, 0, 0), "tied": (0, 0)}.get(self.params_.covariance_type,
                                                                                     (K, 0)))
            log_probs = module.category_log_probs().exp().cpu().numpy()
            self.rates_ = module.log_rates.exp().cpu().numpy()
        self.category_probabilities_ = [log_probs[j, :, : len(c)] for j, c in enumerate(self.categories_)]

    def _n_parameters(self):
        """Free parameters: the Gaussian mixture's count over the numeric columns, as
        :class:`~sklearn.mixture.GaussianMixture` counts them, plus ``K (C_j - 1)`` per
        categorical column and ``K`` per count column."""
        check_is_fitted(self)
        K, D = self.n_components_, len(self.numeric_features_)
        covariance = {"full": K * D * (D + 1) // 2, "tied": D * (D + 1) // 2, "diag": K * D, "spherical": K}
        categorical = sum(K * (len(c) - 1) for c in self.categories_)
        return covariance[self.module_.covariance_type] + K * D + K - 1 + categorical + K * len(self.count_features_)

    # ------------------------------------------------------------------ outputs
    def predict_proba(self, X):
        """Responsibilities ``p(k | x_o)`` of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_components)
        """
        return self.transform(X)

    def predict(self, X):
        """The most probable component of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self.predict_proba(X).argmax(1)

    def sample(self, n_samples=1):
        """Draw rows from the fitted mixture (the same draws for an int ``random_state``).

        Parameters
        ----------
        n_samples : int, default=1

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        labels : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        n_samples = check_positive_int(n_samples, "n_samples")
        with torch.no_grad():
            X, labels = self.module_.sample(int(n_samples), generator=check_generator(self.params_.random_state))
        return self._snap(X.cpu().numpy() + self.offset_, counts=True), labels.cpu().numpy()
