"""The training loop of the array estimators, as objects: the :class:`Trainer` (Adam, the step-size
schedule, the stopping rule and the one epoch loop, :meth:`Trainer.train`), the training masks
(:class:`MaskSampler`) and objective (:class:`TrainingObjective`), the default solver
(:class:`MiniBatchSolver`: shuffled mini-batches of rows with fresh masks) and the state
``partial_fit`` continues from call to call. Training from moments is a solver of its own, in
``skmpt.estimators._moments``."""

import contextlib
import itertools
import logging
import math
import os
import time
from dataclasses import dataclass, field

import torch
from torch.optim.adam import adam

from .._utils import seeded
from ..masks import observed_masks, sample_masks
from ..objectives import OBJECTIVES
from ._data import fill_missing, standardization

__all__ = [
    "AdamOnPlateau", "MaskSampler", "MiniBatchSolver", "StreamState", "Trainer", "TrainingData", "TrainingObjective",
    "fit_threads", "intra_op_threads", "resolve_batch_size", "thread_variable_in_effect", "training_mode",
]

logger = logging.getLogger("skmpt")

#: torch's intra-op threads when skmpt was imported: a different number at fit time is the user's own.
_THREADS_AT_IMPORT = torch.get_num_threads()
#: Steps of at most this many numbers (rows times masks times features) run on one thread: measured
#: on a 2-core machine, a 600 x 12 fit ran faster on one thread than on two (see the user guide's
#: "Scaling" page), the threads' synchronisation costing more than they share out.
SMALL_STEP = 2**18


@contextlib.contextmanager
def intra_op_threads(n_threads):
    """torch's intra-op threads set to ``n_threads`` inside the block and restored after, as
    threadpoolctl's ``threadpool_limits``; None leaves them as they are.

    Examples
    --------
    >>> import torch
    >>> from skmpt.estimators._trainer import intra_op_threads
    >>> before = torch.get_num_threads()
    >>> with intra_op_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    previous = torch.get_num_threads()
    if n_threads is None or n_threads == previous:
        yield
        return
    torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def fit_threads(step_size):
    """The intra-op threads for a fit whose steps handle about ``step_size`` numbers: one for a
    small step (at most ``SMALL_STEP``), None (torch's own number) otherwise, and None whenever
    the user chose a number (``torch.set_num_threads`` since skmpt was imported, or
    ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` in effect: :func:`thread_variable_in_effect`): a
    user's own setting wins."""
    if torch.get_num_threads() != _THREADS_AT_IMPORT or thread_variable_in_effect():
        return None
    return 1 if step_size <= SMALL_STEP else None


def thread_variable_in_effect():
    """Whether ``OMP_NUM_THREADS`` (or, unset, ``MKL_NUM_THREADS``) gives torch's intra-op threads now.

    torch reads the variables once, when its thread pool starts, so one set later has no effect and is
    not a choice made for this process: dask's nanny sets ``OMP_NUM_THREADS=1`` (and
    ``MKL_NUM_THREADS=1``) in the environment of the process that starts its workers, the client's,
    which keeps torch's own number. A variable is in effect when torch's number is its value.

    Examples
    --------
    >>> import os, torch
    >>> from unittest import mock
    >>> from skmpt.estimators._trainer import thread_variable_in_effect
    >>> with mock.patch.dict(os.environ, {"OMP_NUM_THREADS": str(torch.get_num_threads() + 1)}):
    ...     thread_variable_in_effect()  # set after torch started: not its number
    False
    >>> with mock.patch.dict(os.environ, {"OMP_NUM_THREADS": str(torch.get_num_threads())}):
    ...     thread_variable_in_effect()
    True
    """
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(name, "").split(",")[0].strip()  # OpenMP's nested list: the first level's
        if value:
            return value == str(torch.get_num_threads())
    return False


def resolve_batch_size(batch_size, n_samples):
    """The rows of a mini-batch of ``n_samples`` rows for the ``batch_size`` parameter: ``"auto"`` is 200.

    Examples
    --------
    >>> from skmpt.estimators._trainer import resolve_batch_size
    >>> resolve_batch_size("auto", 1000), resolve_batch_size("auto", 50), resolve_batch_size(64, 1000)
    (200, 50, 64)
    """
    return min(200, n_samples) if batch_size == "auto" else min(batch_size, n_samples)


@contextlib.contextmanager
def training_mode(verbose):
    """Gradients on, even inside ``torch.no_grad()`` or ``torch.inference_mode()`` blocks, and
    ``verbose`` lines shown through the ``skmpt`` logger when logging is not configured."""
    handler = None
    if verbose and not logger.hasHandlers():
        handler = logging.StreamHandler()
        logger.addHandler(handler)
    level = logger.level
    if verbose and logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        with torch.inference_mode(False), torch.enable_grad():
            yield
    finally:
        logger.setLevel(level)
        if handler is not None:
            logger.removeHandler(handler)


class AdamOnPlateau:
    """Adam whose step size is cut when a measure of progress stalls.

    The steps of ``torch.optim.Adam`` (torch's functional ``torch.optim.adam.adam``, on its fused
    kernel where torch has one) and the schedule of ``torch.optim.lr_scheduler.ReduceLROnPlateau``
    with ``mode="max"`` and ``threshold_mode="abs"``: the same numbers, bit for bit. Held without a
    ``torch.optim.Optimizer`` because constructing one imports ``torch._dynamo``: about 1 s of CPU
    in every new process, more than a small fit's whole training, paid again by each worker of a
    grid search.

    Parameters
    ----------
    parameters : iterable of torch.nn.Parameter
    learning_rate : float
    patience : int
        Calls of :meth:`plateau` without progress that are tolerated; the next cuts the step size.
    factor : float
        The step size is multiplied by this at a cut.
    threshold : float
        Progress is a value above the best so far plus this.

    Examples
    --------
    >>> import torch
    >>> from skmpt.estimators._trainer import AdamOnPlateau
    >>> weight = torch.nn.Parameter(torch.tensor([1.0]))
    >>> optimizer = AdamOnPlateau([weight], 0.1, patience=1, factor=0.5, threshold=0.0)
    >>> (weight ** 2).sum().backward()
    >>> optimizer.step()
    >>> round(weight.item(), 6)  # Adam's first step: the step size against the gradient's sign
    0.9
    >>> [optimizer.plateau(value) for value in (1.0, 1.0, 1.0)], optimizer.learning_rate
    ([False, False, True], 0.05)
    """

    #: ``ReduceLROnPlateau``'s ``eps``: a cut smaller than this is not made.
    min_cut = 1e-8

    def __init__(self, parameters, learning_rate, *, patience, factor, threshold):
        self.parameters = list(parameters)
        self.learning_rate, self.patience, self.factor, self.threshold = learning_rate, patience, factor, threshold
        self.fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in self.parameters)
        self.best, self.n_stalled, self.adam_state = -math.inf, 0, None

    def zero_grad(self):
        """Gradients to None, as ``torch.optim.Optimizer.zero_grad`` does by default."""
        for parameter in self.parameters:
            parameter.grad = None

    @torch.no_grad()
    def step(self):
        """One Adam step on the parameters that have a gradient, as ``torch.optim.Adam.step``."""
        if self.adam_state is None:
            self.adam_state = [self._initial_state(p) for p in self.parameters]
        stepped = [(p, state) for p, state in zip(self.parameters, self.adam_state, strict=True) if p.grad is not None]
        if not stepped:
            return
        params, states = zip(*stepped, strict=True)
        first, second, steps = zip(*states, strict=True)
        adam(
            list(params), [p.grad for p in params], list(first), list(second), [], list(steps),
            fused=self.fused or None, has_complex=any(torch.is_complex(p) for p in params),
            amsgrad=False, beta1=0.9, beta2=0.999, lr=self.learning_rate, weight_decay=0.0, eps=1e-8, maximize=False,
        )

    def _initial_state(self, parameter):
        """Adam's state of ``parameter`` before its first step, ``(exp_avg, exp_avg_sq, step)``, as torch
        makes it: the step count beside the parameter in float32 for the fused kernel, else on the CPU."""
        scalar = torch.float64 if torch.get_default_dtype() == torch.float64 and not self.fused else torch.float32
        step = torch.zeros((), dtype=scalar, device=parameter.device if self.fused else "cpu")
        return torch.zeros_like(parameter), torch.zeros_like(parameter), step

    def plateau(self, progress):
        """Record ``progress`` (higher is better); True when it cut the step size."""
        if progress > self.best + self.threshold:
            self.best, self.n_stalled = progress, 0
            return False
        self.n_stalled += 1
        if self.n_stalled <= self.patience:
            return False
        self.n_stalled = 0
        cut = self.learning_rate * self.factor
        if self.learning_rate - cut <= self.min_cut:
            return False
        self.learning_rate = cut
        return True

    def state_dict(self):
        """The state to continue from (``partial_fit``'s calls): copies, independent of the parameters."""
        adam_state = None if self.adam_state is None else [[t.clone() for t in m] for m in self.adam_state]
        return {"learning_rate": self.learning_rate, "best": self.best, "n_stalled": self.n_stalled,
                "adam_state": adam_state}

    def load_state_dict(self, state, schedule=True):
        """Continue from :meth:`state_dict`'s ``state``; without ``schedule``, only Adam's state
        (the step size and the schedule start afresh)."""
        saved = state["adam_state"]
        self.adam_state = None if saved is None else [[t.clone() for t in m] for m in saved]
        if schedule:
            self.learning_rate, self.best, self.n_stalled = state["learning_rate"], state["best"], state["n_stalled"]



@dataclass
class StreamState:
    """What ``partial_fit`` carries from one call to the next.

    The training units (``center``, ``scale``), the stopping rule's fixed samples and the
    ``solver`` come from the first chunk; the optimiser's and the step-size schedule's states
    continue. When the solver trains from moments, ``groups`` holds the moments of every chunk
    so far.
    """

    center: torch.Tensor
    scale: torch.Tensor
    seed: int
    dtype: torch.dtype
    calls: int = 0
    learning_rate: float = None
    optimizer: dict = None
    stopping: tuple = None
    groups: list = None
    solver: object = None


@dataclass(frozen=True)
class MaskSampler:
    """The training masks of ``mask_rate``: the sampler the trainer draws each step's masks with.

    Called as ``sampler(shape, n_features, generator, device[, observed=])`` it returns boolean masks
    of ``shape + (n_features,)`` from :func:`skmpt.masks.sample_masks`, or with ``observed`` (a
    boolean tensor of the samples' observed entries) from :func:`skmpt.masks.observed_masks`, among
    each sample's observed entries.

    Examples
    --------
    >>> import torch
    >>> from skmpt.estimators._trainer import MaskSampler
    >>> masks = MaskSampler(0.5)((3, 2), 4, torch.Generator().manual_seed(0), "cpu")
    >>> masks.shape, masks.sum(-1).unique().tolist()
    (torch.Size([3, 2, 4]), [2])
    """

    mask_rate: object

    def __call__(self, shape, n_features, generator, device, observed=None):
        if observed is not None:
            return observed_masks(self.mask_rate, shape, observed, random_state=generator, device=device)
        return sample_masks(self.mask_rate, shape, n_features, random_state=generator, device=device)


@dataclass(frozen=True)
class TrainingObjective:
    """``module``'s training objective :data:`skmpt.objectives.OBJECTIVES` ``[name]``, per sample.

    Called as ``objective(X, masks, observed=None)``; ``masks`` is None for an objective without
    masks (``masked`` is False: ``"elbo"``, ``"iwae"``, ``"lml"``). ``options`` are its keyword
    arguments (e.g. IWAE's number of particles).
    """

    name: str
    module: torch.nn.Module
    options: dict = field(default_factory=dict)

    @property
    def masked(self):
        """Whether the objective takes masks (masked pre-training)."""
        return self.name == "mpt"

    def __call__(self, X, masks, observed=None):
        masks = () if masks is None else (masks,)
        return OBJECTIVES[self.name](self.module, X, *masks, observed=observed, **self.options)


@dataclass
class Trainer:
    """Adam on a per-sample training objective (to maximise), with the estimators' stopping rule.

    Parameters
    ----------
    objective : TrainingObjective or callable
        ``objective(X, masks[, observed=])`` -> log-likelihood per sample of shape
        ``(n_samples,)``, with gradients to the module's parameters; ``masks`` is None when
        ``draw_masks`` is None; ``observed`` (the entries not missing) only with incomplete data.
    draw_masks : callable or None
        ``draw_masks(shape, n_features, generator, device[, observed=])`` -> boolean masks of
        ``shape + (n_features,)`` (among the ``observed`` entries when given); None for an
        objective without masks.
    n_masks, learning_rate, batch_size, max_epochs, tol, n_iter_no_change, verbose
        The estimator's parameters of the same names.
    monitor : callable or None
        ``monitor(X)`` -> a tensor whose mean is recorded as ``history_[...]["lml"]`` every
        ``monitor_every`` epochs.
    sample_weight : torch.Tensor of shape (n_samples,) or None
        Weights of the training rows, of mean one: every mean over samples is weighted.
    first_step_factor : float
        Adam starts at ``learning_rate`` times this (``near_start_factor`` from a start computed
        from the data); errors name ``learning_rate`` itself.
    exact : callable or None
        ``exact(X, observed=None)`` -> the exact per-sample value of what training aims at (the
        log-marginal likelihood of a model whose MPT target it is), or None: whether a run ended
        below its start is then judged on it, not on the stopping objective (a noisy estimate of it).
    """

    objective: object
    draw_masks: object
    n_masks: int
    learning_rate: float
    batch_size: object = "auto"
    max_epochs: int = 300
    tol: float = 1e-3
    n_iter_no_change: int = 10
    monitor: object = None
    monitor_every: int = 1
    verbose: int = 0
    history: list = field(default_factory=list)
    sample_weight: object = None
    first_step_factor: float = 1.0
    exact: object = None
    best: tuple = None
    start_exact: float = None
    start_state: dict = None
    start_progress: float = None
    downhill: tuple = None

    # Step-size schedule (torch's ReduceLROnPlateau): divide by this factor after
    # n_iter_no_change epochs without progress; the stall after this many cuts ends training.
    lr_cut_factor = 2.0
    n_lr_cuts = 6
    # The stopping rule's objective is computed on this fraction of the training samples
    # (at least monitor_min_samples): forward passes only, about a tenth of an epoch.
    monitor_fraction = 0.25
    monitor_min_samples = 100
    monitor_max_samples = 2500
    # Progress is counted in steps, not passes: an epoch is one pass over the data or this many
    # mini-batches (10,000 rows in batches of 200) of a stream of shuffled passes, whichever is
    # fewer, so the steps to convergence, and the cost of a fit, do not grow with the rows.
    max_steps_per_epoch = 50
    # A run whose stopping objective ends this many tol below its start's went downhill.
    downhill_factor = 10
    # A start computed from the data (PCA's solution) is near the optimum: Adam's first steps,
    # of about the step size in every parameter whatever the gradient, start this much smaller.
    near_start_factor = 0.1

    @classmethod
    def from_params(cls, params, objective, *, monitor=None, sample_weight=None, near_start=False, exact=None):
        """The trainer of an estimator's validated ``params`` (read as attributes: ``mask_rate``,
        ``n_masks``, ``learning_rate``, ``batch_size``, ``max_epochs``, ``tol``, ``n_iter_no_change``,
        ``monitor_every``, ``verbose``) for the :class:`TrainingObjective` ``objective``: its masks
        come from ``MaskSampler(params.mask_rate)`` when the objective takes masks. ``near_start``: the
        module starts near the optimum (first steps ``near_start_factor`` times smaller)."""
        return cls(
            objective,
            MaskSampler(params.mask_rate) if objective.masked else None,
            params.n_masks,
            params.learning_rate,
            batch_size=params.batch_size,
            max_epochs=params.max_epochs,
            tol=params.tol,
            n_iter_no_change=params.n_iter_no_change,
            monitor=monitor,
            monitor_every=params.monitor_every,
            verbose=params.verbose,
            sample_weight=sample_weight,
            first_step_factor=cls.near_start_factor if near_start else 1.0,
            exact=exact,
        )

    def optimizer(self, module):
        """Adam on ``module``'s parameters with the step-size schedule of torch's ``ReduceLROnPlateau``
        on the stopping objective (:class:`AdamOnPlateau`): the step size is divided by
        ``lr_cut_factor`` after ``n_iter_no_change`` epochs (or calls) without progress."""
        return AdamOnPlateau(module.parameters(), self.learning_rate * self.first_step_factor,
                             patience=self.n_iter_no_change - 1, factor=1 / self.lr_cut_factor, threshold=self.tol)

    def resolved_batch_size(self, n_samples):
        return resolve_batch_size(self.batch_size, n_samples)

    def batch_stream(self, n_samples, generator, device):
        """Mini-batches of row indices from shuffled passes over the rows, one after the other, without end."""
        while True:
            order = torch.randperm(n_samples, generator=generator).to(device)
            yield from order.split(self.resolved_batch_size(n_samples))

    def run_epoch(self, X, optimizer, generator, observed=None, batches=None):
        """One pass over ``X`` in shuffled mini-batches with fresh masks (or the given ``batches``
        of row indices); the mean objective.

        With ``observed`` (entries not missing), masks lie among each sample's observed entries.
        """
        n_samples, n_features = X.shape
        total = X.new_zeros((), dtype=torch.float64)  # accumulated in float64 whatever the dtype
        if batches is None:
            order = torch.randperm(n_samples, generator=generator).to(X.device)
            batches = order.split(self.resolved_batch_size(n_samples))
        n_seen = 0
        for batch in batches:
            seen = _rows(observed, batch)
            masks = self.masks((len(batch), self.n_masks), n_features, generator, X.device, seen)
            optimizer.zero_grad()
            with self.diverging():
                objective = self.objective(X[batch], masks, observed=seen)
                if self.sample_weight is not None:
                    objective = objective * self.sample_weight[batch]
                (-objective.mean()).backward()
            optimizer.step()
            total += objective.detach().sum(dtype=torch.float64)
            n_seen += len(batch)
        return float(total) / n_seen

    @contextlib.contextmanager
    def diverging(self):
        """Linear algebra that fails on the parameters (a covariance no longer positive
        definite) means the optimiser left the model's domain: say so, as a non-finite
        objective does, instead of surfacing torch's error."""
        try:
            yield
        except torch.linalg.LinAlgError as exc:
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise FloatingPointError(
                f"Training diverged: the model's parameters left its domain ({first_line}). Lower "
                f"learning_rate (now {self.learning_rate})."
            ) from exc

    def masks(self, shape, n_features, generator, device, observed=None):
        """Masks of ``shape + (n_features,)`` from ``draw_masks`` (among the ``observed`` entries when
        given), or None for an objective without masks."""
        if self.draw_masks is None:
            return None
        return self.draw_masks(shape, n_features, generator, device, observed=observed)

    def monitor_rows(self, n_samples, generator, device):
        """The rows, drawn once, on which the stopping rule compares epochs: ``monitor_fraction`` of
        the ``n_samples``, at least ``monitor_min_samples`` and at most ``monitor_max_samples``."""
        size = max(self.monitor_min_samples, math.ceil(self.monitor_fraction * n_samples))
        size = min(n_samples, size, self.monitor_max_samples)
        return torch.randperm(n_samples, generator=generator)[:size].to(device)

    def stopping_sample(self, X, generator, observed=None):
        """Samples, masks and a noise seed drawn once, on which the stopping rule compares epochs.

        Common random numbers: the objective on fixed masks and fixed noise changes only with
        the parameters, so mask noise (large for small masks: one token scaled by D) cannot
        pass for a lack of progress. Training itself draws fresh masks every step.
        """
        n_samples, n_features = X.shape
        rows = self.monitor_rows(n_samples, generator, X.device)
        seen = _rows(observed, rows)
        masks = self.masks((len(rows), self.n_masks), n_features, generator, X.device, seen)
        weights = None if self.sample_weight is None else self.sample_weight[rows]
        return X[rows], masks, int(torch.randint(2**62, (1,), generator=generator)), seen, weights

    def stopping_objective(self, X, masks, seed, observed=None, weights=None):
        """Mean training objective on the stopping rule's fixed samples, masks and noise
        (weighted by the samples' ``weights`` when given)."""
        batch_size = self.resolved_batch_size(len(X))
        total = 0.0
        with torch.no_grad(), seeded(seed, X.device):
            for i in range(0, len(X), batch_size):
                part = None if masks is None else masks[i : i + batch_size]
                seen = None if observed is None else observed[i : i + batch_size]
                with self.diverging():
                    objective = self.objective(X[i : i + batch_size], part, observed=seen)
                    if weights is not None:
                        objective = objective * weights[i : i + batch_size]
                    total += float(objective.sum(dtype=torch.float64))
        return total / (len(X) if weights is None else float(weights.sum(dtype=torch.float64)))

    def record(self, record, start):
        """Append one epoch's (or call's) record to ``history``, and log it when verbose."""
        record["seconds"] = time.perf_counter() - start
        self.history.append(record)
        if self.verbose:
            logger.info(", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.items()))

    def _keep_best(self, module, progress, epoch):
        """Remember ``module``'s parameters when ``progress`` (the stopping objective) is the best yet."""
        if self.best is None or progress > self.best[0]:
            self.best = (progress, {k: v.detach().clone() for k, v in module.state_dict().items()}, epoch)

    def _end(self, module, progress, epoch, converged, exact=None):
        """``(epoch, converged)``; a run that ended below where it started has not converged, goes
        back to the best parameters it saw (the start's, when the ``exact`` objective judged it) and
        ``downhill`` records ``(start, end, epoch of the parameters kept)``. Below means more than
        ``downhill_factor * tol`` on the stopping objective (a start already at the optimum ends a
        little below it, by the steps' noise), or more than ``tol`` on the ``exact`` one (a
        callable: the mean exact objective now; None: judged on the stopping objective)."""
        if exact is not None:
            start, end = self.start_exact, exact()
            if end >= start - self.tol:
                return epoch, converged
            module.load_state_dict(self.start_state)
            self.downhill = (start, end, 0)
            return epoch, False
        start = self.start_progress
        if progress >= start - self.downhill_factor * self.tol:
            return epoch, converged
        _, state, kept = self.best
        module.load_state_dict(state)
        self.downhill = (start, progress, kept)
        return epoch, False

    def train(self, module, epoch, stopping, log_jacobian, monitor=None, exact=None):
        """Train ``module`` until the stopping rule is met or ``max_epochs`` have run; ``(n_epochs, converged)``.

        The one epoch loop of every solver, which hands it three callables: ``epoch(optimizer)``
        runs an epoch's steps and returns its mean objective; ``stopping()`` is the stopping
        objective, on samples, masks and noise the solver drew once (common random numbers:
        it changes only with the parameters); ``monitor()`` (None: none) the mean log-marginal
        likelihood, recorded every ``monitor_every`` epochs. Log-densities are shifted by
        ``log_jacobian`` to the units of the original data; records go to ``history``.

        Adam with the schedule of torch's ``ReduceLROnPlateau`` (:class:`AdamOnPlateau`) on the
        stopping objective (as scikit-learn's ``MLPRegressor`` with ``learning_rate="adaptive"``): a
        stall of ``n_iter_no_change`` epochs means the step size, not the model, limits progress, so
        it is cut; the stall after ``n_lr_cuts`` cuts is convergence. A run whose stopping
        objective ends well below its start's has not converged (see :meth:`_end`).
        """
        optimizer = self.optimizer(module)
        self.start_progress = stopping() + log_jacobian
        self._keep_best(module, self.start_progress, 0)
        if exact is not None:
            self.start_exact, self.start_state = exact(), self.best[1]
        cuts = self.start_cuts()
        for n_epoch in range(1, self.max_epochs + 1):
            start = time.perf_counter()
            learning_rate = optimizer.learning_rate
            record = {"epoch": n_epoch, "objective": epoch(optimizer) + log_jacobian}
            record["stopping_objective"] = stopping() + log_jacobian
            if monitor is not None and n_epoch % self.monitor_every == 0:
                record["lml"] = monitor() + log_jacobian
            record["learning_rate"] = learning_rate
            progress, cuts = self._epoch_end(module, record, start, n_epoch, optimizer, cuts)
            if cuts > self.n_lr_cuts:
                return self._end(module, progress, n_epoch, True, exact)
        return self._end(module, progress, self.max_epochs, False, exact)

    def start_cuts(self):
        """The step size's cuts that a smaller first step stands for: Adam starting at
        ``first_step_factor`` times ``learning_rate`` (a start near the optimum) is where about
        ``log(1 / first_step_factor) / log(lr_cut_factor)`` cuts would have brought it, and they count
        toward the ``n_lr_cuts`` after which a stall ends training (none from a plain start)."""
        return int(math.log(1 / self.first_step_factor) / math.log(self.lr_cut_factor) + 1e-9)

    def _epoch_end(self, module, record, start, epoch, optimizer, cuts):
        """Record an epoch (``record["learning_rate"]``: the step size it ran at), keep the best
        parameters and step the schedule: ``(progress, cuts)``, ``cuts`` counting the step size's cuts."""
        self.record(record, start)
        progress = record["stopping_objective"]
        self._check_finite(progress, epoch)
        self._keep_best(module, progress, epoch)
        return progress, cuts + optimizer.plateau(progress)

    def _check_finite(self, progress, epoch):
        if not math.isfinite(progress):
            raise FloatingPointError(
                f"The training objective became {progress} at epoch {epoch}; lower "
                f"learning_rate (now {self.learning_rate})."
            )

    def stream_step(self, module, X, state, generator, observed=None):
        """One ``partial_fit`` call: a pass over the chunk ``X``, then the stopping rule's step.

        The schedule continues across calls as it does across ``fit``'s epochs: the stopping
        objective on samples and masks fixed at the first call, and the step size halved after
        ``n_iter_no_change`` calls without progress. A ``learning_rate`` changed with
        ``set_params`` between calls restarts the schedule from it. Returns the chunk's mean
        objective and the stopping objective.
        """
        optimizer = self.optimizer(module)
        if state.optimizer is not None:
            optimizer.load_state_dict(state.optimizer, schedule=state.learning_rate == self.learning_rate)
        objective = self.run_epoch(X, optimizer, generator, observed)
        if state.stopping is None:
            state.stopping = self.stopping_sample(X, generator, observed)
        progress = self.stopping_objective(*state.stopping)
        self._check_finite(progress, state.calls + 1)
        optimizer.plateau(progress)
        state.optimizer = optimizer.state_dict()
        state.learning_rate, state.calls = self.learning_rate, state.calls + 1
        return objective, progress


@dataclass
class TrainingData:
    """The training samples as a solver trains on them (:meth:`MiniBatchSolver.prepare`).

    ``X``: the standardised rows ``(x - center) / scale`` with missing entries at zero, or None when
    training sees only moments; ``observed``: their observed entries (None: all); ``weights``: their
    weights of mean one (None: equal); ``units``: ``(center, scale)``; ``shape``: the validated
    data's; ``groups`` and ``part``: the moment groups and the rows trained beside them of a solver
    that trains from moments (None otherwise; ``skmpt.estimators._moments``).
    """

    X: object
    observed: object
    weights: object
    units: tuple
    shape: tuple
    groups: list = None
    part: object = None

    @property
    def moments(self):
        """The data's moments when training sees no rows (complete data), else None."""
        return None if self.X is not None else self.groups[0].moments


class MiniBatchSolver:
    """What training runs on: shuffled mini-batches of rows with fresh masks per sample.

    The solver of every estimator unless it chooses another in its ``_solver`` hook (the
    linear-Gaussian estimators may train from moments: ``skmpt.estimators._moments``). A solver
    prepares the data (:meth:`prepare`), may offer a start computed from them (:meth:`start`),
    sizes a step for the thread count (:meth:`step_size`), trains (:meth:`fit`, through
    :meth:`Trainer.train`) and makes ``partial_fit``'s calls (:meth:`stream_groups`,
    :meth:`stream_step`).
    """

    def prepare(self, X, observed, weights, likelihood):
        """:class:`TrainingData` of the validated tensor ``X`` (its ``observed`` entries, its
        ``weights``): the rows standardised to the units of :func:`standardization`."""
        center, scale = standardization(X, likelihood, observed)
        return TrainingData(fill_missing((X - center) / scale, observed), observed, weights, (center, scale), X.shape)

    def start(self, data, n_components):
        """A module computed from ``data`` near the optimum, or None: the estimator builds its own."""
        return None

    def step_size(self, params, shape, groups=None):
        """About the numbers one step on data of ``shape`` handles (rows of a mini-batch times masks
        times features), with the estimator's ``params`` (``batch_size``, ``n_masks``), which
        :func:`fit_threads` sizes; ``groups``: the moment groups a solver trains from (None: none)."""
        n_samples, n_features = shape
        return resolve_batch_size(params.batch_size, n_samples) * params.n_masks * n_features

    def fit(self, trainer, module, data, generator, log_jacobian):
        """Train ``module`` on ``data``'s rows; ``(n_epochs, converged)``.

        An epoch is one pass over the rows or ``max_steps_per_epoch`` mini-batches of a stream of
        shuffled passes, whichever is fewer; the stopping rule compares epochs on samples, masks
        and noise drawn once (:meth:`Trainer.stopping_sample`).
        """
        X, observed = data.X, data.observed
        stopping = trainer.stopping_sample(X, generator, observed)
        n_batches = math.ceil(X.shape[0] / trainer.resolved_batch_size(X.shape[0]))
        many = n_batches > trainer.max_steps_per_epoch
        stream = trainer.batch_stream(X.shape[0], generator, X.device) if many else None

        def epoch(optimizer):
            batches = None if stream is None else itertools.islice(stream, trainer.max_steps_per_epoch)
            return trainer.run_epoch(X, optimizer, generator, observed, batches)

        def mean_of(function):
            def mean():
                with torch.no_grad():
                    values = function(X, observed=observed)
                    values = values if trainer.sample_weight is None else values * trainer.sample_weight
                    return float(values.mean(dtype=torch.float64))
            return mean

        return trainer.train(module, epoch, lambda: trainer.stopping_objective(*stopping), log_jacobian,
                             None if trainer.monitor is None else mean_of(trainer.monitor),
                             None if trainer.exact is None else mean_of(trainer.exact))

    def stream_groups(self, X, observed, weights):
        """What ``partial_fit``'s first chunk (standardised rows ``X``) trains from beside its rows:
        None, rows alone."""
        return None

    def stream_step(self, trainer, module, X, observed, weights, state, generator, first):
        """One ``partial_fit`` call on the standardised chunk ``X`` (:meth:`Trainer.stream_step`);
        ``(objective, stopping objective, step size)``."""
        objective, progress = trainer.stream_step(module, X, state, generator, observed)
        return objective, progress, state.optimizer["learning_rate"]


def _rows(observed, rows):    return None if observed is None else observed[rows]
