r"""Factor analysis trained by masked pre-training.

.. math::

    x = W z + \mu + \varepsilon, \quad z \sim \mathcal N(0, I_K), \quad
    \varepsilon \sim \mathcal N(0, \mathrm{diag}(\psi))

scikit-learn's :class:`~sklearn.decomposition.FactorAnalysis` model, fitted by maximising the
masked pre-training objective; ``score`` is its cumulative estimate of the log-marginal
likelihood (Moreno-Muñoz, Recasens and Hauberg, 2023), exact for this model with one ordering
of the chain estimator.
"""

from numbers import Integral, Real

import numpy as np
import torch

from .._validation import Interval
from ..models import FactorAnalysisModule
from ._docs import fill_docstring
from ._linear_gaussian import _BaseLinearGaussian

__all__ = ["MaskedFactorAnalysis"]


@fill_docstring
class MaskedFactorAnalysis(_BaseLinearGaussian):
    """Factor analysis fitted by masked pre-training (MPT).

    The model is scikit-learn's :class:`~sklearn.decomposition.FactorAnalysis`:
    ``x = W z + mu + eps`` with ``z ~ N(0, I_K)`` and ``eps ~ N(0, diag(psi))``, one noise
    variance per feature. ``fit`` learns ``W``, ``mu`` and ``psi`` by maximising, with Adam, the
    masked objective ``(D / |m|) sum_{j in m} log p(x_j | x_r)`` over random masks ``m``; with
    mask sizes uniform on ``1..D`` (the default) it is an unbiased stochastic estimate of the
    log-marginal likelihood, so training aims at the maximum-likelihood factor analysis. The
    conditionals go through the ``K x K`` posterior of ``z`` given the observed tokens, each
    weighted by its own noise precision ``1 / psi_d``.

    Each noise variance is held at ``noise_floor`` (``1e-2``) of its feature's variance or above (in the
    training rows, their missing entries at the feature's mean: the same floor from every start), in
    training, in EM with holes and in the check of ``converged_``, which judges the optimum so bounded.
    A floor of the start's own variances moved that optimum with the start: with most noises at the
    floor, a warm start from :class:`MaskedModelSearch`'s moment fit (of variances 1.4 to 1.9 times the
    rows') said converged 0.17 nats per sample below the fit from the random start (``crabs``, 20 % of
    entries self-masking, 4 factors of 5 features). Without the floor the likelihood can peak where a
    feature's noise all but vanishes (a Heywood case, common where columns are nearly collinear and
    entries are missing), an optimum that EM, accelerated or not, approaches at a rate near one: on
    ``breast_cancer`` with 40 % of entries missing, 16 factors, noise variances of 5e-6 of their
    feature's variance and refits of 1.5 and 4.1 CPU s (one stopped short); held at the floor, 0.6 to
    0.7 s. scikit-learn's ``FactorAnalysis`` keeps its noise above ``1e-12`` (in the data's units);
    :meth:`from_estimator` keeps its parameters exactly, below the floor too, and ``warm_start``
    continues them from the floor. A feature whose noise truly is below the floor (a trending series
    nearly determined by the factors) is modelled with more noise than it has: on ``macrodata`` with
    40 % self-masking, 7 of 12 columns below it, one fit imputed 9.8 % worse.

    ``score_samples`` is the cumulative MPT estimate ``sum_M S(x; M)`` of ``log p(x)``;
    with the default chain estimator one ordering gives it exactly.
    ``log_marginal_likelihood`` is the closed form (the value of ``FactorAnalysis.score_samples``
    for the same parameters). :meth:`from_estimator` turns a fitted ``FactorAnalysis`` into this
    estimator.

    Parameters
    ----------
    n_components : int, default=2
        Number of factors ``K``, at most the number of features.
    noise_variance_init : array-like of shape (n_features,), default=None
        The first noise variances ``psi``, in the data's units, as
        :class:`~sklearn.decomposition.FactorAnalysis`'s; None: each feature's own variance
        (a start, like the model, equivariant to each feature's scale). The noise floor is
        ``noise_floor`` of each feature's variance in the data, whatever the start.
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
    warm_start : bool, default=False
        ``fit`` on a fitted factor analysis continues from its parameters instead of the solver's
        start (PCA's solution on complete data, small random loadings with holes), as
        :class:`~sklearn.mixture.GaussianMixture`'s ``warm_start``. The check of ``converged_`` (EM
        from them) judges them first; on data with holes, EM with holes climbs from them where they
        are short of the optimum; MPT trains only if they are still short (with a fixed ``mask_rate``,
        which EM's target is not, MPT trains from them). A refit of :class:`MaskedModelSearch`'s
        candidate, fitted to the training rows' moments, to every row continues it so: on the tuning tables of
        ``benchmarks/imputation_real.py`` all 14 factor analyses the default imputer chose (3 seeds)
        were continued to the optimum with no epoch of MPT, by climbs of 0.01 to 1.2 CPU seconds (the
        longest: 30 features, 16 factors, 40 % of the entries missing).
    noise_floor : float in [0, 1), default=1e-2
        The least noise variance of each feature, as a fraction of its variance in the training rows
        (their missing entries at the feature's mean, so with 40 % missing, 0.6 of that fraction of the
        observed entries' variance): see above. ``0`` lets the noise vanish, as scikit-learn's
        ``FactorAnalysis`` does (its floor is ``1e-12`` in the data's units), at the cost of EM's
        slow climb to a Heywood case. Chosen on the tuning tables of
        ``benchmarks/imputation_real.py`` among ``3e-3``, ``1e-2`` and ``3e-2`` (issue 42).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        ``W^T``: the loadings of each factor on the features.
    noise_variance_ : ndarray of shape (n_features,)
        ``psi``, the noise variance of each feature.
    explained_variance_ : ndarray of shape (n_components,)
        The variance the common factors explain along their principal axes, the eigenvalues
        of ``W W^T``, descending (scikit-learn's ``FactorAnalysis`` has no such attribute;
        unlike PPCA's, the noise is not added, as it is not the same along every axis).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``explained_variance_`` over the model's total variance ``trace(W W^T) + sum(psi)``:
        their sum is the share of the variance the factors explain.
    mean_ : ndarray of shape (n_features,)
        ``mu``.
    module_ : FactorAnalysisModule
        The fitted torch module, with the masked conditionals.
    {params_}
    {device_}
    history_ : list of dict
        One dict per epoch (``epoch``, ``objective``, ``stopping_objective``,
        ``learning_rate``, ``lml`` with ``monitor="lml"``, ``seconds``), as in
        :class:`MaskedPPCA`; empty after :meth:`from_estimator`.
    n_iter_ : int
        Number of epochs run.
    {n_features_in_}
    {n_components_}
    {offset_}
    {feature_names_in_}

    See Also
    --------
    sklearn.decomposition.FactorAnalysis : the same model fitted by SVD-based EM.
    MaskedPPCA : the same model with one noise variance shared by the features.

    References
    ----------
    Moreno-Muñoz, Recasens and Hauberg (2023). On masked pre-training and the marginal
    likelihood. NeurIPS.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.decomposition import FactorAnalysis
    >>> from skmpt import MaskedFactorAnalysis
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(300, 2) @ rng.randn(2, 6) + rng.randn(300, 6) * rng.uniform(0.2, 1.0, 6)
    >>> fa = MaskedFactorAnalysis(n_components=2, random_state=0).fit(X)
    >>> fa.noise_variance_.shape
    (6,)
    >>> em = FactorAnalysis(n_components=2).fit(X)
    >>> bool(abs(fa.score(X) - em.score(X)) < 0.05)
    True
    >>> same = MaskedFactorAnalysis.from_estimator(em)
    >>> bool(np.allclose(same.score_samples(X), em.score_samples(X)))
    True
    """

    _module_class = FactorAnalysisModule
    _isotropic = False
    _parameter_constraints: dict = {
        **_BaseLinearGaussian._parameter_constraints,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "noise_variance_init": [None, "array-like"],
        "warm_start": ["boolean"],
        "noise_floor": [Interval(Real, 0, 1, closed="left")],
    }

    def __init__(
        self, n_components=2, *, noise_variance_init=None, mask_rate="uniform", n_masks=1, score_masks=1,
        score_method="chain", solver="auto", max_epochs=300, batch_size="auto", learning_rate=0.03, tol=1e-3,
        n_iter_no_change=10, monitor=None, monitor_every=1, dtype="float64", device="auto", random_state=None,
        verbose=0, warm_start=False, noise_floor=1e-2
    ):
        self.n_components = n_components
        self.noise_variance_init = noise_variance_init
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
        self.warm_start = warm_start
        self.noise_floor = noise_floor

    def fit(self, X, y=None, sample_weight=None):
        """Fit by MPT from the solver's start, or from the fitted factor analysis with
        ``warm_start=True``; otherwise as :meth:`skmpt.MaskedPPCA.fit`.

        A continued fit starts from the fitted ``components_``, ``mean_`` and ``noise_variance_``:
        it must still match the parameters and the data, so an ``n_components`` set since, or data
        of another number of features, is a ``ValueError`` (refit with ``warm_start=False``). A
        dask collection is not continued (``partial_fit`` streams one).

        {fit_parameters}
        """
        return self._fit_or_continue(X, sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A torch tensor is fitted and scored on its device; under array_api_dispatch the fitted
        # attributes and outputs are tensors there.
        tags.array_api_support = True
        return tags

    def _check_data(self, X):
        super()._check_data(X)
        if self.params_.noise_variance_init is not None:
            init = np.asarray(self.params_.noise_variance_init, dtype=np.float64)
            if init.shape != (X.shape[1],) or not (np.isfinite(init) & (init > 0)).all():
                raise ValueError(
                    f"noise_variance_init must hold one positive, finite variance per feature, shape "
                    f"({X.shape[1]},); got shape {init.shape} with minimum {init.min() if init.size else None}."
                )

    def _initial_noise(self, X, units):
        init = self.params_.noise_variance_init
        if init is None:
            return super()._initial_noise(X, units)
        # Given in the data's units; training divides the data by one overall scale.
        scale = units[1]
        return X.new_tensor(np.asarray(init, dtype=np.float64)) / scale.square()

    @classmethod
    def from_estimator(cls, estimator, **params):
        """A fitted ``MaskedFactorAnalysis`` with the parameters of a fitted ``FactorAnalysis``.

        Its ``log_marginal_likelihood`` equals the source's ``score_samples``, and its MPT
        curve, cumulative score and fixed-rate bias are one call away. It has no training
        history; ``fit`` would train it anew from its own initialisation.

        Parameters
        ----------
        estimator : sklearn.decomposition.FactorAnalysis
            Fitted.
        **params
            Parameters of this estimator other than ``n_components`` (taken from
            ``estimator``), e.g. ``score_masks`` or ``random_state``.

        Returns
        -------
        fitted : MaskedFactorAnalysis

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.decomposition import FactorAnalysis
        >>> from skmpt import MaskedFactorAnalysis
        >>> X = np.random.RandomState(0).randn(100, 5)
        >>> em = FactorAnalysis(n_components=2, random_state=0).fit(X)
        >>> fa = MaskedFactorAnalysis.from_estimator(em, device="cpu")
        >>> rates, curve = fa.mpt_curve(X[:3])
        >>> curve.shape
        (3, 5)
        """
        from sklearn.decomposition import FactorAnalysis

        def build(dtype, device, offset):
            module = FactorAnalysisModule(
                *(torch.as_tensor(a, dtype=dtype, device=device) for a in (
                    estimator.components_, estimator.mean_ - offset, estimator.noise_variance_
                ))
            )
            return estimator.components_.shape[0], module

        return cls._from_fitted(estimator, FactorAnalysis, params, build, lambda fa: fa.mean_)
