"""TEMPORARY re-exports for the modules that still import from here (skmpt/_base.py,
skmpt/objectives.py, skmpt/testing.py); delete once they import skmpt.models' public names
and skmpt._utils.call_with_generator."""

from .._utils import call_with_generator as _with_generator  # noqa: F401
from .contract import (  # noqa: F401
    MaskedModel,
    has_own_chain,
    has_own_weighted_sum,
    importance_log_weights,
    reference_chain_log_prob,
    standard_normal,
)
