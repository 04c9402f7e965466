"""Checks of the MPT identity and hypothesis strategies, for skmpt's tests and for yours.

:func:`check_mpt_identity` measures how far the cumulative MPT score ``sum_M S(x; M)`` of a
model lies from its log-marginal likelihood: zero (to rounding) when the model's masked
conditionals come from one joint density, and the size of their inconsistency otherwise.
:class:`TabularJoint` is a model whose conditionals are exact by construction (a probability
table over ``{0, 1}**D``, conditioned by brute force), useful as a reference.

The strategies (:func:`tabular_joints`, :func:`ppca_parameters`) need ``hypothesis``, which
is imported only when they are called.
"""

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .masks import check_generator, masks_of_sizes, random_orderings
from .models import MaskedModel, reference_chain_log_prob
from ._utils import call_with_generator as _with_generator
from .objectives import cumulative_score

__all__ = [
    "IdentityCheck",
    "TabularJoint",
    "assert_mpt_identity",
    "check_masked_model",
    "check_mpt_identity",
    "ppca_parameters",
    "tabular_joints",
]


class TabularJoint(MaskedModel):
    """A distribution over binary vectors given by its full probability table.

    Its masked conditionals are computed by brute force from the table, so they are
    consistent with one joint and the MPT identity holds exactly: a reference model (a
    deterministic :class:`~skmpt.models.MaskedModel` with only the reference method).

    Parameters
    ----------
    probabilities : array-like of shape (2,) * n_features
        Non-negative, summing to one; entry ``[x_1, ..., x_D]`` is ``p(x)``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.testing import TabularJoint
    >>> joint = TabularJoint([[0.1, 0.2], [0.3, 0.4]])
    >>> X = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    >>> round(float(joint.log_marginal(X).exp()), 6)
    0.3
    >>> # p(x_1 = 1 | x_2 = 0) = 0.3 / (0.1 + 0.3)
    >>> mask = torch.tensor([[True, False]])
    >>> round(float(joint.masked_log_prob(X, mask)[0, 0, 0].exp()), 6)
    0.75
    """

    def __init__(self, probabilities):
        super().__init__()
        table = torch.as_tensor(np.asarray(probabilities, dtype=np.float64))
        n_features = table.ndim
        if table.shape != (2,) * n_features or n_features < 1:
            raise ValueError(f"probabilities must have shape (2,) * n_features; got {tuple(table.shape)}.")
        if bool((table < 0).any()) or not np.isclose(float(table.sum()), 1.0):
            raise ValueError("probabilities must be non-negative and sum to one.")
        self.n_features = n_features
        self.register_buffer("probabilities", table.reshape(-1))
        # configurations[c] is the binary vector of table entry c (row-major order).
        grid = torch.cartesian_prod(*[torch.tensor([0.0, 1.0], dtype=torch.float64)] * n_features)
        self.register_buffer("configurations", grid.reshape(-1, n_features))

    @classmethod
    def random(cls, n_features, *, concentration=1.0, random_state=None):
        """A table drawn from a symmetric Dirichlet distribution."""
        seed = int(torch.randint(2**62, (1,), generator=check_generator(random_state)))
        weights = np.random.default_rng(seed).dirichlet(np.full(2**n_features, float(concentration)))
        return cls(weights.reshape((2,) * n_features))

    def _agreement(self, X):
        X = X.to(torch.float64)
        if bool(((X != 0) & (X != 1)).any()):
            raise ValueError("TabularJoint models binary data: X must contain only 0 and 1.")
        # agree[n, c, d]: does configuration c match sample n at feature d?
        return X.unsqueeze(1) == self.configurations.unsqueeze(0)

    def log_marginal(self, X):
        """``log p(x)`` per sample, shape ``(n_samples,)``."""
        match = self._agreement(X).all(-1).to(torch.float64)
        return (match @ self.probabilities).log().to(X.dtype)

    def masked_log_prob(self, X, masks):
        """Per-token ``log p(x_j | x_r)`` at masked positions, zero elsewhere.

        Returns a tensor of shape ``(n_samples, n_masks, n_features)``.
        """
        agree = self._agreement(X)
        masks = masks.to(X.device)
        if masks.ndim == 2:
            masks = masks.unsqueeze(0).expand(X.shape[0], -1, -1)
        # match_rest[n, p, c]: configuration c agrees with sample n on the observed features.
        match_rest = (agree.unsqueeze(1) | masks.unsqueeze(2)).all(-1).to(torch.float64)
        p_rest = match_rest @ self.probabilities
        weighted = match_rest * self.probabilities
        # p_joint[n, p, j] = p(x_j, x_r): configurations that also agree at j.
        p_joint = weighted @ agree.to(torch.float64)
        log_cond = p_joint.log() - p_rest.unsqueeze(-1).log()
        return torch.where(masks, log_cond, torch.zeros_like(log_cond)).to(X.dtype)

    def sample(self, n_samples, *, random_state=None):
        """Draw ``n_samples`` binary vectors, as a float64 tensor of shape ``(n, D)``."""
        generator = check_generator(random_state)
        index = torch.multinomial(self.probabilities, n_samples, replacement=True, generator=generator)
        return self.configurations[index]


@dataclass(frozen=True)
class IdentityCheck:
    """What :func:`check_mpt_identity` measured.

    Attributes
    ----------
    cumulative : ndarray of shape (n_samples,)
        The cumulative MPT score ``sum_M S(x; M)`` per sample.
    log_marginal : ndarray of shape (n_samples,)
        The model's log-marginal likelihood per sample.
    discrepancy : ndarray of shape (n_samples,)
        ``cumulative - log_marginal``: zero for consistent conditionals with exhaustive masks.

    Examples
    --------
    >>> from skmpt.testing import TabularJoint, check_mpt_identity
    >>> joint = TabularJoint.random(4, random_state=0)
    >>> check = check_mpt_identity(joint, joint.sample(5, random_state=0))
    >>> check.max_abs_discrepancy < 1e-9
    True
    """

    cumulative: np.ndarray
    log_marginal: np.ndarray
    discrepancy: np.ndarray

    @property
    def max_abs_discrepancy(self):
        """Largest absolute discrepancy over the samples, in nats."""
        return float(np.max(np.abs(self.discrepancy)))

    @property
    def max_rel_discrepancy(self):
        """Largest ``|discrepancy| / |log_marginal|`` over the samples."""
        return float(np.max(np.abs(self.discrepancy) / np.maximum(np.abs(self.log_marginal), 1e-300)))


def _model_and_tensor(model, X):
    """Accept a fitted skmpt estimator (its ``module_``) or a model object."""
    if isinstance(model, BaseEstimator):
        check_is_fitted(model)
        return model.module_, model._to_tensor(X, reset=False)
    if isinstance(X, torch.Tensor):
        return model, X
    return model, torch.as_tensor(np.asarray(X, dtype=np.float64))


def check_mpt_identity(model, X, *, method="exhaustive", n_masks=100, log_marginal=None, random_state=None):
    """Measure ``sum_M S(x; M) - log p(x)`` for a model on a small-``D`` sample.

    Parameters
    ----------
    model : fitted skmpt estimator or model object
        An estimator must be fitted (``NotFittedError`` otherwise). A model object has
        ``masked_log_prob_sum`` or ``masked_log_prob``
        (:mod:`skmpt.objectives`), and ``log_marginal`` unless ``log_marginal`` is given.
    X : array-like or torch.Tensor of shape (n_samples, n_features)
    method : {"exhaustive", "sweep", "nested", "chain"}, default="exhaustive"
        How the cumulative score is computed (:func:`skmpt.objectives.mpt_curve`);
        ``"exhaustive"`` makes any discrepancy the model's own.
    n_masks : int, default=100
        Masks per size or orderings, for the sampling methods.
    log_marginal : array-like of shape (n_samples,), default=None
        Reference values; by default ``model.log_marginal(X)``.
    random_state : see :func:`skmpt.masks.check_generator`, default=None

    Returns
    -------
    check : IdentityCheck

    Examples
    --------
    >>> from skmpt.testing import TabularJoint, check_mpt_identity
    >>> joint = TabularJoint.random(4, random_state=0)
    >>> check = check_mpt_identity(joint, joint.sample(5, random_state=1))
    >>> check.max_abs_discrepancy < 1e-12
    True
    """
    module, tensor = _model_and_tensor(model, X)
    with torch.no_grad():
        cumulative = cumulative_score(module, tensor, method=method, score_masks=n_masks, random_state=random_state)
        reference = module.log_marginal(tensor) if log_marginal is None else log_marginal
    cumulative = cumulative.detach().cpu().numpy().astype(np.float64)
    reference = np.asarray(
        reference.detach().cpu().numpy() if isinstance(reference, torch.Tensor) else reference, dtype=np.float64
    )
    if reference.shape != cumulative.shape:
        raise ValueError(f"log_marginal must have shape {cumulative.shape}; got {reference.shape}.")
    return IdentityCheck(cumulative, reference, cumulative - reference)


def assert_mpt_identity(model, X, *, rtol=1e-9, atol=0.0, **kwargs):
    """Raise ``AssertionError`` unless ``sum_M S(x; M)`` equals ``log p(x)`` to tolerance.

    Keyword arguments go to :func:`check_mpt_identity`.

    Examples
    --------
    >>> from skmpt.testing import TabularJoint, assert_mpt_identity
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> assert_mpt_identity(joint, joint.sample(4, random_state=0))
    """
    check = check_mpt_identity(model, X, **kwargs)
    np.testing.assert_allclose(
        check.cumulative,
        check.log_marginal,
        rtol=rtol,
        atol=atol,
        err_msg="The cumulative MPT score differs from the log-marginal likelihood",
    )


def _masks_for(n_features, n_masks, generator):
    """``n_masks`` random masks with every size from 1 to ``D`` represented, full mask last."""
    sizes = torch.arange(n_masks) % n_features + 1
    masks = masks_of_sizes(sizes, n_features, random_state=generator)
    masks[-1] = True
    return masks


class _Contract:
    """Runs the checks of :func:`check_masked_model` on one model and records what it measured."""

    def __init__(self, model, X, rtol, atol, random_state):
        self.model, self.X, self.rtol, self.atol = model, X, rtol, atol
        self.seed = int(torch.randint(2**62, (1,), generator=check_generator(random_state)))
        self.stochastic = bool(getattr(model, "stochastic", False))
        self.report = {}

    def call(self, method, *args, seed=0, **kwargs):
        """``method(*args)`` without gradients; a stochastic model gets a generator seeded by ``seed``."""
        generator = torch.Generator().manual_seed(self.seed + seed) if self.stochastic else None
        with torch.no_grad():
            return _with_generator(method, *args, generator=generator, **kwargs)

    def fail(self, name, message):
        raise AssertionError(f"{type(self.model).__name__} fails the masked-model contract, {name!r}: {message}")

    def output(self, name, value, shape):
        X = self.X
        if not isinstance(value, torch.Tensor):
            self.fail(name, f"returned {type(value).__name__}, not a torch.Tensor.")
        if tuple(value.shape) != tuple(shape):
            self.fail(name, f"returned shape {tuple(value.shape)}; expected {tuple(shape)}.")
        if value.dtype != X.dtype or value.device != X.device:
            self.fail(name, f"returned {value.dtype} on {value.device}; expected X's {X.dtype} on {X.device}.")

    def close(self, name, actual, expected):
        """Record ``max |actual - expected|``; fail unless within ``atol + rtol * |expected|``."""
        rtol = self.rtol
        actual, expected = actual.to(torch.float64), expected.to(torch.float64)
        same_inf = (actual == expected) & torch.isinf(expected)
        error = torch.where(same_inf, torch.zeros_like(actual), (actual - expected).abs())
        bound = self.atol + rtol * expected.abs()
        excess = error - bound
        worst = float(error.max()) if error.numel() else 0.0
        self.report[name] = max(worst, self.report.get(name, 0.0))
        if error.numel() and not bool((excess <= 0).all()):
            flat = int(torch.nan_to_num(excess, nan=np.inf).argmax())
            index = tuple(int(i) for i in np.unravel_index(flat, excess.shape))
            self.fail(
                name,
                f"max abs difference {worst:.6g} (first beyond tolerance at index {index}: got "
                f"{float(actual[index]):.10g}, expected {float(expected[index]):.10g}; rtol={rtol:g}, "
                f"atol={self.atol:g}).",
            )

    def skip(self, name, why):
        self.report[name] = f"skipped: {why}"


def check_masked_model(model, X, *, rtol=1e-9, atol=1e-10, n_masks=8, n_orderings=3, random_state=0):
    """Check that a model keeps the masked-model contract (``check_estimator`` for models).

    Runs, in this order, and stops at the first failure:

    1. ``"masked_log_prob output"``: shape ``(n, P, D)``, ``X``'s dtype and device, finite
       at masked positions, for shared ``(P, D)`` masks of every size.
    2. ``"zero at observed positions"``: exactly zero where a token is observed.
    3. ``"randomness"``: a deterministic model gives the same numbers twice; a stochastic one
       (``stochastic = True``) gives the same numbers for the same ``generator`` seed, other
       numbers for another seed, and leaves torch's global generator untouched.
    4. ``"batch independence"``: a sample's values do not change when it is scored with
       other samples, alone, or in another order.
    5. ``"shared and per-sample masks"``: per-sample masks ``(n, P, D)`` give, for each
       sample, what its masks give as shared masks (for a stochastic model, one sample at a
       time: its noise may legitimately be drawn per sample).
    6. ``"masked_log_prob_sum"``: equals the reference summed over the features, for shared
       and per-sample masks.
    7. ``"weighted_log_prob_sum"``: equals the reference's per-mask sums contracted with
       weights, for shared masks.
    8. ``"chain_log_prob"``: equals :func:`skmpt.models.reference_chain_log_prob`, the
       reference on each ordering's nested masks.
    9. ``"log_marginal output"`` and ``"identity"`` (when the model has ``log_marginal``):
       shape ``(n,)``, and the exhaustive cumulative score ``sum_M S(x; M)`` (the chain with
       ``n_orderings`` orderings when ``D > 12``) equals ``log_marginal`` to ``rtol``. Skipped
       for a stochastic model: its conditionals and its ``log_marginal`` are separate Monte
       Carlo estimates; compare them with :func:`check_mpt_identity` at a tolerance of their
       Monte Carlo error.
    10. ``"posterior"`` and ``"decode"`` (when present): shapes, dtype and device.

    For a stochastic model each comparison calls both sides with generators seeded alike
    and with the same masks per call, so they agree exactly when the model draws its noise
    only from the generator.

    Parameters
    ----------
    model : object or fitted skmpt estimator
        A :class:`skmpt.models.MaskedModel` or any object with ``masked_log_prob``; for a
        fitted estimator, its ``module_`` on ``X`` validated by the estimator.
    X : torch.Tensor or array-like of shape (n_samples, n_features)
        At least two samples, in the dtype and on the device to check; float64 for the
        default tolerances.
    rtol, atol : float, default=1e-9, 1e-10
        Tolerances of every comparison: ``|a - b| <= atol + rtol * |b|``.
    n_masks : int, default=8
        Random masks per comparison (sizes cycle through ``1..D``; the last masks all).
    n_orderings : int, default=3
        Orderings for the chain comparison.
    random_state : see :func:`skmpt.masks.check_generator`, default=0

    Returns
    -------
    report : dict
        For every property checked, the largest absolute difference found (a float), or
        ``"skipped: ..."`` with the reason.

    Raises
    ------
    AssertionError
        Naming the first property that fails and the size of the disagreement.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import PPCAModule
    >>> from skmpt.testing import check_masked_model
    >>> W = torch.tensor([[1.0, 0.5, -0.3, 0.2]], dtype=torch.float64)
    >>> module = PPCAModule(W, torch.zeros(4, dtype=torch.float64), 0.5)
    >>> X = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> report = check_masked_model(module, X)
    >>> report["identity"] < 1e-9
    True
    """
    if isinstance(model, BaseEstimator):
        model, X = _model_and_tensor(model, X)
    elif isinstance(X, torch.Tensor):
        X = X.detach()
    else:
        X = torch.as_tensor(np.asarray(X, dtype=np.float64))
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1:
        raise ValueError(f"X must be a 2-D tensor with at least two samples and one feature; got {tuple(X.shape)}.")
    if not hasattr(model, "masked_log_prob"):
        raise TypeError(f"{type(model).__name__} has no masked_log_prob(X, masks), the reference of the contract.")
    c = _Contract(model, X, rtol, atol, random_state)
    n_samples, n_features = X.shape
    generator = torch.Generator().manual_seed(c.seed)
    masks = _masks_for(n_features, n_masks, generator).to(X.device)
    per_sample = torch.stack([_masks_for(n_features, n_masks, generator) for _ in range(n_samples)]).to(X.device)

    # 1-2: the reference itself.
    reference = c.call(model.masked_log_prob, X, masks)
    c.output("masked_log_prob output", reference, (n_samples, len(masks), n_features))
    if not bool(torch.isfinite(reference[masks.expand_as(reference)]).all()):
        c.fail("masked_log_prob output", "non-finite values at masked positions.")
    c.report["masked_log_prob output"] = 0.0
    observed = reference[~masks.expand_as(reference)].abs()
    c.report["zero at observed positions"] = float(observed.max()) if observed.numel() else 0.0
    if observed.numel() and bool((observed != 0).any()):
        c.fail("zero at observed positions", f"max abs value {float(observed.max()):.6g}; must be exactly 0.")

    # 3: randomness only through the generator.
    global_state = torch.random.get_rng_state()
    again = c.call(model.masked_log_prob, X, masks)
    if c.stochastic:
        if not torch.equal(torch.random.get_rng_state(), global_state):
            c.fail("randomness", "a stochastic model drew from torch's global generator despite generator=.")
        other = c.call(model.masked_log_prob, X, masks, seed=1)
        if torch.equal(other, reference):
            c.fail("randomness", "stochastic = True, but another generator seed gave identical numbers.")
    c.close("randomness", again, reference)

    # 4: a sample's values do not depend on the others.
    order = torch.arange(n_samples - 1, -1, -1, device=X.device)
    c.close("batch independence", c.call(model.masked_log_prob, X[order], masks)[order], reference)
    c.close("batch independence", c.call(model.masked_log_prob, X[:1], masks), reference[:1])

    # 5: per-sample masks mean the same as shared ones.
    per_sample_reference = c.call(model.masked_log_prob, X, per_sample)
    c.output("shared and per-sample masks", per_sample_reference, (n_samples, n_masks, n_features))
    rows = range(n_samples) if not c.stochastic else range(1)
    for i in rows:
        alone = X[i : i + 1]
        shared = c.call(model.masked_log_prob, alone, per_sample[i])
        single = per_sample_reference[i : i + 1] if not c.stochastic else c.call(
            model.masked_log_prob, alone, per_sample[i : i + 1]
        )
        c.close("shared and per-sample masks", single, shared)

    # 6: the per-mask sums.
    sum_method = getattr(model, "masked_log_prob_sum", None)
    if sum_method is None:
        c.skip("masked_log_prob_sum", "the model has no masked_log_prob_sum (objectives sum the reference)")
    else:
        for form, reference_form in ((masks, reference), (per_sample, per_sample_reference)):
            sums = c.call(sum_method, X, form)
            c.output("masked_log_prob_sum", sums, reference_form.shape[:2])
            c.close("masked_log_prob_sum", sums, reference_form.sum(-1))

    # 7: the weighted sum over shared masks (the form of every cumulative score).
    weighted_method = getattr(model, "weighted_log_prob_sum", None)
    if weighted_method is None:
        c.skip("weighted_log_prob_sum", "the model has no weighted_log_prob_sum (objectives weigh the sums)")
    else:
        weights = torch.linspace(0.5, 2.0, len(masks), dtype=X.dtype, device=X.device)
        total = c.call(weighted_method, X, masks, weights)
        c.output("weighted_log_prob_sum", total, (n_samples,))
        c.close("weighted_log_prob_sum", total, reference.sum(-1) @ weights)

    # 8: the chain terms.
    orderings = random_orderings(n_orderings, n_features, random_state=generator, device=X.device)
    expected_chain = c.call(lambda *a, **k: reference_chain_log_prob(model, *a, **k), X, orderings)
    chain_method = getattr(model, "chain_log_prob", None)
    if chain_method is None:
        c.skip("chain_log_prob", "the model has no chain_log_prob (the chain estimator uses the reference)")
    else:
        chain = c.call(chain_method, X, orderings)
        c.output("chain_log_prob", chain, (n_samples, n_orderings, n_features))
        c.close("chain_log_prob", chain, expected_chain)

    # 9: the identity against log_marginal.
    if not hasattr(model, "log_marginal"):
        c.skip("identity", "the model has no log_marginal")
    else:
        log_marginal = c.call(model.log_marginal, X)
        c.output("log_marginal output", log_marginal, (n_samples,))
        c.report["log_marginal output"] = 0.0
        if c.stochastic:
            c.skip("identity", "stochastic model: conditionals and log_marginal are separate estimates")
        else:
            method = "exhaustive" if n_features <= 12 else "chain"
            with torch.no_grad():
                cumulative = cumulative_score(model, X, method=method, score_masks=n_orderings, random_state=c.seed)
            c.close("identity", cumulative, log_marginal)

    # 10: what transform and inverse_transform need.
    if hasattr(model, "posterior"):
        with torch.no_grad():
            mean = model.posterior(X)[0]
        if not isinstance(mean, torch.Tensor) or mean.ndim != 2 or mean.shape[0] != n_samples:
            got = getattr(mean, "shape", mean)
            c.fail("posterior", f"posterior(X)[0] must be a tensor of shape ({n_samples}, K); got {got}.")
        c.output("posterior", mean, mean.shape)
        c.report["posterior"] = 0.0
        if hasattr(model, "decode"):
            with torch.no_grad():
                decoded = model.decode(mean)
            c.output("decode", decoded, (n_samples, n_features))
            c.report["decode"] = 0.0
    return c.report


def _strategies():
    try:
        from hypothesis import strategies as st
        from hypothesis.extra import numpy as hnp
    except ImportError as exc:  # pragma: no cover - exercised only without hypothesis
        raise ImportError(
            "skmpt.testing's strategies need hypothesis: pip install 'skmpt[test]'."
        ) from exc
    return st, hnp


def tabular_joints(min_features=1, max_features=6):
    """Hypothesis strategy for :class:`TabularJoint` models with random tables.

    Every entry is at least ``1e-3`` before normalisation, so no conditional is undefined.

    Examples
    --------
    >>> from hypothesis import given
    >>> from skmpt.testing import tabular_joints
    >>> @given(tabular_joints(max_features=3))
    ... def test_positive(joint):
    ...     assert float(joint.probabilities.min()) > 0
    >>> test_positive()
    """
    st, hnp = _strategies()

    @st.composite
    def build(draw):
        n_features = draw(st.integers(min_features, max_features))
        weights = draw(
            hnp.arrays(np.float64, (2,) * n_features, elements=st.floats(1e-3, 1.0, allow_subnormal=False))
        )
        return TabularJoint(weights / weights.sum())

    return build()


def ppca_parameters(min_features=1, max_features=7, max_components=3):
    """Hypothesis strategy for PPCA parameters ``(components, mean, noise_variance)``.

    ``components`` has shape ``(n_components, n_features)`` (scikit-learn's convention),
    with ``n_components <= n_features``; ``noise_variance`` lies in [0.05, 5].

    Examples
    --------
    >>> from hypothesis import given
    >>> from skmpt.testing import ppca_parameters
    >>> @given(ppca_parameters(max_features=4))
    ... def test_shapes(params):
    ...     components, mean, noise_variance = params
    ...     assert components.shape[1] == mean.shape[0]
    >>> test_shapes()
    """
    st, hnp = _strategies()
    value = st.floats(-3.0, 3.0, allow_nan=False, allow_subnormal=False)

    @st.composite
    def build(draw):
        n_features = draw(st.integers(min_features, max_features))
        n_components = draw(st.integers(1, min(max_components, n_features)))
        components = draw(hnp.arrays(np.float64, (n_components, n_features), elements=value))
        mean = draw(hnp.arrays(np.float64, (n_features,), elements=value))
        noise_variance = draw(st.floats(0.05, 5.0))
        return components, mean, noise_variance

    return build()
