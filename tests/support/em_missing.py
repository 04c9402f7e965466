"""EM with missing values, written here as references for the MPT fits of incomplete data.

Each function maximises the observed-data log-likelihood ``sum_i log p(x_{i,o_i})`` of its
model (missing at random) by exact EM, vectorised over the samples with torch in float64,
and returns the parameters and the mean observed-data log-likelihood per sample, which
``log_density`` recomputes with scipy, independently of skmpt.

- PPCA and factor analysis (Tipping and Bishop, 1999; Ilin and Raiko, 2010): the E-step is
  the posterior of ``z`` given each sample's observed entries; the M-step regresses each
  feature's observed values on ``[E z; 1]`` (loadings and mean jointly), then sets the noise
  variance (one, or one per feature) from the expected squared residuals.
- Full-covariance Gaussian mixture (Ghahramani and Jordan, 1994): responsibilities from the
  observed entries, then each component's conditional mean and covariance of the missing
  entries fill in the expected sufficient statistics.
"""

import numpy as np
import torch
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

F64 = torch.float64


def _linear_gaussian_step(X, seen, W, mu, psi):
    """One EM step of ``x = W z + mu + eps``, ``eps ~ N(0, diag(psi))``; ``W`` of shape (D, K)."""
    n, K = X.shape[0], W.shape[1]
    precision = seen / psi  # (n, D): zero at missing entries
    information = torch.eye(K, dtype=F64) + torch.einsum("nd,dk,dl->nkl", precision, W, W)
    cov = torch.linalg.inv(information)  # (n, K, K)
    mean = torch.einsum("nkl,nl->nk", cov, (precision * (X - mu)) @ W)
    # Augmented latent [z; 1]: its first and second moments.
    first = torch.cat([mean, torch.ones(n, 1, dtype=F64)], 1)  # (n, K + 1)
    second = first.unsqueeze(-1) * first.unsqueeze(-2)
    second[:, :K, :K] += cov
    # Per feature, regress the observed x_d on [z; 1] with the expected moments.
    lhs = torch.einsum("nd,nkl->dkl", seen, second)  # (D, K + 1, K + 1)
    rhs = torch.einsum("nd,nk->dk", seen * X, first)  # (D, K + 1)
    coefficients = torch.linalg.solve(lhs, rhs)  # (D, K + 1)
    W, mu = coefficients[:, :K], coefficients[:, K]
    residual = X - first @ coefficients.T
    spread = torch.einsum("dk,nkl,dl->nd", W, cov, W)
    squared = seen * (residual.square() + spread)
    return W, mu, squared


def linear_gaussian_em(X, n_components, *, isotropic, n_iter=3000, tol=1e-10, seed=0):
    """EM for PPCA (``isotropic=True``) or factor analysis on ``X`` with NaN for missing values.

    Returns ``(W (D, K), mu (D,), noise (scalar or (D,)), mean observed-data log-likelihood)``.
    """
    seen = torch.as_tensor(~np.isnan(X), dtype=F64)
    X_t = torch.as_tensor(np.nan_to_num(X), dtype=F64)
    n_features = X.shape[1]
    mu = (seen * X_t).sum(0) / seen.sum(0)
    W = 0.1 * torch.randn(n_features, n_components, generator=torch.Generator().manual_seed(seed), dtype=F64)
    psi = torch.ones(n_features, dtype=F64) * float(np.nanvar(X))
    previous = -np.inf
    for _ in range(n_iter):
        W, mu, squared = _linear_gaussian_step(X_t, seen, W, mu, psi)
        if isotropic:
            psi = (squared.sum() / seen.sum()).expand(n_features).clone()
        else:
            psi = squared.sum(0) / seen.sum(0)
        current = _fast_log_likelihood(X_t, seen, W, mu, psi)
        if current - previous < tol:
            break
        previous = current
    return W, mu, psi[0] if isotropic else psi, linear_gaussian_log_likelihood(X, W, mu, psi)


def linear_gaussian_em_gain(X, start, *, isotropic, n_iter=200, floor=0.0):
    """What ``n_iter`` EM steps from ``start = (W (D, K), mu (D,), noise (scalar or (D,)))`` gain in the
    mean observed-data log-likelihood of ``X`` (NaN for missing values), both ends computed in torch;
    the noise kept at least ``floor`` (one number or one per feature: factor analysis' least noise)."""
    seen = torch.as_tensor(~np.isnan(X), dtype=F64)
    X_t = torch.as_tensor(np.nan_to_num(X), dtype=F64)
    n_features = X.shape[1]
    W, mu, psi = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in start)
    psi = psi.expand(n_features).clone()
    first = _fast_log_likelihood(X_t, seen, W, mu, psi)
    values = [first]
    for _ in range(n_iter):
        W, mu, squared = _linear_gaussian_step(X_t, seen, W, mu, psi)
        psi = (squared.sum() / seen.sum()).expand(n_features).clone() if isotropic else squared.sum(0) / seen.sum(0)
        psi = psi.clamp_min(torch.as_tensor(floor, dtype=F64))
        values.append(_fast_log_likelihood(X_t, seen, W, mu, psi))
    return max(values) - first


def _fast_log_likelihood(X, seen, W, mu, psi):
    """The mean observed-data log-likelihood in torch (the stopping rule; scipy checks the end)."""
    covariance = W @ W.T + torch.diag(psi)
    pairs = seen.unsqueeze(-1) * seen.unsqueeze(-2)
    decoupled = covariance * pairs + torch.diag_embed(1 - seen)
    residual = seen * (X - mu)
    quad = (residual * torch.linalg.solve(decoupled, residual)).sum(1)
    log_det = torch.linalg.slogdet(decoupled)[1]
    return float((-0.5 * (seen.sum(1) * np.log(2 * np.pi) + log_det + quad)).mean())


def linear_gaussian_log_likelihood(X, W, mu, psi):
    """Mean observed-data log-likelihood under ``N(mu, W W^T + diag(psi))``, by scipy."""
    covariance = (W @ W.T + torch.diag(psi.expand(W.shape[0]))).numpy()
    return float(np.mean([log_density(x, mu.numpy(), covariance) for x in X]))


def log_density(x, mean, covariance):
    """``log N(x_o | mean_o, covariance_oo)`` of one sample with NaN for missing entries."""
    o = ~np.isnan(x)
    if not o.any():
        return 0.0
    return multivariate_normal(mean[o], covariance[np.ix_(o, o)]).logpdf(x[o])


def gmm_em(X, n_components, *, n_iter=2000, tol=1e-10, seed=0, reg_covar=1e-6):
    """EM for a full-covariance Gaussian mixture on ``X`` with NaN for missing values.

    Started from k-means on the mean-filled data. Returns ``(weights, means, covariances,
    mean observed-data log-likelihood)``.
    """
    from sklearn.cluster import KMeans

    observed = ~np.isnan(X)
    filled = np.where(observed, X, np.nanmean(X, 0))
    labels = KMeans(n_components, n_init=1, random_state=seed).fit(filled).labels_
    seen = torch.as_tensor(observed, dtype=F64)
    X_t = torch.as_tensor(np.nan_to_num(X), dtype=F64)
    n, D = X.shape
    weights = torch.as_tensor(np.bincount(labels, minlength=n_components) / n, dtype=F64)
    means = torch.stack([torch.as_tensor(filled[labels == k].mean(0)) for k in range(n_components)])
    covariances = torch.stack([torch.as_tensor(np.cov(filled[labels == k].T)) for k in range(n_components)])
    covariances = covariances + reg_covar * torch.eye(D, dtype=F64)
    pairs = seen.unsqueeze(-1) * seen.unsqueeze(-2)
    eye = torch.eye(D, dtype=F64)
    previous = -np.inf
    for _ in range(n_iter):
        log_joint, filled_in, conditional = [], [], []
        for k in range(n_components):
            sigma = covariances[k]
            # Sigma_oo beside the identity at missing entries: its inverse, masked to the
            # observed block, is Sigma_oo^{-1} for every sample at once.
            decoupled = sigma * pairs + torch.diag_embed(1 - seen)
            inverse = torch.linalg.inv(decoupled) * pairs
            residual = seen * (X_t - means[k])
            alpha = torch.einsum("nde,ne->nd", inverse, residual)
            quad = (residual * alpha).sum(1)
            log_det = torch.linalg.slogdet(decoupled)[1]
            log_joint.append(torch.log(weights[k]) - 0.5 * (seen.sum(1) * np.log(2 * np.pi) + log_det + quad))
            filled_in.append(means[k] + alpha @ sigma)  # x_o at observed entries, E[x_m | x_o] at missing
            conditional.append(sigma - torch.einsum("de,nef,fg->ndg", sigma, inverse, sigma))
        log_joint = torch.stack(log_joint, 1)
        current = float(torch.logsumexp(log_joint, 1).mean())
        responsibilities = torch.softmax(log_joint, 1)
        totals = responsibilities.sum(0)
        weights = totals / n
        new_means, new_covariances = [], []
        for k in range(n_components):
            r = responsibilities[:, k]
            mean = (r @ filled_in[k]) / totals[k]
            deviation = filled_in[k] - mean
            scatter = torch.einsum("n,nd,ne->de", r, deviation, deviation)
            scatter = scatter + torch.einsum("n,nde->de", r, conditional[k])
            new_means.append(mean)
            new_covariances.append(scatter / totals[k] + reg_covar * eye)
        means, covariances = torch.stack(new_means), torch.stack(new_covariances)
        if current - previous < tol:
            break
        previous = current
    return weights, means, covariances, gmm_log_likelihood(X, weights, means, covariances)


def gmm_log_likelihood(X, weights, means, covariances):
    """Mean observed-data log-likelihood of a Gaussian mixture, by scipy."""
    logs = [
        [
            np.log(float(w)) + log_density(x, m.numpy(), c.numpy())
            for w, m, c in zip(weights, means, covariances, strict=True)
        ]
        for x in X
    ]
    return float(np.mean([logsumexp(row) if not np.isnan(x).all() else 0.0 for row, x in zip(logs, X, strict=True)]))


def incomplete_data(kind, n_samples, n_features=10, n_components=2, rate=0.2, seed=0):
    """Data drawn from the model ``kind`` with ``rate`` of the entries set to NaN (MCAR)."""
    rng = np.random.RandomState(seed)
    if kind == "gmm":
        means = 1.5 * rng.randn(n_components, n_features)
        factors = rng.randn(n_components, n_features, n_features)
        shapes = [a @ a.T / n_features + 0.5 * np.eye(n_features) for a in factors]
        proportions = np.arange(2, n_components + 2) / np.arange(2, n_components + 2).sum()  # 0.4, 0.6 for K=2
        labels = rng.choice(n_components, n_samples, p=proportions)
        draws = np.stack([rng.multivariate_normal(m, s, n_samples) for m, s in zip(means, shapes, strict=True)])
        X = draws[labels, np.arange(n_samples)]
    else:
        noise = 0.5 if kind == "ppca" else rng.uniform(0.2, 1.0, n_features)
        X = rng.randn(n_samples, n_components) @ rng.randn(n_components, n_features) + rng.randn(n_features)
        X = X + np.sqrt(noise) * rng.randn(n_samples, n_features)
    X[np.random.default_rng(seed + 1).random(X.shape) < rate] = np.nan
    return X
