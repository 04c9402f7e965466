"""Training objectives: the MPT objective, the ELBO, the importance-weighted bound and the
log-marginal likelihood, each a log-likelihood per sample to maximise.

They take a model following :class:`skmpt.models.MaskedModel`; see :mod:`skmpt.objectives`.
"""

import math

import torch

from .._utils import call_with_generator
from .._validation import check_positive_int
from ..models import importance_log_weights, standard_normal

__all__ = [
    "OBJECTIVES",
    "check_masks",
    "check_output",
    "elbo",
    "iwae",
    "log_marginal",
    "masked_log_prob_sum",
    "mpt_objective",
    "noise_generator",
]


def check_masks(masks, X):
    """Masks must be a boolean tensor of shape ``(P, D)`` or ``(n, P, D)`` matching ``X``."""
    if not isinstance(masks, torch.Tensor):
        raise TypeError(f"masks must be a boolean torch.Tensor; got {type(masks).__name__}.")
    if masks.dtype != torch.bool:
        raise TypeError(
            f"masks must have dtype torch.bool (True marks a masked token); got {masks.dtype}. "
            f"Convert 0/1 masks with masks.bool() if that is what they mean."
        )
    n_samples, n_features = X.shape
    if masks.ndim not in (2, 3) or masks.shape[-1] != n_features or (masks.ndim == 3 and masks.shape[0] != n_samples):
        raise ValueError(
            f"masks must have shape (n_masks, {n_features}) or ({n_samples}, n_masks, {n_features}) "
            f"for X of shape {tuple(X.shape)}; got {tuple(masks.shape)}."
        )


def noise_generator(model, generator):
    """The generator a stochastic model draws from: a copy of the masks' generator, else None."""
    if not getattr(model, "stochastic", False):
        return None
    copy = torch.Generator(device="cpu")
    copy.set_state(generator.get_state())
    return copy


def check_output(values, shape, model, method, X, masks):
    """``values`` if it is a tensor of ``shape``; else a ``ValueError`` naming the model's method.

    A model that returns another shape (e.g. one that drops the masks axis when there is one
    mask per sample) would otherwise broadcast silently into every objective.
    """
    if not isinstance(values, torch.Tensor) or tuple(values.shape) != tuple(shape):
        got = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
        raise ValueError(
            f"{type(model).__name__}.{method} returned {got} for X of shape {tuple(X.shape)} and "
            f"masks (or orderings) of shape {tuple(masks.shape)}; the contract asks for {tuple(shape)}. "
            f"skmpt.testing.check_masked_model checks a model against every shape it is called with."
        )
    return values


def masked_log_prob_sum(model, X, masks, *, generator=None, observed=None):
    """``sum_{j in m} log p(x_j | x_r)`` from whichever of the two methods the model has.

    Parameters
    ----------
    model : object
        Has ``masked_log_prob_sum`` or ``masked_log_prob`` (module docstring).
    X : torch.Tensor of shape (n_samples, n_features)
    masks : torch.Tensor of dtype bool and shape (n_masks, n_features) or \
            (n_samples, n_masks, n_features)
    generator : torch.Generator, default=None
        Passed to the model's method when given (stochastic models).
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features) or (n_features,), default=None
        Entries not observed (``False``), marginalised out; passed to the model only when given.

    Returns
    -------
    sums : torch.Tensor of shape (n_samples, n_masks)

    Examples
    --------
    >>> import torch
    >>> from skmpt.objectives import masked_log_prob_sum
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> X = torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64)
    >>> masks = torch.tensor([[True, False, False], [True, True, True]])
    >>> sums = masked_log_prob_sum(joint, X, masks)
    >>> sums.shape
    torch.Size([1, 2])
    """
    check_masks(masks, X)
    expected = (X.shape[0], masks.shape[-2])
    options = {} if observed is None else {"observed": observed}
    if hasattr(model, "masked_log_prob_sum"):
        sums = call_with_generator(model.masked_log_prob_sum, X, masks, generator=generator, **options)
        return check_output(sums, expected, model, "masked_log_prob_sum", X, masks)
    if hasattr(model, "masked_log_prob"):
        per_token = call_with_generator(model.masked_log_prob, X, masks, generator=generator, **options)
        return check_output(per_token, (*expected, X.shape[1]), model, "masked_log_prob", X, masks).sum(-1)
    raise TypeError(
        f"{type(model).__name__} has neither masked_log_prob_sum(X, masks) nor "
        f"masked_log_prob(X, masks); skmpt's objectives need one of them."
    )


def mpt_objective(model, X, masks, *, generator=None, observed=None):
    """The masked pre-training objective, rescaled to the scale of ``log p(x)``.

    For each sample and each of its masks, ``(D / |m|) * sum_{j in m} log p(x_j | x_r)``,
    averaged over the masks. With mask sizes uniform on ``1..D`` this is an unbiased
    estimate of ``log p(x)``; with a fixed size ``M`` it estimates ``D * S(x; M)``, which is
    biased (see :func:`fixed_rate_bias`). The sign is that of a log-likelihood: maximise it
    (minimise its negative mean).

    Parameters
    ----------
    model : object
        See the module docstring.
    X : torch.Tensor of shape (n_samples, n_features)
    masks : torch.Tensor of dtype bool and shape (n_masks, n_features) or \
            (n_samples, n_masks, n_features)
        No mask may be empty.
    generator : torch.Generator, default=None
        Passed to a stochastic model (``None``: its draws come from torch's global generator).
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features), default=None
        Entries not observed (``False``). The masks must lie among each sample's observed
        entries (:func:`skmpt.masks.observed_masks` draws them so) and each mask is weighted
        by ``|o| / |m|`` instead of ``D / |m|``: with sizes uniform on ``1..|o|`` the objective
        is an unbiased estimate of ``log p(x_o)``. A sample with nothing observed has empty
        masks and an objective of zero.

    Returns
    -------
    objective : torch.Tensor of shape (n_samples,)

    Examples
    --------
    >>> import torch
    >>> from skmpt.masks import uniform_size_masks
    >>> from skmpt.objectives import mpt_objective
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> X = torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64)
    >>> masks = uniform_size_masks((1, 4), 3, random_state=0)
    >>> mpt_objective(joint, X, masks).shape
    torch.Size([1])
    """
    check_masks(masks, X)
    sizes = masks.sum(-1)
    if observed is None:
        if bool((sizes == 0).any()):
            raise ValueError("Every mask must mask at least one token; got an empty mask.")
        sums = masked_log_prob_sum(model, X, masks, generator=generator)
        return (sums * (X.shape[1] / sizes.to(X.dtype))).mean(-1)
    n_observed = observed.sum(-1, keepdim=True)
    if bool(((sizes == 0) & (n_observed > 0)).any()):
        raise ValueError(
            "Every mask of a sample with observed entries must mask at least one of them; got an empty mask."
        )
    sums = masked_log_prob_sum(model, X, masks, generator=generator, observed=observed)
    return (sums * (n_observed / sizes.clamp(min=1)).to(X.dtype)).mean(-1)


def log_marginal(model, X, *, generator=None, observed=None, **options):
    """The model's own log-marginal likelihood ``log p(x)`` (exact or estimated), per sample.

    Parameters
    ----------
    model : object
        Has ``log_marginal(X)`` (see :class:`skmpt.models.MaskedModel`).
    X : torch.Tensor of shape (n_samples, n_features)
    generator : torch.Generator, default=None
        Passed to a stochastic model's estimate when given.
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features), default=None
        Entries not observed: the model's ``log p(x_o)`` of the observed sub-vector.
    **options
        Passed to ``model.log_marginal`` (e.g. ``n_samples`` of an importance-sampled one).

    Returns
    -------
    log_marginal : torch.Tensor of shape (n_samples,)

    Examples
    --------
    >>> import torch
    >>> from skmpt.objectives import log_marginal
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint([[0.1, 0.2], [0.3, 0.4]])
    >>> X = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    >>> round(float(log_marginal(joint, X).exp()), 6)
    0.3
    """
    if not hasattr(model, "log_marginal"):
        raise TypeError(f"{type(model).__name__} has no log_marginal(X) method.")
    if observed is not None:
        options["observed"] = observed
    return call_with_generator(model.log_marginal, X, generator=generator, **options)


def elbo(model, X, *, generator=None, observed=None):
    """The evidence lower bound, one reparameterised sample and the analytic KL, per sample.

    ``log p(x | z) - KL(q(z | x) || p(z))`` with ``z ~ q(z | x)``, a lower bound on
    ``log p(x)`` in expectation. The model has an amortised Gaussian encoder ``encode(X)`` →
    ``(mean, log_variance)`` and ``log_likelihood(X, Z)``; the prior is ``N(0, I)``.

    Parameters
    ----------
    model : object
        See :class:`skmpt.models.MaskedModel` (optional methods).
    X : torch.Tensor of shape (n_samples, n_features)
    generator : torch.Generator, default=None
        The sample's noise; ``None``: torch's global generator.
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features), default=None
        Entries not observed: the encoder sees ``model.fill`` (zero if it has none) there and
        the likelihood sums over the observed entries, a bound on ``log p(x_o)``.

    Returns
    -------
    elbo : torch.Tensor of shape (n_samples,)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import VAEModule
    >>> from skmpt.objectives import elbo
    >>> module = VAEModule(4, 2, (8,), "tanh", "gaussian")
    >>> X = torch.zeros(3, 4, dtype=torch.float64)
    >>> elbo(module, X, generator=torch.Generator().manual_seed(0)).shape
    torch.Size([3])
    """
    if observed is None:
        mean, log_var = model.encode(X)
        z = mean + (0.5 * log_var).exp() * standard_normal(mean.shape, X, generator)
        kl = 0.5 * (mean.square() + log_var.exp() - 1 - log_var).sum(-1)
        return model.log_likelihood(X, z) - kl
    mean, log_var = model.encode(torch.where(observed, X, getattr(model, "fill", 0.0)))
    z = mean + (0.5 * log_var).exp() * standard_normal(mean.shape, X, generator)
    kl = 0.5 * (mean.square() + log_var.exp() - 1 - log_var).sum(-1)
    return model.log_likelihood(X, z, observed=observed) - kl


def iwae(model, X, *, n_particles=16, generator=None, observed=None):
    """The importance-weighted bound (Burda et al., 2016) with ``n_particles`` draws, per sample.

    ``log (1/S) sum_s p(x, z_s) / q(z_s | x)`` with ``z_s ~ q(z | x)``: a tighter lower bound on
    ``log p(x)`` than :func:`elbo` (equal to it for one particle, in expectation). Needs what
    :func:`elbo` needs.

    Parameters
    ----------
    model : object
    X : torch.Tensor of shape (n_samples, n_features)
    n_particles : int, default=16
    generator : torch.Generator, default=None
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features), default=None
        As in :func:`elbo`: a bound on ``log p(x_o)`` (the MIWAE bound of Mattei and Frellsen, 2019).

    Returns
    -------
    bound : torch.Tensor of shape (n_samples,)

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import VAEModule
    >>> from skmpt.objectives import iwae
    >>> module = VAEModule(4, 2, (8,), "tanh", "gaussian")
    >>> X = torch.zeros(3, 4, dtype=torch.float64)
    >>> iwae(module, X, n_particles=5, generator=torch.Generator().manual_seed(0)).shape
    torch.Size([3])
    """
    n_particles = check_positive_int(n_particles, "n_particles")
    filled = X if observed is None else torch.where(observed, X, getattr(model, "fill", 0.0))
    encoded = model.encode(filled)
    noise = standard_normal((X.shape[0], n_particles, encoded[0].shape[-1]), X, generator)
    options = {} if observed is None else {"observed": observed}
    log_weights = importance_log_weights(model, X, noise, encoded=encoded, **options)
    return torch.logsumexp(log_weights, dim=1) - math.log(n_particles)


#: Training objectives by name, each returning a log-likelihood per sample (to maximise):
#: ``"mpt"`` takes ``(model, X, masks)``, the others ``(model, X)``; all take ``generator=``.
OBJECTIVES = {"mpt": mpt_objective, "elbo": elbo, "iwae": iwae, "lml": log_marginal}
