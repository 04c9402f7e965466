"""Scoring strategies that return an estimate of ``sum_{M=1..L} S(x; M)`` with its standard error.

Each is a strategy of :func:`~skmpt.text.score_texts` (``n_copies``, ``copies``, ``reduce``)
whose ``reduce`` gives ``[estimate, standard_error]`` for one text, where ``L`` counts the tokens
that may be masked (a text's own tokens, or a continuation's in conditional scoring):

- :class:`SweepWithError`: ``score_masks`` masks at every size (stratified); the standard error
  is ``sqrt(sum_M c_M**2 var_M / score_masks)`` from the spread of the masks of each size;
  ``weights`` ``c_M`` (default 1) weigh the sizes, as a noise schedule's discrete-time ELBO does.
- :class:`ChainWithError`: ``score_masks`` random orderings, each token predicted from those
  revealed before it; the standard error is the spread of the orderings' sums over
  ``sqrt(score_masks)`` (zero for a model whose conditionals come from one joint).
- :class:`UniformSizeMasks`: ``n_samples`` masks of a uniformly random size ``M`` in ``1..L``,
  each worth ``(L / M) sum_masked log p``: RADD's ``k_DCE`` and LLaDA's Monte Carlo estimator of
  ``log p(answer | prompt)``; the standard error is the samples' spread over ``sqrt(n_samples)``.

A copy is one masked sequence through the model: the sweep and the chain use ``L`` per mask
size round or ordering, the uniform-size estimator one per sample.
"""

import numpy as np
import torch

from .scoring import chain_masks, size_masks

__all__ = ["ChainWithError", "SweepWithError", "UniformSizeMasks"]


def _check_repeats(value, name):
    if int(value) < 2:
        raise ValueError(f"{name}={value}: a standard error needs at least 2 masks per size, orderings or samples.")
    return int(value)


class SweepWithError:
    """``score_masks`` random masks at every size ``1..L``; ``[sum_M c_M S(x; M), standard error]``.

    Parameters
    ----------
    score_masks : int >= 2
    weights : callable or None, default=None
        ``weights(L)`` returns ``c_M`` for ``M = 1..L`` (an array of shape (L,)); ``None`` is all
        ones, the continuous-time ELBO (:func:`~skmpt.text.schedule_weights`).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from skmpt.text import SweepWithError
    >>> strategy = SweepWithError(score_masks=2)
    >>> masked, _ = strategy.copies(3, torch.Generator().manual_seed(0))
    >>> sums = -masked.sum(1).double().numpy()  # every masked token has log-probability -1
    >>> strategy.reduce(masked, sums).tolist()
    [-3.0, 0.0]
    """

    def __init__(self, score_masks, weights=None):
        self.score_masks, self.weights = _check_repeats(score_masks, "score_masks"), weights

    def n_copies(self, length):
        return self.score_masks * length

    def copies(self, length, generator):
        return size_masks(np.repeat(np.arange(1, length + 1), self.score_masks), length, generator)

    def reduce(self, masked, sums):
        sizes = masked.sum(1).numpy()
        length = masked.shape[1]
        per_token = (np.asarray(sums, dtype=np.float64) / sizes).reshape(length, self.score_masks)
        weights = np.ones(length) if self.weights is None else np.asarray(self.weights(length), dtype=np.float64)
        curve, variance = per_token.mean(1), per_token.var(1, ddof=1)
        return np.array([weights @ curve, np.sqrt((weights**2) @ variance / self.score_masks)])


class ChainWithError:
    """``score_masks`` random orderings; ``[mean of the orderings' chain-rule sums, standard error]``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text import ChainWithError
    >>> strategy = ChainWithError(score_masks=2)
    >>> masked, _ = strategy.copies(3, torch.Generator().manual_seed(0))
    >>> strategy.reduce(masked, -torch.ones(6, dtype=torch.float64).numpy()).tolist()
    [-3.0, 0.0]
    """

    def __init__(self, score_masks):
        self.score_masks = _check_repeats(score_masks, "score_masks")

    def n_copies(self, length):
        return self.score_masks * length

    def copies(self, length, generator):
        return chain_masks(self.score_masks, length, generator)

    def reduce(self, masked, sums):
        totals = np.asarray(sums, dtype=np.float64).reshape(self.score_masks, -1).sum(1)
        return np.array([totals.mean(), totals.std(ddof=1) / np.sqrt(self.score_masks)])


class UniformSizeMasks:
    """``n_samples`` masks of uniformly random sizes; ``[mean of (L / M) sum_masked log p, standard error]``.

    The Monte Carlo estimator of LLaDA (``log p(answer | prompt)`` with the answer's tokens) and
    RADD's ``k_DCE``: unbiased for ``sum_M S(x; M)``, one copy per sample.

    Examples
    --------
    >>> import torch
    >>> from skmpt.text import UniformSizeMasks
    >>> strategy = UniformSizeMasks(n_samples=4)
    >>> masked, _ = strategy.copies(5, torch.Generator().manual_seed(0))
    >>> strategy.reduce(masked, -masked.sum(1).double().numpy()).tolist()  # log p = -1 per token
    [-5.0, 0.0]
    """

    def __init__(self, n_samples):
        self.n_samples = _check_repeats(n_samples, "n_samples")

    def n_copies(self, length):
        return self.n_samples

    def copies(self, length, generator):
        sizes = torch.randint(1, length + 1, (self.n_samples,), generator=generator).numpy()
        return size_masks(sizes, length, generator)

    def reduce(self, masked, sums):
        values = masked.shape[1] / masked.sum(1).numpy() * np.asarray(sums, dtype=np.float64)
        return np.array([values.mean(), values.std(ddof=1) / np.sqrt(self.n_samples)])
