"""Torch modules, one per probabilistic model, and the contract they follow.

:class:`MaskedModel` states the contract: the reference per-token conditionals
``masked_log_prob(X, masks)``, the fast paths computed from them by default
(``masked_log_prob_sum``, ``weighted_log_prob_sum``, ``chain_log_prob``), and the optional ``log_marginal``,
``posterior``, ``decode`` and ``unstandardize_``. :mod:`skmpt.objectives` builds everything
else from those; :func:`skmpt.testing.check_masked_model` checks that a model keeps the contract.
"""

from ._base import MaskedModel, reference_chain_log_prob, standard_normal
from .factor_analysis import FactorAnalysisModule
from .gaussian_mixture import GaussianMixtureModule
from .linear_vae import LinearVAEModule
from .ppca import PPCAModule
from .vae import VAEModule

__all__ = [
    "FactorAnalysisModule",
    "GaussianMixtureModule",
    "LinearVAEModule",
    "MaskedModel",
    "PPCAModule",
    "VAEModule",
    "reference_chain_log_prob",
    "standard_normal",
]
