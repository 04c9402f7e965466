"""The masked-model contract, one check function per rule (as scikit-learn's estimator checks).

Each check takes a :class:`~skmpt.testing.MaskedModelCase`, raises ``AssertionError`` naming
the model, the property and the size of the disagreement when the rule is broken, and
records what it measured in ``case.report``. :data:`MASKED_MODEL_CHECKS` lists them in the
order :func:`check_masked_model` runs them; each also runs on its own.
"""

import functools

import torch

from ..models import provides
from ..models.contract import reference_chain_log_prob
from .case import MaskedModelCase
from .identity import check_mpt_identity
from .missing import check_incomplete_rows

__all__ = [
    "MASKED_MODEL_CHECKS",
    "check_batch_independence",
    "check_call_shapes",
    "check_chain_matches_reference",
    "check_decode_output",
    "check_identity",
    "check_incomplete_rows",
    "check_log_marginal_output",
    "check_masked_log_prob_output",
    "check_masked_model",
    "check_masked_sum_matches_reference",
    "check_posterior_output",
    "check_randomness",
    "check_shared_and_per_sample_masks",
    "check_weighted_sum_matches_reference",
    "check_zero_at_observed",
]

#: Above this many features the identity is checked through the chain, not every mask.
MAX_EXHAUSTIVE_FEATURES = 12


def check_masked_log_prob_output(case):
    """``"masked_log_prob output"``: shape ``(n, P, D)``, ``X``'s dtype and device, finite at
    masked positions, for shared ``(P, D)`` masks of every size.

    Examples
    --------
    >>> from skmpt.testing import MaskedModelCase, TabularJoint
    >>> from skmpt.testing.checks import check_masked_log_prob_output
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> case = MaskedModelCase(joint, joint.sample(4, random_state=0))
    >>> check_masked_log_prob_output(case)
    >>> case.report
    {'masked_log_prob output': 0.0}
    """
    reference, masks = case.reference, case.masks
    if not bool(torch.isfinite(reference[masks.expand_as(reference)]).all()):
        case.fail("masked_log_prob output", "non-finite values at masked positions.")
    case.report["masked_log_prob output"] = 0.0


def check_zero_at_observed(case):
    """``"zero at observed positions"``: ``masked_log_prob`` is exactly zero where a token is
    observed (not masked).

    Examples
    --------
    >>> import torch
    >>> from skmpt.testing import MaskedModelCase, TabularJoint
    >>> from skmpt.testing.checks import check_zero_at_observed
    >>> class Leaky(TabularJoint):
    ...     def masked_log_prob(self, X, masks):
    ...         return super().masked_log_prob(X, masks) - 0.5 * ~masks
    >>> joint = Leaky([[0.1, 0.2], [0.3, 0.4]])
    >>> check_zero_at_observed(MaskedModelCase(joint, joint.sample(3, random_state=0)))
    Traceback (most recent call last):
    ...
    AssertionError: Leaky fails the masked-model contract, 'zero at observed positions': max abs value 0.5; ...
    """
    reference = case.reference
    observed = reference[~case.masks.expand_as(reference)].abs()
    case.report["zero at observed positions"] = float(observed.max()) if observed.numel() else 0.0
    if observed.numel() and bool((observed != 0).any()):
        case.fail("zero at observed positions", f"max abs value {float(observed.max()):.6g}; must be exactly 0.")


def check_randomness(case):
    """``"randomness"``: randomness only through the ``generator`` argument.

    A deterministic model gives the same numbers twice; a stochastic one (``stochastic =
    True``) gives the same numbers for the same ``generator`` seed, other numbers for another
    seed, and leaves torch's global generator untouched.

    Examples
    --------
    >>> from skmpt.testing import MaskedModelCase, TabularJoint
    >>> from skmpt.testing.checks import check_randomness
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> case = MaskedModelCase(joint, joint.sample(4, random_state=0))
    >>> check_randomness(case)
    >>> case.report["randomness"]
    0.0
    """
    reference, masked_log_prob = case.reference, case.model.masked_log_prob
    global_state = torch.random.get_rng_state()
    again = case.call(masked_log_prob, case.X, case.masks)
    if case.stochastic:
        if not torch.equal(torch.random.get_rng_state(), global_state):
            case.fail("randomness", "a stochastic model drew from torch's global generator despite generator=.")
        other = case.call(masked_log_prob, case.X, case.masks, seed=1)
        if torch.equal(other, reference):
            case.fail("randomness", "stochastic = True, but another generator seed gave identical numbers.")
    case.assert_close("randomness", again, reference)


def check_batch_independence(case):
    """``"batch independence"``: a sample's values do not change when it is scored with other
    samples, alone, or in another order.

    Examples
    --------
    >>> import torch
    >>> from skmpt.testing import MaskedModelCase, TabularJoint
    >>> from skmpt.testing.checks import check_batch_independence
    >>> class BatchMean(TabularJoint):
    ...     def masked_log_prob(self, X, masks):
    ...         return super().masked_log_prob(X, masks) + X.mean() * masks
    >>> joint = BatchMean([[0.1, 0.2], [0.3, 0.4]])
    >>> X = torch.tensor([[1.0, 1.0], [0.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    >>> check_batch_independence(MaskedModelCase(joint, X))
    Traceback (most recent call last):
    ...
    AssertionError: BatchMean fails the masked-model contract, 'batch independence': max abs difference ...
    """
    X, masks, reference, masked_log_prob = case.X, case.masks, case.reference, case.model.masked_log_prob
    order = torch.arange(X.shape[0] - 1, -1, -1, device=X.device)
    case.assert_close("batch independence", case.call(masked_log_prob, X[order], masks)[order], reference)
    case.assert_close("batch independence", case.call(masked_log_prob, X[:1], masks), reference[:1])


def check_shared_and_per_sample_masks(case):
    """``"shared and per-sample masks"``: per-sample masks ``(n, P, D)`` give, for each
    sample, what its masks give as shared masks.

    For a stochastic model, one sample at a time: its noise may legitimately be drawn per
    sample.

    Examples
    --------
    >>> from skmpt.testing import MaskedModelCase, TabularJoint
    >>> from skmpt.testing.checks import check_shared_and_per_sample_masks
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> case = MaskedModelCase(joint, joint.sample(4, random_state=0))
    >>> check_shared_and_per_sample_masks(case)
    >>> case.report["shared and per-sample masks"] < 1e-15
    True
    """
    per_sample, per_sample_reference = case.per_sample_masks, case.per_sample_reference
    masked_log_prob = case.model.masked_log_prob
    for i in range(case.X.shape[0]) if not case.stochastic else range(1):
        alone = case.X[i : i + 1]
        shared = case.call(masked_log_prob, alone, per_sample[i])
        if case.stochastic:
            single = case.call(masked_log_prob, alone, per_sample[i : i + 1])
        else:
            single = per_sample_reference[i : i + 1]
        case.assert_close("shared and per-sample masks", single, shared)


def check_masked_sum_matches_reference(case):
    """``"masked_log_prob_sum"``: the model's per-mask sums equal the reference summed over the
    features, for shared and per-sample masks.

    Examples
    --------
    >>> from skmpt.testing import MaskedModelCase, TabularJoint
    >>> from skmpt.testing.checks import check_masked_sum_matches_reference
    >>> class Offset(TabularJoint):
    ...     def masked_log_prob_sum(self, X, masks):
    ...         return super().masked_log_prob_sum(X, masks) + 0.1
    >>> joint = Offset([[0.1, 0.2], [0.3, 0.4]])
    >>> check_masked_sum_matches_reference(MaskedModelCase(joint, joint.sample(3, random_state=0)))
    Traceback (most recent call last):
    ...
    AssertionError: Offset fails the masked-model contract, 'masked_log_prob_sum': max abs difference 0.1 ...
    """
    for form, reference in ((case.masks, case.reference), (case.per_sample_masks, case.per_sample_reference)):
        sums = case.call(case.model.masked_log_prob_sum, case.X, form)
        case.check_output("masked_log_prob_sum", sums, reference.shape[:2])
        case.assert_close("masked_log_prob_sum", sums, reference.sum(-1))


def check_weighted_sum_matches_reference(case):
    """``"weighted_log_prob_sum"``: the model's weighted sum over shared masks (the form of
    every cumulative score) equals the reference's per-mask sums contracted with the weights.

    Examples
    --------
    >>> from skmpt.testing import MaskedModelCase, TabularJoint
    >>> from skmpt.testing.checks import check_weighted_sum_matches_reference
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> case = MaskedModelCase(joint, joint.sample(4, random_state=0))
    >>> check_weighted_sum_matches_reference(case)
    >>> case.report["weighted_log_prob_sum"] < 1e-12
    True
    """
    X, masks = case.X, case.masks
    weights = torch.linspace(0.5, 2.0, len(masks), dtype=X.dtype, device=X.device)
    total = case.call(case.model.weighted_log_prob_sum, X, masks, weights)
    case.check_output("weighted_log_prob_sum", total, X.shape[:1])
    case.assert_close("weighted_log_prob_sum", total, case.reference.sum(-1) @ weights)


def check_chain_matches_reference(case):
    """``"chain_log_prob"``: the model's chain terms equal
    :func:`skmpt.models.contract.reference_chain_log_prob`, the reference on each ordering's nested
    masks.

    Examples
    --------
    >>> from skmpt.testing import MaskedModelCase, TabularJoint
    >>> from skmpt.testing.checks import check_chain_matches_reference
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> case = MaskedModelCase(joint, joint.sample(4, random_state=0))
    >>> check_chain_matches_reference(case)
    >>> case.report["chain_log_prob"]
    0.0
    """
    X, orderings = case.X, case.orderings
    expected = case.call(functools.partial(reference_chain_log_prob, case.model), X, orderings)
    chain = case.call(case.model.chain_log_prob, X, orderings)
    case.check_output("chain_log_prob", chain, (X.shape[0], *orderings.shape))
    case.assert_close("chain_log_prob", chain, expected)


def _shapes(X, masks):
    return f"X of shape {tuple(X.shape)}, {'orderings' if masks.dtype == torch.long else 'masks'} of shape " + str(
        tuple(masks.shape)
    )


def check_call_shapes(case):
    """``"call shapes"``: every shape of call skmpt makes gives the reference's numbers.

    Training calls ``masked_log_prob_sum`` with one mask per sample ``(n, 1, D)`` by default,
    scoring with shared masks ``(P, D)`` in chunks that may hold a single mask, and the last
    chunk of samples may hold one sample. For every form of
    :attr:`~skmpt.testing.MaskedModelCase.call_forms` (one shared mask, shared masks, one mask per sample,
    per-sample masks; every sample, and a chunk of one): ``masked_log_prob`` returns shape
    ``(n, P, D)`` and, for a deterministic model, the values it gives with all the masks and
    samples at once; ``masked_log_prob_sum`` (shape ``(n, P)``) and, for shared masks,
    ``weighted_log_prob_sum`` (shape ``(n,)``) equal the reference of the same call summed.
    ``chain_log_prob`` with one ordering, and on one sample, equals
    :func:`skmpt.models.contract.reference_chain_log_prob` of the same call. A stochastic model's
    fast paths are compared with its reference called with the same generator seed.

    Examples
    --------
    >>> import torch
    >>> from skmpt.testing import MaskedModelCase, TabularJoint
    >>> from skmpt.testing.checks import check_call_shapes
    >>> class OneMaskWrong(TabularJoint):
    ...     def masked_log_prob_sum(self, X, masks):
    ...         sums = super().masked_log_prob_sum(X, masks)
    ...         return sums + 0.1 if masks.shape[-2] == 1 else sums
    >>> joint = OneMaskWrong([[0.1, 0.2], [0.3, 0.4]])
    >>> check_call_shapes(MaskedModelCase(joint, joint.sample(3, random_state=0)))
    Traceback (most recent call last):
    ...
    AssertionError: OneMaskWrong fails the masked-model contract, 'call shapes': masked_log_prob_sum, every sample, ...
    """
    name, model = "call shapes", case.model
    for label, rows, masks, expected in case.call_forms:
        X, shapes = case.X[rows], _shapes(case.X[rows], masks)
        reference = case.call(model.masked_log_prob, X, masks)
        case.check_output(name, reference, (len(X), *masks.shape[-2:]), where=f"masked_log_prob, {label} ({shapes})")
        if not case.stochastic:
            case.assert_close(name, reference, expected, where=f"masked_log_prob, {label} ({shapes})")
        sums = case.call(model.masked_log_prob_sum, X, masks)
        where = f"masked_log_prob_sum, {label} ({shapes})"
        case.check_output(name, sums, reference.shape[:2], where=where)
        case.assert_close(name, sums, reference.sum(-1), where=where)
        if masks.ndim == 2:
            weights = torch.linspace(0.5, 2.0, len(masks), dtype=X.dtype, device=X.device)
            total = case.call(model.weighted_log_prob_sum, X, masks, weights)
            where = f"weighted_log_prob_sum, {label} ({shapes})"
            case.check_output(name, total, X.shape[:1], where=where)
            case.assert_close(name, total, reference.sum(-1) @ weights, where=where)
    last = slice(len(case.X) - 1, None)
    for label, rows, orderings in (
        ("every sample, one ordering", slice(None), case.orderings[:1]),
        ("a chunk of one sample, one ordering", last, case.orderings[:1]),
        ("a chunk of one sample, every ordering", last, case.orderings),
    ):
        X, where = case.X[rows], f"chain_log_prob, {label} ({_shapes(case.X[rows], orderings)})"
        expected = case.call(functools.partial(reference_chain_log_prob, model), X, orderings)
        chain = case.call(model.chain_log_prob, X, orderings)
        case.check_output(name, chain, (len(X), *orderings.shape), where=where)
        case.assert_close(name, chain, expected, where=where)
    case.report.setdefault(name, 0.0)


def check_log_marginal_output(case):
    """``"log_marginal output"``: ``log_marginal(X)`` has shape ``(n,)``, ``X``'s dtype and
    device. Skipped when the model does not provide ``log_marginal``.

    Examples
    --------
    >>> from skmpt.testing import MaskedModelCase, TabularJoint
    >>> from skmpt.testing.checks import check_log_marginal_output
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> case = MaskedModelCase(joint, joint.sample(4, random_state=0))
    >>> check_log_marginal_output(case)
    >>> case.report
    {'log_marginal output': 0.0}
    """
    if not provides(case.model, "log_marginal"):
        case.skip("log_marginal output", "the model has no log_marginal")
        return
    case.log_marginal  # noqa: B018 - computed and checked on first use
    case.report["log_marginal output"] = 0.0


def check_identity(case):
    """``"identity"``: the exhaustive cumulative score ``sum_M S(x; M)`` equals
    ``log_marginal`` to ``rtol`` (the chain with ``n_orderings`` orderings when ``D > 12``).

    Skipped when the model does not provide ``log_marginal``, and for a stochastic model: its
    conditionals and its ``log_marginal`` are separate Monte Carlo estimates; compare them
    with :func:`~skmpt.testing.check_mpt_identity` at a tolerance of their Monte Carlo error.

    Examples
    --------
    >>> import torch
    >>> from skmpt.testing import MaskedModelCase, TabularJoint
    >>> from skmpt.testing.checks import check_identity
    >>> class Shifted(TabularJoint):
    ...     def log_marginal(self, X):
    ...         return super().log_marginal(X) + 0.25
    >>> joint = Shifted([[0.1, 0.2], [0.3, 0.4]])
    >>> check_identity(MaskedModelCase(joint, joint.sample(3, random_state=0)))
    Traceback (most recent call last):
    ...
    AssertionError: Shifted fails the masked-model contract, 'identity': max abs difference 0.25 ...
    """
    if not provides(case.model, "log_marginal"):
        case.skip("identity", "the model has no log_marginal")
        return
    if case.stochastic:
        case.skip("identity", "stochastic model: conditionals and log_marginal are separate estimates")
        return
    method = "exhaustive" if case.X.shape[1] <= MAX_EXHAUSTIVE_FEATURES else "chain"
    identity = check_mpt_identity(
        case.model,
        case.X,
        score_method=method,
        score_masks=len(case.orderings),
        log_marginal=case.log_marginal,
        random_state=case.seed,
    )
    case.assert_close("identity", torch.from_numpy(identity.cumulative), torch.from_numpy(identity.log_marginal))


def check_posterior_output(case):
    """``"posterior"``: ``posterior(X)[0]`` (what ``transform`` returns) is a tensor of shape
    ``(n, K)`` with ``X``'s dtype and device. Skipped when the model does not provide ``posterior``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import PPCAModule
    >>> from skmpt.testing import MaskedModelCase
    >>> from skmpt.testing.checks import check_posterior_output
    >>> module = PPCAModule(torch.ones(1, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64), 0.5)
    >>> case = MaskedModelCase(module, torch.eye(3, dtype=torch.float64))
    >>> check_posterior_output(case)
    >>> case.posterior_mean.shape
    torch.Size([3, 1])
    """
    if not provides(case.model, "posterior"):
        case.skip("posterior", "the model has no posterior")
        return
    case.posterior_mean  # noqa: B018 - computed and checked on first use
    case.report["posterior"] = 0.0


def check_decode_output(case):
    """``"decode"``: ``decode`` of the posterior mean (what ``inverse_transform`` returns) is a
    tensor of shape ``(n, D)`` with ``X``'s dtype and device. Skipped when the model does not
    provide ``decode`` or ``posterior``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import PPCAModule
    >>> from skmpt.testing import MaskedModelCase
    >>> from skmpt.testing.checks import check_decode_output
    >>> module = PPCAModule(torch.ones(1, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64), 0.5)
    >>> case = MaskedModelCase(module, torch.eye(3, dtype=torch.float64))
    >>> check_decode_output(case)
    >>> case.report
    {'decode': 0.0}
    """
    if not (provides(case.model, "posterior") and provides(case.model, "decode")):
        case.skip("decode", "decode is checked on posterior(X)[0]; the model lacks posterior or decode")
        return
    with torch.no_grad():
        decoded = case.model.decode(case.posterior_mean)
    case.check_output("decode", decoded, case.X.shape)
    case.report["decode"] = 0.0


#: Every check of the masked-model contract, in the order :func:`check_masked_model` runs them.
MASKED_MODEL_CHECKS = (
    check_masked_log_prob_output,
    check_zero_at_observed,
    check_randomness,
    check_batch_independence,
    check_shared_and_per_sample_masks,
    check_masked_sum_matches_reference,
    check_weighted_sum_matches_reference,
    check_chain_matches_reference,
    check_call_shapes,
    check_log_marginal_output,
    check_identity,
    check_posterior_output,
    check_decode_output,
    check_incomplete_rows,
)


def check_masked_model(model, X, *, rtol=1e-9, atol=1e-10, n_check_masks=8, n_orderings=3, random_state=0):
    """Check that a model keeps the masked-model contract (``check_estimator`` for models).

    Runs every check of :data:`MASKED_MODEL_CHECKS` on one :class:`MaskedModelCase`, in this
    order, and stops at the first failure:

    1. :func:`~skmpt.testing.checks.check_masked_log_prob_output` (``"masked_log_prob output"``)
    2. :func:`~skmpt.testing.checks.check_zero_at_observed` (``"zero at observed positions"``)
    3. :func:`~skmpt.testing.checks.check_randomness` (``"randomness"``)
    4. :func:`~skmpt.testing.checks.check_batch_independence` (``"batch independence"``)
    5. :func:`~skmpt.testing.checks.check_shared_and_per_sample_masks` (``"shared and per-sample masks"``)
    6. :func:`~skmpt.testing.checks.check_masked_sum_matches_reference` (``"masked_log_prob_sum"``)
    7. :func:`~skmpt.testing.checks.check_weighted_sum_matches_reference` (``"weighted_log_prob_sum"``)
    8. :func:`~skmpt.testing.checks.check_chain_matches_reference` (``"chain_log_prob"``)
    9. :func:`~skmpt.testing.checks.check_call_shapes` (``"call shapes"``): one shared mask, one mask per sample,
       a chunk of one sample, one ordering
    10. :func:`~skmpt.testing.checks.check_log_marginal_output` (``"log_marginal output"``) and
        :func:`~skmpt.testing.checks.check_identity` (``"identity"``)
    11. :func:`~skmpt.testing.checks.check_posterior_output` (``"posterior"``) and
        :func:`~skmpt.testing.checks.check_decode_output` (``"decode"``)
    12. :func:`~skmpt.testing.missing.check_incomplete_rows` (``"incomplete rows"``): the fast paths against the
        reference with entries not observed, and the identity over the observed entries
        against ``log_marginal(X, observed=)`` (skipped for a model whose ``handles_missing`` is False)

    For a stochastic model each comparison calls both sides with generators seeded alike
    and with the same masks per call, so they agree exactly when the model draws its noise
    only from the generator.

    Parameters
    ----------
    model : object or fitted skmpt estimator
        A :class:`skmpt.models.MaskedModel` or any object with ``masked_log_prob`` (wrapped
        once by :func:`skmpt.models.as_masked_model`); for a fitted estimator, its ``module_``
        on ``X`` validated by the estimator.
    X : torch.Tensor or array-like of shape (n_samples, n_features)
        At least two samples, in the dtype and on the device to check. The model is called
        with ``X`` in the precision given, never another: a float32 array or tensor is
        checked in float32 (a list or an integer array takes the dtype of the model's
        parameters, float64 if it has none). ``X`` in another dtype than the model's
        parameters is passed as it is; a model that then fails (torch's dtype error, or an
        output in its own dtype) is reported with both dtypes named.
    rtol, atol : float, default=1e-9, 1e-10
        Tolerances of every comparison: ``|a - b| <= atol + rtol * |b|``. The defaults are
        for float64; a float32 model needs looser ones, such as ``rtol=1e-4, atol=1e-5``
        (a failure in a lower precision says so).
    n_check_masks : int, default=8
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
    case = MaskedModelCase(
        model, X, rtol=rtol, atol=atol, n_check_masks=n_check_masks, n_orderings=n_orderings, random_state=random_state
    )
    for check in MASKED_MODEL_CHECKS:
        check(case)
    return case.report
