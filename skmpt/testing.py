"""Checks of the MPT identity and hypothesis strategies, for skmpt's tests and for yours.

:func:`check_mpt_identity` measures how far the cumulative MPT score ``sum_M S(x; M)`` of a
model lies from its log-marginal likelihood: zero (to rounding) when the model's masked
conditionals come from one joint density, and the size of their inconsistency otherwise.
:class:`TabularJoint` is a model whose conditionals are exact by construction (a probability
table over ``{0, 1}**D``, conditioned by brute force), useful as a reference.

The strategies (:func:`tabular_joints`, :func:`ppca_parameters`) need ``hypothesis``, which
is imported only when they are called.
"""

from dataclasses import dataclass

import numpy as np
import torch

from .masks import check_generator
from .objectives import cumulative_score

__all__ = [
    "IdentityCheck",
    "TabularJoint",
    "assert_mpt_identity",
    "check_mpt_identity",
    "ppca_parameters",
    "tabular_joints",
]


class TabularJoint:
    """A distribution over binary vectors given by its full probability table.

    Its masked conditionals are computed by brute force from the table, so they are
    consistent with one joint and the MPT identity holds exactly: a reference model.

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
    """

    def __init__(self, probabilities):
        table = torch.as_tensor(np.asarray(probabilities, dtype=np.float64))
        n_features = table.ndim
        if table.shape != (2,) * n_features or n_features < 1:
            raise ValueError(f"probabilities must have shape (2,) * n_features; got {tuple(table.shape)}.")
        if bool((table < 0).any()) or not np.isclose(float(table.sum()), 1.0):
            raise ValueError("probabilities must be non-negative and sum to one.")
        self.n_features = n_features
        self.probabilities = table.reshape(-1)
        # configurations[c] is the binary vector of table entry c (row-major order).
        grid = torch.cartesian_prod(*[torch.tensor([0.0, 1.0], dtype=torch.float64)] * n_features)
        self.configurations = grid.reshape(-1, n_features)

    @classmethod
    def random(cls, n_features, *, concentration=1.0, random_state=None):
        """A table drawn from a symmetric Dirichlet distribution."""
        seed = int(torch.randint(2**62, (1,), generator=check_generator(random_state)))
        weights = np.random.default_rng(seed).dirichlet(np.full(2**n_features, float(concentration)))
        return cls(weights.reshape((2,) * n_features))

    def _agreement(self, X):
        X = X.to(torch.float64)
        if bool(((X != 0) & (X != 1)).any()):
            raise ValueError("TabularJoint models binary data: X must contain only 0 and 1.")
        # agree[n, c, d]: does configuration c match sample n at feature d?
        return X.unsqueeze(1) == self.configurations.unsqueeze(0)

    def log_marginal(self, X):
        """``log p(x)`` per sample, shape ``(n_samples,)``."""
        match = self._agreement(X).all(-1).to(torch.float64)
        return (match @ self.probabilities).log().to(X.dtype)

    def masked_log_prob(self, X, masks):
        """Per-token ``log p(x_j | x_r)`` at masked positions, zero elsewhere.

        Returns a tensor of shape ``(n_samples, n_masks, n_features)``.
        """
        agree = self._agreement(X)
        masks = masks.to(X.device)
        if masks.ndim == 2:
            masks = masks.unsqueeze(0).expand(X.shape[0], -1, -1)
        # match_rest[n, p, c]: configuration c agrees with sample n on the observed features.
        match_rest = (agree.unsqueeze(1) | masks.unsqueeze(2)).all(-1).to(torch.float64)
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


@dataclass(frozen=True)
class IdentityCheck:
    """What :func:`check_mpt_identity` measured.

    Attributes
    ----------
    cumulative : ndarray of shape (n_samples,)
        The cumulative MPT score ``sum_M S(x; M)`` per sample.
    log_marginal : ndarray of shape (n_samples,)
        The model's log-marginal likelihood per sample.
    discrepancy : ndarray of shape (n_samples,)
        ``cumulative - log_marginal``: zero for consistent conditionals with exhaustive masks.

    Examples
    --------
    >>> from skmpt.testing import TabularJoint, check_mpt_identity
    >>> joint = TabularJoint.random(4, random_state=0)
    >>> check = check_mpt_identity(joint, joint.sample(5, random_state=0))
    >>> check.max_abs_discrepancy < 1e-9
    True
    """

    cumulative: np.ndarray
    log_marginal: np.ndarray
    discrepancy: np.ndarray

    @property
    def max_abs_discrepancy(self):
        """Largest absolute discrepancy over the samples, in nats."""
        return float(np.max(np.abs(self.discrepancy)))

    @property
    def max_rel_discrepancy(self):
        """Largest ``|discrepancy| / |log_marginal|`` over the samples."""
        return float(np.max(np.abs(self.discrepancy) / np.maximum(np.abs(self.log_marginal), 1e-300)))


def _model_and_tensor(model, X):
    """Accept a fitted skmpt estimator (its ``module_``) or a model object."""
    if hasattr(model, "module_") and hasattr(model, "_to_tensor"):
        return model.module_, model._to_tensor(X, reset=False)
    if isinstance(X, torch.Tensor):
        return model, X
    return model, torch.as_tensor(np.asarray(X, dtype=np.float64))


def check_mpt_identity(model, X, *, method="exhaustive", n_masks=100, log_marginal=None, random_state=None):
    """Measure ``sum_M S(x; M) - log p(x)`` for a model on a small-``D`` sample.

    Parameters
    ----------
    model : fitted skmpt estimator or model object
        A model object has ``masked_log_prob_sum`` or ``masked_log_prob``
        (:mod:`skmpt.objectives`), and ``log_marginal`` unless ``log_marginal`` is given.
    X : array-like or torch.Tensor of shape (n_samples, n_features)
    method : {"exhaustive", "sweep", "nested", "chain"}, default="exhaustive"
        How the cumulative score is computed (:func:`skmpt.objectives.mpt_curve`);
        ``"exhaustive"`` makes any discrepancy the model's own.
    n_masks : int, default=100
        Masks per size or orderings, for the sampling methods.
    log_marginal : array-like of shape (n_samples,), default=None
        Reference values; by default ``model.log_marginal(X)``.
    random_state : see :func:`skmpt.masks.check_generator`, default=None

    Returns
    -------
    check : IdentityCheck

    Examples
    --------
    >>> from skmpt.testing import TabularJoint, check_mpt_identity
    >>> joint = TabularJoint.random(4, random_state=0)
    >>> check = check_mpt_identity(joint, joint.sample(5, random_state=1))
    >>> check.max_abs_discrepancy < 1e-12
    True
    """
    module, tensor = _model_and_tensor(model, X)
    with torch.no_grad():
        cumulative = cumulative_score(module, tensor, method=method, n_masks=n_masks, random_state=random_state)
        reference = module.log_marginal(tensor) if log_marginal is None else log_marginal
    cumulative = cumulative.detach().cpu().numpy().astype(np.float64)
    reference = np.asarray(
        reference.detach().cpu().numpy() if isinstance(reference, torch.Tensor) else reference, dtype=np.float64
    )
    if reference.shape != cumulative.shape:
        raise ValueError(f"log_marginal must have shape {cumulative.shape}; got {reference.shape}.")
    return IdentityCheck(cumulative, reference, cumulative - reference)


def assert_mpt_identity(model, X, *, rtol=1e-9, atol=0.0, **kwargs):
    """Raise ``AssertionError`` unless ``sum_M S(x; M)`` equals ``log p(x)`` to tolerance.

    Keyword arguments go to :func:`check_mpt_identity`.

    Examples
    --------
    >>> from skmpt.testing import TabularJoint, assert_mpt_identity
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> assert_mpt_identity(joint, joint.sample(4, random_state=0))
    """
    check = check_mpt_identity(model, X, **kwargs)
    np.testing.assert_allclose(
        check.cumulative,
        check.log_marginal,
        rtol=rtol,
        atol=atol,
        err_msg="The cumulative MPT score differs from the log-marginal likelihood",
    )


def _strategies():
    try:
        from hypothesis import strategies as st
        from hypothesis.extra import numpy as hnp
    except ImportError as exc:  # pragma: no cover - exercised only without hypothesis
        raise ImportError(
            "skmpt.testing's strategies need hypothesis: pip install 'skmpt[test]'."
        ) from exc
    return st, hnp


def tabular_joints(min_features=1, max_features=6):
    """Hypothesis strategy for :class:`TabularJoint` models with random tables.

    Every entry is at least ``1e-3`` before normalisation, so no conditional is undefined.

    Examples
    --------
    >>> from hypothesis import given
    >>> from skmpt.testing import tabular_joints
    >>> @given(tabular_joints(max_features=3))
    ... def test_positive(joint):
    ...     assert float(joint.probabilities.min()) > 0
    >>> test_positive()
    """
    st, hnp = _strategies()

    @st.composite
    def build(draw):
        n_features = draw(st.integers(min_features, max_features))
        weights = draw(
            hnp.arrays(np.float64, (2,) * n_features, elements=st.floats(1e-3, 1.0, allow_subnormal=False))
        )
        return TabularJoint(weights / weights.sum())

    return build()


def ppca_parameters(min_features=1, max_features=7, max_components=3):
    """Hypothesis strategy for PPCA parameters ``(components, mean, noise_variance)``.

    ``components`` has shape ``(n_components, n_features)`` (scikit-learn's convention),
    with ``n_components <= n_features``; ``noise_variance`` lies in [0.05, 5].

    Examples
    --------
    >>> from hypothesis import given
    >>> from skmpt.testing import ppca_parameters
    >>> @given(ppca_parameters(max_features=4))
    ... def test_shapes(params):
    ...     components, mean, noise_variance = params
    ...     assert components.shape[1] == mean.shape[0]
    >>> test_shapes()
    """
    st, hnp = _strategies()
    value = st.floats(-3.0, 3.0, allow_nan=False, allow_subnormal=False)

    @st.composite
    def build(draw):
        n_features = draw(st.integers(min_features, max_features))
        n_components = draw(st.integers(1, min(max_components, n_features)))
        components = draw(hnp.arrays(np.float64, (n_components, n_features), elements=value))
        mean = draw(hnp.arrays(np.float64, (n_features,), elements=value))
        noise_variance = draw(st.floats(0.05, 5.0))
        return components, mean, noise_variance

    return build()
