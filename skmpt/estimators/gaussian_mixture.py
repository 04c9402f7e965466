r"""Gaussian mixtures trained by masked pre-training.

.. math::

    p(x) = \sum_k \pi_k\, \mathcal N(x \mid \mu_k, \Sigma_k)

scikit-learn's :class:`~sklearn.mixture.GaussianMixture` model, fitted by maximising the masked
pre-training objective instead of by EM. Its masked conditionals are mixtures of the
components' Gaussian conditionals weighted by responsibilities on the observed tokens, so the
cumulative MPT score is its log-marginal likelihood (Moreno-Muñoz, Recasens and Hauberg, 2023)
and MPT with uniform mask sizes aims at EM's optimum.
"""

import copy
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_array, check_is_fitted

from .._utils import check_generator, lbfgs_descent
from .._validation import Interval, Options, check_positive_int
from ..models import GaussianMixtureModule
from ..models.imputation import expected_scatter, hole_patterns, pattern_conditional
from ._base import _BaseMaskedEstimator, _InformationCriteriaMixin
from ._data import as_torch, check_values, to_numpy, weighted_mean
from ._docs import fill_docstring
from ._trainer import fit_threads, intra_op_threads

__all__ = ["MaskedGaussianMixture"]


# ====================================================================== initialisation
# GaussianMixture's ``init_params``: responsibilities from k-means, k-means++ centres, random
# numbers or random samples, then each component's proportion, mean and covariance.
INIT_PARAMS = ("kmeans", "k-means++", "random", "random_from_data", "em")

# Added to the diagonal of each initial covariance, as GaussianMixture's default reg_covar but in
# units of each feature's variance: a cluster of one point (or of identical points) still gets a
# positive definite covariance.
_INIT_REG_COVAR = 1e-6


def _responsibilities(data, n_components, init_params, seed):
    """Initial responsibilities ``(n, K)`` of the (standardised) training data, a NumPy array."""
    n_samples = data.shape[0]
    if n_components == 1:  # every initialisation gives one cluster of every sample
        return np.ones((n_samples, 1))
    if init_params == "kmeans":
        labels = KMeans(n_components, n_init=1, random_state=seed).fit(data).labels_
        return np.eye(n_components)[labels]
    rng = np.random.RandomState(seed)
    if init_params == "random":
        resp = rng.uniform(size=(n_samples, n_components))
        return resp / resp.sum(1, keepdims=True)
    if init_params == "k-means++":
        centres = kmeans_plusplus(data, n_components, random_state=rng)[0]
    else:  # "random_from_data"
        centres = data[rng.choice(n_samples, size=n_components, replace=False)]
    # GaussianMixture gives the chosen samples all the responsibility, and EM's first step
    # spreads it; a gradient start from covariances of reg_covar alone would not move, so
    # every sample goes to its nearest chosen centre.
    distances = ((data[:, None, :] - centres[None]) ** 2).sum(-1)
    return np.eye(n_components)[distances.argmin(1)]


def initial_parameters(X, n_components, covariance_type, init_params, seed):
    """``(weights, means, covariances)`` from the initial responsibilities, as GaussianMixture's
    M-step computes them (``covariances`` in the module's layout of ``covariance_type``)."""
    data = X.cpu().numpy()
    spread = np.where(data.std(0) > 0, data.std(0), 1.0)
    # Clustered on each feature's own scale, so the start, like the model, is equivariant to it.
    resp = X.new_tensor(_responsibilities(data / spread, n_components, init_params, seed))  # (n, K)
    regularisation = _INIT_REG_COVAR * X.new_tensor(spread).square()  # in each feature's units
    counts = resp.sum(0) + 10 * torch.finfo(X.dtype).eps  # guard against empty clusters
    means = (resp.T @ X) / counts.unsqueeze(-1)
    residual = X.unsqueeze(1) - means  # (n, K, D)
    if covariance_type == "full":
        covariances = torch.einsum("nk,nkd,nke->kde", resp, residual, residual) / counts.view(-1, 1, 1)
        covariances = covariances + torch.diag(regularisation)
    elif covariance_type == "tied":  # GaussianMixture's: the pooled within-cluster covariance
        covariances = torch.einsum("nk,nkd,nke->de", resp, residual, residual) / counts.sum()
        covariances = covariances + torch.diag(regularisation)
    else:
        covariances = torch.einsum("nk,nkd->kd", resp, residual.square()) / counts.unsqueeze(-1)
        covariances = covariances + regularisation
        if covariance_type == "spherical":  # GaussianMixture's: the mean of the diagonal
            covariances = covariances.mean(-1)
    return counts / counts.sum(), means, covariances


def variance_floor(X, reg_covar, covariance_type):
    """``reg_covar`` times each feature's variance in ``X`` (one if it has none), the floor added to
    the diagonal of every covariance; their mean for ``"spherical"`` (one variance per component)."""
    variance = X.var(0)
    floor = reg_covar * torch.where(variance > 0, variance, torch.ones_like(variance))
    return floor.mean() if covariance_type == "spherical" else floor


# EM from the k-means start (``init_params="em"``): at most this many steps, stopped when the
# observed entries' mean log-likelihood has less than the estimator's ``tol`` left to gain (the
# start is then at EM's optimum, which MPT with uniform mask sizes aims at too).
_EM_MAX_STEPS = 500


def floored(covariances, floor):
    """The covariances nearest in likelihood that are at least ``floor`` (per feature) in every
    direction: in the units that whiten the floor, each eigenvalue below one raised to one.

    The module's covariances are ``L L^T + diag(floor)``, so this is the M-step of EM restricted to
    the model's own parameters (``covariances`` of shape ``(..., D, D)``; with no floor, as given).
    For a scatter ``S`` it maximises ``-log|Sigma| - tr(Sigma^-1 S)`` over ``Sigma >= diag(floor)``.
    """
    if not bool((floor > 0).all()):
        return covariances
    root = torch.outer(floor.sqrt(), floor.sqrt())
    values, vectors = torch.linalg.eigh(covariances / root)
    return (vectors * values.clamp(min=1.0).unsqueeze(-2)) @ vectors.mT * root


def em_step(X, observed, weights, log_weights, means, covariances, floor, covariance_type="full"):
    """One EM step of a Gaussian mixture on data with holes: ``(value, (log_weights, means,
    covariances))``, ``value`` the weighted mean ``log p(x_o)`` at the parameters given.

    ``observed`` is the boolean mask of observed entries or its :func:`~skmpt.models.imputation.hole_patterns`.
    ``covariances`` are full matrices ``(K, D, D)`` of any ``covariance_type`` (a tied one repeated,
    diagonal and spherical ones on the diagonal), and so are the ones returned. The E-step takes
    every component's conditional mean and covariance of the missing entries given the observed
    ones and the responsibilities ``p(k | x_o)``; the M-step is GaussianMixture's with their
    expected moments (pooled for ``"tied"``, their diagonal or its mean for ``"diag"`` and
    ``"spherical"``), restricted to covariances at least ``floor`` as the module's are
    (:func:`floored`). ``weights`` sum to one. The step raises the observed-data likelihood that
    MPT maximises too, over the same parameters.
    """
    observed = hole_patterns(observed)
    mean, precision, log_density = pattern_conditional(X, observed, means, covariances)
    log_joint = log_weights.unsqueeze(-1) + log_density
    value = float(weights @ torch.logsumexp(log_joint, 0))
    resp = torch.softmax(log_joint, 0) * weights  # (K, n)
    counts = resp.sum(1) + 10 * torch.finfo(X.dtype).eps
    means = torch.einsum("kn,knd->kd", resp, mean) / counts.unsqueeze(-1)
    residual = mean - means.unsqueeze(1)
    scatter = torch.einsum("kn,knd,kne->kde", resp, residual, residual) + expected_scatter(
        resp, observed, covariances, precision)
    if covariance_type == "full":
        covariances = floored(scatter / counts.view(-1, 1, 1), floor)
    elif covariance_type == "tied":
        covariances = floored(scatter.sum(0) / counts.sum(), floor).expand_as(scatter)
    else:
        variances = scatter.diagonal(dim1=-2, dim2=-1) / counts.unsqueeze(-1)  # (K, D)
        if covariance_type == "spherical":
            variances = variances.mean(-1, keepdim=True).expand_as(variances)
        covariances = torch.diag_embed(torch.maximum(variances, floor))
    return value, ((counts / counts.sum()).log(), means, covariances)


#: EM steps whose gains judge what is left to gain (:func:`remaining_gain`), and the rate that
#: gains which do not shrink are taken to shrink at.
_EM_WINDOW, _SLOWEST_RATE = 10, 0.999


def remaining_gain(values):
    """What EM still gains beyond the last of ``values``, successive values of its objective.

    EM converges linearly, its gains shrinking by a rate a step, so the rest is about
    ``g rate / (1 - rate)`` for the last gain ``g`` (Aitken's extrapolation), with the slowest
    rate among the steps given: on a flat ridge EM's gains shrink unevenly, and gains that do not
    shrink count as shrinking at ``_SLOWEST_RATE`` (the rest is then 999 times the last gain).
    Rates that rise are extrapolated too, by the ratio of their last two rises: rises that shrink
    are the fast directions dying out, leaving the slowest one, whose rate is their limit; rises
    that do not shrink, or whose limit reaches one, are EM leaving a saddle's plateau, not
    converging (on ``quakes`` with 20 % of entries missing, a 3-component mixture's gains fell to
    1e-5 at rates 0.81, 0.85, 0.88, 0.92, then EM gained 0.012 nats more). A single small gain is not
    convergence: at a rate of 0.99 it is a hundredth of what is left.
    """
    gains = [b - a for a, b in zip(values[:-1], values[1:], strict=True)]
    if gains[-1] <= 0:
        return 0.0
    pairs = zip(gains[:-1], gains[1:], strict=True)
    rates = [later / earlier if earlier > 0 else _SLOWEST_RATE for earlier, later in pairs]
    limit = rates[-1]
    if len(rates) >= 3 and rates[-1] - rates[-2] > 0 and rates[-2] - rates[-3] > 0:
        ratio = (rates[-1] - rates[-2]) / (rates[-2] - rates[-3])
        limit = 1.0 if ratio >= 1 else rates[-1] + (rates[-1] - rates[-2]) * ratio / (1 - ratio)
    rate = min(max(*rates, limit), _SLOWEST_RATE)
    return gains[-1] * rate / (1 - rate)


def em_converged(values, tol):
    """Whether EM, whose objective took ``values`` step by step, has less than ``tol`` left to gain:
    ten values at least, and the gain of the last ten and the rest extrapolated from them
    (:func:`remaining_gain`) less than ``tol``. A single small gain is not convergence: at a rate of
    0.99 (an EM step on a table with 40 % of entries missing) it is a hundredth of what is left.

    Examples
    --------
    >>> from skmpt.estimators.gaussian_mixture import em_converged
    >>> em_converged([-2.0 - 0.5**k for k in range(1, 11)], tol=1e-3)  # gains halving, the last 0.5**10
    True
    >>> em_converged([-2.0 - 0.5**k for k in range(1, 9)], tol=1e-3)  # eight values
    False
    >>> em_converged([-2.0 - 0.99**k for k in range(200, 210)], tol=1e-3)  # at a rate of 0.99: 0.13 left
    False
    """
    return len(values) >= _EM_WINDOW and remaining_gain(values[-_EM_WINDOW:]) < tol


def observed_log_likelihood(X, observed, weights, log_weights, means, covariances):
    """The weighted mean ``log p(x_o)`` of a Gaussian mixture, differentiable in its parameters.

    ``weights`` sum to one; ``observed`` and ``covariances`` as :func:`em_step` takes them; the value
    is the one :func:`em_step` reports, without the E-step's conditional moments.
    """
    log_density = pattern_conditional(X, observed, means, covariances)[2]
    return weights @ torch.logsumexp(log_weights.unsqueeze(-1) + log_density, 0)


def module_of(params, floor, covariance_type):
    """The :class:`~skmpt.models.GaussianMixtureModule` of EM's ``params`` ``(log_weights, means,
    covariances)`` (full matrices, at least ``floor``, as :func:`em_step` returns them), anchored
    there. The module adds the floor to a free part that must stay positive definite: a thousandth
    of the floor stays in it (EM's covariance of a component on identical points is the floor)."""
    log_weights, means, covariances = params
    free = covariances - (1 - 1e-3) * torch.diag(floor)
    if covariance_type == "tied":
        free = free[0]
    elif covariance_type in ("diag", "spherical"):
        free = free.diagonal(dim1=-2, dim2=-1)
        free = free[:, 0] if covariance_type == "spherical" else free
        floor = floor[0] if covariance_type == "spherical" else floor
    return GaussianMixtureModule(log_weights.exp(), means, free, covariance_type, floor)


def em_parameters(module):
    """``(log_weights, means, covariances)`` of a module, covariances as full matrices ``(K, D, D)``
    (the layout of :func:`em_step`)."""
    covariances = module.covariances()
    if covariances.dim() == 2:  # diagonal and spherical variances
        covariances = torch.diag_embed(covariances)
    return module.log_weights, module.means, covariances


def in_em_units(module, offset, center, scale):
    """``(params, floor)`` of ``module``, fitted in the units of ``x - offset``, in those of
    ``(x - center) / scale`` (float64, on the host; the module itself unchanged): its
    :func:`em_parameters` and its variance floor."""
    module = copy.deepcopy(module).cpu().double()
    with torch.no_grad():
        module.unstandardize_(torch.as_tensor((offset - center) / scale), torch.as_tensor(1 / scale))
        return tuple(p.detach() for p in em_parameters(module)), module.variance_floor


def standardized_rows(X, sample_weight, *, common_scale=False):
    """``(X_t, observed, weights, center, scale)``: ``X`` (NaN where missing) as a float64 tensor
    standardised per feature (by one scale for every feature with ``common_scale``), zero where
    missing, and the weights summing to one: EM's data, on the host."""
    X = check_array(to_numpy(X), dtype=np.float64, ensure_all_finite="allow-nan")
    observed = ~np.isnan(X)
    check_values(torch.as_tensor(np.where(observed, X, 0.0)), "gaussian")  # before their squares overflow
    center, scale = np.nanmean(X, 0), np.nanstd(X, 0)
    scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
    if common_scale:
        scale = np.full_like(scale, np.sqrt(np.mean(scale**2)))
    weights = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    X_t = torch.as_tensor(np.where(observed, (X - center) / scale, 0.0))
    return X_t, torch.as_tensor(observed), torch.as_tensor(weights / weights.sum()), center, scale


#: Pairs of steps and gradient changes that L-BFGS keeps (:func:`quasi_newton`).
_QUASI_NEWTON_HISTORY = 100


def expected_statistics(X, observed, weights, log_weights, means, covariances):
    """``(value, counts, first, second)``: the E-step of :func:`em_step` summed about the current
    ``means``: ``value`` the weighted mean ``log p(x_o)``, and per component the weighted
    responsibilities' sums ``N_k``, ``sum_i w_i r_ik (m_ik - mu_k)`` and ``sum_i w_i r_ik ((m_ik - mu_k)
    (m_ik - mu_k)^T + C_ik)``, with ``m_ik`` and ``C_ik`` the conditional mean and covariance of ``x_i``
    given ``x_o`` under component ``k`` (``observed`` as :func:`em_step` takes it)."""
    observed = hole_patterns(observed)
    mean, precision, log_density = pattern_conditional(X, observed, means, covariances)
    log_joint = log_weights.unsqueeze(-1) + log_density
    value = weights @ torch.logsumexp(log_joint, 0)
    resp = torch.softmax(log_joint, 0) * weights  # (K, n)
    residual = mean - means.unsqueeze(1)
    first = torch.einsum("kn,knd->kd", resp, residual)
    second = torch.einsum("kn,knd,kne->kde", resp, residual, residual) + expected_scatter(
        resp, observed, covariances, precision)
    return value, resp.sum(1), first, second


def expected_log_likelihood(statistics, anchor, log_weights, means, covariances):
    """EM's ``Q``: the expected complete-data log-likelihood at ``(log_weights, means, covariances)``
    (full matrices), up to a constant, from :func:`expected_statistics` taken at parameters whose
    means are ``anchor``. At those parameters its gradient is the observed-data log-likelihood's
    (Fisher's identity): a gradient for the price of an E-step."""
    _, counts, first, second = statistics
    step = means - anchor  # (K, D)
    scatter = (second - first.unsqueeze(-1) * step.unsqueeze(-2) - step.unsqueeze(-1) * first.unsqueeze(-2)
               + counts.view(-1, 1, 1) * step.unsqueeze(-1) * step.unsqueeze(-2))
    factor = torch.linalg.cholesky(covariances)
    log_det = 2 * factor.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    trace = torch.cholesky_solve(scatter, factor).diagonal(dim1=-2, dim2=-1).sum(-1)
    return counts @ log_weights - 0.5 * (counts @ log_det + trace.sum())


def quasi_newton(X, observed, weights, params, floor, covariance_type, tol, evaluations):
    """``(params, evaluations)``: L-BFGS (:func:`~skmpt._utils.lbfgs_descent`) from EM's ``params`` on
    the observed entries' log-likelihood (its gradient from :func:`expected_log_likelihood`), until an
    iteration after its first gains less than ``tol / 10`` (or after ``evaluations`` of it and its
    gradient), in the parameters of :func:`module_of` anchored at ``params``: steps in each component's
    whitened units, where EM's own steps are nearly the gradient's. Where the holes say little about a
    direction EM's steps shrink by a rate near one (EM's rate is one minus the fraction of the
    information that is observed); the quasi-Newton steps learn that curvature (Jamshidian and
    Jennrich 1997). ``params`` as :func:`em_step` returns them."""
    module = module_of(params, floor, covariance_type)

    def evaluate():
        current = em_parameters(module)
        with torch.no_grad():
            statistics = expected_statistics(X, observed, weights, *current)
        loss = -expected_log_likelihood(statistics, current[1].detach(), *current)
        loss.backward()
        return -float(statistics[0])

    count = lbfgs_descent(list(module.parameters()), evaluate, tol, evaluations, _QUASI_NEWTON_HISTORY)
    with torch.no_grad():
        return tuple(p.detach() for p in em_parameters(module)), count


#: EM steps that one evaluation of the likelihood and its gradient by L-BFGS counts for in an EM
#: budget (:func:`em_climb`'s, and the mixed mixture's ``max_iter`` with its saddle probe): an E-step,
#: the line search's and L-BFGS's own work (about 1.5 times an EM step's CPU time on star98 with 40 %
#: of entries missing, rounded up), so that a climb costs at most about what plain EM's would.
EVALUATION_STEPS = 2


#: Evaluations of the likelihood and its gradient that a saddle probe (:func:`saddle_probe`, and the
#: mixed mixture's EM) spends at most, and the fraction of ``tol`` its L-BFGS runs with
#: (:func:`~skmpt._utils.lbfgs_descent` stops at an iteration that gains a tenth of that: a
#: thousandth of ``tol``).
PROBE_EVALUATIONS, PROBE_TOL = 15, 1e-2


def saddle_probe(X, observed, weights, params, floor, covariance_type, tol):
    """``(params, gain, evaluations)``: L-BFGS (:func:`quasi_newton`) from ``params``, where EM's gains
    say less than ``tol`` is left, until an iteration gains less than a thousandth of ``tol`` (or after
    ``PROBE_EVALUATIONS``), and what it gained. Near a saddle EM's gains shrink as they do near a
    maximum, then grow as it leaves (a tied mixture on 300 rows with 40 % of entries missing: 1e-6
    nats a step for 100 steps, then 0.0072 nats), which no extrapolation of them can foresee;
    quasi-Newton steps learn the curvature that EM's crawl along and leave in tens of evaluations. At
    a maximum the probe ends in about five. ``observed`` as :func:`em_step` takes it."""
    before = float(observed_log_likelihood(X, observed, weights, *params))
    try:
        with torch.enable_grad():  # the check of converged_ calls it under no_grad
            probed, evaluations = quasi_newton(X, observed, weights, params, floor, covariance_type,
                                               PROBE_TOL * tol, PROBE_EVALUATIONS)
        gain = float(observed_log_likelihood(X, observed, weights, *probed)) - before
    except torch.linalg.LinAlgError:  # a covariance no longer positive definite
        return params, 0.0, PROBE_EVALUATIONS
    return (probed, gain, evaluations) if gain > 0 else (params, 0.0, evaluations)


def em_climb(X, observed, weights, params, floor, covariance_type, tol, max_steps=_EM_MAX_STEPS):
    """``(params, steps, left)``: EM from ``params`` on the observed entries (:func:`em_step`) until
    what is left to gain (:func:`remaining_gain`) is less than ``tol`` and L-BFGS does not gain ``tol``
    from there (:func:`saddle_probe`), or after ``max_steps`` EM steps (an evaluation of the likelihood
    and its gradient counts for ``EVALUATION_STEPS``); ``left`` is what that verdict leaves to gain
    (the extrapolation's or the probe's gain, the larger), None where the steps ran out. Where ten EM
    steps leave more, L-BFGS (:func:`quasi_newton`) goes on from the last and ten EM steps judge
    again: on nearly collinear columns with holes plain EM needs thousands of steps, its rate near
    one. Every step raises the likelihood; a round of L-BFGS that does not (it failed, or ended lower)
    is undone and plain EM continues."""
    values, steps, accelerate = [], 0, True
    observed = hole_patterns(observed)
    while steps < max_steps:
        value, following = em_step(X, observed, weights, *params, floor, covariance_type)
        values.append(value)
        steps += 1
        if em_converged(values, tol):
            rest = remaining_gain(values[-_EM_WINDOW:])
            following, gain, evaluations = saddle_probe(X, observed, weights, following, floor, covariance_type, tol)
            steps += EVALUATION_STEPS * evaluations
            if gain < tol:
                return following, steps, max(rest, gain)
            values = []
        params = following
        if len(values) >= _EM_WINDOW and accelerate:
            try:
                climbed, evaluations = quasi_newton(X, observed, weights, params, floor, covariance_type, tol,
                                                    (max_steps - steps) // EVALUATION_STEPS)
                steps += EVALUATION_STEPS * evaluations
                better = float(observed_log_likelihood(X, observed, weights, *climbed)) > values[-1]
            except torch.linalg.LinAlgError:  # a covariance no longer positive definite
                better = False
            if better:
                params, values = climbed, []
            else:
                accelerate = False
    return params, steps, None


def em_start(X, observed, weights, n_components, seed, tol, floor, covariance_type="full"):
    """``(weights, means, covariances, left)`` of a mixture after EM (:func:`em_climb`, with the
    variance ``floor``) from the k-means start on ``X`` (a tensor, any finite value at the entries not
    ``observed``), until what is left to gain is less than ``tol`` or after ``_EM_MAX_STEPS``;
    covariances as full matrices ``(K, D, D)`` whatever ``covariance_type``, and ``left`` what
    :func:`em_climb`'s verdict leaves to gain (None where the steps ran out)."""
    filled = torch.where(observed, X, torch.zeros_like(X))
    start = initial_parameters(filled, n_components, covariance_type, "kmeans", seed)
    params = em_parameters(GaussianMixtureModule(*start, covariance_type))
    weights = weights.to(X.dtype) / weights.sum()
    with torch.no_grad():
        params = tuple(p.detach() for p in params)
    (log_weights, means, covariances), _, left = em_climb(X, observed, weights, params, floor, covariance_type, tol)
    return log_weights.exp(), means, covariances, left


def sklearn_covariances(module):
    """``(covariances_, precisions_cholesky_, precisions_)`` of a fitted module in
    GaussianMixture's layout: a tied covariance once, a spherical one as one number per
    component; precision factors upper triangular ``L^{-T}`` (full, tied) or
    ``1 / sqrt(variance)`` (diag, spherical), and the precisions they factor."""
    covariances = module.covariances()
    if module.covariance_type in ("full", "tied"):
        factor = module.cholesky()
        eye = torch.eye(factor.shape[-1], dtype=factor.dtype, device=factor.device)
        precisions_cholesky = torch.linalg.solve_triangular(factor, eye, upper=False).mT
    else:
        precisions_cholesky = covariances.rsqrt()
    layout = {"tied": lambda a: a[0], "spherical": lambda a: a[:, 0]}.get(module.covariance_type, lambda a: a)
    precisions_cholesky = layout(precisions_cholesky)
    if module.covariance_type in ("full", "tied"):
        precisions = precisions_cholesky @ precisions_cholesky.mT
    else:
        precisions = precisions_cholesky.square()
    return layout(covariances).cpu().numpy(), precisions_cholesky.cpu().numpy(), precisions.cpu().numpy()


# ====================================================================== the estimator


@fill_docstring
class MaskedGaussianMixture(_InformationCriteriaMixin, _BaseMaskedEstimator):
    """Gaussian mixture fitted by masked pre-training (MPT).

    The model is scikit-learn's :class:`~sklearn.mixture.GaussianMixture`,
    ``p(x) = sum_k pi_k N(x | mu_k, Sigma_k)``. A masked token is predicted by
    ``p(x_j | x_r) = sum_k pi_k(x_r) p_k(x_j | x_r)``: each component's Gaussian conditional,
    weighted by the responsibilities ``pi_k(x_r) ∝ pi_k p_k(x_r)`` of the observed tokens.
    These conditionals come from one joint density, so with mask sizes uniform on ``1..D`` the
    MPT objective is an unbiased stochastic estimate of the log-marginal likelihood and ``fit``
    aims at the maximum-likelihood mixture (EM's target). Training starts from a k-means
    clustering (on each feature's own scale) and moves unconstrained parameters with Adam:
    weight logits, and each component's mean and Cholesky factor as steps from the start in
    that component's own whitened units (``mu = mu0 + L0 m``, ``L = L0 T``). A step of Adam,
    about ``learning_rate`` in every parameter, is then the same fraction of every component's
    spread, however narrow it is and whatever the features' scales: in the data's units a step
    of 0.01 on a component of width 1e-3 (one sitting on identical points, or on one value of a
    discrete feature) moved its mean ten widths, and training went downhill from its start.

    ``score_samples`` is the cumulative MPT estimate ``sum_M S(x; M)`` of ``log p(x)``, exact
    with the default chain estimator; ``log_marginal_likelihood`` is the closed form (the value
    of ``GaussianMixture.score_samples`` for the same parameters). ``transform`` and
    ``predict_proba`` give the responsibilities ``p(k | x)``. :meth:`from_estimator` turns a
    fitted ``GaussianMixture`` into this estimator.

    Parameters
    ----------
    n_components : int, default=1
        Number of mixture components ``K``, at most the number of training samples.
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
        Each component's covariance, as in :class:`~sklearn.mixture.GaussianMixture`: its
        own full matrix, one full matrix shared by every component, its own diagonal, or its
        own single variance. Tied and spherical covariances are one shared Cholesky factor and
        one variance per component, expanded to the full and diagonal conditionals.
    n_init : int, default=1
        Starts to train from; the fit of highest exact log-likelihood on the training data
        is kept, as GaussianMixture keeps its best run. The first start uses
        ``random_state`` as a single start does, the others seeds drawn from it.
    init_params : {"kmeans", "k-means++", "random", "random_from_data", "em"}, default="kmeans"
        GaussianMixture's initialisation of the responsibilities, from which the first
        proportions, means and covariances come: k-means labels, uniform random numbers, or
        ``n_components`` centres chosen by k-means++ or at random among the samples, to which
        each sample is then assigned by distance (EM's first step spreads GaussianMixture's
        one-sample responsibilities; a gradient start from covariances of ``1e-6`` could not).
        ``"em"``: from the k-means start, EM on the observed entries (missing entries
        marginalised in closed form, the M-step of ``covariance_type``) until what is left to
        gain, extrapolated from the last ten values (EM converges linearly), is less than ``tol``
        nats per sample; where ten EM steps leave more, L-BFGS on the same likelihood
        goes on from there (at most 500 EM steps, an L-BFGS evaluation counting for two). EM climbs
        the same observed-data likelihood in far fewer steps than gradients do on correlated
        features (on scikit-learn's breast cancer table, 30 features with 20 % of entries missing,
        MPT from k-means took 124 epochs), and L-BFGS where EM crawls (on that table with 40 % of
        its largest values hidden, plain EM was 0.018 nats short after 500 steps; EM and L-BFGS
        reach the optimum in half its CPU time). MPT with uniform mask sizes aims at that same
        optimum, so a start that the check of ``converged_`` finds within ``tol`` of it is not
        trained further (``n_iter_`` is 0 and ``history_`` empty); one short of it (EM out of its
        steps) is climbed on, then trained by MPT only if still short. With ``warm_start=True``,
        EM starts from the fitted mixture's parameters instead (no k-means): a mixture fitted on a
        subsample and refitted to every row needs fewer steps (statsmodels' ``fair``, 6,366 rows,
        20 % missing, 3 components fitted on 2,000 of them: 104 against 144 from k-means).
    warm_start : bool, default=False
        ``fit`` on a fitted mixture continues from its parameters (one start: ``n_init`` is
        not used), as GaussianMixture's ``warm_start``; by EM first with ``init_params="em"``.
    reg_covar : float, default=1e-6
        Added to the diagonal of every covariance, as GaussianMixture's ``reg_covar``, but in units
        of each feature's variance (so that the fit does not depend on a feature's scale): the
        likelihood stays bounded when a component sits on identical points, and training then
        converges. ``covariances_`` include it; a mixture made by :meth:`from_estimator` has none
        (the source's covariances already hold its own).
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

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
        Mixing proportions ``pi_k``.
    means_ : ndarray of shape (n_components, n_features)
        Component means ``mu_k``.
    covariances_ : ndarray
        Component covariances in :class:`~sklearn.mixture.GaussianMixture`'s layout, of shape
        (n_components, n_features, n_features) for ``"full"``, (n_features, n_features) for
        ``"tied"``, (n_components, n_features) for ``"diag"`` and (n_components,) for
        ``"spherical"``.
    precisions_cholesky_ : ndarray
        Cholesky factors of the precisions in :class:`~sklearn.mixture.GaussianMixture`'s
        layout: upper triangular ``L^{-T}`` of the shape of ``covariances_`` for ``"full"``
        and ``"tied"``, ``1 / sqrt(covariances_)`` for ``"diag"`` and ``"spherical"``.
    precisions_ : ndarray
        Inverses of ``covariances_``, of the same shape.
    module_ : GaussianMixtureModule
        The fitted torch module, with the masked conditionals.
    {params_}
    {device_}
    history_ : list of dict
        One dict per epoch (``epoch``, ``objective``, ``stopping_objective``,
        ``learning_rate``, ``lml`` with ``monitor="lml"``, ``seconds``), as in
        :class:`MaskedPPCA`; empty after :meth:`from_estimator`.
    n_iter_ : int
        Number of epochs run.
    {n_features_in_}
    {n_components_}
    {offset_}
    {feature_names_in_}

    See Also
    --------
    sklearn.mixture.GaussianMixture : the same model fitted by EM.

    Notes
    -----
    The default ``learning_rate`` is smaller than :class:`MaskedPPCA`'s: training starts from
    k-means, near an optimum, and well-separated clusters are narrow on the standardised scale
    (at 0.03 the first steps undo much of the initialisation: on three clusters in D=4, 108
    epochs against 66 to converge, 0.010 nats short of EM against 0.004). ``random_state`` also
    seeds :meth:`sample`.

    With uniform mask sizes (the default ``mask_rate``) whether a run ended below its start is
    judged on the exact log-likelihood of the training data (the MPT objective on fixed masks
    is a noisy estimate of it), and a fit of any ``covariance_type`` is ``converged_`` exactly when
    EM from its parameters (ten steps and the rest extrapolated; its M-step keeps every covariance at
    least the ``reg_covar`` floor, as the model does) gains less than ``tol`` nats per sample,
    whatever the stopping rule said. Where EM gains more after the stopping rule stopped training
    (not ``max_epochs``), the fit continues from its parameters by EM and L-BFGS (as
    ``init_params="em"`` does) and keeps the better parameters: on nearly collinear columns with
    holes (directions of variance near the floor, about which the holes say little) MPT and EM
    approach the optimum very slowly, and diagonal, tied and spherical MPT fits stopped 0.02 to
    0.26 nats short of it. A fit still short of it says so in a ``ConvergenceWarning``.
    ``history_`` and ``n_iter_`` count MPT's epochs only (none from an EM start at the optimum).

    References
    ----------
    Moreno-Muñoz, Recasens and Hauberg (2023). On masked pre-training and the marginal
    likelihood. NeurIPS.

    Jamshidian and Jennrich (1997). Acceleration of the EM algorithm by using quasi-Newton
    methods. Journal of the Royal Statistical Society B 59(3).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.mixture import GaussianMixture
    >>> from skmpt import MaskedGaussianMixture
    >>> rng = np.random.RandomState(0)
    >>> X = np.vstack([rng.randn(100, 2), rng.randn(100, 2) + 6])
    >>> gmm = MaskedGaussianMixture(n_components=2, random_state=0).fit(X)
    >>> gmm.means_.shape, gmm.covariances_.shape
    ((2, 2), (2, 2, 2))
    >>> em = GaussianMixture(n_components=2, random_state=0).fit(X)
    >>> bool(abs(gmm.score(X) - em.score(X)) < 0.05)
    True
    >>> bool(np.allclose(MaskedGaussianMixture.from_estimator(em).score_samples(X), em.score_samples(X)))
    True
    """

    _parameter_constraints: dict = {
        **_BaseMaskedEstimator._parameter_constraints,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "covariance_type": [Options({"full", "tied", "diag", "spherical"})],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init_params": [Options(set(INIT_PARAMS))],
        "warm_start": ["boolean"],
        "reg_covar": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(
        self, n_components=1, *, covariance_type="full", n_init=1, init_params="kmeans", warm_start=False,
        reg_covar=1e-6, mask_rate="uniform", n_masks=1, score_masks=1,
        score_method="chain", max_epochs=300, batch_size="auto", learning_rate=0.01, tol=1e-3, n_iter_no_change=10,
        monitor=None, monitor_every=1, dtype="float64", device="auto", random_state=None, verbose=0
    ):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.n_init = n_init
        self.init_params = init_params
        self.warm_start = warm_start
        self.reg_covar = reg_covar
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

    @classmethod
    def from_estimator(cls, estimator, **params):
        """A fitted ``MaskedGaussianMixture`` with the parameters of a fitted ``GaussianMixture``.

        Its ``log_marginal_likelihood`` equals the source's ``score_samples``, and its MPT
        curve and cumulative score are one call away. It has no training history.

        Parameters
        ----------
        estimator : sklearn.mixture.GaussianMixture
            Fitted, with any ``covariance_type`` (taken over).
        **params
            Parameters of this estimator other than ``n_components`` and
            ``covariance_type`` (taken from ``estimator``), e.g. ``random_state``.

        Returns
        -------
        fitted : MaskedGaussianMixture

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.mixture import GaussianMixture
        >>> from skmpt import MaskedGaussianMixture
        >>> X = np.random.RandomState(0).randn(100, 3)
        >>> em = GaussianMixture(n_components=2, covariance_type="diag", random_state=0).fit(X)
        >>> gmm = MaskedGaussianMixture.from_estimator(em, device="cpu")
        >>> gmm.covariance_type, gmm.predict(X[:4]).shape
        ('diag', (4,))
        """
        from sklearn.mixture import GaussianMixture

        covariance_type = getattr(estimator, "covariance_type", None)
        if "covariance_type" in params:
            raise ValueError("covariance_type is taken from the GaussianMixture; do not pass it.")

        def build(dtype, device, offset):
            weights, means, covariances = (
                torch.as_tensor(a, dtype=dtype, device=device)
                for a in (estimator.weights_, estimator.means_ - offset, estimator.covariances_)
            )
            return len(weights), GaussianMixtureModule(weights, means, covariances, covariance_type)

        params = {**params, "covariance_type": covariance_type}
        return cls._from_fitted(estimator, GaussianMixture, params, build, lambda gmm: gmm.weights_ @ gmm.means_)

    def _check_data(self, X):
        super()._check_data(X)
        if self.params_.n_components > X.shape[0]:
            raise ValueError(
                f"n_components={self.params_.n_components} must be at most the number of samples, but X has "
                f"{X.shape[0]} sample(s)."
            )

    def _build_module(self, X, generator, units):
        # GaussianMixture's initialisation: responsibilities, then each component's
        # proportion, mean and covariance.
        params = self.params_
        seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
        weights, means, covariances = initial_parameters(
            X, params.n_components, params.covariance_type, params.init_params, seed
        )
        floor = variance_floor(X, params.reg_covar, params.covariance_type)
        return GaussianMixtureModule(weights, means, covariances, params.covariance_type, floor)

    def fit(self, X, y=None, sample_weight=None):
        """Fit by MPT from ``n_init`` starts, keeping the best (or from the previous fit with
        ``warm_start=True``); otherwise as :meth:`skmpt.MaskedPPCA.fit`.

        A warm start continues the fitted mixture, so it must still match the parameters and the
        data: a ``covariance_type`` or ``n_components`` set since, or data of another number of
        features, is a ``ValueError`` (refit with ``warm_start=False``).

        {fit_parameters}
        """
        previous = self._warm_start_source(X, ("covariance_type", "n_components"), "mixture")
        if previous is not None:
            start, left = self._em_source(X, sample_weight, self.random_state, previous)
            self._fit(X, sample_weight, random_state=self.random_state, previous=start or previous,
                      at_optimum=start is not None, gap=left)
        elif self.n_init == 1:
            start, left = self._em_source(X, sample_weight, self.random_state)
            self._fit(X, sample_weight, random_state=self.random_state, previous=start, at_optimum=start is not None,
                      gap=left)
        else:
            self._fit_best_of_inits(X, sample_weight)
        self._fitted_like(X)
        return self

    def _standardized(self, X, sample_weight):
        """:func:`standardized_rows` of ``X``, by one scale for a spherical mixture (the only
        rescaling under which it stays one)."""
        return standardized_rows(X, sample_weight, common_scale=self.covariance_type == "spherical")

    def _em_source(self, X, sample_weight, random_state, previous=None):
        """``(start, left)``: with ``init_params="em"``, the ``(module, offset)`` EM reaches (on the data
        standardised per feature, mapped back) from the k-means start, or from the ``previous`` fit
        ``(module, offset)`` of a warm start, for :meth:`_fit` to continue, and what EM's verdict leaves
        to gain (:func:`em_climb`), for the check of ``converged_`` to take rather than measure again
        where it judges the likelihood (None where it does not, or the steps ran out); else
        ``(None, None)``."""
        if self.init_params != "em":
            return None, None
        X_t, observed, weights, center, scale = self._standardized(X, sample_weight)
        if not bool(observed.any(0).all()) or len(X_t) < self.n_components:
            return None, None  # refused by fit's own checks, with their messages
        floor = variance_floor(X_t, self.reg_covar, self.covariance_type).expand(X_t.shape[1])
        # EM until less than tol is left to gain; the check of converged_ then judges the start. Chosen on
        # benchmarks/imputation_real.py's tuning tables (seed 0): to a tenth of tol, L-BFGS to a thousandth,
        # the default imputer took 1.3 to 4.1 times the CPU on fair, breast_cancer and wine, for RMSE within
        # 0.5 % of this rule's (one cell 3.4 % higher).
        with self._em_threads(X_t):
            params, left = self._em_params(X_t, observed, weights, floor, random_state, previous, center, scale)
        module = module_of(params, floor, self.covariance_type)
        with torch.no_grad():
            module.unstandardize_(torch.zeros(len(scale), dtype=torch.float64), torch.as_tensor(scale))
        return (module, center), left if self.mask_rate == "uniform" else None

    def _em_threads(self, X):
        """torch's threads for EM on ``X`` (a step handles ``n K D^2`` numbers), as a fit's steps have."""
        return intra_op_threads(fit_threads(X.shape[0] * self.n_components * X.shape[1] ** 2))

    def _em_params(self, X_t, observed, weights, floor, random_state, previous, center, scale):
        """``(params, left)``: EM's parameters (:func:`em_parameters`' layout) on the standardised ``X_t``,
        from the k-means start or from the ``previous`` fit ``(module, offset)``, and what its verdict
        leaves to gain (:func:`em_climb`)."""
        if previous is None:
            seed = int(torch.randint(2**31 - 1, (1,), generator=check_generator(random_state)))
            *params, left = em_start(X_t, observed, weights, self.n_components, seed, self.tol, floor,
                                     self.covariance_type)
            return (params[0].log(), *params[1:]), left
        start = in_em_units(*previous, center, scale)[0]
        params, _, left = em_climb(X_t, observed, weights, start, floor, self.covariance_type, self.tol)
        return params, left

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A torch tensor is fitted and scored on its device; under array_api_dispatch the fitted
        # attributes and outputs are tensors there.
        tags.array_api_support = True
        return tags

    def _exact_target(self):
        """With uniform mask sizes MPT aims at the exact log-marginal likelihood: it judges the run."""
        return self.params_.mask_rate == "uniform"

    def _optimality_gap(self, X, sample_weight):
        """What EM from the fitted mixture gains in mean ``log p(x_o)`` on ``X`` (on the data
        standardised as :meth:`_standardized` does), or None where EM's target is not MPT's (a fixed
        ``mask_rate``): ten steps (:func:`em_step`, with the M-step of the fit's ``covariance_type``)
        and the rest extrapolated (:func:`remaining_gain`), or probed by L-BFGS where that says less
        than ``tol`` (:func:`saddle_probe`)."""
        if self.params_.mask_rate != "uniform":
            return None
        X_t, observed, weights, floor, fitted = self._em_view(X, sample_weight)[:5]
        with self._em_threads(X_t):
            return self._em_gap(X_t, observed, weights, fitted, floor)

    def _start_advice(self):
        """A fit out of ``max_epochs`` is not climbed by EM (MPT's budget is the user's): EM's optimum as
        the start (``init_params="em"``) is the advice, where the fit did not start there."""
        if self.params_.init_params == "em" or self.params_.mask_rate != "uniform":
            return ""
        return ", or start from EM's optimum with init_params='em'"

    def _climb_to_optimum(self, X, sample_weight):
        """EM (:func:`em_climb`) from the fitted parameters on ``X``; the better of the two kept (in
        ``module_``, in place) and its :meth:`_optimality_gap` returned: MPT's gradient steps, like EM's,
        crawl along directions the holes say little about, and diagonal, tied and spherical fits
        stopped 0.02 to 0.26 nats short of the optimum. EM stops where what is left is less than ``tol``,
        what the check asks: on to a tenth of it, along a ridge where neither EM nor L-BFGS gains fast, a
        default refit on ``breast_cancer`` with 40 % of entries self-masked took 414 plain EM steps (5 s,
        20 times IterativeImputer's fit) for 0.0008 nats, and imputed the same."""
        X_t, observed, weights, floor, fitted, center, scale = self._em_view(X, sample_weight)
        with self._em_threads(X_t):
            params = em_climb(X_t, observed, weights, fitted, floor, self.params_.covariance_type,
                              self.params_.tol)[0]
            with torch.no_grad():
                if observed_log_likelihood(X_t, observed, weights, *params) <= observed_log_likelihood(
                        X_t, observed, weights, *fitted):
                    return self._em_gap(X_t, observed, weights, fitted, floor)
                gap = self._em_gap(X_t, observed, weights, params, floor)
        polished = module_of(params, floor, self.params_.covariance_type)
        with torch.no_grad():
            polished.unstandardize_(torch.as_tensor(center - self.offset_), torch.as_tensor(scale))
        self.module_.load_state_dict(polished.state_dict())  # in place: whoever holds module_ sees it
        self._set_fitted_attributes()
        return gap

    def _em_view(self, X, sample_weight):
        """``(X, observed, weights, floor, parameters, center, scale)``: the standardised rows of
        :meth:`_standardized`, the module's variance floor and the fitted parameters in those units."""
        X_t, observed, weights, center, scale = self._standardized(X, sample_weight)
        fitted, floor = in_em_units(self.module_, self.offset_, center, scale)
        return X_t, observed, weights, floor, fitted, center, scale

    def _em_gap(self, X, observed, weights, params, floor):
        """EM's gain from ``params`` in ten steps and the rest: extrapolated (:func:`remaining_gain`)
        or, where that is less than ``tol``, what L-BFGS gains from there (:func:`saddle_probe`) if more."""
        values, observed = [], hole_patterns(observed)
        covariance_type, tol = self.params_.covariance_type, self.params_.tol
        with torch.no_grad():
            for _ in range(_EM_WINDOW):
                value, params = em_step(X, observed, weights, *params, floor, covariance_type)
                values.append(value)
        rest = remaining_gain(values)
        if rest < tol:
            rest = max(rest, saddle_probe(X, observed, weights, params, floor, covariance_type, tol)[1])
        return values[-1] - values[0] + rest

    def _fit_best_of_inits(self, X, sample_weight):
        """Fit from ``n_init`` starts and keep the parameters of highest (weighted) mean exact
        log-likelihood on ``X``, as GaussianMixture keeps the best of its runs
        (``_get_parameters`` / ``_set_parameters``). The first start uses ``random_state``, the
        others seeds drawn from it. The run kept is the one whose convergence is warned about,
        once: a kept run that ended below its start or ran out of epochs says so."""
        seeds = torch.randint(2**31 - 1, (self.n_init - 1,), generator=check_generator(self.random_state))
        best = None
        for random_state in [self.random_state, *seeds.tolist()]:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                start, left = self._em_source(X, sample_weight, random_state)
                self._fit(X, sample_weight, random_state=random_state, previous=start, at_optimum=start is not None,
                          gap=left)
            convergence = [w.message for w in caught if issubclass(w.category, ConvergenceWarning)]
            for other in caught:  # any other warning as it came
                if not issubclass(other.category, ConvergenceWarning):
                    warnings.warn_explicit(other.message, other.category, other.filename, other.lineno)
            value = weighted_mean(self.log_marginal_likelihood(X), sample_weight)
            if best is None or value > best[0]:
                best = (value, self._get_parameters(), self.history_, self.n_iter_, self.converged_, convergence)
        _, params, self.history_, self.n_iter_, self.converged_, convergence = best
        self._set_parameters(params)
        for message in convergence[:1]:
            warnings.warn(message, stacklevel=3)

    def _get_parameters(self):
        """The learned parameters (a copy of ``module_``'s state), for :meth:`_set_parameters`:
        ``n_init`` keeps the best of its starts with them, as scikit-learn's ``BaseMixture``."""
        return copy.deepcopy(self.module_.state_dict())

    def _set_parameters(self, params):
        """Load parameters from :meth:`_get_parameters` into ``module_`` and the fitted attributes."""
        self.module_.load_state_dict(params)
        self._set_fitted_attributes()

    def _set_fitted_attributes(self):
        module = self.module_
        with torch.no_grad():
            self.weights_ = module.log_weights.exp().cpu().numpy()
            self.means_ = module.means.detach().cpu().numpy().astype(np.float64) + self.offset_
            self.covariances_, self.precisions_cholesky_, self.precisions_ = sklearn_covariances(module)

    def _n_parameters(self):
        """Free parameters, as :class:`~sklearn.mixture.GaussianMixture` counts them: ``K - 1``
        weights, ``K D`` means and ``K D (D + 1) / 2`` (full), ``D (D + 1) / 2`` (tied),
        ``K D`` (diag) or ``K`` (spherical) covariance entries."""
        check_is_fitted(self)
        K, D = self.n_components_, self.n_features_in_
        covariance = {"full": K * D * (D + 1) // 2, "tied": D * (D + 1) // 2, "diag": K * D, "spherical": K}
        return covariance[self.module_.covariance_type] + K * D + K - 1

    def predict_proba(self, X):
        """Responsibilities: the posterior probability of each component given each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_components)
        """
        self._check_namespace(X, "predict_proba")
        return self.transform(X)

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit, then return the most probable component of each training sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self.fit(X, sample_weight=sample_weight).predict(X)

    def predict(self, X):
        """The most probable component of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        self._check_namespace(X, "predict")
        proba = self.predict_proba(X)  # NumPy, a dask array, or (under array_api_dispatch) X's namespace
        return self._output(as_torch(proba).argmax(1), X) if self._tensor_output(X) else proba.argmax(1)

    def sample(self, n_samples=1):
        """Draw samples from the fitted mixture.

        With an int ``random_state`` every call returns the same draws, as
        :meth:`sklearn.mixture.GaussianMixture.sample` does.

        Parameters
        ----------
        n_samples : int, default=1

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        labels : ndarray of shape (n_samples,)
            The component each sample was drawn from.
        """
        check_is_fitted(self)
        n_samples = check_positive_int(n_samples, "n_samples")
        with torch.no_grad():
            X, labels = self.module_.sample(int(n_samples), generator=check_generator(self.params_.random_state))
        # In the fitted attributes' namespace, on their device (NumPy unless fitted under array_api_dispatch).
        samples = torch.from_numpy(X.cpu().numpy() + to_numpy(self.offset_))
        return self._output(samples, self.offset_), self._output(labels, self.offset_)
