"""The runner: a masked LM, its tokenizer and its budgets, and the forward passes of masked copies.

:class:`MaskedLMRunner` is what :class:`~skmpt.text.MLMCurveScorer` holds once fitted
(``runner_``). Every masked copy of a group of texts goes through the encoder together; copies
are ordered by length and cut into forward passes of at most ``score_batch_size`` copies and
``max_batch_tokens`` tokens, so memory stays bounded at ``L = 512``, and the language-model
head runs only at the positions whose probability is needed (:func:`language_model_head`).
Log-probabilities are computed in float64 from the logits (:func:`target_log_probs`).
"""

import numpy as np
import torch

from .adapters import check_vocab_size, output_logits, timestep_kwargs

__all__ = ["MaskedLMRunner", "language_model_head", "target_log_probs"]


# Attributes that hold the language-model head of the masked-LM classes in transformers
# (``cls`` for the BERT family, ``lm_head`` for RoBERTa, XLM-R, CamemBERT, ...). Other models
# are run whole and their logits read at the masked positions: slower, equally exact.
_HEAD_ATTRIBUTES = ("cls", "lm_head")


def language_model_head(model):
    """``(encoder, head)`` when ``model`` is a base model plus one known head, else ``None``.

    Examples
    --------
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.text import language_model_head
    >>> model = BertForMaskedLM(BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
    ...                                    num_attention_heads=1, intermediate_size=8))
    >>> language_model_head(model)[1] is model.cls
    True
    """
    base = getattr(model, "base_model", None)
    children = {name: module for name, module in model.named_children() if module is not base}
    if base is None or base is model or len(children) != 1:
        return None
    name, head = next(iter(children.items()))
    return (base, head) if name in _HEAD_ATTRIBUTES else None

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
    >>> from skmpt.text import target_log_probs
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
    """A loaded masked LM with its tokenizer, device, dtype and memory budgets: it runs masked copies.

    Parameters
    ----------
    model : torch.nn.Module
        A masked predictor on ``device``, called with ``input_ids`` and ``attention_mask`` (and
        the timestep hook's arguments), returning logits over the vocabulary
        (:func:`~skmpt.text.output_logits`).
    tokenizer : transformers tokenizer
        With a mask token, unless ``mask_token_id`` is given.
    device : torch.device
    dtype : torch.dtype or None, default=None
        The dtype the model was cast to, or ``None`` for the model's own.
    autocast_dtype : torch.dtype or None, default=None
        When given, the model runs under ``torch.autocast`` to this dtype on ``device``'s type
        (mixed precision: the weights keep their dtype; what ``dtype="auto"`` of
        :class:`~skmpt.MLMCurveScorer` chooses on a device with native bfloat16 units).
    max_length : int, default=512
        Longest tokenised text, special tokens included.
    score_batch_size : int, default=64
        Most masked copies in one scoring forward pass.
    max_batch_tokens : int, default=16384
        Most tokens (copies times padded length) in one forward pass.
    mask_token_id : int or None, default=None
        The id that masks a token; ``None`` is the tokenizer's mask token. It also pads when the
        tokenizer has no padding token (padding is hidden by the attention mask).
    shift_logits : bool, default=False
        Whether the logits at position ``i`` predict the token at ``i + 1`` (Dream).
    timestep_fn : callable or None, default=None
        Hook from each copy's masking rate to the model's timestep arguments
        (:func:`~skmpt.text.timestep_kwargs`).

    Examples
    --------
    >>> import torch
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import MaskedLMRunner, encode_texts
    >>> texts = load_wordnet_sentences()[:100]
    >>> tokenizer = make_wordpiece_tokenizer(texts, vocab_size=200)
    >>> model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                                    num_attention_heads=2, intermediate_size=32)).eval()
    >>> runner = MaskedLMRunner(model, tokenizer, torch.device("cpu"))
    >>> encoded = encode_texts(texts[:2], tokenizer, runner.max_length)
    >>> copies = [(torch.eye(n, dtype=torch.bool),) * 2 for n in encoded.n_tokens]  # one token masked each
    >>> [sums.shape == (n,) for sums, n in zip(runner.copy_log_probs(encoded, copies), encoded.n_tokens)]
    [True, True]
    """

    def __init__(self, model, tokenizer, device, *, dtype=None, autocast_dtype=None, max_length=512,
                 score_batch_size=64, max_batch_tokens=16384, mask_token_id=None, shift_logits=False,
                 timestep_fn=None):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.dtype = dtype
        self.autocast_dtype = autocast_dtype
        self.max_length = max_length
        self.score_batch_size = score_batch_size
        self.max_batch_tokens = max_batch_tokens
        self.mask_token_id = tokenizer.mask_token_id if mask_token_id is None else int(mask_token_id)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_token_id = self.mask_token_id if pad is None else pad
        self.shift_logits = shift_logits
        self.timestep_fn = timestep_fn
        self.vocab_size = None  # of the logits, known after the first pass (check_predictor's probe)

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
            if self.shift_logits and int(own[0]) == 0:
                raise ValueError(
                    "shift_logits=True reads a token's logits at the position before it, but the text's first token "
                    "is at position 0: the tokenizer adds no token (such as BOS) in front of a text."
                )
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

    def logits(self, model, input_ids, attention_mask, rates):
        """The logits ``model`` gives at every position, of shape (batch, length, vocab_size), checked
        (:meth:`checked_logits`); ``rates`` (each copy's ``M / L``) feed the timestep hook."""
        extra = {key: value.to(self.device) for key, value in timestep_kwargs(self.timestep_fn, rates).items()}
        return self.checked_logits(model(input_ids=input_ids, attention_mask=attention_mask, **extra), input_ids)

    def checked_logits(self, output, input_ids):
        """The logits of a model's ``output`` (:func:`~skmpt.text.output_logits`), one row per input position;
        on the first pass, their vocabulary must cover the tokenizer's ids and the mask id."""
        logits = output_logits(output)
        if logits.shape[:2] != input_ids.shape:
            raise ValueError(
                f"The model's logits have shape {tuple(logits.shape)} for input_ids of shape "
                f"{tuple(input_ids.shape)}: they must be (batch, length, vocab_size)."
            )
        if self.vocab_size is None:
            self.vocab_size = check_vocab_size(logits.shape[-1], self.tokenizer, self.mask_token_id)
        return logits

    def forward(self, encoded, copies, pieces, model=None, per_target=False):
        """Summed log-probability of each copy's target tokens, for one forward pass.

        ``model`` (a ``DistributedDataParallel`` wrapper in training) is run whole, logits read
        at the targets; by default the runner's model runs its encoder, and its head only at
        the targets.

        Returns
        -------
        sums : torch.Tensor of dtype float64 and shape (n_copies,)
            In the order of ``pieces``. With ``per_target=True``, each target's log-probability
            instead, of shape (n_targets,): copy by copy, each copy's targets left to right.
        """
        n_rows, input_ids, attention_mask, target_rows, target_cols, target_ids, rates = self._inputs(
            encoded, copies, pieces
        )
        split = language_model_head(self.model) if model is None and self.timestep_fn is None else None
        model = self.model if model is None else model
        columns = target_cols - 1 if self.shift_logits else target_cols  # Dream: position i predicts i + 1
        with self.autocast():
            if split is not None:
                encoder, head = split
                hidden = encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
                logits = head(hidden[target_rows, columns])
            else:
                logits = self.logits(model, input_ids, attention_mask, rates)[target_rows, columns]
        log_probs = target_log_probs(logits, target_ids)
        if per_target:
            return log_probs
        sums = torch.zeros(n_rows, dtype=torch.float64, device=self.device)
        return sums.index_add(0, target_rows, log_probs)

    def autocast(self):
        """Autocast to ``autocast_dtype`` on the device's type; none when it is ``None``."""
        if self.autocast_dtype is None:
            return torch.autocast(self.device.type, enabled=False)
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def copy_log_probs(self, encoded, copies, progress=None):
        """Run every copy; per text, the summed target log-probability of each of its copies.

        ``progress``, a tqdm bar counting masked copies, advances after each forward pass.

        Returns
        -------
        sums : list of ndarray
            ``sums[i]`` has one float64 entry per copy of text ``i``.
        """
        results = [np.empty(len(masked)) for masked, _ in copies]
        with torch.inference_mode():
            for pieces in self.batches(encoded, copies):
                sums = self.forward(encoded, copies, pieces).cpu().numpy()
                offset = 0
                for i, start, stop in pieces:
                    results[i][start:stop] = sums[offset : offset + stop - start]
                    offset += stop - start
                if progress is not None:
                    progress.update(offset)
        return results
