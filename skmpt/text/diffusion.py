"""Masked diffusion language models: their likelihood bound from the MPT curve, and any-order sampling.

A masked diffusion LM (MDLM, RADD, MD4, LLaDA, Dream) corrupts a text of ``L`` tokens by masking
each token with probability ``1 - alpha_t`` at time ``t`` and learns to predict the masked
tokens. With a denoiser that does not depend on ``t``, its negative ELBO in continuous time is,
whatever the schedule ``alpha_t``,

    ``NELBO(x) = -sum_{M=1..L} S(x; M)``,

the negative of skmpt's cumulative MPT estimate (:func:`masked_diffusion_bound`), and
``exp(NELBO / L)`` bounds the text's perplexity from above. A discrete-time ELBO with ``T``
steps weighs the sizes, ``-sum_M c_M S(x; M)`` (:func:`schedule_weights`; ``c_M -> 1`` as
``T`` grows). :func:`sample_any_order` draws texts by revealing tokens in a random order, each
from the model's conditional given those revealed before: the chain of
:class:`~skmpt.text.strategies.ChainMasks` run forwards. Both take a
:class:`~skmpt.text.MaskedLMRunner` (a fitted scorer's ``runner_``).

Read more in the :ref:`User Guide <diffusion>`.
"""

from numbers import Integral, Real

import numpy as np
import torch
from scipy.stats import binom
from sklearn.utils import Bunch

from .._validation import Interval, Options, validate_parameters, validated
from ..masks import check_generator, nested_masks, random_orderings
from ..objectives.vocabulary import renamed_parameter
from .encoding import encode_texts
from .outputs import UNITS, unit_factor
from .strategies import estimator_strategy
from .unmasking import special_ids, unmask

__all__ = ["masked_diffusion_bound", "noise_schedule", "sample_any_order", "schedule_weights"]


def noise_schedule(schedule):
    """``alpha(t)`` for ``t`` in [0, 1], the probability that a token is still unmasked at time ``t``.

    Parameters
    ----------
    schedule : {"linear", "cosine"} or callable
        ``"linear"``: ``alpha_t = 1 - t`` (MDLM, RADD, LLaDA, skmpt's ``mask_rate="uniform"``);
        ``"cosine"``: ``alpha_t = 1 - cos(pi / 2 * (1 - t))`` (MD4); a callable is taken as
        ``alpha`` itself (decreasing from 1 at ``t = 0`` to 0 at ``t = 1``): one taking arrays
        is called once, one taking only scalars (``math`` functions) once per time.

    Returns
    -------
    alpha : callable
        ``alpha(t)`` is an ndarray of float64 of the shape of ``t``.

    Examples
    --------
    >>> import math
    >>> import numpy as np
    >>> from skmpt.text import noise_schedule
    >>> noise_schedule("linear")(np.array([0.0, 0.25, 1.0])).tolist()
    [1.0, 0.75, 0.0]
    >>> noise_schedule(lambda t: math.cos(math.pi / 2 * t))(np.array([0.0, 1.0])).round(12).tolist()
    [1.0, 0.0]
    """
    validate_parameters({"schedule": schedule}, {"schedule": [Options({"linear", "cosine"}), "callable"]},
                        "noise_schedule")
    if callable(schedule):
        return _vectorised(schedule)
    if schedule == "linear":
        return lambda t: 1.0 - np.asarray(t, dtype=np.float64)
    return lambda t: 1.0 - np.cos(np.pi / 2 * (1.0 - np.asarray(t, dtype=np.float64)))


def _vectorised(function):
    """``function`` over arrays of times: called on the array, or once per time when it takes scalars only."""

    def alpha(t):
        t = np.asarray(t, dtype=np.float64)
        try:
            values = np.asarray(function(t), dtype=np.float64)
        except (TypeError, ValueError):  # e.g. math.cos: "only length-1 arrays can be converted"
            values = None
        if values is None or values.shape != t.shape:
            values = np.array([function(float(time)) for time in t.ravel()], dtype=np.float64).reshape(t.shape)
        return values

    return alpha


def check_n_steps(n_steps):
    """``n_steps`` as an int >= 1, or None; anything else (2.7, "3", True, NaN) is a ValueError naming it.

    Examples
    --------
    >>> from skmpt.text.diffusion import check_n_steps
    >>> check_n_steps(4), check_n_steps(None)
    (4, None)
    """
    validate_parameters({"n_steps": n_steps}, {"n_steps": [None, Interval(Integral, 1, None, closed="left")]},
                        "schedule_weights")
    return None if n_steps is None else int(n_steps)


def schedule_weights(schedule="linear", n_steps=None):
    """``weights(L)``: the weight ``c_M`` of ``S(x; M)``, ``M = 1..L``, in a schedule's ELBO.

    In continuous time (``n_steps=None``) every weight is 1, whatever the schedule. With ``T =
    n_steps`` steps ``t_i = i / T``, the discrete-time ELBO (MD4's) is ``sum_i (alpha_{t_{i-1}} -
    alpha_{t_i}) / (1 - alpha_{t_i}) E[sum of masked log p]`` at masking probability ``1 -
    alpha_{t_i}``; given ``M`` masked tokens that expectation is ``M S(x; M)``, so

        ``c_M = M sum_i (alpha_{t_{i-1}} - alpha_{t_i}) / (1 - alpha_{t_i}) Binomial(M; L, 1 - alpha_{t_i})``.

    Parameters
    ----------
    schedule : {"linear", "cosine"} or callable, default="linear"
        As :func:`noise_schedule`.
    n_steps : int or None, default=None

    Returns
    -------
    weights : callable
        ``weights(L)`` is an ndarray of shape (L,).

    Examples
    --------
    >>> from skmpt.text import schedule_weights
    >>> schedule_weights()(3).tolist()
    [1.0, 1.0, 1.0]
    >>> [round(c, 3) for c in schedule_weights("linear", n_steps=10_000)(3).tolist()]
    [1.0, 1.0, 1.0]
    """
    alpha = noise_schedule(schedule)
    n_steps = check_n_steps(n_steps)
    if n_steps is None:
        return lambda length: np.ones(int(length))
    times = np.arange(n_steps + 1) / n_steps
    alphas = alpha(times)
    if not (np.all(np.isfinite(alphas)) and np.all(np.diff(alphas) <= 0) and np.isclose(alphas[0], 1)
            and np.isclose(alphas[-1], 0)):
        shown = np.array2string(alphas, threshold=8, precision=4)
        raise ValueError(f"The schedule's alpha(t) must decrease from 1 at t = 0 to 0 at t = 1; at t = i / n_steps "
                         f"it is {shown}.")
    # where alpha stays at 1 nothing is masked: the step's term is 0 (its limit), not 0 / 0
    unmasked = alphas[1:] >= 1
    step = np.where(unmasked, 0.0, alphas[:-1] - alphas[1:]) / np.where(unmasked, 1.0, 1 - alphas[1:])

    def weights(length):
        sizes = np.arange(1, int(length) + 1)
        return sizes * (binom.pmf(sizes[:, None], int(length), 1 - alphas[None, 1:]) @ step)

    return weights


@validated({"score_method": [Options({"sweep", "chain", "uniform"})],
            "score_masks": [Interval(Integral, 2, None, closed="left")],
            "n_steps": [None, Interval(Integral, 1, None, closed="left")],
            "text_column": [None, str],
            "unit": [Options(set(UNITS))],
            "random_state": ["random_state"],
            "verbose": ["verbose"]})
def masked_diffusion_bound(runner, X, *, score_method="sweep", score_masks=10, schedule="linear", n_steps=None,
                           text_column=None, unit="nats", random_state=None, verbose=0, method="deprecated",
                           n_masks="deprecated"):
    """Negative ELBO and perplexity bound of a masked diffusion LM for each text, with standard errors.

    ``nelbo = -sum_M c_M S(x; M)`` (``c_M = 1`` in continuous time) and the perplexity bound
    ``exp(nelbo / L)`` (``nelbo`` in nats), whose standard error is the delta method's
    ``perplexity * nelbo_std / L``.

    Parameters
    ----------
    runner : MaskedLMRunner
        The predictor (its mask id, logits layout and timestep hook) with its tokenizer: a
        fitted scorer's ``runner_``.
    X : list or array of str, pandas Series or DataFrame, datasets.Dataset
    score_method : {"sweep", "chain", "uniform"}, default="sweep"
        ``"sweep"``: ``score_masks`` masks at each size (stratified; needed for ``n_steps``);
        ``"chain"``: ``score_masks`` random orderings; ``"uniform"``: ``score_masks`` masks of
        uniformly random sizes (MDLM's and RADD's Monte Carlo estimator, one copy each).
    score_masks : int >= 2, default=10
    schedule : {"linear", "cosine"} or callable, default="linear"
        The noise schedule (:func:`noise_schedule`); it matters only with ``n_steps``.
    n_steps : int or None, default=None
        Steps of a discrete-time ELBO (:func:`schedule_weights`); ``None`` is continuous time.
    text_column : str or None, default=None
        The texts' column in a DataFrame or dataset (:func:`~skmpt.text.encode_texts`).
    unit : {"nats", "bits"}, default="nats"
        The unit of ``nelbo`` and ``nelbo_std``; perplexities have none (they are the same).
    random_state : int, RandomState instance or None, default=None
        Seeds the masks, with each text's tokens.
    verbose : int, default=0
        When > 0, a progress bar counts the masked copies.
    method, n_masks
        Deprecated since 0.2, removed in 0.3: the old names of ``score_method`` and ``score_masks``.

    Returns
    -------
    result : Bunch
        ``nelbo``, ``nelbo_std`` (in ``unit``), ``n_tokens``, ``perplexity``, ``perplexity_std`` and
        ``forward_passes`` (masked copies run), each of shape (n_texts,); ``corpus_perplexity``
        ``exp(sum nelbo / sum L)`` and ``corpus_perplexity_std``.

    Examples
    --------
    >>> from transformers import BertConfig
    >>> from skmpt import MLMCurveScorer
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import masked_diffusion_bound
    >>> texts = load_wordnet_sentences()[:100]
    >>> tokenizer = make_wordpiece_tokenizer(texts, vocab_size=200)
    >>> config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=32)
    >>> scorer = MLMCurveScorer(config, tokenizer=tokenizer, random_state=0).fit()
    >>> bound = masked_diffusion_bound(scorer.runner_, texts[:2], score_masks=4, random_state=0)
    >>> bound.nelbo.shape, bool((bound.perplexity > 1).all())
    ((2,), True)
    """
    score_method = renamed_parameter("method", method, "score_method", score_method, "masked_diffusion_bound")
    score_masks = renamed_parameter("n_masks", n_masks, "score_masks", score_masks, "masked_diffusion_bound")
    weights = None if n_steps is None else schedule_weights(schedule, n_steps)
    noise_schedule(schedule)  # an unknown schedule is an error even in continuous time
    strategy = estimator_strategy(score_method, score_masks, return_std=True, weights=weights)
    encoded = encode_texts(X, runner.tokenizer, runner.max_length, text_column=text_column)
    results = runner.score(encoded, strategy, random_state=random_state, verbose=verbose)
    return bound_from_scores(results[:, 0], results[:, 1], encoded.n_tokens,
                             np.array([strategy.n_copies(int(n)) for n in encoded.n_tokens]), unit=unit)


def bound_from_scores(scores, std, n_tokens, forward_passes=None, unit="nats"):
    """The :func:`masked_diffusion_bound` Bunch from estimates of ``sum_M S(x; M)`` and their standard errors.

    ``scores`` and ``std`` are in nats; the Bunch's ``nelbo`` and ``nelbo_std`` in ``unit``.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.text.diffusion import bound_from_scores
    >>> bound = bound_from_scores(np.array([-4.0]), np.array([0.1]), np.array([2]))
    >>> round(float(bound.perplexity[0]), 4), round(float(bound.perplexity_std[0]), 4)
    (7.3891, 0.3695)
    """
    nelbo, nelbo_std, n_tokens = -np.asarray(scores, float), np.asarray(std, float), np.asarray(n_tokens)
    perplexity = np.exp(nelbo / n_tokens)
    corpus = float(np.exp(nelbo.sum() / n_tokens.sum()))
    factor = unit_factor(unit)
    return Bunch(nelbo=nelbo * factor, nelbo_std=nelbo_std * factor, n_tokens=n_tokens, perplexity=perplexity,
                 perplexity_std=perplexity * nelbo_std / n_tokens, corpus_perplexity=corpus,
                 corpus_perplexity_std=corpus * float(np.sqrt((nelbo_std**2).sum())) / float(n_tokens.sum()),
                 forward_passes=forward_passes)


@validated({"n_texts": [Interval(Integral, 1, None, closed="left")],
            "length": [Interval(Integral, 1, None, closed="left")],
            "temperature": [Interval(Real, 0, None, closed="neither")]})
def sample_any_order(runner, n_texts, length, *, temperature=1.0, random_state=None):
    """Texts drawn by any-order generation: tokens revealed in a random order, each from the model.

    Every sample starts as ``length`` mask tokens between the tokenizer's special tokens; along a
    random ordering ``s`` (:func:`~skmpt.masks.random_orderings`) the chain's nested masks
    (:func:`~skmpt.masks.nested_masks`) reveal ``s_L``, then ``s_{L-1}``, ..., each drawn from
    the model's conditional (softmax of the logits over ``temperature``, special and mask ids
    excluded) given the tokens revealed before it: the chain rule that
    :class:`~skmpt.text.strategies.ChainMasks` scores, run forwards. ``L`` forward passes of
    ``n_texts`` copies.

    Parameters
    ----------
    runner : MaskedLMRunner
        A fitted scorer's ``runner_``.
    n_texts : int
        Texts to draw.
    length : int
        Tokens per sample (special tokens not counted).
    temperature : float, default=1.0
    random_state : int, RandomState instance, torch.Generator or None, default=None

    Returns
    -------
    texts : list of str

    Examples
    --------
    >>> from transformers import BertConfig
    >>> from skmpt import MLMCurveScorer
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import sample_any_order
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=32)
    >>> scorer = MLMCurveScorer(config, tokenizer=tokenizer, random_state=0).fit()
    >>> len(sample_any_order(scorer.runner_, 3, 5, random_state=0))
    3
    """
    generator = check_generator(random_state)
    before, after = special_ids(runner)
    own = torch.arange(len(before), len(before) + length)
    runner.predictor.check_positions(int(own[0]))
    ids = torch.cat([before, torch.full((length,), runner.mask_token_id), after]).repeat(n_texts, 1)
    masks = nested_masks(random_orderings(n_texts, length, random_state=generator))  # (n, L, L)
    masked = torch.zeros_like(ids, dtype=torch.bool)
    masked[:, own] = True
    reveals = []
    for t in range(length - 1, -1, -1):  # mask t masks s_1..s_{t+1}; it reveals s_{t+1}
        target = masks[:, t] & ~(masks[:, t - 1] if t > 0 else torch.zeros_like(masks[:, t]))
        candidates = torch.zeros_like(masked)
        candidates[:, own] = target
        reveals.append((candidates, torch.ones(n_texts, dtype=torch.long)))
    steps = iter(reveals)
    unmask(runner, ids, masked, lambda ids, masked: next(steps, None), lengths=np.full(n_texts, float(length)),
           temperature=temperature, exclude_special=True, generator=generator)
    return runner.tokenizer.batch_decode(ids[:, own], skip_special_tokens=True)
