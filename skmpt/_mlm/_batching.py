"""Texts to token ids, and masked copies of them to batched forward passes of the encoder.

Every masked copy of a group of texts goes through the encoder together; copies are ordered by
length and cut into forward passes of at most ``batch_size`` copies and ``max_batch_tokens``
tokens, so memory stays bounded at ``L = 512``, and the language-model head runs only at the
positions whose probability is needed.
"""

import warnings

import numpy as np
import torch

__all__ = ["EncodedTexts", "BatchingMixin", "language_model_head", "target_log_probs"]


# Attributes that hold the language-model head of the masked-LM classes in transformers
# (``cls`` for the BERT family, ``lm_head`` for RoBERTa, XLM-R, CamemBERT, ...). Other models
# are run whole and their logits read at the masked positions: slower, equally exact.
_HEAD_ATTRIBUTES = ("cls", "lm_head")


def language_model_head(model):
    """``(encoder, head)`` when ``model`` is a base model plus one known head, else ``None``."""
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


class EncodedTexts:
    """Token ids of validated texts and where each text's own tokens sit."""

    def __init__(self, input_ids, content_positions):
        self.input_ids = input_ids  # list of 1-D long tensors, special tokens included
        self.content_positions = content_positions  # list of 1-D long tensors into input_ids

    def __len__(self):
        return len(self.input_ids)

    @property
    def n_tokens(self):
        return np.array([len(p) for p in self.content_positions])

    def subset(self, indices):
        return EncodedTexts([self.input_ids[i] for i in indices], [self.content_positions[i] for i in indices])


class BatchingMixin:
    """Encoding and forward passes of :class:`MLMCurveScorer` (needs ``model_``, ``tokenizer_``, ``device_``)."""

    def _texts(self, X):
        """The texts of ``X`` as a list, whatever container holds them."""
        try:
            import datasets
        except ImportError:  # pragma: no cover - datasets is part of the text extra
            datasets = None
        if datasets is not None and isinstance(X, (datasets.Dataset, datasets.IterableDataset)):
            return self._dataset_texts(X, datasets)
        if hasattr(X, "columns") and hasattr(X, "dtypes"):  # a DataFrame
            from pandas.api.types import is_string_dtype

            column = self._text_column(list(X.columns), lambda c: is_string_dtype(X[c]))
            return list(X[column])
        if isinstance(X, str):
            raise ValueError("Expected a sequence of texts, got a single string; wrap it in a list.")
        if not isinstance(X, np.ndarray):
            try:
                X = list(X)
            except TypeError:
                raise ValueError(f"Expected a sequence of texts; got {type(X).__name__}.") from None
            if not any(isinstance(x, (list, tuple, np.ndarray)) for x in X):
                return X
            X = np.asarray(X, dtype=object)  # rows of one text each, shape (n, 1)
        if X.ndim == 2 and X.shape[1] == 1:
            X = X[:, 0]
        if X.ndim != 1:
            raise ValueError(f"Expected a 1-D array of texts or a column of shape (n, 1); got shape {X.shape}.")
        return X.tolist()

    def _dataset_texts(self, X, datasets):
        """Texts of a ``datasets.Dataset`` or ``IterableDataset``: one column, read in full."""
        columns, features = X.column_names, X.features
        if columns is None:  # an IterableDataset that does not know its columns before it is read
            columns = list(next(iter(X)))

        def is_text(column):
            feature = None if features is None else features.get(column)
            return isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")

        column = self._text_column(columns, is_text)
        if isinstance(X, datasets.Dataset):
            return list(X[column])
        return [row[column] for row in X]

    def _text_column(self, columns, is_text):
        if self.text_column is not None:
            if self.text_column not in columns:
                raise ValueError(f"text_column={self.text_column!r} is not a column; the columns are {columns}.")
            return self.text_column
        for name in ("text", "sentence"):
            if name in columns:
                return name
        text_columns = [c for c in columns if is_text(c)]
        if len(text_columns) != 1:
            raise ValueError(f"Cannot tell which column holds the texts among {columns}; set text_column.")
        return text_columns[0]

    def _encode(self, X, names=None):
        """Validate and tokenise texts: ids with special tokens, and the positions of the text's own.

        ``names[i]`` names text ``i`` in errors (default ``"Text i"``; the command line gives line
        numbers).
        """
        texts = self._texts(X)
        if not texts:
            raise ValueError("Expected at least one text; got an empty sequence.")
        names = [f"Text {index}" for index in range(len(texts))] if names is None else names
        for name, text in zip(names, texts, strict=True):
            if not isinstance(text, str):
                raise ValueError(f"{name} is not a string but {type(text).__name__}: {text!r}.")
            if not text.strip():
                raise ValueError(f"{name} is empty.")
        tokenizer = self.tokenizer_
        plain = tokenizer(texts, add_special_tokens=False)["input_ids"]
        # A literal special token would be masked and scored as a word of the text, or silently
        # skipped as a special one, depending on the tokenizer; neither is the text's likelihood.
        # Unknown pieces are what the tokenizer makes of text it cannot spell: they stay.
        specials = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
        for name, ids in zip(names, plain, strict=True):
            found = [i for i in ids if i in specials]
            if found:
                raise ValueError(
                    f"{name} contains the special token {tokenizer.convert_ids_to_tokens(found[0])!r}; texts "
                    "holding special tokens literally ([CLS], [SEP], [PAD], [MASK], ...) are rejected: remove them."
                )
        n_long = sum(len(ids) + tokenizer.num_special_tokens_to_add() > self.max_length_ for ids in plain)
        if n_long:
            warnings.warn(
                f"{n_long} of {len(texts)} texts are longer than max_length={self.max_length_} tokens "
                "and were truncated.",
                UserWarning,
                stacklevel=3,
            )
        encoded = tokenizer(texts, truncation=True, max_length=self.max_length_, return_special_tokens_mask=True)
        input_ids, positions = [], []
        for name, text, ids, special in zip(
            names, texts, encoded["input_ids"], encoded["special_tokens_mask"], strict=True
        ):
            ids = torch.as_tensor(ids, dtype=torch.long)
            own = (torch.as_tensor(special) == 0) & (ids != tokenizer.pad_token_id)
            if not own.any():
                raise ValueError(f"{name} has no tokens of its own after tokenisation: {text!r}.")
            input_ids.append(ids)
            positions.append(own.nonzero().squeeze(1))
        return EncodedTexts(input_ids, positions)

    # ------------------------------------------------------------------ forward passes

    def _batches(self, encoded, copies):
        """Cut masked copies into forward passes, shortest texts first.

        ``copies[i]`` is ``(masked, targets)``: two boolean tensors of shape (n_copies_i, L_i)
        over text ``i``'s own tokens. Yields ``pieces``: lists of ``(i, start, stop)``.
        """
        order = sorted(range(len(encoded)), key=lambda i: len(encoded.input_ids[i]))
        batch, count = [], 0
        for i in order:
            length = len(encoded.input_ids[i])
            capacity = max(1, min(self.batch_size, self.max_batch_tokens // length))
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

    def _forward(self, encoded, copies, pieces, model=None):
        """Summed log-probability of each copy's target tokens, for one forward pass.

        ``model`` (a ``DistributedDataParallel`` wrapper in training) is run whole, logits read
        at the targets; by default ``model_`` runs its encoder, and its head only at the targets.
        """
        device, tokenizer = self.device_, self.tokenizer_
        width = max(len(encoded.input_ids[i]) for i, _, _ in pieces)
        rows, lengths, target_rows, target_cols, target_ids = [], [], [], [], []
        offset = 0
        for i, start, stop in pieces:
            ids, own = encoded.input_ids[i], encoded.content_positions[i]
            masked, targets = copies[i][0][start:stop], copies[i][1][start:stop]
            block = torch.full((stop - start, width), tokenizer.pad_token_id, dtype=torch.long)
            block[:, : len(ids)] = ids
            columns = block[:, own]
            columns[masked] = tokenizer.mask_token_id
            block[:, own] = columns
            rows.append(block)
            lengths.append(torch.full((stop - start,), len(ids)))
            r, c = targets.nonzero(as_tuple=True)
            target_rows.append(r + offset)
            target_cols.append(own[c])
            target_ids.append(ids[own[c]])
            offset += stop - start
        input_ids = torch.cat(rows).to(device)
        attention_mask = (torch.arange(width) < torch.cat(lengths).unsqueeze(1)).long().to(device)
        target_rows = torch.cat(target_rows).to(device)
        target_cols = torch.cat(target_cols).to(device)
        target_ids = torch.cat(target_ids).to(device)
        split = language_model_head(self.model_) if model is None else None
        model = self.model_ if model is None else model
        with self._autocast():
            if split is not None:
                encoder, head = split
                hidden = encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
                logits = head(hidden[target_rows, target_cols])
            else:
                logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
                logits = logits[target_rows, target_cols]
        sums = torch.zeros(offset, dtype=torch.float64, device=device)
        return sums.index_add(0, target_rows, target_log_probs(logits, target_ids))

    def _autocast_dtype(self):
        """bfloat16 (float16 without bfloat16 support) on CUDA for a model in its own dtype; else ``None``."""
        if self.device_.type != "cuda" or self._dtype() is not None:
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16

    def _autocast(self):
        """Autocast to :meth:`_autocast_dtype` on CUDA; none otherwise."""
        dtype = self._autocast_dtype()
        return torch.autocast("cpu", enabled=False) if dtype is None else torch.autocast("cuda", dtype=dtype)

    def _copy_log_probs(self, encoded, copies, progress=None):
        """Run every copy; per text, the summed target log-probability of each of its copies.

        ``progress``, a tqdm bar counting masked copies, advances after each forward pass.
        """
        results = [np.empty(len(masked)) for masked, _ in copies]
        with torch.inference_mode():
            for pieces in self._batches(encoded, copies):
                sums = self._forward(encoded, copies, pieces).cpu().numpy()
                offset = 0
                for i, start, stop in pieces:
                    results[i][start:stop] = sums[offset : offset + stop - start]
                    offset += stop - start
                if progress is not None:
                    progress.update(offset)
        return results
