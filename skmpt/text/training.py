"""Masked pre-training of a runner's predictor (:meth:`MLMCurveScorer.fit` with ``max_steps > 0``).

One loop for one process and for many: under a launcher the model is wrapped in
``DistributedDataParallel``, every rank draws the same global batch of ``batch_size`` texts and
the same masks from the shared generator, and computes the loss of its own share of the texts;
DDP averages the gradients, so a step is the step of one process on the whole batch, to
rounding. A step's forward passes (bounded by the runner's ``max_batch_tokens``) accumulate
gradients, and only the last one synchronises them. Checkpoints hold the model, the optimiser,
the step, the history, the data order and the generators (the masks' and torch's, which
dropout draws from), and what the run was: a fingerprint of the training texts' token ids and
the settings a continuation must share. A run deletes only the checkpoints it wrote itself.
"""

import hashlib
import logging
import math
import os
import time
from numbers import Integral, Real

import numpy as np
import torch
import torch.distributed as dist

from .._validation import Interval, Options, validate_parameters
from ..distributed import (check_checkpoint_dir, current_context, load_checkpoint, save_checkpoint, sync_gradients,
                           wrap_model)
from ..masks import check_generator, mask_size_for_rate, masks_of_sizes
from .loading import hidden_transformers_bars

__all__ = ["MaskedPretraining"]

logger = logging.getLogger("skmpt.text")


class MaskedPretraining:
    """Continued masked pre-training: AdamW on ``(L / M) * sum log p`` (uniform sizes) or a fixed rate.

    Parameters
    ----------
    max_steps : int
        Optimisation steps.
    batch_size : int
        Texts per step, all processes together under a launcher.
    mask_rate : float in (0, 1] or "uniform"
        A fixed rate (``round(rate * L)`` tokens per text) or a uniformly random size in ``1..L``.
    learning_rate : float
    random_state : int, RandomState instance, torch.Generator or None, default=None
        Seeds the data order, the masks and dropout (in a fork of torch's generators).
    checkpoint_every : int or None, default=None
        Save a checkpoint to ``checkpoint_dir`` every this many steps.
    checkpoint_dir : str, path or None, default=None
    resume : bool, default=False
        Continue from the latest checkpoint of ``checkpoint_dir``: the same texts (their token
        ids), ``batch_size``, ``mask_rate``, ``learning_rate``, longest text and number of
        processes, or a ``ValueError`` that says what differs. Without it, a ``checkpoint_dir``
        that holds checkpoints is refused (:meth:`check`).
    verbose : int, default=0
        When > 0, a progress bar on the main rank.

    Examples
    --------
    >>> import torch
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import MaskedLMPredictor, MaskedLMRunner, MaskedPretraining, encode_texts
    >>> texts = load_wordnet_sentences()[:100]
    >>> tokenizer = make_wordpiece_tokenizer(texts, vocab_size=200)
    >>> model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                                    num_attention_heads=2, intermediate_size=32))
    >>> runner = MaskedLMRunner(MaskedLMPredictor(model, tokenizer.mask_token_id), tokenizer, torch.device("cpu"))
    >>> training = MaskedPretraining(max_steps=2, batch_size=8, mask_rate=0.15, learning_rate=1e-3, random_state=0)
    >>> history = training.run(runner, encode_texts(texts, tokenizer, runner.max_length))
    >>> [entry["step"] for entry in history]
    [1, 2]
    """

    def __init__(self, *, max_steps, batch_size, mask_rate, learning_rate, random_state=None, checkpoint_every=None,
                 checkpoint_dir=None, resume=False, verbose=0):
        self.max_steps = max_steps
        self.batch_size = batch_size
        self.mask_rate = mask_rate
        self.learning_rate = learning_rate
        self.random_state = random_state
        self.checkpoint_every = checkpoint_every
        self.checkpoint_dir = checkpoint_dir
        self.resume = resume
        self.verbose = verbose

    _parameter_constraints: dict = {
        "max_steps": [Interval(Integral, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "mask_rate": [Options({"uniform"}), Interval(Real, 0, 1, closed="right")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "checkpoint_every": [None, Interval(Integral, 1, None, closed="left")],
        "checkpoint_dir": [None, str, os.PathLike],
        "resume": ["boolean"],
        "verbose": ["verbose"],
    }

    #: What a resumed run must share with the run that saved the checkpoint (besides the texts).
    _RUN_SETTINGS = ("batch_size", "mask_rate", "learning_rate", "max_length")

    def check(self, X):
        """Refuse, before anything loads, what could not train: no texts, or no usable ``checkpoint_dir``.

        Parameters
        ----------
        X : object or None
            The training texts (only whether there are some).

        Raises
        ------
        InvalidParameterError
            When a parameter is not of a type or in a range it accepts (a ``ValueError``).
        ValueError
            When ``max_steps > 0`` without ``X``, when checkpoints are asked for without
            ``checkpoint_dir``, or when ``checkpoint_dir`` is refused by
            :func:`~skmpt.distributed.check_checkpoint_dir` (a file, or another run's
            checkpoints for a new run).
        """
        validate_parameters(vars(self), self._parameter_constraints, type(self).__name__)
        if (self.checkpoint_every is not None or self.resume) and self.checkpoint_dir is None:
            raise ValueError("checkpoint_every and resume=True need checkpoint_dir, where checkpoints are kept.")
        if self.max_steps > 0 and X is None:
            raise ValueError("fit with max_steps > 0 needs training texts X.")
        if self.max_steps > 0 and self.checkpoint_dir is not None:
            check_checkpoint_dir(self.checkpoint_dir, resume=self.resume)

    def _run_record(self, runner, encoded):
        """What identifies this run in its checkpoints: the texts' fingerprint and the settings."""
        digest = hashlib.sha256()
        for ids in encoded.input_ids:
            ids = ids.numpy().astype(np.int64)
            digest.update(np.int64(len(ids)).tobytes() + ids.tobytes())
        settings = {"batch_size": self.batch_size, "mask_rate": self.mask_rate, "learning_rate": self.learning_rate,
                    "max_length": runner.max_length}
        return {"n_texts": len(encoded), "texts_sha256": digest.hexdigest(), **settings}

    def _check_resumed(self, record):
        """``check`` of :func:`~skmpt.distributed.load_checkpoint`: the checkpoint is this run's."""

        def check(extra, path):
            saved = extra.get("run") if isinstance(extra, dict) else None
            if not isinstance(saved, dict):
                raise ValueError(f"The checkpoint {path} holds no record of its run; it cannot be resumed here.")
            differences = [f"{name}={saved.get(name)!r} there, {record[name]!r} here"
                           for name in self._RUN_SETTINGS if saved.get(name) != record[name]]
            if saved.get("n_texts") != record["n_texts"]:
                differences.append(f"{saved.get('n_texts')} training texts there, {record['n_texts']} here")
            elif saved.get("texts_sha256") != record["texts_sha256"]:
                differences.append("the training texts (their token ids) differ")
            if differences:
                raise ValueError(
                    f"resume=True, but the checkpoint {path} is of another run: {'; '.join(differences)}. Resume "
                    "with the texts and parameters of that run, or start a new run in another checkpoint_dir."
                )
            try:  # the data order must be a permutation of this run's texts, the cursor inside it
                order, cursor = torch.as_tensor(extra["order"]), int(extra["cursor"])
                valid = isinstance(extra["history"], list) and 0 <= cursor <= len(order)
                valid = valid and torch.equal(order.sort().values, torch.arange(record["n_texts"]))
            except (KeyError, TypeError, ValueError, RuntimeError):
                valid = False
            if not valid:
                raise ValueError(f"The checkpoint {path} is damaged: its data order, cursor or history cannot resume.")

        return check

    def run(self, runner, encoded):
        """Train the runner's predictor's module in place on ``encoded``; returns the history, one dict per step.

        Each entry holds ``step``, ``loss`` (negative MPT objective per token, nats) and
        ``seconds``. The model is left in evaluation mode. The parameters are checked first (as
        :meth:`check` checks them).
        """
        validate_parameters(vars(self), self._parameter_constraints, type(self).__name__)
        context = current_context(runner.device)
        generator = check_generator(self.random_state)
        # dropout draws from torch's generators: seeded here, in a fork, so the user's are untouched
        seed = int(torch.randint(2**62, (1,), generator=generator))
        devices = [runner.device] if runner.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            return self._loop(runner, encoded, generator, context)

    def _loop(self, runner, encoded, generator, context):
        from tqdm.auto import tqdm

        module = runner.predictor.module
        model = wrap_model(module, context)
        # through the DDP wrapper, which synchronises; one process keeps the family's own fast paths
        predictor = runner.predictor if model is module else runner.predictor.with_module(model)
        optimizer = torch.optim.AdamW(module.parameters(), lr=self.learning_rate)
        order = torch.randperm(len(encoded), generator=generator)
        cursor, first, history, written = 0, 1, [], []  # written: the checkpoints of this run, the only ones deleted
        record = self._run_record(runner, encoded)
        if self.resume:
            with hidden_transformers_bars(hidden=not self.verbose):
                saved = load_checkpoint(self.checkpoint_dir, model=model, optimizer=optimizer,
                                        generators={"masks": generator}, context=context,
                                        check=self._check_resumed(record))
            if saved is not None:
                first, extra = saved["step"] + 1, saved["extra"]
                history = [dict(entry) for entry in extra["history"]]
                order, cursor = extra["order"], int(extra["cursor"])
                logger.info("Resumed from %s at step %d.", saved["path"], saved["step"])
        start_time = time.perf_counter()
        model.train()
        try:
            with tqdm(total=self.max_steps, initial=first - 1, desc="training", unit="step",
                      disable=not self.verbose or not context.is_main) as progress:
                for step in range(first, self.max_steps + 1):
                    if cursor >= len(order):
                        order, cursor = torch.randperm(len(encoded), generator=generator), 0
                    chosen = order[cursor : cursor + self.batch_size].tolist()
                    cursor += len(chosen)
                    loss = self._step(runner, predictor, encoded, chosen, generator, optimizer, context)
                    if not math.isfinite(loss):
                        raise FloatingPointError(
                            f"Masked pre-training diverged: the loss became {loss} at step {step}; lower "
                            f"learning_rate (now {self.learning_rate})."
                        )
                    history.append({"step": step, "loss": loss, "seconds": time.perf_counter() - start_time})
                    progress.set_postfix(loss=f"{loss:.4f}", refresh=False)
                    progress.update()
                    if step == 1 or step % max(1, self.max_steps // 10) == 0:
                        logger.info("step %d of %d: loss %.4f nats per token", step, self.max_steps, loss)
                    if self.checkpoint_every and step % self.checkpoint_every == 0:
                        extra = {"history": history, "order": order, "cursor": cursor, "run": record}
                        with hidden_transformers_bars(hidden=not self.verbose):
                            save_checkpoint(self.checkpoint_dir, model=model, optimizer=optimizer, step=step,
                                            generators={"masks": generator}, extra=extra, context=context,
                                            written=written)
        finally:
            module.eval()
        return history

    def _masks(self, lengths, chosen, generator):
        """Every text's mask of the global batch (drawn on every rank: the masks of one process)."""
        copies, weights = [], []
        for i in chosen:
            length = int(lengths[i])
            if self.mask_rate == "uniform":
                size = int(torch.randint(1, length + 1, (1,), generator=generator))
            else:
                size = mask_size_for_rate(self.mask_rate, length)
            masked = masks_of_sizes([size], length, random_state=generator)
            copies.append((masked, masked))
            weights.append(length / size)
        return copies, weights

    def _step(self, runner, predictor, encoded, chosen, generator, optimizer, context):
        """One optimisation step on the global batch ``chosen``; returns its loss (every rank)."""
        lengths = encoded.n_tokens
        copies, weights = self._masks(lengths, chosen, generator)
        total_tokens = float(lengths[chosen].sum())
        share = list(range(context.rank, len(chosen), context.world_size))  # this rank's texts
        # a rank without texts (a batch smaller than the world) runs one text with weight 0, so that
        # every rank synchronises the gradients once per step
        subset = encoded.subset([chosen[k] for k in share or [0]])
        copies = [copies[k] for k in share or [0]]
        weights = torch.tensor([weights[k] for k in share] or [0.0], dtype=torch.float64, device=runner.device)
        # DDP averages the ranks' gradients: each rank's loss is scaled by the world size
        scale = context.world_size / total_tokens
        optimizer.zero_grad(set_to_none=True)
        # a pass is bounded by max_batch_tokens only: a rank's share never exceeds batch_size texts
        passes = list(runner.batches(subset, copies, max_copies=self.batch_size))
        loss_value = torch.zeros((), dtype=torch.float64, device=runner.device)
        for number, pieces in enumerate(passes, start=1):
            with sync_gradients(predictor.module, sync=number == len(passes)):
                sums = runner.forward(subset, copies, pieces, predictor=predictor, check_finite=False)
                index = torch.tensor([i for i, _, _ in pieces], device=runner.device)
                loss = -(weights[index] * sums).sum() * scale
                loss.backward()
            loss_value += loss.detach()
        optimizer.step()
        if context.world_size > 1:
            dist.all_reduce(loss_value)
        return float(loss_value) / context.world_size
