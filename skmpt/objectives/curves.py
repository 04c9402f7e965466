"""Reductions of MPT curves already computed: mask sums to ``S(x; M)``, a curve to its area."""

import numpy as np

from .._validation import check_positive_int

__all__ = ["curve_area", "mean_over_masks"]


def mean_over_masks(sums, sizes, score_masks):
    """``S(x; M)`` from mask sums: the mean, over each group of ``score_masks`` masks, of ``sum / M``.

    The reduction of the identity shared by every estimator: the per-mask sums of the masked
    tokens' log-probabilities, each divided by its mask size, averaged over the masks of one size.

    Parameters
    ----------
    sums : numpy.ndarray or torch.Tensor of shape (..., n_groups * score_masks)
        ``sum_{j in m} log p(x_j | x_r)`` per mask, the masks of a group consecutive.
    sizes : array or tensor broadcastable to ``sums``
        The size ``M`` of each mask.
    score_masks : int
        Masks per group (a group shares one size, or one masking rate).

    Returns
    -------
    scores : numpy.ndarray or torch.Tensor of shape (..., n_groups)
        One ``S(x; M)`` estimate per group.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.objectives import mean_over_masks
    >>> mean_over_masks(np.array([-2.0, -4.0, -3.0, -9.0]), np.array([1, 1, 3, 3]), 2)
    array([-3., -2.])
    """
    score_masks = check_positive_int(score_masks, "score_masks")
    ratios = sums / sizes
    if ratios.shape[-1] % score_masks:
        raise ValueError(f"{ratios.shape[-1]} masks do not split into groups of score_masks={score_masks}.")
    return ratios.reshape(*ratios.shape[:-1], -1, score_masks).mean(-1)


def curve_area(curve, mask_rates, *, scale=1.0):
    """Area under an MPT curve already computed: ``scale * sum_r (r - r_prev) * S(x; r)``.

    The widths are ``r_1 - 0`` for the first rate and the gaps between consecutive rates after
    it (a left Riemann sum from rate 0). With ``mask_rates = M / D`` for ``M = 1..D`` and
    ``scale = D``, it is the cumulative score ``sum_M S(x; M)``; the paper's Table 2 uses
    ``scale = 512`` over rates 0.01..0.99 whatever the sentence's length.

    Parameters
    ----------
    curve : array-like of shape (..., n_rates)
        ``S(x; r)`` at each rate (:func:`mpt_curve`'s columns, or
        :meth:`skmpt.MLMCurveScorer.transform`).
    mask_rates : array-like of shape (n_rates,)
        Strictly increasing rates in (0, 1].
    scale : float, default=1.0

    Returns
    -------
    area : numpy.ndarray of shape (...)

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.objectives import curve_area
    >>> curve = np.array([[-1.0, -2.0, -3.0, -4.0]])
    >>> curve_area(curve, np.arange(1, 5) / 4, scale=4)  # = curve.sum(-1)
    array([-10.])
    """
    curve = np.asarray(curve, dtype=np.float64)
    rates = np.asarray(mask_rates, dtype=np.float64)
    if rates.ndim != 1 or curve.shape[-1:] != rates.shape:
        raise ValueError(f"curve's last axis must have one value per rate; got shapes {curve.shape} and {rates.shape}.")
    if not ((rates > 0) & (rates <= 1)).all() or np.any(np.diff(rates) <= 0):
        raise ValueError(f"mask_rates must be strictly increasing in (0, 1]; got {rates.tolist()}.")
    return scale * curve @ np.diff(rates, prepend=0.0)
