"""Masked pre-training of the loaded model (:meth:`MLMCurveScorer.fit` with ``max_steps > 0``).

One loop for one process and for many: under a launcher the model is wrapped in
``DistributedDataParallel``, every rank draws the same global batch of ``batch_size`` texts and
the same masks from the shared generator, and computes the loss of its own share of the texts;
DDP averages the gradients, so a step is the step of one process on the whole batch, to
rounding. A step's forward passes (bounded by ``max_batch_tokens``) accumulate gradients, and
only the last one synchronises them. Checkpoints hold the model, the optimiser, the step, the
history, the data order and the generators (the masks' and torch's, which dropout draws from).
"""

import logging
import time

import torch
import torch.distributed as dist

from .._distributed import current_context, load_checkpoint, save_checkpoint, sync_gradients, wrap_model
from ..masks import check_generator, mask_size_for_rate, masks_of_sizes

__all__ = ["TrainingMixin"]

logger = logging.getLogger("skmpt._mlm")


class TrainingMixin:
    """The training loop of :class:`MLMCurveScorer`, one ``_train_step`` per optimisation step."""

    def _pretrain(self, encoded):
        """Masked pre-training up to ``max_steps`` steps of ``batch_size`` texts (all ranks together)."""
        context = current_context(self.device_)
        generator = check_generator(self.random_state)
        # dropout draws from torch's generators: seeded here, in a fork, so the user's are untouched
        seed = int(torch.randint(2**62, (1,), generator=generator))
        devices = [self.device_] if self.device_.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            self._training_loop(encoded, generator, context)

    def _training_loop(self, encoded, generator, context):
        from tqdm.auto import tqdm

        model = wrap_model(self.model_, context)
        optimizer = torch.optim.AdamW(self.model_.parameters(), lr=self.learning_rate)
        # float16 autocast (a GPU without bfloat16) needs its gradients scaled; bfloat16 does not
        scaler = torch.amp.GradScaler(self.device_.type, enabled=self._autocast_dtype() == torch.float16)
        lengths = encoded.n_tokens
        order = torch.randperm(len(encoded), generator=generator)
        cursor, first = 0, 1
        if self.resume:
            saved = load_checkpoint(self.checkpoint_dir, model=model, optimizer=optimizer,
                                    generators={"masks": generator}, context=context)
            if saved is not None:
                first, extra = saved["step"] + 1, saved["extra"]
                self.history_ = [dict(entry) for entry in extra["history"]]
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
                    loss = self._train_step(model, encoded, chosen, lengths, generator, optimizer, scaler, context)
                    self.history_.append({"step": step, "loss": loss, "seconds": time.perf_counter() - start_time})
                    progress.set_postfix(loss=f"{loss:.4f}", refresh=False)
                    progress.update()
                    if step == 1 or step % max(1, self.max_steps // 10) == 0:
                        logger.info("step %d of %d: loss %.4f nats per token", step, self.max_steps, loss)
                    if self.checkpoint_every and step % self.checkpoint_every == 0:
                        extra = {"history": self.history_, "order": order, "cursor": cursor}
                        save_checkpoint(self.checkpoint_dir, model=model, optimizer=optimizer, step=step,
                                        generators={"masks": generator}, extra=extra, context=context)
        finally:
            self.model_.eval()

    def _train_step(self, model, encoded, chosen, lengths, generator, optimizer, scaler, context):
        """One optimisation step on the global batch ``chosen``; returns its loss (every rank)."""
        copies, weights = [], []
        for i in chosen:  # every rank draws every text's mask: the same masks as one process
            length = int(lengths[i])
            if self.mask_rate == "uniform":
                size = int(torch.randint(1, length + 1, (1,), generator=generator))
            else:
                size = mask_size_for_rate(self.mask_rate, length)
            masked = masks_of_sizes([size], length, random_state=generator)
            copies.append((masked, masked))
            weights.append(length / size)
        total_tokens = float(lengths[chosen].sum())
        share = list(range(context.rank, len(chosen), context.world_size))  # this rank's texts
        # a rank without texts (a batch smaller than the world) runs one text with weight 0, so that
        # every rank synchronises the gradients once per step
        subset = encoded.subset([chosen[k] for k in share or [0]])
        copies = [copies[k] for k in share or [0]]
        weights = torch.tensor([weights[k] for k in share] or [0.0], dtype=torch.float64, device=self.device_)
        # DDP averages the ranks' gradients: each rank's loss is scaled by the world size
        scale = context.world_size / total_tokens
        optimizer.zero_grad(set_to_none=True)
        passes = list(self._batches(subset, copies))
        loss_value = torch.zeros((), dtype=torch.float64, device=self.device_)
        for number, pieces in enumerate(passes, start=1):
            with sync_gradients(model, sync=number == len(passes)):
                # through the DDP wrapper, which synchronises; one process keeps the head-only fast path
                sums = self._forward(subset, copies, pieces, model=None if model is self.model_ else model)
                index = torch.tensor([i for i, _, _ in pieces], device=self.device_)
                loss = -(weights[index] * sums).sum() * scale
                scaler.scale(loss).backward()
            loss_value += loss.detach()
        scaler.step(optimizer)
        scaler.update()
        if context.world_size > 1:
            dist.all_reduce(loss_value)
        return float(loss_value) / context.world_size
