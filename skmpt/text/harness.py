"""skmpt as a backend of EleutherAI's lm-evaluation-harness: the model ``skmpt`` of ``lm_eval``.

Importing this module registers :class:`MaskedLMHarness` with lm-eval under the name ``skmpt``
(``lm_eval.simple_evaluate(model="skmpt", model_args="pretrained=antiberty", ...)``); it needs
lm-eval (``pip install "skmpt[eval]"``); ``import skmpt.text`` does not.

A masked or masked-diffusion LM has no left-to-right likelihood; it has the MPT identity
``log p(y | c) = sum_{M=1..T} S(y | c; M)`` over the continuation's ``T`` tokens ``y`` with the
context ``c`` visible, exact for conditionals of one joint and a lower bound (the negative
ELBO's) for a masked diffusion LM. lm-eval's three requests become:

- ``loglikelihood(context, continuation)``: that sum, **exact** (its expectation, by enumerating
  the ``2**T - 1`` masks of the continuation) when ``2**T - 1 <= max_forward_passes``, else a
  Monte Carlo estimate from ``max_forward_passes`` masked copies with its standard error. The
  choices of one question share their random numbers and, with ``adaptive=True``, draws stop
  as soon as the likeliest choice beats every other at ``confidence``. ``is_greedy``: unmasking
  the continuation from the context alone, one token per pass, the most confident masked
  position first (LLaDA's ``suffix_greedy_prediction``), rebuilds the continuation exactly.
- ``loglikelihood_rolling(text)``: the same sum over the whole text (no context): minus its
  negative ELBO with the linear schedule. A text longer than the model's context is cut into
  windows of ``limit - rolling_context`` tokens, each scored with up to ``rolling_context``
  preceding tokens visible, so the bound is that of ``sum_w log p(window_w | its preceding
  rolling_context tokens)``.
- ``generate_until(context, gen_kwargs)``: LLaDA's sampler, blocks of masks after the context
  unmasked a few per step, the most confident first (low-confidence remasking).

Every result carries its standard error, exactness and forward passes: lm-eval logs each result
object in its samples, and :func:`annotate_samples` turns them into numbers per sample and a
summary per task.
"""

import copy
import logging
import math
import os
import warnings
import zlib
from collections import Counter
from numbers import Integral, Real

import numpy as np
import torch

try:
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model
except ImportError as exc:  # pragma: no cover - the eval extra is absent
    raise ImportError('skmpt.text.harness needs lm-evaluation-harness: pip install "skmpt[eval]"') from exc

from .._utils import chunk_budget, resolve_device, resolve_dtype
from .._validation import Interval, Options, validate_parameters
from ..distributed import launcher_ranks
from .conditional import encode_pairs
from .encoding import EncodedTexts, check_max_length, encode_texts
from .estimation import BudgetedEstimator, pair_keys
from .loading import load_masked_lm, model_max_length
from .pretrained import load_antiberty
from .runner import MaskedLMRunner
from .strategies import ESTIMATOR_METHODS
from .unmasking import generate_masked, greedy_matches, special_ids

__all__ = ["LoglikelihoodEstimate", "MaskedLMHarness", "RollingEstimate", "annotate_samples", "generate_masked"]

logger = logging.getLogger(__name__)


class LoglikelihoodEstimate(tuple):
    """``(log_likelihood, is_greedy)`` as lm-eval expects, with ``std``, ``exact``, ``forward_passes``, ...

    ... ``estimator``, ``pilot_variances`` and ``target_reached``. ``estimator`` names the estimator used
    (``"exhaustive"`` when exact); ``pilot_variances`` is the variance per forward pass that
    ``score_method="auto"``'s pilot measured for each candidate (None without a pilot);
    ``target_reached`` whether ``std`` is at most ``target_se`` (None without a target).
    """

    def __new__(cls, log_likelihood, is_greedy, std, exact, forward_passes, estimator, pilot_variances=None,
                target_reached=None):
        result = super().__new__(cls, (float(log_likelihood), bool(is_greedy)))
        result.std, result.exact, result.forward_passes = float(std), bool(exact), int(forward_passes)
        result.estimator, result.pilot_variances = str(estimator), pilot_variances
        result.target_reached = target_reached
        return result

    def __getnewargs__(self):  # pickled when lm-eval gathers samples over processes
        return (*self, self.std, self.exact, self.forward_passes, self.estimator, self.pilot_variances,
                self.target_reached)


class RollingEstimate(float):
    """A text's log-likelihood bound as lm-eval expects (a float), with ``std``, ``exact``, ``forward_passes``, ...

    ... ``estimator`` (the estimators of its windows, joined by ``"+"`` when they differ),
    ``pilot_variances`` (one entry per window, as :class:`LoglikelihoodEstimate`'s) and
    ``target_reached`` (the text's ``std`` at most ``target_se``; None without a target).
    """

    def __new__(cls, log_likelihood, std, exact, forward_passes, estimator, pilot_variances=None,
                target_reached=None):
        result = super().__new__(cls, float(log_likelihood))
        result.std, result.exact, result.forward_passes = float(std), bool(exact), int(forward_passes)
        result.estimator, result.pilot_variances = str(estimator), pilot_variances
        result.target_reached = target_reached
        return result

    def __getnewargs__(self):
        return (float(self), self.std, self.exact, self.forward_passes, self.estimator, self.pilot_variances,
                self.target_reached)


def _estimate_fields(response):
    return {"std": response.std, "exact": response.exact, "forward_passes": response.forward_passes,
            "estimator": response.estimator, "pilot_variances": response.pilot_variances,
            "target_reached": response.target_reached}


def annotate_samples(results):
    """Write each request's standard error, exactness and forward passes into lm-eval's logged samples.

    Each logged sample of ``results["samples"]`` (``simple_evaluate(..., log_samples=True)``)
    gets ``"skmpt"``: one dict per request (``std``, ``exact``, ``forward_passes``,
    ``estimator``, ``pilot_variances``: what ``score_method="auto"``'s pilot measured,
    ``target_reached``), and ``results["skmpt"][task]`` sums them up: requests, how many were
    exact, forward passes in all and per request, the root mean square standard error, how many
    requests each estimator scored (``estimators``) and, with ``target_se``, how many reached it
    (``target_reached``; None without a target).

    Parameters
    ----------
    results : dict
        What ``lm_eval.simple_evaluate`` returned; changed in place and returned.

    Returns
    -------
    results : dict
    """
    summary = {}
    for task, samples in (results or {}).get("samples", {}).items():
        fields = []
        for sample in samples:
            sample["skmpt"] = [_estimate_fields(resps[0]) for resps in sample["resps"]
                               if resps and hasattr(resps[0], "forward_passes")]
            fields.extend(sample["skmpt"])
        if fields:
            passes = np.array([field["forward_passes"] for field in fields])
            std = np.array([field["std"] for field in fields])
            summary[task] = {"requests": len(fields), "exact": int(sum(field["exact"] for field in fields)),
                             "forward_passes": int(passes.sum()), "forward_passes_per_request": float(passes.mean()),
                             "rms_std": float(np.sqrt(np.mean(std**2))),
                             "estimators": dict(sorted(Counter(field["estimator"] for field in fields).items())),
                             "target_reached": None if all(field["target_reached"] is None for field in fields)
                             else int(sum(bool(field["target_reached"]) for field in fields))}
    if results is not None:
        results["skmpt"] = summary
    return results


def _load(pretrained, tokenizer, device, dtype, trust_remote_code, mask_token_id, shift_logits, timestep_arg):
    """The predictor and tokenizer of ``pretrained``: AntiBERTy by the name ``antiberty``, else any masked LM."""
    if isinstance(pretrained, str) and pretrained == "antiberty":
        pretrained, tokenizer = load_antiberty()
    timestep_fn = None if timestep_arg is None else (lambda rates: {timestep_arg: rates})
    return load_masked_lm(pretrained, tokenizer=tokenizer, device=device, dtype=dtype,
                          model_kwargs={"trust_remote_code": True} if trust_remote_code else None,
                          mask_token_id=mask_token_id, shift_logits=shift_logits, timestep_fn=timestep_fn)


#: The model arguments of :class:`MaskedLMHarness` and what each accepts (checked before the model loads).
_PARAMETER_CONSTRAINTS = {
    "score_method": [Options({"auto", *(name for name in ESTIMATOR_METHODS if name != "exhaustive")})],
    "max_forward_passes": [Interval(Integral, 1, None, closed="left")],
    "pilot_passes": [Interval(Integral, 4, None, closed="left")],
    "significance": [Interval(Real, 0, 1, closed="neither")],
    "target_se": [None, Interval(Real, 0, None, closed="neither")],
    "adaptive": ["boolean"],
    "confidence": [Interval(Real, 0.5, 1, closed="neither")],
    "round_passes": [Interval(Integral, 2, None, closed="left")],
    "check_greedy": ["boolean"],
    "rolling_context": [None, Interval(Integral, 0, None, closed="left")],
    "max_length": [None, Interval(Integral, 2, None, closed="left")],
    "seed": [Interval(Integral, 0, None, closed="left")],
}

#: A value no caller passes: the parameter was not given.
_UNSET = object()


@register_model("skmpt")
class MaskedLMHarness(LM):
    """An lm-eval model over any masked predictor skmpt loads: exact where the masks can be enumerated.

    Parameters
    ----------
    pretrained : str, path, model or MaskedPredictor, default="antiberty"
        ``"antiberty"`` (:func:`~skmpt.text.load_antiberty`), a directory, a hub name or an object,
        as :func:`~skmpt.text.load_masked_lm` takes.
    tokenizer : str, path, tokenizer or None, default=None
    score_method : str, default="auto"
        The Monte Carlo estimator of :class:`~skmpt.text.estimation.BudgetedEstimator` (which
        this model calls for every request) for a continuation whose masks are too many to enumerate
        (:func:`~skmpt.text.strategies.estimator_strategy`). ``"auto"`` runs the standard,
        ``"adjusted"`` (:class:`~skmpt.text.strategies.AllocatedSizeMasks` with its control
        variate: the all-masked copy once, the other sizes' copies in proportion to
        ``M**-1/4``, minus control variates for each token's own difficulty and each masked
        token's effect on the others, whose coefficients are measured on the request's own
        copies, cross-fitted so that they do not bias the estimate). Candidates
        added to :data:`~skmpt.text.estimation.AUTO_CANDIDATES` (none by default) are measured
        per request (per question for the choices of one question, so that they keep sharing
        random numbers) by a pilot within half of ``max_forward_passes``, in
        :data:`~skmpt.text.estimation.PILOT_UNITS` independent units, and the candidate of least
        variance per forward pass is chosen unless the standard's is within noise of it (a
        one-sided F test at ``significance``); every pilot draw counts in the estimate, each unit
        at a weight measured on the other units, so neither the choice nor the weights bias it.
        Each result names the estimator used and the pilot's variances (``pilot_variances``,
        None without a pilot).
        Naming one forces it: ``"allocated"`` (without the control variate), ``"balanced"``,
        ``"controlled"``, ``"antithetic"``, ``"nested"``,
        ``"stratified"`` (LLaDA's), ``"chain"``, ``"sweep"``, ``"uniform"``,
        ``"low_discrepancy"`` (MDLM's and Dream's), ``"time"``; the variance of each, per forward
        pass, on AntiBERTy and a small diffusion LM, is measured by
        ``benchmarks/text_estimator_variance.py`` (see the user guide's lm-eval page).
    pilot_passes : int, default=16
        Copies of each candidate's pilot with ``score_method="auto"`` and candidates, at least 4:
        :data:`~skmpt.text.estimation.PILOT_UNITS` units of ``max(2, pilot_passes // PILOT_UNITS)``
        copies (``"controlled"`` reads the standard's; ``"nested"``, if added to the candidates:
        units of one antithetic pair of orderings).
    significance : float in (0, 1), default=0.9
        The level of ``"auto"``'s one-sided F test (Bonferroni over its candidates): large, since
        a wrong switch costs little when every pilot draw counts.
    target_se : float or None, default=None
        A standard error in nats to reach per request: draws come in rounds of ``round_passes``
        until the estimate's standard error is at most this or ``max_forward_passes`` is spent;
        each result says which (``target_reached``). None spends the budget.
    max_forward_passes : int, default=128
        Masked copies per request at most (each one forward pass of one sequence), whatever the
        estimator; a continuation of ``T`` tokens with ``2**T - 1`` at most this is scored
        exactly. A request whose estimator needs more for its fewest draws
        (:meth:`~skmpt.text.estimation.BudgetedEstimator.minimum_passes`: ``2 * T`` copies for
        ``"chain"``, ``4 * (T - 1) + 1`` for ``"nested"``, 3 for ``"auto"``) is refused, with
        that minimum, before any forward pass.
    adaptive : bool, default=True
        Multiple choice: draw in rounds of ``round_passes`` and stop once the ranking is settled.
    confidence : float in (0.5, 1), default=0.95
        The likeliest choice must beat each other one by ``norm.ppf(confidence)`` standard errors
        of their paired difference.
    round_passes : int, default=16
        Passes per choice per round of the adaptive budget (at least every mask size once in
        expectation for ``"auto"``: more for a continuation of more than 13 tokens).
    check_greedy : bool, default=True
        Compute ``is_greedy`` (up to ``T`` more passes per request); ``False`` reports ``False``.
    rolling_context : int or None, default=None
        Tokens kept visible before each window of ``loglikelihood_rolling``; ``None`` is half
        the model's context.
    dtype : str or None, default=None
        ``"float32"``, ``"bfloat16"``, ...; ``None`` keeps the model's own.
    device : str, default="auto"
        ``"auto"`` (CUDA when available, as lm-eval's Hugging Face model), ``"cpu"``, ``"cuda"``,
        ``"cuda:N"``. Under a launcher, ``"auto"`` and ``"cuda"`` mean ``cuda:LOCAL_RANK``.
    batch_size : int, default=64
        Masked copies per forward pass at most: with the rounds of the estimator (at most
        ``chunk_budget() // T`` copies of a text of ``T`` tokens each), the memory a request
        takes does not grow with ``max_forward_passes``.
    max_batch_size : int or None, default=None
        Accepted for lm-eval's interface; unused.
    max_length : int or None, default=None
        Longest sequence, special tokens included; ``None`` is the model's.
    trust_remote_code : bool, default=False
    mask_token_id : int or None, default=None
        For a tokenizer without a mask token.
    shift_logits : bool, default=False
        Logits at ``i`` predict token ``i + 1`` (Dream).
    timestep_arg : str or None, default=None
        Pass each copy's masking rate to the model's forward as this keyword.
    seed : int, default=0
        Seeds the masks and the sampler, with each request's content (its text, and
        ``gen_kwargs`` for ``generate_until``): a request's result does not depend on its place in
        the call, on the other requests, on how often it is repeated or on the process.
    estimator : str
        Deprecated since 0.2, removed in 0.3: the old name of ``score_method``.

    Examples
    --------
    >>> from skmpt.text.harness import MaskedLMHarness
    >>> lm = MaskedLMHarness(pretrained="antiberty", max_forward_passes=15)  # doctest: +SKIP
    >>> from lm_eval.api.instance import Instance  # doctest: +SKIP
    >>> request = Instance("loglikelihood", {}, ("EVQLVESGG", "GLV"), 0)  # doctest: +SKIP
    >>> lm.loglikelihood([request])[0].exact  # 2**3 - 1 = 7 masks <= 15: enumerated  # doctest: +SKIP
    True
    """

    def __init__(self, pretrained="antiberty", *, tokenizer=None, score_method="auto", max_forward_passes=128,
                 pilot_passes=16, significance=0.9, target_se=None, adaptive=True, confidence=0.95, round_passes=16,
                 check_greedy=True, rolling_context=None, dtype=None, device="auto", batch_size=64, max_batch_size=None,
                 max_length=None, trust_remote_code=False, mask_token_id=None, shift_logits=False, timestep_arg=None,
                 seed=0, estimator=_UNSET):
        super().__init__()
        if estimator is not _UNSET:
            warnings.warn("The model argument estimator was renamed score_method in skmpt 0.2 and will be removed in "
                          "0.3: pass score_method=... (model_args='score_method=...').", FutureWarning, stacklevel=2)
            score_method = estimator
        target_se = None if target_se == "None" else target_se  # lm-eval's model_args keep "None" a string
        params = {"score_method": score_method, "max_forward_passes": max_forward_passes,
                  "pilot_passes": pilot_passes, "significance": significance, "target_se": target_se,
                  "adaptive": adaptive, "confidence": confidence,
                  "round_passes": round_passes, "check_greedy": check_greedy, "rolling_context": rolling_context,
                  "max_length": max_length, "seed": seed}
        validate_parameters(params, _PARAMETER_CONSTRAINTS, type(self).__name__)
        self.score_method, self.max_forward_passes, self.adaptive = score_method, max_forward_passes, adaptive
        self.confidence, self.round_passes, self.check_greedy = float(confidence), round_passes, check_greedy
        self.seed, self.pilot_passes = int(seed), pilot_passes
        self.significance, self.target_se = float(significance), target_se
        batch_size = batch_size if isinstance(batch_size, int) and batch_size > 0 else 64  # lm-eval's "auto"
        ranks = launcher_ranks(os.environ)
        device = resolve_device(device)
        if device.type == "cuda" and device.index is None and ranks is not None:
            device = torch.device("cuda", ranks[2])  # one GPU per process, as torch.distributed expects
        predictor, tokenizer = _load(pretrained, tokenizer, device, None if dtype is None else resolve_dtype(dtype),
                                     trust_remote_code, mask_token_id, shift_logits, timestep_arg)
        length = model_max_length(predictor.module, tokenizer, 512 if max_length is None else int(max_length))
        self.runner = MaskedLMRunner(predictor, tokenizer, device, max_length=length, score_batch_size=batch_size)
        self.limit = check_max_length(tokenizer, length)  # the text's own tokens that fit
        context = self.limit // 2 if rolling_context is None else int(rolling_context)
        if not 0 <= context < self.limit:
            raise ValueError(f"rolling_context must be in [0, {self.limit}) (the model's context); got {context!r}.")
        self.rolling_context = context
        self.likelihood_estimator = BudgetedEstimator(
            self.runner, score_method=score_method, max_forward_passes=max_forward_passes, pilot_passes=pilot_passes,
            significance=significance, target_se=target_se, adaptive=adaptive, confidence=confidence,
            round_passes=round_passes, seed=self.seed)
        self._device = device
        if ranks is not None:
            self._rank, self._world_size = ranks[0], ranks[1]

    # -- several processes: lm-eval deals the documents out by rank; results are gathered here
    def _group(self):
        if self.world_size > 1 and not torch.distributed.is_initialized():
            torch.distributed.init_process_group("gloo" if self._device.type == "cpu" else "nccl")

    def gather_object(self, obj, dst=0):
        """All processes' ``obj`` on ``dst`` (``None`` elsewhere); ``[obj]`` in one process."""
        if self.world_size == 1:
            return [obj]
        self._group()
        gathered = [None] * self.world_size
        torch.distributed.all_gather_object(gathered, obj)
        return gathered if self.rank == dst else None

    def all_gather(self, tensor):
        """Every process's ``tensor``, concatenated."""
        if self.world_size == 1:
            return tensor
        self._group()
        parts = [torch.zeros_like(tensor) for _ in range(self.world_size)]
        torch.distributed.all_gather(parts, tensor)
        return torch.stack(parts) if tensor.ndim == 0 else torch.cat(parts)

    def barrier(self):
        """Wait for every process."""
        if self.world_size > 1:
            self._group()
            torch.distributed.barrier()

    @property
    def tokenizer_name(self):
        return str(getattr(self.runner.tokenizer, "name_or_path", "skmpt")).replace("/", "__")

    # -- encoding
    def _pair(self, index, context, continuation):
        """``(context, continuation)`` as lm-eval's Hugging Face backend splits them, the context cut to fit."""
        if not isinstance(continuation, str) or not continuation.strip():
            raise ValueError(f"Request {index}: the continuation {continuation!r} is empty; lm-eval asks for the "
                             "log-likelihood of a non-empty continuation.")
        spaces = len(context) - len(context.rstrip())
        if spaces:  # the space before a word belongs to the word
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        if not context.strip():  # the continuation alone: all of it must fit, as it must beside a context
            n_tokens = len(self.runner.tokenizer(continuation.lstrip(), add_special_tokens=False)["input_ids"])
            if n_tokens > self.limit:
                raise ValueError(f"Request {index}: the continuation has {n_tokens} tokens; at most {self.limit} fit "
                                 "the model's context (a truncated continuation would be scored as another text).")
            return "", continuation, False
        tokens = self.runner.tokenizer(context + continuation, add_special_tokens=False, return_offsets_mapping=True)
        offsets = tokens["offset_mapping"]
        n_context = sum(start < len(context) for start, _ in offsets)
        if len(offsets) - n_context > self.limit - 1:
            raise ValueError(f"Request {index}: the continuation has {len(offsets) - n_context} tokens; at most "
                             f"{self.limit - 1} fit the model's context beside one token of context.")
        excess = len(offsets) - self.limit
        if excess > 0:  # cut from the left, as lm-eval's Hugging Face backend does
            context = context[offsets[excess][0]:]
        return context, continuation, excess > 0

    def _encode_requests(self, requests):
        """The pairs of ``requests`` encoded, context visible, with one warning for every context cut."""
        pairs = [self._pair(i, *request.args[:2]) for i, request in enumerate(requests)]
        cut = sum(was_cut for _, _, was_cut in pairs)
        if cut:
            warnings.warn(f"{cut} of {len(pairs)} contexts were longer than the model's {self.limit} tokens "
                          "(with the continuation); they were cut from the left.", UserWarning, stacklevel=3)
        input_ids, positions = [], []
        for context, continuation, _ in pairs:
            if context:
                encoded = encode_pairs([context], [continuation], self.runner.tokenizer, self.runner.max_length)
            else:
                encoded = encode_texts([continuation.lstrip()], self.runner.tokenizer, self.runner.max_length)
            input_ids.append(encoded.input_ids[0])
            positions.append(encoded.content_positions[0])
        return EncodedTexts(input_ids, positions), [context for context, _, _ in pairs]

    # -- lm-eval's three requests
    def loglikelihood(self, requests, disable_tqdm=False):
        """``(log p(continuation | context), is_greedy)`` per request, as :class:`LoglikelihoodEstimate`."""
        if not requests:
            return []
        encoded, contexts = self._encode_requests(requests)
        # the choices of one question (same task, document and context) share their random numbers
        questions = [None if request.doc_id is None else (request.task_name, request.doc_id, contexts[i])
                     for i, request in enumerate(requests)]
        groups, keys = pair_keys(contexts, [request.args[1] for request in requests], questions)
        estimates = self.likelihood_estimator.estimate(encoded, keys, groups=groups,
                                                       given={i for i, context in enumerate(contexts) if context},
                                                       names=[f"request {i}" for i in range(len(requests))])
        greedy = greedy_matches(self.runner, encoded) if self.check_greedy else {}
        results = []
        for i, request in enumerate(requests):
            value, std, exact, passes, method, pilot, reached = estimates[i]
            results.append(LoglikelihoodEstimate(value, greedy.get(i, False), std, exact, passes, method, pilot,
                                                 reached))
            self.cache_hook.add_partial("loglikelihood", request.args, results[-1])
        return results

    def _windows(self, index, text):
        """``(input_ids, positions, key ids)`` of each window of ``text``, ``rolling_context`` tokens before it."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"Request {index}: the text {text!r} is empty; loglikelihood_rolling needs a text.")
        encode_texts([text], self.runner.tokenizer, 10**9)  # the checks every text gets (no special tokens, ...)
        ids = torch.tensor(self.runner.tokenizer(text, add_special_tokens=False)["input_ids"], dtype=torch.long)
        before, after = special_ids(self.runner)
        windows, start, step = [], 0, self.limit - self.rolling_context
        while start < len(ids):
            stop = min(len(ids), start + (self.limit if start == 0 else step))
            visible = ids[max(0, start - self.rolling_context) : start]
            sequence = torch.cat([before, visible, ids[start:stop], after])
            positions = torch.arange(len(before) + len(visible), len(before) + len(visible) + stop - start)
            windows.append((sequence, positions, ids[max(0, start - self.rolling_context) : stop]))
            start = stop
        return windows

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        """Each text's bound ``sum_M S(x; M)`` (minus its negative ELBO), by windows, as :class:`RollingEstimate`."""
        windows = [self._windows(i, request.args[0]) for i, request in enumerate(requests)]  # checks first
        self.likelihood_estimator.check_budget([len(w[1]) for text in windows for w in text],
                                               [f"request {i} (window {k})" for i, text in enumerate(windows)
                                                for k in range(len(text))])
        budget = chunk_budget()
        results, pending, done = [], [], {}
        for i in range(len(requests)):
            pending.append(i)
            load = sum(len(w[0]) for j in pending for w in windows[j]) * self.max_forward_passes
            if load < budget and i < len(requests) - 1:
                continue
            for count in sorted({len(windows[j]) for j in pending}):  # a text's target: sqrt(count) per window
                chosen = [j for j in pending if len(windows[j]) == count or self.target_se is None]
                flat = [w for j in chosen for w in windows[j]]
                encoded = EncodedTexts([w[0] for w in flat], [w[1] for w in flat])
                keys = [w[2].numpy().astype(np.int64).tobytes().hex() for w in flat]
                estimator = self.likelihood_estimator
                if self.target_se is not None:
                    estimator = copy.copy(estimator)
                    estimator.target_se = self.target_se / math.sqrt(count)
                estimates = iter(estimator.estimate(encoded, keys, given=()))
                for j in chosen:
                    parts = [next(estimates) for _ in windows[j]]
                    std = math.sqrt(sum(p.std**2 for p in parts))
                    done[j] = RollingEstimate(sum(p.log_likelihood for p in parts), std, all(p.exact for p in parts),
                                              sum(p.forward_passes for p in parts),
                                              "+".join(dict.fromkeys(p.score_method for p in parts)),
                                              [p.pilot_variances for p in parts],
                                              None if self.target_se is None else std <= self.target_se)
                if self.target_se is None:
                    break
            for j in pending:
                results.append(done.pop(j))
                self.cache_hook.add_partial("loglikelihood_rolling", requests[j].args, results[-1])
            pending = []
        return results

    def generate_until(self, requests, disable_tqdm=False):
        """Text after each context, by LLaDA's sampler (:func:`~skmpt.text.unmasking.generate_masked`), cut at the first
        stop sequence."""
        results = []
        for request in requests:  # seeded by the request's content: the same text wherever it stands
            context, options = request.args[0], dict(request.args[1] if len(request.args) > 1 else {})
            seed = zlib.crc32(repr((context, sorted(options.items(), key=repr))).encode(), self.seed)
            until = options.pop("until", None) or []
            until = [until] if isinstance(until, str) else list(until)
            text = generate_masked(self.runner, context, max_gen_toks=int(options.pop("max_gen_toks", 32)),
                                   steps=options.pop("steps", None), block_length=options.pop("block_length", None),
                                   temperature=float(options.pop("temperature", 0.0) or 0.0),
                                   random_state=seed)
            for stop in until:
                if stop and stop in text:
                    text = text[: text.index(stop)]
            results.append(text)
            self.cache_hook.add_partial("generate_until", request.args, text)
        return results

