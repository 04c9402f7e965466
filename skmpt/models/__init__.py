"""Torch modules, one per probabilistic model, and the contract they follow.

:class:`MaskedModel` states the contract: the reference
per-token conditionals ``masked_log_prob(X, masks)``, the fast paths computed from them by
default (``masked_log_prob_sum``, ``weighted_log_prob_sum``, ``chain_log_prob``), and every
optional member with its default (``stochastic``, ``mask_chunk``, ``handles_missing``,
``log_marginal``, ``posterior``, ``decode``, ``encode``, ``log_likelihood``, ``impute``,
``sample_missing``, ``unstandardize_``, ``shared_mask_chunk``); :func:`as_masked_model` wraps
an object that is not a subclass.
:mod:`skmpt.objectives` builds everything else from those;
:func:`skmpt.testing.check_masked_model` checks that a model keeps the contract.

The models: :class:`LinearGaussianModule` with its
isotropic case :class:`PPCAModule` and its diagonal case :class:`FactorAnalysisModule`;
:class:`GaussianMixtureModule`; and the VAEs, :class:`LinearVAEModule` and :class:`VAEModule`,
whose observation models are Bernoulli or Gaussian likelihood objects.
"""

from .._utils import moved_names
from .contract import CONTRACT_KEYWORDS, MaskedModel, MaskedModelAdapter, as_masked_model, provides
from .gaussian_mixture import GaussianMixtureModule
from .importance import importance_diagnostics
from .linear_gaussian import FactorAnalysisModule, LinearGaussianModule, PPCAModule
from .linear_vae import LinearVAEModule
from .vae import VAEModule

__all__ = [
    "CONTRACT_KEYWORDS",
    "FactorAnalysisModule",
    "GaussianMixtureModule",
    "LinearGaussianModule",
    "LinearVAEModule",
    "MaskedModel",
    "MaskedModelAdapter",
    "PPCAModule",
    "VAEModule",
    "as_masked_model",
    "importance_diagnostics",
    "provides",
]

# 0.1.0 exported these helpers here; they are documented, and imported, from their modules.
__getattr__ = moved_names(__name__, {
    **dict.fromkeys(["conditioning_set", "gaussian_log_prob", "has_own_chain", "has_own_weighted_sum",
                     "importance_log_weights", "model_name", "reference_chain_log_prob", "standard_normal",
                     "standard_normal_log_prob"], "skmpt.models.contract"),
    **dict.fromkeys(["pareto_k_threshold", "pareto_khat"], "skmpt.models.importance"),
})
