"""Torch modules, one per probabilistic model.

Each module computes its own masked conditionals (``masked_log_prob_sum`` and, where it
can, the per-token ``masked_log_prob``), its log-marginal likelihood ``log_marginal`` and
its latent posterior; :mod:`skmpt.objectives` builds everything else from those.
"""

from .factor_analysis import FactorAnalysisModule
from .gaussian_mixture import GaussianMixtureModule
from .linear_vae import LinearVAEModule
from .ppca import PPCAModule
from .vae import VAEModule

__all__ = ["FactorAnalysisModule", "GaussianMixtureModule", "LinearVAEModule", "PPCAModule", "VAEModule"]
