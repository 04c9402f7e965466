"""The one unmasking loop: masked positions revealed step by step, each from the model's prediction.

A masked LM generates or checks text by unmasking: at each step it predicts the candidate
positions of every row, draws a token at each (the argmax, or a draw at ``temperature``) and
reveals the most confident ones. :func:`unmask` is that loop; a *plan* says, at each step,
which masked positions are candidates and how many of each row to reveal. Three callers:

- the lm-eval model's ``is_greedy`` (:func:`greedy_matches`): every masked position a
  candidate, one revealed per step, a row stopped at its first wrong guess;
- LLaDA's sampler (:func:`generate_masked`): the masked positions of the current block, a few
  per step (low-confidence remasking);
- any-order sampling (:func:`~skmpt.text.sample_any_order`): one position per row, the next of
  a random ordering.
"""

import math
import warnings
from numbers import Integral, Real

import numpy as np
import torch

from .._validation import Interval, validated
from .encoding import check_max_length, encode_texts

__all__ = ["generate_masked", "greedy_matches", "special_ids", "unmask"]


def special_ids(runner):
    """``(before, after)``: the ids the tokenizer puts before and after a text's own tokens.

    Examples
    --------
    >>> import torch
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import MaskedLMRunner, as_predictor
    >>> from skmpt.text.unmasking import special_ids
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:50], vocab_size=200)
    >>> runner = MaskedLMRunner(as_predictor(lambda input_ids, attention_mask: None, tokenizer.mask_token_id),
    ...                         tokenizer, torch.device("cpu"))
    >>> [tokenizer.convert_ids_to_tokens(ids.tolist()) for ids in special_ids(runner)]
    [['[CLS]'], ['[SEP]']]
    """
    with warnings.catch_warnings():  # "x" is a probe of the layout: its unknown token (if any) is never scored
        warnings.filterwarnings("ignore", message=".* tokens the tokenizer does not know", category=UserWarning)
        encoded = encode_texts(["x"], runner.tokenizer, runner.max_length)
    ids, own = encoded.input_ids[0], encoded.content_positions[0]
    return ids[: int(own[0])], ids[int(own[-1]) + 1 :]


def _check_sampling_logits(logits, step):
    """A NaN or ``+inf`` logit, or a row with no finite logit left, is an error naming the step and the count."""
    bad = torch.isnan(logits) | (logits == torch.inf)
    empty = ~torch.isfinite(logits).any(1)
    if bool(bad.any()) or bool(empty.any()):
        raise ValueError(
            f"The predictor returned {int(bad.sum())} NaN or +inf logits at step {step} of any-order sampling or "
            f"generation, and {int(empty.sum())} of {len(logits)} samples have no finite logit outside "
            "the special tokens: nothing can be drawn. Check the model (its weights, its dtype's range)."
        )


def unmask(runner, ids, masked, plan, *, attention_mask=None, lengths=None, temperature=0.0, exclude_special=False,
           generator=None):
    """Reveal masked positions of ``ids`` step by step, as ``plan`` says; ``ids`` and ``masked`` change in place.

    At each step ``plan(ids, masked)`` returns ``(candidates, counts)``: a boolean tensor of the
    shape of ``ids`` (the masked positions to predict) and the number of them to reveal per row
    (shape (n_rows,)), or ``None`` to stop. The model predicts every candidate in one forward
    pass; a token is drawn at each (the argmax at ``temperature=0``, else from the softmax of the
    logits over ``temperature``) and each row reveals its ``counts`` most confident candidates
    (the probability of the drawn token; the first among ties).

    Parameters
    ----------
    runner : MaskedLMRunner
    ids : LongTensor of shape (n_rows, width)
        The sequences, the mask id at the masked positions.
    masked : BoolTensor of shape (n_rows, width)
    plan : callable
    attention_mask : LongTensor of shape (n_rows, width) or None, default=None
        None: every position is attended.
    lengths : array-like of shape (n_rows,) or None, default=None
        Each row's maskable tokens: the masking rate passed to a time-conditioned predictor is
        the masked count over it. None: each row's masked count at the start.
    temperature : float, default=0.0
    exclude_special : bool, default=False
        Never draw a special token or the mask id (sampling); the logits beyond the tokenizer's
        vocabulary are dropped.
    generator : torch.Generator or None, default=None
        The draws' generator when ``temperature > 0``.

    Returns
    -------
    steps : int
        The forward passes run (each of the rows that had candidates).
    """
    attention_mask = torch.ones_like(ids) if attention_mask is None else attention_mask
    lengths = (masked.sum(1, dtype=torch.float64) if lengths is None
               else torch.as_tensor(np.asarray(lengths, dtype=np.float64)))
    tokenizer = runner.tokenizer
    excluded = torch.tensor(sorted({*tokenizer.all_special_ids, runner.mask_token_id}))
    steps = 0
    with torch.inference_mode(), runner.predictor.evaluating():
        while (step := plan(ids, masked)) is not None:
            candidates, counts = step
            candidates = candidates & masked
            if not bool(candidates.any()):
                break
            rows, columns = candidates.nonzero(as_tuple=True)
            rates = masked.sum(1, dtype=torch.float64) / lengths
            logits = runner.target_logits(ids.to(runner.device), attention_mask.to(runner.device), rates,
                                          rows.to(runner.device), columns.to(runner.device)).double().cpu()
            if exclude_special:
                logits = logits[:, : len(tokenizer)]
                logits[:, excluded[excluded < logits.shape[1]]] = -torch.inf
            steps += 1
            if temperature > 0:
                logits = logits / temperature
                _check_sampling_logits(logits, steps)
                probs = torch.softmax(logits, -1)
                tokens = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            else:
                probs = torch.softmax(logits, -1)
                tokens = probs.argmax(-1)
            confidence = probs.gather(1, tokens[:, None]).squeeze(1)
            for row in rows.unique().tolist():
                here = (rows == row).nonzero().flatten()
                keep = here[confidence[here].argsort(descending=True, stable=True)[: int(counts[row])]]
                ids[row, columns[keep]] = tokens[keep]
                masked[row, columns[keep]] = False
    return steps


def greedy_matches(runner, encoded, items=None):
    """For each text: does greedy unmasking of its content, most confident position first, rebuild it?

    Every content position of each text (a continuation's, its context visible) is masked; one
    position is revealed per forward pass, the most confident, with the argmax token
    (LLaDA's ``suffix_greedy_prediction``). A text whose guess is wrong stops there.

    Parameters
    ----------
    runner : MaskedLMRunner
    encoded : EncodedTexts
    items : list of int or None, default=None
        The texts to check; None is all.

    Returns
    -------
    matches : dict
        ``{item: bool}``.

    Examples
    --------
    >>> import torch
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import MaskedLMRunner, encode_pairs, load_masked_lm
    >>> from skmpt.text.unmasking import greedy_matches
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                                    num_attention_heads=2, intermediate_size=32))
    >>> runner = MaskedLMRunner(*load_masked_lm(model, tokenizer=tokenizer, device=torch.device("cpu")),
    ...                         torch.device("cpu"))
    >>> greedy_matches(runner, encode_pairs(["a dog"], [" is an animal"], tokenizer, 64))  # an untrained model
    {0: False}
    """
    items = list(range(len(encoded))) if items is None else list(items)
    result = {}
    for start in range(0, len(items), runner.score_batch_size):
        chunk = items[start : start + runner.score_batch_size]
        width = max(len(encoded.input_ids[i]) for i in chunk)
        ids = torch.full((len(chunk), width), runner.pad_token_id, dtype=torch.long)
        attention = torch.zeros_like(ids)
        masked = torch.zeros_like(ids, dtype=torch.bool)
        for row, i in enumerate(chunk):
            ids[row, : len(encoded.input_ids[i])] = encoded.input_ids[i]
            attention[row, : len(encoded.input_ids[i])] = 1
            masked[row, encoded.content_positions[i]] = True
        truth, content = ids.clone(), masked.clone()
        ids[masked] = runner.mask_token_id
        ones = torch.ones(len(chunk), dtype=torch.long)

        def plan(ids, masked, truth=truth, content=content, ones=ones):
            alive = ((ids == truth) | masked | ~content).all(1)  # every token revealed so far is right
            return masked & alive[:, None], ones

        unmask(runner, ids, masked, plan, attention_mask=attention)
        right = ((ids == truth) | ~content).all(1)
        for row, i in enumerate(chunk):
            result[i] = bool(right[row])
    return result


@validated({"max_gen_toks": [Interval(Integral, 1, None, closed="left")],
            "steps": [None, Interval(Integral, 1, None, closed="left")],
            "block_length": [None, Interval(Integral, 1, None, closed="left")],
            "temperature": [Interval(Real, 0, None, closed="left")],
            "random_state": [None, Interval(Integral, None, None, closed="neither")]})
def generate_masked(runner, context, *, max_gen_toks=32, steps=None, block_length=None, temperature=0.0,
                    random_state=None):
    """LLaDA's sampler: ``max_gen_toks`` masks after the context, unmasked block by block, the most confident first.

    Each block of ``block_length`` masks (``None``: one block) is unmasked in ``steps / n_blocks``
    forward passes (``steps=None``: one token per pass); each pass predicts every masked position
    of the block and keeps the most confident (low-confidence remasking), drawn at ``temperature``
    (0 is the argmax). The context is cut from the left to fit.

    Parameters
    ----------
    runner : MaskedLMRunner
    context : str
    max_gen_toks : int, default=32
    steps : int or None, default=None
    block_length : int or None, default=None
    temperature : float, default=0.0
    random_state : int or None, default=None
        Seeds the draws at ``temperature > 0``.

    Returns
    -------
    text : str
        The generated tokens, decoded without special tokens.

    Examples
    --------
    >>> import torch
    >>> from transformers import BertConfig, BertForMaskedLM
    >>> from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer
    >>> from skmpt.text import MaskedLMRunner, load_masked_lm
    >>> from skmpt.text.unmasking import generate_masked
    >>> tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:100], vocab_size=200)
    >>> model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
    ...                                    num_attention_heads=2, intermediate_size=32))
    >>> runner = MaskedLMRunner(*load_masked_lm(model, tokenizer=tokenizer, device=torch.device("cpu")),
    ...                         torch.device("cpu"))
    >>> isinstance(generate_masked(runner, "a dog", max_gen_toks=3), str)
    True
    """
    tokenizer = runner.tokenizer
    limit = check_max_length(tokenizer, runner.max_length)
    length = min(int(max_gen_toks), limit - 1)
    if length < 1:
        raise ValueError(f"max_gen_toks must be at least 1; got {max_gen_toks!r}.")
    block = length if block_length is None else max(1, min(int(block_length), length))
    n_blocks = math.ceil(length / block)
    per_block = block if steps is None else max(1, int(steps) // n_blocks)
    context_ids = tokenizer(context, add_special_tokens=False)["input_ids"][-(limit - length):] if context else []
    before, after = special_ids(runner)
    ids = torch.cat([before, torch.tensor(context_ids, dtype=torch.long),
                     torch.full((length,), runner.mask_token_id), after]).unsqueeze(0)
    first = len(before) + len(context_ids)
    masked = torch.zeros_like(ids, dtype=torch.bool)
    masked[0, first : first + length] = True
    generator = torch.Generator().manual_seed(int(random_state or 0) % 2**32)
    schedule = []
    for b in range(n_blocks):
        in_block = torch.zeros_like(masked)
        in_block[0, first + b * block : first + min(length, (b + 1) * block)] = True
        counts = np.diff(np.round(np.linspace(0, int(in_block.sum()), per_block + 1)).astype(int))
        schedule.extend((in_block, torch.tensor([int(count)])) for count in counts[counts > 0])
    steps_left = iter(schedule)
    unmask(runner, ids, masked, lambda ids, masked: next(steps_left, None), lengths=[length + len(context_ids)],
           temperature=temperature, exclude_special=True, generator=generator)
    return tokenizer.decode(ids[0, first : first + length], skip_special_tokens=True)
