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

import math
from typing import NamedTuple

import torch

from .._utils import inverse_from_cholesky

__all__ = [
    "HolePatterns",
    "decoupled_covariance",
    "expected_scatter",
    "gaussian_conditional",
    "hole_patterns",
    "mixture_mean",
    "pattern_conditional",
    "pattern_covariance",
    "pattern_draws",
    "per_pattern",
    "pick_components",
]


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
    decoupled = covariance * (seen.unsqueeze(-1) * seen.unsqueeze(-2))
    if decoupled.requires_grad:
        return decoupled + torch.diag_embed(1 - seen)
    # In place on the diagonal (the same numbers): a diag_embed of a batch allocates and adds another (..., D, D).
    decoupled.diagonal(dim1=-2, dim2=-1).add_(1 - seen)
    return decoupled


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


class HolePatterns(NamedTuple):
    """The patterns of holes of a table's rows (:func:`~skmpt.models.imputation.hole_patterns`).

    Rows with the same observed entries share everything in a Gaussian conditional that depends on
    which entries are observed (:func:`pattern_conditional`); this names those rows.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.imputation import hole_patterns
    >>> holes = hole_patterns(torch.tensor([[True, False], [True, True], [True, False]]))
    >>> holes.patterns.tolist(), holes.index.tolist(), holes.order.tolist(), holes.sizes
    ([[True, False], [True, True]], [0, 1, 0], [0, 2, 1], [2, 1])
    """

    #: Whether each entry is observed, ``(n, D)``.
    observed: torch.Tensor
    #: The distinct rows of ``observed``, ``(U, D)``.
    patterns: torch.Tensor
    #: Each row's pattern, ``(n,)``.
    index: torch.Tensor
    #: The rows in the order of their patterns (stable), ``(n,)``.
    order: torch.Tensor
    #: Rows of each pattern, in that order.
    sizes: list


#: Columns up to which :func:`hole_patterns` finds the distinct rows as distinct integers (one bit per column of an
#: int64): about twenty times faster than ``torch.unique(observed, dim=0)``, which sorts rows.
_PATTERN_BITS = 62


def hole_patterns(observed):
    """The patterns of holes of the rows of ``observed``: its distinct rows and which rows have each.

    Parameters
    ----------
    observed : torch.Tensor of dtype bool and shape (n_samples, D), or HolePatterns
        Whether each entry is observed; :class:`HolePatterns` are returned as they are, so a caller
        that conditions many times on one mask finds its patterns once.

    Returns
    -------
    holes : HolePatterns
        On the device of ``observed``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.imputation import hole_patterns
    >>> holes = hole_patterns(torch.tensor([[True, False], [False, True], [True, False]]))
    >>> holes.patterns.tolist(), holes.sizes
    ([[False, True], [True, False]], [1, 2])
    >>> hole_patterns(holes) is holes
    True
    """
    if isinstance(observed, HolePatterns):
        return observed
    n_features = observed.shape[-1]
    if not n_features:  # every row has the one empty pattern (torch.unique refuses zero-sized rows)
        patterns = observed[:1]
        index = torch.zeros(len(observed), dtype=torch.long, device=observed.device)
    elif n_features <= _PATTERN_BITS:  # each row as the integer of its bits, first column highest: the same order
        bits = 2 ** torch.arange(n_features - 1, -1, -1, device=observed.device)
        codes, index = torch.unique((observed.long() * bits).sum(-1), return_inverse=True)
        patterns = (codes.unsqueeze(-1) // bits) % 2 == 1
    else:
        patterns, index = torch.unique(observed, dim=0, return_inverse=True)
    sizes = torch.bincount(index, minlength=len(patterns)).tolist()
    return HolePatterns(observed, patterns, index, torch.argsort(index, stable=True), sizes)


#: Rows per pattern of holes (on average) from which :func:`per_pattern` multiplies each pattern's rows
#: at once instead of gathering a matrix per row (about the break-even of the two on 1,000 to 50,000
#: rows of 5 to 10 columns, one to three components).
_ROWS_PER_PATTERN = 48


def per_pattern(matrices, vectors, holes):
    """Each row's vector times its pattern's matrix: ``matrices[:, u_i] @ vectors[:, i]``.

    Where patterns hold many rows each, each pattern's rows are multiplied at once; else each row's
    matrix is gathered. The two give the same numbers.

    Parameters
    ----------
    matrices : torch.Tensor of shape (K, U, D, D)
        One matrix per component and pattern of ``holes``.
    vectors : torch.Tensor of shape (K, n_samples, D)
    holes : HolePatterns
        Row ``i``'s pattern is ``u_i = holes.index[i]``.

    Returns
    -------
    products : torch.Tensor of shape (K, n_samples, D)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.imputation import hole_patterns, per_pattern
    >>> holes = hole_patterns(torch.tensor([[True, False], [True, True], [True, False]]))
    >>> matrices = torch.stack([torch.eye(2), 2 * torch.eye(2)]).unsqueeze(0)  # (1, 2, 2, 2)
    >>> per_pattern(matrices, torch.ones(1, 3, 2), holes).tolist()
    [[[1.0, 1.0], [2.0, 2.0], [1.0, 1.0]]]
    """
    if len(holes.index) < _ROWS_PER_PATTERN * max(len(holes.patterns), 1):
        return (matrices[:, holes.index] @ vectors.unsqueeze(-1)).squeeze(-1)
    groups = vectors[:, holes.order].split(holes.sizes, 1)
    products = torch.cat([group @ matrices[:, u].mT for u, group in enumerate(groups)], 1)
    return torch.empty_like(products).index_copy_(1, holes.order, products)


def pattern_conditional(X, observed, means, covariances):
    """Each component's Gaussian conditional of the missing entries given the observed ones, by pattern.

    :func:`gaussian_conditional` for ``K`` components, its work grouped by the pattern of holes: rows
    with the same observed entries share ``Sigma_oo``'s Cholesky factor and inverse. A table with a few
    thousand rows and ten columns has a few hundred patterns, so the ``O(D^3)`` work runs per pattern,
    the ``O(D^2)`` per row; no ``(n, D, D)`` conditional covariance is formed
    (:func:`pattern_covariance` and :func:`expected_scatter` take them from ``precision``).

    Parameters
    ----------
    X : torch.Tensor of shape (n_samples, D)
        Any finite value at the entries not observed.
    observed : torch.Tensor of dtype bool and shape (n_samples, D), or HolePatterns
        Its :func:`hole_patterns`, ``U`` patterns.
    means : torch.Tensor of shape (K, D)
    covariances : torch.Tensor of shape (K, D, D)

    Returns
    -------
    conditional_mean : torch.Tensor of shape (K, n_samples, D)
        ``x_o`` at the observed entries, ``E[x_m | x_o]`` at the others.
    precision : torch.Tensor of shape (K, U, D, D)
        ``Sigma_oo^{-1}`` of each pattern, zero outside its observed block.
    log_density : torch.Tensor of shape (K, n_samples)
        ``log N(x_o | mu_o, Sigma_oo)`` (zero when nothing is observed).

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.imputation import pattern_conditional
    >>> cov = torch.tensor([[[1.0, 0.5], [0.5, 1.0]]], dtype=torch.float64)
    >>> X = torch.tensor([[2.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    >>> observed = torch.tensor([[True, False], [True, False]])
    >>> mean, precision, _ = pattern_conditional(X, observed, torch.zeros(1, 2, dtype=torch.float64), cov)
    >>> mean.tolist(), precision.shape
    ([[[2.0, 1.0], [1.0, 0.5]]], torch.Size([1, 1, 2, 2]))
    """
    holes = hole_patterns(observed)
    seen = holes.patterns.to(X.dtype)  # (U, D)
    factor = torch.linalg.cholesky(decoupled_covariance(covariances.unsqueeze(-3), seen))  # (K, U, D, D)
    # The decoupled covariance's inverse is Sigma_oo^{-1} beside the identity.
    precision = inverse_from_cholesky(factor)
    if precision.requires_grad:  # its backward reads the inverse: a new tensor
        precision = precision - torch.diag_embed(1 - seen)
    else:  # in place on the diagonal, for EM: a diag_embed of every pattern allocates and adds two more (K, U, D, D)
        precision.diagonal(dim1=-2, dim2=-1).sub_(1 - seen)
    residual = seen[holes.index] * (X - means.unsqueeze(1))  # (K, n, D), zero at missing entries
    alpha = per_pattern(precision, residual, holes)  # Sigma_oo^{-1} (x_o - mu_o), zero at missing entries
    conditional_mean = means.unsqueeze(1) + alpha @ covariances.mT
    log_det = 2 * factor.diagonal(dim1=-2, dim2=-1).log().sum(-1)  # (K, U)
    quad = (residual * alpha).sum(-1)
    log_density = -0.5 * (seen.sum(-1)[holes.index] * math.log(2 * math.pi) + log_det[:, holes.index] + quad)
    return torch.where(holes.observed, X, conditional_mean), precision, log_density


def pattern_covariance(covariances, precision, holes):
    """Each pattern's conditional covariance of the missing entries given the observed ones.

    ``Sigma - Sigma P Sigma`` with ``P`` the pattern's ``precision`` (:func:`pattern_conditional`),
    zero in the observed rows and columns: a row's conditional covariance is its pattern's,
    ``result[:, holes.index]``.

    Parameters
    ----------
    covariances : torch.Tensor of shape (K, D, D)
    precision : torch.Tensor of shape (K, U, D, D)
    holes : HolePatterns
        The patterns ``precision`` belongs to.

    Returns
    -------
    conditional_covariance : torch.Tensor of shape (K, U, D, D)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.imputation import hole_patterns, pattern_conditional, pattern_covariance
    >>> cov = torch.tensor([[[1.0, 0.5], [0.5, 1.0]]], dtype=torch.float64)
    >>> holes = hole_patterns(torch.tensor([[True, False], [False, False]]))
    >>> _, precision, _ = pattern_conditional(torch.zeros(2, 2, dtype=torch.float64), holes,
    ...                                       torch.zeros(1, 2, dtype=torch.float64), cov)
    >>> pattern_covariance(cov, precision, holes).tolist()
    [[[[1.0, 0.5], [0.5, 1.0]], [[0.0, 0.0], [0.0, 0.75]]]]
    """
    covariances = covariances.unsqueeze(1)  # (K, 1, D, D)
    missing = 1 - holes.patterns.to(covariances.dtype)  # (U, D)
    return (covariances - covariances @ precision @ covariances) * missing.unsqueeze(-1) * missing.unsqueeze(-2)


def expected_scatter(resp, observed, covariances, precision):
    """The conditional covariances of the missing entries given the observed ones, summed over rows.

    ``sum_i r_ik C_ik`` per component, ``C_ik = Sigma_k - Sigma_k P_i Sigma_k`` with ``P_i`` the
    ``precision`` of row ``i``'s pattern: ``N_k Sigma_k - Sigma_k (sum_i r_ik P_i) Sigma_k``, one
    product per component whatever the rows (EM's expected scatter of the missing entries).

    Parameters
    ----------
    resp : torch.Tensor of shape (K, n_samples)
        Each row's weight per component (responsibilities).
    observed : torch.Tensor of dtype bool and shape (n_samples, D), or HolePatterns
    covariances : torch.Tensor of shape (K, D, D)
    precision : torch.Tensor of shape (K, U, D, D)
        :func:`pattern_conditional`'s, for the patterns of ``observed``.

    Returns
    -------
    scatter : torch.Tensor of shape (K, D, D)
        Zero in the rows and columns of entries observed in every row.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.imputation import expected_scatter, hole_patterns, pattern_conditional
    >>> cov = torch.tensor([[[1.0, 0.5], [0.5, 1.0]]], dtype=torch.float64)
    >>> holes = hole_patterns(torch.tensor([[True, False], [True, False]]))
    >>> _, precision, _ = pattern_conditional(torch.zeros(2, 2, dtype=torch.float64), holes,
    ...                                       torch.zeros(1, 2, dtype=torch.float64), cov)
    >>> expected_scatter(torch.ones(1, 2, dtype=torch.float64), holes, cov, precision).tolist()
    [[[0.0, 0.0], [0.0, 1.5]]]
    """
    holes = hole_patterns(observed)
    sums = resp.new_zeros(len(resp), len(holes.patterns)).index_add_(1, holes.index, resp)  # (K, U)
    pooled = torch.einsum("ku,kude->kde", sums, precision)
    return resp.sum(1).view(-1, 1, 1) * covariances - covariances @ pooled @ covariances


def pattern_draws(mean, covariance, holes, picks, noise):
    """Draws of each row's missing entries from the conditional Gaussian of a picked component.

    Each pattern's covariance is factored once; the observed entries get unit variance in the
    factor (so it exists) and keep ``mean``'s values only where its noise is added: the caller puts
    the observed entries back.

    Parameters
    ----------
    mean : torch.Tensor of shape (K, n_samples, D)
        Each component's conditional mean (:func:`pattern_conditional`).
    covariance : torch.Tensor of shape (K, U, D, D)
        Each pattern's conditional covariance (:func:`pattern_covariance`).
    holes : HolePatterns
    picks : torch.Tensor of shape (n_draws, n_samples)
        Each draw's component per row (:func:`pick_components`).
    noise : torch.Tensor of shape (n_draws, 1, n_samples, D, 1)
        Standard normal.

    Returns
    -------
    draws : torch.Tensor of shape (n_draws, n_samples, D)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.imputation import hole_patterns, pattern_draws
    >>> holes = hole_patterns(torch.tensor([[True, False]]))
    >>> covariance = torch.tensor([[[[0.0, 0.0], [0.0, 4.0]]]])
    >>> pattern_draws(torch.zeros(1, 1, 2), covariance, holes, torch.zeros(1, 1, dtype=torch.long),
    ...               torch.ones(1, 1, 1, 2, 1)).tolist()
    [[[1.0, 2.0]]]
    """
    factor = torch.linalg.cholesky(covariance + torch.diag_embed(holes.patterns.to(mean.dtype)))  # (K, U, D, D)
    draws = mean + (factor[:, holes.index] @ noise).squeeze(-1)  # (n_draws, K, n, D)
    index = picks.view(len(picks), 1, -1, 1).expand(-1, 1, -1, mean.shape[-1])
    return draws.gather(1, index).squeeze(1)


def mixture_mean(log_resp, values):
    """Each sample's mean of its components' ``values`` under ``p(k) = softmax(log_resp)``: ``sum_k p(k) v_k``.

    Summed as ``v_j + sum_k p(k) (v_k - v_j)`` about the sample's most probable component ``j``, so
    that where every component holds one value (a constant column) the mean is that value exactly:
    the probabilities' sum, one to within a rounding error, no longer scales it
    (``4.999999999999999`` for 5.0).

    Parameters
    ----------
    log_resp : torch.Tensor of shape (n_samples, K)
        Unnormalised log-probabilities of the components.
    values : torch.Tensor of shape (K, n_samples, D), or (K, D) shared by every sample

    Returns
    -------
    mean : torch.Tensor of shape (n_samples, D)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.imputation import mixture_mean
    >>> log_resp = torch.tensor([[0.3, -1.2, 0.7]], dtype=torch.float64)
    >>> values = torch.tensor([[5.0, 1.0], [5.0, 2.0], [5.0, 4.0]], dtype=torch.float64)
    >>> mixture_mean(log_resp, values).tolist()[0][0]
    5.0
    """
    if values.dim() == 2:
        values = values.unsqueeze(1).expand(-1, len(log_resp), -1)
    reference = values.gather(0, log_resp.argmax(-1).view(1, -1, 1).expand(1, *values.shape[1:])).squeeze(0)
    return reference + torch.einsum("nk,knd->nd", torch.softmax(log_resp, -1), values - reference)


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
