"""Conditional likelihood ``log p(continuation | context)`` of a masked predictor, with standard errors.

The context's tokens stay visible; masks fall only among the continuation's ``L`` tokens, for
which the MPT identity holds: ``sum_{M=1..L} S(continuation | context; M)``, with ``S`` the
curve over masks of the continuation's tokens, is ``log p(continuation | context)`` for a model
whose conditionals come from one joint. Every function here calls the one budgeted estimator
(:class:`~skmpt.text.estimation.BudgetedEstimator`, the lm-eval model's too): exact by
enumeration where the ``2**L - 1`` masks fit ``max_forward_passes``, else the estimator
``score_method`` names (:mod:`skmpt.text.strategies`; ``"auto"`` lets a pilot choose), the
choices of one question sharing their random numbers:

- ``"chain"``: random orderings of the continuation's tokens, each predicted given the context
  and the tokens revealed before it (``L`` copies per ordering; exact, zero spread, for a joint);
- ``"uniform"``, ``"stratified"``: LLaDA's protocol (Nie et al. 2025): masks of uniformly
  random sizes over the answer, prompt always visible, each worth ``(L / M) sum_masked log p``;
- ``"sweep"``: masks at every size (``L`` copies per round);
- ``"nested"``, ``"balanced"``, ``"controlled"``, ...: see :func:`~skmpt.text.strategies.estimator_strategy`;
- ``"exhaustive"``: every mask of the continuation's tokens (``2**L - 1`` copies): the exact
  expectation of the others, with no Monte Carlo error, for short continuations.

:func:`compare_conditional_estimators` runs them side by side and reports the forward passes
(masked copies) each needs for a given standard error. Texts are joined as
``context + continuation`` exactly as given (put the space in the continuation, ``" sat"``);
a token that straddles the join, an empty context or continuation, or a pair longer than
``max_length`` is a ``ValueError`` naming the pair.
"""

from numbers import Integral, Real

import numpy as np
from sklearn.utils import Bunch
from sklearn.utils.validation import check_random_state

from .._validation import Interval, Options, validated
from ..objectives.vocabulary import renamed_parameter
from .encoding import EncodedTexts, check_max_length, encode_texts, texts_of
from .estimation import BudgetedEstimator, pair_keys
from .outputs import UNITS, unit_factor
from .strategies import ESTIMATOR_METHODS

__all__ = ["compare_conditional_estimators", "conditional_log_likelihood", "encode_pairs", "multiple_choice"]

#: What the parameters shared by the conditional functions accept.
_CONSTRAINTS = {
    "score_method": [Options({"auto", *ESTIMATOR_METHODS})],
    "score_masks": [None, Interval(Integral, 2, None, closed="left")],
    "max_forward_passes": [Interval(Integral, 2, None, closed="left")],
    "adaptive": ["boolean"],
    "unit": [Options(set(UNITS))],
    "random_state": [None, Interval(Integral, 0, 2**32 - 1, closed="both"), np.random.RandomState],
    "verbose": ["verbose"],
    "target_std": [Interval(Real, 0, None, closed="neither")],
    "score_methods": [tuple, list],
}


def encode_pairs(contexts, continuations, tokenizer, max_length):
    """Encode ``context + continuation`` with the continuation's tokens as the only ones masked and scored.

    Parameters
    ----------
    contexts, continuations : sequences of str of the same length
    tokenizer : transformers tokenizer
        A fast tokenizer (its offsets find the join).
    max_length : int

    Returns
    -------
    encoded : EncodedTexts
        ``content_positions`` hold the continuation's positions only.

    Examples
    --------
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import encode_pairs
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> encoded = encode_pairs(["a dog"], [" is an animal"], tokenizer, 64)
    >>> tokenizer.convert_ids_to_tokens(encoded.input_ids[0][encoded.content_positions[0]])
    ['is', 'an', 'an', '##im', '##al']
    """
    contexts, continuations = texts_of(contexts), texts_of(continuations)
    if len(contexts) != len(continuations):
        raise ValueError(f"Got {len(contexts)} contexts and {len(continuations)} continuations; one of each per pair.")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("Conditional scoring needs a fast tokenizer (its offsets find where the context ends).")
    names = [f"Pair {i}" for i in range(len(contexts))]
    for name, context, continuation in zip(names, contexts, continuations, strict=True):
        if not isinstance(context, str) or not isinstance(continuation, str):
            raise ValueError(f"{name}: the context and the continuation must be strings.")
    joined = [context + continuation for context, continuation in zip(contexts, continuations, strict=True)]
    plain = tokenizer(joined, add_special_tokens=False, return_offsets_mapping=True)
    limit = check_max_length(tokenizer, max_length)
    boundaries = []
    for name, context, continuation, ids, offsets in zip(names, contexts, continuations, plain["input_ids"],
                                                         plain["offset_mapping"], strict=True):
        n_context = sum(start < len(context) for start, _ in offsets)
        if n_context == 0:
            raise ValueError(f"{name}: the context {context!r} tokenizes to nothing; give a context with tokens.")
        if n_context == len(ids):
            raise ValueError(f"{name}: the continuation {continuation!r} tokenizes to nothing; give a continuation "
                             "with tokens.")
        if offsets[n_context - 1][1] > len(context):
            raise ValueError(f"{name}: a token straddles the end of the context {context!r}; end the context at a "
                             "word boundary and start the continuation with its space (' word').")
        if len(ids) > limit:
            raise ValueError(f"{name} has {len(ids)} tokens, more than max_length={max_length} allows ({limit}); "
                             "a truncated continuation would be scored wrongly.")
        boundaries.append(n_context)
    encoded = encode_texts(joined, tokenizer, max_length, names=names)
    positions = [own[n:] for own, n in zip(encoded.content_positions, boundaries, strict=True)]
    return EncodedTexts(encoded.input_ids, positions)


def _seed(random_state):
    """The estimator's seed: an int ``random_state`` itself (the lm-eval model's ``seed``), else one drawn from it."""
    if isinstance(random_state, Integral) and not isinstance(random_state, bool) and 0 <= random_state < 2**32:
        return int(random_state)
    return int(check_random_state(random_state).randint(2**32, dtype=np.uint64))


def _estimates(runner, contexts, continuations, questions, *, score_method, score_masks, max_forward_passes,
               random_state, adaptive=True, exact=True, verbose=0):
    """The pairs encoded and their :class:`~skmpt.text.estimation.Estimate` objects."""
    estimator = BudgetedEstimator(runner, score_method=score_method, score_masks=score_masks,
                                  max_forward_passes=max_forward_passes, adaptive=adaptive, exact=exact,
                                  seed=_seed(random_state), verbose=verbose)
    encoded = encode_pairs(contexts, continuations, runner.tokenizer, runner.max_length)
    groups, keys = pair_keys(texts_of(contexts), texts_of(continuations), questions)
    return encoded, estimator.estimate(encoded, keys, groups=groups)


@validated(_CONSTRAINTS)
def conditional_log_likelihood(runner, contexts, continuations, *, score_method="auto", score_masks=None,
                               max_forward_passes=128, unit="nats", random_state=None, verbose=0,
                               method="deprecated", n_masks="deprecated"):
    """``log p(continuation | context)`` per pair, with its standard error and the forward passes spent.

    Exact where the continuation's ``2**L - 1`` masks fit the budget; else a Monte Carlo
    estimate (:class:`~skmpt.text.estimation.BudgetedEstimator`, the lm-eval model's estimator:
    same seed and budget, same numbers).

    Parameters
    ----------
    runner : MaskedLMRunner
        A predictor with its tokenizer (a fitted scorer's ``runner_``, or one built from
        :func:`~skmpt.text.load_masked_lm`).
    contexts, continuations : sequences of str of the same length
        Joined as ``context + continuation``.
    score_method : str, default="auto"
        ``"auto"`` (a pilot chooses per pair), an estimator of
        :func:`~skmpt.text.strategies.estimator_strategy` (``"uniform"`` and ``"stratified"`` are
        LLaDA's protocol) or ``"exhaustive"`` (exact, at most 12 tokens).
    score_masks : int >= 2 or None, default=None
        Draws of a named ``score_method`` (orderings, masks, masks per size) instead of the
        budget ``max_forward_passes``.
    max_forward_passes : int >= 2, default=128
        Masked copies per pair at most.
    unit : {"nats", "bits"}, default="nats"
        The unit of ``log_likelihood`` and ``std``.
    random_state : int, RandomState instance or None, default=None
        Seeds the masks, with each pair's text; an int is the lm-eval model's ``seed``.
    verbose : int, default=0
        When > 0, a progress bar counts the masked copies.
    method, n_masks : str, int
        Deprecated since 0.2, removed in 0.3: the old names of ``score_method`` and ``score_masks``.

    Returns
    -------
    result : Bunch
        ``log_likelihood``, ``std`` (in ``unit``), ``n_tokens`` (the continuation's),
        ``forward_passes`` (masked copies run), ``exact`` and ``score_method`` (the estimator
        used), each of shape (n_pairs,).

    Examples
    --------
    >>> from transformers import BertConfig
    >>> from skmpt import MLMCurveScorer
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import conditional_log_likelihood
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=32)
    >>> scorer = MLMCurveScorer(config, tokenizer=tokenizer, random_state=0).fit()
    >>> result = conditional_log_likelihood(scorer.runner_, ["a dog"], [" is an animal"], max_forward_passes=16,
    ...                                     random_state=0)
    >>> result.log_likelihood.shape, bool(result.std[0] >= 0), int(result.forward_passes[0]) <= 16
    ((1,), True, True)
    """
    score_method = renamed_parameter("method", method, "score_method", score_method, "conditional_log_likelihood")
    score_masks = renamed_parameter("n_masks", n_masks, "score_masks", score_masks, "conditional_log_likelihood")
    factor = unit_factor(unit)
    encoded, estimates = _estimates(runner, contexts, continuations, None, score_method=score_method,
                                    score_masks=score_masks, max_forward_passes=max_forward_passes,
                                    random_state=random_state, verbose=verbose)
    return _bunch(estimates, encoded.n_tokens, factor)


def _bunch(estimates, n_tokens, factor):
    return Bunch(log_likelihood=np.array([e.log_likelihood for e in estimates]) * factor,
                 std=np.array([e.std for e in estimates]) * factor, n_tokens=np.asarray(n_tokens),
                 forward_passes=np.array([e.forward_passes for e in estimates]),
                 exact=np.array([e.exact for e in estimates]),
                 score_method=np.array([e.score_method for e in estimates], dtype=object))


@validated(_CONSTRAINTS)
def compare_conditional_estimators(runner, contexts, continuations, *, score_masks=10, target_std=0.1,
                                   score_methods=("uniform", "chain", "sweep"), random_state=None,
                                   n_masks="deprecated", methods="deprecated"):
    """The conditional estimators side by side, with the forward passes each needs for ``target_std``.

    Each estimator runs ``score_masks`` draws on every pair (no enumeration, to measure it). An
    estimator run with ``n`` draws of ``c`` copies each has standard error ``sigma / sqrt(n)``;
    reaching ``target_std`` takes ``c * max(1, ceil((sigma / target_std)**2))`` copies, each one
    forward pass of one sequence (the chain's ``sigma`` is 0 for a model whose conditionals come
    from one joint: one ordering is exact).

    Parameters
    ----------
    runner : MaskedLMRunner
    contexts, continuations : sequences of str of the same length
    score_masks : int >= 2, default=10
        Draws of every estimator (orderings, masks, masks per size).
    target_std : float, default=0.1
        Standard error (nats) for which the forward passes are counted.
    score_methods : tuple of str, default=("uniform", "chain", "sweep")
    random_state : int, RandomState instance or None, default=None
    n_masks, methods
        Deprecated since 0.2, removed in 0.3: the old names of ``score_masks`` and ``score_methods``.

    Returns
    -------
    results : dict of Bunch
        Per estimator, :func:`conditional_log_likelihood`'s Bunch with ``passes_for_target_std``
        (shape (n_pairs,)) added.
    """
    score_masks = renamed_parameter("n_masks", n_masks, "score_masks", score_masks, "compare_conditional_estimators")
    score_methods = renamed_parameter("methods", methods, "score_methods", score_methods,
                                      "compare_conditional_estimators")
    if unknown := [name for name in score_methods if name not in ESTIMATOR_METHODS]:
        raise ValueError(f"score_methods must name estimators of {', '.join(map(repr, ESTIMATOR_METHODS))}; got "
                         f"{', '.join(map(repr, unknown))}.")
    results = {}
    for name in score_methods:
        encoded, estimates = _estimates(runner, contexts, continuations, None, score_method=name,
                                        score_masks=None if name == "exhaustive" else score_masks,
                                        max_forward_passes=2**12 - 1,  # exhaustive: any text it enumerates
                                        random_state=random_state, exact=False)
        result = _bunch(estimates, encoded.n_tokens, 1.0)
        draws = 1 if name == "exhaustive" else score_masks
        per_draw = result.forward_passes // draws
        sigma2 = result.std**2 * draws  # the spread of one draw (a round, an ordering, a mask)
        result.passes_for_target_std = per_draw * np.maximum(1, np.ceil(sigma2 / target_std**2)).astype(int)
        results[name] = result
    return results


@validated(_CONSTRAINTS)
def multiple_choice(runner, contexts, choices, *, score_method="auto", score_masks=None, max_forward_passes=128,
                    adaptive=True, random_state=None, method="deprecated", n_masks="deprecated"):
    """Score each choice as a continuation of its context; minimal pairs are two choices of one context.

    The choices of a question share their random numbers (only their differences decide), and
    with ``adaptive`` their draws stop once the likeliest beats every other at 95 %, as the
    lm-eval model's multiple choice (:class:`~skmpt.text.estimation.BudgetedEstimator`).

    Parameters
    ----------
    runner : MaskedLMRunner
    contexts : sequence of str of shape (n_questions,)
    choices : sequence of sequences of str of shape (n_questions, n_choices)
    score_method, score_masks, max_forward_passes, random_state
        As :func:`conditional_log_likelihood`.
    adaptive : bool, default=True
    method, n_masks
        Deprecated since 0.2, removed in 0.3: the old names of ``score_method`` and ``score_masks``.

    Returns
    -------
    result : Bunch
        ``log_likelihood``, ``std`` and ``forward_passes`` of shape (n_questions, n_choices), and
        ``prediction`` (index of the likeliest choice) of shape (n_questions,).

    Examples
    --------
    >>> from transformers import BertConfig
    >>> from skmpt import MLMCurveScorer
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import multiple_choice
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=32)
    >>> scorer = MLMCurveScorer(config, tokenizer=tokenizer, random_state=0).fit()
    >>> multiple_choice(scorer.runner_, ["a dog"], [[" is an animal", " is a plant"]],
    ...                 max_forward_passes=16).log_likelihood.shape
    (1, 2)
    """
    score_method = renamed_parameter("method", method, "score_method", score_method, "multiple_choice")
    score_masks = renamed_parameter("n_masks", n_masks, "score_masks", score_masks, "multiple_choice")
    contexts = texts_of(contexts)
    choices = [list(row) for row in choices]
    if len(choices) != len(contexts) or len({len(row) for row in choices}) > 1 or not choices or not choices[0]:
        raise ValueError("choices must hold one non-empty row of choices per context, every row of the same length.")
    n_choices = len(choices[0])
    flat_contexts = [context for context in contexts for _ in range(n_choices)]
    flat_choices = [choice for row in choices for choice in row]
    questions = [q for q in range(len(contexts)) for _ in range(n_choices)]
    encoded, estimates = _estimates(runner, flat_contexts, flat_choices, questions, score_method=score_method,
                                    score_masks=score_masks, max_forward_passes=max_forward_passes,
                                    random_state=random_state, adaptive=adaptive)
    result = _bunch(estimates, encoded.n_tokens, 1.0)
    shape = (len(contexts), n_choices)
    log_likelihood = result.log_likelihood.reshape(shape)
    return Bunch(log_likelihood=log_likelihood, std=result.std.reshape(shape),
                 forward_passes=result.forward_passes.reshape(shape), prediction=log_likelihood.argmax(1))
