"""The masked-model contract on incomplete rows: entries that are *not observed*.

A model that handles missing entries (``handles_missing``, see :class:`skmpt.models.MaskedModel`)
marginalises the unobserved entries out; :func:`~skmpt.testing.missing.check_incomplete_rows` checks its fast paths
against its reference on rows with holes, and the identity over the observed entries against
its ``log_marginal`` of the observed sub-vector.
"""

import functools

import torch

from ..masks import all_masks, observed_masks
from ..models import provides
from ..models.contract import reference_chain_log_prob
from ..objectives import cumulative_score

__all__ = ["check_incomplete_rows", "incomplete_pattern"]

#: Above this many observed features the identity is checked through the chain.
MAX_EXHAUSTIVE_OBSERVED = 12


def incomplete_pattern(n_samples, n_features, *, seed=0, rate=0.7, device=None):
    """A pattern of observed entries for checks: about ``rate`` of them observed, the first
    row complete and, with three rows or more, the last row with nothing observed.

    Examples
    --------
    >>> from skmpt.testing.missing import incomplete_pattern
    >>> observed = incomplete_pattern(4, 3)
    >>> bool(observed[0].all()), bool(observed[-1].any())
    (True, False)
    """
    generator = torch.Generator().manual_seed(seed)
    observed = torch.rand(n_samples, n_features, generator=generator) < rate
    observed[0] = True
    if n_samples >= 3:
        observed[-1] = False
    return observed.to(device)


def check_incomplete_rows(case):
    """``"incomplete rows"``: with entries not observed, the masked sums, the weighted sum
    over masks shared by a pattern, and the chain equal the reference (``masked_log_prob``
    with ``observed=``), which is zero outside the masks; for a deterministic model that
    provides ``log_marginal``, the exhaustive cumulative score over each row's observed
    entries (the chain above 12 of them) equals ``log p(x_o)``, and is zero for a row with
    nothing observed. Skipped for a model whose ``handles_missing`` is False; a method that
    refuses ``observed`` (``NotImplementedError``) in a model that handles it fails the check.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import FactorAnalysisModule
    >>> from skmpt.testing import MaskedModelCase
    >>> from skmpt.testing.missing import check_incomplete_rows
    >>> psi = torch.tensor([0.2, 1.0, 3.0, 0.5], dtype=torch.float64)
    >>> W = torch.tensor([[1.0, 0.5, -0.3, 0.2]], dtype=torch.float64)
    >>> module = FactorAnalysisModule(W, torch.zeros(4, dtype=torch.float64), psi)
    >>> X = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> case = MaskedModelCase(module, X)
    >>> check_incomplete_rows(case)
    >>> case.report["incomplete rows"] < 1e-9
    True
    """
    name = "incomplete rows"
    if not case.model.handles_missing:
        case.skip(name, "handles_missing is False (the model handles complete rows only)")
        return
    try:
        case.report[name] = max(_incomplete_rows(case))
    except NotImplementedError as exc:
        case.fail(name, str(exc))


def _incomplete_rows(case):
    """The differences :func:`~skmpt.testing.missing.check_incomplete_rows` measures, one per comparison."""
    name, model, X = "incomplete rows", case.model, case.X
    n_samples, n_features = X.shape
    observed = incomplete_pattern(n_samples, n_features, seed=case.seed % 2**31, device=X.device)
    generator = torch.Generator().manual_seed(case.seed)
    masks = observed_masks("uniform", (n_samples, len(case.masks)), observed, random_state=generator, device=X.device)
    reference = case.call(model.masked_log_prob, X, masks, observed=observed)
    case.check_output(name, reference, masks.shape, where="masked_log_prob with observed=")
    outside = reference[~masks]
    if outside.numel() and bool((outside != 0).any()):
        case.fail(name, "masked_log_prob is not zero outside the masks on incomplete rows.")
    sums = case.call(model.masked_log_prob_sum, X, masks, observed=observed)
    differences = [_close(case, "masked_log_prob_sum with observed=", sums, reference.sum(-1))]
    differences.append(_weighted(case, observed[min(1, n_samples - 1)]))
    chain = case.call(model.chain_log_prob, X, case.orderings, observed=observed)
    expected = case.call(functools.partial(reference_chain_log_prob, model), X, case.orderings, observed=observed)
    differences.append(_close(case, "chain_log_prob with observed=", chain, expected))
    if provides(model, "log_marginal") and not case.stochastic:
        exact = case.call(model.log_marginal, X, observed=observed)
        method = "exhaustive" if int(observed.sum(-1).max()) <= MAX_EXHAUSTIVE_OBSERVED else "chain"
        with torch.no_grad():
            score = cumulative_score(
                model, X, score_method=method, score_masks=len(case.orderings), random_state=case.seed,
                observed=observed,
            )
        differences.append(_close(case, f"{method} score over observed entries against log_marginal", score, exact))
        if bool((~observed).all(-1).any()) and bool((exact[(~observed).all(-1)] != 0).any()):
            case.fail(name, "log_marginal(X, observed=) is not zero for a row with nothing observed.")
    return differences


def _weighted(case, pattern):
    """The weighted sum over masks shared by one pattern ``(D,)`` against the reference."""
    if not bool(pattern.any()):
        return 0.0
    masks = all_masks(int(pattern.sum()), device=case.X.device)[: len(case.masks)]
    shared = masks.new_zeros(len(masks), len(pattern))
    shared[:, pattern] = masks
    weights = torch.linspace(0.5, 2.0, len(shared), dtype=case.X.dtype, device=case.X.device)
    total = case.call(case.model.weighted_log_prob_sum, case.X, shared, weights, observed=pattern)
    reference = case.call(case.model.masked_log_prob, case.X, shared, observed=pattern)
    return _close(case, "weighted_log_prob_sum with a shared pattern", total, reference.sum(-1) @ weights)


def _close(case, what, actual, expected):
    """The largest absolute difference; fails the check beyond the case's tolerances."""
    if tuple(actual.shape) != tuple(expected.shape):
        case.fail("incomplete rows", f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}.")
    difference = (actual - expected).abs()
    if bool((difference > case.atol + case.rtol * expected.abs()).any()) or not bool(torch.isfinite(actual).all()):
        case.fail("incomplete rows", f"{what}: max abs difference {float(difference.max()):.3g}.")
    return float(difference.max()) if difference.numel() else 0.0
