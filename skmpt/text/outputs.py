"""Per-token and per-word outputs of a masked LM's scores, and the units of every score.

:func:`word_sums` adds per-token scores up over each word's tokens, and :func:`scores_table`
lays per-token or per-word scores out as one long table (pandas), as
:meth:`skmpt.MLMCurveScorer.token_scores` returns them with ``set_output(transform="pandas")``.
"""

import numpy as np

from .._validation import Options, validated

__all__ = ["UNITS", "scores_table", "unit_factor", "word_sums"]

#: Units of the scores and the factor from nats to each.
UNITS = {"nats": 1.0, "bits": 1.0 / np.log(2.0)}


@validated({"unit": [Options(UNITS)]})
def unit_factor(unit):
    """The factor from nats to ``unit`` ("nats" or "bits"); another unit is a ValueError naming it.

    Examples
    --------
    >>> from skmpt.text.outputs import unit_factor
    >>> unit_factor("nats"), round(float(unit_factor("bits")), 4)
    (1.0, 1.4427)
    """
    return UNITS[unit]


def word_sums(values, word_ids):
    """Sum per-token values (shape (L,) or (L, k)) over each word's tokens: shape (W,) or (W, k).

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.text import word_sums
    >>> word_sums(np.array([-1.0, -2.0, -0.5]), np.array([0, 0, 1]))
    array([-3. , -0.5])
    """
    word_ids = np.asarray(word_ids)
    sums = np.zeros((int(word_ids.max()) + 1, *np.shape(values)[1:]))
    np.add.at(sums, word_ids, values)
    return sums


def scores_table(scores, encoded, tokenizer, *, level="token", columns=("score",)):
    """The long table of per-token or per-word scores: one row per text and token (or word).

    Parameters
    ----------
    scores : list of ndarray
        Per text, shape (n_units,) or (n_units, len(columns)).
    encoded : EncodedTexts
        The texts as scored (with word ids when ``level="word"``).
    tokenizer : transformers tokenizer
    level : {"token", "word"}, default="token"
    columns : tuple of str, default=("score",)
        Names of the score columns.

    Returns
    -------
    table : pandas.DataFrame
        Columns ``text`` (the text's index), ``position`` (the token's index among the text's
        own tokens; a word's first token), ``token`` (a word's tokens joined by spaces),
        ``word`` (the word's index; missing without word ids) and the score columns.
    """
    import pandas as pd

    frames = []
    for index, values in enumerate(scores):
        ids = encoded.input_ids[index][encoded.content_positions[index]]
        tokens = np.asarray(tokenizer.convert_ids_to_tokens(ids.tolist()), dtype=object)
        words = None if encoded.word_ids is None else encoded.word_ids[index].numpy()
        positions = np.arange(len(tokens))
        if level == "word":
            first = np.r_[True, words[1:] != words[:-1]]
            tokens = np.array([" ".join(tokens[words == w]) for w in range(words.max() + 1)], dtype=object)
            positions, words = positions[first], words[first]
        frame = pd.DataFrame({"text": index, "position": positions, "token": tokens,
                              "word": pd.array(words if words is not None else [None] * len(tokens), "Int64")})
        values = np.asarray(values).reshape(len(tokens), len(columns))
        for k, column in enumerate(columns):
            frame[column] = values[:, k]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)
