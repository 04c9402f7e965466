r"""Imputation: the conditional distribution of the entries not observed given those observed.

Every model here is a mixture (over a discrete component, grid node or particle ``c``) of
distributions under which the missing entries are Gaussian or independent given ``c``:

.. math::

    p(x_m \mid x_o) = \sum_c \pi_c(x_o)\, p(x_m \mid x_o, c),

so ``E[x_m | x_o] = sum_c pi_c(x_o) E[x_m | x_o, c]`` and a draw picks ``c`` from ``pi(x_o)``,
then ``x_m`` given it. The functions here are the shared pieces; each model's ``impute`` and
``sample_missing`` (optional methods of :class:`~skmpt.models.MaskedModel`) assemble them.
Observed entries are returned as they are in ``X``.
"""

import torch

__all__ = ["decoupled_covariance", "gaussian_conditional", "pick_components"]


def decoupled_covariance(covariance, observed):
    """``covariance`` with the rows and columns of unobserved entries replaced by the identity.

    The result is block diagonal, ``Sigma_oo`` beside ``I``, so its Cholesky factor holds
    ``Sigma_oo``'s: conditioning on (or the density of) the observed entries without cutting
    them out, for every pattern of a batch at once. Shapes broadcast: ``covariance``
    ``(..., D, D)``, ``observed`` (boolean or 0/1) ``(..., D)``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.imputation import decoupled_covariance
    >>> cov = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    >>> decoupled_covariance(cov, torch.tensor([True, False])).tolist()
    [[2.0, 0.0], [0.0, 1.0]]
    """
    seen = observed.to(covariance.dtype)
    return covariance * (seen.unsqueeze(-1) * seen.unsqueeze(-2)) + torch.diag_embed(1 - seen)


def gaussian_conditional(X, observed, mean, covariance):
    """Mean and covariance of ``x`` given its observed entries under ``N(mean, covariance)``.

    Parameters
    ----------
    X : torch.Tensor of shape (n_samples, D)
        Any finite value at the entries not observed.
    observed : torch.Tensor of dtype bool and shape (n_samples, D)
    mean : torch.Tensor of shape (..., D)
        Broadcasts against ``X``'s samples (e.g. ``(K, 1, D)`` for ``K`` components).
    covariance : torch.Tensor of shape (..., D, D)

    Returns
    -------
    conditional_mean : torch.Tensor of shape (..., n_samples, D)
        ``x_o`` at the observed entries, ``E[x_m | x_o]`` at the others.
    conditional_covariance : torch.Tensor of shape (..., n_samples, D, D)
        Zero in the observed rows and columns.
    log_density : torch.Tensor of shape (..., n_samples)
        ``log N(x_o | mean_o, covariance_oo)`` (zero when nothing is observed).

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.imputation import gaussian_conditional
    >>> cov = torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=torch.float64)
    >>> X = torch.tensor([[2.0, 0.0]], dtype=torch.float64)
    >>> observed, zero = torch.tensor([[True, False]]), torch.zeros(2, dtype=torch.float64)
    >>> mean, cov_given, _ = gaussian_conditional(X, observed, zero, cov)
    >>> mean.tolist(), round(float(cov_given[0, 1, 1]), 6)
    ([[2.0, 1.0]], 0.75)
    """
    seen = observed.to(X.dtype)
    covariance = covariance.unsqueeze(-3)  # (..., 1, D, D)
    # Its inverse masked to the observed block is Sigma_oo^{-1}.
    decoupled = decoupled_covariance(covariance, seen)
    factor = torch.linalg.cholesky(decoupled)
    residual = seen * (X - mean)
    alpha = torch.cholesky_solve(residual.unsqueeze(-1), factor).squeeze(-1)  # zero at missing entries
    conditional_mean = mean + (covariance @ alpha.unsqueeze(-1)).squeeze(-1)
    explained = torch.linalg.solve_triangular(factor, seen.unsqueeze(-1) * covariance, upper=False)
    missing = 1 - seen
    conditional_covariance = (covariance - explained.mT @ explained) * missing.unsqueeze(-1) * missing.unsqueeze(-2)
    log_det = 2 * factor.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    quad = (residual * alpha).sum(-1)
    log_density = -0.5 * (seen.sum(-1) * torch.log(X.new_tensor(2 * torch.pi)) + log_det + quad)
    return torch.where(observed, X, conditional_mean), conditional_covariance, log_density


def pick_components(log_weights, n_draws, generator):
    """Draw ``n_draws`` indices per sample from ``softmax(log_weights)``: shape ``(n_draws, n)``.

    Parameters
    ----------
    log_weights : torch.Tensor of shape (n_samples, C)
        Unnormalised log-probabilities.
    n_draws : int
    generator : torch.Generator or None
        A CPU generator (``None``: torch's global one).

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.imputation import pick_components
    >>> log_weights = torch.tensor([[0.0, -1e9], [-1e9, 0.0]], dtype=torch.float64)
    >>> pick_components(log_weights, 3, torch.Generator().manual_seed(0)).tolist()
    [[0, 1], [0, 1], [0, 1]]
    """
    probabilities = torch.softmax(log_weights.detach(), -1).cpu()
    picks = torch.multinomial(probabilities, n_draws, replacement=True, generator=generator)
    return picks.T.to(log_weights.device)
