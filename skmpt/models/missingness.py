"""Self-masking missingness: the probability that an entry is missing depends on its own value.

Data missing not at random by self-masking (the largest incomes left blank, a sensor that
saturates) bias any model fitted to the observed entries alone, since those are no longer a
fair sample of the column. As not-MIWAE does (Ipsen, Mattei and Frellsen, 2021), the missingness
is modelled with the data: a full-covariance Gaussian ``p(x) = N(mu, Sigma)`` and, for each
feature, a logistic ``p(m_j = 1 | x_j) = sigmoid(a_j x_j + b_j)``. A row's likelihood is

    log p(x_o, m) = log N(x_o; mu_o, Sigma_oo) + sum_{j observed} log sigmoid(-(a_j x_j + b_j))
                    + log E[prod_{j missing} sigmoid(a_j x_j + b_j)],  x_mis ~ p(x_mis | x_o),

the expectation over the Gaussian conditional of the missing entries given the observed ones:
by Gauss-Hermite quadrature where a row misses one entry (exact), by quasi-Monte Carlo where it
misses several (``n_draws`` scrambled Sobol points mapped through the conditional's Cholesky
factor, the same points at every evaluation, so the objective is smooth and deterministic).
:class:`SelfMaskingGaussian` is fitted by maximising that likelihood of what was observed
(full-batch L-BFGS, SciPy's, on standardised features) and imputes the missing entries by their
mean under ``p(x_mis | x_o, m)``, the conditional reweighted by the probability that such values
go missing.

Integrating each missing entry against its own conditional alone, as this model did before
0.2.0, leaves out their correlation given ``x_o``; on weakly correlated columns that approximate
likelihood ranks slopes of the wrong sign above the truth, and the fit ended there (the user
guide's figures). The fit still climbs it first, as a start (its gradient in a slope is not zero
where the exact one's is, at zero slopes and independent columns).
"""

import math

import numpy as np
import torch
from scipy.optimize import minimize
from torch.nn.functional import logsigmoid

from .._utils import chunk_budget, flat_objective

# Added to the diagonal of the standardised covariance (a variance floor, as reg_covar's).
_COVARIANCE_FLOOR = 1e-6
# Numbers an evaluation of the likelihood holds per draw of a row's missing entries (the draws, their
# logits and log-sigmoids, and what autograd keeps of them): rows are taken in chunks of the working memory.
_COPIES = 8
# The tolerance of the climb that only starts the fit (each missing entry integrated alone), nats per sample.
_START_TOL = 1e-6

__all__ = ["SelfMaskingGaussian", "gauss_hermite", "log_expected_sigmoid", "mean_given_missing", "normal_draws"]


def gauss_hermite(n_nodes, *, dtype=torch.float64):
    """Nodes and weights of ``E[f(z)] ~ sum_k w_k f(z_k)`` for a standard normal ``z``.

    Parameters
    ----------
    n_nodes : int
        Nodes of the Gauss-Hermite rule (exact for polynomials of degree below ``2 * n_nodes``).
    dtype : torch.dtype, default=torch.float64

    Returns
    -------
    nodes, weights : Tensor of shape (n_nodes,)
        The weights sum to one.

    Examples
    --------
    >>> from skmpt.models.missingness import gauss_hermite
    >>> nodes, weights = gauss_hermite(5)
    >>> round(float((weights * nodes**2).sum()), 12), round(float(weights.sum()), 12)
    (1.0, 1.0)
    """
    nodes, weights = np.polynomial.hermite.hermgauss(n_nodes)
    return torch.as_tensor(nodes * math.sqrt(2), dtype=dtype), torch.as_tensor(weights / math.sqrt(math.pi),
                                                                               dtype=dtype)


def _nodes(mean, variance, n_nodes):
    nodes, weights = gauss_hermite(n_nodes, dtype=mean.dtype)
    return mean.unsqueeze(-1) + variance.clamp_min(0).sqrt().unsqueeze(-1) * nodes, weights


def log_expected_sigmoid(mean, variance, slope, intercept, n_nodes=20):
    """``log E[sigmoid(slope * x + intercept)]`` for ``x ~ N(mean, variance)``, by quadrature.

    Parameters
    ----------
    mean, variance : Tensor
        Of one shape; ``slope`` and ``intercept`` broadcast against them.
    slope, intercept : Tensor
    n_nodes : int, default=20

    Returns
    -------
    log_probability : Tensor
        The probability that an entry of that distribution goes missing, in nats.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.missingness import log_expected_sigmoid
    >>> zero = torch.zeros(1, dtype=torch.float64)
    >>> float(log_expected_sigmoid(zero, zero + 1, zero + 2, zero).exp())  # symmetric: one half
    0.5
    """
    points, weights = _nodes(mean, variance, n_nodes)
    return torch.logsumexp(logsigmoid(slope.unsqueeze(-1) * points + intercept.unsqueeze(-1)) + weights.log(), -1)


def mean_given_missing(mean, variance, slope, intercept, n_nodes=20):
    """``E[x | m = 1]`` for ``x ~ N(mean, variance)`` and ``p(m = 1 | x) = sigmoid(slope * x + intercept)``.

    Parameters
    ----------
    mean, variance, slope, intercept : Tensor
        As in :func:`log_expected_sigmoid`.
    n_nodes : int, default=20

    Returns
    -------
    mean : Tensor
        Above ``mean`` where ``slope > 0`` (large values go missing more often).

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.missingness import mean_given_missing
    >>> zero = torch.zeros(1, dtype=torch.float64)
    >>> bool(mean_given_missing(zero, zero + 1, zero + 3, zero) > 0.5)
    True
    """
    points, weights = _nodes(mean, variance, n_nodes)
    log_weights = logsigmoid(slope.unsqueeze(-1) * points + intercept.unsqueeze(-1)) + weights.log()
    return (torch.softmax(log_weights, -1) * points).sum(-1)


def normal_draws(n_draws, n_features, *, dtype=torch.float64):
    """``n_draws`` fixed quasi-random standard normal points in ``n_features`` dimensions: scrambled
    Sobol points (seed 0) through the normal's quantile function.

    Parameters
    ----------
    n_draws, n_features : int
    dtype : torch.dtype, default=torch.float64

    Returns
    -------
    draws : Tensor of shape (n_draws, n_features)

    Examples
    --------
    >>> from skmpt.models.missingness import normal_draws
    >>> draws = normal_draws(256, 2)
    >>> draws.shape, bool(draws.mean(0).abs().max() < 0.05), bool((draws.std(0) - 1).abs().max() < 0.05)
    (torch.Size([256, 2]), True, True)
    """
    uniform = torch.quasirandom.SobolEngine(n_features, scramble=True, seed=0).draw(n_draws, dtype=dtype)
    return math.sqrt(2) * torch.erfinv((2 * uniform - 1).clamp(-1 + 1e-12, 1 - 1e-12))


class SelfMaskingGaussian(torch.nn.Module):
    """A full-covariance Gaussian with a logistic self-masking model per feature.

    Parameters live on standardised features (``center`` and ``scale``, buffers): the mean
    ``mean``, the covariance's Cholesky factor (its diagonal as a log), and the logistic's
    ``slope`` and ``intercept`` per feature. Build it with :meth:`fit`.

    Parameters
    ----------
    center, scale : Tensor of shape (n_features,)
        The standardisation of the data (original units = center + scale * standardised).
    mean : Tensor of shape (n_features,)
    covariance : Tensor of shape (n_features, n_features)
        Positive definite.
    slope, intercept : Tensor of shape (n_features,)
    n_nodes : int, default=20
        Gauss-Hermite nodes of the integral of a row missing one entry.
    n_draws : int, default=128
        Quasi-Monte Carlo points of the integral of a row missing several entries.

    Attributes
    ----------
    n_iter_ : int
        L-BFGS iterations of :meth:`fit`, all its climbs together (0 when built directly).
    converged_ : bool
        Whether the climb :meth:`fit` kept stopped on its tolerance rather than its budget of
        iterations (or of evaluations, ``1.25 * max_iter``).

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.models.missingness import SelfMaskingGaussian
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 2)) @ np.array([[1.0, 0.8], [0.0, 0.6]])
    >>> X_missing = np.where(rng.random(X.shape) < 1 / (1 + np.exp(-2 * X)), np.nan, X)
    >>> model = SelfMaskingGaussian.fit(X_missing)
    >>> bool((model.slope.detach() > 0.5).all())  # large values go missing
    True
    >>> hidden = np.isnan(X_missing)
    >>> bool(model.impute(X_missing)[hidden].mean() > np.nanmean(X_missing))
    True
    """

    def __init__(self, center, scale, mean, covariance, slope, intercept, *, n_nodes=20, n_draws=128):
        super().__init__()
        self.register_buffer("center", torch.as_tensor(center, dtype=torch.float64))
        self.register_buffer("scale", torch.as_tensor(scale, dtype=torch.float64))
        self.register_buffer("draws", normal_draws(n_draws, len(self.center)))
        cholesky = torch.linalg.cholesky(torch.as_tensor(covariance, dtype=torch.float64))
        self.mean = torch.nn.Parameter(torch.as_tensor(mean, dtype=torch.float64).clone())
        self.lower = torch.nn.Parameter(torch.tril(cholesky, -1))
        self.log_diagonal = torch.nn.Parameter(cholesky.diagonal().log())
        self.slope = torch.nn.Parameter(torch.as_tensor(slope, dtype=torch.float64).clone())
        self.intercept = torch.nn.Parameter(torch.as_tensor(intercept, dtype=torch.float64).clone())
        self.n_nodes, self.n_draws = n_nodes, n_draws
        self.n_iter_, self.converged_ = 0, False

    def covariance(self):
        """The covariance on standardised features, ``L L^T`` plus a floor of ``1e-6`` on its
        diagonal (a step of the fit that shrinks a factor's diagonal towards 0 leaves it positive
        definite in floating point, where ``L L^T`` alone was not, on ``breast_cancer``'s nearly
        collinear columns).

        Returns
        -------
        covariance : Tensor of shape (n_features, n_features)
        """
        factor = torch.tril(self.lower, -1) + torch.diag(self.log_diagonal.exp())
        return factor @ factor.T + _COVARIANCE_FLOOR * torch.eye(len(factor), dtype=factor.dtype)

    def _standardize(self, X):
        Z = (torch.as_tensor(np.asarray(X, dtype=np.float64)) - self.center) / self.scale
        observed = ~torch.isnan(Z)
        return torch.where(observed, Z, 0.0), observed

    def _chunks(self, n_samples):
        """Slices of at most as many rows as the working memory holds with their draws."""
        size = max(1, chunk_budget() // (_COPIES * self.n_draws * len(self.center)))
        return [slice(start, start + size) for start in range(0, n_samples, size)]

    def _conditionals(self, Z, observed):
        """``log N(x_o)`` per row, and the missing entries' conditional mean and covariance given
        ``x_o`` (``(n, D)`` and ``(n, D, D)``; meaningful on the missing entries)."""
        covariance = self.covariance()
        o = observed.to(Z.dtype)
        # Per row, the observed block of the covariance with the identity on the missing entries.
        block = o.unsqueeze(-1) * covariance * o.unsqueeze(-2) + torch.diag_embed(1 - o)
        factor = torch.linalg.cholesky(block)
        residual = ((Z - self.mean) * o).unsqueeze(-1)
        whitened = torch.linalg.solve_triangular(factor, residual, upper=False)
        log_normal = -0.5 * (whitened.square().sum((-2, -1)) + o.sum(-1) * math.log(2 * math.pi)) - (
            factor.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        )
        cross = torch.linalg.solve_triangular(factor, o.unsqueeze(-1) * covariance, upper=False)
        mean = self.mean + (cross * whitened).sum(-2)
        return log_normal, mean, covariance - cross.mT @ cross

    def _draws_given(self, mean, conditional, missing):
        """The draws of the missing entries of rows that miss as many entries, ``(r, n_draws, k)``, from
        their conditional, and each draw's ``log prod_j sigmoid(a_j x_j + b_j)`` ``(r, n_draws)``.

        ``missing`` holds each row's missing features ``(r, k)``, in increasing order; each row takes the
        columns of :attr:`draws` of its missing features, so that the draws of an entry do not depend on
        which other entries of its row are missing, and works in ``k`` dimensions, not all the features'.
        """
        rows = torch.arange(len(missing)).unsqueeze(-1)
        factor = torch.linalg.cholesky(conditional[rows.unsqueeze(-1), missing.unsqueeze(-1), missing.unsqueeze(-2)])
        points = mean[rows, missing].unsqueeze(-2) + self.draws[:, missing].transpose(0, 1) @ factor.mT
        return points, logsigmoid(self.slope[missing].unsqueeze(-2) * points
                                  + self.intercept[missing].unsqueeze(-2)).sum(-1)

    def _several(self, observed):
        """The rows missing ``k >= 2`` entries, grouped by ``k``: pairs of their indices ``(r,)`` and their
        missing features ``(r, k)``."""
        count = (~observed).sum(-1)
        groups = []
        for k in torch.unique(count[count >= 2]).tolist():
            rows = (count == k).nonzero(as_tuple=True)[0]
            groups.append((rows, (~observed[rows]).nonzero(as_tuple=True)[1].view(-1, k)))
        return groups

    def _log_likelihood(self, X, joint):
        """``log p(x_o, m)`` per row; with ``joint=False`` each missing entry integrated against its own
        conditional alone (:meth:`fit`'s start)."""
        Z, observed = self._standardize(X)
        log_normal, mean, conditional = self._conditionals(Z, observed)
        several = self._several(observed) if joint else []
        alone = ~observed
        for rows, _ in several:  # their missing entries integrated together below
            alone[rows] = False
        variance = conditional.diagonal(dim1=-2, dim2=-1).clamp_min(1e-12)
        missing = torch.where(alone, log_expected_sigmoid(mean, variance, self.slope.expand_as(mean),
                                                          self.intercept.expand_as(mean), self.n_nodes), 0.0).sum(-1)
        for rows, features in several:
            _, log_weights = self._draws_given(mean[rows], conditional[rows], features)
            missing = missing.index_put((rows,), torch.logsumexp(log_weights, -1) - math.log(self.n_draws))
        kept = logsigmoid(-(self.slope * Z + self.intercept))
        return log_normal + torch.where(observed, kept, 0.0).sum(-1) + missing - (observed * self.scale.log()).sum(-1)

    def log_likelihood(self, X):
        """``log p(x_o, m)`` per row, in the original units (nats).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            ``NaN`` marks a missing entry.

        Returns
        -------
        log_likelihood : Tensor of shape (n_samples,)
        """
        X = np.asarray(X, dtype=np.float64)
        return torch.cat([self._log_likelihood(X[rows], True) for rows in self._chunks(len(X))])

    def score(self, X):
        """Mean ``log p(x_o, m)`` of the rows of ``X`` (nats per sample).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        score : float
        """
        with torch.no_grad():
            return float(self.log_likelihood(X).mean())

    def impute(self, X):
        """The missing entries' mean under ``p(x_mis | x_o, m)``; observed entries unchanged.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            ``NaN`` marks a missing entry.

        Returns
        -------
        X_imputed : ndarray of shape (n_samples, n_features)
        """
        X = np.asarray(X, dtype=np.float64)
        filled = np.empty_like(X)
        with torch.no_grad():
            for rows in self._chunks(len(X)):
                Z, observed = self._standardize(X[rows])
                _, mean, conditional = self._conditionals(Z, observed)
                variance = conditional.diagonal(dim1=-2, dim2=-1).clamp_min(1e-12)
                part = mean_given_missing(mean, variance, self.slope.expand_as(mean), self.intercept.expand_as(mean),
                                          self.n_nodes)  # exact where one entry is missing
                for several, features in self._several(observed):
                    points, log_weights = self._draws_given(mean[several], conditional[several], features)
                    part[several.unsqueeze(-1), features] = (torch.softmax(log_weights, -1).unsqueeze(-1)
                                                             * points).sum(-2)
                filled[rows] = (self.center + self.scale * part).numpy()
        return np.where(np.isnan(X), filled, X)

    @classmethod
    def fit(cls, X, *, max_iter=200, tol=1e-9, n_nodes=20, n_draws=128):
        """Maximise the mean ``log p(x_o, m)`` of ``X``'s rows (full-batch L-BFGS: SciPy's L-BFGS-B, as the
        mixtures' EM climb, since a ``torch.optim`` optimizer imports ``torch._dynamo`` on its first
        call, about 0.9 s of CPU that a process's first fit would pay).

        Two climbs of the likelihood, the higher kept. One starts from the observed entries' means,
        variances and pairwise covariances (made positive definite) and logistics of zero slope at
        each feature's missing rate, and climbs first the likelihood with each missing entry
        integrated against its own conditional alone (cheap, and its gradient in the slopes is not
        zero there, where the likelihood's is for independent columns). The other starts from that
        fit's Gaussian and each feature's logistic as fitted to its column alone (each sign of its
        slope tried), where one of those slopes has another sign than the first fit's: with nearly
        independent columns the first can end at slopes of the wrong sign, which the likelihood ranks
        below the second.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            ``NaN`` marks a missing entry; every feature needs two observed entries.
        max_iter : int, default=200
            Most L-BFGS iterations of each climb.
        tol : float, default=1e-9
            Stop when an iteration improves the mean log-likelihood by less (nats per sample), or
            when no entry of its gradient exceeds ``1e-7``.
        n_nodes : int, default=20
        n_draws : int, default=128

        Returns
        -------
        model : SelfMaskingGaussian
        """
        X = np.asarray(X, dtype=np.float64)
        observed = ~np.isnan(X)
        if (observed.sum(0) < 2).any():
            raise ValueError(f"X: feature(s) {np.flatnonzero(observed.sum(0) < 2)[:10].tolist()} have fewer than "
                             f"two observed entries; a self-masking model cannot be fitted to them.")
        center, scale = np.nanmean(X, 0), np.nanstd(X, 0)
        scale = np.where(scale > 0, scale, 1.0)
        Z = (X - center) / scale
        pairwise = np.atleast_2d(np.ma.cov(np.ma.masked_invalid(Z), rowvar=False).filled(0.0))  # one feature: 0-d
        rate = np.clip(1 - observed.mean(0), 1e-3, 1 - 1e-3)
        intercept = np.log(rate / (1 - rate))
        options = {"n_nodes": n_nodes, "n_draws": n_draws}
        if X.shape[1] == 1:  # zero slope is a stationary point of one feature's fit: from each sign of it
            return max((cls._climb(cls(center, scale, [0.0], [[1.0]], [sign], intercept, **options), X, max_iter,
                                   tol, joint=True) for sign in (-1.0, 1.0)), key=lambda model: model.score(X))
        values, vectors = np.linalg.eigh((pairwise + pairwise.T) / 2)
        covariance = (vectors * np.clip(values, 1e-3, None)) @ vectors.T
        model = cls(center, scale, np.zeros(X.shape[1]), covariance, np.zeros(X.shape[1]), intercept, **options)
        iterations = cls._climb(model, X, max_iter, max(tol, _START_TOL), joint=False).n_iter_
        first = cls._climb(model, X, max_iter, tol, joint=True)
        alone = [cls.fit(X[:, [j]], max_iter=max_iter, tol=tol, **options) for j in range(X.shape[1])]
        slope = torch.cat([m.slope for m in alone]).detach()
        iterations += first.n_iter_ + sum(m.n_iter_ for m in alone)
        if (torch.sign(slope) == torch.sign(first.slope.detach())).all():  # the second start in the first's orthant
            first.n_iter_ = iterations
            return first
        with torch.no_grad():
            second = cls(center, scale, first.mean, first.covariance(), slope,
                         torch.cat([m.intercept for m in alone]), **options)
        second = cls._climb(second, X, max_iter, tol, joint=True)
        best = max((first, second), key=lambda fit: fit.score(X))
        best.n_iter_ = iterations + second.n_iter_
        return best

    @staticmethod
    def _climb(model, X, max_iter, tol, *, joint):
        """``model`` after SciPy's L-BFGS-B on the mean ``log p(x_o, m)`` of ``X`` (:meth:`fit`'s; ``joint``
        as :meth:`_log_likelihood` takes it), the gradient summed over chunks of rows."""
        chunks = model._chunks(len(X))

        def evaluate():
            total = 0.0
            for rows in chunks:
                loss = -model._log_likelihood(X[rows], joint).sum() / len(X)
                loss.backward()
                total += float(loss.detach())
            return total

        loss_and_gradient, start, load = flat_objective(list(model.parameters()), evaluate)
        at_start = loss_and_gradient(start)  # its scale: SciPy's ftol is relative to max(|f|, 1)
        best = {"loss": at_start[0], "x": start}

        def tried(x):
            if np.array_equal(x, start):
                return at_start
            try:
                value = loss_and_gradient(x)
            except torch.linalg.LinAlgError:  # a line search's step so far that the covariance is not positive
                return np.inf, np.zeros_like(x)  # definite in floating point: the search steps back
            if value[0] < best["loss"]:
                best.update(loss=value[0], x=x.copy())
            return value

        result = minimize(tried, start, jac=True, method="L-BFGS-B", options={
            "maxiter": max_iter, "maxfun": max(2, int(1.25 * max_iter)), "maxcor": 20, "gtol": 1e-7,
            "ftol": tol / max(abs(at_start[0]), 1.0)})
        load(best["x"])
        model.n_iter_ = int(result.nit)
        model.converged_ = result.status != 1  # 1: out of iterations or evaluations
        return model
