"""Training from the data's moments: the solver of the linear-Gaussian estimators.

For a mask shared by all rows, ``sum_i log p(x_ij | x_ir)`` of a Gaussian model is a quadratic form in
``x_i``, so the sum over rows needs only the rows' weighted mean and scatter matrix (per pattern of
observed entries when rows have holes). After one pass over the data, an MPT step over shared masks
costs what the quadratic-form sweep costs, whatever the number of rows. Per-sample masks and shared
masks have the same expectation over masks, so the optimum is the mini-batches' own.

:class:`MomentSolver` is a :class:`~skmpt.estimators._trainer.MiniBatchSolver` that prepares moment
groups (:func:`moment_groups`) instead of rows where it can, trains on them through the trainer's one
epoch loop, and makes ``partial_fit`` add each chunk's moments to those before; rows it cannot group
(rare patterns of observed entries) train by mini-batches beside them (:class:`RowPart`), and data
with no frequent pattern train by rows alone. :func:`choose_solver` reads the ``solver`` parameter.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from .. import objectives
from ._dask import merge_pattern_moments, pattern_moments_of_chunk, pattern_of_key, reduce_chunks
from ._data import observed_units, scale_limits
from ._trainer import MiniBatchSolver, TrainingData

__all__ = [
    "MAX_MOMENT_GROUPS",
    "MOMENTS_MIN_SAMPLES",
    "MOMENT_GROUP_MIN_SAMPLES",
    "MomentGroup",
    "MomentSolver",
    "RowPart",
    "choose_solver",
    "frequent_patterns",
    "moment_groups",
    "moment_standardization",
]

#: With ``solver="auto"``, ``partial_fit`` trains from moments from a first chunk of this many rows on.
MOMENTS_MIN_SAMPLES = 1000
#: With ``solver="auto"`` on incomplete data, a pattern of observed entries goes through its moments
#: when this many rows share it, for the ``MAX_MOMENT_GROUPS`` most frequent: a group's step costs the
#: same whatever its rows, and each group adds one to every step.
MOMENT_GROUP_MIN_SAMPLES = 100
MAX_MOMENT_GROUPS = 10


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


def moment_standardization(moments):
    """:func:`~skmpt.estimators._data.standardization`'s centre and scale from the
    :class:`~skmpt.objectives.Moments` of complete data, and the moments of the standardised data:
    ``((center, scale), moments)``; None when the spread is zero or its square leaves the range the
    dtype holds (then ``standardization``, which divides by the largest deviation before squaring,
    decides)."""
    covariance = moments.covariance
    scale = (covariance.diagonal().sum() / covariance.shape[0]).sqrt()
    low, high = scale_limits(covariance.dtype)
    if not low <= float(scale) <= high:
        return None
    standardized = objectives.Moments(moments.weight, torch.zeros_like(moments.mean), covariance / scale.square())
    return (moments.mean, scale), standardized


def moment_groups(X, observed, weights):
    """The training samples as :class:`MomentGroup`: one group of every sample for complete data,
    one per pattern of observed entries otherwise.

    ``X`` holds the (standardised) training rows, ``observed`` their observed entries (None
    when all are), ``weights`` their weights of mean one (None: equal). Each group's moments
    are weighted; its share is its weight over the total.
    """
    if observed is None:
        return [MomentGroup(objectives.Moments.from_samples(X, weights))]
    patterns, labels = torch.unique(observed, dim=0, return_inverse=True)
    total = float(X.shape[0]) if weights is None else float(weights.sum())
    groups = []
    for index, pattern in enumerate(patterns):
        rows = torch.nonzero(labels == index).flatten()
        part = None if weights is None else weights[rows]
        moments = objectives.Moments.from_samples(X[rows], part)
        groups.append(MomentGroup(moments, pattern, float(moments.weight) / total))
    return groups


def _merge_groups(groups, new):
    """The moment groups of two sets of samples: the moments of a pattern in both are added,
    and every group's share is its weight over the new total."""
    merged = {None if g.observed is None else tuple(g.observed.tolist()): g for g in groups}
    for group in new:
        key = None if group.observed is None else tuple(group.observed.tolist())
        old = merged.get(key)
        merged[key] = group if old is None else MomentGroup(old.moments + group.moments, group.observed)
    total = sum(float(g.moments.weight) for g in merged.values())
    return [MomentGroup(g.moments, g.observed, float(g.moments.weight) / total) for g in merged.values()]


def frequent_patterns(counts):
    """Which patterns of observed entries ``"auto"`` trains from their moments: the indices of the
    ``MAX_MOMENT_GROUPS`` largest ``counts`` (a tensor of rows per pattern, in ``torch.unique``'s
    order) of at least ``MOMENT_GROUP_MIN_SAMPLES`` rows."""
    frequent = counts.argsort(descending=True, stable=True)[:MAX_MOMENT_GROUPS]
    return frequent[counts[frequent] >= MOMENT_GROUP_MIN_SAMPLES]


def choose_solver(solver, start=None):
    """The solver the ``solver`` parameter names: :class:`~skmpt.estimators._trainer.MiniBatchSolver`
    for ``"minibatch"``, else a :class:`MomentSolver` (``"moments"`` or ``"auto"``) with the ``start``
    it offers (``start(groups, n_components)`` -> a module or None)."""
    return MiniBatchSolver() if solver == "minibatch" else MomentSolver(solver, start)


@dataclass
class MomentSolver(MiniBatchSolver):
    """Train a Gaussian model from the moments of its training samples, rows where they cannot be grouped.

    Parameters
    ----------
    mode : {"auto", "moments"}
        ``"moments"``: a group per pattern of observed entries, and ``partial_fit`` from moments.
        ``"auto"``: complete data from their moments; on incomplete data a group for each of the
        ``MAX_MOMENT_GROUPS`` most frequent patterns shared by ``MOMENT_GROUP_MIN_SAMPLES`` rows or
        more and the other rows by mini-batches (all rows when no pattern is that frequent);
        ``partial_fit`` from moments from a first chunk of ``MOMENTS_MIN_SAMPLES`` rows on.
    start_from : callable or None
        ``start_from(groups, n_components)`` -> a module near the optimum (PCA's solution) or None.
    """

    mode: str = "auto"
    start_from: object = None

    # A step draws this many masks per mask of n_masks, shared by the samples of a group (the data's
    # noise is gone, only the masks' is left); the stopping rule's masks, drawn once, are this many more.
    masks_per_step = 16
    stopping_factor = 1

    # ------------------------------------------------------------------ the data
    def prepare(self, X, observed, weights, likelihood):
        """Complete data as the one moment group of the standardised data, the units from the moments
        (no pass over the data beyond theirs); otherwise the rows, and the groups of :meth:`groups`."""
        if observed is None and likelihood == "gaussian":
            moments = objectives.Moments.from_samples(X, weights)
            standardized = moment_standardization(moments)
            if standardized is not None:
                units, moments = standardized
                return TrainingData(None, None, weights, units, X.shape, [MomentGroup(moments)])
        data = super().prepare(X, observed, weights, likelihood)
        data.groups, data.part = self.groups(data.X, observed, weights)
        return data

    def groups(self, X, observed, weights):
        """``(groups, part)`` of the standardised rows ``X``: the moment groups and the :class:`RowPart`
        of the rows trained by mini-batches beside them (None when there are none); ``(None, None)``
        when ``"auto"`` finds no frequent pattern of observed entries."""
        if observed is None or self.mode == "moments":
            return moment_groups(X, observed, weights), None
        _, labels, counts = torch.unique(observed, dim=0, return_inverse=True, return_counts=True)
        frequent = frequent_patterns(counts)
        if len(frequent) == 0:
            return None, None
        grouped = torch.isin(labels, frequent)
        total = float(X.shape[0]) if weights is None else float(weights.sum())
        parts = [None if weights is None else weights[rows] for rows in (grouped, ~grouped)]
        groups = moment_groups(X[grouped], observed[grouped], parts[0])
        in_groups = float(grouped.sum()) if weights is None else float(parts[0].sum())
        groups = [MomentGroup(g.moments, g.observed, g.share * in_groups / total) for g in groups]
        if bool(grouped.all()):
            return groups, None
        rest = None if weights is None else parts[1] / parts[1].mean()
        return groups, RowPart(X[~grouped], observed[~grouped], rest, 1.0 - in_groups / total)

    def prepare_chunks(self, X, summary, offset, dtype, device, weights=None):
        """:meth:`prepare` for a dask array ``X`` whose first pass is the
        :class:`~skmpt.estimators._dask.ChunkSummary` ``summary``, less ``offset`` (float64, per feature),
        in ``dtype`` on ``device``, with the ``weights`` of its rows (a dask array of its row chunks, None:
        equal): ``(data, moments, log_jacobian, rows)``, with the moments that choose a data-driven
        ``n_components`` (of the rows in training units, missing entries at zero; weighted, about their
        weighted mean, as :func:`~skmpt.estimators._linear_gaussian.choose_n_components` takes them) and
        rows that stand for the data where a random start reads them (their spread).

        Complete data need no second pass: their moments are the summary's. Incomplete data take one:
        the moments of the patterns :meth:`groups` would group, the other rows (gathered here) and
        the Gram matrix in the training units (``observed_units`` of the rows of positive weight, as
        :meth:`prepare` standardises them)."""
        n_features = len(summary.count)
        seen = summary if summary.positive is None else summary.positive  # the rows that count
        n_samples = seen.n_samples

        def tensor(values):
            return torch.as_tensor(np.asarray(values, dtype=np.float64), dtype=dtype, device=device)

        if summary.moments is not None:
            n, mean, scatter = summary.moments
            moments = objectives.Moments(tensor(n), tensor(mean - offset), tensor(scatter / n))
            standardized = moment_standardization(moments)
            if standardized is None:  # no spread (else observed_units refuses it): the units are (mean, 1)
                units = observed_units(summary.count, mean - offset, summary.m2, dtype, device)
                standardized = units, objectives.Moments(moments.weight, torch.zeros_like(moments.mean),
                                                         moments.covariance / units[1].square())
            units, standardized_moments = standardized
            data = TrainingData(None, None, None, units, (n_samples, n_features), [MomentGroup(standardized_moments)])
            return data, moments, -n_features * float(units[1].log()), standardized_moments.mean[None]
        keys = sorted(seen.patterns)
        counts = torch.tensor([seen.patterns[key] for key in keys])
        chosen = range(len(keys)) if self.mode == "moments" else frequent_patterns(counts).tolist()
        center, scale = observed_units(seen.count, seen.mean - offset, seen.m2, dtype, device)
        center64, scale64 = center.double().cpu().numpy() + offset, float(scale)
        second = reduce_chunks(X, pattern_moments_of_chunk, merge_pattern_moments,
                               {keys[i] for i in chosen}, center64, scale64, weights=weights)
        units = (center, scale)
        gram = tensor(second.gram / n_samples)
        # Two rows with the spread of the rows in memory (missing entries at zero: the root of the Gram
        # matrix's diagonal), as a random start reads it.
        start = torch.stack([gram.diagonal().sqrt(), -gram.diagonal().sqrt()])
        if second.weighted is None:
            total, choice = n_samples, objectives.Moments(tensor(n_samples), torch.zeros_like(center), gram)
        else:
            total, weighted_sum, weighted_gram = second.weighted
            mean = weighted_sum / total
            choice = objectives.Moments(tensor(total), tensor(mean),
                                        tensor(weighted_gram / total - np.outer(mean, mean)))
        jacobian = -float(np.sum(seen.count)) / n_samples * float(scale.log())
        observed = torch.as_tensor(~np.isnan(second.rows), device=device)
        rows = tensor(np.where(np.isnan(second.rows), 0.0, (second.rows - center64) / scale64))
        row_weights = None
        if second.row_weights is not None and len(rows):  # of mean one over the rows, as training_rows scales them
            row_weights = tensor(second.row_weights / second.row_weights.mean())
        if not second.groups:  # no frequent pattern: every row trains by mini-batches
            return TrainingData(rows, observed, row_weights, units, (n_samples, n_features)), choice, jacobian, rows
        groups = []
        for key in sorted(second.groups):
            n, mean, scatter = second.groups[key]
            pattern = pattern_of_key(key, n_features)
            moments = objectives.Moments(tensor(n), tensor(np.where(pattern, (mean - center64) / scale64, 0.0)),
                                         tensor(scatter / n / scale64**2))
            groups.append(MomentGroup(moments, torch.as_tensor(pattern, device=device), n / total))
        in_groups = sum(second.groups[key][0] for key in second.groups)
        part = None if len(rows) == 0 else RowPart(rows, observed, row_weights, 1.0 - in_groups / total)
        data = TrainingData(None, None, None, units, (n_samples, n_features), groups, part)
        return data, choice, jacobian, start

    def start(self, groups, n_components):
        """``start_from``'s module for the moment ``groups`` (None without groups or ``start_from``)."""
        return None if groups is None or self.start_from is None else self.start_from(groups, n_components)

    def step_size(self, params, shape, groups=None):
        """From the moment ``groups``: masks times features squared (rows without groups). Not times the
        groups: each group's objective is its own operations, one after the other, and threads share out
        an operation (six groups at D = 50 took 36 times the CPU on two threads as on one)."""
        if groups is None:
            return super().step_size(params, shape)
        return params.n_masks * self.masks_per_step * shape[1] ** 2

    # ------------------------------------------------------------------ training
    def fit(self, trainer, module, data, generator, log_jacobian):
        """Train ``module`` from ``data``'s moment groups (and rows beside them); ``(n_steps, converged)``."""
        if data.groups is None:
            return super().fit(trainer, module, data, generator, log_jacobian)
        return self._fit_groups(trainer, module, data.groups, data.part, generator, log_jacobian)

    def _fit_groups(self, trainer, module, groups, part, generator, log_jacobian):
        """Each step (an "epoch" of ``history``) draws fresh masks shared by the samples of each group,
        so its cost does not depend on the number of samples; the stopping rule and the step-size
        schedule are the trainer's, on masks drawn once. A :class:`RowPart` ``part`` adds a mini-batch
        of its samples to each step, and a fixed sample of them to the stopping rule's objective: one
        objective over every sample, of the same expectation. An epoch is then one pass over the
        part's samples or ``max_steps_per_epoch`` steps."""
        device = groups[0].moments.mean.device
        n_stopping = trainer.n_masks * self.masks_per_step * self.stopping_factor
        stopping = [self._group_masks(trainer, group, n_stopping, generator, device) for group in groups]
        rows, stopping_rows, n_steps = None, None, 1
        if part is not None:  # an epoch of the rows' mini-batches: one pass or max_steps_per_epoch steps
            n_part = part.X.shape[0]
            rows = (part, trainer.batch_stream(n_part, generator, device))
            n_steps = min(math.ceil(n_part / trainer.resolved_batch_size(n_part)), trainer.max_steps_per_epoch)
            stopping_rows = self._part_rows(trainer, part, trainer.monitor_rows(n_part, generator, device), generator)

        def epoch(optimizer):
            steps = (self._step(trainer, module, groups, optimizer, generator, rows) for _ in range(n_steps))
            return sum(steps) / n_steps

        def stopping_objective():
            with torch.no_grad(), trainer.diverging():
                return float(self._objective(trainer, module, groups, stopping, stopping_rows))

        def monitor():
            with torch.no_grad(), trainer.diverging():
                return self._lml(trainer, module, groups, part)

        return trainer.train(module, epoch, stopping_objective, log_jacobian,
                             None if trainer.monitor is None else monitor)

    def _group_masks(self, trainer, group, n_masks, generator, device):
        """``n_masks`` masks shared by the samples of ``group``, among its observed entries."""
        n_features = group.moments.mean.shape[0]
        if group.observed is None:
            return trainer.draw_masks((n_masks,), n_features, generator, device)
        return trainer.draw_masks((1, n_masks), n_features, generator, device, observed=group.observed[None])[0]

    def _objective(self, trainer, module, groups, masks, rows=None):
        """Mean objective over every training sample: the groups' objectives weighted by their shares,
        plus, with ``rows = (part, samples, masks)``, the :class:`RowPart`'s from those of its samples."""
        objective = sum(
            group.share * objectives.moment_mpt_objective(module, group.moments, part, observed=group.observed)
            for group, part in zip(groups, masks, strict=True)
        )
        return objective if rows is None else objective + rows[0].objective(trainer, *rows[1:])

    def _part_rows(self, trainer, part, samples, generator):
        """``(part, samples, masks)``: fresh masks among the observed entries of ``samples`` of ``part``."""
        masks = trainer.masks((len(samples), trainer.n_masks), part.X.shape[1], generator, part.X.device,
                              part.observed[samples])
        return part, samples, masks

    def _step(self, trainer, module, groups, optimizer, generator, rows=None):
        """One step on the groups' moments with fresh shared masks (and on a mini-batch of the
        :class:`RowPart` ``rows = (part, batches)``); the objective before it."""
        device = groups[0].moments.mean.device
        n_masks = trainer.n_masks * self.masks_per_step
        masks = [self._group_masks(trainer, group, n_masks, generator, device) for group in groups]
        batch = None if rows is None else self._part_rows(trainer, rows[0], next(rows[1]), generator)
        optimizer.zero_grad()
        with trainer.diverging():
            objective = self._objective(trainer, module, groups, masks, batch)
            (-objective).backward()
        optimizer.step()
        return float(objective.detach())

    def _lml(self, trainer, module, groups, part):
        """Mean log-marginal likelihood over every training sample, of the groups from their moments
        and of the :class:`RowPart` ``part`` (None: none) from its rows."""
        lml = sum(
            group.share * module.moment_log_marginal(group.moments.mean, group.moments.covariance,
                                                     observed=group.observed)
            for group in groups
        )
        if part is not None:
            values = trainer.monitor(part.X, observed=part.observed)
            lml = lml + part.share * (values if part.weights is None else values * part.weights).mean()
        return float(lml)

    # ------------------------------------------------------------------ partial_fit
    def stream_groups(self, X, observed, weights):
        """The first chunk's moment groups when ``partial_fit`` trains from moments (every row in a
        group, and ``"moments"`` or a chunk of ``MOMENTS_MIN_SAMPLES`` rows): each call then trains
        to convergence on the moments of every chunk so far, which costs more than a call's one pass
        of mini-batches over smaller chunks; else None."""
        groups, part = self.groups(X, observed, weights)
        streams = self.mode == "moments" or X.shape[0] >= MOMENTS_MIN_SAMPLES
        return groups if part is None and streams else None

    def stream_step(self, trainer, module, X, observed, weights, state, generator, first):
        """One ``partial_fit`` call from moments: the chunk's moments added to those of the chunks
        before it, then training on all of them until the stopping rule is met (so the model after
        the last call is the model ``fit`` would train on every chunk); rows when the first chunk
        did not stream from moments."""
        if state.groups is None:
            return super().stream_step(trainer, module, X, observed, weights, state, generator, first)
        if not first:
            state.groups = _merge_groups(state.groups, moment_groups(X, observed, weights))
        if first and state.groups[0].observed is None:  # near the optimum already: smaller first steps
            trainer.first_step_factor = trainer.near_start_factor
        history, trainer.history = trainer.history, []
        self._fit_groups(trainer, module, state.groups, None, generator, 0.0)
        last, trainer.history = trainer.history[-1], history
        return last["objective"], last["stopping_objective"], last["learning_rate"]
