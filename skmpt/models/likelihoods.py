r"""Likelihoods of the observed tokens given a decoder's output, as objects.

A likelihood turns a decoder's raw output ``a`` (one number per token) into per-token
log-densities ``log p(x_d | a_d)``, the mean of ``x_d``, and a check of the data it accepts.
Both here are exponential families in ``x``,

.. math::

    \log p(x \mid a) = x\,\eta_1(a) + x^2\,\eta_2 + c(a),

which :meth:`Likelihood.natural_terms` exposes, so that a sum over tokens of log-densities
is a matrix product with the data (the linear VAE's grid posterior).
"""

import math

import torch
import torch.nn.functional as F

from .._utils import chunk_budget

__all__ = ["LIKELIHOODS", "Bernoulli", "Gaussian", "Likelihood", "make_likelihood"]


class Likelihood(torch.nn.Module):
    """Base class: ``log p(x_d | a_d)`` for a decoder output ``a``, elementwise.

    Subclasses define :attr:`name`, :meth:`log_prob`, :meth:`mean`, :meth:`natural_terms`,
    :meth:`mixture_log_prob` and :meth:`check`; learnable parameters (a noise variance) are
    parameters of the likelihood module. :data:`LIKELIHOODS` maps each :attr:`name` to its class.
    """

    #: The name estimators use for the likelihood (their ``likelihood`` parameter).
    name = None

    def log_prob(self, X, out):
        """``log p(x | a)`` elementwise, broadcasting ``X`` against the output ``out``."""
        raise NotImplementedError

    def mean(self, out):
        """``E[x | a]`` elementwise."""
        raise NotImplementedError

    def sample(self, out, generator=None):
        """A draw of ``x`` given the decoder output ``out``, elementwise (``generator``: a CPU
        :class:`torch.Generator`, or None for torch's global one)."""
        raise NotImplementedError

    def natural_terms(self, out):
        """``(linear, square, constant)`` with ``log p(x | a) = x linear + x^2 square + constant``.

        ``square`` is ``None`` when there is no quadratic term.
        """
        raise NotImplementedError

    def mixture_log_prob(self, X, log_weights, out):
        """``log sum_g w_g p(x_d | a_gd)`` for every token: a finite mixture of decoder outputs.

        Parameters
        ----------
        X : torch.Tensor of shape (n_samples, D)
        log_weights : torch.Tensor of shape (n_samples, P, G)
            Normalised over ``G`` for each sample and mask.
        out : torch.Tensor of shape (G, D)

        Returns
        -------
        log_prob : torch.Tensor of shape (n_samples, P, D)
        """
        raise NotImplementedError

    @classmethod
    def check(cls, X):
        """Raise ``ValueError`` naming the problem if ``X`` holds values the likelihood cannot.

        The check of data entering a model with this likelihood (the estimators' input
        checks, at fit and at score time); a class method, so that it runs before any model
        is built. The base class accepts everything.
        """

    def unstandardize_(self, scale):
        """Map a likelihood fitted on data divided by ``scale`` back; in place, returns self."""
        raise ValueError(f"The {self.name} likelihood is not closed under rescaling the data.")


class Bernoulli(Likelihood):
    """``x ~ Bernoulli(sigmoid(a))`` for binary data.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.likelihoods import Bernoulli
    >>> out = torch.tensor([0.0, 2.0], dtype=torch.float64)
    >>> Bernoulli().log_prob(torch.tensor([1.0, 0.0], dtype=torch.float64), out).exp()
    tensor([0.5000, 0.1192], dtype=torch.float64)
    >>> Bernoulli.check(torch.tensor([0.0, 2.0]))
    Traceback (most recent call last):
    ...
    ValueError: likelihood='bernoulli' models binary data: X must contain only 0 and 1, but it contains 2 ...
    """

    name = "bernoulli"

    def log_prob(self, X, out):
        # x a - softplus(a) for x in {0, 1}: log sigmoid(+-a) without overflow.
        return X * out - F.softplus(out)

    def mean(self, out):
        return torch.sigmoid(out)

    def sample(self, out, generator=None):
        uniform = torch.rand(out.shape, generator=generator, dtype=out.dtype).to(out.device)
        return (uniform < torch.sigmoid(out)).to(out.dtype)

    def natural_terms(self, out):
        return out, None, -F.softplus(out)

    def mixture_log_prob(self, X, log_weights, out):
        weights = log_weights.exp()
        # Both probabilities from their own sigmoid: accurate near 0 and near 1 alike.
        one = weights @ torch.sigmoid(out)
        zero = weights @ torch.sigmoid(-out)
        # The floor keeps log finite where a probability underflows to zero.
        return torch.where(X.unsqueeze(1) > 0.5, one, zero).clamp_min(torch.finfo(X.dtype).tiny).log()

    @classmethod
    def check(cls, X):
        bad = (X != 0) & (X != 1)
        if bool(bad.any()):
            raise ValueError(
                f"likelihood='bernoulli' models binary data: X must contain only 0 and 1, but it "
                f"contains {float(X[bad][0]):g} (and {int(bad.sum()) - 1} other non-binary values). "
                f"Binarise it first, e.g. with binarize=0.0 (where the estimator has it) or "
                f"sklearn.preprocessing.Binarizer."
            )


class Gaussian(Likelihood):
    """``x ~ N(a, v)`` with a learned variance ``v``: one for all tokens or one per token.

    Parameters
    ----------
    variance : torch.Tensor of shape () or (D,)
        Initial variance (above ``floor``); stored as ``log(variance - floor)``.
    floor : float or None, default=None
        A lower bound added to the learned part, ``v = floor + exp(log_variance)``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.likelihoods import Gaussian
    >>> gaussian = Gaussian(torch.tensor(1.0, dtype=torch.float64))
    >>> float(gaussian.log_prob(torch.zeros(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)).detach())
    -0.9189385332046727
    """

    name = "gaussian"

    def __init__(self, variance, *, floor=None):
        super().__init__()
        if floor is None:
            self.variance_floor = None
            self.log_variance = torch.nn.Parameter(variance.log())
        else:
            floor = torch.as_tensor(float(floor), dtype=variance.dtype, device=variance.device)
            # A learned variance can shrink without bound on constant features and make the
            # likelihood infinite; the floor (in the units of the data) prevents that.
            self.register_buffer("variance_floor", floor)
            self.log_variance = torch.nn.Parameter((variance - floor).log())

    def variance(self):
        """``v``: ``exp(log_variance)``, plus the floor when there is one."""
        variance = self.log_variance.exp()
        return variance if self.variance_floor is None else self.variance_floor + variance

    def log_prob(self, X, out):
        variance = self.variance()
        return -0.5 * (torch.log(2 * math.pi * variance) + (X - out).square() / variance)

    def mean(self, out):
        return out

    def sample(self, out, generator=None):
        noise = torch.randn(out.shape, generator=generator, dtype=out.dtype).to(out.device)
        return out + self.variance().sqrt() * noise

    def natural_terms(self, out):
        variance = self.variance()
        return out / variance, -0.5 / variance, -0.5 * (out.square() / variance + torch.log(2 * math.pi * variance))

    def mixture_log_prob(self, X, log_weights, out):
        out_ = []
        # (n, P, G, D) per chunk of masks, up to the working memory (2**24 numbers by default):
        # Gaussian predictives are not matrix products.
        chunk = max(1, chunk_budget() // (X.shape[0] * out.numel()))
        for start in range(0, log_weights.shape[1], chunk):
            weights = log_weights[:, start : start + chunk].unsqueeze(-1)
            out_.append(torch.logsumexp(weights + self.log_prob(X[:, None, None, :], out), dim=2))
        return torch.cat(out_, dim=1)

    @classmethod
    def check(cls, X):
        if not bool(torch.isfinite(X).all()):
            raise ValueError("likelihood='gaussian' needs finite data; X contains NaN or infinity.")

    def unstandardize_(self, scale):
        if self.variance_floor is not None:
            self.variance_floor = self.variance_floor * scale.square()  # per feature when the scale is
        self.log_variance.add_(2 * torch.log(scale))
        return self


def make_likelihood(name, like, *, variance=1.0, floor=None):
    """The likelihood called ``name``, with parameters of the dtype and device of ``like``.

    Parameters
    ----------
    name : {"bernoulli", "gaussian"}
    like : torch.Tensor
        Gives the dtype and device.
    variance : float or torch.Tensor, default=1.0
        Initial Gaussian variance: a number, or one per feature.
    floor : float or None, default=None
        Gaussian variance floor.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.likelihoods import make_likelihood
    >>> make_likelihood("bernoulli", torch.zeros(1)).name
    'bernoulli'
    """
    if name == "bernoulli":
        return Bernoulli()
    if name == "gaussian":
        return Gaussian(torch.as_tensor(variance, dtype=like.dtype, device=like.device), floor=floor)
    raise ValueError(f"likelihood must be one of {tuple(LIKELIHOODS)}; got {name!r}.")


#: The likelihood classes by name: the values of an estimator's ``likelihood`` parameter.
LIKELIHOODS = {likelihood.name: likelihood for likelihood in (Bernoulli, Gaussian)}
