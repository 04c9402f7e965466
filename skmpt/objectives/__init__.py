r"""The masked pre-training identity, for any model with masked conditionals.

For one observation ``x`` with ``D`` tokens, a mask ``m`` (the tokens to predict) and the
rest ``r``:

.. math::

    \log p(x) = \sum_{M=1}^{D} S(x; M), \qquad
    S(x; M) = \frac{1}{M}\, \mathbb{E}_{|m| = M}\Big[\sum_{j \in m} \log p(x_j \mid x_r)\Big],

exactly, whenever the conditionals come from one joint density (Moreno-Muñoz, Recasens and
Hauberg, 2023, Proposition 1; the proof averages the chain rule over random orderings).

The functions here take a *model* following the contract of
:class:`skmpt.models.MaskedModel`. A subclass is used as it is; any other object with a
``masked_log_prob`` method (duck typing) is wrapped once, where it enters, by
:func:`skmpt.models.as_masked_model`, so that every member below can be called directly:

``masked_log_prob(X, masks, *, generator=None, observed=None)``
    the reference: per-token ``log p(x_j | x_r)`` of shape ``(n_samples, n_masks, D)``, zero
    at the observed positions, for ``X`` of shape ``(n_samples, D)`` and boolean ``masks``
    (``True``: masked) of shape ``(n_masks, D)`` (shared by the samples) or
    ``(n_samples, n_masks, D)``;
``masked_log_prob_sum``, ``weighted_log_prob_sum``, ``chain_log_prob``
    the per-mask sums, their weighted sum over shared masks and the chain-rule terms along
    orderings, computed from the reference by default; a model's own faster paths must agree
    with it;
``log_marginal``, ``encode``, ``log_likelihood``
    optional (the default raises ``NotImplementedError``): :func:`log_marginal`,
    :func:`fixed_rate_bias`, :func:`elbo` and :func:`iwae` need them;
``stochastic``, ``mask_chunk``, ``shared_mask_chunk``
    declared with their defaults (False, None, None).

Every method takes ``generator`` and ``observed`` keywords. A model with ``stochastic = True``
(Monte Carlo conditionals) is passed a CPU :class:`torch.Generator` as ``generator=``: the
functions here make it a copy of the masks' generator, so a stochastic model is scored on the
same masks as a deterministic one with the same ``random_state``, and one ``random_state``
makes its scores reproducible. Such a model may fix an integer ``mask_chunk``: masks are then
passed to it that many at a time, whatever the number of samples, so that noise it draws per
call, shared by the samples, makes a sample's estimate independent of the others.

The training objectives are in one table, :data:`OBJECTIVES`: the MPT objective, the ELBO,
the importance-weighted bound (IWAE) and the log-marginal likelihood itself.

Every function returns log-likelihoods in nats (to maximise), per sample, as tensors on the
device and in the dtype of ``X``; a training loop negates them. Nothing here depends on
scikit-learn.
"""

from .curves import curve_area, mean_over_masks
from .scoring import cumulative_score, fixed_rate_bias, mpt_curve, score_at_size
from .training import (
    OBJECTIVES,
    Moments,
    elbo,
    iwae,
    log_marginal,
    masked_log_prob_sum,
    moment_mpt_objective,
    mpt_objective,
)
from .vocabulary import MPT_ESTIMATORS, SCORE_METHODS, MPTEstimator, renamed_parameter

__all__ = [
    "MPT_ESTIMATORS",
    "MPTEstimator",
    "OBJECTIVES",
    "Moments",
    "SCORE_METHODS",
    "cumulative_score",
    "curve_area",
    "elbo",
    "fixed_rate_bias",
    "iwae",
    "log_marginal",
    "masked_log_prob_sum",
    "mean_over_masks",
    "moment_mpt_objective",
    "mpt_curve",
    "mpt_objective",
    "renamed_parameter",
    "score_at_size",
]
