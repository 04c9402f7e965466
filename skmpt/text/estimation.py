"""The budgeted estimator of ``log p(continuation | context)``: one engine for lm-eval, the scorer and the functions.

For a continuation of ``T`` tokens (masks fall only among them, the context visible), the MPT
identity gives ``log p(y | c) = sum_{M=1..T} S(y | c; M)``. :class:`BudgetedEstimator` spends
at most ``max_forward_passes`` masked copies (forward passes) per text on it:

- **exact** where the masks can be enumerated (``2**T - 1 <= max_forward_passes``):
  :class:`~skmpt.text.strategies.ExhaustiveMasks`, zero variance;
- else a Monte Carlo estimator (:mod:`skmpt.text.strategies`) named by ``score_method``, or
  chosen per question by ``"auto"``: a small **pilot** measures the spread of the masks' terms
  with and without a control variate per token
  (:func:`~skmpt.text.strategies.pilot_variances`,
  :func:`~skmpt.text.strategies.least_variance_estimator`);
- the choices of one question share their random numbers (**common random numbers**: only
  differences decide a ranking) and, with ``adaptive=True``, draws come in rounds that **stop**
  as soon as the likeliest choice beats every other at ``confidence``;
- every estimate carries its **standard error** and the **forward passes** it spent.

A text's masks depend only on ``seed`` and its key (:func:`pair_keys`), never on the batch or
the process. It needs neither lm-eval nor a scorer: a :class:`~skmpt.text.MaskedLMRunner` and
encoded texts (:func:`~skmpt.text.encode_pairs`). :class:`~skmpt.text.harness.MaskedLMHarness`
translates lm-eval's requests into calls of it; :meth:`skmpt.MLMCurveScorer.conditional_score_samples`,
:func:`~skmpt.text.conditional_log_likelihood` and :func:`~skmpt.text.multiple_choice` call it
too, so that all give the same estimate for the same seed and budget.
"""

import zlib
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
import torch
from scipy.stats import norm

from .._utils import chunk_budget
from .._validation import Interval, Options, validate_parameters
from .strategies import (ESTIMATOR_METHODS, BalancedMasks, ControlledMasks, ExhaustiveMasks, estimator_strategy,
                         least_variance_estimator, pilot_variances)

__all__ = ["BudgetedEstimator", "Estimate", "pair_keys"]


class Estimate(NamedTuple):
    """One text's estimate: ``log_likelihood``, ``std``, ``exact``, ``forward_passes`` and ``score_method``.

    ``score_method`` names the estimator used (``"exhaustive"`` when exact).
    """

    log_likelihood: float
    std: float
    exact: bool
    forward_passes: int
    score_method: str


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


class BudgetedEstimator:
    """``log p(continuation | context)`` at a budget of forward passes: exact where it can be, else the best estimator.

    Parameters
    ----------
    runner : MaskedLMRunner
        The predictor with its tokenizer (a fitted scorer's ``runner_``).
    score_method : str, default="auto"
        The Monte Carlo estimator for a continuation whose masks are too many to enumerate
        (:func:`~skmpt.text.strategies.estimator_strategy`), or ``"auto"``: per question a pilot
        of ``min(pilot_passes, max_forward_passes // 8)`` copies (those of ``"controlled"``)
        picks ``"controlled"`` where a control variate per token divides the terms' spread by
        more than 4, else ``"nested"`` for a question whose continuations all have a context
        where two antithetic pairs of its orderings fit in the rest, else ``"balanced"``; no
        pilot (``"balanced"``, or ``"stratified"`` at a budget of 2, below balanced's 3 copies)
        when that is below 4 copies. The estimate is the chosen
        estimator's alone; the pilot's passes are counted. ``"exhaustive"`` enumerates every
        text (at most 12 tokens).
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
    adaptive : bool, default=True
        The choices of a question are drawn in rounds of ``round_passes`` and stop once the
        ranking is settled.
    confidence : float in (0.5, 1), default=0.95
        The likeliest choice must beat each other by ``norm.ppf(confidence)`` standard errors
        of their paired difference.
    round_passes : int >= 2, default=16
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
        "adaptive": ["boolean"],
        "confidence": [Interval(Real, 0.5, 1, closed="neither")],
        "round_passes": [Interval(Integral, 2, None, closed="left")],
        "exact": ["boolean"],
        "seed": [Interval(Integral, 0, None, closed="left")],
        "verbose": ["verbose"],
    }

    def __init__(self, runner, *, score_method="auto", max_forward_passes=128, score_masks=None, pilot_passes=16,
                 adaptive=True, confidence=0.95, round_passes=16, exact=True, seed=0, verbose=0):
        params = {"score_method": score_method, "max_forward_passes": max_forward_passes, "score_masks": score_masks,
                  "pilot_passes": pilot_passes, "adaptive": adaptive, "confidence": confidence,
                  "round_passes": round_passes, "exact": exact, "seed": seed, "verbose": verbose}
        validate_parameters(params, self._parameter_constraints, type(self).__name__)
        if score_masks is not None and score_method == "auto":
            raise ValueError("score_masks counts the draws of a named score_method; score_method='auto' spends "
                             "max_forward_passes instead: name the estimator or leave score_masks=None.")
        self.runner, self.score_method, self.max_forward_passes = runner, score_method, int(max_forward_passes)
        self.score_masks = None if score_masks is None else int(score_masks)
        self.pilot_passes, self.adaptive, self.confidence = int(pilot_passes), bool(adaptive), float(confidence)
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

        ``2**length - 1`` for ``"exhaustive"``; ``"auto"``'s is that of the cheapest estimator it
        falls back to (``"stratified"``, 2 copies).

        Examples
        --------
        >>> from skmpt.text.estimation import BudgetedEstimator
        >>> BudgetedEstimator.minimum_passes("chain", 100), BudgetedEstimator.minimum_passes("nested", 40)
        (200, 157)
        """
        if score_method == "exhaustive":
            return 2**length - 1
        score_method = "stratified" if score_method == "auto" else score_method
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
        estimator (``score_method``, or ``"auto"``'s cheapest) must fit its fewest draws
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

    def _next_round(self, method, length, spent, started, compared):
        """The strategy of an item's next round, or None when it is exact, done or out of budget."""
        if method == "exhaustive" or (started and not compared):
            return None
        remaining = self.budget(length) - spent
        least = self.minimum_passes(method, length)
        if started and least > remaining:
            return None
        return self.strategy(method, length, max(least, min(remaining, self.round_passes) if compared else remaining))

    def _seed(self, key, round_index):
        return zlib.crc32(f"{round_index}\x00{key}".encode(), self.seed)

    def _run(self, encoded, items, strategies, seeds, reduce=None, progress=None):
        """One round: each item's strategy's copies run; each item's draws (or ``reduce``'s) and copies run."""
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
                    draws[k] = (reduce or strategies[k].draws)(copies[k][0], value)
            start = stop
        return draws, [len(masked) for masked, _ in copies]

    def _choose(self, encoded, groups, keys, methods, passes, given, progress):
        """Each pending item's estimator in ``methods``; with ``"auto"``, the pilot runs (its passes in ``passes``)."""
        pending = [[i for i in group if i not in methods] for group in groups]
        copies = min(self.pilot_passes, self.max_forward_passes // 8)  # an eighth of the budget at most
        if self.score_method != "auto" or copies < 4:
            cheapest = "balanced" if BalancedMasks.min_draws <= self.max_forward_passes else "stratified"
            for group in pending:
                methods.update(dict.fromkeys(group, cheapest if self.score_method == "auto" else self.score_method))
            return
        items = [i for group in pending for i in group]
        seeds = [self._seed(key, -1) for group, key in zip(pending, keys, strict=True) for _ in group]
        pilot = ControlledMasks(copies)
        found, counts = self._run(encoded, items, [pilot] * len(items), seeds, reduce=pilot_variances,
                                  progress=progress)
        found, counts = dict(zip(items, found, strict=True)), dict(zip(items, counts, strict=True))
        for group in pending:  # the choices of a question: one estimator, their variances summed
            summed = {name: sum(found[i][name] for i in group) for name in ("terms", "controlled")}
            nested = all(i in given and estimator_strategy("nested", 4).n_copies(int(encoded.n_tokens[i]))
                         <= self.max_forward_passes - counts[i] for i in group)
            for i in group:
                methods[i] = least_variance_estimator(summed, otherwise="nested" if nested else "balanced")
                passes[i] = counts[i]

    def _settled(self, group, draws):
        """Whether the likeliest item beats every other by ``z`` standard errors of their paired difference."""
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
        draws, passes, methods = {}, {}, {}
        with tqdm(desc="scoring (BudgetedEstimator)", unit="copy", disable=not self.verbose) as progress:
            exact = [i for group in groups for i in group if self.is_exact(int(n_tokens[i]))]
            if exact:
                strategies = [ExhaustiveMasks(max_tokens=int(n_tokens[i])) for i in exact]
                values, counts = self._run(encoded, exact, strategies, [0] * len(exact), progress=progress)
                for i, value, count in zip(exact, values, counts, strict=True):
                    draws[i], passes[i], methods[i] = value, count, "exhaustive"
            self._choose(encoded, groups, keys, methods, passes, given, progress)
            compared = [self.adaptive and len(group) > 1 for group in groups]
            round_index, active = 0, list(range(len(groups)))
            while active:
                items, strategies, seeds = [], [], []
                for g in active:
                    for i in groups[g]:
                        strategy = self._next_round(methods[i], int(n_tokens[i]), passes.get(i, 0), i in draws,
                                                    compared[g])
                        if strategy is not None:
                            items.append(i)
                            strategies.append(strategy)
                            seeds.append(self._seed(keys[g], round_index))  # one per question: common random numbers
                if not items:
                    break
                values, counts = self._run(encoded, items, strategies, seeds, progress=progress)
                for i, value, count in zip(items, values, counts, strict=True):
                    draws[i] = value if i not in draws else np.concatenate([draws[i], value])
                    passes[i] = passes.get(i, 0) + count
                active = [g for g in active if compared[g] and not self._settled(groups[g], draws)]
                round_index += 1
        results = [None] * len(encoded)
        for group in groups:
            for i in group:
                is_exact = methods[i] == "exhaustive"
                std = 0.0 if is_exact else float(draws[i].std(ddof=1) / np.sqrt(len(draws[i])))
                results[i] = Estimate(float(draws[i].mean()), std, is_exact, int(passes[i]), methods[i])
        return results
