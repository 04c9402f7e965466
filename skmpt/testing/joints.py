"""A reference model whose masked conditionals are exact by construction."""

import numpy as np
import torch

from .._utils import check_generator
from ..models import MaskedModel
from ..models.contract import conditioning_set

__all__ = ["TabularJoint"]


class TabularJoint(MaskedModel):
    """A distribution over binary vectors given by its full probability table.

    Its masked conditionals are computed by brute force from the table, so they are
    consistent with one joint and the MPT identity holds exactly: a reference model (a
    deterministic :class:`~skmpt.models.MaskedModel` with only the reference method and
    ``log_marginal``). Entries not ``observed`` are summed out of the table, so the identity
    over the observed entries holds exactly too.

    Parameters
    ----------
    probabilities : array-like of shape (2,) * n_features
        Non-negative, summing to one; entry ``[x_1, ..., x_D]`` is ``p(x)``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint([[0.1, 0.2], [0.3, 0.4]])
    >>> X = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    >>> round(float(joint.log_marginal(X).exp()), 6)
    0.3
    >>> # p(x_1 = 1 | x_2 = 0) = 0.3 / (0.1 + 0.3)
    >>> mask = torch.tensor([[True, False]])
    >>> round(float(joint.masked_log_prob(X, mask)[0, 0, 0].exp()), 6)
    0.75
    >>> # p(x_1 = 1), x_2 not observed: 0.3 + 0.4
    >>> round(float(joint.log_marginal(X, observed=torch.tensor([True, False])).exp()), 6)
    0.7
    """

    def __init__(self, probabilities):
        super().__init__()
        table = torch.as_tensor(np.asarray(probabilities, dtype=np.float64))
        n_features = table.ndim
        if table.shape != (2,) * n_features or n_features < 1:
            raise ValueError(f"probabilities must have shape (2,) * n_features; got {tuple(table.shape)}.")
        if bool((table < 0).any()) or not np.isclose(float(table.sum()), 1.0):
            raise ValueError("probabilities must be non-negative and sum to one.")
        self.n_features = n_features
        self.register_buffer("probabilities", table.reshape(-1))
        # configurations[c] is the binary vector of table entry c (row-major order).
        grid = torch.cartesian_prod(*[torch.tensor([0.0, 1.0], dtype=torch.float64)] * n_features)
        self.register_buffer("configurations", grid.reshape(-1, n_features))

    @classmethod
    def random(cls, n_features, *, concentration=1.0, random_state=None):
        """A table drawn from a symmetric Dirichlet distribution."""
        seed = int(torch.randint(2**62, (1,), generator=check_generator(random_state)))
        weights = np.random.default_rng(seed).dirichlet(np.full(2**n_features, float(concentration)))
        return cls(weights.reshape((2,) * n_features))

    def _agreement(self, X, observed=None):
        X = X.to(torch.float64)
        if observed is not None:  # what an entry not observed holds is not data
            X = torch.where(observed, X, torch.zeros_like(X))
        if bool(((X != 0) & (X != 1)).any()):
            raise ValueError("TabularJoint models binary data: X must contain only 0 and 1.")
        # agree[n, c, d]: does configuration c match sample n at feature d?
        return X.unsqueeze(1) == self.configurations.unsqueeze(0)

    def log_marginal(self, X, *, generator=None, observed=None):
        """``log p(x)`` per sample (``log p(x_o)`` with ``observed``), shape ``(n_samples,)``;
        ``generator`` is not used (the table is exact)."""
        agree = self._agreement(X, observed)
        if observed is not None:
            agree = agree | ~observed.unsqueeze(-2)
        log_p = (agree.all(-1).to(torch.float64) @ self.probabilities).log().to(X.dtype)
        # Nothing observed: log p(x_o) = log 1, exactly (the table's sum may round off one).
        return log_p if observed is None else torch.where(observed.any(-1), log_p, torch.zeros_like(log_p))

    def masked_log_prob(self, X, masks, *, generator=None, observed=None):
        """Per-token ``log p(x_j | x_r)`` at masked positions, zero elsewhere.

        Returns a tensor of shape ``(n_samples, n_masks, n_features)``; ``r`` holds the unmasked
        ``observed`` entries, ``generator`` is not used (the table is exact).
        """
        agree = self._agreement(X, observed)
        masks = masks.to(X.device)
        if masks.ndim == 2:
            masks = masks.unsqueeze(0).expand(X.shape[0], -1, -1)
        masks, given = conditioning_set(masks, observed)
        # match_rest[n, p, c]: configuration c agrees with sample n on the features conditioned on.
        match_rest = (agree.unsqueeze(1) | ~given.unsqueeze(2)).all(-1).to(torch.float64)
        p_rest = match_rest @ self.probabilities
        weighted = match_rest * self.probabilities
        # p_joint[n, p, j] = p(x_j, x_r): configurations that also agree at j.
        p_joint = weighted @ agree.to(torch.float64)
        log_cond = p_joint.log() - p_rest.unsqueeze(-1).log()
        return torch.where(masks, log_cond, torch.zeros_like(log_cond)).to(X.dtype)

    def sample(self, n_samples, *, random_state=None):
        """Draw ``n_samples`` binary vectors, as a float64 tensor of shape ``(n, D)``."""
        generator = check_generator(random_state)
        index = torch.multinomial(self.probabilities, n_samples, replacement=True, generator=generator)
        return self.configurations[index]
