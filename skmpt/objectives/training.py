"""Training objectives: the MPT objective, the ELBO, the importance-weighted bound and the
log-marginal likelihood, each a log-likelihood per sample to maximise.

They take a model following :class:`skmpt.models.MaskedModel`; see :mod:`skmpt.objectives`.
"""

import math
from dataclasses import dataclass

import torch

from .._validation import check_positive_int
from ..models import as_masked_model
from ..models.contract import importance_log_weights, model_name, standard_normal

__all__ = [
    "OBJECTIVES",
    "Moments",
    "check_masks",
    "check_output",
    "elbo",
    "iwae",
    "log_marginal",
    "masked_log_prob_sum",
    "moment_mpt_objective",
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
    """The generator a stochastic model draws from: a copy of the masks' generator, else None.

    ``model`` is a :class:`skmpt.models.MaskedModel` (:func:`skmpt.models.as_masked_model`).
    """
    if not model.stochastic:
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
            f"{model_name(model)}.{method} returned {got} for X of shape {tuple(X.shape)} and "
            f"masks (or orderings) of shape {tuple(masks.shape)}; the contract asks for {tuple(shape)}. "
            f"skmpt.testing.check_masked_model checks a model against every shape it is called with."
        )
    return values


def masked_log_prob_sum(model, X, masks, *, generator=None, observed=None):
    """``sum_{j in m} log p(x_j | x_r)``: the model's ``masked_log_prob_sum``, its shape checked.

    Parameters
    ----------
    model : MaskedModel or object
        See the module docstring; an object that is not a :class:`~skmpt.models.MaskedModel` is
        wrapped by :func:`skmpt.models.as_masked_model`.
    X : torch.Tensor of shape (n_samples, n_features)
    masks : torch.Tensor of dtype bool and shape (n_masks, n_features) or \
            (n_samples, n_masks, n_features)
    generator : torch.Generator, default=None
        The noise of a stochastic model (a deterministic one ignores it).
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features) or (n_features,), default=None
        Entries not observed (``False``), marginalised out.

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
    model = as_masked_model(model)
    check_masks(masks, X)
    sums = model.masked_log_prob_sum(X, masks, generator=generator, observed=observed)
    return check_output(sums, (X.shape[0], masks.shape[-2]), model, "masked_log_prob_sum", X, masks)


def mpt_objective(model, X, masks, *, generator=None, observed=None):
    """The masked pre-training objective, rescaled to the scale of ``log p(x)``.

    For each sample and each of its masks, ``(D / |m|) * sum_{j in m} log p(x_j | x_r)``,
    averaged over the masks. With mask sizes uniform on ``1..D`` this is an unbiased
    estimate of ``log p(x)``; with a fixed size ``M`` it estimates ``D * S(x; M)``, which is
    biased (see :func:`fixed_rate_bias`). The sign is that of a log-likelihood: maximise it
    (minimise its negative mean).

    Parameters
    ----------
    model : MaskedModel or object
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
    model = as_masked_model(model)
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


@dataclass
class Moments:
    """The weighted mean and covariance of a set of samples: all that a Gaussian model's MPT
    objective over masks shared by the samples depends on.

    Parameters
    ----------
    weight : torch.Tensor of shape ()
        The samples' total weight (their number when unweighted).
    mean : torch.Tensor of shape (n_features,)
    covariance : torch.Tensor of shape (n_features, n_features)
        About ``mean``, divided by ``weight``.

    Examples
    --------
    Moments of two halves combine into those of the whole:

    >>> import torch
    >>> from skmpt.objectives import Moments
    >>> X = torch.randn(10, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> both = Moments.from_samples(X[:4]) + Moments.from_samples(X[4:])
    >>> bool(torch.allclose(both.covariance, Moments.from_samples(X).covariance))
    True
    """

    weight: torch.Tensor
    mean: torch.Tensor
    covariance: torch.Tensor

    @classmethod
    def from_samples(cls, X, sample_weight=None, *, chunk_size=65536):
        """The moments of the rows of ``X`` (weighted by ``sample_weight``), in one pass of
        ``chunk_size`` rows at a time (memory does not grow with the number of rows)."""
        if sample_weight is None:
            weight = X.new_tensor(float(X.shape[0]))
            mean = X.mean(0)
        else:
            weight = sample_weight.sum()
            mean = sample_weight @ X / weight
        covariance = X.new_zeros(X.shape[1], X.shape[1])
        for start in range(0, X.shape[0], chunk_size):
            centred = X[start : start + chunk_size] - mean
            weighted = centred if sample_weight is None else centred * sample_weight[start : start + chunk_size, None]
            covariance.addmm_(weighted.T, centred)
        return cls(weight, mean, covariance / weight)

    def __add__(self, other):
        """The moments of both sets of samples (Chan, Golub and LeVeque's pairwise update)."""
        weight = self.weight + other.weight
        delta = other.mean - self.mean
        share = other.weight / weight
        mean = self.mean + share * delta
        covariance = (1 - share) * self.covariance + share * other.covariance
        covariance = covariance + (share * (1 - share)) * torch.outer(delta, delta)
        return Moments(weight, mean, covariance)


def moment_mpt_objective(model, moments, masks, *, observed=None):
    """The mean over the samples of :func:`mpt_objective` with masks shared by the samples, from
    their :class:`Moments`.

    For a Gaussian model the sum of the masked log-densities over a shared mask is a quadratic
    form in each sample, so its mean over the samples depends on them only through their mean
    and covariance: the cost of a training step no longer grows with the number of samples.
    The expectation over masks is that of per-sample masks, so the optimum is the same.

    Parameters
    ----------
    model : MaskedModel
        With ``moment_log_prob_sum(mean, covariance, masks, weights, observed=)`` (the
        linear-Gaussian modules).
    moments : Moments
    masks : torch.Tensor of dtype bool and shape (n_masks, n_features)
        Shared by the samples; none empty; among ``observed`` entries when given.
    observed : torch.Tensor of dtype bool and shape (n_features,), default=None
        The pattern of observed entries shared by the samples (None: all): each mask is then
        weighted by ``|o| / |m|``, as in :func:`mpt_objective`.

    Returns
    -------
    objective : torch.Tensor of shape ()

    Examples
    --------
    >>> import torch
    >>> from skmpt.masks import uniform_size_masks
    >>> from skmpt.models import PPCAModule
    >>> from skmpt.objectives import Moments, moment_mpt_objective, mpt_objective
    >>> g = torch.Generator().manual_seed(0)
    >>> W, mu = torch.randn(1, 4, generator=g, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    >>> module = PPCAModule(W, mu, 0.5)
    >>> X = torch.randn(30, 4, generator=g, dtype=torch.float64)
    >>> masks = uniform_size_masks((8,), 4, random_state=0)
    >>> mean = moment_mpt_objective(module, Moments.from_samples(X), masks)
    >>> bool(torch.allclose(mean, mpt_objective(module, X, masks).mean()))
    True
    """
    if masks.ndim != 2:
        raise ValueError(
            f"masks must be shared by the samples, of shape (n_masks, n_features); got {tuple(masks.shape)}."
        )
    sizes = masks.sum(-1)
    if bool((sizes == 0).any()):
        raise ValueError("Every mask must mask at least one token; got an empty mask.")
    n_tokens = masks.shape[-1] if observed is None else int(observed.sum())
    weights = (n_tokens / sizes.to(moments.mean.dtype)) / masks.shape[0]
    return model.moment_log_prob_sum(moments.mean, moments.covariance, masks, weights, observed=observed)


def log_marginal(model, X, *, generator=None, observed=None, **options):
    """The model's own log-marginal likelihood ``log p(x)`` (exact or estimated), per sample.

    Parameters
    ----------
    model : MaskedModel or object
        Provides ``log_marginal`` (see :class:`skmpt.models.MaskedModel`).
    X : torch.Tensor of shape (n_samples, n_features)
    generator : torch.Generator, default=None
        The noise of a stochastic model's estimate.
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features), default=None
        Entries not observed: the model's ``log p(x_o)`` of the observed sub-vector.
    **options
        Passed to ``model.log_marginal`` (e.g. ``n_lml_samples`` of an importance-sampled one).

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
    return as_masked_model(model).log_marginal(X, generator=generator, observed=observed, **options)


def elbo(model, X, *, generator=None, observed=None):
    """The evidence lower bound, one reparameterised sample and the analytic KL, per sample.

    ``log p(x | z) - KL(q(z | x) || p(z))`` with ``z ~ q(z | x)``, a lower bound on
    ``log p(x)`` in expectation. The model has an amortised Gaussian encoder ``encode(X)`` →
    ``(mean, log_variance)`` and ``log_likelihood(X, Z)``; the prior is ``N(0, I)``.

    Parameters
    ----------
    model : MaskedModel or object
        Provides ``encode`` and ``log_likelihood`` (see :class:`skmpt.models.MaskedModel`).
    X : torch.Tensor of shape (n_samples, n_features)
    generator : torch.Generator, default=None
        The sample's noise; ``None``: torch's global generator.
    observed : torch.Tensor of dtype bool and shape (n_samples, n_features), default=None
        Entries not observed: left out of what the encoder sees (``encode(X, observed=)``) and
        of the likelihood, a bound on ``log p(x_o)``.

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
    model = as_masked_model(model)
    mean, log_var = model.encode(X, observed=observed)
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
    model : MaskedModel or object
        As in :func:`elbo`.
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
    model = as_masked_model(model)
    encoded = model.encode(X, observed=observed)
    noise = standard_normal((X.shape[0], n_particles, encoded[0].shape[-1]), X, generator)
    log_weights = importance_log_weights(model, X, noise, encoded=encoded, observed=observed)
    return torch.logsumexp(log_weights, dim=1) - math.log(n_particles)


#: Training objectives by name, each returning a log-likelihood per sample (to maximise):
#: ``"mpt"`` takes ``(model, X, masks)``, the others ``(model, X)``; all take ``generator=``.
OBJECTIVES = {"mpt": mpt_objective, "elbo": elbo, "iwae": iwae, "lml": log_marginal}
