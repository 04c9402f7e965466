"""The runner: a masked predictor with its tokenizer and budgets, and the one loop over masked copies.

:class:`MaskedLMRunner` is what :class:`~skmpt.MLMCurveScorer` holds once fitted (``runner_``),
and what the functions of :mod:`skmpt.text` take: it is the one place that calls the predictor.
:meth:`MaskedLMRunner.score` runs a scoring strategy (:mod:`skmpt.text.strategies`) over
encoded texts: each text's copies come from a generator seeded by ``random_state`` and the
text's token ids only (so they do not depend on the batch, the group or the process that scores
it); copies are ordered by length and cut into forward passes of at most ``score_batch_size``
copies and ``max_batch_tokens`` tokens, texts are grouped within the memory budget
(:func:`skmpt.get_working_memory`), and under a launcher the texts are shared out over the
processes (:func:`skmpt.distributed.sharded_map`). Log-probabilities are computed in float64
from the logits (:func:`target_log_probs`).
"""

import zlib

import numpy as np
import torch
from sklearn.utils import check_random_state

from .._utils import chunk_budget
from ..distributed import current_context, sharded_map
from .predictors import MaskedPredictorError, check_vocab_size

__all__ = ["MaskedLMRunner", "target_log_probs"]

# target_log_probs sums exp of float32 logits directly when a row's largest logit lies here:
# no float32 overflow (64 terms of at most e**80 per partial sum) and no largest terms lost to
# underflow; other rows take the float64 path.
_FLOAT32_SAFE_LOGITS = (-40.0, 80.0)


def _chunked_sum(values, width=64):
    """Row sums of float32 ``values``: float32 partial sums of ``width`` terms added in float64."""
    n_rows, n_columns = values.shape
    main = n_columns - n_columns % width
    total = values[:, :main].reshape(n_rows, -1, width).sum(-1).to(torch.float64).sum(-1)
    return total + values[:, main:].to(torch.float64).sum(-1)


def target_log_probs(logits, target_ids):
    """``log_softmax(logits)[row, target_ids[row]]`` in float64, for logits of shape (rows, V).

    Float64 logits get a float64 log-sum-exp. Lower-precision logits are not copied to float64
    (a copy and an ``exp`` of ``V`` float64 numbers per row cost three times as much): the
    normaliser sums ``exp`` of the float32 logits in chunks added up in float64, within about
    3e-7 nats of the float64 result at ``V = 30522``, below the resolution of the float32 logits
    themselves (1e-6 near 10). Rows whose largest logit is outside ``[-40, 80]`` use float64.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text.runner import target_log_probs
    >>> logits = torch.zeros(2, 4)
    >>> target_log_probs(logits, torch.tensor([0, 3]))
    tensor([-1.3863, -1.3863], dtype=torch.float64)
    """
    target = logits.gather(1, target_ids.unsqueeze(1)).squeeze(1).to(torch.float64)
    if logits.dtype == torch.float64 or not len(logits):
        return target - torch.logsumexp(logits.to(torch.float64), -1)
    logits = logits.float()
    top = logits.amax(-1)
    safe = (top >= _FLOAT32_SAFE_LOGITS[0]) & (top <= _FLOAT32_SAFE_LOGITS[1])
    if bool(safe.all()):
        return target - _chunked_sum(logits.exp()).log()
    norm = torch.empty_like(target)
    norm[~safe] = torch.logsumexp(logits[~safe].to(torch.float64), -1)
    if bool(safe.any()):
        norm[safe] = _chunked_sum(logits[safe].exp()).log()
    return target - norm


class MaskedLMRunner:
    """A masked predictor with its tokenizer, device and memory budgets: it runs masked copies.

    Parameters
    ----------
    predictor : MaskedPredictor
        On ``device`` (:mod:`skmpt.text.predictors`).
    tokenizer : transformers tokenizer
    device : torch.device
    max_length : int, default=512
        Longest tokenised text, special tokens included.
    score_batch_size : int, default=64
        Most masked copies in one scoring forward pass.
    max_batch_tokens : int, default=16384
        Most tokens (copies times padded length) in one forward pass.

    Attributes
    ----------
    vocab_size : int or None
        Width of the predictor's logits, checked against the tokenizer's ids and the mask id at
        the first pass (:meth:`probe`); ``None`` before it.

    Examples
    --------
    >>> import torch
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import MaskedLMRunner, encode_texts, load_masked_lm
    >>> from skmpt.text.strategies import SweepMasks
    >>> texts = load_wordnet_sentences()[:100]
    >>> tokenizer = make_wordpiece_tokenizer(texts, vocab_size=200)
    >>> config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=32)
    >>> predictor, tokenizer = load_masked_lm(config, tokenizer=tokenizer, device=torch.device("cpu"), random_state=0)
    >>> runner = MaskedLMRunner(predictor, tokenizer, torch.device("cpu"))
    >>> runner.score(encode_texts(texts[:2], tokenizer, runner.max_length), SweepMasks(score_masks=2)).shape
    (2,)
    """

    def __init__(self, predictor, tokenizer, device, *, max_length=512, score_batch_size=64, max_batch_tokens=16384):
        self.predictor = predictor
        self.tokenizer = tokenizer
        self.device = device
        self.max_length = max_length
        self.score_batch_size = score_batch_size
        self.max_batch_tokens = max_batch_tokens
        pad = getattr(tokenizer, "pad_token_id", None)
        # without a padding token the mask id pads (padding is hidden by the attention mask)
        self.pad_token_id = predictor.mask_token_id if pad is None else pad
        self.vocab_size = None

    @property
    def mask_token_id(self):
        """The predictor's mask id."""
        return self.predictor.mask_token_id

    def batches(self, encoded, copies, max_copies=None):
        """Cut masked copies into forward passes, shortest texts first.

        ``copies[i]`` is ``(masked, targets)``: two boolean tensors of shape (n_copies_i, L_i)
        over text ``i``'s own tokens. A pass holds at most ``max_copies`` copies (default
        ``score_batch_size``) and ``max_batch_tokens`` tokens, or one copy when one copy alone
        exceeds it. Yields ``pieces``: lists of ``(i, start, stop)``.
        """
        max_copies = self.score_batch_size if max_copies is None else max_copies
        order = sorted(range(len(encoded)), key=lambda i: len(encoded.input_ids[i]))
        batch, count = [], 0
        for i in order:
            length = len(encoded.input_ids[i])
            capacity = max(1, min(max_copies, self.max_batch_tokens // length))
            start, total = 0, len(copies[i][0])
            while start < total:
                if count >= capacity:  # the batch's padded length is now this text's
                    yield batch
                    batch, count = [], 0
                stop = min(total, start + capacity - count)
                batch.append((i, start, stop))
                count += stop - start
                start = stop
        if batch:
            yield batch

    def _inputs(self, encoded, copies, pieces):
        """The padded, masked ids of one pass, its attention mask, where the targets are, and each copy's
        masking rate ``M / L``."""
        width = max(len(encoded.input_ids[i]) for i, _, _ in pieces)
        rows, lengths, target_rows, target_cols, target_ids, rates = [], [], [], [], [], []
        offset = 0
        for i, start, stop in pieces:
            ids, own = encoded.input_ids[i], encoded.content_positions[i]
            if bool((ids[own] == self.mask_token_id).any()):
                raise ValueError(f"A text holds the mask token's id {self.mask_token_id} as one of its own tokens.")
            self.predictor.check_positions(int(own[0]))
            masked, targets = copies[i][0][start:stop], copies[i][1][start:stop]
            block = torch.full((stop - start, width), self.pad_token_id, dtype=torch.long)
            block[:, : len(ids)] = ids
            columns = block[:, own]
            columns[masked] = self.mask_token_id
            block[:, own] = columns
            rows.append(block)
            lengths.append(torch.full((stop - start,), len(ids)))
            rates.append(masked.sum(1, dtype=torch.float64) / len(own))
            r, c = targets.nonzero(as_tuple=True)
            target_rows.append(r + offset)
            target_cols.append(own[c])
            target_ids.append(ids[own[c]])
            offset += stop - start
        attention_mask = (torch.arange(width) < torch.cat(lengths).unsqueeze(1)).long()
        tensors = (torch.cat(rows), attention_mask, torch.cat(target_rows), torch.cat(target_cols),
                   torch.cat(target_ids))
        return offset, *(tensor.to(self.device) for tensor in tensors), torch.cat(rates)

    def target_logits(self, input_ids, attention_mask, rates, rows, positions, predictor=None):
        """The predictor's logits for the tokens at ``(rows, positions)``, shape (n_targets, vocab_size).

        The one call of the predictor. At the first pass the logits' width must cover every id
        the tokenizer produces and the mask id (:func:`~skmpt.text.predictors.check_vocab_size`).
        ``predictor`` (the same family over a ``DistributedDataParallel`` wrapper, in training)
        replaces the runner's own.
        """
        predictor = self.predictor if predictor is None else predictor
        logits = predictor.target_logits(input_ids, attention_mask, rates, rows, positions)
        if self.vocab_size is None:
            self.vocab_size = check_vocab_size(logits.shape[-1], self.tokenizer, self.mask_token_id)
        return logits

    def forward(self, encoded, copies, pieces, predictor=None, per_target=False, check_finite=True):
        """Summed log-probability of each copy's target tokens, for one forward pass.

        With ``check_finite`` a non-finite log-probability is an error (:meth:`check_finite`);
        training turns it off, its own rule names the step where the loss diverged.

        Returns
        -------
        sums : torch.Tensor of dtype float64 and shape (n_copies,)
            In the order of ``pieces``. With ``per_target=True``, each target's log-probability
            instead, of shape (n_targets,): copy by copy, each copy's targets left to right.
        """
        n_rows, input_ids, attention_mask, target_rows, target_cols, target_ids, rates = self._inputs(
            encoded, copies, pieces
        )
        logits = self.target_logits(input_ids, attention_mask, rates, target_rows, target_cols, predictor)
        log_probs = target_log_probs(logits, target_ids)
        if check_finite:
            self.check_finite(log_probs, logits, encoded, pieces, target_rows)
        if per_target:
            return log_probs
        sums = torch.zeros(n_rows, dtype=torch.float64, device=self.device)
        return sums.index_add(0, target_rows, log_probs)

    def check_finite(self, log_probs, logits, encoded, pieces, target_rows):
        """Refuse a pass whose target log-probabilities are not finite, naming the text and its non-finite logits.

        A NaN or infinite logit (NaN, ``+inf``, or ``-inf`` at the target) makes a NaN or ``-inf``
        score; a ``-inf`` logit at another token (a token the model forbids) is accepted.
        """
        bad = ~torch.isfinite(log_probs)
        if not bool(bad.any()):
            return
        row = int(target_rows[bad.nonzero()[0, 0]])
        # the text of the pass's first copy with a non-finite target
        ends = np.cumsum([stop - start for _, start, stop in pieces])
        i = pieces[int(np.searchsorted(ends, row, side="right"))][0]
        ids, own = encoded.input_ids[i], encoded.content_positions[i]
        text = self.tokenizer.decode(ids[own])
        text = text if len(text) <= 80 else text[:77] + "..."
        in_text = ~torch.isfinite(logits[target_rows == row])
        raise ValueError(
            f"The predictor returned {int(in_text.sum())} non-finite logits (NaN or infinite) for a masked copy of "
            f"the text {text!r}, and {int((~torch.isfinite(logits)).sum())} in its forward pass of "
            f"{len(log_probs)} targets: its log-probabilities would be {log_probs[bad][0].item()}. Check the model "
            "(its weights, its dtype's range) before scoring."
        )

    def probe(self):
        """One pass of two copies of three ids before any text, so that a predictor's errors come first.

        Checks the logits' shape and width (:meth:`target_logits`) and a time-conditioned
        predictor's timestep arguments. A predictor that cannot run the probe at all (one that
        takes only inputs of its own length, say) meets the same checks at its first pass.
        Returns the vocabulary size, or ``None`` when the probe could not run.
        """
        input_ids = torch.zeros((2, 3), dtype=torch.long, device=self.device)
        rows, positions = torch.tensor([0, 1], device=self.device), torch.tensor([1, 2], device=self.device)
        rates = torch.tensor([1 / 3, 1.0], dtype=torch.float64)
        try:
            with torch.inference_mode(), self.predictor.evaluating():
                logits = self.predictor.target_logits(input_ids, torch.ones_like(input_ids), rates, rows, positions)
        except MaskedPredictorError:
            raise  # the predictor's own checks: no logits, a wrong shape, a bad timestep hook
        except Exception:  # noqa: BLE001 - e.g. a model of fixed input length: checked at its first pass instead
            return None
        self.vocab_size = check_vocab_size(logits.shape[-1], self.tokenizer, self.mask_token_id)
        return self.vocab_size

    def run_copies(self, encoded, copies, *, per_target=False, progress=None):
        """Run every copy of every text: the copies' summed target log-probabilities, or each target's.

        Parameters
        ----------
        encoded : EncodedTexts
        copies : list of (masked, targets)
            Boolean tensors of shape (n_copies_i, L_i) per text.
        per_target : bool, default=False
            Each copy's target log-probabilities, NaN at the other tokens, instead of their sum.
        progress : tqdm bar or None, default=None
            Advances after each forward pass, by the copies it ran.

        Returns
        -------
        values : list of ndarray
            ``values[i]`` has shape (n_copies_i,), or (n_copies_i, L_i) with ``per_target``.
        """
        results = [np.full(masked.shape if per_target else len(masked), np.nan) for masked, _ in copies]
        with torch.inference_mode(), self.predictor.evaluating():
            for pieces in self.batches(encoded, copies):
                values = self.forward(encoded, copies, pieces, per_target=per_target).cpu().numpy()
                offset = n_copies = 0
                for i, start, stop in pieces:
                    if per_target:
                        targets = copies[i][1][start:stop].numpy()
                        block = results[i][start:stop]  # a view: filled copy by copy, left to right
                        block[targets] = values[offset : offset + int(targets.sum())]
                        offset += int(targets.sum())
                    else:
                        results[i][start:stop] = values[offset : offset + stop - start]
                        offset += stop - start
                    n_copies += stop - start
                if progress is not None:
                    progress.update(n_copies)
        return results

    def score(self, encoded, strategy, *, random_state=None, verbose=0, description=None):
        """Each text's result under ``strategy``, a group of texts at a time, split over the processes.

        Under a launcher (a process group of ``torch.distributed``), each process scores a shard
        of the texts, dealt by their work (copies times padded length), and every process
        returns all results in input order; without one the shard is every text.

        Parameters
        ----------
        encoded : EncodedTexts
        strategy : ScoringStrategy
            :mod:`skmpt.text.strategies`.
        random_state : int, RandomState instance or None, default=None
            Seeds the masks, with each text's tokens.
        verbose : int, default=0
            When > 0, a progress bar on the main process counts the masked copies.
        description : str or None, default=None
            The bar's label; None is ``"scoring (<strategy's class>)"``, which says the stage
            and what it computes.

        Returns
        -------
        results : ndarray of shape (n_texts,) or (n_texts, ...), or a list of ndarray
            A list, one array per text, for a ``per_target`` strategy.
        """
        if strategy.needs_words and encoded.word_ids is None:
            raise ValueError(f"{type(strategy).__name__} needs the texts' word ids: encode them with word_ids=True.")
        words = encoded.word_ids if strategy.needs_words else [None] * len(encoded)
        # the work of every text, and a strategy's refusal of a text (too long to enumerate), before any pass
        work = [strategy.n_copies(int(n), w) * len(ids)
                for n, w, ids in zip(encoded.n_tokens, words, encoded.input_ids, strict=True)]
        base = int(check_random_state(random_state).randint(2**32, dtype=np.uint64))
        context = current_context(self.device)
        show = bool(verbose) and context.is_main  # one bar, on the main process, counting its share
        description = f"scoring ({type(strategy).__name__})" if description is None else description

        def score_shard(indices):
            return self._score_shard(encoded.subset(indices), strategy, base, description if show else None)

        results = sharded_map(score_shard, len(encoded), context=context, costs=work)
        return list(results) if strategy.per_target else np.array(results)

    def _score_shard(self, encoded, strategy, base, label):
        """The results of the texts of ``encoded``, in its order; texts go shortest first, in groups
        holding at most the working-memory budget of mask entries. ``label``: the progress bar's, or
        None for no bar."""
        from tqdm.auto import tqdm

        order = sorted(range(len(encoded)), key=lambda i: len(encoded.input_ids[i]))
        results = [None] * len(encoded)
        words = encoded.word_ids if strategy.needs_words else [None] * len(encoded)
        total = int(sum(strategy.n_copies(int(n), w) for n, w in zip(encoded.n_tokens, words, strict=True)))
        budget = chunk_budget()
        with tqdm(total=total, desc=label, unit="copy", disable=label is None) as progress:
            group, copies, load = [], [], 0
            for position, i in enumerate(order):
                ids, own = encoded.input_ids[i], encoded.content_positions[i]
                # Each text's masks depend only on the seed and its tokens (torch's CPU generator
                # keeps 32 bits of a seed: both are folded into 32).
                generator = torch.Generator().manual_seed(zlib.crc32(ids.numpy().astype(np.int64).tobytes(), base))
                copies.append(strategy.copies(len(own), generator, words[i]))
                group.append(i)
                load += copies[-1][0].numel()
                if load >= budget or position == len(order) - 1:
                    values = self.run_copies(encoded.subset(group), copies, per_target=strategy.per_target,
                                             progress=progress)
                    for j, (masked, _), text_values in zip(group, copies, values, strict=True):
                        results[j] = strategy.reduce(masked, text_values, words[j])
                    group, copies, load = [], [], 0
        return results
