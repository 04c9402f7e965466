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
from ._linear_gaussian import _BaseLinearGaussian
from ._spectrum import choose_n_components

__all__ = ["MaskedPPCA"]


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
        data's covariance spectrum as :class:`~sklearn.decomposition.PCA` chooses it:
        ``"mle"`` by Minka's MLE of the dimension (at least as many samples as features), a
        float as the fewest components whose share of the variance exceeds it. The chosen
        ``K`` is ``n_components_`` (by ``partial_fit``: from the first chunk).
    mask_rate : "uniform" or float in (0, 1], default="uniform"
        Training masks: ``"uniform"`` draws the mask size uniformly from ``1..D`` (the rate
        the theory favours); a float masks exactly ``round(mask_rate * D)`` tokens (at least
        one), which trains towards a biased target (``D * S(x; M)``).
    n_masks : int, default=4
        Masks per sample per training step (the paper's ``P``). Their gradient noise is what
        stops Adam short of the optimum: with one mask per sample the fit of N=500 samples
        ends about 0.005 nats per sample below the maximum likelihood, with four about 0.002.
    score_masks : int, default=1
        Masks per size (``score_method="sweep"``) or orderings (``"nested"``, ``"chain"``)
        of the cumulative score; not used by ``"exhaustive"``.
    score_method : {"exhaustive", "sweep", "nested", "chain"}, default="chain"
        Estimator of the cumulative score; see :func:`skmpt.objectives.mpt_curve`.
        ``"exhaustive"`` enumerates every mask (``D <= 20``); ``"chain"`` is exact for PPCA
        with one ordering, so the default score has no Monte Carlo noise to blur a model
        selection.
    max_epochs : int, default=300
        Most passes over the data.
    batch_size : "auto" or int, default="auto"
        Mini-batch size; ``"auto"`` is ``min(200, n_samples)``.
    learning_rate : float, default=0.03
        Adam's initial step size, on data centred and divided by its overall standard
        deviation (so the default suits data of any scale).
    tol : float, default=1e-3
        Improvement of the stopping objective (nats per sample) that counts as progress.
    n_iter_no_change : int, default=10
        After this many epochs without progress of the stopping objective (the training
        objective on a quarter of the samples, at least 100, with masks fixed before
        training) the step size is halved (torch's ``ReduceLROnPlateau``); the stall after
        the sixth cut is convergence.
    monitor : None or "lml", default=None
        ``"lml"`` records the exact log-marginal likelihood of the training data in
        ``history_`` every ``monitor_every`` epochs (a diagnostic; training does not use it).
    monitor_every : int, default=1
        Epochs between two ``monitor`` records.
    dtype : {"float64", "float32"}, default="float64"
        Precision of the module and of the computations (training sums over samples in
        float64 either way).
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="auto"
        ``"auto"`` uses CUDA when available.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the batches, the training masks and the scoring masks.
    verbose : int, default=0
        Log one line per epoch (logger ``"skmpt"``, level INFO) when positive; shown on
        standard error when logging is not configured.

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
        :class:`~sklearn.decomposition.PCA`'s ``explained_variance_`` (equal to it after
        :meth:`from_estimator`).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``explained_variance_`` over the model's total variance ``trace(W W^T) + D sigma^2``.
    module_ : PPCAModule
        The fitted torch module, with the masked conditionals (``masked_log_prob_sum``,
        ``masked_log_prob``) for power users.
    device_ : torch.device
        Where the module lives.
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
    n_features_in_ : int
        Number of features seen during fit.
    n_components_ : int
        The fitted ``n_components`` (``set_params`` does not change a fitted model).
    offset_ : ndarray of shape (n_features,)
        Subtracted from the data, in float64, before they are cast to ``dtype``: the training
        data's mean for a Gaussian model in float32 (so that an offset does not cost the
        data's precision), zeros otherwise.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when ``X`` has string column names.

    See Also
    --------
    sklearn.decomposition.PCA : whose ``score`` is the maximum-likelihood PPCA's LML.
    sklearn.decomposition.FactorAnalysis : the same model with per-feature noise.

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

    def _resolve_n_components(self, X):
        return choose_n_components(X.detach().cpu().numpy().astype(np.float64), self.n_components)

    def __init__(
        self, n_components=2, *, mask_rate="uniform", n_masks=4, score_masks=1, score_method="chain",
        max_epochs=300, batch_size="auto", learning_rate=0.03, tol=1e-3, n_iter_no_change=10, monitor=None,
        monitor_every=1, dtype="float64", device="auto", random_state=None, verbose=0
    ):
        self.n_components = n_components
        self.mask_rate = mask_rate
        self.n_masks = n_masks
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

        return cls._from_fitted(estimator, PCA, params, build, lambda pca: pca.mean_)
