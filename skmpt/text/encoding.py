"""Texts, whatever container holds them, to checked token ids (:class:`EncodedTexts`)."""

import os
import sys
import warnings
from collections.abc import ItemsView, KeysView, Mapping, ValuesView
from collections.abc import Set as AbstractSet

import numpy as np
import torch

__all__ = ["EncodedTexts", "check_max_length", "encode_texts", "texts_of"]


class EncodedTexts:
    """Token ids of validated texts and where each text's own tokens sit.

    Parameters
    ----------
    input_ids : list of torch.Tensor
        One 1-D long tensor per text, special tokens included.
    content_positions : list of torch.Tensor
        One 1-D long tensor per text: the positions in ``input_ids`` of the text's own tokens
        (neither special nor padding), the only ones ever masked and scored.
    word_ids : list of torch.Tensor or None, default=None
        One 1-D long tensor per text, aligned with ``content_positions``: the word (0, 1, ...)
        each of the text's own tokens belongs to, from the tokenizer's word ids.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text import EncodedTexts
    >>> encoded = EncodedTexts([torch.tensor([2, 5, 6, 3])], [torch.tensor([1, 2])])
    >>> len(encoded), encoded.n_tokens.tolist()
    (1, [2])
    """

    def __init__(self, input_ids, content_positions, word_ids=None):
        self.input_ids = input_ids
        self.content_positions = content_positions
        self.word_ids = word_ids

    def __len__(self):
        return len(self.input_ids)

    @property
    def n_tokens(self):
        """Number of the text's own tokens, per text (ndarray of shape (n_texts,))."""
        return np.array([len(p) for p in self.content_positions])

    def subset(self, indices):
        """The texts at ``indices``, in that order."""
        word_ids = None if self.word_ids is None else [self.word_ids[i] for i in indices]
        positions = [self.content_positions[i] for i in indices]
        return EncodedTexts([self.input_ids[i] for i in indices], positions, word_ids)


def texts_of(X, text_column=None):
    """The texts of ``X`` as a list, in order, whatever container holds them.

    Accepted: a list, tuple or array of texts (of shape (n,) or (n, 1)), a pandas Series or
    DataFrame, a ``datasets.Dataset`` or ``IterableDataset``, a mapping from column names to
    texts with ``text_column``, and an iterator or generator of texts (read once, in its order).
    Refused with a message that says what to pass: a single string, a ``datasets.DatasetDict``
    (pass one split, ``X["train"]``), a mapping without ``text_column`` (its keys are never read
    as texts), and unordered collections (set, frozenset, dict views), whose order is arbitrary.

    Parameters
    ----------
    X : list, tuple or array of str of shape (n,) or (n, 1), pandas Series or DataFrame, \
            datasets.Dataset or IterableDataset, mapping, iterator or generator
    text_column : str or None, default=None
        The column of a DataFrame or dataset, or the key of a mapping; ``None`` picks ``"text"``
        or ``"sentence"``, or the only string column, of a DataFrame or dataset.

    Returns
    -------
    texts : list

    Raises
    ------
    ValueError
        When ``X`` is one of the refused containers, or ``text_column`` is not one of its columns.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.text.encoding import texts_of
    >>> texts_of(np.array([["a b"], ["b a"]]))
    ['a b', 'b a']
    >>> texts_of({"label": [1, 0], "text": ["a b", "b a"]}, text_column="text")
    ['a b', 'b a']
    >>> texts_of({"a b", "b a"})
    Traceback (most recent call last):
    ...
    ValueError: Expected an ordered sequence of texts; got a set, whose order is arbitrary. Pass a list ...
    """
    # X can be a Dataset only where Hugging Face's datasets is imported; a folder named "datasets" on
    # the path, imported as a namespace package where the library is not installed, is not it.
    datasets = sys.modules.get("datasets")
    if not hasattr(datasets, "DatasetDict"):
        datasets = None
    if datasets is not None and isinstance(X, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        splits = list(X)
        raise ValueError(
            f"Expected the texts of one split; got a {type(X).__name__} of the splits {splits} (what "
            f"datasets.load_dataset returns without split=). Pass one split, e.g. X[{(splits or ['train'])[0]!r}]."
        )
    if datasets is not None and isinstance(X, (datasets.Dataset, datasets.IterableDataset)):
        return _dataset_texts(X, datasets, text_column)
    if hasattr(X, "columns") and hasattr(X, "dtypes"):  # a DataFrame
        from pandas.api.types import is_string_dtype

        column = _text_column(list(X.columns), lambda c: is_string_dtype(X[c]), text_column)
        return list(X[column])
    if isinstance(X, Mapping):
        return _mapping_texts(X, text_column)
    _check_ordered(X)
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


def _check_ordered(X):
    """Refuse a single string and the containers whose iteration is not a list of texts in order."""
    if isinstance(X, (str, bytes)):
        what = "string" if isinstance(X, str) else "bytes object"
        raise ValueError(f"Expected a sequence of texts, got a single {what}; wrap it in a list.")
    if isinstance(X, (KeysView, ItemsView, ValuesView)):
        raise ValueError(
            f"Expected a sequence of texts; got a {type(X).__name__}, a view of a mapping. Pass a list of the texts."
        )
    if isinstance(X, AbstractSet):
        raise ValueError(
            f"Expected an ordered sequence of texts; got a {type(X).__name__}, whose order is arbitrary. Pass a "
            "list (or another ordered sequence): the scores come back in the order of the texts."
        )


def _mapping_texts(X, text_column):
    """The texts of a mapping from column names to texts: only the column ``text_column``."""
    keys = list(X)
    if text_column is None:
        raise ValueError(
            f"Expected a sequence of texts; got a {type(X).__name__} with the keys {keys[:10]}. Its keys are not "
            "texts: set text_column to the key that holds them, or pass the texts themselves."
        )
    if text_column not in X:
        raise ValueError(f"text_column={text_column!r} is not a key of the mapping; its keys are {keys[:10]}.")
    texts = X[text_column]
    if isinstance(texts, Mapping):
        raise ValueError(f"X[{text_column!r}] is a {type(texts).__name__}, not a sequence of texts.")
    return texts_of(texts)


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


# Before it is tokenised, a text is cut to this many characters per token that fits (at its last
# space when there is one), so that a single huge line costs what a long one does; a cut that
# leaves room for more tokens is made again twice as long, up to the whole text.
_CHARACTERS_PER_TOKEN = 16


def _cut(text, n_characters):
    """The first ``n_characters`` of ``text``, cut back to its last whitespace in their second half if any."""
    if len(text) <= n_characters:
        return text
    end = n_characters
    while end > n_characters // 2 and not text[end - 1].isspace():
        end -= 1
    return text[:end] if end > n_characters // 2 else text[:n_characters]


def _check_texts(texts, names):
    """Every text is a non-blank string."""
    for name, text in zip(names, texts, strict=True):
        if not isinstance(text, str):
            raise ValueError(f"{name} is not a string but {type(text).__name__}: {text!r}.")
        if not text or text.isspace():
            raise ValueError(f"{name} is empty.")


def _plain_ids(texts, names, tokenizer, limit):
    """``(ids, cuts)``: each text's own ids, at most ``limit + 1`` (more than ``limit``: truncated), and the
    cut of the text they come from."""
    ids, cuts = [None] * len(texts), [None] * len(texts)
    pending, size = list(range(len(texts))), _CHARACTERS_PER_TOKEN * (limit + 1)
    while pending:
        cut = [_cut(texts[i], size) for i in pending]
        for i, text in zip(pending, cut, strict=True):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError(
                    f"{names[i]} cannot be encoded: the character {text[exc.start]!r} at position {exc.start} is "
                    f"not valid Unicode text ({exc.reason}; a lone surrogate?)."
                ) from None
        encoded = tokenizer(cut, add_special_tokens=False, truncation=True, max_length=limit + 1)["input_ids"]
        still = []
        for i, text, text_ids in zip(pending, cut, encoded, strict=True):
            if len(text_ids) <= limit and len(text) < len(texts[i]):  # room left: the cut may have dropped tokens
                still.append(i)
            else:
                ids[i], cuts[i] = text_ids, text
        pending, size = still, 2 * size
    return ids, cuts


def _check_special_tokens(plain, names, tokenizer):
    """No text holds a special token literally, among the tokens that are scored."""
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


# What a tokenizer's unknown tokens usually mean, by the tokenizer's name (``name_or_path``).
UNKNOWN_TOKEN_HINTS = {
    "antiberty": "AntiBERTy's residues are upper-case one-letter amino-acid codes (A C D E F G H I K L M N P Q R S T V "
                 "W Y): lower case, gaps, X, * and digits have no token.",
}


def warn_unknown_tokens(plain, texts, names, tokenizer, shown=5):
    """One ``UserWarning`` for the texts whose own tokens include the unknown token: each text's count and characters.

    An unknown token is scored as any other, so a text spelt in characters the tokenizer does
    not know (a lower-case antibody sequence for AntiBERTy) gets a score that says little of
    it. The characters come from the tokenizer's offsets (fast tokenizers only).

    Parameters
    ----------
    plain : list of list of int
        Each text's own ids (no special tokens).
    texts : list of str
    names : list of str
        What names each text in the warning.
    tokenizer : transformers tokenizer
    shown : int, default=5
        Most texts named in the warning.

    Examples
    --------
    >>> import warnings
    >>> from skmpt.datasets import make_wordpiece_tokenizer
    >>> from skmpt.text.encoding import warn_unknown_tokens
    >>> tokenizer = make_wordpiece_tokenizer(["abc"], vocab_size=20)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_unknown_tokens([tokenizer("a z", add_special_tokens=False)["input_ids"]], ["a z"], ["Text 0"],
    ...                         tokenizer)
    >>> print(caught[0].message)
    1 of 1 texts hold 1 tokens the tokenizer does not know, each scored as '[UNK]': Text 0 (1: 'z' 1).
    """
    unknown = tokenizer.unk_token_id
    counts = [sum(token == unknown for token in ids) for ids in plain] if unknown is not None else []
    flagged = [i for i, count in enumerate(counts) if count]
    if not flagged:
        return
    spans = {}
    if getattr(tokenizer, "is_fast", False):
        offsets = tokenizer([texts[i] for i in flagged[:shown]], add_special_tokens=False,
                            return_offsets_mapping=True)
        for i, ids, pairs in zip(flagged, offsets["input_ids"], offsets["offset_mapping"], strict=False):
            found = [texts[i][start:stop] for token, (start, stop) in zip(ids, pairs, strict=True) if token == unknown]
            spans[i] = {span: found.count(span) for span in dict.fromkeys(found)}
    described = []
    for i in flagged[:shown]:
        characters = ", ".join(f"{span!r} {count}" for span, count in spans.get(i, {}).items())
        described.append(f"{names[i]} ({counts[i]}{': ' + characters if characters else ''})")
    more = f" and {len(flagged) - shown} more" if len(flagged) > shown else ""
    vocab = tokenizer.get_vocab()
    upper = sorted({span for found in spans.values() for span in found
                    if span != span.upper() and span.upper() in vocab})
    hints = [f"{', '.join(map(repr, upper))} are in the vocabulary in upper case."] if upper else []
    hint = UNKNOWN_TOKEN_HINTS.get(str(getattr(tokenizer, "name_or_path", "")))
    hints += [hint] if hint else []
    warnings.warn(
        f"{len(flagged)} of {len(plain)} texts hold {sum(counts)} tokens the tokenizer does not know, each scored as "
        f"{tokenizer.unk_token!r}: {'; '.join(described)}{more}.{''.join(' ' + text for text in hints)}",
        UserWarning,
        stacklevel=_caller_outside_skmpt(),
    )


def _caller_outside_skmpt():
    """The ``stacklevel`` of the first caller outside skmpt, seen from the function that calls this one."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def check_max_length(tokenizer, max_length, name="max_length"):
    """The number of the text's own tokens that fit in ``max_length``; at least one, else an error.

    Parameters
    ----------
    tokenizer : transformers tokenizer
    max_length : int
        Longest tokenised text, special tokens included.
    name : str, default="max_length"
        What names ``max_length`` in the error.

    Returns
    -------
    limit : int
        ``max_length`` less the special tokens the tokenizer adds to a text.

    Raises
    ------
    ValueError
        When no token of the text fits beside the special tokens.

    Examples
    --------
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text.encoding import check_max_length
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:50], vocab_size=200)
    >>> check_max_length(tokenizer, 8)  # [CLS] and [SEP] take two
    6
    """
    n_special = tokenizer.num_special_tokens_to_add()
    if max_length - n_special < 1:
        raise ValueError(
            f"{name}={max_length} leaves no room for a token: the tokenizer adds {n_special} special tokens to "
            f"every text; {name} must be at least {n_special + 1}."
        )
    return max_length - n_special


def _own_word_ids(encoded, index, own, tokenizer, name):
    """The word of each of a text's own tokens, numbered 0, 1, ... in order."""
    try:
        words = encoded.word_ids(index)
    except (ValueError, AttributeError):
        raise ValueError(
            f"Word-level scores need a tokenizer that gives word ids: a fast tokenizer (is_fast=True, backed by "
            f"the tokenizers library, e.g. PreTrainedTokenizerFast or AutoTokenizer's default); "
            f"{type(tokenizer).__name__} gives none."
        ) from None
    words = [words[int(position)] for position in own]
    if any(word is None for word in words):
        raise ValueError(f"{name} has tokens of its own that belong to no word of the tokenizer's word ids.")
    return torch.as_tensor(np.unique(words, return_inverse=True)[1].reshape(-1), dtype=torch.long)


def encode_texts(X, tokenizer, max_length, *, text_column=None, names=None, word_ids=False):
    """Validate and tokenise texts: ids with special tokens, and the positions of the text's own.

    Texts longer than ``max_length`` tokens (special tokens included) are truncated with one
    ``UserWarning`` per call. A text is cut to a bounded number of characters (at a space when it
    has one) before it is tokenised, so the work on a single huge line does not grow with its
    length; a literal special token is looked for only in the tokens that are kept.

    Parameters
    ----------
    X : list, tuple or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset, \
            mapping with ``text_column``, iterator
        The texts (see :mod:`skmpt.text` for what each container means).
    tokenizer : transformers tokenizer
        With a padding token.
    max_length : int
        Longest tokenised text, special tokens included.
    text_column : str or None, default=None
        The column of a DataFrame, dataset or mapping that holds the texts.
    names : list of str or None, default=None
        ``names[i]`` names text ``i`` in errors (default ``"Text i"``; the command line gives
        line numbers).
    word_ids : bool, default=False
        Also read the word of each token (``EncodedTexts.word_ids``): only a fast tokenizer
        gives word ids; another is a ``ValueError``.

    Returns
    -------
    encoded : EncodedTexts

    Raises
    ------
    ValueError
        Naming the text: one that is not a string, is blank, is not valid Unicode (a lone
        surrogate), holds a special token literally, or has no token of its own after
        tokenisation; also when ``max_length`` leaves no room for a token.

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
    _check_texts(texts, names)
    limit = check_max_length(tokenizer, max_length)
    plain, texts = _plain_ids(texts, names, tokenizer, limit)  # a text too long to fit comes back cut
    _check_special_tokens([ids[:limit] for ids in plain], names, tokenizer)
    warn_unknown_tokens([ids[:limit] for ids in plain], texts, names, tokenizer)
    n_long = sum(len(ids) > limit for ids in plain)
    if n_long:
        warnings.warn(
            f"{n_long} of {len(texts)} texts are longer than max_length={max_length} tokens and were truncated.",
            UserWarning,
            stacklevel=3,
        )
    encoded = tokenizer(texts, truncation=True, max_length=max_length, return_special_tokens_mask=True)
    input_ids, positions, words = [], [], []
    for index, (name, text, ids, special) in enumerate(zip(
        names, texts, encoded["input_ids"], encoded["special_tokens_mask"], strict=True
    )):
        ids = torch.as_tensor(ids, dtype=torch.long)
        own = (torch.as_tensor(special) == 0) & (ids != tokenizer.pad_token_id)
        if not own.any():
            raise ValueError(f"{name} has no tokens of its own after tokenisation: {text!r}.")
        input_ids.append(ids)
        positions.append(own.nonzero().squeeze(1))
        if word_ids:
            words.append(_own_word_ids(encoded, index, positions[-1], tokenizer, name))
    return EncodedTexts(input_ids, positions, words if word_ids else None)
