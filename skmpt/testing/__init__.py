"""Checks of the masked-model contract and of the MPT identity, for skmpt's tests and for yours.

- :func:`check_masked_model` runs every check of the masked-model contract
  (:data:`MASKED_MODEL_CHECKS`, one function per rule, as scikit-learn's estimator checks) on
  one :class:`MaskedModelCase`; each check also runs on its own, imported from its module
  (``skmpt.testing.checks``, as scikit-learn's checks from ``sklearn.utils.estimator_checks``).
- :func:`check_mpt_identity` measures how far the cumulative MPT score ``sum_M S(x; M)`` of a
  model lies from its log-marginal likelihood: zero (to rounding) when the model's masked
  conditionals come from one joint density, and the size of their inconsistency otherwise.
- :func:`~skmpt.testing.missing.check_incomplete_rows` (one of those checks) holds a model that
  handles missing entries (``handles_missing``) to the contract on rows with entries not observed.
- :func:`check_masked_predictor` is the same for the text side's masked predictors
  (:data:`MASKED_PREDICTOR_CHECKS`, :class:`skmpt.text.MaskedPredictor`): logits of the right
  shape, a valid mask id, a finite log-probability of each masked token (``-inf`` allowed at the
  tokens a model forbids), not hidden states, padding that changes nothing, determinism,
  and the user's module left as it was; its checks, one by one, are in ``skmpt.testing.predictors``.
- :data:`MODELS` is the registry of skmpt's own small models that every generic test runs over.
- :class:`TabularJoint` is a model whose conditionals are exact by construction (a probability
  table over ``{0, 1}**D``, conditioned by brute force), useful as a reference.
- The strategies (:func:`tabular_joints`, :func:`ppca_parameters`) need ``hypothesis``, which
  is imported only when they are called.

Examples
--------
>>> from skmpt.testing import MASKED_MODEL_CHECKS, TabularJoint, check_masked_model
>>> joint = TabularJoint.random(3, random_state=0)
>>> report = check_masked_model(joint, joint.sample(5, random_state=0))
>>> len(MASKED_MODEL_CHECKS), report["identity"] < 1e-12
(14, True)
"""

from .._utils import moved_names
from .case import MaskedModelCase
from .checks import MASKED_MODEL_CHECKS, check_masked_model
from .identity import IdentityCheck, assert_mpt_identity, check_mpt_identity
from .joints import TabularJoint
from .predictors import MASKED_PREDICTOR_CHECKS, MaskedPredictorCase, check_masked_predictor
from .registry import MODELS
from .strategies import ppca_parameters, tabular_joints

__all__ = [
    "MASKED_MODEL_CHECKS",
    "MASKED_PREDICTOR_CHECKS",
    "MODELS",
    "IdentityCheck",
    "MaskedModelCase",
    "MaskedPredictorCase",
    "TabularJoint",
    "assert_mpt_identity",
    "check_masked_model",
    "check_masked_predictor",
    "check_mpt_identity",
    "ppca_parameters",
    "tabular_joints",
]

# One check of a contract is called through its registry or from its module, as scikit-learn's
# individual estimator checks live in sklearn.utils.estimator_checks; 0.1.0 exported them here.
_MOVED = {
    **dict.fromkeys(
        [
            "check_batch_independence",
            "check_call_shapes",
            "check_chain_matches_reference",
            "check_decode_output",
            "check_identity",
            "check_log_marginal_output",
            "check_masked_log_prob_output",
            "check_masked_sum_matches_reference",
            "check_posterior_output",
            "check_randomness",
            "check_shared_and_per_sample_masks",
            "check_weighted_sum_matches_reference",
            "check_zero_at_observed",
        ],
        "skmpt.testing.checks",
    ),
    **dict.fromkeys(["check_incomplete_rows", "incomplete_pattern"], "skmpt.testing.missing"),
    **dict.fromkeys(
        [
            "check_deterministic",
            "check_finite_logits",
            "check_logits_shape",
            "check_mask_id",
            "check_module_unchanged",
            "check_not_hidden_states",
            "check_padding_invariance",
        ],
        "skmpt.testing.predictors",
    ),
}
__getattr__ = moved_names(__name__, _MOVED)
