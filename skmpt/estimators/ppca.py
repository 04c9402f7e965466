r"""Probabilistic PCA trained by masked pre-training.

.. math::

    x = W z + \mu + \varepsilon, \quad z \sim \mathcal N(0, I_K), \quad
    \varepsilon \sim \mathcal N(0, \sigma^2 I_D)

``fit`` maximises the masked pre-training objective over ``W``, ``mu`` and ``sigma^2``;
``score`` is the cumulative MPT estimate of the log-marginal likelihood, which for PPCA can
be checked against the closed form (Moreno-Muñoz, Recasens and Hauberg, 2023, section 3.1).
"""

from numbers import Integral, Real

import numpy as np
import torch

from .._validation import Interval, Options
from ..models import PPCAModule
from ._docs import fill_docstring
from ._linear_gaussian import _BaseLinearGaussian, choose_from_spectrum, choose_n_components

__all__ = ["MaskedPPCA"]


@fill_docstring
class MaskedPPCA(_BaseLinearGaussian):
    """Probabilistic PCA fitted by masked pre-training (MPT).

    The model is ``x = W z + mu + eps`` with ``z ~ N(0, I_K)`` and ``eps ~ N(0, sigma^2 I)``.
    ``fit`` learns ``W``, ``mu`` and ``sigma^2`` by maximising, with Adam, the masked
    objective ``(D / |m|) sum_{j in m} log p(x_j | x_r)`` over random masks ``m``; with
    mask sizes uniform on ``1..D`` (the default) it is an unbiased stochastic estimate of the
    log-marginal likelihood. The conditionals go through the ``K x K`` posterior of ``z``
    given the observed tokens, so no ``D x D`` matrix is inverted per mask.

    ``score_samples`` is the cumulative MPT estimate ``sum_M S(x; M)`` of ``log p(x)``, which
    does not depend on the training ``mask_rate``; ``log_marginal_likelihood`` is the closed
    form it estimates.

    Parameters
    ----------
    n_components : int, float in (0, 1) or "mle", default=2
        Latent dimension ``K``, at most the number of features; or chosen from the training
        data's covariance spectrum (weighted by ``sample_weight``, when given) as
        :class:`~sklearn.decomposition.PCA` chooses it:
        ``"mle"`` by Minka's MLE of the dimension (at least as many samples as features; with
        ``sample_weight``, the samples it counts are its sum, so that integer weights choose as
        repeated rows do), a float as the fewest components whose share of the variance exceeds it. The chosen
        ``K`` is ``n_components_`` (by ``partial_fit``: from the first chunk).
    {mask_rate}
    {n_masks}
    {score_masks}
    {score_method}
    {solver}
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
        ``W^T``: the loading of each latent variable on the features.
    mean_ : ndarray of shape (n_features,)
        ``mu``.
    noise_variance_ : float
        ``sigma^2``.
    explained_variance_ : ndarray of shape (n_components,)
        The model's variances along its principal axes, ``eig(W^T W) + sigma^2``, descending:
        :class:`~sklearn.decomposition.PCA`'s ``explained_variance_``; after :meth:`from_estimator`,
        the PCA's own, also with ``whiten=True``.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``explained_variance_`` over the model's total variance ``trace(W W^T) + D sigma^2``; after
        :meth:`from_estimator`, the PCA's own.
    module_ : PPCAModule
        The fitted torch module, with the masked conditionals (``masked_log_prob_sum``,
        ``masked_log_prob``) for power users.
    {params_}
    {device_}
    history_ : list of dict
        One dict per epoch: ``epoch``, ``objective`` (mean MPT objective over the epoch's
        batches, nats per sample), ``stopping_objective`` (the objective at the end of the
        epoch on the stopping rule's fixed samples and masks: what the stopping rule
        compares), ``learning_rate`` (Adam's step size during the epoch), ``lml`` (with
        ``monitor="lml"``, on the epochs it records: the exact log-marginal likelihood of the
        training data, nats per sample) and ``seconds``. After ``partial_fit``, one dict per
        call with ``epoch``, ``objective``, ``stopping_objective``, ``learning_rate``
        and ``seconds``.
    n_iter_ : int
        Number of epochs run by ``fit``, or of ``partial_fit`` calls.
    converged_ : bool
        Whether ``fit`` stopped by its stopping rule rather than at ``max_epochs`` (``fit``
        only).
    {n_features_in_}
    {n_components_}
    {offset_}
    {feature_names_in_}

    See Also
    --------
    sklearn.decomposition.PCA : whose ``score`` is the maximum-likelihood PPCA's LML.
    sklearn.decomposition.FactorAnalysis : the same model with per-feature noise.

    Notes
    -----
    The gradient noise of the training masks is what stops Adam short of the optimum: with one
    mask per sample (``n_masks=1``) the fit of N=500 samples ends about 0.005 nats per sample
    below the maximum likelihood, with the default four about 0.002. The default
    ``score_method="chain"`` is exact for PPCA with one ordering, so the default score has no
    Monte Carlo noise to blur a model selection.

    References
    ----------
    Moreno-Muñoz, Recasens and Hauberg (2023). On masked pre-training and the marginal
    likelihood. NeurIPS.

    Tipping and Bishop (1999). Probabilistic principal component analysis. JRSS B.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt import MaskedPPCA
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(300, 2) @ rng.randn(2, 6) + 0.3 * rng.randn(300, 6)
    >>> ppca = MaskedPPCA(n_components=2, random_state=0).fit(X)
    >>> ppca.components_.shape
    (2, 6)
    >>> mpt = ppca.score(X)                          # cumulative MPT estimate
    >>> exact = ppca.log_marginal_likelihood(X).mean()
    >>> bool(abs(mpt - exact) < 0.05)
    True
    """

    _module_class = PPCAModule
    _isotropic = True
    _parameter_constraints: dict = {
        **_BaseLinearGaussian._parameter_constraints,
        "n_components": [
            Interval(Integral, 1, None, closed="left"),
            Options({"mle"}),
            Interval(Real, 0, 1, closed="neither"),
        ],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A torch tensor is fitted and scored on its device; under array_api_dispatch the fitted
        # attributes and outputs are tensors there.
        tags.array_api_support = True
        return tags

    def _resolve_n_components(self, X, sample_weight, moments, n_samples):
        n_components = self.params_.n_components
        if not isinstance(n_components, (str, float)):
            return int(n_components)
        if moments is not None:  # the weighted covariance's spectrum, as the rows' SVD gives it
            spectrum = np.linalg.eigvalsh(moments.covariance.detach().cpu().numpy().astype(np.float64))[::-1]
            return choose_from_spectrum(spectrum.clip(0), n_components, n_samples)
        weights = None if sample_weight is None else sample_weight.detach().cpu().numpy().astype(np.float64)
        return choose_n_components(X.detach().cpu().numpy().astype(np.float64), n_components, weights, n_samples)

    def __init__(
        self, n_components=2, *, mask_rate="uniform", n_masks=4, score_masks=1, score_method="chain",
        solver="auto", max_epochs=300, batch_size="auto", learning_rate=0.03, tol=1e-3, n_iter_no_change=10,
        monitor=None, monitor_every=1, dtype="float64", device="auto", random_state=None, verbose=0
    ):
        self.n_components = n_components
        self.mask_rate = mask_rate
        self.n_masks = n_masks
        self.score_masks = score_masks
        self.score_method = score_method
        self.solver = solver
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

    @classmethod
    def from_estimator(cls, estimator, **params):
        """A fitted ``MaskedPPCA`` with the probabilistic model of a fitted ``PCA``.

        ``PCA.score_samples`` is the log-likelihood of the PPCA with
        ``W^T = diag(sqrt(explained_variance_ - noise_variance_)) components_`` and
        ``sigma^2 = noise_variance_`` (the maximum-likelihood PPCA of Tipping and Bishop);
        this estimator holds the covariance ``PCA.get_covariance`` describes, ``whiten``
        included, so its ``log_marginal_likelihood`` equals the source's ``score_samples``.
        Its MPT curve, cumulative score and fixed-rate bias are one call away. It has no
        training history.

        Parameters
        ----------
        estimator : sklearn.decomposition.PCA
            Fitted, with fewer components than ``min(n_samples, n_features)`` (otherwise
            its ``noise_variance_`` is 0 and the PPCA is degenerate).
        **params
            Parameters of this estimator other than ``n_components`` (taken from
            ``estimator``), e.g. ``score_masks`` or ``random_state``.

        Returns
        -------
        fitted : MaskedPPCA

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.decomposition import PCA
        >>> from skmpt import MaskedPPCA
        >>> X = np.random.RandomState(0).randn(100, 6)
        >>> pca = PCA(n_components=2).fit(X)
        >>> ppca = MaskedPPCA.from_estimator(pca, device="cpu")
        >>> bool(np.allclose(ppca.log_marginal_likelihood(X), pca.score_samples(X)))
        True
        >>> ppca.fixed_rate_bias(X[:3], 0.5).shape
        (3,)
        """
        from sklearn.decomposition import PCA


        if isinstance(estimator, PCA) and hasattr(estimator, "noise_variance_") and not estimator.noise_variance_ > 0:
            raise ValueError(
                f"The PCA's noise_variance_ is {estimator.noise_variance_}: it keeps "
                f"{estimator.n_components_} components of {estimator.n_features_in_} features and "
                f"{estimator.n_samples_} samples, so its PPCA is degenerate. Keep fewer components."
            )

        def build(dtype, device, offset):
            # As PCA.get_covariance: W^T W = C^T diag(max(ev - s2, 0)) C, with C = components_,
            # scaled by sqrt(ev) when whiten=True.
            variance, noise = estimator.explained_variance_, estimator.noise_variance_
            loadings = estimator.components_ * np.sqrt(np.maximum(variance - noise, 0.0))[:, None]
            if estimator.whiten:
                loadings = loadings * np.sqrt(variance)[:, None]
            components = torch.as_tensor(loadings, dtype=dtype, device=device)
            mean = torch.as_tensor(estimator.mean_ - offset, dtype=dtype, device=device)
            return len(components), PPCAModule(components, mean, torch.as_tensor(noise, dtype=dtype, device=device))

        fitted = cls._from_fitted(estimator, PCA, params, build, lambda pca: pca.mean_)
        # The PCA's own: with whiten=True, get_covariance's spectrum is not its explained_variance_.
        fitted.explained_variance_ = np.array(estimator.explained_variance_, dtype=np.float64)
        fitted.explained_variance_ratio_ = np.array(estimator.explained_variance_ratio_, dtype=np.float64)
        return fitted
