"""Conditional likelihood ``log p(continuation | context)`` of a masked predictor, with standard errors.

The context's tokens stay visible; masks fall only among the continuation's ``L`` tokens, for
which the MPT identity holds: ``sum_{M=1..L} S(continuation | context; M)``, with ``S`` the
curve over masks of the continuation's tokens, is ``log p(continuation | context)`` for a model
whose conditionals come from one joint. Four estimators (:mod:`skmpt.text.strategies`):

- ``"chain"``: random orderings of the continuation's tokens, each predicted given the context
  and the tokens revealed before it (``L`` copies per ordering; exact, zero spread, for a joint);
- ``"uniform"``: LLaDA's protocol (Nie et al. 2025): masks of uniformly random sizes over the
  answer, prompt always visible, each worth ``(L / M) sum_masked log p`` (one copy each);
- ``"sweep"``: masks at every size (``L`` copies per round);
- ``"exhaustive"``: every mask of the continuation's tokens (``2**L - 1`` copies): the exact
  expectation of the other three, with no Monte Carlo error, for short continuations.

:func:`compare_conditional_estimators` runs them side by side and reports the forward passes
(masked copies) each needs for a given standard error. Texts are joined as
``context + continuation`` exactly as given (put the space in the continuation, ``" sat"``);
a token that straddles the join, an empty context or continuation, or a pair longer than
``max_length`` is a ``ValueError`` naming the pair.
"""

import numpy as np
from sklearn.utils import Bunch

from .encoding import EncodedTexts, check_max_length, encode_texts, texts_of
from .outputs import unit_factor
from .strategies import estimator_strategy

__all__ = ["compare_conditional_estimators", "conditional_log_likelihood", "encode_pairs", "multiple_choice"]

#: Draws per text when ``n_masks`` is not given.
DEFAULT_N_MASKS = 10


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


def conditional_log_likelihood(runner, contexts, continuations, *, method="chain", n_masks=DEFAULT_N_MASKS,
                               unit="nats", random_state=None, verbose=0):
    """``log p(continuation | context)`` per pair, with its standard error.

    Parameters
    ----------
    runner : MaskedLMRunner
        A predictor with its tokenizer (a fitted scorer's ``runner_``, or one built from
        :func:`~skmpt.text.load_masked_lm`).
    contexts, continuations : sequences of str of the same length
        Joined as ``context + continuation``.
    method : {"chain", "uniform", "sweep", "exhaustive"}, default="chain"
        ``"uniform"`` is LLaDA's protocol; ``"exhaustive"`` is exact (``2**L - 1`` copies).
    n_masks : int >= 2, default=10
        Orderings (chain), masks (uniform) or masks per size (sweep); unused by ``"exhaustive"``.
    unit : {"nats", "bits"}, default="nats"
        The unit of ``log_likelihood`` and ``std``.
    random_state : int, RandomState instance or None, default=None
        Seeds the masks, with each pair's tokens.
    verbose : int, default=0
        When > 0, a progress bar counts the masked copies.

    Returns
    -------
    result : Bunch
        ``log_likelihood``, ``std`` (in ``unit``), ``n_tokens`` (the continuation's) and
        ``forward_passes`` (masked copies run), each of shape (n_pairs,).

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
    >>> result = conditional_log_likelihood(scorer.runner_, ["a dog"], [" is an animal"], n_masks=4, random_state=0)
    >>> result.log_likelihood.shape, bool(result.std[0] >= 0)
    ((1,), True)
    """
    factor = unit_factor(unit)
    strategy = estimator_strategy(method, n_masks, return_std=True)
    encoded = encode_pairs(contexts, continuations, runner.tokenizer, runner.max_length)
    results = runner.score(encoded, strategy, random_state=random_state, verbose=verbose) * factor
    return Bunch(log_likelihood=results[:, 0], std=results[:, 1], n_tokens=encoded.n_tokens,
                 forward_passes=np.array([strategy.n_copies(int(n)) for n in encoded.n_tokens]))


def compare_conditional_estimators(runner, contexts, continuations, *, n_masks=DEFAULT_N_MASKS, target_std=0.1,
                                   methods=("uniform", "chain", "sweep"), random_state=None):
    """The conditional estimators side by side, with the forward passes each needs for ``target_std``.

    An estimator run with ``n`` samples of ``c`` copies each has standard error ``sigma / sqrt(n)``;
    reaching ``target_std`` takes ``c * max(1, ceil((sigma / target_std)**2))`` copies, each one
    forward pass of one sequence (the chain's ``sigma`` is 0 for a model whose conditionals come
    from one joint: one ordering is exact).

    Parameters
    ----------
    runner : MaskedLMRunner
    contexts, continuations : sequences of str of the same length
    n_masks : int >= 2, default=10
        Draws of every estimator (orderings, masks, masks per size).
    target_std : float, default=0.1
        Standard error (nats) for which the forward passes are counted.
    methods : tuple of str, default=("uniform", "chain", "sweep")
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    results : dict of Bunch
        Per method, :func:`conditional_log_likelihood`'s Bunch with ``passes_for_target_std``
        (shape (n_pairs,)) added.
    """
    if not target_std > 0:
        raise ValueError(f"target_std must be positive; got {target_std!r}.")
    results = {}
    for method in methods:
        result = conditional_log_likelihood(runner, contexts, continuations, method=method, n_masks=n_masks,
                                            random_state=random_state)
        draws = 1 if method == "exhaustive" else n_masks
        per_draw = result.forward_passes // draws
        sigma2 = result.std**2 * draws  # the spread of one draw (a round, an ordering, a mask)
        result.passes_for_target_std = per_draw * np.maximum(1, np.ceil(sigma2 / target_std**2)).astype(int)
        results[method] = result
    return results


def multiple_choice(runner, contexts, choices, *, method="chain", n_masks=DEFAULT_N_MASKS, random_state=None):
    """Score each choice as a continuation of its context; minimal pairs are two choices of one context.

    Parameters
    ----------
    runner : MaskedLMRunner
    contexts : sequence of str of shape (n_questions,)
    choices : sequence of sequences of str of shape (n_questions, n_choices)
    method, n_masks, random_state
        As :func:`conditional_log_likelihood`.

    Returns
    -------
    result : Bunch
        ``log_likelihood`` and ``std`` of shape (n_questions, n_choices), and ``prediction``
        (index of the likeliest choice) of shape (n_questions,).

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
    >>> multiple_choice(scorer.runner_, ["a dog"], [[" is an animal", " is a plant"]], n_masks=2).log_likelihood.shape
    (1, 2)
    """
    contexts = texts_of(contexts)
    choices = [list(row) for row in choices]
    if len(choices) != len(contexts) or len({len(row) for row in choices}) > 1 or not choices or not choices[0]:
        raise ValueError("choices must hold one non-empty row of choices per context, every row of the same length.")
    n_choices = len(choices[0])
    flat_contexts = [context for context in contexts for _ in range(n_choices)]
    flat_choices = [choice for row in choices for choice in row]
    result = conditional_log_likelihood(runner, flat_contexts, flat_choices, method=method, n_masks=n_masks,
                                        random_state=random_state)
    log_likelihood = result.log_likelihood.reshape(len(contexts), n_choices)
    return Bunch(log_likelihood=log_likelihood, std=result.std.reshape(len(contexts), n_choices),
                 prediction=log_likelihood.argmax(1))
