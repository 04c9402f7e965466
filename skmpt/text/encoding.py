"""Texts, whatever container holds them, to checked token ids (:class:`EncodedTexts`)."""

import warnings

import numpy as np
import torch

__all__ = ["EncodedTexts", "encode_texts", "texts_of"]


class EncodedTexts:
    """Token ids of validated texts and where each text's own tokens sit.

    Parameters
    ----------
    input_ids : list of torch.Tensor
        One 1-D long tensor per text, special tokens included.
    content_positions : list of torch.Tensor
        One 1-D long tensor per text: the positions in ``input_ids`` of the text's own tokens
        (neither special nor padding), the only ones ever masked and scored.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text import EncodedTexts
    >>> encoded = EncodedTexts([torch.tensor([2, 5, 6, 3])], [torch.tensor([1, 2])])
    >>> len(encoded), encoded.n_tokens.tolist()
    (1, [2])
    """

    def __init__(self, input_ids, content_positions):
        self.input_ids = input_ids
        self.content_positions = content_positions

    def __len__(self):
        return len(self.input_ids)

    @property
    def n_tokens(self):
        """Number of the text's own tokens, per text (ndarray of shape (n_texts,))."""
        return np.array([len(p) for p in self.content_positions])

    def subset(self, indices):
        """The texts at ``indices``, in that order."""
        return EncodedTexts([self.input_ids[i] for i in indices], [self.content_positions[i] for i in indices])


def texts_of(X, text_column=None):
    """The texts of ``X`` as a list, whatever container holds them.

    Parameters
    ----------
    X : list, tuple or array of str of shape (n,) or (n, 1), pandas Series or DataFrame, \
            datasets.Dataset or IterableDataset
    text_column : str or None, default=None
        The column of a DataFrame or dataset; ``None`` picks ``"text"`` or ``"sentence"``, or
        the only string column.

    Returns
    -------
    texts : list

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.text import texts_of
    >>> texts_of(np.array([["a b"], ["b a"]]))
    ['a b', 'b a']
    """
    try:
        import datasets
    except ImportError:  # pragma: no cover - datasets is part of the text extra
        datasets = None
    if datasets is not None and isinstance(X, (datasets.Dataset, datasets.IterableDataset)):
        return _dataset_texts(X, datasets, text_column)
    if hasattr(X, "columns") and hasattr(X, "dtypes"):  # a DataFrame
        from pandas.api.types import is_string_dtype

        column = _text_column(list(X.columns), lambda c: is_string_dtype(X[c]), text_column)
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


def _dataset_texts(X, datasets, text_column):
    """Texts of a ``datasets.Dataset`` or ``IterableDataset``: one column, read in full."""
    columns, features = X.column_names, X.features
    if columns is None:  # an IterableDataset that does not know its columns before it is read
        columns = list(next(iter(X)))

    def is_text(column):
        feature = None if features is None else features.get(column)
        return isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")

    column = _text_column(columns, is_text, text_column)
    if isinstance(X, datasets.Dataset):
        return list(X[column])
    return [row[column] for row in X]


def _text_column(columns, is_text, text_column):
    if text_column is not None:
        if text_column not in columns:
            raise ValueError(f"text_column={text_column!r} is not a column; the columns are {columns}.")
        return text_column
    for name in ("text", "sentence"):
        if name in columns:
            return name
    text_columns = [c for c in columns if is_text(c)]
    if len(text_columns) != 1:
        raise ValueError(f"Cannot tell which column holds the texts among {columns}; set text_column.")
    return text_columns[0]


def _check_texts(texts, names, tokenizer):
    """Every text is a non-blank string without a literal special token; returns its plain ids."""
    for name, text in zip(names, texts, strict=True):
        if not isinstance(text, str):
            raise ValueError(f"{name} is not a string but {type(text).__name__}: {text!r}.")
        if not text.strip():
            raise ValueError(f"{name} is empty.")
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
    return plain


def encode_texts(X, tokenizer, max_length, *, text_column=None, names=None):
    """Validate and tokenise texts: ids with special tokens, and the positions of the text's own.

    Texts longer than ``max_length`` tokens (special tokens included) are truncated with a
    ``UserWarning``.

    Parameters
    ----------
    X : list, tuple or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        Read by :func:`texts_of`.
    tokenizer : transformers tokenizer
        With a padding token.
    max_length : int
        Longest tokenised text, special tokens included.
    text_column : str or None, default=None
        As in :func:`texts_of`.
    names : list of str or None, default=None
        ``names[i]`` names text ``i`` in errors (default ``"Text i"``; the command line gives
        line numbers).

    Returns
    -------
    encoded : EncodedTexts

    Raises
    ------
    ValueError
        Naming the text: one that is not a string, is blank, holds a special token literally,
        or has no token of its own after tokenisation.

    Examples
    --------
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import encode_texts
    >>> texts = load_wordnet_sentences()[:50]
    >>> tokenizer = make_wordpiece_tokenizer(texts, vocab_size=200)
    >>> encoded = encode_texts(texts[:2], tokenizer, 512)
    >>> bool((encoded.n_tokens + 2 == [len(ids) for ids in encoded.input_ids]).all())  # [CLS] and [SEP]
    True
    """
    texts = texts_of(X, text_column)
    if not texts:
        raise ValueError("Expected at least one text; got an empty sequence.")
    names = [f"Text {index}" for index in range(len(texts))] if names is None else names
    plain = _check_texts(texts, names, tokenizer)
    n_long = sum(len(ids) + tokenizer.num_special_tokens_to_add() > max_length for ids in plain)
    if n_long:
        warnings.warn(
            f"{n_long} of {len(texts)} texts are longer than max_length={max_length} tokens and were truncated.",
            UserWarning,
            stacklevel=3,
        )
    encoded = tokenizer(texts, truncation=True, max_length=max_length, return_special_tokens_mask=True)
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
