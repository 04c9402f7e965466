"""One registry of small models, beside the estimators' one (:data:`skmpt.estimators.ESTIMATORS`).

Every generic test of the model contract runs over :data:`MODELS`. A new model is added here as a
function returning ``(model, X)`` (the model and a float64 sample of a few rows that it can score); it
then inherits the whole battery of ``tests/models/test_contract.py``, :func:`check_masked_model` first.

Examples
--------
>>> from skmpt.testing import MODELS, check_masked_model
>>> model, X = MODELS["ppca"]()
>>> X.shape
torch.Size([6, 5])
"""

import torch

from ..models import FactorAnalysisModule, GaussianMixtureModule, LinearVAEModule, PPCAModule, VAEModule
from .joints import TabularJoint


def _generator(seed):
    return torch.Generator().manual_seed(seed)


def ppca():
    g = _generator(0)
    W = torch.randn(2, 5, generator=g, dtype=torch.float64)
    module = PPCAModule(W, torch.randn(5, generator=g, dtype=torch.float64), 0.5)
    return module, torch.randn(6, 5, generator=g, dtype=torch.float64) + module.mean.detach()


def factor_analysis():
    g = _generator(4)
    W = torch.randn(2, 5, generator=g, dtype=torch.float64)
    psi = torch.rand(5, generator=g, dtype=torch.float64) + 0.2  # one noise variance per feature
    module = FactorAnalysisModule(W, torch.randn(5, generator=g, dtype=torch.float64), psi)
    return module, torch.randn(6, 5, generator=g, dtype=torch.float64) + module.mean.detach()


def gaussian_mixture(covariance_type="full"):
    g = _generator(5)
    means = 2 * torch.randn(3, 4, generator=g, dtype=torch.float64)
    if covariance_type == "full":
        A = torch.randn(3, 4, 4, generator=g, dtype=torch.float64)
        covariances = A @ A.transpose(-1, -2) / 4 + 0.3 * torch.eye(4, dtype=torch.float64)
    elif covariance_type == "tied":
        A = torch.randn(4, 4, generator=g, dtype=torch.float64)
        covariances = A @ A.T / 4 + 0.3 * torch.eye(4, dtype=torch.float64)
    elif covariance_type == "spherical":
        covariances = torch.rand(3, generator=g, dtype=torch.float64) + 0.3
    else:
        covariances = torch.rand(3, 4, generator=g, dtype=torch.float64) + 0.3
    weights = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    module = GaussianMixtureModule(weights, means, covariances, covariance_type)
    return module, means[torch.arange(6) % 3] + torch.randn(6, 4, generator=g, dtype=torch.float64)


def linear_vae_bernoulli():
    g = _generator(1)
    W = torch.randn(2, 5, generator=g, dtype=torch.float64)
    module = LinearVAEModule(W, torch.randn(5, generator=g, dtype=torch.float64), 6)
    return module, torch.randint(0, 2, (6, 5), generator=g).double()


def linear_vae_gaussian():
    g = _generator(2)
    W = torch.randn(2, 5, generator=g, dtype=torch.float64)
    module = LinearVAEModule(W, torch.randn(5, generator=g, dtype=torch.float64), 6, likelihood="gaussian",
                             noise_variance=0.7)
    return module, torch.randn(6, 5, generator=g, dtype=torch.float64)


def vae(likelihood="gaussian", conditional="importance"):
    with torch.random.fork_rng():
        torch.manual_seed(3)
        module = VAEModule(5, 2, (4,), "tanh", likelihood, conditional=conditional, n_particles=4, n_gibbs=2)
    g = _generator(3)
    if likelihood == "bernoulli":
        return module, torch.randint(0, 2, (6, 5), generator=g).double()
    return module, torch.randn(6, 5, generator=g, dtype=torch.float64)


def vae_table():
    """:func:`mixed_mixture`'s columns, each with its own head (:class:`~skmpt.models.vae.TableLikelihood`)."""
    from ..models.vae import TableLikelihood

    values = [torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)]
    heads = TableLikelihood([0, 3], [1, 2], [4], values, torch.zeros(2, dtype=torch.float64),
                            torch.ones(2, dtype=torch.float64))
    with torch.random.fork_rng():
        torch.manual_seed(3)
        module = VAEModule(5, 2, (4,), "tanh", heads, n_particles=4, input_scale=torch.ones(5, dtype=torch.float64))
    return module, mixed_mixture()[1]


def mixed_mixture(covariance_type="full"):
    """Two numeric columns (0, 3) beside a categorical of three values (1), a binary one (2) and a count (4)."""
    from ..models.mixed import MixedMixtureModule

    g = _generator(6)
    weights = torch.tensor([0.3, 0.7], dtype=torch.float64)
    means = 2 * torch.randn(2, 2, generator=g, dtype=torch.float64)
    A = torch.randn(2, 2, 2, generator=g, dtype=torch.float64)
    covariances = A @ A.mT / 2 + 0.3 * torch.eye(2, dtype=torch.float64)
    if covariance_type == "diag":
        covariances = covariances.diagonal(dim1=-2, dim2=-1)
    values = [torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)]
    probabilities = [torch.softmax(torch.randn(2, len(v), generator=g, dtype=torch.float64), -1) for v in values]
    rates = torch.tensor([[1.5], [4.0]], dtype=torch.float64)
    module = MixedMixtureModule(weights, means, covariances, probabilities, values, [0, 3], [1, 2], covariance_type,
                                count_features=[4], rates=rates)
    numbers = torch.randn(6, 2, generator=g, dtype=torch.float64) + means[torch.arange(6) % 2]
    X = torch.stack([numbers[:, 0], torch.arange(6.0) % 3, torch.arange(6.0) % 2, numbers[:, 1],
                     torch.arange(6.0) % 4], 1).double()
    return module, X


def tabular_joint():
    joint = TabularJoint.random(4, random_state=0)
    return joint, joint.sample(6, random_state=0)


#: name -> factory of ``(model, X)``.
MODELS = {
    "ppca": ppca,
    "factor_analysis": factor_analysis,
    "gaussian_mixture_full": gaussian_mixture,
    "gaussian_mixture_diag": lambda: gaussian_mixture("diag"),
    "gaussian_mixture_tied": lambda: gaussian_mixture("tied"),
    "gaussian_mixture_spherical": lambda: gaussian_mixture("spherical"),
    "linear_vae_bernoulli": linear_vae_bernoulli,
    "linear_vae_gaussian": linear_vae_gaussian,
    "vae_importance": vae,
    "vae_pseudo_gibbs": lambda: vae(conditional="pseudo_gibbs"),
    "vae_bernoulli": lambda: vae(likelihood="bernoulli"),
    "vae_table": vae_table,
    "mixed_mixture_full": mixed_mixture,
    "mixed_mixture_diag": lambda: mixed_mixture("diag"),
    "tabular_joint": tabular_joint,
}
