"""The MPT identity, measured: how far ``sum_M S(x; M)`` lies from ``log p(x)``.

:func:`check_mpt_identity` measures the discrepancy, zero (to rounding) when a model's masked
conditionals come from one joint density and the size of their inconsistency otherwise;
:func:`assert_mpt_identity` asserts that it is zero to a tolerance.
"""

from dataclasses import dataclass

import numpy as np
import torch

from ..objectives import cumulative_score, renamed_parameter
from ._inputs import as_model_and_tensor

__all__ = ["IdentityCheck", "assert_mpt_identity", "check_mpt_identity"]


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


def check_mpt_identity(model, X, *, score_method="exhaustive", score_masks=100, log_marginal=None, random_state=None,
                       method="deprecated"):
    """Measure ``sum_M S(x; M) - log p(x)`` for a model on a small-``D`` sample.

    Parameters
    ----------
    model : fitted skmpt estimator or model object
        An estimator must be fitted (``NotFittedError`` otherwise). A model object has
        ``masked_log_prob_sum`` or ``masked_log_prob``
        (:mod:`skmpt.objectives`), and ``log_marginal`` unless ``log_marginal`` is given.
    X : array-like or torch.Tensor of shape (n_samples, n_features)
    score_method : {"exhaustive", "sweep", "nested", "chain"}, default="exhaustive"
        How the cumulative score is computed (:func:`skmpt.objectives.mpt_curve`);
        ``"exhaustive"`` makes any discrepancy the model's own.
    score_masks : int, default=100
        Masks per size or orderings, for the sampling methods (ignored by ``"exhaustive"``),
        as in :func:`skmpt.objectives.cumulative_score`.
    log_marginal : array-like of shape (n_samples,), default=None
        Reference values; by default ``model.log_marginal(X)``.
    random_state : see :func:`skmpt.masks.check_generator`, default=None
    method : str
        The 0.1.0 spelling of ``score_method``: deprecated, with a ``FutureWarning``.

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
    score_method = renamed_parameter("method", method, "score_method", score_method, "check_mpt_identity")
    module, tensor = as_model_and_tensor(model, X)
    with torch.no_grad():
        cumulative = cumulative_score(module, tensor, score_method=score_method, score_masks=score_masks,
                                      random_state=random_state)
        reference = module.log_marginal(tensor) if log_marginal is None else log_marginal
    cumulative = cumulative.detach().to("cpu", torch.float64).numpy()
    if isinstance(reference, torch.Tensor):
        reference = reference.detach().to("cpu", torch.float64).numpy()
    reference = np.asarray(reference, dtype=np.float64)
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
