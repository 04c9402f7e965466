"""The outputs of :class:`~skmpt.MLMCurveScorer` beyond the curve: the pseudo-log-likelihood and
its variants, per-token and per-word scores, pseudo-perplexity, the paper's area, the chain's
spread across orderings, conditional scores of a continuation given a context, units and
standard errors.

They live in :class:`MLMOutputsMixin`, which ``MLMCurveScorer`` inherits; the work is done by
the scoring strategies of :mod:`skmpt.text.scoring` and the plain functions here.
"""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..objectives import curve_area
from .conditional import conditional_log_likelihood, encode_pairs
from .scoring import (
    ChainSpread,
    CurveMasks,
    CurveTokenScores,
    SingleTokenMasks,
    TokenScores,
    WholeWordMasks,
)

__all__ = ["METRICS", "MLMOutputsMixin", "UNITS", "scores_table", "word_sums"]

#: Variants of the pseudo-log-likelihood: every token masked alone (Salazar et al., 2020), or
#: with the tokens of its word to its right also masked (PLL-word-l2r, Kauf and Ivanova, 2023).
METRICS = ("original", "within_word_l2r")

#: Units of the scores and the factor from nats to each.
UNITS = {"nats": 1.0, "bits": 1.0 / np.log(2.0)}

_LEVELS = ("token", "word")


def _check_option(value, name, options):
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}.")


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


class MLMOutputsMixin:
    """Outputs of :class:`~skmpt.MLMCurveScorer` besides ``transform`` and ``score_samples``.

    Every log-probability is in the scorer's ``unit`` (nats or bits); pseudo-perplexities have
    no unit. Word-level outputs and ``metric="within_word_l2r"`` need a tokenizer that gives
    word ids (a fast tokenizer: ``tokenizer.is_fast``; other tokenizers are an error).
    """

    def _unit(self, values):
        return values * UNITS[self.unit]

    def _masks(self, strategy):
        """``strategy``, drawn over words when ``whole_word_masking``."""
        return WholeWordMasks(strategy) if self.whole_word_masking else strategy

    def _check_std(self, return_std, always=False):
        """``return_std`` (or the spread, ``always``) needs two masks or orderings: checked before scoring."""
        if (return_std or always) and self.score_masks < 2:
            what = "return_std=True" if return_std else "the spread across orderings"
            raise ValueError(
                f"{what} needs score_masks >= 2 (a standard deviation of the Monte Carlo draws); got "
                f"score_masks={self.score_masks}."
            )

    def _with_std(self, results, return_std):
        """Split ``[value, error]`` results, each in the scorer's unit."""
        if not return_std:
            return self._unit(results)
        return self._unit(results[:, 0]), self._unit(results[:, 1])

    def pseudo_log_likelihood(self, X, *, metric="original"):
        """Pseudo-log-likelihood ``sum_j log p(x_j | x_{-j})``, every token masked once, exactly.

        It is ``L * S(x; 1)``, as computed by the MLM scoring tools (Salazar et al., 2020).
        ``metric="within_word_l2r"`` is PLL-word-l2r (Kauf and Ivanova, 2023): the copy that
        scores a token of a multi-token word also masks the tokens of that word to its right,
        so a word is not guessed from its own pieces; it is minicons' ``PLL_metric``.

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        metric : {"original", "within_word_l2r"}, default="original"

        Returns
        -------
        pll : ndarray of shape (n_texts,)
        """
        _check_option(metric, "metric", METRICS)
        return self._unit(self._score(X, SingleTokenMasks(metric)))

    def pseudo_perplexity(self, X, *, metric="original", level="token"):
        """Pseudo-perplexity ``exp(-PLL / n)`` per text, ``n`` its number of tokens or of words.

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        metric : {"original", "within_word_l2r"}, default="original"
        level : {"token", "word"}, default="token"
            Per token (``n = L``) or per word (``n`` = the tokenizer's words).

        Returns
        -------
        ppl : ndarray of shape (n_texts,)
        """
        _check_option(metric, "metric", METRICS)
        _check_option(level, "level", _LEVELS)
        encoded = self._encode(X, words=level == "word" or metric == "within_word_l2r")
        pll = self._score(X, SingleTokenMasks(metric), encoded=encoded)
        counts = encoded.n_tokens if level == "token" else [int(w.max()) + 1 for w in encoded.word_ids]
        return np.exp(-pll / np.asarray(counts))

    def token_scores(self, X, *, level="token", metric="original", curve=False):
        """Each token's (or word's) log-probability: in the PLL, or on the MPT curve.

        With ``curve=False``, token ``j``'s ``log p(x_j | x_{-j})`` in the pseudo-log-likelihood
        (its masks set by ``metric``); they sum to :meth:`pseudo_log_likelihood`. With
        ``curve=True``, at each rate of ``mask_rates_``, the mean of token ``j``'s
        log-probability over the ``score_masks`` masks of that rate that mask it (NaN when none
        does); with ``whole_word_masking`` these masks are drawn over words, as :meth:`transform`'s
        (a masked word masks, and scores, all its tokens). ``level="word"`` sums a word's tokens
        (the tokenizer's word ids). With
        ``set_output(transform="pandas")`` the result is one long table
        (:func:`scores_table`: ``text, position, token, word, score``, or one ``S@<rate>``
        column per rate with ``curve=True``).

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        level : {"token", "word"}, default="token"
        metric : {"original", "within_word_l2r"}, default="original"
            Only ``"original"`` with ``curve=True``.
        curve : bool, default=False

        Returns
        -------
        scores : list of ndarray or pandas.DataFrame
            Per text, shape (n_units,), or (n_units, n_rates) with ``curve=True``.
        """
        _check_option(level, "level", _LEVELS)
        _check_option(metric, "metric", METRICS)
        if curve and metric != "original":
            raise ValueError(f"metric={metric!r} is a variant of the PLL; the curve's token scores take no metric.")
        output = getattr(self, "_sklearn_output_config", {}).get("transform")  # what set_output chose
        if output is None:
            from sklearn import get_config

            output = get_config()["transform_output"]
        check_is_fitted(self)
        # the table's word column is filled whenever the tokenizer gives word ids
        need_words = (level == "word" or metric == "within_word_l2r" or (curve and self.whole_word_masking)
                 or (output != "default" and getattr(self.tokenizer_, "is_fast", False)))
        encoded = self._encode(X, words=need_words)
        strategy = self._masks(CurveTokenScores(self.mask_rates_, self.score_masks)) if curve else TokenScores(metric)
        scores = [self._unit(values) for values in self._score(X, strategy, encoded=encoded)]
        if level == "word":
            scores = [word_sums(values, words.numpy()) for values, words in zip(scores, encoded.word_ids, strict=True)]
        if output == "default":
            return scores
        columns = tuple(self.get_feature_names_out()) if curve else ("score",)
        table = scores_table(scores, encoded, self.tokenizer_, level=level, columns=columns)
        if output == "polars":
            import polars

            return polars.from_pandas(table)
        return table

    def inconsistency(self, X, *, return_std=False):
        """Spread of the chain across orderings: how far the model's conditionals are from one joint.

        Along each of ``score_masks`` random orderings the chain gives ``sum_t log p(x_{s_t} |
        x_{s_<t})``; this is their standard deviation per text (:class:`~skmpt.text.ChainSpread`).
        It is 0 when the conditionals come from one joint (every ordering gives ``log p(x)``) and
        grows with their inconsistency. The gap between the sweep and the chain does not measure
        it: both have expectation ``sum_M S(x; M)`` for any conditionals.

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        return_std : bool, default=False
            Also return the standard error of each spread (delta method).

        Returns
        -------
        spread : ndarray of shape (n_texts,)
        spread_std : ndarray of shape (n_texts,)
            Only with ``return_std=True``.
        """
        self._check_std(return_std, always=True)
        return self._with_std(self._score(X, self._masks(ChainSpread(self.score_masks))), return_std)

    def paper_area(self, X, *, scale=512):
        """The paper's area under the MPT curve: ``scale * sum_r (r - r_prev) * S(x; r)`` per text.

        Table 2 of the paper reports it with ``scale = 512`` (BERT's longest input) over rates
        0.01..0.99; it is not an estimate of ``log p(x)`` (``score_samples`` is). Widths are
        ``r_1 - 0`` for the first rate and the gaps between consecutive rates after it.

        Parameters
        ----------
        X : list or array of str, pandas Series or DataFrame, datasets.Dataset or IterableDataset
        scale : float, default=512

        Returns
        -------
        area : ndarray of shape (n_texts,)
        """
        return curve_area(self.transform(X), self.mask_rates_, scale=scale)

    def conditional_transform(self, contexts, continuations, *, return_std=False):
        """Conditional MPT curve of each continuation given its context, at each rate of ``mask_rates_``.

        The text is ``context + continuation``; masks of ``M = round(rate * L_c)`` tokens are drawn
        among the continuation's ``L_c`` tokens only, the context always visible, so the curve's
        sum over ``M = 1..L_c`` is ``log p(continuation | context)``
        (:meth:`conditional_score_samples`). Start the continuation with its space (``" sat"``).

        Parameters
        ----------
        contexts, continuations : sequences of str of the same length
        return_std : bool, default=False
            Also return each value's standard error over the masks (needs ``score_masks >= 2``).

        Returns
        -------
        curve : ndarray of shape (n_pairs, n_rates)
        curve_std : ndarray of shape (n_pairs, n_rates)
            Only with ``return_std=True``.
        """
        check_is_fitted(self)
        self._check_std(return_std)
        encoded = encode_pairs(contexts, continuations, self.tokenizer_, self.max_length_)
        strategy = CurveMasks(self.mask_rates_, self.score_masks, return_std)
        return self._with_std(self._score(None, strategy, encoded), return_std)

    def conditional_score_samples(self, contexts, continuations, *, method=None, return_std=False):
        """``log p(continuation | context)`` of each pair, with masks among the continuation's tokens.

        :func:`~skmpt.text.conditional_log_likelihood` with ``max(2, score_masks)`` samples: the
        chain (one ordering is exact for a model whose conditionals come from one joint), the
        sweep over every mask size, or LLaDA's Monte Carlo estimator with uniform mask sizes;
        :func:`~skmpt.text.compare_conditional_estimators` sets them side by side. For minimal
        pairs and multiple choice see :func:`~skmpt.text.multiple_choice`.

        Parameters
        ----------
        contexts, continuations : sequences of str of the same length
            Joined as ``context + continuation``: start the continuation with its space.
        method : {"chain", "sweep", "uniform"} or None, default=None
            None is the scorer's ``score_method``.
        return_std : bool, default=False
            Also return each estimate's Monte Carlo standard error (needs ``score_masks >= 2``).

        Returns
        -------
        scores : ndarray of shape (n_pairs,)
        scores_std : ndarray of shape (n_pairs,)
            Only with ``return_std=True``.
        """
        check_is_fitted(self)
        self._check_std(return_std)  # as every estimate's: one mask gives no standard error
        method = self.score_method if method is None else method
        result = conditional_log_likelihood(self, contexts, continuations, method=method)
        scores = self._unit(result.log_likelihood)
        return (scores, self._unit(result.std)) if return_std else scores
