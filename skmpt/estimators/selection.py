"""MaskedModelSearch: choose a model's family and size by a held-out score of what was observed.

Every skmpt array estimator scores a sample by the cumulative MPT estimate of ``log p(x_o)``, the
log-likelihood of its observed entries (exact for the Gaussian models with the default chain
score). Fitted to some rows and scored on the others, that is the held-out marginal likelihood of
each candidate model, with a standard error from the spread of the held-out rows:

    score(model) = (1/n) sum_{i held out} log p(x_{i,o} | model fitted to the other rows)

(Moreno-Muñoz, Recasens and Hauberg, 2023: MPT summed over every mask size is the log-marginal
likelihood.) The search fits each family's candidates in order of size and stops a family when a
larger one no longer scores higher, or when it is so far behind the leading family that one more
gain as large as its last could not close the gap; then it refits the best candidate to every row
(at most ``refit_max_samples`` of them), continuing a mixture's fit where that fit holds on them.

That score is one of three criteria (``criterion``): the held-out log-marginal likelihood above
(``"likelihood"``, the joint of what was observed); the MPT curve at the table's own missing rate
(``"conditional"``: a share of each held-out row's observed entries, the table's missing rate,
hidden again and scored by ``log p(x_hidden | x_rest)``, the conditionals an imputer predicts,
which a fixed rate scores where the sum over rates scores the joint); and the error of imputing
those hidden entries (``"remask"``: minus their mean squared error, each feature scaled by its
observed variance). The fourth, ``"likelihood_remask"``, keeps the likelihood's choice unless
another candidate's remask error is significantly lower on the held-out rows (a one-sided paired
test, level 5 % over the candidates it is compared with): a measurement on the user's own rows
decides where it is clear, the likelihood where it is not.
"""

import copy
import logging
import numbers
import sys
import time
import warnings

import numpy as np
from scipy.stats import norm
from sklearn.base import BaseEstimator, clone
from sklearn.decomposition import PCA, FactorAnalysis
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import Interval, Options, is_imputer, validate_parameters
from .factor_analysis import MaskedFactorAnalysis
from .gaussian_mixture import MaskedGaussianMixture, em_converged
from .linear_vae import MaskedLinearVAE
from .ppca import MaskedPPCA
from .vae import MaskedVAE

__all__ = ["FAMILIES", "MaskedModelSearch", "default_candidates"]

logger = logging.getLogger(__name__)

#: The families :func:`~skmpt.estimators.selection.default_candidates` knows, in the order it tries them.
FAMILIES = ("full", "fa", "ppca", "diag", "linear_vae", "vae")

# Settings of the default candidates: full-batch-like steps with a larger learning rate and a
# short patience, so that each fit converges in tens of epochs on tables of a few thousand rows.
_FAST = {"learning_rate": 0.05, "n_iter_no_change": 3, "max_epochs": 200, "n_masks": 1}
# Full-covariance mixtures start from EM on the observed entries (the same target as MPT, reached
# in closed-form steps); MPT then continues with small steps and stops at its first stalls.
_FULL = {"init_params": "em", "learning_rate": 1e-3, "n_iter_no_change": 1}
# Observed training entries a full-covariance mixture with more than one component needs per free
# parameter to be tried (chosen on the tuning tables: 10 let breast_cancer's 2-component mixture in,
# which EM took 500 steps to start and the search never chose).
_ENTRIES_PER_PARAMETER = 20


def _sizes(n_features, *, start=1):
    """1, 2, 4, 8, ... below ``n_features`` (at least ``start``)."""
    sizes, size = [], start
    while size < max(n_features, start + 1):
        sizes.append(size)
        size *= 2
    return sizes


def _full_parameters(n_components, n_features):
    """Free parameters of a full-covariance mixture (GaussianMixture's count)."""
    return n_components * (n_features + n_features * (n_features + 1) // 2) + n_components - 1


def default_candidates(n_features, *, binary=False, families="auto", n_samples=None, n_observed=None,
                       random_state=None):
    """The candidate models :class:`MaskedModelSearch` tries by default, one list per family.

    Parameters
    ----------
    n_features : int
        Features of the data.
    binary : bool, default=False
        Whether every observed entry is 0 or 1: ``families="auto"`` is then the Bernoulli linear
        VAE; otherwise the Gaussian families ``("full", "fa", "ppca")`` (diagonal mixtures are left
        out: on a column of a few distinct values they can put a component's variance near zero and
        win on likelihood while imputing poorly).
    families : "auto" or sequence of str, default="auto"
        Among :data:`~skmpt.estimators.selection.FAMILIES`: ``"full"`` and ``"diag"`` are Gaussian
        mixtures of that covariance type with 1, 2, 3 components (``"full"``, started by EM on the
        observed entries, ``init_params="em"``) or 2, 4, 8 (``"diag"``), ``"fa"`` and ``"ppca"``
        factor analysis and PPCA with 1, 2, 4, ... components below ``n_features``,
        ``"linear_vae"`` the linear VAE with 1, 2, 3 latent dimensions (Bernoulli for binary data),
        ``"vae"`` a VAE with one hidden layer of 32 units and 2, 4, 8 latent dimensions.
    n_samples : int or None, default=None
        Rows the candidates are fitted to: the batch size is ``min(n_samples, 1000)`` (None: 1000).
    n_observed : int or None, default=None
        Observed entries of those rows: a full-covariance mixture with more free parameters than
        a twentieth of them is left out (beyond that, on the tuning
        tables, it was not chosen or imputed no better, at the search's highest cost: its EM start
        on ``breast_cancer`` took most of the search's time); None: no limit.
    random_state : int or None, default=None
        Given to every candidate.

    Returns
    -------
    candidates : dict of str to list of estimators
        Each family's candidates in increasing size.

    Examples
    --------
    >>> from skmpt.estimators.selection import default_candidates
    >>> {family: [m.n_components for m in models] for family, models in default_candidates(5).items()}
    {'full': [1, 2, 3], 'fa': [1, 2, 4], 'ppca': [1, 2, 4]}
    """
    if isinstance(families, str):
        if families != "auto":
            raise ValueError(f"families must be 'auto' or a sequence of {list(FAMILIES)}; got {families!r}.")
        families = ("linear_vae",) if binary else ("full", "fa", "ppca")
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown or not families:
        raise ValueError(f"Unknown or no families {unknown}; choose among {list(FAMILIES)}.")
    common = {**_FAST, "batch_size": min(n_samples or 1000, 1000), "random_state": random_state}
    makers = {
        "full": lambda: [
            MaskedGaussianMixture(k, **{**common, **_FULL}) for k in (1, 2, 3)
            if k == 1 or n_observed is None or _ENTRIES_PER_PARAMETER * _full_parameters(k, n_features) <= n_observed
        ],
        "diag": lambda: [MaskedGaussianMixture(k, covariance_type="diag", **common) for k in (2, 4, 8)],
        "fa": lambda: [MaskedFactorAnalysis(k, **common) for k in _sizes(n_features)],
        "ppca": lambda: [MaskedPPCA(k, **common) for k in _sizes(n_features)],
        "linear_vae": lambda: [
            MaskedLinearVAE(k, likelihood="bernoulli" if binary else "gaussian", n_quadrature=8, **common)
            for k in (1, 2, 3)
        ],
        "vae": lambda: [
            MaskedVAE(k, hidden_layer_sizes=(32,), likelihood="bernoulli" if binary else "gaussian", **common)
            for k in (2, 4, 8)
        ],
    }
    return {family: makers[family]() for family in families}


def _moment_matched_rows(mean, covariance, *, ddof=0):
    """``2 D`` rows whose mean is ``mean`` and whose covariance (``ddof`` as in ``numpy.cov``) is
    ``covariance`` (symmetric positive semi-definite): ``mean ± c sqrt(lambda_j) v_j`` over its
    eigenpairs, ``c = sqrt((2 D - ddof) / 2)``. A model of the data's moments (PCA, factor
    analysis) fitted to these rows is the one fitted to any data of those moments."""
    eigenvalues, eigenvectors = np.linalg.eigh((covariance + covariance.T) / 2)
    spread = eigenvectors * np.sqrt(np.clip(eigenvalues, 0, None) * (2 * len(mean) - ddof) / 2)
    return np.vstack([mean + spread.T, mean - spread.T])


# scikit-learn's estimators of the moment fits, and the delta degrees of freedom of the covariance they read.
_MOMENT_MODELS = {MaskedPPCA: (PCA, 1), MaskedFactorAnalysis: (FactorAnalysis, 0)}
# Factor analysis of the moments: EM iterations per round between two checks of what is left to
# gain, and at most this many iterations in all.
_MOMENT_ROUND, _MOMENT_MAX_ITER = 10, 10_000


def _factor_analysis_of_moments(rows, n_components, tol):
    """scikit-learn's FactorAnalysis (EM) of ``rows`` in rounds of ``_MOMENT_ROUND`` iterations, each
    continuing the last (EM's state is the noise, its ``noise_variance_init``), until the check of
    ``converged_`` (:func:`~skmpt.estimators.gaussian_mixture.em_converged` on the log-likelihood per
    row) finds less than ``tol`` nats per row left to gain (an extrapolation: 0.9 to 1.5 times
    ``tol`` was left in the fits measured). scikit-learn's own rule, an iteration gaining less than
    its ``tol`` in all, judges how far EM moves, not how far it has to go: at ``1e-4`` over the
    ``2 D`` rows it ran 2098 iterations (0.39 CPU s, a quarter of the search's) for the 16 factors of
    ``benchmarks/imputation_real.py``'s breast_cancer with 40 % holes, and 159 on a table of ten
    features whose noise spans two decades; the check passed after 520 and 20 (tol 1e-2).

    EM starts from each column's variance as its noise (scikit-learn's start is a noise of one
    whatever the column's units), so the fit is equivariant to each feature's scale, as the model
    is: from the unit start, columns on scales 1e-2 ... 1e2 had ended at another optimum, a factor
    scoring 1.04 nats per row lower and the search choosing another model."""
    values, noise = [], np.maximum(rows.var(0), np.finfo(float).tiny)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # every round stops at its max_iter
        while True:
            source = FactorAnalysis(n_components, svd_method="lapack", tol=0.0, max_iter=_MOMENT_ROUND,
                                    noise_variance_init=noise).fit(rows)
            values.extend(np.asarray(source.loglike_) / len(rows))
            noise = source.noise_variance_
            if (len(source.loglike_) < _MOMENT_ROUND  # a step that lost: EM is at its optimum
                    or em_converged(values, tol) or len(values) >= _MOMENT_MAX_ITER):
                return source


def _moment_fit(candidate, gaussian, tol):
    """``candidate`` (a :class:`MaskedPPCA` or :class:`MaskedFactorAnalysis`) fitted to the mean and
    covariance of the fitted one-component full-covariance mixture ``gaussian``: scikit-learn's
    PCA (the maximum-likelihood PPCA of that covariance) or FactorAnalysis (EM on it, to ``tol``
    nats per sample left to gain), with the candidate's own parameters."""
    model, ddof = _MOMENT_MODELS[type(candidate)]
    # Rows about zero, the mean set after: both models are equivariant to a shift, and a spread added to a
    # large mean (a constant column at 1e15) is lost in floating point (the PCA's noise had been 0).
    mean = gaussian.means_[0]
    rows = _moment_matched_rows(np.zeros_like(mean), gaussian.covariances_[0], ddof=ddof)
    params = candidate.get_params()
    n_components = params.pop("n_components")
    if model is PCA:
        source = PCA(n_components, svd_solver="full").fit(rows)
    else:
        source = _factor_analysis_of_moments(rows, n_components, tol)
    source.mean_ = mean.copy()
    return type(candidate).from_estimator(source, **params)


def _is_one_gaussian(model):
    """Whether ``model`` is a fitted one-component full-covariance :class:`MaskedGaussianMixture` at its
    optimum (``converged_``): the maximum likelihood whose moments stand for the data's (one stopped
    after an epoch from a random start had ranked a factor analysis a nat per row below its own fit)."""
    return (isinstance(model, MaskedGaussianMixture) and model.covariance_type == "full" and model.n_components_ == 1
            and bool(getattr(model, "converged_", False)))


def _mean_and_error(values):
    """The mean of ``values`` and its standard error (sample standard deviation / sqrt(n))."""
    n = len(values)
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")


#: The selection criteria of :class:`MaskedModelSearch`.
CRITERIA = ("likelihood", "conditional", "remask", "likelihood_remask")
# Draws of the hidden entries per held-out row for the "conditional" and "remask" criteria.
_N_DRAWS = 3
# A refit scoring more than this many standard errors below its candidate's selection score on
# the held-out rows (which it was fitted to, so it should score higher) is not used.
_REFIT_TOLERANCE = 3.0
# Level of the one-sided paired test by which criterion="likelihood_remask" sets the likelihood's
# choice aside for a candidate of lower remask error (Bonferroni over the candidates compared; fixed
# before any table was measured with it).
_REMASK_LEVEL = 0.05
# Level of the one-sided paired test by which a later (costlier) imputer of a list of fallbacks
# replaces the best so far: the usual 5 %, fixed before any table was measured with it (a lower mean
# alone kept missForest's trees where a stray leaf of one row had imputed worse).
_FALLBACK_LEVEL = 0.05


def _remask(X, rate, n_draws, rng):
    """``X`` tiled ``n_draws`` times, and which observed entries of each copy are hidden again:
    each with probability ``rate``, one observed entry of each row always kept."""
    X = np.tile(X, (n_draws, 1))
    observed = ~np.isnan(X)
    hidden = observed & (rng.random_sample(X.shape) < rate)
    keep = np.argmax(np.where(observed, rng.random_sample(X.shape), -1.0), axis=1)
    hidden[np.arange(len(X)), keep] = False
    return X, hidden


class _Scorer:
    """Per held-out row values of one criterion, higher better; their mean is the score
    (``"likelihood_remask"`` scores by the likelihood; :meth:`check` gives the remask values)."""

    def __init__(self, criterion, X_train, X_held_out, random_state, n_draws=_N_DRAWS):
        self.criterion, self.X, self.n_draws = criterion, X_held_out, n_draws
        if criterion == "likelihood":
            return
        observed = ~np.isnan(X_train)
        rate = float(np.clip(1 - observed.mean(), 1 / X_train.shape[1], 0.5))
        self.tiled, self.hidden = _remask(X_held_out, rate, n_draws, check_random_state(random_state))
        self.masked = np.where(self.hidden, np.nan, self.tiled)
        scale = np.nanvar(X_train, axis=0)
        self.scale = np.where(scale > 0, scale, 1.0)

    def __call__(self, model):
        if self.criterion in ("likelihood", "likelihood_remask"):
            return model.score_samples(self.X)
        if self.criterion == "conditional":
            values = model.score_samples(self.tiled) - model.score_samples(self.masked)
        else:
            return self.remask_values(model)
        return values.reshape(self.n_draws, len(self.X)).mean(0)

    def check(self, model):
        """The remask values of ``model`` for ``"likelihood_remask"``, else None."""
        return self.remask_values(model) if self.criterion == "likelihood_remask" else None

    def remask_values(self, model):
        """Minus each held-out row's share of the mean squared error of the entries hidden again
        (features scaled by their observed variance), over the draws."""
        return self.imputed_values(model.impute(self.masked))

    def blend_weight(self, ours, theirs):
        """The weight ``w`` in [0, 1] of the imputations ``ours`` in ``w ours + (1 - w) theirs`` (both of
        ``self.masked``) of least squared error on the entries hidden again, features scaled by
        their variance (least squares in ``w``, clipped); 1 where the two agree."""
        scale = np.sqrt(self.scale)
        gap = np.where(self.hidden, (ours - theirs) / scale, 0.0)
        error = np.where(self.hidden, (np.nan_to_num(self.tiled) - theirs) / scale, 0.0)
        spread = float((gap * gap).sum())
        return 1.0 if spread == 0 else float(np.clip((gap * error).sum() / spread, 0.0, 1.0))

    def imputed_values(self, imputed):
        """:meth:`remask_values` of the imputations ``imputed`` of ``self.masked``."""
        error = np.where(self.hidden, (imputed - np.nan_to_num(self.tiled)) ** 2 / self.scale, 0)
        values = -error.sum(1) * len(error) / max(int(self.hidden.sum()), 1)
        return values.reshape(self.n_draws, len(self.X)).mean(0)


def _check_imputed(imputer, imputed, X):
    """A ``ValueError`` naming the fallback ``imputer`` unless its output ``imputed`` for ``X`` (NaN
    where missing) has ``X``'s shape, a finite value in every hole and ``X``'s observed entries (up to
    float32 rounding): a fallback that drops columns, leaves holes or transforms the data (a scaler
    in its pipeline) would be blended into the imputations as if it imputed them."""
    if imputed.shape != X.shape:
        raise ValueError(f"fallback {imputer!r} returned {imputed.shape[1]} columns for {X.shape[1]}: it "
                         f"must impute every column (keep_empty_features=True, no indicator columns).")
    holes = np.isnan(X)
    unfilled = int((~np.isfinite(imputed[holes])).sum())
    if unfilled:
        raise ValueError(f"fallback {imputer!r} left {unfilled} of {int(holes.sum())} missing entries without a "
                         f"finite value: it must fill every hole.")
    if not np.allclose(imputed[~holes], X[~holes], rtol=1e-6, atol=0.0):
        raise ValueError(f"fallback {imputer!r} changed observed entries: it must return them as given (an "
                         f"imputer, not a transformer of the data).")


def _significantly_higher(values, reference, level):
    """Whether the mean of ``values`` exceeds that of ``reference`` by a one-sided test at ``level`` of
    their difference paired over the rows (z statistic)."""
    gain, error = _mean_and_error(values - reference)
    return gain > 0 and error > 0 and gain / error > norm.isf(level)


def _lower_remask_error(checks, chosen):
    """``chosen``, or the candidate of highest mean remask value among those whose remask values
    exceed ``chosen``'s significantly: a one-sided test of the mean difference paired over the
    held-out rows (z statistic), at level ``_REMASK_LEVEL`` divided by the candidates compared."""
    others = [i for i in range(len(checks)) if i != chosen]
    level = _REMASK_LEVEL / max(len(others), 1)
    better = [i for i in others if _significantly_higher(checks[i], checks[chosen], level)]
    return max(better, key=lambda i: checks[i].mean()) if better else chosen


class _Progress:
    """A line on stderr per fitted candidate once the search has run ``after`` seconds (wall time),
    or from a forced update on: tqdm's bar where tqdm is installed, else plain lines."""

    def __init__(self, enabled, after=3.0):
        self.enabled, self.after, self.start, self.bar = enabled, after, time.perf_counter(), None

    def update(self, done, total, message, force=False):
        if not self.enabled or not (force or time.perf_counter() - self.start >= self.after):
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            print(f"MaskedModelSearch: {done}/{total} fits, {message}", file=sys.stderr, flush=True)
            return
        if self.bar is None:
            self.bar = tqdm(total=total, initial=done - 1, desc="MaskedModelSearch", unit="fit", leave=False)
        self.bar.total = total
        self.bar.set_postfix_str(message, refresh=False)
        self.bar.update(done - self.bar.n)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _split_rows(observed, validation_fraction, random_state):
    """Training and held-out rows, every feature observed in at least one training row."""
    n_samples = len(observed)
    rng = check_random_state(random_state)
    held_out = np.zeros(n_samples, dtype=bool)
    n_held_out = max(2, int(round(validation_fraction * n_samples)))  # a standard error needs two rows
    if n_held_out > n_samples - 2:
        raise ValueError(
            f"validation_fraction={validation_fraction} of {n_samples} samples leaves {n_samples - n_held_out} "
            f"training samples; at least 2 are needed."
        )
    held_out[rng.permutation(n_samples)[:n_held_out]] = True
    for feature in np.flatnonzero(~observed[~held_out].any(0)):
        # A feature seen only in held-out rows: move one such row to training.
        held_out[np.flatnonzero(held_out & observed[:, feature])[0]] = False
    if not held_out.any():
        rare = np.flatnonzero(observed.sum(0) < 2)
        raise ValueError(f"Of {n_held_out} held-out rows, {int(held_out.sum())} remain once the rows that alone "
                         f"observe a feature are moved to training: candidates cannot be scored. Features observed "
                         f"in fewer than two rows: {rare[:10].tolist()}; drop them, or give more rows.")
    return ~held_out, held_out


class MaskedModelSearch(BaseEstimator):
    """Choose a model (its family and size) by a held-out score of the observed entries.

    Each candidate is fitted to a random ``1 - validation_fraction`` of the rows and scored on the
    others, by ``criterion``. With ``"likelihood"`` the score is ``score_samples``: the cumulative
    MPT estimate of ``log p(x_o)``, the log-likelihood of each held-out row's observed entries
    (exact for the Gaussian models' default chain score), so ``NaN`` entries are marginalised out
    and candidates of different families and sizes are compared on one scale. With
    ``"conditional"`` and ``"remask"`` a share of each held-out row's observed entries (the
    table's missing rate, at least one entry in ``n_features`` and at most half; three draws per
    row) is hidden again and the score is the log-likelihood of the hidden entries given the rest
    (the MPT curve at that rate) or minus their imputation's mean squared error (each feature
    divided by its variance); ``"likelihood_remask"`` ranks by the likelihood and computes the
    remask values of every candidate too. Within a family (a list of candidates in increasing size) the search
    stops at the first candidate that does not score higher than the family's best so far, and
    a family is dropped when one more gain as large as its last would leave it more than one
    paired standard error below the leading family (gains shrink as sizes double). Among all the
    fitted candidates, the chosen one is the highest-scoring (``rule="best"``) or the one with the
    fewest parameters among those within one standard error of it (``rule="one_se"``); with
    ``"likelihood_remask"``, that choice gives way to a candidate whose remask error is
    significantly lower (the best such by remask); it is then
    refitted to every row, at most ``refit_max_samples`` (``best_estimator_``): a candidate with
    a ``warm_start`` parameter (:class:`MaskedGaussianMixture`, :class:`MaskedFactorAnalysis`)
    continues from its fit to the training rows (a mixture with ``init_params="em"`` and a factor
    analysis by EM from those parameters, then MPT only where EM leaves it short; a mixture's EM then
    does not start from k-means), unless its log-likelihood of every row is more than three standard
    errors below that of the held-out rows; any other is fitted from its start. A refit that scores more than
    three standard errors below its candidate's selection score on the held-out rows (rows it was
    fitted to, so it should score higher) is not used: a continued one (like one that did not
    converge) gives way to the candidate's fit from its start, and that to the next candidate by score
    (``rejected_refits_``). The factor analysis and PPCA candidates are
    fitted to the moments of the one-component Gaussian (``linear_fit``), and every candidate only
    to the ``candidate_tol`` it needs to rank.

    Parameters
    ----------
    candidates : dict of str to list of estimators, list of estimators, or None, default=None
        The candidates, by family, each family in increasing size (a plain list is one family).
        None: :func:`~skmpt.estimators.selection.default_candidates` for the data (Bernoulli linear VAEs
        for binary data,
        else full-covariance Gaussian mixtures, factor analysis and PPCA), each with ``random_state``.
    validation_fraction : float, default=0.2
        Share of the rows held out to score the candidates (at least 2 rows).
    greedy : bool, default=True
        Stop a family at its first candidate that does not improve its held-out score, and a
        family whose best score, raised by its last gain, stays more than one paired standard
        error below the leading family's; if False, fit every candidate.
    rule : {"best", "one_se"}, default="best"
        ``"best"``: the highest held-out score; ``"one_se"``: the fewest parameters (of the fitted
        ``module_``) among the candidates within one standard error of the highest, the
        difference's error paired over the held-out rows.
    criterion : {"likelihood", "conditional", "remask", "likelihood_remask"}, default="likelihood"
        What the held-out score measures: ``"likelihood"``, the log-likelihood of each held-out
        row's observed entries (the joint, nats per sample); ``"conditional"``, the log-likelihood
        of entries hidden again given the rest of the row (nats per sample), what imputation
        predicts; ``"remask"``, minus the mean squared error of imputing those entries (features
        scaled to unit variance), the imputer's own loss; ``"likelihood_remask"``, the likelihood,
        whose choice is kept unless another candidate's remask value is higher by more than a
        one-sided paired test allows at level 5 % (divided by the number of candidates compared;
        pairs of held-out rows, z statistic): the imputer's own loss on the user's rows where the
        difference is clear, the likelihood, which has less noise, where it is not.
    max_samples : int or None, default=2000
        Most rows the candidates are fitted to and scored on (a random subset of them, split by
        ``validation_fraction``); the refit uses every row (at most ``refit_max_samples``). None:
        every row.
    max_fits : int or None, default=None
        Most candidates fitted (in the order of the families, each family's first candidate
        before any family's second); None: no limit. A budget that, unlike a time limit, keeps the
        choice reproducible.
    linear_fit : {"moments", "mpt"}, default="moments"
        How the :class:`MaskedPPCA` and :class:`MaskedFactorAnalysis` candidates of fewer
        components than features are fitted once the search has fitted a one-component
        full-covariance :class:`MaskedGaussianMixture` at its optimum (``converged_``; the default
        candidates' first):
        ``"moments"``, to that Gaussian's mean and covariance (its maximum likelihood on the
        observed entries, by EM), by scikit-learn's :class:`~sklearn.decomposition.PCA` (the
        maximum-likelihood PPCA of a covariance) and :class:`~sklearn.decomposition.FactorAnalysis`
        (EM), in milliseconds; ``"mpt"``, each by its own ``fit``. Exact on complete data; with
        holes, the structured model of the Gaussian's covariance stands for the structured model's
        own maximum likelihood, to rank them; the chosen candidate's refit is its own ``fit``.
    candidate_tol : float or None, default=1e-2
        The least ``tol`` (nats per sample) the candidates are fitted to: they only rank, so each
        is trained to the larger of its own ``tol`` and this; the refit of the chosen one to its
        own. None: each candidate's own ``tol``.
    refit : bool, default=True
        Refit the chosen candidate to every row (at most ``refit_max_samples``), unless a
        ``fallback`` alone imputes better than it alone (the candidate then has the lesser weight in
        the blend, if any); if False, or where the fallback was chosen, ``best_estimator_`` is the
        candidate fitted to the training rows (no second fit: faster, on fewer rows).
    refit_max_samples : int or None, default=None
        Most rows the refit uses (a random subset of them); None: every row. A cost lever for
        large tables, not a default: on ``benchmarks/imputation_real.py``'s ``fair`` (6,366 rows)
        2000 rows cut the refit of its 3-component mixture from 3.5-5.3 to 0.6 CPU seconds at
        +0.3 % RMSE, but on ``diamonds`` (50,000 rows, heavy tails) the mixture refitted to 2000
        rows imputed the others 1.5 to 2.8 times worse than the one refitted to every row.
    random_state : int, RandomState instance or None, default=None
        The split of the rows, and the ``random_state`` of the default candidates.
    verbose : int, default=0
        Log each candidate's held-out score and time (logger ``skmpt.estimators.selection``,
        level INFO) as it is fitted.
    progress : bool, default=True
        Once the search has run three seconds, or when it refits to more than twice the rows the
        candidates were fitted to, show its progress on stderr (a tqdm bar where tqdm is
        installed, else a line per fit).
    fallback : imputer, list of imputers or None, default=None
        An imputer (an instance with ``fit_transform`` and ``transform`` that returns every column,
        the observed entries as given and a finite value in every hole, else a ``ValueError``; e.g.
        scikit-learn's :class:`~sklearn.impute.IterativeImputer`) compared with the chosen candidate before the
        refit: a share of the held-out rows' observed entries (the table's missing rate, one draw) is
        hidden again, the fallback is fitted once to the search's rows with those entries blanked,
        and the chosen candidate as fitted to the training rows imputes the same entries; the
        weight ``w`` in [0, 1] of the candidate's imputations in their blend with the fallback's is
        the one of least squared error there (features scaled by their variance), and
        ``fallback_`` is the fitted fallback where ``w < 1``; where the fallback's mean squared
        error is lower than the candidate's, the candidate is not refitted (see ``refit``). A list
        of imputers, lighter first: each is fitted in turn to the same blanked rows while the best
        so far imputes those entries better than the candidate alone (a costlier imputer only
        where a lighter one has already beaten the model), and replaces it where its mean squared
        error there is lower by a one-sided paired test at 5 % over the held-out rows.
        :class:`MaskedImputer` imputes with the blend, and sets it from its own ``fallback`` where
        the search has none.

    Attributes
    ----------
    best_estimator_ : estimator
        The chosen candidate, fitted.
    best_index_ : int
        Its row in ``cv_results_``.
    best_score_ : float
        Its held-out score by ``criterion`` (nats per sample; minus a mean squared error for
        ``"remask"``; the likelihood for ``"likelihood_remask"``).
    rejected_refits_ : list of int
        Rows of ``cv_results_`` whose refit (from the candidate's start, after a continued one
        where there was one) scored more than three standard errors below their selection score
        on the held-out rows and was not used.
    cv_results_ : dict of str to ndarray
        One entry per fitted candidate: ``family``, ``n_components``, ``estimator`` (its repr),
        ``n_parameters`` (of its ``module_``), ``mean_test_score`` (held-out nats per sample),
        ``std_error`` (its standard error), ``std_error_difference`` (the standard error of its
        difference from the highest-scoring candidate, paired over the held-out rows; 0 for that
        one), ``rank_test_score``, ``n_iter`` (epochs), ``fitted_by`` (``"fit"``, its own
        ``fit``, or ``"moments"``, see ``linear_fit``), ``fit_time`` and ``score_time`` (CPU
        seconds); with ``criterion="likelihood_remask"`` also ``mean_remask_score`` (minus the
        mean squared error of the entries hidden again).
    refit_time_ : float
        CPU seconds of the refit and of the fallback's comparison.
    fallback_ : imputer or None
        The fitted ``fallback`` where it has a weight in the blend (``model_weight`` below 1), else
        None.
    fallback_comparison_ : dict or None
        With a ``fallback``: ``model_error`` and ``fallback_error`` (mean squared errors of the
        entries hidden again, features scaled to unit variance), ``std_error`` (of their
        difference, paired over the held-out rows), ``chosen`` (the fallback's error is the lower),
        ``model_weight`` (the candidate's weight ``w`` in the blend), ``blend_error`` (the
        blend's mean squared error), ``fallback_errors`` (the mean squared error of each imputer of
        ``fallback`` fitted, in order), ``fallback_index`` (the position of the one kept in
        ``fallback`` as a list; 0 for one imputer) and ``n_entries`` (the entries hidden again); else
        None, and where no entry could be hidden again (one column; held-out rows of one observed
        entry each).
    refits_model_ : bool
        Whether the chosen candidate is worth refitting to every row: it imputes, alone or blended,
        at least as much as the fallback (no ``fallback``, or the comparison did not choose the
        fallback alone). ``refit=True`` refits it where this is True; with ``refit=False`` it says
        what a refit would do (:class:`MaskedImputer` reads it to refit a dask collection's model).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt import MaskedModelSearch, MaskedPPCA
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)) @ rng.normal(size=(2, 6)) + 0.3 * rng.normal(size=(300, 6))
    >>> X[rng.random(X.shape) < 0.2] = np.nan
    >>> search = MaskedModelSearch([MaskedPPCA(k, random_state=0) for k in (1, 2, 3)], random_state=0).fit(X)
    >>> scores = search.cv_results_["mean_test_score"]
    >>> bool(scores[1] - scores[0] > 3 * search.cv_results_["std_error_difference"][0])  # rank 1 is far worse
    True
    >>> sorted(search.cv_results_)[:4]
    ['estimator', 'family', 'fit_time', 'fitted_by']
    """

    _parameter_constraints: dict = {
        "candidates": [None, dict, list],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "greedy": ["boolean"],
        "rule": [Options({"one_se", "best"})],
        "criterion": [Options(set(CRITERIA))],
        "max_samples": [None, Interval(numbers.Integral, 4, None, closed="left")],
        "max_fits": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "linear_fit": [Options({"moments", "mpt"})],
        "candidate_tol": [None, Interval(numbers.Real, 0, None, closed="neither")],
        "refit_max_samples": [None, Interval(numbers.Integral, 4, None, closed="left")],
        "refit": ["boolean"],
        "random_state": ["numpy_random_state"],
        "verbose": ["verbose"],
        "progress": ["boolean"],
        "fallback": [None, object],
    }

    def __init__(self, candidates=None, *, validation_fraction=0.2, greedy=True, rule="best", criterion="likelihood",
                 max_samples=2000, max_fits=None, linear_fit="moments", candidate_tol=1e-2, refit=True,
                 refit_max_samples=None, random_state=None, verbose=0, progress=True, fallback=None):
        self.candidates = candidates
        self.validation_fraction = validation_fraction
        self.greedy = greedy
        self.rule = rule
        self.criterion = criterion
        self.max_samples = max_samples
        self.max_fits = max_fits
        self.linear_fit = linear_fit
        self.candidate_tol = candidate_tol
        self.refit = refit
        self.refit_max_samples = refit_max_samples
        self.random_state = random_state
        self.verbose = verbose
        self.progress = progress
        self.fallback = fallback

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def _families(self, X):
        if self.candidates is None:
            observed = X[~np.isnan(X)]
            seed = check_random_state(self.random_state).randint(np.iinfo(np.int32).max)
            n_train = len(X) - max(2, int(round(self.validation_fraction * len(X))))
            return default_candidates(X.shape[1], binary=bool(np.isin(observed, (0.0, 1.0)).all()),
                                      n_samples=len(X), n_observed=int(observed.size * n_train / len(X)),
                                      random_state=int(seed))
        families = self.candidates if isinstance(self.candidates, dict) else {"candidates": self.candidates}
        if not families or not all(isinstance(models, list | tuple) and models for models in families.values()):
            raise ValueError(f"candidates must be a non-empty list of estimators or a dict of such lists; "
                             f"got {self.candidates!r}.")
        for family, models in families.items():  # before any fit, not at the first that is no model
            for model in models:
                if isinstance(model, type) or not all(hasattr(model, name) for name in ("get_params", "fit",
                                                                                         "score_samples")):
                    raise ValueError(f"candidates must be estimators with fit, get_params and score_samples (such "
                                     f"as MaskedPPCA(2)); {family!r} holds {model!r}.")
        return {family: list(models) for family, models in families.items()}

    def fit(self, X, y=None):
        """Fit and score the candidates, choose the best, refit it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            ``NaN`` marks a missing entry.
        y : None
            Ignored.

        Returns
        -------
        self : MaskedModelSearch
        """
        validate_parameters(self.get_params(deep=False), self._parameter_constraints, type(self).__name__)
        fallbacks = self._fallbacks()
        if fallbacks is not None and not (fallbacks and all(map(is_imputer, fallbacks))):
            raise ValueError(f"fallback must be None, an imputer (an instance with fit_transform and transform, "
                             f"e.g. scikit-learn's IterativeImputer()) or a non-empty list of them; got "
                             f"{self.fallback!r}.")
        X = validate_data(self, X, dtype=np.float64, ensure_all_finite="allow-nan", ensure_min_samples=4)
        observed = ~np.isnan(X)
        empty = ~observed.any(0)
        if empty.any():
            raise ValueError(f"Feature(s) {np.flatnonzero(empty)[:10].tolist()} are never observed: no model "
                             f"can be fitted to them.")
        rng = check_random_state(self.random_state)
        X_search = X
        if self.max_samples is not None and len(X) > self.max_samples:
            X_search = X[np.sort(rng.choice(len(X), self.max_samples, replace=False))]
        families = self._families(X_search)
        train, held_out = _split_rows(~np.isnan(X_search), self.validation_fraction, rng)
        scorer = _Scorer(self.criterion, X_search[train], X_search[held_out], rng)
        if self.criterion in ("conditional", "remask") and not scorer.hidden.any():
            raise ValueError(f"criterion={self.criterion!r} scores the entries of held-out rows hidden again, and none "
                             f"of the {int(held_out.sum())} held-out rows has two observed entries to hide one of: "
                             f"every candidate would score 0. Use criterion='likelihood'.")
        progress = _Progress(self.progress)
        rows, scores, fitted, candidates, checks = self._run(families, X_search[train], scorer, progress)
        means = np.array([row["mean_test_score"] for row in rows])
        top = int(np.argmax(means))
        for row, values in zip(rows, scores, strict=True):
            row["std_error_difference"] = _mean_and_error(values - scores[top])[1] if values is not scores[top] else 0.0
        self.best_index_ = top
        if self.rule == "one_se":
            close = [i for i, row in enumerate(rows) if means[top] - means[i] <= row["std_error_difference"]]
            self.best_index_ = min(close, key=lambda i: (rows[i]["n_parameters"], -means[i]))
        if self.criterion == "likelihood_remask":
            self.best_index_ = _lower_remask_error(checks, self.best_index_)
        ranks = np.empty(len(means), dtype=int)
        ranks[np.argsort(-means, kind="stable")] = np.arange(1, len(means) + 1)
        self.cv_results_ = {key: np.asarray([row[key] for row in rows]) for key in rows[0]}
        self.cv_results_["rank_test_score"] = ranks
        start = time.process_time()
        self.best_estimator_, self.rejected_refits_ = fitted[self.best_index_], []
        self.fallback_, self.fallback_comparison_, weigh = None, None, None
        if fallbacks is not None:
            progress.update(len(rows) + 1, len(rows) + 1, f"fallback {type(fallbacks[0]).__name__}")
            weigh = self._compare_fallback(fallbacks, X_search, train, held_out, fitted[self.best_index_], rng)
        # Where the fallback alone imputes better the model has the lesser weight in the blend, if any:
        # its refit (on College at 40 % holes, 2 of the imputer's 3 CPU seconds) is not worth its cost.
        self.refits_model_ = self.fallback_comparison_ is None or not self.fallback_comparison_["chosen"]
        if self.refit and self.refits_model_:
            X_refit = X
            if self.refit_max_samples is not None and len(X) > self.refit_max_samples:
                X_refit = X[np.sort(rng.choice(len(X), self.refit_max_samples, replace=False))]
            # A refit to many more rows than the candidates saw can take long after a quick search.
            progress.update(len(rows) + 1, len(rows) + 1, f"refit to {len(X_refit)} rows",
                            force=len(X_refit) > 2 * train.sum())
            chosen = self.best_index_
            self._refit(X_refit, rows, candidates, fitted, scorer, ranks, unseen=X_refit is not X_search)
            if weigh is not None and self.best_index_ != chosen:  # the blend's weight is the model's now used
                weigh(fitted[self.best_index_])
        progress.close()
        self.best_score_ = float(means[self.best_index_])
        self.refit_time_ = time.process_time() - start
        return self

    def _refit(self, X, rows, candidates, fitted, scorer, ranks, unseen):
        """Refit the chosen candidate to every row, continuing from its fit where it has a
        ``warm_start`` and that fit holds on every row (:meth:`_continues`), else by its own
        ``fit`` (its own ``tol``, whether it was ranked by its ``fit`` or by the Gaussian's
        moments); a refit far below its selection score on the held-out rows is set aside: a
        continued one (or one that did not converge) for the candidate's own fit from its start, then
        for the next candidate by rank."""
        order = [self.best_index_] + [i for i in np.argsort(ranks) if i != self.best_index_]
        for index in order:
            row = rows[index]
            continues = self._continues(candidates[index], fitted[index], X, scorer, unseen)
            for warm in (True, False) if continues else (False,):
                refitted = self._refitted(candidates[index], fitted[index], X, warm)
                if refitted is None:  # a continuation that did not converge: the fit from the start
                    continue
                if scorer(refitted).mean() >= row["mean_test_score"] - _REFIT_TOLERANCE * row["std_error"]:
                    self.best_index_, self.best_estimator_ = int(index), refitted
                    return
                logger.info("%s refit of candidate %d scored far below its selection score; not used",
                            "continued" if warm else "new", index + 1)
            self.rejected_refits_.append(int(index))
        warnings.warn(
            f"Every refit to all {len(X)} rows scored more than {_REFIT_TOLERANCE:g} standard errors below its "
            f"selection score on the held-out rows; best_estimator_ is the chosen candidate fitted to the "
            f"training rows only.", ConvergenceWarning, stacklevel=3)

    def _fallbacks(self):
        """``fallback`` as a list of imputers (None without one)."""
        if self.fallback is None:
            return None
        return list(self.fallback) if isinstance(self.fallback, (list, tuple)) else [self.fallback]

    def _compare_fallback(self, fallbacks, X, train, held_out, model, rng):
        """Fit the imputers ``fallbacks`` (:meth:`_fallbacks`; each in turn while the best so far
        imputes better than ``model``, a later one kept where it imputes significantly better) to
        ``X`` with a share of the held-out rows' observed entries hidden again (the table's missing
        rate, as ``criterion="remask"``; one draw), and compare its imputations of those entries with
        ``model``'s (the chosen candidate fitted to the training rows only), paired over the
        held-out rows: ``fallback_`` is the fitted fallback kept where it has a weight in their
        blend, else None. Where no entry can be hidden again (one column; held-out rows of one
        observed entry each) nothing is compared, nor any fallback fitted: both stay None.

        Returns the function that compares another model with the same fallback's imputations
        (``fallback_comparison_`` and ``fallback_`` set again; None where nothing is compared): the
        refit of another candidate, where the chosen one's was set aside, is blended at its own weight."""
        scorer = _Scorer("remask", X[train], X[held_out], rng, n_draws=1)
        n_entries = int(scorer.hidden.sum())
        if not n_entries:
            return None
        blanked = X.copy()
        blanked[held_out] = scorer.masked
        ours_imputed = model.impute(scorer.masked)
        ours = scorer.imputed_values(ours_imputed)
        kept, errors = None, []
        for index, candidate in enumerate(fallbacks):
            fallback = clone(candidate)
            with warnings.catch_warnings():
                # e.g. IterativeImputer's max_iter: the fallback is judged by its error on the user's rows.
                warnings.simplefilter("ignore", ConvergenceWarning)
                # A copy: an imputer with copy=False fills its input, which the next one must see with holes.
                imputed = np.asarray(fallback.fit_transform(blanked.copy()), dtype=np.float64)
            _check_imputed(candidate, imputed, blanked)
            values = scorer.imputed_values(imputed[held_out])
            errors.append(-float(values.mean()))
            if kept is None or _significantly_higher(values, kept[2], _FALLBACK_LEVEL):
                kept = (index, fallback, values, imputed[held_out])
            if not kept[2].mean() > ours.mean():  # the model alone imputes better: no costlier fallback
                break
        index, fallback, _, theirs_imputed = kept

        def weigh(model):
            self._weigh(scorer, model.impute(scorer.masked), theirs_imputed, fallback, index, errors)

        self._weigh(scorer, ours_imputed, theirs_imputed, fallback, index, errors)
        return weigh

    def _weigh(self, scorer, ours_imputed, theirs_imputed, fallback, index, errors):
        """``fallback_comparison_`` and ``fallback_`` from the model's and the fallback's imputations of
        the held-out rows hidden again (:meth:`_compare_fallback`)."""
        ours, theirs = scorer.imputed_values(ours_imputed), scorer.imputed_values(theirs_imputed)
        gain, error = _mean_and_error(theirs - ours)
        # The lower mean decides which one alone imputes better (and so whether the model is refitted),
        # not a significance test: chosen on the tuning tables of benchmarks/imputation_real.py, where
        # with each of eight tree settings it gave a lower geometric-mean RMSE ratio to the best of
        # scikit-learn's four imputers than a one-sided paired test at z > 1 or at 5 % (one draw of
        # hidden entries per held-out row leaves the test little power).
        chosen = bool(gain > 0)
        # The two blended, at the weight of least error on the same entries: on the tuning tables the
        # blend's RMSE was 2.0 % (MCAR) and 1.4 % (self-masking) below the choice of one (geometric
        # means over 24 fits each), the ratio to the best of scikit-learn's four 0.971 -> 0.955.
        weight = scorer.blend_weight(ours_imputed, theirs_imputed)
        blended = scorer.imputed_values(theirs_imputed + weight * (ours_imputed - theirs_imputed))
        self.fallback_comparison_ = {"model_error": -float(ours.mean()), "fallback_error": -float(theirs.mean()),
                                     "std_error": error, "chosen": chosen, "model_weight": weight,
                                     "blend_error": -float(blended.mean()), "fallback_errors": errors,
                                     "fallback_index": index, "n_entries": int(scorer.hidden.sum())}
        self.fallback_ = fallback if weight < 1 else None

    @staticmethod
    def _continues(candidate, fitted, X, scorer, unseen):
        """Whether the refit continues ``fitted`` (the candidate fitted to the training rows): it
        has a ``warm_start`` parameter, and, where ``X`` holds rows the search neither fitted nor
        scored (``unseen``: it searched or refits a subsample), its log-likelihood of every row is not
        more than ``_REFIT_TOLERANCE`` standard errors below that of the held-out rows (a start fitted
        to a subsample that rows outside it throw far off, e.g. outliers a near-singular component
        never saw, is left for a fit from the candidate's own start). Without unseen rows the check
        is skipped: it would score every row again (for a VAE, seconds of importance sampling) to
        learn what the search already knows."""
        if "warm_start" not in candidate.get_params():
            return False
        if not unseen:
            return True
        mean, error = _mean_and_error(fitted.score_samples(scorer.X))
        return fitted.score(X) >= mean - _REFIT_TOLERANCE * error

    @staticmethod
    def _refitted(candidate, fitted, X, warm):
        """``candidate`` fitted to ``X``: with ``warm``, a copy of its fit to the training rows
        (``fitted``) continued with ``warm_start=True`` (a :class:`MaskedGaussianMixture` with
        ``init_params="em"`` runs EM from those parameters, not from k-means, then MPT; a
        :class:`MaskedFactorAnalysis` EM with holes from its moment fit, then MPT if still short), its
        ``warm_start`` parameter then set back to the candidate's, or None if it did not converge
        (``converged_`` False; its warnings dropped, the fit from the start follows); else a clone
        fitted from its start."""
        if not warm:
            return clone(candidate).fit(X)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            refitted = copy.deepcopy(fitted).set_params(warm_start=True).fit(X)
        if not getattr(refitted, "converged_", True):
            logger.info("the continued refit did not converge; the candidate is fitted from its start")
            return None
        for warning in caught:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        return refitted.set_params(warm_start=candidate.get_params()["warm_start"])

    def _run(self, families, X_train, scorer, progress):
        """Fit and score the candidates family by family, round robin by size: a row, the held-out
        values, the fitted model, the candidate and the remask values (or None) per fit."""
        rows, scores, fitted, candidates, checks = [], [], [], [], []
        queues = {family: list(models) for family, models in families.items()}
        best, gains = {}, {}  # each family's best held-out scores so far, and its last gain
        gaussian = None  # the first one-component full-covariance mixture fitted (for linear_fit="moments")
        budget = self.max_fits or sum(map(len, queues.values()))
        while queues and len(rows) < budget:
            for family in list(queues):
                if len(rows) >= budget:
                    break
                candidate = queues[family].pop(0)
                row, (values, check), model = self._fit_and_score(family, candidate, X_train, scorer, gaussian)
                if gaussian is None and self.linear_fit == "moments" and _is_one_gaussian(model):
                    gaussian = model
                candidates.append(candidate)
                rows.append(row)
                scores.append(values)
                checks.append(check)
                fitted.append(model)
                progress.update(len(rows), len(rows) + sum(map(len, queues.values())) + self.refit,
                                f"{family}({row['n_components']})")
                if self.verbose:
                    logger.info("candidate %d: %s(n_components=%s), held-out %.3f +- %.3f nats, %.1f s", len(rows),
                                family, row["n_components"], row["mean_test_score"], row["std_error"],
                                row["fit_time"])
                gain = float((values - best[family]).mean()) if family in best else np.inf
                if gain > 0:
                    best[family] = values
                gains[family] = gain
                if not queues[family] or (self.greedy and not gain > 0):
                    del queues[family]
            if self.greedy:
                self._eliminate(queues, best, gains)
        return rows, scores, fitted, candidates, checks

    @staticmethod
    def _eliminate(queues, best, gains):
        """Drop the families that one more gain as large as their last could not bring within one
        paired standard error of the leading family (gains shrink as the sizes double)."""
        leader = max(best, key=lambda family: best[family].mean())
        for family in [family for family in queues if family != leader and family in best]:
            gap, error = _mean_and_error(best[leader] - best[family])
            if gap - max(gains[family], 0.0) > error:
                del queues[family]

    def _fit_and_score(self, family, candidate, X_train, scorer, gaussian=None):
        """Fit ``candidate`` to ``X_train`` (its ``tol`` at least ``candidate_tol``; a PPCA or factor
        analysis of fewer components than features to the moments of ``gaussian`` where one is given)
        and score it: ``(row, values, fitted)``."""
        start = time.process_time()
        size = candidate.get_params().get("n_components")
        by_moments = (gaussian is not None and type(candidate) in _MOMENT_MODELS
                      and isinstance(size, numbers.Integral) and size < X_train.shape[1])
        own_tol = candidate.get_params().get("tol")
        loose = self.candidate_tol is not None and isinstance(own_tol, numbers.Real)
        tol = max(own_tol, self.candidate_tol) if loose else own_tol
        if by_moments:
            fitted = _moment_fit(candidate, gaussian, tol)
        else:
            with warnings.catch_warnings():
                # A short fit stopped by its budget still ranks by what it reached.
                warnings.simplefilter("ignore", ConvergenceWarning)
                fitted = clone(candidate)
                if loose:
                    fitted.set_params(tol=tol)
                fitted.fit(X_train)
                if loose:  # its parameters stay the candidate's (params_ holds the tol it was fitted to)
                    fitted.set_params(tol=own_tol)
        fit_time = time.process_time() - start
        start = time.process_time()
        values, checks = scorer(fitted), scorer.check(fitted)
        score_time = time.process_time() - start
        mean, error = _mean_and_error(values)
        row = {"family": family, "n_components": candidate.get_params().get("n_components"),
               "estimator": repr(candidate), "n_parameters": sum(p.numel() for p in fitted.module_.parameters()),
               "mean_test_score": mean, "std_error": error,
               "n_iter": fitted.n_iter_, "fitted_by": "moments" if by_moments else "fit", "fit_time": fit_time,
               "score_time": score_time}
        if checks is not None:
            row["mean_remask_score"] = float(checks.mean())
        return row, (values, checks), fitted

    def score(self, X, y=None):
        """Mean log-likelihood of the observed entries of ``X`` under ``best_estimator_`` (its ``score``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        score : float
            Nats per sample.
        """
        check_is_fitted(self)
        return self.best_estimator_.score(validate_data(self, X, reset=False, ensure_all_finite="allow-nan"))
