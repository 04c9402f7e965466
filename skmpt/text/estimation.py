"""The budgeted estimator of ``log p(continuation | context)``: one engine for lm-eval, the scorer and the functions.

For a continuation of ``T`` tokens (masks fall only among them, the context visible), the MPT
identity gives ``log p(y | c) = sum_{M=1..T} S(y | c; M)``. :class:`BudgetedEstimator` spends
at most ``max_forward_passes`` masked copies (forward passes) per text on it:

- **exact** where the masks can be enumerated (``2**T - 1 <= max_forward_passes``):
  :class:`~skmpt.text.strategies.ExhaustiveMasks`, zero variance;
- else a Monte Carlo estimator (:mod:`skmpt.text.strategies`) named by ``score_method``, or
  ``"auto"``: the standard (:data:`STANDARD_METHOD`, ``"adjusted"``: the all-masked copy once,
  the other sizes' copies in proportion to ``M**-1/4``, minus control variates for each token's
  own difficulty and each masked token's effect on the others, whose coefficients are
  **measured** on the request's own copies, cross-fitted so that they do not bias the estimate).
  Candidates added to :data:`AUTO_CANDIDATES` (none by default) are measured by a pilot of LLaDA's
  stratified copies in independent units (a control variate per token read from
  them; ``"nested"`` chains or ``"balanced"`` positions in units of their own), within half the
  budget, and the candidate of least variance per forward pass is chosen unless the standard's is
  within the pilot's noise of it (a one-sided F test, Bonferroni over the candidates); **every
  pilot draw counts** in the estimate, each unit at a weight measured on the other units only, so
  that neither the choice nor the weights bias it;
- the choices of one question share their random numbers (**common random numbers**: only
  differences decide a ranking) and, with ``adaptive=True``, draws come in rounds that **stop**
  as soon as the likeliest choice beats every other at ``confidence``; with ``target_se``, every
  text draws in rounds until its standard error is below it or its budget is spent;
- a round holds at most ``chunk_budget() // T`` copies, so the memory a long text takes does not
  grow with its budget (the model sees at most the runner's ``score_batch_size`` copies a pass);
- every estimate carries its **standard error** and the **forward passes** it spent.

A text's masks depend only on ``seed`` and its key (:func:`pair_keys`), never on the batch or
the process. It needs neither lm-eval nor a scorer: a :class:`~skmpt.text.MaskedLMRunner` and
encoded texts (:func:`~skmpt.text.encode_pairs`). :class:`~skmpt.text.harness.MaskedLMHarness`
translates lm-eval's requests into calls of it; :meth:`skmpt.MLMCurveScorer.conditional_score_samples`,
:func:`~skmpt.text.conditional_log_likelihood` and :func:`~skmpt.text.multiple_choice` call it
too, so that all give the same estimate for the same seed and budget.
"""

import hashlib
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
import torch
from scipy.stats import f as f_distribution
from scipy.stats import norm

from .._utils import chunk_budget
from .._validation import Interval, Options, validate_parameters
from .strategies import (ESTIMATOR_METHODS, AllocatedSizeMasks, ControlledMasks, ExhaustiveMasks, NestedMasks,
                         estimator_strategy)

__all__ = ["AUTO_CANDIDATES", "PILOT_FRACTION", "PILOT_UNITS", "REFIT_ROUNDS", "STANDARD_METHOD", "BudgetedEstimator",
           "Estimate", "measured_choice", "pair_keys"]

#: The standard estimator, ``"auto"``'s unless a pilot measures a candidate significantly better:
#: :class:`~skmpt.text.strategies.AllocatedSizeMasks` with its control variates (``"adjusted"``). On the benchmark's 18
#: tuning tables (8 residues, 128 passes) it had a median of 2.54 times the efficiency of LLaDA's ``eval_llada.py``
#: estimator (the lowest 1.28; 2.00 and 1.00 with the tokens' own difficulties alone); LLaDA's stratified sizes with
#: the pilot's measured choice of a control variate, the default before, 1.18 (the lowest 0.50).
STANDARD_METHOD = "adjusted"
#: The candidates ``"auto"`` measures beside the standard, by a pilot: none. ``"controlled"`` (a control variate per
#: token with coefficient 1, read from the pilot's copies at no extra pass), ``"nested"`` (only for a continuation
#: given a context; units of one antithetic pair of orderings) and ``"balanced"`` (units of their own) may be added,
#: in the order they enter a pilot that has room. On the 18 tuning tables a pilot choosing ``"controlled"`` against
#: the standard without its control variate (``"allocated"``) had a median of 1.09 to 1.34 times LLaDA's efficiency
#: (significance 0.01 to 0.9; the lowest 0.96 to 0.48) against 1.17 without a pilot: the regression coefficient of
#: ``"adjusted"`` measures on all the copies what the pilot measured on a few. Dream's evenly spaced masking rates
#: were 0.25 to 0.74 times LLaDA's efficiency on every tuning table.
AUTO_CANDIDATES = ()
#: Independent units of the standard (and of each candidate that runs its own) in a pilot: their spread is its
#: measured variance (``PILOT_UNITS - 1`` degrees of freedom per text). 8 against 4 on the tuning tables: 4 of 18
#: below LLaDA's efficiency against 6, the worst 0.50 against 0.27.
PILOT_UNITS = 8
#: A pilot takes at most ``1 / PILOT_FRACTION`` of a text's budget (its draws all count in the estimate).
PILOT_FRACTION = 2
#: A text drawn in rounds refits the control variates of its first ``REFIT_ROUNDS`` rounds on each other as rounds
#: come (128 passes in rounds of 16: every round on all the others); a later round's are fitted once, on the rounds
#: before it, so that the fits stay within a few per round (64 tokens in 256 rounds: 2 s of CPU, not 320).
REFIT_ROUNDS = 8


class Estimate(NamedTuple):
    """One text's estimate and how it was made.

    ``score_method`` names the estimator used (``"exhaustive"`` when exact). With
    ``score_method="auto"`` and a pilot, ``pilot_variances`` holds each candidate's measured
    variance per forward pass (summed over the choices of a question), else None;
    ``target_reached`` says whether the standard error is at most ``target_se`` (None when no
    target was set).
    """

    log_likelihood: float
    std: float
    exact: bool
    forward_passes: int
    score_method: str
    pilot_variances: dict | None = None
    target_reached: bool | None = None


def pair_keys(contexts, continuations, questions=None):
    """``(groups, keys)`` of pairs: which pairs share random numbers, and the text that seeds each group.

    A pair alone is its own group, seeded by ``context + "\\0" + continuation``; pairs with the
    same ``questions`` entry (not None) are the choices of one question, one group seeded by
    ``context + "\\0"`` (the context of its first pair), so they share their masks' random
    numbers.

    Parameters
    ----------
    contexts, continuations : sequences of str of the same length
    questions : sequence of hashable or None, default=None
        Each pair's question (None: a pair alone); None is every pair alone.

    Returns
    -------
    groups : list of list of int
    keys : list of str

    Examples
    --------
    >>> from skmpt.text.estimation import pair_keys
    >>> pair_keys(["a", "a", "b"], [" x", " y", " z"], questions=[0, 0, None])
    ([[0, 1], [2]], ['a\\x00', 'b\\x00 z'])
    """
    groups, keys, where = [], [], {}
    questions = [None] * len(contexts) if questions is None else list(questions)
    for i, (context, continuation, question) in enumerate(zip(contexts, continuations, questions, strict=True)):
        if question is None or question not in where:
            if question is not None:
                where[question] = len(groups)
            groups.append([])
            keys.append(f"{context}\x00{continuation if question is None else ''}")
        groups[len(groups) - 1 if question is None else where[question]].append(i)
    return groups, keys


def measured_choice(variances, degrees, significance=0.9):
    """The candidate of least variance per pass, unless the standard's is within the pilot's noise of it.

    ``variances`` maps each estimator (:data:`STANDARD_METHOD` among them) to its variance per
    forward pass measured by a pilot, with ``degrees`` degrees of freedom (an int, or a mapping
    per estimator). The candidate of least variance is chosen when the standard's variance over
    its own exceeds the ``1 - significance / (number of candidates)`` quantile of
    ``F(degrees of the standard, degrees of the candidate)`` (one-sided, Bonferroni over the
    candidates): where all are equal, the standard is kept with probability at least
    ``1 - significance``. Since every pilot draw counts in ``"auto"``'s estimate, a wrong switch
    costs little: the default ``significance`` is large.

    Examples
    --------
    >>> from skmpt.text.estimation import measured_choice
    >>> measured_choice({"adjusted": 1.0, "balanced": 0.8, "controlled": 0.9}, degrees=3, significance=0.05)
    'adjusted'
    >>> measured_choice({"adjusted": 1.0, "balanced": 0.95, "controlled": 0.9}, degrees=3)  # within noise
    'adjusted'
    >>> measured_choice({"adjusted": 1.0, "controlled": 2.0}, degrees=3)
    'adjusted'
    >>> measured_choice({"adjusted": 1.0, "balanced": 0.8, "controlled": 0.01}, degrees=3)
    'controlled'
    >>> measured_choice({"adjusted": 1.0, "nested": 0.01}, degrees={"adjusted": 3, "nested": 1})
    'nested'
    """
    if STANDARD_METHOD not in variances:
        raise ValueError(f"variances must include the standard {STANDARD_METHOD!r}; got {sorted(variances)}.")
    others = {method: value for method, value in variances.items() if method != STANDARD_METHOD}
    if not others:
        return STANDARD_METHOD
    degrees = degrees if isinstance(degrees, dict) else dict.fromkeys(variances, degrees)
    best = min(others, key=others.get)
    # never a candidate measured worse than the standard, whatever the level
    threshold = max(1.0, f_distribution.ppf(1 - significance / len(others), degrees[STANDARD_METHOD], degrees[best]))
    standard = variances[STANDARD_METHOD]
    return best if standard > 0 and standard > threshold * others[best] else STANDARD_METHOD


class BudgetedEstimator:
    """``log p(continuation | context)`` at a budget of forward passes: exact where it can be, else the best estimator.

    Parameters
    ----------
    runner : MaskedLMRunner
        The predictor with its tokenizer (a fitted scorer's ``runner_``).
    score_method : str, default="auto"
        The Monte Carlo estimator for a continuation whose masks are too many to enumerate
        (:func:`~skmpt.text.strategies.estimator_strategy`), or ``"auto"``: the standard
        (:data:`STANDARD_METHOD`, ``"adjusted"``), or, with candidates in :data:`AUTO_CANDIDATES`
        (none by default), per question a pilot that measures the standard (on LLaDA's stratified
        copies) and the candidates that fit, each in :data:`PILOT_UNITS` independent units (the
        control variate per token on the standard's own copies, its baselines fitted on the
        other units: no pass of its own; ``"nested"`` in as many units as fit, at least two),
        and chooses the candidate of least variance per forward pass unless the standard is
        within noise of it (:func:`measured_choice` at ``significance``). Candidates enter in
        order while the pilot's copies stay within ``1 / PILOT_FRACTION`` of the budget; with
        fewer than two, there is no pilot and the standard runs. Every pilot unit counts in the
        estimate: within a unit its draws are combined at inverse-variance weights, and the unit
        weighs what it is worth in passes of the best estimator, both measured on the other
        units only (unbiased whatever is chosen). ``"exhaustive"`` enumerates every text (at
        most 12 tokens).
    max_forward_passes : int >= 1, default=128
        Masked copies per text at most, a promise kept by every estimator: a text of ``T``
        tokens with ``2**T - 1`` at most this is scored exactly; else the estimator's draws
        that fit are run, and a text whose estimator needs more than the budget for its
        fewest draws (:meth:`minimum_passes`: ``T`` copies per chain ordering, for instance)
        is refused with that minimum before any forward pass.
    score_masks : int or None, default=None
        Draws of a named ``score_method`` (orderings, masks, masks per size) instead of a
        budget: each text's budget is then what they cost.
    pilot_passes : int >= 4, default=16
        Copies of each candidate's pilot: :data:`PILOT_UNITS` units of ``max(2, pilot_passes // PILOT_UNITS)``
        copies (``"nested"``: of one antithetic pair of orderings, ``2 * (T - 1) + 1`` copies;
        ``"controlled"``: none, it reads the standard's).
    significance : float in (0, 1), default=0.9
        The level of ``"auto"``'s one-sided F test against the standard: large, since a wrong
        switch costs little when every pilot draw counts (chosen on the benchmark's tuning set).
    target_se : float > 0 or None, default=None
        A standard error (nats) to reach: each text draws in rounds of ``round_passes`` until its
        standard error is at most this or its budget is spent (``Estimate.target_reached`` says
        which). None spends the budget (a question's choices: until the ranking is settled).
    adaptive : bool, default=True
        The choices of a question are drawn in rounds of ``round_passes`` and stop once the
        ranking is settled.
    confidence : float in (0.5, 1), default=0.95
        The likeliest choice must beat each other by ``norm.ppf(confidence)`` standard errors
        of their paired difference.
    round_passes : int >= 2, default=16
        Forward passes of a round (``target_se``, a question's adaptive choices); a round of
        ``"adjusted"`` or ``"allocated"`` holds at least their
        :meth:`~skmpt.text.strategies.AllocatedSizeMasks.covering_copies` (more for a
        continuation of more than 13 tokens).
    exact : bool, default=True
        Enumerate where ``2**T - 1`` fits the budget; False runs ``score_method`` everywhere
        (to measure it).
    seed : int, default=0
        Seeds the masks, with each group's key.
    verbose : int, default=0
        When > 0, a progress bar counts the masked copies.

    Examples
    --------
    >>> import torch
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import MaskedLMRunner, encode_pairs, load_masked_lm
    >>> from skmpt.text.estimation import BudgetedEstimator, pair_keys
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                                    num_attention_heads=2, intermediate_size=32))
    >>> runner = MaskedLMRunner(*load_masked_lm(model, tokenizer=tokenizer, device=torch.device("cpu")),
    ...                         torch.device("cpu"))
    >>> contexts, continuations = ["a dog", "a dog"], [" is", " is an animal"]
    >>> groups, keys = pair_keys(contexts, continuations)
    >>> encoded = encode_pairs(contexts, continuations, tokenizer, 64)
    >>> short, long = BudgetedEstimator(runner, max_forward_passes=16).estimate(encoded, keys, groups=groups)
    >>> short.exact, short.forward_passes, long.exact, long.forward_passes <= 16
    (True, 1, False, True)
    """

    _parameter_constraints = {
        "score_method": [Options({"auto", *ESTIMATOR_METHODS})],
        "max_forward_passes": [Interval(Integral, 1, None, closed="left")],
        "score_masks": [None, Interval(Integral, 2, None, closed="left")],
        "pilot_passes": [Interval(Integral, 4, None, closed="left")],
        "significance": [Interval(Real, 0, 1, closed="neither")],
        "target_se": [None, Interval(Real, 0, None, closed="neither")],
        "adaptive": ["boolean"],
        "confidence": [Interval(Real, 0.5, 1, closed="neither")],
        "round_passes": [Interval(Integral, 2, None, closed="left")],
        "exact": ["boolean"],
        "seed": [Interval(Integral, 0, None, closed="left")],
        "verbose": ["verbose"],
    }

    def __init__(self, runner, *, score_method="auto", max_forward_passes=128, score_masks=None, pilot_passes=16,
                 significance=0.9, target_se=None, adaptive=True, confidence=0.95, round_passes=16, exact=True, seed=0,
                 verbose=0):
        params = {"score_method": score_method, "max_forward_passes": max_forward_passes, "score_masks": score_masks,
                  "pilot_passes": pilot_passes, "significance": significance, "target_se": target_se,
                  "adaptive": adaptive, "confidence": confidence,
                  "round_passes": round_passes, "exact": exact, "seed": seed, "verbose": verbose}
        validate_parameters(params, self._parameter_constraints, type(self).__name__)
        if score_masks is not None and score_method == "auto":
            raise ValueError("score_masks counts the draws of a named score_method; score_method='auto' spends "
                             "max_forward_passes instead: name the estimator or leave score_masks=None.")
        self.runner, self.score_method, self.max_forward_passes = runner, score_method, int(max_forward_passes)
        self.score_masks = None if score_masks is None else int(score_masks)
        self.pilot_passes, self.adaptive, self.confidence = int(pilot_passes), bool(adaptive), float(confidence)
        self.significance = float(significance)
        self.target_se = None if target_se is None else float(target_se)
        self.round_passes, self.exact, self.seed, self.verbose = int(round_passes), bool(exact), int(seed), verbose

    # -- the plan of one text
    def budget(self, length):
        """Forward passes a text of ``length`` tokens may take: ``max_forward_passes``, or ``score_masks`` draws'."""
        if self.score_masks is None:
            return self.max_forward_passes
        return estimator_strategy(self.score_method, self.score_masks).n_copies(length)

    def is_exact(self, length):
        """Whether a text of ``length`` tokens is enumerated: ``2**length - 1`` copies fit its budget."""
        if self.score_method == "exhaustive":
            return True
        return self.exact and 2**length - 1 <= self.budget(length)

    @staticmethod
    def minimum_passes(score_method, length):
        """The fewest copies ``score_method`` spends on a text of ``length`` tokens (a standard error's draws).

        ``2**length - 1`` for ``"exhaustive"``; ``"auto"``'s is that of the standard it falls back
        to (:data:`STANDARD_METHOD`, 3 copies: the all-masked one and two more).

        Examples
        --------
        >>> from skmpt.text.estimation import BudgetedEstimator
        >>> BudgetedEstimator.minimum_passes("chain", 100), BudgetedEstimator.minimum_passes("nested", 40)
        (200, 157)
        """
        if score_method == "exhaustive":
            return 2**length - 1
        score_method = STANDARD_METHOD if score_method == "auto" else score_method
        return estimator_strategy(score_method, estimator_strategy(score_method, 4).min_draws).n_copies(length)

    @staticmethod
    def strategy(score_method, length, budget):
        """The strategy of ``score_method`` with the most draws that fit ``budget`` (at least a standard error's).

        The strategy declares what this needs of it: whether its draws come in antithetic pairs
        (``paired``: counts stay even) and the fewest draws that give a standard error
        (``min_draws``); see :class:`~skmpt.text.strategies.ScoringStrategy`. A budget below
        those fewest draws' copies (:meth:`minimum_passes`) is a ``ValueError`` that names them.

        Examples
        --------
        >>> from skmpt.text.estimation import BudgetedEstimator
        >>> BudgetedEstimator.strategy("chain", 5, 23).score_masks  # 4 orderings of 5 copies fit in 23
        4
        """
        least = BudgetedEstimator.minimum_passes(score_method, length)
        if least > budget:
            raise ValueError(f"score_method={score_method!r} needs at least {least} masked copies for a text of "
                             f"{length} tokens (its fewest draws for a standard error); the budget is {budget}.")
        probe = estimator_strategy(score_method, 4)
        step = 2 if probe.paired else 1
        per_draw = max(1, probe.n_copies(length) // 4)
        count = max(probe.min_draws, budget // per_draw // step * step)
        while count > probe.min_draws and estimator_strategy(score_method, count).n_copies(length) > budget:
            count -= step  # nested: + 1 copy
        return estimator_strategy(score_method, count)

    def check_budget(self, n_tokens, names=None):
        """Refuse, before any forward pass, a text whose estimator cannot keep within its budget.

        A text of ``T`` tokens is enumerated where ``2**T - 1`` copies fit its budget; else its
        estimator (``score_method``, or ``"auto"``'s standard) must fit its fewest draws
        (:meth:`minimum_passes`) in it.

        Parameters
        ----------
        n_tokens : sequence of int
            Each text's tokens that are masked and scored.
        names : sequence of str or None, default=None
            What to call each text in the error (``"text i"`` when None).

        Raises
        ------
        ValueError
            Naming the first text refused, its tokens, the estimator's minimum and the budget.

        Examples
        --------
        >>> from skmpt.text.estimation import BudgetedEstimator
        >>> estimator = BudgetedEstimator(None, score_method="chain", max_forward_passes=8)
        >>> estimator.check_budget([3, 4])  # 7 masks enumerated; two orderings of 4 copies
        >>> estimator.check_budget([5])
        Traceback (most recent call last):
        ...
        ValueError: Text 0 has 5 tokens: score_method='chain' needs at least 10 masked copies for it ...
        """
        for i, length in enumerate(int(n) for n in n_tokens):
            method = "exhaustive" if self.exact and 2**length - 1 <= self.budget(length) else self.score_method
            least = self.minimum_passes(method, length)
            if least > self.budget(length):
                name = f"text {i}" if names is None else names[i]
                fewest = "its 2**T - 1 masks" if method == "exhaustive" else "its fewest draws for a standard error"
                budget = (f"max_forward_passes={self.max_forward_passes}" if self.score_masks is None else
                          f"the {self.budget(length)} of score_masks={self.score_masks}")
                raise ValueError(
                    f"{name[:1].upper()}{name[1:]} has {length} tokens: score_method={method!r} needs at least {least} "
                    f"masked copies for it ({fewest}), more than {budget}; raise the budget to {least} or choose "
                    "another score_method.")

    def _next_round(self, method, length, spent, stepwise, carried=False):
        """The strategy of an item's next round, or None when it is exact or what is left of its budget is too small.

        A round holds the rest of the budget (``round_passes`` when ``stepwise``), and at most
        ``chunk_budget() // length`` copies: a long text's memory does not grow with its budget.
        A stepwise round of :class:`~skmpt.text.strategies.AllocatedSizeMasks` holds at least its
        :meth:`~skmpt.text.strategies.AllocatedSizeMasks.covering_copies` (a continuation of more
        than about ``round_passes * 3 / 4`` tokens; the last takes what is left where that is less than
        two such rounds): in rounds of fewer, every round leaves its largest
        sizes to chance, and the pooled estimate spread more than LLaDA's (0.6 to 0.7 times its
        efficiency on 32 and 64 tokens in rounds of 16, on a simulated model).
        ``carried``: an earlier round scored the all-masked copy, which this one does without.
        """
        if method == "exhaustive":
            return None
        remaining = self.budget(length) - spent
        least = self.minimum_passes(method, length)
        if least > remaining:
            return None
        size = min(remaining, self.round_passes if stepwise else max(self.round_passes, chunk_budget() // length))
        strategy = self.strategy(method, length, max(least, size))
        if stepwise and isinstance(strategy, AllocatedSizeMasks) and strategy.covering_copies(length) > size:
            covering = strategy.covering_copies(length)
            size = remaining if remaining < 2 * covering else covering  # no smaller round left at the end
            strategy = self.strategy(method, length, max(least, size))
        if carried and isinstance(strategy, AllocatedSizeMasks):
            strategy = AllocatedSizeMasks(strategy.score_masks, strategy.return_std, strategy.exponent,
                                          strategy.control, full=False)
        return strategy

    def _seed(self, key, round_index):
        """A 64-bit seed from ``seed``, the round and the group's key, by a cryptographic hash.

        Not ``zlib.crc32``: its seeds for one key's rounds (and for keys that differ in a few
        bytes) differ by fixed bit patterns, and torch's generators seeded with them gave
        correlated draws (rounds whose spread and mean over seeds were off by several standard
        errors on the benchmark's tables).
        """
        text = f"{self.seed}\x00{round_index}\x00{key}".encode()
        return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")

    def _run(self, encoded, items, strategies, seeds, raw=None, progress=None):
        """One round: each item's strategy's copies run; each item's draws (``(masked, values)`` where ``raw``)
        and copies run."""
        copies = []
        for i, strategy, seed in zip(items, strategies, seeds, strict=True):
            copies.append(strategy.copies(int(encoded.n_tokens[i]), torch.Generator().manual_seed(seed)))
        flags = [strategy.per_target for strategy in strategies]
        draws = [None] * len(items)
        budget, start = chunk_budget(), 0
        while start < len(items):  # groups of items within the working-memory budget of mask entries
            stop, load = start, 0
            while stop < len(items) and (stop == start or load + copies[stop][0].numel() <= budget):
                load += copies[stop][0].numel()
                stop += 1
            for flag in (False, True):
                chosen = [k for k in range(start, stop) if flags[k] == flag]
                if not chosen:
                    continue
                values = self.runner.run_copies(encoded.subset([items[k] for k in chosen]),
                                                [copies[k] for k in chosen], per_target=flag, progress=progress)
                for k, value in zip(chosen, values, strict=True):
                    draws[k] = (copies[k][0], value) if raw and raw[k] else strategies[k].draws(copies[k][0], value)
            start = stop
        return draws, [len(masked) for masked, _ in copies]

    def _unit(self, method, length):
        """One pilot unit of ``method`` for a text of ``length`` tokens (None where it has none)."""
        if method == "nested":
            return NestedMasks(2) if length >= 2 else None  # one antithetic pair of orderings
        if method == STANDARD_METHOD:  # LLaDA's stratified copies, each target's log-probability kept for the control
            return ControlledMasks(max(2, self.pilot_passes // PILOT_UNITS))
        return estimator_strategy(method, max(2, self.pilot_passes // PILOT_UNITS))

    def _candidates(self, encoded, group, given):
        """``{method: units}`` a pilot of ``group`` measures, the standard first, within half of the budget.

        A candidate runs :data:`PILOT_UNITS` units; ``"nested"``, whose units are long, as many as
        fit but at least two (it enters right after the standard).
        """
        chosen, spent = {}, dict.fromkeys(group, 0)
        for method in (STANDARD_METHOD, *AUTO_CANDIDATES):
            if method == "nested" and not all(i in given for i in group):
                continue
            if method == "controlled":  # read from the standard's copies
                chosen.update({method: chosen[STANDARD_METHOD]} if chosen else {})
                continue
            units = {i: self._unit(method, int(encoded.n_tokens[i])) for i in group}
            if any(unit is None for unit in units.values()):
                continue
            fit = min((self.budget(int(encoded.n_tokens[i])) // PILOT_FRACTION - spent[i])
                      // unit.n_copies(int(encoded.n_tokens[i])) for i, unit in units.items())
            if fit >= (2 if method == "nested" else PILOT_UNITS):
                count = min(PILOT_UNITS, fit)
                spent = {i: spent[i] + count * unit.n_copies(int(encoded.n_tokens[i])) for i, unit in units.items()}
                chosen[method] = count
            elif method == STANDARD_METHOD:
                break
        return chosen if len(chosen) > 1 else {STANDARD_METHOD: 0}

    def _choose(self, encoded, groups, keys, methods, given, pilots, measured, progress):
        """Each pending item's estimator in ``methods``; with ``"auto"``, the pilot's units per item in ``pilots``.

        ``pilots[i][method]`` is ``(unit estimates, copies per unit, passes, spread of each unit's mean)``;
        ``measured[i]`` the group's
        variance per forward pass of each candidate.
        """
        pending = [[i for i in group if i not in methods] for group in groups]
        if self.score_method != "auto":
            for group in pending:
                methods.update(dict.fromkeys(group, self.score_method))
            return
        items, strategies, seeds, where = [], [], [], []
        for group, key in zip(pending, keys, strict=True):
            candidates = self._candidates(encoded, group, given) if group else {}
            if len(candidates) == 1:
                methods.update(dict.fromkeys(group, STANDARD_METHOD))
                continue
            for method, count in candidates.items():
                if method == "controlled":  # read from the standard's copies
                    continue
                for unit in range(count):
                    for i in group:  # one seed per question, candidate and unit: common random numbers
                        items.append(i)
                        strategies.append(self._unit(method, int(encoded.n_tokens[i])))
                        seeds.append(self._seed(f"{method}\x00{key}", -1 - unit))
                        where.append((i, method))
        if not items:
            return
        raw = [method == STANDARD_METHOD for _, method in where]
        values, counts = self._run(encoded, items, strategies, seeds, raw=raw, progress=progress)
        standard = {}
        for (i, method), value, count in zip(where, values, counts, strict=True):
            if method == STANDARD_METHOD:  # (masked, each target's log-probability) of one unit
                standard.setdefault(i, []).append(value)
                continue
            units, _, _, spreads = pilots.setdefault(i, {}).get(method, ([], count, 0, []))
            spread = np.var(value, ddof=1) / len(value) if len(value) > 1 else np.nan
            pilots[i][method] = ([*units, float(np.mean(value))], count, (len(units) + 1) * count, [*spreads, spread])
        for i, found in standard.items():
            self._read_standard(i, found, pilots)
        for group in pending:
            if group and group[0] in pilots:
                self._pick(group, methods, pilots, measured)

    @staticmethod
    def _read_standard(i, found, pilots):
        """The standard's units and the control variate's, read from the same copies: no extra pass for the latter.

        Each unit's controlled terms take their baselines from the other units' copies, drawn
        independently of its own, so that each is unbiased.
        """
        copies = len(found[0][0])
        masks = [masked.numpy() for masked, _ in found]
        standard = [float(np.mean(masked.shape[1] / masked.sum(1) * np.nansum(value, 1))) for masked, (_, value)
                    in zip(masks, found, strict=True)]
        controlled = []
        for k, (masked, value) in enumerate(zip(masks, (value for _, value in found), strict=True)):
            others = [u for u in range(len(found)) if u != k]
            fit = np.concatenate([masks[u] for u in others])
            fit_values = np.concatenate([found[u][1] for u in others])
            controlled.append(float(np.mean(ControlledMasks(copies).draws_fitted_on(masked, value, fit, fit_values))))
        none = [np.nan] * len(found)
        pilots.setdefault(i, {})[STANDARD_METHOD] = (standard, copies, len(found) * copies, none)
        pilots[i]["controlled"] = (controlled, copies, 0, none)  # the standard's copies: no pass of its own

    def _pick(self, group, methods, pilots, measured):
        """The estimator of ``group`` from its pilot (:func:`measured_choice`), its variances kept in ``measured``."""
        variances = {method: float(sum(np.var(pilots[i][method][0], ddof=1) * pilots[i][method][1] for i in group))
                     for method in pilots[group[0]]}  # per pass: a unit's variance times its copies
        degrees = {method: len(group) * (len(pilots[group[0]][method][0]) - 1) for method in variances}
        chosen = measured_choice(variances, degrees, self.significance)
        for i in group:
            methods[i], measured[i] = chosen, variances

    @staticmethod
    def _unit_precisions(found, skip):
        """Each estimator's precision per copy (1 / variance per pass) from its pilot units but unit ``skip``.

        With one unit left, the spread of that unit's own draws stands for it (None: no estimate).
        """
        precisions = {}
        for method, (units, copies, _, spreads) in found.items():
            others = [value for k, value in enumerate(units) if k != skip]
            if len(others) > 1:
                variance = np.var(others, ddof=1) * copies
            else:
                rest = [value for k, value in enumerate(spreads) if k != skip and np.isfinite(value)]
                if not rest:
                    continue
                variance = rest[0] * copies
            precisions[method] = 1.0 / max(variance, 1e-12)
        return precisions

    def _combined(self, i, method, pilots, draws, passes):
        """``(estimate, standard error)`` of item ``i``: every pilot unit's draws and the chosen estimator's.

        Pilot unit ``u`` holds one independent draw of each candidate that ran (the control variate,
        read from the standard's copies with baselines fitted on the other units, is left out);
        they are combined at inverse-variance weights, and the unit is weighted against the other
        units and the chosen estimator's draws by its precision, all measured on the **other**
        units only. A unit's weight is thus independent of its draws, and the chosen estimator's
        draws are unbiased whatever the pilot chose: the estimate is unbiased.
        """
        found = {name: unit for name, unit in pilots.get(i, {}).items() if name != "controlled"}
        own = draws.get(i)
        spread = own.var(ddof=1) / len(own) if own is not None and len(own) > 1 else 0.0
        spent = sum(cost for _, _, cost, _ in found.values())
        if not found or len(found[STANDARD_METHOD][0]) < 2:
            return float(own.mean()), float(np.sqrt(spread))
        main = passes[i] - spent if self.target_se is not None else self.max_forward_passes - spent
        overall = self._unit_precisions(found, None)
        if own is not None and spread > 0 and method in overall:
            overall[method] = 1.0 / (spread * main)  # the chosen one's spread from its own draws
        value = variance = left = 0.0
        for u in range(len(found[STANDARD_METHOD][0])):
            precisions = self._unit_precisions(found, u)  # measured without unit u
            present = {name: found[name][1] * precisions[name] for name in precisions if len(found[name][0]) > u}
            total = sum(present.values())
            if own is None:  # the pilot alone: each unit by its passes, fixed before any draw
                share = sum(found[name][1] for name in present) / spent
            else:  # the passes of the best estimator the unit is worth, out of the budget
                share = total / max(precisions.values()) / (spent + main)
            value += share * sum(weight * found[name][0][u] for name, weight in present.items()) / total
            variance += share**2 * sum((weight / total) ** 2 / (found[name][1] * overall.get(name, 1e12))
                                       for name, weight in present.items())
            left += share
        if own is not None:
            value += (1 - left) * own.mean()
            variance += (1 - left) ** 2 * spread
        return float(value), float(np.sqrt(variance))

    def _settled(self, group, draws):
        """Whether the likeliest item beats every other by ``z`` standard errors of their paired difference."""
        if any(i not in draws for i in group):  # a choice with its pilot's draws only: no paired draws
            return False
        means = {i: draws[i].mean() for i in group}
        best = max(group, key=means.get)
        z = norm.ppf(self.confidence)
        for i in group:
            if i == best:
                continue
            a, b = draws[best], draws[i]
            if len(a) == len(b):
                difference = a - b
                se = difference.std(ddof=1) / np.sqrt(len(a)) if len(a) > 1 else np.inf
            else:  # an exact value against draws: only the draws vary
                se = np.sqrt(sum(d.var(ddof=1) / len(d) for d in (a, b) if len(d) > 1))
            if not means[best] - means[i] > z * se:
                return False
        return True

    def estimate(self, encoded, keys, *, groups=None, given=None, names=None):
        """Each text's :class:`Estimate`, in the order of ``encoded``.

        Every text is checked first (:meth:`check_budget`): a text the budget cannot serve is
        refused before any forward pass. Within a group, a text given twice is scored once:
        each copy of it gets the estimate it gets alone in its group.

        Parameters
        ----------
        encoded : EncodedTexts
            Its ``content_positions`` are the tokens masked and scored (a continuation's).
        keys : sequence of str
            One per group: the text that seeds its masks (:func:`pair_keys`).
        groups : list of list of int or None, default=None
            Texts that share random numbers and are compared (the choices of one question);
            None is every text alone.
        given : collection of int or None, default=None
            The texts whose continuation has a context (for ``"auto"``'s choice); None is all.
        names : sequence of str or None, default=None
            What to call each text in an error (``"text i"`` when None).

        Returns
        -------
        estimates : list of Estimate
        """
        groups = [[i] for i in range(len(encoded))] if groups is None else [list(group) for group in groups]
        if len(keys) != len(groups):
            raise ValueError(f"Got {len(keys)} keys for {len(groups)} groups; one key per group.")
        given = set(range(len(encoded))) if given is None else set(given)
        self.check_budget(encoded.n_tokens, names)
        if self.score_method == "exhaustive":  # a text too long to enumerate is refused before any pass
            for n in encoded.n_tokens:
                ExhaustiveMasks().n_copies(int(n))
        first, kept = {}, []
        for group in groups:  # a text repeated within its group: its first copy is scored
            seen = {}
            for i in group:
                text = (tuple(encoded.input_ids[i].tolist()), tuple(encoded.content_positions[i].tolist()))
                first[i] = seen.setdefault(text, i)
            kept.append([i for i in group if first[i] == i])
        results = self._estimate(encoded, keys, kept, given)
        return [results[first.get(i, i)] for i in range(len(encoded))]

    def _estimate(self, encoded, keys, groups, given):
        """Each text's :class:`Estimate` (None for those in no group), its texts checked and distinct per group."""
        from tqdm.auto import tqdm

        n_tokens = encoded.n_tokens
        draws, passes, methods, pilots, measured, rounds = {}, {}, {}, {}, {}, {}
        with tqdm(desc="scoring (BudgetedEstimator)", unit="copy", disable=not self.verbose) as progress:
            exact = [i for group in groups for i in group if self.is_exact(int(n_tokens[i]))]
            if exact:
                strategies = [ExhaustiveMasks(max_tokens=int(n_tokens[i])) for i in exact]
                values, counts = self._run(encoded, exact, strategies, [0] * len(exact), progress=progress)
                for i, value, count in zip(exact, values, counts, strict=True):
                    draws[i], passes[i], methods[i] = value, count, "exhaustive"
            self._choose(encoded, groups, keys, methods, given, pilots, measured, progress)
            for i, found in pilots.items():
                passes[i] = sum(found_unit[2] for found_unit in found.values())
            compared = [self.adaptive and len(group) > 1 for group in groups]
            stepwise = [self.target_se is not None or compare for compare in compared]
            round_index, active = 0, list(range(len(groups)))
            while active:
                items, strategies, seeds = [], [], []
                for g in active:
                    for i in groups[g]:
                        strategy = self._next_round(methods[i], int(n_tokens[i]), passes.get(i, 0), stepwise[g],
                                                    carried=i in rounds)
                        if strategy is not None and not self._reached(i, methods[i], pilots, draws, passes):
                            items.append(i)
                            strategies.append(strategy)
                            seeds.append(self._seed(keys[g], round_index))  # one per question: common random numbers
                for i in set(rounds) - set(items):  # no more rounds: its draws are final
                    del rounds[i]
                if not items:
                    break
                raw = [isinstance(strategy, AllocatedSizeMasks) for strategy in strategies]
                values, counts = self._run(encoded, items, strategies, seeds, raw=raw, progress=progress)
                for i, strategy, value, count in zip(items, strategies, values, counts, strict=True):
                    if isinstance(value, tuple):  # the all-masked copy carried, the control fitted on other rounds
                        draws[i] = self._allocated_draws(i, strategy, *value, rounds)
                    else:
                        draws[i] = value if i not in draws else np.concatenate([draws[i], value])
                    passes[i] = passes.get(i, 0) + count
                active = [g for g in active if self.target_se is not None or not compared[g]
                          or not self._settled(groups[g], draws)]
                round_index += 1
        results = [None] * len(encoded)
        for group in groups:
            for i in group:
                is_exact = methods[i] == "exhaustive"
                value, std = ((float(draws[i][0]), 0.0) if is_exact else
                              self._combined(i, methods[i], pilots, draws, passes))
                reached = None if self.target_se is None else bool(std <= self.target_se)
                results[i] = Estimate(value, std, is_exact, int(passes[i]), methods[i],
                                      measured.get(i), reached)
        return results

    @staticmethod
    def _allocated_draws(i, strategy, masked, values, rounds):
        """Item ``i``'s draws of all its rounds of :class:`~skmpt.text.strategies.AllocatedSizeMasks` so far.

        The first round scores the all-masked copy, whose value does not vary; the later ones carry
        it (``full=False``: every copy of theirs on the other sizes). A round too small to fit its
        control variates on itself fits them on the item's **other** rounds' copies, earlier and
        later (refitted as rounds come, for the first :data:`REFIT_ROUNDS` rounds; a later round on
        the rounds before it; once they hold 4 copies per token): drawn independently of its own,
        they keep it unbiased, and the first round gets them too. The rounds' copies are
        pooled for the standard error (:meth:`~skmpt.text.strategies.AllocatedSizeMasks.stratified_draws`,
        each copy weighed by its round's share). On the benchmark's 18 tuning tables, 8 rounds of
        16 copies of 8 tokens had a median of 2.29 times LLaDA's efficiency (the lowest 1.15),
        against 1.54 (1.04) with the all-masked copy in every round, the control fitted on earlier
        rounds only and the tokens' own difficulties alone (1.99 and 1.10 with these alone). Rounds
        beyond the latest ``64 * T`` copies are frozen (their draws kept, their copies dropped):
        memory does not grow with the budget.
        """
        values = np.asarray(values, dtype=np.float64)
        found = rounds.setdefault(i, {"full": values[0], "live": [], "frozen": [], "count": 0})
        found["live"].append([strategy, masked, values, None])  # its terms, once computed
        found["count"] += 1

        def own(k):  # round k's copies without the all-masked one
            kept, m, v, _ = found["live"][k]
            return (m[1:], v[1:]) if kept.full else (m, v)

        def round_terms(k):
            kept, m, v, _ = found["live"][k]
            fit = (None, None)
            if kept.control and len(found["live"]) > 1:
                others = [own(j) for j in range(len(found["live"])) if j != k]
                fit = (np.concatenate([o[0].numpy() for o in others]), np.concatenate([o[1] for o in others]))
            return kept.terms(m, v, *fit, full_values=None if kept.full else found["full"])

        if masked.shape[1] == 1:  # one token: the all-masked copies only
            return np.concatenate([kept.draws(m, v, full_values=found["full"]) for kept, m, v, _ in found["live"]])
        # the first REFIT_ROUNDS rounds are refitted on each other as rounds come; a later one is fitted once, on the
        # rounds before it (what it holds is then fixed): the fits stay within a few per round
        for k in (range(len(found["live"])) if found["count"] <= REFIT_ROUNDS else [len(found["live"]) - 1]):
            found["live"][k][3] = round_terms(k)
        while len(found["live"]) > 1 and sum(len(own(k)[0]) for k in range(len(found["live"]))) > 64 * masked.shape[1]:
            found["frozen"].append(strategy.stratified_draws(*found["live"].pop(0)[3]))
        parts = [entry[3] for entry in found["live"]]
        # the rounds pooled: each copy's weight times its round's share of the copies (their mean is the estimate)
        shares = np.array([len(part[1]) for part in parts], dtype=np.float64) / sum(len(part[1]) for part in parts)
        pooled = strategy.stratified_draws(
            parts[0][0], np.concatenate([part[1] for part in parts]), np.concatenate([part[2] for part in parts]),
            np.concatenate([share * part[3] for share, part in zip(shares, parts, strict=True)]),
            all(part[4] for part in parts))
        return np.concatenate([*found["frozen"], pooled])

    def _reached(self, i, method, pilots, draws, passes):
        """Whether item ``i`` has drawn (pilot included) and its standard error is at most ``target_se``."""
        if self.target_se is None or (i not in draws and i not in pilots):
            return False
        return self._combined(i, method, pilots, draws, passes)[1] <= self.target_se
