"""What PPCA and factor analysis share as estimators: the loadings, mean and noise they fit, the
covariance and precision scikit-learn's decompositions report, their initialisation (PCA's
solution from the data's moments), their solver (``solver``: the moments of
``skmpt.estimators._moments`` or mini-batches), and the variances along principal axes (PCA's choice
of ``n_components`` from the data, by Minka's MLE or a fraction of the variance, and the fitted
model's ``explained_variance_``)."""

import math
from functools import partial
from numbers import Integral

import numpy as np
import torch
from sklearn.utils.validation import check_array, check_is_fitted

from .._utils import inverse_from_cholesky, lbfgs_descent
from .._validation import Options
from ._base import _BaseMaskedEstimator, _InformationCriteriaMixin, linear_gaussian_parameter_count
from ._dask import is_dask_collection
from ._data import to_numpy
from ._moments import choose_solver
from .gaussian_mixture import remaining_gain, standardized_rows

__all__ = [
    "choose_from_spectrum",
    "choose_n_components",
    "explained_variance",
    "minka_dimension",
    "pca_start",
]


# ====================================================================== spectra
def _minka_log_evidence(spectrum, rank, n_samples):
    """Minka's (2000) Laplace approximation of the log-evidence of a PPCA of ``rank``
    components, from the sample covariance's eigenvalues ``spectrum`` (descending)."""
    n_features = len(spectrum)
    if spectrum[rank - 1] < np.finfo(spectrum.dtype).eps:
        return -np.inf  # the data span fewer than rank directions
    log_uniform = -rank * math.log(2.0) + sum(
        math.lgamma((n_features - i + 1) / 2.0) - math.log(math.pi) * (n_features - i + 1) / 2.0
        for i in range(1, rank + 1)
    )
    log_eigenvalues = -np.log(spectrum[:rank]).sum() * n_samples / 2.0
    noise = max(np.finfo(spectrum.dtype).eps, spectrum[rank:].sum() / (n_features - rank))
    log_noise = -math.log(noise) * n_samples * (n_features - rank) / 2.0
    n_free = n_features * rank - rank * (rank + 1.0) / 2.0
    log_volume = math.log(2.0 * math.pi) * (n_free + rank) / 2.0
    completed = spectrum.copy()
    completed[rank:] = noise
    log_hessian = sum(
        math.log((spectrum[i] - spectrum[j]) * (1.0 / completed[j] - 1.0 / completed[i])) + math.log(n_samples)
        for i in range(rank)
        for j in range(i + 1, n_features)
    )
    return log_uniform + log_eigenvalues + log_noise + log_volume - log_hessian / 2.0 - rank * math.log(n_samples) / 2.0


def minka_dimension(spectrum, n_samples):
    """The rank in ``1..D-1`` of largest Minka evidence, as ``PCA(n_components="mle")``."""
    evidence = [_minka_log_evidence(spectrum, rank, n_samples) for rank in range(1, len(spectrum))]
    return int(np.argmax(evidence)) + 1


def choose_n_components(X, n_components, sample_weight=None, n_samples=None):
    """``n_components`` resolved on centred data ``X`` (a NumPy array) as :class:`~sklearn.decomposition.PCA`
    resolves it: an int as given; ``"mle"`` by Minka's MLE; a float in (0, 1) as the fewest
    components whose share of the variance exceeds it.

    With ``sample_weight`` (positive, of any common scale), the spectrum is that of the weighted
    covariance, about the weighted mean. Minka's MLE counts ``n_samples`` samples: by default
    the rows of ``X``, or the sum of ``sample_weight``; integer weights then choose as repeated
    rows do.
    """
    if not isinstance(n_components, (str, float)):
        return int(n_components)
    if n_samples is None:
        n_samples = len(X) if sample_weight is None else float(np.sum(sample_weight))
    if sample_weight is not None:
        X = (X - np.average(X, axis=0, weights=sample_weight)) * np.sqrt(sample_weight)[:, None]
    spectrum = np.linalg.svd(X, compute_uv=False) ** 2
    spectrum = np.concatenate([spectrum, np.zeros(X.shape[1] - len(spectrum))])
    return choose_from_spectrum(spectrum, n_components, n_samples)


def choose_from_spectrum(spectrum, n_components, n_samples):
    """:func:`choose_n_components` for ``"mle"`` or a float, from the covariance's eigenvalues ``spectrum``
    (descending, of any common scale) of ``n_samples`` samples (a count, or the sum of their
    weights): what the data's moments give without the data. An int needs no spectrum; its
    callers return it before computing one."""
    n_features = len(spectrum)
    if n_components == "mle":
        if not n_samples >= n_features or not math.isfinite(n_samples):
            raise ValueError(
                f"n_components='mle' needs at least as many samples as features, as PCA's, and counts "
                f"sum(sample_weight) samples when weights are given; X has {n_samples:.6g} samples (or weights "
                f"summing to it) and {n_features} features."
            )
        return minka_dimension(spectrum, n_samples)
    ratio = np.cumsum(spectrum / spectrum.sum())
    return min(int(np.searchsorted(ratio, n_components, side="right")) + 1, n_features)


def explained_variance(components, noise_variance, isotropic):
    """``(explained_variance_, explained_variance_ratio_)`` of a fitted ``x = W z + mu + eps``.

    ``components`` is ``W^T`` of shape (K, D). Isotropic noise (PPCA): the model covariance's
    ``W W^T + sigma^2 I`` variances along its ``K`` principal axes, ``eig(W^T W) + sigma^2``,
    as :class:`~sklearn.decomposition.PCA`'s (whose maximum-likelihood PPCA has exactly
    these). Per-feature noise (factor analysis): the variance the common factors explain,
    the eigenvalues of ``W W^T``. Ratios are of the model's total variance ``trace(W W^T) +
    trace(Psi)``; both descending.
    """
    shared = np.linalg.eigvalsh(components @ components.T)[::-1]
    noise = np.broadcast_to(noise_variance, (components.shape[1],))
    total = float((components**2).sum() + noise.sum())
    variance = shared + noise_variance if isotropic else shared
    return variance, variance / total


#: EM steps of factor analysis that refine PCA's start on complete data (each O(D^3), on moments).
_FA_START_STEPS = 100
# Factor analysis' EM steps from a fit whose gains judge how far below its optimum it is.
_FA_CHECK_STEPS = 10
# At most this many EM steps with holes in ``_climb_to_optimum`` (each O(n D K^2)).
_CLIMB_STEPS = 500
# At most this many evaluations of the likelihood with holes and its gradient in ``_climb_to_optimum``'s
# quasi-Newton steps, where EM's stopped short. Set by CPU time: the closed-form gradient costs a third
# to a half of the autograd one it replaced (which had 200), so 400 cost no more.
_QUASI_NEWTON_EVALUATIONS = 400
# Pairs of steps and gradient changes that those quasi-Newton steps keep.
_QUASI_NEWTON_HISTORY = 20


def _factor_analysis_em(covariance, components, noise, floor, n_steps=_FA_START_STEPS):
    """``n_steps`` of factor analysis' EM (Rubin and Thayer, 1982) on the data's ``covariance`` from
    loadings ``components`` (K, D) and noise ``noise`` (D,), the noise kept above ``floor``: PCA's
    loadings with the noise they leave are a start far from factor analysis' optimum when the noise
    differs between features, and these steps, exact on moments, bring it near."""
    eye = torch.eye(components.shape[0], dtype=covariance.dtype, device=covariance.device)
    W = components.T  # (D, K)
    for _ in range(n_steps):
        beta = torch.linalg.solve(W @ W.T + torch.diag(noise), W).T  # W^T Sigma^{-1}, (K, D)
        expected = eye - beta @ W + beta @ covariance @ beta.T  # E[z z^T] per sample
        W = torch.linalg.solve(expected, beta @ covariance).T  # C beta^T E[z z^T]^{-1}
        noise = (covariance.diagonal() - (W * (beta @ covariance).T).sum(-1)).clamp_min(floor)
    return W.T.contiguous(), noise


def _posterior_with_holes(X, seen, weights, components, mean, noise):
    """``(value, z_mean, factor)`` of ``x = W z + mu + eps`` on rows ``X`` whose observed entries are
    ``seen`` (ones, zeros at the holes): the weighted mean of ``log p(x_o)`` (a tensor, differentiable
    in ``components`` (K, D), ``mean`` and ``noise``), the posterior means of ``z`` given each row's
    observed entries and the Cholesky factors of their precisions. Costs ``O(n D K^2)``."""
    n_features, K = X.shape[1], components.shape[0]
    W = components.T  # (D, K)
    # Sums over features of w_d w_d^T as one matrix product (n, D) @ (D, K K): a batched einsum took
    # 1.4 times the CPU of the whole step (breast_cancer, K = 16, 40 % holes).
    outer = (W.unsqueeze(-1) * W.unsqueeze(-2)).reshape(n_features, K * K)
    precision = seen / noise.expand(n_features)  # zero at the holes
    information = (precision @ outer).reshape(-1, K, K) + torch.eye(K, dtype=X.dtype)
    factor = torch.linalg.cholesky(information)
    residual = seen * (X - mean)
    projected = (precision * residual) @ W
    z_mean = torch.cholesky_solve(projected.unsqueeze(-1), factor).squeeze(-1)
    log_det = seen @ noise.expand(n_features).log() + 2 * factor.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    quad = (precision * residual.square()).sum(-1) - (projected * z_mean).sum(-1)
    value = weights @ (-0.5 * (seen.sum(-1) * math.log(2 * math.pi) + log_det + quad))
    return value, z_mean, factor


def _em_with_holes(X, observed, weights, components, mean, noise, floor, isotropic):
    """One EM step of ``x = W z + mu + eps`` on rows ``X`` with holes (missing at random; Tipping and
    Bishop, 1999; Ilin and Raiko, 2010), from loadings ``components`` (K, D), ``mean`` and ``noise`` (one
    variance, or one per feature when not ``isotropic``, kept above ``floor``): the E-step is the
    posterior of ``z`` given each row's ``observed`` entries (:func:`_posterior_with_holes`), the M-step
    regresses each feature's observed values on ``[E z; 1]`` (loadings and mean together) and sets the
    noise from the expected squared residuals, rows weighed by ``weights`` (summing to one).
    ``(value, parameters)``: the weighted mean of ``log p(x_o)`` at the parameters given, and the step's
    ``(components, mean, noise)``. Costs ``O(n D K^2)``."""
    K = components.shape[0]
    seen = observed.to(X.dtype)
    value, z_mean, factor = _posterior_with_holes(X, seen, weights, components, mean, noise)
    z_cov = inverse_from_cholesky(factor)
    first = torch.cat([z_mean, torch.ones_like(z_mean[:, :1])], 1)  # [E z; 1], (n, K + 1)
    second = first.unsqueeze(-1) * first.unsqueeze(-2)
    second[:, :K, :K] += z_cov
    weighted = seen * weights.unsqueeze(-1)
    gram = (weighted.T @ second.reshape(len(X), -1)).reshape(X.shape[1], K + 1, K + 1)
    coefficients = torch.linalg.solve(gram, (weighted * X).T @ first)  # (D, K + 1)
    W, mean = coefficients[:, :K], coefficients[:, K]
    spread = z_cov.reshape(len(X), K * K) @ (W.unsqueeze(-1) * W.unsqueeze(-2)).reshape(X.shape[1], K * K).T
    squared = (weighted * ((X - first @ coefficients.T).square() + spread)).sum(0)
    noise = squared.sum() / weighted.sum() if isotropic else squared / weighted.sum(0)
    return float(value), (W.T.contiguous(), mean, noise.clamp_min(floor))


def _gradient_with_holes(X, seen, weights, components, mean, noise):
    """``(value, gradients)`` of the weighted mean of ``log p(x_o)`` of ``x = W z + mu + eps`` (as
    :func:`_posterior_with_holes`) and its gradients in the loadings ``components`` (K, D), the
    ``mean`` and the logarithm of each feature's noise (summed over the features where ``noise`` is one
    variance), in closed form: by Fisher's identity each is the posterior mean of the complete-data
    log-likelihood's gradient, whose statistics are the E-step's. Autograd through the batched
    Cholesky factors took 2.8 times the CPU of an EM step (breast_cancer, 16 factors of 30 features,
    40 % holes); this takes less than one."""
    n_features, K = X.shape[1], components.shape[0]
    W = components.T  # (D, K)
    value, z_mean, factor = _posterior_with_holes(X, seen, weights, components, mean, noise)
    z_cov = inverse_from_cholesky(factor).reshape(len(X), K * K)
    residual = seen * (X - mean - z_mean @ W.T)  # E[x_d - mu_d - w_d^T z] at the observed entries
    spread = z_cov @ (W.unsqueeze(-1) * W.unsqueeze(-2)).reshape(n_features, K * K).T  # w_d^T Cov[z] w_d
    weighted = weights.unsqueeze(-1) * seen / noise.expand(n_features)  # zero at the holes
    # E[(x_d - mu_d - w_d^T z) z^T] = residual_d E[z]^T - Cov[z] w_d, over the rows that observe d
    covariances = (weighted.T @ z_cov).reshape(n_features, K, K)
    loadings = (weighted * residual).T @ z_mean - (covariances @ W.unsqueeze(-1)).squeeze(-1)
    log_noise = 0.5 * (weighted * (residual.square() + spread)).sum(0) - 0.5 * (weights @ seen)
    return value, (loadings.T.contiguous(), (weighted * residual).sum(0), log_noise.sum_to_size(noise.shape))


def _quasi_newton_with_holes(X, observed, weights, params, floor, evaluations=_QUASI_NEWTON_EVALUATIONS):
    """L-BFGS-B (:func:`~skmpt._utils.lbfgs_descent`) from ``params`` ``(components, mean, noise)`` on
    the weighted mean of ``log p(x_o)`` and its gradient (:func:`_gradient_with_holes`), in the
    loadings, the mean and the logarithm of the noise bounded below by that of ``floor``, until it
    finds no higher point or after ``evaluations`` of them; the parameters reached. Where the noise
    nears its floor EM's steps shrink by a rate near one (on ``crabs`` with 40 % of entries missing, 4
    factors of 5 features, 500 accelerated EM steps stopped 0.003 nats per sample short, every noise
    at the floor at the optimum); the bounds hold the floor exactly and the quasi-Newton steps learn
    the curvature (81 evaluations)."""
    seen = observed.to(X.dtype)
    components, mean, noise = (torch.nn.Parameter(p.clone()) for p in (params[0], params[1], params[2].log()))

    def evaluate():
        value, gradients = _gradient_with_holes(X, seen, weights, components, mean, noise.exp())
        for parameter, gradient in zip((components, mean, noise), gradients, strict=True):
            parameter.grad = -gradient
        return -float(value)

    lower = torch.as_tensor(floor, dtype=X.dtype).log().expand(noise.shape).reshape(-1).tolist()
    bounds = [(None, None)] * (components.numel() + mean.numel()) + [(bound, None) for bound in lower]
    lbfgs_descent([components, mean, noise], evaluate, 0.0, evaluations, _QUASI_NEWTON_HISTORY, bounds)
    with torch.no_grad():
        return components.detach().clone(), mean.detach().clone(), noise.exp().clamp_min(floor).detach()


def _em_gap(step, params):
    """What EM gains from ``params``, as the check of ``converged_`` reckons it: ten steps of ``step``
    (an EM step, ``(value at the parameters given, following parameters)``) and the rest extrapolated
    (:func:`~skmpt.estimators.gaussian_mixture.remaining_gain`); ``(gap, values, parameters)``: the
    values from ``params`` on and the parameters after the last."""
    values = []
    for _ in range(_FA_CHECK_STEPS + 1):
        value, params = step(*params)
        values.append(value)
    return max(values) - values[0] + remaining_gain(values), values, params


def _squarem_climb(step, params, floor, tol, n_steps):
    """EM from ``params`` ``(components, mean, noise)`` accelerated by SQUAREM (Varadhan and Roland,
    2008): from two EM steps ``r = p1 - p0`` and ``v = p2 - 2 p1 + p0`` (the noise in logs), the
    point ``p0 - 2 a r + a^2 v`` of step length ``a = -|r| / |v|`` (at most -1, which is ``p2``),
    stabilised by one more EM step and kept where it is no lower than ``p1`` (else ``p2``, as plain
    EM). ``step`` as :func:`_em_gap` takes it. Iterations until four and the rest extrapolated
    would gain less than ``tol``, or until, at the pace of those four, what they leave
    would take more EM steps than are left of about ``n_steps``: SQUAREM then crawls along a ridge
    (on ``breast_cancer`` with 40 % of entries missing, 16 factors: 0.43 nats in its first 31 steps,
    0.0046 in the other 468), and the check of ``converged_`` (at ten times this ``tol``) or
    quasi-Newton steps take over. ``(values, parameters, steps)``: each iteration's value
    at its start, the parameters reached (those of the last value, or past it when the steps ran
    out) and the EM steps taken."""
    def flat(p):
        return torch.cat([p[0].reshape(-1), p[1], p[2].log().reshape(-1)])

    def unflat(v):
        components, mean = v[:size].reshape(shape), v[size:size + len(params[1])]
        return components, mean, v[size + len(params[1]):].exp().clamp_min(floor).reshape(params[2].shape)

    shape, size = params[0].shape, params[0].numel()
    values, window, spent = [], 5, 0
    while True:
        value, first = step(*params)
        values.append(value)  # at ``params``
        spent += 1
        recent = values[-window:]
        if len(recent) == window:
            left = recent[-1] - recent[0] + remaining_gain(recent)
            pace = (recent[-1] - recent[0]) / (window - 1)  # per iteration: three EM steps
            if left < tol:
                return values, params, spent
            if pace > 0 and 3 * left / pace > n_steps - spent:
                return values, params, spent
        if spent + 2 > n_steps:
            return values, params, spent
        at_first, second = step(*first)
        start, r = flat(params), flat(first) - flat(params)
        v = flat(second) - flat(first) - r
        length = min(-float(r.norm() / v.norm()), -1.0) if float(v.norm()) > 0 else -1.0
        try:
            at_jump, stabilised = step(*unflat(start - 2 * length * r + length**2 * v))
        except torch.linalg.LinAlgError:  # a jump so far that a posterior's precision is lost in floating
            at_jump, stabilised = -math.inf, None  # point (a constant feature's noise at the floor): EM's step
        spent += 2
        params = stabilised if math.isfinite(at_jump) and at_jump >= at_first else second


def _positive(spread):
    """``spread`` with one where it is not positive (a constant feature)."""
    return torch.where(spread > 0, spread, torch.ones_like(spread))


def _gaussian_log_likelihood(covariance, model_covariance):
    """Mean log-likelihood of data of ``covariance`` (about their mean) under a Gaussian of
    ``model_covariance`` centred at that mean."""
    n_features = covariance.shape[0]
    log_det = torch.linalg.slogdet(model_covariance)[1]
    trace = torch.linalg.solve(model_covariance, covariance).diagonal().sum()
    return float(-0.5 * (n_features * math.log(2 * math.pi) + log_det + trace))


def _complete_moments(X, sample_weight):
    """The (weighted) mean and covariance of complete NumPy rows ``X`` in float64."""
    weights = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    weights = weights / weights.max()  # relative weights: a sum beyond float64 is fine
    mean = np.average(X, axis=0, weights=weights)
    covariance = np.cov(X.T, aweights=weights, bias=True).reshape(X.shape[1], X.shape[1])
    return mean, covariance


def pca_start(groups, n_components, module_class, isotropic, noise_floor=0.0):
    """PCA's solution on complete data, as a ``module_class`` module: the top ``n_components``
    eigenvectors of the covariance of the moment ``groups`` scaled by the square roots of their
    eigenvalues less the noise, the noise the mean of the other eigenvalues (the maximum-likelihood
    PPCA), or for per-feature noise (not ``isotropic``) the variance the loadings leave in each
    feature, refined by factor analysis' EM steps (computed on the correlations and mapped back to
    each feature's units: a start equivariant to them); None (the random start) on incomplete data,
    and with as many components as features (the maximum likelihood then leaves no noise: a
    degenerate start). Per-feature noise is kept at least ``noise_floor`` of each feature's variance,
    the module's floor (``FactorAnalysisModule``'s)."""
    if len(groups) > 1 or groups[0].observed is not None:
        return None
    moments = groups[0].moments
    K, n_features = n_components, moments.mean.shape[0]
    if K >= n_features:
        return None
    covariance = moments.covariance
    if not isotropic:
        # Factor analysis is equivariant to each feature's scale, and so is its start: PCA of the
        # correlations, mapped back to each feature's units.
        spread = _positive(covariance.diagonal().sqrt())
        covariance = covariance / torch.outer(spread, spread)
    eigenvalues, eigenvectors = torch.linalg.eigh(covariance)
    eigenvalues, eigenvectors = eigenvalues.flip(0).clamp_min(0), eigenvectors.flip(1)
    # An eigenvector's sign is the solver's choice (LAPACK's and cuSOLVER's differ): each is turned so
    # that its entry largest in absolute value is positive, as scikit-learn's svd_flip does, and the
    # start, hence the fit, is the same on every processor.
    eigenvectors = eigenvectors * eigenvectors.gather(0, eigenvectors.abs().argmax(0, keepdim=True)).sign()
    # Standardised data have a mean variance of one, or none at all when constant.
    floor = 1e-6 * (float(eigenvalues.mean()) or 1.0)
    noise = eigenvalues[K:].mean().clamp_min(floor)
    components = eigenvectors[:, :K].T * (eigenvalues[:K] - noise).clamp_min(0).sqrt().unsqueeze(-1)
    if isotropic:
        return module_class(components.contiguous(), moments.mean.clone(), noise)
    floor = max(floor, noise_floor)  # each feature's variance is one here
    noise = (covariance.diagonal() - components.square().sum(0)).clamp_min(floor)
    components, noise = _factor_analysis_em(covariance, components, noise, floor)
    noise, components = noise * spread.square(), components * spread
    return module_class(components.contiguous(), moments.mean.clone(), noise, noise_floor=noise_floor)


# ====================================================================== the shared base


class _BaseLinearGaussian(_InformationCriteriaMixin, _BaseMaskedEstimator):
    """Base of the linear-Gaussian estimators ``x = W z + mu + eps``: a subclass names its module
    class (``_module_class``) and whether the noise is one shared variance (``_isotropic``)."""

    _module_class = None
    _isotropic = True
    _parameter_constraints: dict = {
        **_BaseMaskedEstimator._parameter_constraints,
        "solver": [Options({"auto", "moments", "minibatch"})],
    }

    def _check_data(self, X):
        super()._check_data(X)
        n_features = X.shape[1]
        n_components = self.params_.n_components
        if isinstance(n_components, Integral) and n_components > n_features:
            raise ValueError(
                f"n_components={n_components} must be at most the number of features, but X "
                f"has {n_features} feature(s)."
            )

    def _build_module(self, X, generator, units):
        n_features = X.shape[1]
        # Small random loadings break the symmetry of W = 0 (a saddle point of every
        # objective); the data are standardised, so unit noise explains all variance at first.
        # Drawn on the CPU (the generator's device) and moved: a fit on CUDA draws the same start.
        components = 0.1 * torch.randn(self.n_components_, n_features, generator=generator, dtype=X.dtype).to(X.device)
        if not self._isotropic:  # each feature's loadings in its own units: a start equivariant to them
            components = components * self._feature_spread(X)
        noise = self._initial_noise(X, units)
        return self._module_class(components, X.new_zeros(n_features), noise, **self._module_floor())

    def _solver(self):
        """The ``solver`` parameter's: mini-batches (``"minibatch"``) or the data's moments (``"moments"``,
        ``"auto"``: see :class:`~skmpt.estimators._moments.MomentSolver`), which start from PCA's
        solution unless a first noise variance is given (factor analysis' ``noise_variance_init``)."""
        given = self.params_.get("noise_variance_init") is not None
        start = None if given else partial(pca_start, module_class=self._module_class, isotropic=self._isotropic,
                                            **self._module_floor())
        return choose_solver(self.params_.solver, start)

    def _module_floor(self):
        """The module's keyword for its noise floor: none for one shared variance (PPCA)."""
        return {} if self._isotropic else {"noise_floor": self.params_.noise_floor}

    def _initialize(self, solver, groups, rows, generator, units, previous=None):
        """Every start of factor analysis holds the noise at this estimator's floor of each feature's
        variance in the training rows ``rows`` (their moments' on complete data; with holes, the rows'
        with their holes at the centre), not of the start's own variances ``W W^T + Psi``: the optimum
        the check of ``converged_`` judges is then the data's, the same from every start. Floors of the
        start's variances moved it with the start: on ``crabs`` with 20 % of entries self-masking, 4
        factors of 5 features, nearly every noise at its floor, the refit from the search's moment fit
        (whose variances are those of the one Gaussian fitted to the training rows, 1.4 to 1.9 times
        the rows') converged at -0.4225 nats per sample, the fit from the random start (1.005 to 1.07
        times the rows', its random loadings') at -0.2514; both now reach -0.2453. A warm start's module
        takes the estimator's floor (:meth:`from_estimator`'s has none: it keeps the source's
        parameters exactly)."""
        module, near_start = super()._initialize(solver, groups, rows, generator, units, previous)
        if not self._isotropic:
            if groups is not None and len(groups) == 1 and groups[0].observed is None:  # complete data's moments
                spread = _positive(groups[0].moments.covariance.diagonal().sqrt())
            else:
                spread = self._feature_spread(rows)
            # the parameters stored in units of ``spread`` (the model unchanged, the noise as it reads, at
            # the module's floor or above): its floor is then ``noise_floor * spread ** 2``, and a step of
            # Adam the same fraction of every feature's spread
            with torch.no_grad():
                module.set_parameters_(module.components, module.mean, module.noise_variance, feature_scales=spread)
            module.noise_floor = self.params_.noise_floor
        return module, near_start

    def _noise_floors(self):
        """Factor analysis' least noise variances in the data's units (float64), or None (PPCA)."""
        return None if self._isotropic else self.module_.noise_floors().detach().cpu().double()

    def _initial_noise(self, X, units):
        """The first noise variance(s) in the training units ``units = (center, scale)``: all of the
        data's variance, overall (one number) or each feature's own."""
        return X.new_ones(()) if self._isotropic else self._feature_spread(X).square()

    @staticmethod
    def _feature_spread(X):
        """Each feature's standard deviation in the (standardised) training rows ``X``; one where it
        has none."""
        return _positive(X.std(0, correction=0))

    def _set_fitted_attributes(self):
        module = self.module_
        self.components_ = module.components.detach().cpu().numpy()
        self.mean_ = module.mean.detach().cpu().numpy().astype(np.float64) + self.offset_
        noise = module.noise_variance.detach().cpu().numpy()
        self.noise_variance_ = float(noise) if self._isotropic else noise
        components = self.components_.astype(np.float64)
        self.explained_variance_, self.explained_variance_ratio_ = explained_variance(
            components, np.asarray(noise, dtype=np.float64), self._isotropic
        )

    def _n_parameters(self):
        """Free parameters: ``D K - K (K - 1) / 2`` loadings (``W`` up to a rotation of ``z``),
        ``D`` means and one noise variance (PPCA) or ``D`` (factor analysis)."""
        check_is_fitted(self)
        n_features = self.n_features_in_
        n_noise = 1 if self._isotropic else n_features
        return linear_gaussian_parameter_count(n_features, self.n_components_, n_noise)

    def _optimality_gap(self, X, sample_weight):
        """How far the fit's mean log-likelihood of ``X`` (of its observed entries) is below the optimum.

        On complete data: PPCA's closed form (the top eigenvalues of the covariance and the mean of the
        others), or ten steps of factor analysis' EM on the correlations from the fitted parameters and
        the rest extrapolated (:func:`~skmpt.estimators.gaussian_mixture.remaining_gain`). With holes:
        ten steps of EM with holes (:func:`_em_with_holes`, ``O(n D K^2)`` each) from the fitted
        parameters, on the rows centred and scaled (by one scale for PPCA, one per feature for factor
        analysis, which is equivariant to them), and the rest extrapolated. None where MPT's target is
        not the likelihood (a fixed ``mask_rate``), in a dask collection, and with as many components
        as features (the optimum leaves no noise)."""
        n_features, K = self.n_features_in_, self.n_components_
        if self.params_.mask_rate != "uniform" or is_dask_collection(X) or K >= n_features:
            return None
        X = check_array(to_numpy(X), dtype=np.float64, ensure_all_finite="allow-nan")
        if np.isnan(X).any():
            return self._gap_with_holes(X, sample_weight)
        mean, covariance = (torch.as_tensor(a) for a in _complete_moments(X, sample_weight))
        with torch.no_grad():
            model = self.module_.covariance().detach().cpu().double()
            shift = torch.as_tensor(self.mean_) - mean  # the fit's mean against the data's
            fitted = _gaussian_log_likelihood(covariance + torch.outer(shift, shift), model)
            if self._isotropic:
                eigenvalues = torch.linalg.eigvalsh(covariance).flip(0).clamp_min(torch.finfo(torch.float64).tiny)
                noise = eigenvalues[K:].mean()
                optimum = -0.5 * (n_features * math.log(2 * math.pi) + float(eigenvalues[:K].log().sum())
                                  + (n_features - K) * float(noise.log()) + n_features)
                return optimum - fitted
            spread = _positive(covariance.diagonal().sqrt())
            correlation = covariance / torch.outer(spread, spread)
            components = torch.as_tensor(self.components_, dtype=torch.float64) / spread
            noise = torch.as_tensor(self.noise_variance_, dtype=torch.float64) / spread.square()
            floor = (self._noise_floors() / spread.square()).clamp_min(1e-6 * float(noise.min()))
            values = [fitted + float(spread.log().sum())]  # the same likelihood in the correlations' units
            for _ in range(_FA_CHECK_STEPS):
                components, noise = _factor_analysis_em(correlation, components, noise, floor, n_steps=1)
                values.append(_gaussian_log_likelihood(correlation, components.T @ components + torch.diag(noise)))
        return max(values) - values[0] + remaining_gain(values)

    def _gap_with_holes(self, X, sample_weight):
        """:meth:`_optimality_gap` of the NumPy rows ``X`` with holes (NaN): EM with holes from the fit."""
        X_t, observed, weights, params, floor = self._holes_view(X, sample_weight)[:5]
        with torch.no_grad():
            return _em_gap(partial(_em_with_holes, X_t, observed, weights, floor=floor, isotropic=self._isotropic),
                           params)[0]

    def _holes_view(self, X, sample_weight):
        """``(X, observed, weights, parameters, floor, center, spread)``: the NumPy rows ``X`` with holes
        centred and scaled (by one scale for PPCA, one per feature for factor analysis, which is
        equivariant to them; zero at the holes), the rows' weights summing to one, the fitted
        ``(components, mean, noise)`` in those units and the noise's floor."""
        # PPCA stays one under a common scale only
        X_t, observed, weights, center, spread = standardized_rows(X, sample_weight, common_scale=self._isotropic)
        spread_t = torch.as_tensor(spread)
        components = torch.as_tensor(self.components_, dtype=torch.float64) / spread_t
        mean = (torch.as_tensor(self.mean_, dtype=torch.float64) - torch.as_tensor(center)) / spread_t
        unit = spread_t[0] if self._isotropic else spread_t
        noise = torch.as_tensor(self.noise_variance_, dtype=torch.float64) / unit.square()
        floor = 1e-6 * float(noise.min())
        if not self._isotropic:  # the module's floor, at least
            floor = (self._noise_floors() / unit.square()).clamp_min(floor)
        return X_t, observed, weights, (components, mean, noise), floor, center, spread_t

    def _climb_to_optimum(self, X, sample_weight):
        """On rows with holes: EM with holes (:func:`_em_with_holes`) from the fitted parameters,
        accelerated (:func:`_squarem_climb`), until the check of ``converged_`` passes from where it
        got (:func:`_em_gap`), or ``_CLIMB_STEPS`` EM steps, then, if it has not passed, quasi-Newton
        steps (:func:`_quasi_newton_with_holes`); the better parameters are kept and their
        :meth:`_optimality_gap` returned. Plain EM crawls where the holes say little about a
        direction: from the factor analysis of 200 rows of 8 features, 40 % of their entries missing
        and filled with the column means (0.36 nats per sample below the optimum), its 500 steps
        stopped short of where the check passes; SQUAREM took 256. None on
        complete data, where the masks' noise rather than the step holds a fit back and
        :meth:`_train_to_optimum` trains on (PPCA's digits), and in a dask collection."""
        if is_dask_collection(X):
            return None
        X = check_array(to_numpy(X), dtype=np.float64, ensure_all_finite="allow-nan")
        if not np.isnan(X).any():
            return None
        X_t, observed, weights, params, floor, center, spread = self._holes_view(X, sample_weight)
        step = partial(_em_with_holes, X_t, observed, weights, floor=floor, isotropic=self._isotropic)
        tol, spent, start = self.params_.tol, 0, None
        with torch.no_grad():
            while True:
                values, params, steps = _squarem_climb(step, params, floor, tol / 10, _CLIMB_STEPS - spent)
                start = values[0] if start is None else start
                gap, checked, following = _em_gap(step, params)
                spent += steps + len(checked)
                if gap <= tol or spent >= _CLIMB_STEPS:
                    break
                params = following  # the check's steps climb too
            if gap > tol:  # EM stopped short: quasi-Newton steps from where it got
                params = _quasi_newton_with_holes(X_t, observed, weights, following, floor)
                gap, checked, following = _em_gap(step, params)
        if checked[0] <= start:
            return self._optimality_gap(X, sample_weight)
        components, mean, noise = params
        unit = spread[0] if self._isotropic else spread
        mean = torch.as_tensor(center) + spread * mean - torch.as_tensor(self.offset_, dtype=torch.float64)
        # set in place (whoever holds the module sees it), in its own feature scales: the floor's
        self.module_.set_parameters_(components * spread, mean, noise * unit.square())
        self._set_fitted_attributes()
        return self._optimality_gap(X, sample_weight)

    def _fit_or_continue(self, X, sample_weight):
        """``fit``'s run: from the start (``warm_start=False``, or nothing fitted yet), or from the fitted
        parameters (``warm_start=True``). A continued fit is first judged by the check of the optimum
        and, where short of it on data with holes, climbed by EM with holes, as a start the solver
        brought near the optimum is (:meth:`_train_to_optimum`); it is trained by MPT only if still
        short. Where there is no check (a fixed ``mask_rate``, as many components as features), MPT
        trains from the fitted parameters."""
        if self.warm_start and hasattr(self, "module_") and is_dask_collection(X):
            raise ValueError(
                f"warm_start=True continues a fit on rows in memory; X is a dask collection. Fit it with "
                f"warm_start=False, or stream its chunks with {type(self).__name__}.partial_fit."
            )
        previous = self._warm_start_source(X, ("n_components",))
        checked = previous is not None and self.mask_rate == "uniform" and self.n_components_ < self.n_features_in_
        self._fit(X, sample_weight, random_state=self.random_state, previous=previous, at_optimum=checked)
        self._fitted_like(X)
        return self

    def get_covariance(self):
        """Model covariance ``W W^T`` plus the noise covariance.

        Returns
        -------
        cov : ndarray of shape (n_features, n_features)
            An array of the fitted attributes' namespace, on their device, under ``array_api_dispatch``.
        """
        check_is_fitted(self)
        with torch.no_grad():
            return self._output(self.module_.covariance(), self.offset_)

    def get_precision(self):
        """Model precision (inverse covariance), by the Woodbury identity.

        Returns
        -------
        precision : ndarray of shape (n_features, n_features)
            An array of the fitted attributes' namespace, on their device, under ``array_api_dispatch``.
        """
        check_is_fitted(self)
        with torch.no_grad():
            return self._output(self.module_.precision(), self.offset_)
