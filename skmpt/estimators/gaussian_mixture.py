r"""Gaussian mixtures trained by masked pre-training.

.. math::

    p(x) = \sum_k \pi_k\, \mathcal N(x \mid \mu_k, \Sigma_k)

scikit-learn's :class:`~sklearn.mixture.GaussianMixture` model, fitted by maximising the masked
pre-training objective instead of by EM. Its masked conditionals are mixtures of the
components' Gaussian conditionals weighted by responsibilities on the observed tokens, so the
cumulative MPT score is its log-marginal likelihood (Moreno-Muñoz, Recasens and Hauberg, 2023)
and MPT with uniform mask sizes aims at EM's optimum.
"""

import copy
from numbers import Integral

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from .._utils import check_generator
from .._validation import Interval, Options
from ..models import GaussianMixtureModule
from ._base import _BaseMaskedEstimator
from ._criteria import _InformationCriteriaMixin
from ._mixture_init import INIT_PARAMS, best_of_inits, initial_parameters, sklearn_covariances
from ._mixture_methods import _MixtureMethodsMixin

__all__ = ["MaskedGaussianMixture"]


class MaskedGaussianMixture(_MixtureMethodsMixin, _InformationCriteriaMixin, _BaseMaskedEstimator):
    """Gaussian mixture fitted by masked pre-training (MPT).

    The model is scikit-learn's :class:`~sklearn.mixture.GaussianMixture`,
    ``p(x) = sum_k pi_k N(x | mu_k, Sigma_k)``. A masked token is predicted by
    ``p(x_j | x_r) = sum_k pi_k(x_r) p_k(x_j | x_r)``: each component's Gaussian conditional,
    weighted by the responsibilities ``pi_k(x_r) ∝ pi_k p_k(x_r)`` of the observed tokens.
    These conditionals come from one joint density, so with mask sizes uniform on ``1..D`` the
    MPT objective is an unbiased stochastic estimate of the log-marginal likelihood and ``fit``
    aims at the maximum-likelihood mixture (EM's target). Training starts from a k-means
    clustering and moves unconstrained parameters with Adam: weight logits, means and the
    Cholesky factors of the covariances (positive diagonal through its logarithm).

    ``score_samples`` is the cumulative MPT estimate ``sum_M S(x; M)`` of ``log p(x)``, exact
    with the default chain estimator; ``log_marginal_likelihood`` is the closed form (the value
    of ``GaussianMixture.score_samples`` for the same parameters). ``transform`` and
    ``predict_proba`` give the responsibilities ``p(k | x)``. :meth:`from_estimator` turns a
    fitted ``GaussianMixture`` into this estimator.

    Parameters
    ----------
    n_components : int, default=1
        Number of mixture components ``K``, at most the number of training samples.
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
        Each component's covariance, as in :class:`~sklearn.mixture.GaussianMixture`: its
        own full matrix, one full matrix shared by every component, its own diagonal, or its
        own single variance. Tied and spherical covariances are one shared Cholesky factor and
        one variance per component, expanded to the full and diagonal conditionals.
    n_init : int, default=1
        Starts to train from; the fit of highest exact log-likelihood on the training data
        is kept, as GaussianMixture keeps its best run. The first start uses
        ``random_state`` as a single start does, the others seeds drawn from it.
    init_params : {"kmeans", "k-means++", "random", "random_from_data"}, default="kmeans"
        GaussianMixture's initialisation of the responsibilities, from which the first
        proportions, means and covariances come: k-means labels, uniform random numbers, or
        ``n_components`` centres chosen by k-means++ or at random among the samples, to which
        each sample is then assigned by distance (EM's first step spreads GaussianMixture's
        one-sample responsibilities; a gradient start from covariances of ``1e-6`` could not).
    warm_start : bool, default=False
        ``fit`` on a fitted mixture continues from its parameters (one start: ``n_init`` is
        not used), as GaussianMixture's ``warm_start``.
    mask_rate : "uniform" or float in (0, 1], default="uniform"
        Training masks: ``"uniform"`` draws the mask size uniformly from ``1..D``; a float
        masks exactly ``round(mask_rate * D)`` tokens (at least one), a biased target.
    n_masks : int, default=1
        Masks per sample per training step.
    score_masks : int, default=1
        Masks per size (``score_method="sweep"``) or orderings (``"nested"``, ``"chain"``)
        of the cumulative score; not used by ``"exhaustive"``.
    score_method : {"exhaustive", "sweep", "nested", "chain"}, default="chain"
        Estimator of the cumulative score; see :func:`skmpt.objectives.mpt_curve`.
        ``"exhaustive"`` enumerates every mask (``D <= 20``); ``"chain"`` is exact with one
        ordering.
    max_epochs : int, default=300
        Most passes over the data.
    batch_size : "auto" or int, default="auto"
        Mini-batch size; ``"auto"`` is ``min(200, n_samples)``.
    learning_rate : float, default=0.01
        Adam's step size, on data centred and divided by its overall standard deviation.
        Smaller than :class:`MaskedPPCA`'s: training starts from k-means, near an optimum,
        and well-separated clusters are narrow on that scale (at 0.03 the first steps undo
        much of the initialisation: on three clusters in D=4, 108 epochs against 66 to
        converge, 0.010 nats short of EM against 0.004).
    tol : float, default=1e-3
        Improvement of the epoch's objective (nats per sample) that counts as progress.
    n_iter_no_change : int, default=10
        Epochs without progress before the step size is halved (torch's
        ``ReduceLROnPlateau``); the stall after the sixth cut is convergence, as in
        :class:`MaskedPPCA`.
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
        Seeds the k-means initialisation, the batches, the training and scoring masks, and
        :meth:`sample`.
    verbose : int, default=0
        Print one line per epoch when positive.

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
        Mixing proportions ``pi_k``.
    means_ : ndarray of shape (n_components, n_features)
        Component means ``mu_k``.
    covariances_ : ndarray
        Component covariances in :class:`~sklearn.mixture.GaussianMixture`'s layout, of shape
        (n_components, n_features, n_features) for ``"full"``, (n_features, n_features) for
        ``"tied"``, (n_components, n_features) for ``"diag"`` and (n_components,) for
        ``"spherical"``.
    precisions_cholesky_ : ndarray
        Cholesky factors of the precisions in :class:`~sklearn.mixture.GaussianMixture`'s
        layout: upper triangular ``L^{-T}`` of the shape of ``covariances_`` for ``"full"``
        and ``"tied"``, ``1 / sqrt(covariances_)`` for ``"diag"`` and ``"spherical"``.
    precisions_ : ndarray
        Inverses of ``covariances_``, of the same shape.
    module_ : GaussianMixtureModule
        The fitted torch module, with the masked conditionals.
    device_ : torch.device
        Where the module lives.
    history_ : list of dict
        One dict per epoch (``epoch``, ``objective``, ``stopping_objective``,
        ``learning_rate``, ``lml`` with ``monitor="lml"``, ``seconds``), as in
        :class:`MaskedPPCA`; empty after :meth:`from_estimator`.
    n_iter_ : int
        Number of epochs run.
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
    sklearn.mixture.GaussianMixture : the same model fitted by EM.

    References
    ----------
    Moreno-Muñoz, Recasens and Hauberg (2023). On masked pre-training and the marginal
    likelihood. NeurIPS.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.mixture import GaussianMixture
    >>> from skmpt import MaskedGaussianMixture
    >>> rng = np.random.RandomState(0)
    >>> X = np.vstack([rng.randn(100, 2), rng.randn(100, 2) + 6])
    >>> gmm = MaskedGaussianMixture(n_components=2, random_state=0).fit(X)
    >>> gmm.means_.shape, gmm.covariances_.shape
    ((2, 2), (2, 2, 2))
    >>> em = GaussianMixture(n_components=2, random_state=0).fit(X)
    >>> bool(abs(gmm.score(X) - em.score(X)) < 0.05)
    True
    >>> bool(np.allclose(MaskedGaussianMixture.from_estimator(em).score_samples(X), em.score_samples(X)))
    True
    """

    _parameter_constraints: dict = {
        **_BaseMaskedEstimator._parameter_constraints,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "covariance_type": [Options({"full", "tied", "diag", "spherical"})],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init_params": [Options(set(INIT_PARAMS))],
        "warm_start": ["boolean"],
    }

    def __init__(
        self, n_components=1, *, covariance_type="full", n_init=1, init_params="kmeans", warm_start=False,
        mask_rate="uniform", n_masks=1, score_masks=1,
        score_method="chain", max_epochs=300, batch_size="auto", learning_rate=0.01, tol=1e-3, n_iter_no_change=10,
        monitor=None, monitor_every=1, dtype="float64", device="auto", random_state=None, verbose=0
    ):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.n_init = n_init
        self.init_params = init_params
        self.warm_start = warm_start
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
        """A fitted ``MaskedGaussianMixture`` with the parameters of a fitted ``GaussianMixture``.

        Its ``log_marginal_likelihood`` equals the source's ``score_samples``, and its MPT
        curve and cumulative score are one call away. It has no training history.

        Parameters
        ----------
        estimator : sklearn.mixture.GaussianMixture
            Fitted, with any ``covariance_type`` (taken over).
        **params
            Parameters of this estimator other than ``n_components`` and
            ``covariance_type`` (taken from ``estimator``), e.g. ``random_state``.

        Returns
        -------
        fitted : MaskedGaussianMixture

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.mixture import GaussianMixture
        >>> from skmpt import MaskedGaussianMixture
        >>> X = np.random.RandomState(0).randn(100, 3)
        >>> em = GaussianMixture(n_components=2, covariance_type="diag", random_state=0).fit(X)
        >>> gmm = MaskedGaussianMixture.from_estimator(em, device="cpu")
        >>> gmm.covariance_type, gmm.predict(X[:4]).shape
        ('diag', (4,))
        """
        from sklearn.mixture import GaussianMixture

        covariance_type = getattr(estimator, "covariance_type", None)
        if "covariance_type" in params:
            raise ValueError("covariance_type is taken from the GaussianMixture; do not pass it.")

        def build(dtype, device, offset):
            weights, means, covariances = (
                torch.as_tensor(a, dtype=dtype, device=device)
                for a in (estimator.weights_, estimator.means_ - offset, estimator.covariances_)
            )
            return len(weights), GaussianMixtureModule(weights, means, covariances, covariance_type)

        params = {**params, "covariance_type": covariance_type}
        return cls._from_fitted(estimator, GaussianMixture, params, build, lambda gmm: gmm.weights_ @ gmm.means_)

    def _check_data(self, X):
        super()._check_data(X)
        if self.n_components > X.shape[0]:
            raise ValueError(
                f"n_components={self.n_components} must be at most the number of samples, but X has "
                f"{X.shape[0]} sample(s)."
            )

    def _build_module(self, X, generator):
        if getattr(self, "_warm_start_from", None) is not None:
            # The previous fit, mapped to the training units: (x - center) / scale.
            module, offset = self._warm_start_from
            module = copy.deepcopy(module).to(device=X.device, dtype=X.dtype)
            center, scale = self._training_units
            shift = center + X.new_tensor(self.offset_ - offset)
            with torch.no_grad():
                return module.unstandardize_(-shift / scale, 1 / scale)
        # GaussianMixture's initialisation: responsibilities, then each component's
        # proportion, mean and covariance.
        seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
        weights, means, covariances = initial_parameters(
            X, self.n_components, self.covariance_type, self.init_params, seed
        )
        return GaussianMixtureModule(weights, means, covariances, self.covariance_type)

    def fit(self, X, y=None, sample_weight=None):
        """Fit by MPT from ``n_init`` starts, keeping the best (or from the previous fit with
        ``warm_start=True``); otherwise as :meth:`skmpt.estimators.MaskedPPCA.fit`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, as in :meth:`skmpt.estimators.MaskedPPCA.fit`.

        Returns
        -------
        self : MaskedGaussianMixture
        """
        warm = self.warm_start and hasattr(self, "module_")
        if warm and self.module_.covariance_type != self.covariance_type:
            raise ValueError(
                f"warm_start=True continues the fitted {self.module_.covariance_type!r} mixture; "
                f"covariance_type is now {self.covariance_type!r}. Refit with warm_start=False."
            )
        self._warm_start_from = (self.module_, self.offset_.copy()) if warm else None
        try:
            if warm or self.n_init == 1:
                return super().fit(X, sample_weight=sample_weight)
            seeds = torch.randint(2**31 - 1, (self.n_init - 1,), generator=check_generator(self.random_state))
            weights = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
            return best_of_inits(self, lambda e: _BaseMaskedEstimator.fit(e, X, sample_weight=sample_weight),
                                 seeds.tolist(), X, weights)
        finally:
            self.__dict__.pop("_warm_start_from", None)

    def _set_fitted_attributes(self):
        module = self.module_
        with torch.no_grad():
            self.weights_ = module.log_weights.exp().cpu().numpy()
            self.means_ = module.means.detach().cpu().numpy().astype(np.float64) + self.offset_
            self.covariances_, self.precisions_cholesky_, self.precisions_ = sklearn_covariances(module)

    def _n_parameters(self):
        """Free parameters, as :class:`~sklearn.mixture.GaussianMixture` counts them: ``K - 1``
        weights, ``K D`` means and ``K D (D + 1) / 2`` (full), ``D (D + 1) / 2`` (tied),
        ``K D`` (diag) or ``K`` (spherical) covariance entries."""
        check_is_fitted(self)
        K, D = self.n_components_, self.n_features_in_
        covariance = {"full": K * D * (D + 1) // 2, "tied": D * (D + 1) // 2, "diag": K * D, "spherical": K}
        return covariance[self.covariance_type] + K * D + K - 1
