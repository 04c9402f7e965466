"""One model on one sample, as every check of :mod:`skmpt.testing.checks` sees it."""

from functools import cached_property
from numbers import Integral, Real

import numpy as np
import torch

from .._utils import check_generator
from .._validation import Interval, validate_parameters
from ..masks import masks_of_sizes, random_orderings
from ..models import as_masked_model
from ..models.contract import model_name
from ._inputs import as_model_and_tensor, parameter_dtype

__all__ = ["MaskedModelCase"]

#: Tolerances to suggest when a comparison fails in a precision lower than float64.
LOWER_PRECISION_TOLERANCES = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-3), torch.bfloat16: (1e-1, 1e-2)}

_CONSTRAINTS = {
    "rtol": [Interval(Real, 0, None, closed="left")],
    "atol": [Interval(Real, 0, None, closed="left")],
    "n_check_masks": [Interval(Integral, 1, None, closed="left")],
    "n_orderings": [Interval(Integral, 1, None, closed="left")],
    "random_state": ["random_state"],
}


def _masks_for(n_features, n_masks, generator):
    """``n_masks`` random masks with every size from 1 to ``D`` represented, full mask last."""
    sizes = torch.arange(n_masks) % n_features + 1
    masks = masks_of_sizes(sizes, n_features, random_state=generator)
    masks[-1] = True
    return masks


class MaskedModelCase:
    """A model, a sample and the masks every check of the masked-model contract uses.

    The masks and orderings are drawn once, from ``random_state``, so that every check sees
    the same ones; the reference values (:attr:`reference`, ...) are computed once, on first
    use, and checked for shape, dtype and device then. Each check records what it measured in
    ``report``.

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
        Orderings for the chain comparison, and for the identity when ``D > 12``.
    random_state : see :func:`skmpt.masks.check_generator`, default=0

    Attributes
    ----------
    model : MaskedModel
        The model checked (an estimator's ``module_``; an object that is not a
        :class:`~skmpt.models.MaskedModel`, wrapped).
    X : torch.Tensor of shape (n_samples, n_features)
    seed : int
        Seeds the masks, the orderings and, for a stochastic model, every call's generator.
    stochastic : bool
        The model's ``stochastic`` attribute.
    masks : torch.Tensor of shape (n_check_masks, n_features)
        Shared masks.
    per_sample_masks : torch.Tensor of shape (n_samples, n_check_masks, n_features)
        Masks of each sample.
    orderings : torch.Tensor of shape (n_orderings, n_features)
    report : dict
        For every property checked so far, the largest absolute difference found, or
        ``"skipped: ..."`` with the reason.

    Examples
    --------
    >>> from skmpt.testing import MaskedModelCase, TabularJoint
    >>> from skmpt.testing.checks import check_identity
    >>> joint = TabularJoint.random(3, random_state=0)
    >>> case = MaskedModelCase(joint, joint.sample(4, random_state=0))
    >>> case.masks.shape, case.per_sample_masks.shape
    (torch.Size([8, 3]), torch.Size([4, 8, 3]))
    >>> check_identity(case)
    >>> case.report["identity"] < 1e-12
    True
    """

    def __init__(self, model, X, *, rtol=1e-9, atol=1e-10, n_check_masks=8, n_orderings=3, random_state=0):
        validate_parameters(
            {
                "rtol": rtol,
                "atol": atol,
                "n_check_masks": n_check_masks,
                "n_orderings": n_orderings,
                "random_state": random_state,
            },
            _CONSTRAINTS,
            type(self).__name__,
        )
        model, X = as_model_and_tensor(model, X)
        if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1:
            raise ValueError(f"X must be a 2-D tensor with at least two samples and one feature; got {tuple(X.shape)}.")
        model = as_masked_model(model)
        self.model, self.X, self.rtol, self.atol = model, X, rtol, atol
        self.seed = int(torch.randint(2**62, (1,), generator=check_generator(random_state)))
        self.stochastic = bool(model.stochastic)
        self.report = {}
        generator = torch.Generator().manual_seed(self.seed)
        n_samples, n_features = X.shape
        self.masks = _masks_for(n_features, n_check_masks, generator).to(X.device)
        self.per_sample_masks = torch.stack(
            [_masks_for(n_features, n_check_masks, generator) for _ in range(n_samples)]
        ).to(X.device)
        self.orderings = random_orderings(n_orderings, n_features, random_state=generator, device=X.device)

    # ------------------------------------------------------------------ reference values
    @cached_property
    def reference(self):
        """``masked_log_prob(X, masks)``, shape ``(n, P, D)``; checked as ``"masked_log_prob output"``."""
        value = self.call(self.model.masked_log_prob, self.X, self.masks)
        self.check_output("masked_log_prob output", value, (*self.X.shape[:1], *self.masks.shape))
        return value

    @cached_property
    def per_sample_reference(self):
        """``masked_log_prob(X, per_sample_masks)``; checked as ``"shared and per-sample masks"``."""
        value = self.call(self.model.masked_log_prob, self.X, self.per_sample_masks)
        self.check_output("shared and per-sample masks", value, self.per_sample_masks.shape)
        return value

    @cached_property
    def log_marginal(self):
        """``log_marginal(X)``, shape ``(n,)``; checked as ``"log_marginal output"``."""
        value = self.call(self.model.log_marginal, self.X)
        self.check_output("log_marginal output", value, self.X.shape[:1])
        return value

    @cached_property
    def posterior_mean(self):
        """``posterior(X)[0]``, shape ``(n, K)``; checked as ``"posterior"``."""
        with torch.no_grad():
            mean = self.model.posterior(self.X)[0]
        n_samples = self.X.shape[0]
        if not isinstance(mean, torch.Tensor) or mean.ndim != 2 or mean.shape[0] != n_samples:
            got = getattr(mean, "shape", mean)
            self.fail("posterior", f"posterior(X)[0] must be a tensor of shape ({n_samples}, K); got {got}.")
        self.check_output("posterior", mean, mean.shape)
        return mean

    @cached_property
    def call_forms(self):
        """Every form of call skmpt makes, as ``(label, rows, masks, expected)``.

        ``rows`` indexes ``X`` (every sample, or a chunk of one); ``masks`` are one shared mask
        ``(1, D)`` (each mask in turn), the shared masks ``(P, D)``, one mask per sample
        ``(n, 1, D)`` (the training default; each in turn) or the per-sample masks ``(n, P, D)``;
        ``expected`` is what :attr:`reference` or :attr:`per_sample_reference` gives for them.
        """
        X, masks, per_sample = self.X, self.masks, self.per_sample_masks
        reference, per_sample_reference = self.reference, self.per_sample_reference
        forms = []
        for rows, samples in ((slice(None), "every sample"), (slice(X.shape[0] - 1, None), "a chunk of one sample")):
            for p in range(len(masks)):
                mask = slice(p, p + 1)
                forms.append((f"{samples}, one shared mask", rows, masks[mask], reference[rows, mask]))
                forms.append(
                    (f"{samples}, one mask per sample", rows, per_sample[rows, mask], per_sample_reference[rows, mask])
                )
            forms.append((f"{samples}, shared masks", rows, masks, reference[rows]))
            forms.append((f"{samples}, per-sample masks", rows, per_sample[rows], per_sample_reference[rows]))
        return forms

    # ------------------------------------------------------------------ what checks use
    def call(self, method, *args, seed=0, **kwargs):
        """``method(*args)`` without gradients; a stochastic model gets a generator seeded by ``seed``.

        When ``X``'s dtype is not that of the model's parameters and the call fails, the
        ``AssertionError`` names both dtypes.
        """
        generator = torch.Generator().manual_seed(self.seed + seed) if self.stochastic else None
        with torch.no_grad():
            try:
                return method(*args, generator=generator, **kwargs)
            except RuntimeError as exc:
                if self._dtype_mismatch() is None:
                    raise
                raise AssertionError(
                    f"{model_name(self.model)} cannot be called with X in {self.X.dtype}: "
                    f"{self._dtype_mismatch()} ({exc})"
                ) from exc

    def _dtype_mismatch(self):
        """What to do when the model's parameters are in another dtype than ``X``, or None."""
        dtype = parameter_dtype(self.model)
        if dtype is None or dtype == self.X.dtype:
            return None
        return (
            f"the model's parameters are {dtype}. The check calls the model with X as given; pass X "
            f"in {dtype} to check that precision, or convert the model (model.to({self.X.dtype}))."
        )

    def fail(self, name, message):
        """Raise ``AssertionError`` naming the model and the property ``name``."""
        raise AssertionError(f"{model_name(self.model)} fails the masked-model contract, {name!r}: {message}")

    def check_output(self, name, value, shape, *, where=""):
        """Fail unless ``value`` is a tensor of ``shape`` with ``X``'s dtype and device.

        ``where`` (the call, e.g. its shapes) prefixes the message.
        """
        X, where = self.X, f"{where}: " if where else ""
        if not isinstance(value, torch.Tensor):
            self.fail(name, f"{where}returned {type(value).__name__}, not a torch.Tensor.")
        if tuple(value.shape) != tuple(shape):
            self.fail(name, f"{where}returned shape {tuple(value.shape)}; expected {tuple(shape)}.")
        if value.dtype != X.dtype or value.device != X.device:
            hint = f" {self._dtype_mismatch()}" if self._dtype_mismatch() and value.dtype != X.dtype else ""
            self.fail(
                name, f"{where}returned {value.dtype} on {value.device}; expected X's {X.dtype} on {X.device}.{hint}"
            )

    def _precision_note(self):
        """For ``X`` in a precision below float64: which, and a tolerance it can meet."""
        dtype = self.X.dtype
        if dtype == torch.float64 or not dtype.is_floating_point:
            return ""
        note = f" X is {str(dtype)[6:]}: the model was checked in {str(dtype)[6:]}, the precision given"
        rtol, atol = LOWER_PRECISION_TOLERANCES.get(dtype, (None, None))
        if rtol is not None and (self.rtol < rtol or self.atol < atol):
            note += f"; its rounding needs a looser tolerance, e.g. rtol={rtol:.0e}, atol={atol:.0e}"
        return note + "."

    def assert_close(self, name, actual, expected, *, where=""):
        """Record ``max |actual - expected|``; fail unless within ``atol + rtol * |expected|``.

        ``where`` (the call, e.g. its shapes) prefixes the message; in a precision below
        float64 the message names it and suggests a tolerance it can meet.
        """
        rtol = self.rtol
        actual, expected = actual.to(torch.float64), expected.to(torch.float64)
        same_inf = (actual == expected) & torch.isinf(expected)
        error = torch.where(same_inf, torch.zeros_like(actual), (actual - expected).abs())
        bound = self.atol + rtol * expected.abs()
        excess = torch.where(same_inf, torch.zeros_like(error), error - bound)  # rtol=0 makes inf's bound NaN
        worst = float(error.max()) if error.numel() else 0.0
        self.report[name] = max(worst, self.report.get(name, 0.0))
        if error.numel() and not bool((excess <= 0).all()):
            flat = int(torch.nan_to_num(excess, nan=np.inf).argmax())
            index = tuple(int(i) for i in np.unravel_index(flat, excess.shape))
            self.fail(
                name,
                f"{where + ': ' if where else ''}max abs difference {worst:.6g} (first beyond tolerance at index "
                f"{index}: got {float(actual[index]):.10g}, expected {float(expected[index]):.10g}; rtol={rtol:g}, "
                f"atol={self.atol:g}).{self._precision_note()}",
            )

    def skip(self, name, why):
        """Record that the property ``name`` was not checked, and why."""
        self.report[name] = f"skipped: {why}"
