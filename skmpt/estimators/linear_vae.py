r"""A linear VAE (Bernoulli or Gaussian) trained by masked pre-training, integrated on a grid.

.. math::

    z \sim \mathcal N(0, I_K), \qquad x_d \mid z \sim \mathrm{Bernoulli}(\sigma(w_d^\top z + b_d))

with the prior integrated on a Gauss–Hermite grid, so that the LML, the masked conditionals and
the posterior are exact for the grid's joint (Moreno-Muñoz, Recasens and Hauberg, 2023,
section 3.1, Fig. 3 upper row; with the true conditionals ``p(x_j | x_r)`` of the grid's joint,
any K in 1..3, and quadrature weights that sum to one).
"""

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from .._utils import chunk_budget
from .._validation import Interval, Options
from ..models import LinearVAEModule
from ._base import _BaseMaskedEstimator, _InformationCriteriaMixin, linear_gaussian_parameter_count
from ._docs import fill_docstring

__all__ = ["MaskedLinearVAE"]

#: Gauss–Hermite nodes per latent dimension for ``n_quadrature="auto"``.
AUTO_QUADRATURE = {1: 64, 2: 32, 3: 12}
#: Most nodes per dimension whose Gauss–Hermite weights float64 holds (normalised, the
#: smallest is 4.8e-300 at 360 nodes and underflows at 370).
MAX_QUADRATURE = 360
#: Most grid points ``n_quadrature**K``, and most entries of the ``(grid, features)`` tables
#: (512 MiB in float64) that every step builds.
MAX_GRID_POINTS = 2**16


@fill_docstring
class MaskedLinearVAE(_InformationCriteriaMixin, _BaseMaskedEstimator):
    """Linear latent-variable model with exact conditionals on a quadrature grid, fitted by MPT.

    ``z ~ N(0, I_K)`` and ``x_d | z ~ Bernoulli(sigmoid(w_d . z + b_d))`` (or
    ``N(w_d . z + b_d, sigma^2)`` with ``likelihood="gaussian"``, the PPCA model, as a
    cross-check). The prior is integrated on a tensor Gauss–Hermite grid of
    ``n_quadrature**K`` points; the log-marginal likelihood, the masked conditionals
    ``p(x_j | x_r)`` (through the grid posterior of ``z`` given the observed tokens) and the
    posterior used by ``transform`` all come from that grid, so the MPT identity holds exactly
    for the fitted model.

    Parameters
    ----------
    n_components : int in {1, 2, 3}, default=2
        Latent dimension ``K``.
    likelihood : {"bernoulli", "gaussian"}, default="bernoulli"
        ``"bernoulli"`` models binary data (see ``binarize``).
    binarize : float or None, default=0.0
        As :class:`sklearn.naive_bayes.BernoulliNB`'s: with the Bernoulli likelihood, values
        above this threshold become 1 and the others 0, in ``fit`` and in every method that
        takes ``X``. ``None``: ``X`` must already hold only 0 and 1 (a ``ValueError``
        otherwise). Unused by the Gaussian likelihood.
    objective : {"mpt", "elbo", "lml"}, default="mpt"
        ``"mpt"``: the masked objective (``mask_rate``, ``n_masks``). ``"elbo"``: the paper's
        baseline, an amortised linear Gaussian encoder with one reparameterised sample and the
        analytic KL (a bound for the continuous prior). ``"lml"``: the grid LML itself, the
        optimum the other two should approach.
    {mask_rate}
    {n_masks}
    n_quadrature : "auto" or int, default="auto"
        Nodes per latent dimension; ``"auto"`` is 64, 32 or 12 for K = 1, 2, 3. At most 360
        (beyond, the normalised Gauss–Hermite weights underflow float64), with at most
        ``2**16`` grid points and four times the working memory in grid-by-feature entries (``2**26`` by
        default, see :func:`skmpt.working_memory`); ``fit`` checks both first.
    {score_masks}
    {score_method}
    {max_epochs}
    {batch_size}
    {learning_rate}
    {tol}
    {n_iter_no_change}
    {monitor}
    {monitor_every}
    {dtype}
    {device}
    {random_state}
    {verbose}

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Decoder weights; column ``d`` is ``w_d``.
    intercept_ : ndarray of shape (n_features,)
        ``b``.
    noise_variance_ : float
        ``sigma^2`` (Gaussian likelihood only).
    module_ : LinearVAEModule
        The fitted torch module, with ``masked_log_prob`` and ``chain_log_prob``.
    {params_}
    {device_}
    history_ : list of dict
        Per epoch: ``epoch``, ``objective`` (mean training objective over the epoch, nats per
        sample), ``stopping_objective`` (the objective on the stopping rule's fixed samples,
        masks and noise, which it compares), ``learning_rate``, ``lml`` (``monitor="lml"``
        only: grid LML of the training data after the epoch) and ``seconds``; after
        ``partial_fit``, one dict per call with ``epoch``, ``objective``, ``stopping_objective``, ``learning_rate``
        and ``seconds``.
    n_iter_ : int
        Epochs run by ``fit``, or ``partial_fit`` calls.
    converged_ : bool
        Whether ``fit`` met its stopping rule before ``max_epochs``.
    {n_features_in_}
    {n_components_}
    {offset_}
    {feature_names_in_}

    Notes
    -----
    With the default ``score_method="chain"`` one ordering already gives the exact cumulative
    score of this model: the chain reveals one token at a time and updates the grid posterior,
    ``O(n G D)`` per ordering for ``G`` grid points, whereas the sweep costs ``O(n G D)`` per
    *mask*, ``D * score_masks`` masks. ``monitor="lml"`` records the grid log-marginal
    likelihood.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from skmpt import MaskedLinearVAE
    >>> X = load_digits().data[:300]
    >>> vae = MaskedLinearVAE(n_components=2, binarize=7, max_epochs=20, random_state=0).fit(X)
    >>> vae.components_.shape
    (2, 64)
    >>> bool(abs(vae.score(X) - vae.log_marginal_likelihood(X).mean()) < 1e-8)
    True
    """

    _parameter_constraints: dict = {
        **_BaseMaskedEstimator._parameter_constraints,
        "n_components": [Interval(Integral, 1, 3, closed="both")],
        "likelihood": [Options({"bernoulli", "gaussian"})],
        "binarize": [None, Interval(Real, None, None, closed="neither")],
        "objective": [Options({"mpt", "elbo", "lml"})],
        "n_quadrature": [Options({"auto"}), Interval(Integral, 2, None, closed="left")],
    }

    def __init__(
        self, n_components=2, *, likelihood="bernoulli", binarize=0.0, objective="mpt", mask_rate="uniform",
        n_masks=1, n_quadrature="auto", score_masks=1, score_method="chain", max_epochs=300, batch_size="auto",
        learning_rate=0.03, tol=1e-3, n_iter_no_change=10, monitor=None, monitor_every=1, dtype="float64",
        device="auto", random_state=None, verbose=0
    ):
        self.n_components = n_components
        self.likelihood = likelihood
        self.binarize = binarize
        self.objective = objective
        self.mask_rate = mask_rate
        self.n_masks = n_masks
        self.n_quadrature = n_quadrature
        self.score_masks = score_masks
        self.score_method = score_method
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.monitor = monitor
        self.monitor_every = monitor_every
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _likelihood(self):
        return self.params_.likelihood

    def _objective(self):
        return self.params_.objective, {}

    def _binarize_threshold(self):
        return self.params_.binarize if self.params_.likelihood == "bernoulli" else None

    def _n_points(self):
        n_quadrature = self.params_.n_quadrature
        return AUTO_QUADRATURE[self.params_.n_components] if n_quadrature == "auto" else n_quadrature

    def _check_data(self, X):
        super()._check_data(X)
        n_points = self._n_points()
        if n_points > MAX_QUADRATURE:
            raise ValueError(
                f"n_quadrature={n_points}: beyond {MAX_QUADRATURE} nodes the normalised Gauss–Hermite "
                f"weights underflow float64."
            )
        grid = n_points**self.params_.n_components
        if grid > MAX_GRID_POINTS or grid * X.shape[1] > chunk_budget(4):
            raise ValueError(
                f"n_quadrature={n_points} with n_components={self.params_.n_components} makes a grid of {grid} "
                f"points, and tables of {grid} x {X.shape[1]} features; the limits are {MAX_GRID_POINTS} "
                f"points and {chunk_budget(4)} entries (four times skmpt.working_memory). Use fewer nodes."
            )

    def _build_module(self, X, generator, units):
        n_features = X.shape[1]
        # Small random loadings break the symmetry of W = 0, a saddle point of every objective.
        components = 0.1 * torch.randn(self.params_.n_components, n_features, generator=generator, dtype=X.dtype)
        intercept = X.new_zeros(n_features)
        if self.params_.likelihood == "bernoulli":
            # Start at the independent-pixel fit; clamping keeps all-0 or all-1 pixels finite.
            mean = X.mean(0).clamp(1e-3, 1 - 1e-3)
            intercept = torch.log(mean) - torch.log1p(-mean)
        return LinearVAEModule(
            components.to(X.device),
            intercept,
            self._n_points(),
            likelihood=self.params_.likelihood,
            encoder=self.params_.objective == "elbo",
        )

    def _n_parameters(self):
        """Free parameters: ``D K - K (K - 1) / 2`` loadings (the prior ``N(0, I)`` is rotation
        invariant), ``D`` intercepts, and the noise variance of the Gaussian likelihood; the
        amortised encoder of ``objective="elbo"`` is a training device, not part of the model."""
        check_is_fitted(self)
        n_noise = 1 if self.params_.likelihood == "gaussian" else 0
        return linear_gaussian_parameter_count(self.n_features_in_, self.n_components_, n_noise)

    def _set_fitted_attributes(self):
        self.components_ = self.module_.components.detach().cpu().numpy()
        self.intercept_ = self.module_.intercept.detach().cpu().numpy().astype(np.float64) + self.offset_
        if self.params_.likelihood == "gaussian":
            self.noise_variance_ = float(self.module_.noise_variance.detach())
