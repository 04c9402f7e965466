"""The optimiser loop of the array estimators, as an object: epochs of shuffled mini-batches with
fresh masks, the stopping rule, and the state ``partial_fit`` continues from call to call."""

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field

import torch

from .._utils import seeded

__all__ = ["StreamState", "Trainer", "training_mode"]

logger = logging.getLogger("skmpt")


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


@dataclass
class StreamState:
    """What ``partial_fit`` carries from one call to the next.

    The training units (``center``, ``scale``) and the stopping rule's fixed samples come
    from the first chunk; the optimiser's and the step-size schedule's states continue.
    """

    center: torch.Tensor
    scale: torch.Tensor
    seed: int
    dtype: torch.dtype
    calls: int = 0
    learning_rate: float = None
    optimizer: dict = None
    scheduler: dict = None
    stopping: tuple = None


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

    # Step-size schedule (torch's ReduceLROnPlateau): divide by this factor after
    # n_iter_no_change epochs without progress; the stall after this many cuts ends training.
    lr_cut_factor = 2.0
    n_lr_cuts = 6
    # The stopping rule's objective is computed on this fraction of the training samples
    # (at least monitor_min_samples): forward passes only, about a tenth of an epoch.
    monitor_fraction = 0.25
    monitor_min_samples = 100

    def optimizer(self, module):
        """Adam; its fused kernel (one per parameter, the same steps up to rounding) on the CPU
        and CUDA, where torch has it: the plain one costs more than a small model's step."""
        parameters = list(module.parameters())
        fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in parameters)
        return torch.optim.Adam(parameters, lr=self.learning_rate, fused=fused or None)

    def scheduler(self, optimizer):
        """Step-size schedule (torch's ``ReduceLROnPlateau``) on the stopping objective: divide
        by ``lr_cut_factor`` after ``n_iter_no_change`` epochs (or calls) without progress."""
        return torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer,
            mode="max",
            factor=1 / self.lr_cut_factor,
            patience=self.n_iter_no_change - 1,
            threshold=self.tol,
            threshold_mode="abs",
        )

    def resolved_batch_size(self, n_samples):
        return min(200, n_samples) if self.batch_size == "auto" else min(self.batch_size, n_samples)

    def run_epoch(self, X, optimizer, generator, observed=None):
        """One pass over ``X`` in shuffled mini-batches with fresh masks; the mean objective.

        With ``observed`` (entries not missing), masks lie among each sample's observed entries.
        """
        n_samples, n_features = X.shape
        total = X.new_zeros((), dtype=torch.float64)  # accumulated in float64 whatever the dtype
        order = torch.randperm(n_samples, generator=generator).to(X.device)
        for batch in order.split(self.resolved_batch_size(n_samples)):
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
        return float(total) / n_samples

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

    def stopping_sample(self, X, generator, observed=None):
        """Samples, masks and a noise seed drawn once, on which the stopping rule compares epochs.

        Common random numbers: the objective on fixed masks and fixed noise changes only with
        the parameters, so mask noise (large for small masks: one token scaled by D) cannot
        pass for a lack of progress. Training itself draws fresh masks every step.
        """
        n_samples, n_features = X.shape
        size = min(n_samples, max(self.monitor_min_samples, math.ceil(self.monitor_fraction * n_samples)))
        rows = torch.randperm(n_samples, generator=generator)[:size].to(X.device)
        seen = _rows(observed, rows)
        masks = self._masks((size, self.n_masks), n_features, generator, X.device, seen)
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

    def fit(self, module, X, generator, log_jacobian, observed=None):
        """Train ``module`` on (standardised) ``X``; ``(n_epochs, converged)``.

        ``observed`` (a boolean tensor of ``X``'s shape, or None) marks the entries that
        were observed; the objective, the masks and the monitor see only those.

        Adam with torch's ``ReduceLROnPlateau`` on the stopping objective (as scikit-learn's
        ``MLPRegressor`` with ``learning_rate="adaptive"``): a stall of ``n_iter_no_change``
        epochs means the step size, not the model, limits progress, so it is cut; the stall
        after ``n_lr_cuts`` cuts is convergence. Records go to ``history``; log-densities are
        shifted by ``log_jacobian`` to the units of the original data.
        """
        optimizer = self.optimizer(module)
        scheduler = self.scheduler(optimizer)
        stopping = self.stopping_sample(X, generator, observed)
        cuts = 0
        for epoch in range(1, self.max_epochs + 1):
            start = time.perf_counter()
            learning_rate = optimizer.param_groups[0]["lr"]
            record = {"epoch": epoch, "objective": self.run_epoch(X, optimizer, generator, observed) + log_jacobian}
            record["stopping_objective"] = self.stopping_objective(*stopping) + log_jacobian
            if self.monitor is not None and epoch % self.monitor_every == 0:
                with torch.no_grad():
                    lml = self.monitor(X, observed=observed)
                    lml = lml if self.sample_weight is None else lml * self.sample_weight
                    record["lml"] = float(lml.mean(dtype=torch.float64)) + log_jacobian
            record["learning_rate"] = learning_rate
            self.record(record, start)
            progress = record["stopping_objective"]
            self._check_finite(progress, epoch)
            scheduler.step(progress)
            cuts += optimizer.param_groups[0]["lr"] < learning_rate
            if cuts > self.n_lr_cuts:
                return epoch, True
        return self.max_epochs, False

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
        scheduler = self.scheduler(optimizer)
        if state.optimizer is not None:
            optimizer.load_state_dict(state.optimizer)
            if state.learning_rate == self.learning_rate:
                scheduler.load_state_dict(state.scheduler)
            else:
                for group in optimizer.param_groups:
                    group["lr"] = self.learning_rate
        objective = self.run_epoch(X, optimizer, generator, observed)
        if state.stopping is None:
            state.stopping = self.stopping_sample(X, generator, observed)
        progress = self.stopping_objective(*state.stopping)
        self._check_finite(progress, state.calls + 1)
        scheduler.step(progress)
        state.optimizer, state.scheduler = optimizer.state_dict(), scheduler.state_dict()
        state.learning_rate, state.calls = self.learning_rate, state.calls + 1
        return objective, progress


def _rows(observed, rows):
    return None if observed is None else observed[rows]
