"""One vocabulary for both halves: the MPT estimators by name, and what each cost parameter means.

Every estimator of ``sum_M S(x; M)`` (the cumulative MPT estimate of ``log p(x)``, or of
``log p(y | c)`` with masks among a continuation's tokens) is registered once in
:data:`MPT_ESTIMATORS`, with what one of its draws is and what it costs. The array scorers
(:func:`~skmpt.objectives.mpt_curve`, :func:`~skmpt.objectives.cumulative_score`, the
estimators' ``score_method``) offer those marked ``arrays`` (:data:`SCORE_METHODS`); the text
strategies (:func:`skmpt.text.strategies.estimator_strategy`) those marked ``text``
(:data:`skmpt.text.strategies.ESTIMATOR_METHODS`).

The parameters that name a choice or a cost mean one thing everywhere:

========================  ==========================================================================
``score_method``          which MPT estimator scores (a name of :data:`MPT_ESTIMATORS`, or ``"auto"``)
``score_masks``           Monte Carlo draws of that estimator: masks per size (sweep), orderings
                          (chain, nested), masks (uniform and its variants)
``n_masks``               training masks per sample (the array estimators, text training) only
``max_forward_passes``    a budget of masked copies (forward passes) per text or request
========================  ==========================================================================

Names of skmpt 0.1.0 that meant something else (``method``, ``n_masks`` for scoring draws, the
lm-eval model's ``estimator``) still work for one release with a ``FutureWarning``
(:func:`renamed_parameter`).

Examples
--------
>>> from skmpt.objectives import MPT_ESTIMATORS, SCORE_METHODS
>>> SCORE_METHODS
('exhaustive', 'sweep', 'nested', 'chain')
>>> MPT_ESTIMATORS["antithetic"].paired
True
"""

import warnings
from dataclasses import dataclass

__all__ = ["MPT_ESTIMATORS", "SCORE_METHODS", "MPTEstimator", "renamed_parameter"]


@dataclass(frozen=True)
class MPTEstimator:
    """One estimator of ``sum_M S(x; M)``: its name, what one draw is, what it costs and where it is offered.

    Attributes
    ----------
    name : str
    description : str
        What one draw is, and its reduction to the estimate.
    copies : str
        Masked copies (forward passes of one sequence, or conditionals per sample) per draw, for
        ``L`` tokens.
    paired : bool
        The text strategy's draws come in antithetic pairs (an ordering and its reverse): what
        :class:`skmpt.text.estimation.BudgetedEstimator` reads, through the strategy, to size it.
    arrays : bool
        Offered by the array scorers (:data:`SCORE_METHODS`).
    text : bool
        Offered by the text strategies.
    """

    name: str
    description: str
    copies: str
    paired: bool = False
    arrays: bool = False
    text: bool = True


#: Every estimator of ``sum_M S(x; M)``, by name: the one registry both halves read.
MPT_ESTIMATORS = {estimator.name: estimator for estimator in (
    MPTEstimator("exhaustive", "every non-empty mask once: sum_M S(x; M) exactly, no Monte Carlo error",
                 "2**L - 1 in all", arrays=True),
    MPTEstimator("sweep", "one uniformly random mask of every size M = 1..L; the draw is sum_M (1/M) sum_masked "
                 "log p (the paper's estimator)", "L", arrays=True),
    MPTEstimator("nested", "one random ordering's nested masks, sizes 1..L, every masked token scored: on arrays "
                 "the sweep over these correlated masks; on text mixed with the chain by chain_weight (default 1, "
                 "the chain) in antithetic pairs, the all-masked copy run once",
                 "L (arrays); L - 1 per ordering plus 1 (text)", paired=True, arrays=True),
    MPTEstimator("chain", "one random ordering, each token predicted given those revealed before it: the chain "
                 "rule, exact for conditionals of one joint", "L", arrays=True),
    MPTEstimator("antithetic", "the chain along an ordering and its reverse; a pair is one draw", "2 L", paired=True),
    MPTEstimator("uniform", "one mask of a uniformly random size M; the draw is (L/M) sum_masked log p "
                 "(LLaDA's, RADD's)", "1"),
    MPTEstimator("stratified", "uniform's draws with their sizes evenly spread from one random start (LLaDA's "
                 "evaluation)", "1"),
    MPTEstimator("balanced", "the all-masked copy once, the other sizes evenly spread, each size's masks windows of "
                 "one ordering (positions balanced)", "1 (plus the all-masked copy)"),
    MPTEstimator("allocated", "the all-masked copy once, the other sizes' copies in proportion to M**-1/4, each "
                 "size's mean", "1 (plus the all-masked copy)"),
    MPTEstimator("adjusted", "allocated's copies minus a control variate per token, its baselines and coefficient "
                 "fitted on the other half of the copies (the lm-eval standard)", "1 (plus the all-masked copy)"),
    MPTEstimator("controlled", "stratified sizes minus a control variate per token fitted on the other masks", "1"),
    MPTEstimator("time", "a time t, each token masked with probability t, weighed E[1/t | M] = (L+1)/M (MDLM's, "
                 "i.i.d. times)", "1"),
    MPTEstimator("low_discrepancy", "time's draws with evenly spread times (MDLM's sampler)", "1"),
)}

#: The estimators the array scorers offer (``score_method`` of the estimators, :func:`~skmpt.objectives.mpt_curve`).
SCORE_METHODS = tuple(name for name, estimator in MPT_ESTIMATORS.items() if estimator.arrays)


def renamed_parameter(old_name, old_value, new_name, new_value, caller, *, stacklevel=3):
    """The value of a renamed parameter: ``new_value``, or the old spelling's with a ``FutureWarning`` naming the new.

    The old name's default is the string ``"deprecated"`` (scikit-learn's convention): any other
    value means it was given, and it wins.

    Examples
    --------
    >>> import warnings
    >>> from skmpt.objectives.vocabulary import renamed_parameter
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     value = renamed_parameter("method", "chain", "score_method", "sweep", "f")
    >>> value, caught[0].category.__name__
    ('chain', 'FutureWarning')
    >>> renamed_parameter("method", "deprecated", "score_method", "sweep", "f")
    'sweep'
    """
    if isinstance(old_value, str) and old_value == "deprecated":
        return new_value
    warnings.warn(f"{caller}: the parameter {old_name} was renamed {new_name} in skmpt 0.2 and will be removed in "
                  f"0.3; pass {new_name}={old_value!r}.", FutureWarning, stacklevel=stacklevel)
    return old_value
