"""Synthetic data: samples of latent-variable models with known parameters."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils import Bunch, check_random_state

from .._validation import Interval, validated

__all__ = ["make_ppca"]


@validated(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_features": [Interval(Integral, 1, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "noise_variance": [Interval(Real, 0, None, closed="neither")],
        "random_state": [Interval(Integral, 0, 2**32 - 1, closed="both"), np.random.RandomState, None],
    }
)
def make_ppca(n_samples=2000, n_features=10, n_components=2, *, noise_variance=0.5, random_state=None):
    """Draw data from a probabilistic PCA model with random parameters.

    ``x = W z + mu + eps`` with ``z ~ N(0, I_K)``, ``eps ~ N(0, noise_variance I)``, the
    entries of ``W`` and ``mu`` standard normal. The defaults are the paper's Fig. 2 setting
    (N=2000, D=10, K=2).

    Parameters
    ----------
    n_samples : int, default=2000
    n_features : int, default=10
    n_components : int, default=2
    noise_variance : float, default=0.5
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``data`` of shape (n_samples, n_features), ``latent`` of shape
        (n_samples, n_components), and the true ``components`` of shape
        (n_components, n_features), ``mean`` of shape (n_features,) and ``noise_variance``.

    Examples
    --------
    >>> from skmpt.datasets import make_ppca
    >>> bunch = make_ppca(100, 5, 2, random_state=0)
    >>> bunch.data.shape, bunch.components.shape
    ((100, 5), (2, 5))
    """
    rng = check_random_state(random_state)
    components = rng.standard_normal((n_components, n_features))
    mean = rng.standard_normal(n_features)
    latent = rng.standard_normal((n_samples, n_components))
    noise = np.sqrt(noise_variance) * rng.standard_normal((n_samples, n_features))
    return Bunch(
        data=latent @ components + mean + noise,
        latent=latent,
        components=components,
        mean=mean,
        noise_variance=float(noise_variance),
    )
