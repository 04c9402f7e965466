"""The optimiser loop of the array estimators, as an object: epochs of shuffled mini-batches with
fresh masks, the stopping rule, and the state ``partial_fit`` continues from call to call."""

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

__all__ = [
    "AdamOnPlateau", "MomentGroup", "RowPart", "StreamState", "Trainer", "fit_threads", "intra_op_threads",
    "training_mode",
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
    ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` set): a user's own setting wins."""
    if torch.get_num_threads() != _THREADS_AT_IMPORT or any(
        os.environ.get(name) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
    ):
        return None
    return 1 if step_size <= SMALL_STEP else None


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

    The training units (``center``, ``scale``) and the stopping rule's fixed samples come
    from the first chunk; the optimiser's and the step-size schedule's states continue. When
    training runs from moments, ``groups`` holds the moments of every chunk so far.
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


@dataclass
class MomentGroup:
    """Samples that share a pattern of observed entries, summarised by their moments.

    ``moments`` is a :class:`skmpt.objectives.Moments`; ``observed`` the pattern (a boolean
    tensor of shape ``(n_features,)``, None when every entry is observed); ``share`` the
    group's weight over the total weight of the training samples.
    """

    moments: object
    observed: object = None
    share: float = 1.0


@dataclass
class RowPart:
    """Samples trained by mini-batches beside moment groups (their pattern of observed entries is rare).

    ``X`` holds their (standardised) rows, ``observed`` their observed entries, ``weights`` their
    weights scaled to mean one over them (None: equal), ``share`` their weight over the total
    weight of the training samples.
    """

    X: torch.Tensor
    observed: torch.Tensor
    weights: object = None
    share: float = 1.0

    def objective(self, trainer, rows, masks):
        """The part's share of the mean objective over every training sample, from the samples ``rows``."""
        objective = trainer.objective(self.X[rows], masks, observed=self.observed[rows])
        if self.weights is not None:
            objective = objective * self.weights[rows]
        return self.share * objective.mean()


@dataclass
class Trainer:
    """Adam on a per-sample training objective (to maximise), with the estimators' stopping rule.

    Parameters
    ----------
    objective : callable
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
    moment_objective : callable or None
        ``moment_objective(moments, masks, observed=)`` -> the mean objective over samples
        summarised by their moments, for masks shared by them (:meth:`fit_moments`).
    moment_monitor : callable or None
        ``moment_monitor(moments, observed=)`` -> their mean log-marginal likelihood.
    first_step_factor : float
        Adam starts at ``learning_rate`` times this (``near_start_factor`` from a start computed
        from the data); errors name ``learning_rate`` itself.
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
    moment_objective: object = None
    moment_monitor: object = None
    first_step_factor: float = 1.0
    best: tuple = None
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
    # Training from moments: a step draws this many masks per mask of n_masks, shared by the
    # samples of a group (the data's noise is gone, only the masks' is left); the stopping
    # rule's masks, drawn once, are this many more.
    moment_masks_per_step = 16
    moment_stopping_factor = 1
    # A start computed from the data (PCA's solution) is near the optimum: Adam's first steps,
    # of about the step size in every parameter whatever the gradient, start this much smaller.
    near_start_factor = 0.1

    def optimizer(self, module):
        """Adam on ``module``'s parameters with the step-size schedule of torch's ``ReduceLROnPlateau``
        on the stopping objective (:class:`AdamOnPlateau`): the step size is divided by
        ``lr_cut_factor`` after ``n_iter_no_change`` epochs (or calls) without progress."""
        return AdamOnPlateau(module.parameters(), self.learning_rate * self.first_step_factor,
                             patience=self.n_iter_no_change - 1, factor=1 / self.lr_cut_factor, threshold=self.tol)

    def resolved_batch_size(self, n_samples):
        return min(200, n_samples) if self.batch_size == "auto" else min(self.batch_size, n_samples)

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
            masks = self._masks((len(batch), self.n_masks), n_features, generator, X.device, seen)
            optimizer.zero_grad()
            with self._diverging():
                objective = self.objective(X[batch], masks, observed=seen)
                if self.sample_weight is not None:
                    objective = objective * self.sample_weight[batch]
                (-objective.mean()).backward()
            optimizer.step()
            total += objective.detach().sum(dtype=torch.float64)
            n_seen += len(batch)
        return float(total) / n_seen

    @contextlib.contextmanager
    def _diverging(self):
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

    def _masks(self, shape, n_features, generator, device, observed=None):
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
        masks = self._masks((len(rows), self.n_masks), n_features, generator, X.device, seen)
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
                with self._diverging():
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

    def _end(self, module, progress, epoch, converged):
        """``(epoch, converged)``; a run that ended more than ``downhill_factor * tol`` below where
        it started (a start already at the optimum ends a little below it, by the steps' noise) has
        not converged, and ``downhill`` records ``(start, end, epoch of the parameters kept)``. If
        the stopping rule had ended it, its parameters go back to the best it saw (a run stopped
        by ``max_epochs`` keeps its last: it was cut short, not settled)."""
        start = self.start_progress
        if progress >= start - self.downhill_factor * self.tol:
            return epoch, converged
        kept = epoch
        if converged:
            _, state, kept = self.best
            module.load_state_dict(state)
        self.downhill = (start, progress, kept)
        return epoch, False

    def fit(self, module, X, generator, log_jacobian, observed=None):
        """Train ``module`` on (standardised) ``X``; ``(n_epochs, converged)``.

        ``observed`` (a boolean tensor of ``X``'s shape, or None) marks the entries that
        were observed; the objective, the masks and the monitor see only those.

        Adam with the schedule of torch's ``ReduceLROnPlateau`` (:class:`AdamOnPlateau`) on the
        stopping objective (as scikit-learn's ``MLPRegressor`` with ``learning_rate="adaptive"``): a
        stall of ``n_iter_no_change`` epochs means the step size, not the model, limits progress, so
        it is cut; the stall after ``n_lr_cuts`` cuts is convergence. Records go to ``history``;
        log-densities are shifted by ``log_jacobian`` to the units of the original data. A run whose
        stopping objective ends well below its start's has not converged (see :meth:`_end`).
        """
        optimizer = self.optimizer(module)
        stopping = self.stopping_sample(X, generator, observed)
        self.start_progress = self.stopping_objective(*stopping) + log_jacobian
        self._keep_best(module, self.start_progress, 0)
        cuts = self.start_cuts()
        n_batches = math.ceil(X.shape[0] / self.resolved_batch_size(X.shape[0]))
        stream = self.batch_stream(X.shape[0], generator, X.device) if n_batches > self.max_steps_per_epoch else None
        for epoch in range(1, self.max_epochs + 1):
            start = time.perf_counter()
            learning_rate = optimizer.learning_rate
            batches = None if stream is None else itertools.islice(stream, self.max_steps_per_epoch)
            record = {"epoch": epoch, "objective": self.run_epoch(X, optimizer, generator, observed, batches)}
            record["objective"] += log_jacobian
            record["stopping_objective"] = self.stopping_objective(*stopping) + log_jacobian
            if self.monitor is not None and epoch % self.monitor_every == 0:
                with torch.no_grad():
                    lml = self.monitor(X, observed=observed)
                    lml = lml if self.sample_weight is None else lml * self.sample_weight
                    record["lml"] = float(lml.mean(dtype=torch.float64)) + log_jacobian
            record["learning_rate"] = learning_rate
            progress, cuts = self._epoch_end(module, record, start, epoch, optimizer, cuts)
            if cuts > self.n_lr_cuts:
                return self._end(module, progress, epoch, True)
        return self._end(module, progress, self.max_epochs, False)

    def _group_masks(self, group, n_masks, generator, device):
        """``n_masks`` masks shared by the samples of ``group``, among its observed entries."""
        n_features = group.moments.mean.shape[0]
        if group.observed is None:
            return self.draw_masks((n_masks,), n_features, generator, device)
        return self.draw_masks((1, n_masks), n_features, generator, device, observed=group.observed[None])[0]

    def _moment_objective(self, groups, masks, rows=None):
        """Mean objective over every training sample: the groups' objectives weighted by their shares,
        plus, with ``rows = (part, samples, masks)``, the :class:`RowPart`'s from those of its samples."""
        objective = sum(
            group.share * self.moment_objective(group.moments, part, observed=group.observed)
            for group, part in zip(groups, masks, strict=True)
        )
        return objective if rows is None else objective + rows[0].objective(self, *rows[1:])

    def _part_rows(self, part, samples, generator):
        """``(part, samples, masks)``: fresh masks among the observed entries of ``samples`` of ``part``."""
        masks = self._masks((len(samples), self.n_masks), part.X.shape[1], generator, part.X.device,
                            part.observed[samples])
        return part, samples, masks

    def moment_epoch(self, groups, optimizer, generator, rows=None):
        """One step on the groups' moments with fresh shared masks (and on a mini-batch of the
        :class:`RowPart` ``rows = (part, batches)``); the objective before it."""
        device = groups[0].moments.mean.device
        n_masks = self.n_masks * self.moment_masks_per_step
        masks = [self._group_masks(group, n_masks, generator, device) for group in groups]
        batch = None if rows is None else self._part_rows(rows[0], next(rows[1]), generator)
        optimizer.zero_grad()
        with self._diverging():
            objective = self._moment_objective(groups, masks, batch)
            (-objective).backward()
        optimizer.step()
        return float(objective.detach())

    def fit_moments(self, module, groups, generator, log_jacobian, part=None):
        """Train ``module`` from the moments of its (standardised) training samples; ``(n_steps, converged)``.

        ``groups`` are :class:`MomentGroup`. Each step (an "epoch" of ``history``) draws fresh
        masks shared by the samples of each group, so its cost does not depend on the number of
        samples; the stopping rule and the step-size schedule are :meth:`fit`'s, on masks
        drawn once. A :class:`RowPart` ``part`` (samples of rare patterns of observed entries)
        adds a mini-batch of its samples to each step, and a fixed sample of them to the stopping
        rule's objective: one objective over every sample, of the same expectation. An epoch is
        then :meth:`fit`'s: one pass over the part's samples or ``max_steps_per_epoch`` steps.
        """
        optimizer = self.optimizer(module)
        device = groups[0].moments.mean.device
        n_stopping = self.n_masks * self.moment_masks_per_step * self.moment_stopping_factor
        stopping = [self._group_masks(group, n_stopping, generator, device) for group in groups]
        rows, stopping_rows, n_steps = None, None, 1
        if part is not None:  # an epoch of the rows' mini-batches: one pass or max_steps_per_epoch steps
            n_part = part.X.shape[0]
            rows = (part, self.batch_stream(n_part, generator, device))
            n_steps = min(math.ceil(n_part / self.resolved_batch_size(n_part)), self.max_steps_per_epoch)
            stopping_rows = self._part_rows(part, self.monitor_rows(n_part, generator, device), generator)
        with torch.no_grad(), self._diverging():
            self.start_progress = float(self._moment_objective(groups, stopping, stopping_rows)) + log_jacobian
        self._keep_best(module, self.start_progress, 0)
        cuts = self.start_cuts()
        for epoch in range(1, self.max_epochs + 1):
            start = time.perf_counter()
            learning_rate = optimizer.learning_rate
            objective = sum(self.moment_epoch(groups, optimizer, generator, rows) for _ in range(n_steps)) / n_steps
            record = {"epoch": epoch, "objective": objective + log_jacobian}
            with torch.no_grad(), self._diverging():
                value = self._moment_objective(groups, stopping, stopping_rows)
                record["stopping_objective"] = float(value) + log_jacobian
                if self.moment_monitor is not None and epoch % self.monitor_every == 0:
                    record["lml"] = self._moment_lml(groups, part) + log_jacobian
            record["learning_rate"] = learning_rate
            progress, cuts = self._epoch_end(module, record, start, epoch, optimizer, cuts)
            if cuts > self.n_lr_cuts:
                return self._end(module, progress, epoch, True)
        return self._end(module, progress, self.max_epochs, False)

    def _moment_lml(self, groups, part):
        """Mean log-marginal likelihood over every training sample, of the groups from their moments
        and of the :class:`RowPart` ``part`` (None: none) from its rows."""
        lml = sum(group.share * self.moment_monitor(group.moments, observed=group.observed) for group in groups)
        if part is not None:
            values = self.monitor(part.X, observed=part.observed)
            lml = lml + part.share * (values if part.weights is None else values * part.weights).mean()
        return float(lml)

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


def _rows(observed, rows):
    return None if observed is None else observed[rows]
