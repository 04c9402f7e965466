r"""A deep VAE trained by masked pre-training, scored by Monte Carlo masked conditionals.

The model of Moreno-Muñoz, Recasens and Hauberg (2023), section 3.1, Fig. 3 (lower row):
MLP encoder and decoder, Gaussian or Bernoulli likelihood, conditionals ``p(x_j | x_r)`` by
self-normalised importance sampling (consistent) or recursive encoding-decoding (the paper's),
LML by importance sampling. The paper published no code for this model. With
``categorical_features`` or ``count_features``, one likelihood head per column type
(:class:`~skmpt.models.vae.TableLikelihood`): tables of numbers, categories and counts.
"""

import math
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils import Bunch
from sklearn.utils.validation import check_is_fitted

from .._validation import Interval, Options
from ..models import VAEModule, importance_diagnostics
from ..models.contract import conditioning_set
from ..models.importance import pareto_k_threshold
from ..models.vae import ACTIVATIONS, TableLikelihood
from ._base import _BaseMaskedEstimator
from ._columns import TableColumnsMixin
from ._data import check_mask_array
from ._docs import fill_docstring

__all__ = ["MaskedVAE"]


# ====================================================================== diagnostics
# With ``conditional="importance"`` each conditional is a self-normalised importance-sampling
# estimate ``p_hat = sum_s w_s p(x_j | z_s)`` from ``S = n_particles`` particles whose weights
# ``w_s`` (normalised) depend on the sample and the mask, not on the predicted token ``j``.


def conditional_diagnostics(log_weights, token_log_prob, masks, log_prob):
    """Per-sample-and-mask ESS, Pareto ``k_hat`` and reliability, per-token standard error.

    ``log_weights`` ``(n, P, S)`` (normalised), ``token_log_prob`` ``(n, P, S, D)``, ``masks``
    and ``log_prob`` ``(n, P, D)``: torch tensors. The standard error of ``log p_hat`` is the
    delta-method one of a self-normalised estimate (Owen, 2013, eq. 9.8),
    ``sqrt(sum_s w_s^2 (p(x_j | z_s) / p_hat - 1)^2)``; zero at unmasked tokens.
    """
    n_samples, n_masks, n_particles = log_weights.shape
    flat = importance_diagnostics(log_weights.reshape(-1, n_particles).cpu().numpy())
    ratio = torch.expm1(token_log_prob - log_prob.unsqueeze(-2))  # p(x_j | z_s) / p_hat - 1
    variance = (torch.exp(2 * log_weights).unsqueeze(-1) * ratio.square()).sum(-2)
    standard_error = torch.where(masks, variance.sqrt(), torch.zeros_like(variance))
    return Bunch(
        log_prob=log_prob.cpu().numpy(),
        ess=flat["ess"].reshape(n_samples, n_masks),
        standard_error=standard_error.cpu().numpy(),
        pareto_k=flat["pareto_k"].reshape(n_samples, n_masks),
        reliable=flat["reliable"].reshape(n_samples, n_masks),
        threshold=pareto_k_threshold(n_particles),
    )


def warn_unreliable_conditionals(diagnostics, n_particles, stacklevel=3):
    """The documented rule: warn when a (sample, mask)'s ``k_hat`` is above the threshold."""
    n_unreliable = int((~diagnostics.reliable).sum())
    if n_unreliable:
        warnings.warn(
            f"The importance-sampled conditionals of {n_unreliable} of {diagnostics.reliable.size} "
            f"(sample, mask) pair(s) are unreliable: Pareto k_hat above {diagnostics.threshold:.2f} with "
            f"n_particles={n_particles} (inf: too few particles to fit the tail, at least 20 needed). "
            f"Raise n_particles; if k_hat stays high, the encoder is a poor proposal given those masks.",
            UserWarning,
            stacklevel=stacklevel,
        )
    return diagnostics


# ====================================================================== the estimator


@fill_docstring
class MaskedVAE(TableColumnsMixin, _BaseMaskedEstimator):
    """Variational autoencoder fitted by masked pre-training, with Monte Carlo conditionals.

    ``z ~ N(0, I_K)``, ``x | z ~ N(f(z), diag(v))`` (``v`` learned per feature, floored) or
    ``Bernoulli(sigmoid(f(z)))``, with MLP decoder ``f`` and encoder ``q(z | x)``. The masked
    conditionals ``p(x_j | x_r)`` are estimated with ``n_particles`` particles per sample and
    mask: by self-normalised importance sampling with the encoder as proposal
    (``conditional="importance"``, consistent as particles grow) or by the paper's recursive
    encoding-decoding (``"pseudo_gibbs"``). Both are differentiable, so ``objective="mpt"``
    trains through them. ``log_marginal_likelihood`` is an importance-sampled estimate;
    :meth:`importance_diagnostics` gives, per sample, its weights' effective sample size, its
    standard error and PSIS's Pareto ``k_hat``, and warns when it is unreliable.

    Tables of numbers, categories and counts: with ``categorical_features`` (or
    ``count_features``) the decoder has one head per column type, a Gaussian per numeric column
    (in that column's own units), a categorical per categorical column (a binary column is a
    categorical of two: a Bernoulli) and a Poisson per count column; ``impute`` fills a missing
    category with its most probable value given the observed entries. :class:`MaskedImputer`
    sets these columns from a DataFrame's dtypes.

    Parameters
    ----------
    n_components : int, default=2
        Latent dimension ``K``.
    hidden_layer_sizes : tuple of int, default=(256, 128)
        Encoder layers (the decoder mirrors them); ``()`` gives a linear encoder and decoder.
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
    likelihood : {"gaussian", "bernoulli"}, default="gaussian"
        Of every column, or, with categorical or count columns, of the numeric ones (then "gaussian").
    categorical_features : array-like of int or of bool, or None, default=None
        The categorical columns, by index or by a mask of ``n_features`` booleans; each distinct
        value seen at ``fit`` is a category (``categories_``). None: none.
    count_features : array-like of int or of bool, or None, default=None
        The count columns (non-negative integers), each a Poisson given ``z``, by index or mask.
    categories : "auto" or list of array-like, default="auto"
        Each categorical column's categories: ``"auto"`` learns them from the values ``fit`` sees;
        a list (one array per categorical column, in column order) fixes them, as
        :class:`~sklearn.preprocessing.OneHotEncoder`'s ``categories``.
    objective : {"mpt", "elbo", "iwae"}, default="mpt"
        ``"iwae"`` is the importance-weighted bound with ``n_particles`` draws.
    {mask_rate}
    {n_masks}
    conditional : {"importance", "pseudo_gibbs"}, default="importance"
    n_particles : int, default=16
        Particles per sample and mask for the conditionals (and draws for ``"iwae"``).
    n_gibbs : int, default=5
        Encode-decode rounds of ``"pseudo_gibbs"``.
    {score_masks}
    {score_method}
    n_lml_samples : int, default=100
        Importance samples per datum for ``log_marginal_likelihood`` and the ``"lml"``
        monitor; the IWAE literature reports final numbers with 5000.
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
        ``fit`` continues the fitted VAE (its encoder, decoder and heads) instead of a new start,
        as :class:`~sklearn.neural_network.MLPRegressor`'s ``warm_start``: a refit to more rows costs
        the epochs it still needs. The parameters that shape the networks and heads must be those it
        was fitted with (with categorical columns, ``categories`` given), else a ``ValueError``.

    Attributes
    ----------
    module_ : VAEModule
    categorical_features_ : ndarray of int
        The categorical columns, sorted.
    count_features_ : ndarray of int
        The count columns, sorted.
    numeric_features_ : ndarray of int
        The other columns.
    categories_ : list of ndarray
        Each categorical column's categories, sorted.
    category_counts_ : list of ndarray
        Each categorical column's observed entries of each category at ``fit`` (in the order of
        ``categories_``); a category never observed starts with a logit of ``log(1e-6 / n_j)``
        (``n_j`` the column's observed entries), the mixed mixture's pseudo-count.
    {params_}
    {device_}
    history_ : list of dict
        Per epoch: ``epoch``, ``objective``, ``stopping_objective``, ``learning_rate``,
        ``lml`` (``monitor="lml"`` only, on the epochs it records) and ``seconds``; after
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
    ``monitor="lml"`` records the importance-sampled log-marginal likelihood with
    ``n_lml_samples`` draws; it costs more than a training epoch at D=784, so it is off unless
    asked for.

    Examples
    --------
    >>> from skmpt import MaskedVAE
    >>> from skmpt.datasets import make_ppca
    >>> X = make_ppca(200, 6, 2, random_state=0).data
    >>> vae = MaskedVAE(hidden_layer_sizes=(16,), max_epochs=5, random_state=0).fit(X)
    >>> vae.transform(X[:3]).shape
    (3, 2)

    A table whose last column holds one of three categories:

    >>> import numpy as np
    >>> rng = np.random.RandomState(0)
    >>> table = np.column_stack([X[:, :3], rng.randint(0, 3, len(X))])
    >>> mixed = MaskedVAE(hidden_layer_sizes=(16,), categorical_features=[3], max_epochs=5,
    ...                   random_state=0).fit(table)
    >>> set(mixed.impute([[0.1, 0.2, 0.3, np.nan]])[0, 3:].tolist()) <= {0.0, 1.0, 2.0}
    True
    """

    _parameter_constraints: dict = {
        **_BaseMaskedEstimator._parameter_constraints,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "hidden_layer_sizes": [tuple, list],
        "activation": [Options(set(ACTIVATIONS))],
        "likelihood": [Options({"gaussian", "bernoulli"})],
        "categorical_features": [None, "array-like"],
        "count_features": [None, "array-like"],
        "categories": [Options({"auto"}), list],
        "objective": [Options({"mpt", "elbo", "iwae"})],
        "conditional": [Options({"importance", "pseudo_gibbs"})],
        "n_particles": [Interval(Integral, 1, None, closed="left")],
        "n_gibbs": [Interval(Integral, 0, None, closed="left")],
        "n_lml_samples": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "warm_start": ["boolean"],
    }

    def __init__(
        self, n_components=2, *, hidden_layer_sizes=(256, 128), activation="relu", likelihood="gaussian",
        categorical_features=None, count_features=None, categories="auto", objective="mpt", mask_rate="uniform",
        n_masks=1, conditional="importance", n_particles=16, n_gibbs=5,
        score_masks=10, score_method="sweep", n_lml_samples=100, max_epochs=100, batch_size="auto",
        learning_rate=1e-3, tol=1e-3, n_iter_no_change=10, monitor=None, monitor_every=1, dtype="float64",
        device="auto", random_state=None, verbose=0, warm_start=False
    ):
        self.n_components = n_components
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.likelihood = likelihood
        self.categorical_features = categorical_features
        self.count_features = count_features
        self.categories = categories
        self.objective = objective
        self.mask_rate = mask_rate
        self.n_masks = n_masks
        self.conditional = conditional
        self.n_particles = n_particles
        self.n_gibbs = n_gibbs
        self.score_masks = score_masks
        self.score_method = score_method
        self.n_lml_samples = n_lml_samples
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

    def fit(self, X, y=None, sample_weight=None):
        """Fit by MPT (the ``objective``) from a new start, or from the fitted VAE with
        ``warm_start=True``; otherwise as :meth:`skmpt.MaskedPPCA.fit`.

        {fit_parameters}
        """
        previous = self._warm_start_source(X, ("n_components", "hidden_layer_sizes", "activation", "likelihood"))
        self._fit(X, sample_weight, random_state=self.random_state, previous=previous)
        self._fitted_like(X)
        return self

    def _likelihood(self):
        return self.params_.likelihood

    def _check_data(self, X):
        super()._check_data(X)
        sizes = self.params_.hidden_layer_sizes
        if any(not isinstance(h, Integral) or h < 1 for h in sizes):
            raise ValueError(f"hidden_layer_sizes must hold positive integers; got {sizes!r}.")

    def _to_tensor(self, X, *, reset):
        # Before the data are checked against the likelihood (a Bernoulli one refuses numbers).
        if reset and self.params_.likelihood != "gaussian":
            given = [np.asarray(self.params_[name]) for name in ("categorical_features", "count_features")
                     if self.params_[name] is not None]
            if any(v.size and (v.dtype != bool or v.any()) for v in given):
                raise ValueError(f"With categorical_features or count_features the numeric columns are Gaussian: "
                                 f"likelihood must be 'gaussian'; got {self.params_.likelihood!r}.")
        X_t, observed = super()._to_tensor(X, reset=reset)
        if reset:
            columns = X_t[:, self.categorical_features_].cpu().numpy()
            seen = np.ones_like(columns, dtype=bool) if observed is None else (
                observed[:, self.categorical_features_].cpu().numpy())
            self.category_counts_ = [  # categories are never shifted by offset_: the nearest one of each value
                np.bincount(np.abs(column[rows, None] - categories).argmin(-1), minlength=len(categories))
                for column, rows, categories in zip(columns.T, seen.T, self.categories_, strict=True)]
        return X_t, observed

    def _table_heads(self, X, units):
        """The :class:`~skmpt.models.vae.TableLikelihood` of the (standardised) training data ``X``
        and the encoder's per-column input scale; ``(likelihood name, None)`` without categorical
        or count columns."""
        if not self._discrete(X.shape[1]).size:
            return self.params_.likelihood, None
        center, scale = units
        count = torch.as_tensor(self.count_features_, dtype=torch.long, device=X.device)
        numeric = torch.as_tensor(self.numeric_features_, dtype=torch.long, device=X.device)
        spread = X.std(0) if len(X) > 1 else X.new_ones(X.shape[1])
        spread = torch.where(spread > 0, spread, torch.ones_like(spread))
        heads = TableLikelihood(self.numeric_features_, self.categorical_features_, self.count_features_,
                                self._category_values(center, scale), X.mean(0)[numeric], spread[numeric])
        unit = (1 / scale).reshape(-1).expand(X.shape[1])[count]
        heads.count_unit.copy_(unit)
        heads.count_zero.copy_(-center[count] * unit)
        return heads.to(X.device), spread

    def _build_module(self, X, generator, units):
        # The module's weights come from torch's generator, which fit has seeded from random_state.
        likelihood, input_scale = self._table_heads(X, units)
        module = VAEModule(
            X.shape[1],
            self.params_.n_components,
            tuple(self.params_.hidden_layer_sizes),
            self.params_.activation,
            likelihood,
            conditional=self.params_.conditional,
            n_particles=self.params_.n_particles,
            n_gibbs=self.params_.n_gibbs,
            fill=X.mean(0),
            input_scale=input_scale,
            dtype=X.dtype,
        ).to(X.device)
        # A category that fit never sees (one of a pandas dtype's, or of categories given) starts
        # with the mixed mixture's pseudo-count, 1e-6 against the column's observed entries (the
        # others start as torch draws them): left as probable as the others, it was drawn for holes.
        start = len(self.numeric_features_)  # the categorical columns' logits follow the numeric means
        for counts in self.category_counts_:
            unseen = np.flatnonzero(counts == 0)
            with torch.no_grad():
                module.decoder[-1].bias[start + unseen] = math.log(1e-6 / max(counts.sum(), 1))
            start += len(counts)
        if len(self.count_features_):
            # The log-rates (after the logits) start at the log of each count column's mean (its holes at the
            # column's centre), as the numeric heads start at the columns' means: from exp(0) = 1, counts
            # of about 1e4 were still imputed as 33 to 50 after 100 epochs.
            with torch.no_grad():
                module.decoder[-1].bias[start:] = likelihood.counts(X).mean(0).clamp_min(1e-6).log()
        return module

    def _objective(self):
        # The IWAE bound draws n_particles particles per sample, like the conditionals.
        objective = self.params_.objective
        return objective, {"n_particles": self.params_.n_particles} if objective == "iwae" else {}

    def log_marginal_likelihood(self, X, *, n_lml_samples=None, return_diagnostics=False):
        """Importance-sampled ``log p(x)`` of each sample, with ``n_lml_samples`` draws.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        n_lml_samples : int or None, default=None
            Importance draws of this call; ``None`` is the fitted ``n_lml_samples`` (as
            scikit-learn's ``KNeighborsMixin.kneighbors`` takes ``n_neighbors``): more draws
            for a final estimate without refitting.
        return_diagnostics : bool, default=False
            Also return :meth:`importance_diagnostics` (computed from the same draws, and
            warning as it does).

        Returns
        -------
        log_marginal : ndarray of shape (n_samples,)
        diagnostics : Bunch
            Only with ``return_diagnostics=True``.
        """
        if not return_diagnostics:
            return self._log_marginal_likelihood(X, {"n_lml_samples": self._draws(n_lml_samples)})
        diagnostics = self.importance_diagnostics(X, n_lml_samples=n_lml_samples)
        return diagnostics.log_marginal, diagnostics

    def _draws(self, n_lml_samples):
        """Importance draws of one call: ``n_lml_samples``, or the fitted number."""
        check_is_fitted(self)
        if n_lml_samples is None:
            return self.params_.n_lml_samples
        if isinstance(n_lml_samples, bool) or not isinstance(n_lml_samples, Integral) or n_lml_samples < 1:
            raise ValueError(f"n_lml_samples must be a positive integer or None; got {n_lml_samples!r}.")
        return int(n_lml_samples)

    def importance_diagnostics(self, X, *, n_lml_samples=None):
        """How far the importance-sampled ``log_marginal_likelihood`` can be trusted, per sample.

        From the ``S = n_lml_samples`` weights ``w_s = p(x, z_s) / q(z_s | x)`` of each
        sample (the draws of :meth:`log_marginal_likelihood`, the same with an int
        ``random_state``): the effective sample size ``(sum w)^2 / sum w^2``; the
        delta-method standard error of ``log mean(w)``, ``sqrt((S / ESS - 1) / (S - 1))``
        (a Monte Carlo error only, itself unreliable when the weights' tail is heavy); and
        PSIS's Pareto ``k_hat`` of the largest weights (Vehtari et al., 2024).

        Rule: an estimate is unreliable when ``k_hat > min(1 - 1 / log10(S), 0.7)`` (0.5
        at ``S = 100``; 0.7 from ``S = 2200``): the weights' variance is then infinite or
        nearly, and the standard error means little. A ``UserWarning`` names how many samples
        break it. With ``S < 20`` no tail can be fitted (``k_hat`` is inf) and every sample
        is flagged: raise ``n_lml_samples``. A sample with nothing observed has ``p(x_o) = 1``
        exactly: its log-likelihood is 0, as :meth:`log_marginal_likelihood` gives, and its
        diagnostics those of equal weights (ESS ``S``, standard error 0, ``k_hat`` -inf: no
        tail), reliable.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        n_lml_samples : int or None, default=None
            Importance draws of this call; ``None`` is the fitted ``n_lml_samples``.

        Returns
        -------
        diagnostics : Bunch
            ``log_marginal`` (the estimate), ``ess``, ``standard_error``, ``pareto_k`` and
            ``reliable`` (bool), each an ndarray of shape (n_samples,), and ``threshold``
            (the ``k_hat`` limit for ``S``).

        Examples
        --------
        >>> from skmpt import MaskedVAE
        >>> from skmpt.datasets import make_ppca
        >>> X = make_ppca(100, 4, 1, random_state=0).data
        >>> vae = MaskedVAE(1, hidden_layer_sizes=(8,), max_epochs=3, random_state=0).fit(X)
        >>> d = vae.importance_diagnostics(X[:5])
        >>> sorted(d)
        ['ess', 'log_marginal', 'pareto_k', 'reliable', 'standard_error', 'threshold']
        >>> bool((d.ess >= 1).all() and (d.ess <= 100).all())
        True
        """

        draws = self._draws(n_lml_samples)

        empty = None  # the samples with nothing observed, set by log_weights

        def log_weights(module, X_t, observed):
            nonlocal empty
            weights = module.log_importance_weights(X_t, draws, observed=observed, generator=self._noise_generator())
            empty = np.zeros(len(X_t), dtype=bool) if observed is None else ~observed.any(1).cpu().numpy()
            # Nothing observed: p(x_o) = 1 exactly, as the plain path scores it; every weight is one.
            return weights if observed is None else torch.where(observed.any(1, keepdim=True), weights, 0.0)

        diagnostics = importance_diagnostics(self._evaluate(X, log_weights))
        # Equal weights, exactly (their float ESS and standard error are off by rounding): no tail.
        for key, value in [("ess", draws), ("standard_error", 0.0), ("pareto_k", -np.inf), ("reliable", True)]:
            diagnostics[key][empty] = value
        threshold = pareto_k_threshold(draws)
        result = Bunch(
            log_marginal=diagnostics["log_mean"],
            ess=diagnostics["ess"],
            standard_error=diagnostics["standard_error"],
            pareto_k=diagnostics["pareto_k"],
            reliable=diagnostics["reliable"],
            threshold=threshold,
        )
        n_unreliable = int((~result.reliable).sum())
        if n_unreliable:
            warnings.warn(
                f"The importance-sampled log-likelihood of {n_unreliable} of {len(result.reliable)} sample(s) "
                f"is unreliable: Pareto k_hat above {threshold:.2f} with n_lml_samples={self.params_.n_lml_samples} "
                f"(inf: too few draws to fit the tail, at least 20 needed). Raise n_lml_samples; if k_hat "
                f"stays high, the encoder is a poor proposal for those samples.",
                UserWarning,
                stacklevel=2,
            )
        return result

    def conditional_log_prob(self, X, masks, *, return_diagnostics=False):
        """The masked conditionals ``log p(x_j | x_r)``, per token (importance-sampled estimates).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        masks : array-like of bool of shape (n_masks, n_features) or \
                (n_samples, n_masks, n_features)
            ``True`` marks a masked token; masks of shape (n_masks, n_features) are shared.
        return_diagnostics : bool, default=False
            Also return :meth:`conditional_diagnostics` (the same draws, warning as it does).

        Returns
        -------
        log_prob : ndarray of shape (n_samples, n_masks, n_features)
            ``log p(x_j | x_r)`` at masked positions, zero at unmasked ones.
        diagnostics : Bunch
            Only with ``return_diagnostics=True``.
        """
        if not return_diagnostics:
            return super().conditional_log_prob(X, masks)
        diagnostics = self.conditional_diagnostics(X, masks)
        return diagnostics.log_prob, diagnostics

    def conditional_diagnostics(self, X, masks):
        """How far the importance-sampled conditionals can be trusted, per sample and mask.

        With ``conditional="importance"``, ``p(x_j | x_r)`` is a self-normalised estimate
        from ``S = n_particles`` particles whose weights depend on the sample and the mask.
        The same rule as :meth:`importance_diagnostics`: a (sample, mask) is unreliable when
        its weights' Pareto ``k_hat`` exceeds ``min(1 - 1 / log10(S), 0.7)``, with a
        ``UserWarning`` naming how many; with ``S < 20`` (the default ``n_particles=16``)
        no tail can be fitted and every pair is flagged. Use it on the masks behind
        ``score_samples`` and ``mpt_curve`` (e.g. random masks at the rates of interest) to
        check their conditionals.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        masks : array-like of bool of shape (n_masks, n_features) or \
                (n_samples, n_masks, n_features)

        Returns
        -------
        diagnostics : Bunch
            ``log_prob`` (:meth:`conditional_log_prob`, the same numbers) and
            ``standard_error`` (delta-method, of ``log p_hat`` per token, zero at unmasked
            ones), each of shape (n_samples, n_masks, n_features); ``ess``, ``pareto_k`` and
            ``reliable`` of shape (n_samples, n_masks); ``threshold``.

        Examples
        --------
        >>> import numpy as np
        >>> from skmpt import MaskedVAE
        >>> from skmpt.datasets import make_ppca
        >>> X = make_ppca(100, 4, 1, random_state=0).data
        >>> vae = MaskedVAE(1, hidden_layer_sizes=(8,), n_particles=64, max_epochs=3, random_state=0).fit(X)
        >>> masks = np.eye(4, dtype=bool)
        >>> d = vae.conditional_diagnostics(X[:5], masks)
        >>> d.ess.shape, d.standard_error.shape
        ((5, 4), (5, 4, 4))
        """
        check_is_fitted(self)
        if self.params_.conditional != "importance":
            raise ValueError("conditional_diagnostics needs conditional='importance'; "
                             f"the {self.params_.conditional!r} conditionals have no importance weights.")
        log_prob = self.conditional_log_prob(X, masks)
        check_is_fitted(self)
        X_t, observed = self._to_tensor(X, reset=False)
        mask_t = torch.as_tensor(check_mask_array(masks, self.n_features_in_), device=X_t.device)
        with torch.no_grad():
            log_w, token = self.module_.masked_log_prob_weights(
                X_t, mask_t, generator=self._noise_generator(), observed=observed
            )
        scored = conditioning_set(mask_t, observed)[0].expand(log_prob.shape)
        diagnostics = conditional_diagnostics(log_w, token, scored, torch.as_tensor(log_prob, device=X_t.device))
        return warn_unreliable_conditionals(diagnostics, self.params_.n_particles)

    def _log_marginal_kwargs(self):
        # log_marginal_likelihood and history_["lml"] are importance-sampled with this many draws.
        return {"n_lml_samples": self.params_.n_lml_samples}
