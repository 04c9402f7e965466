"""Hypothesis strategies for property-based tests of masked models.

They need ``hypothesis``, which is imported only when a strategy is called.
"""

import numpy as np

from .joints import TabularJoint

__all__ = ["ppca_parameters", "tabular_joints"]


def _strategies():
    try:
        from hypothesis import strategies as st
        from hypothesis.extra import numpy as hnp
    except ImportError as exc:  # pragma: no cover - exercised only without hypothesis
        raise ImportError("skmpt.testing's strategies need hypothesis: pip install 'skmpt[test]'.") from exc
    return st, hnp


def tabular_joints(min_features=1, max_features=6):
    """Hypothesis strategy for :class:`TabularJoint` models with random tables.

    Every entry is at least ``1e-3`` before normalisation, so no conditional is undefined.

    Examples
    --------
    >>> from hypothesis import given
    >>> from skmpt.testing import tabular_joints
    >>> @given(tabular_joints(max_features=3))
    ... def test_positive(joint):
    ...     assert float(joint.probabilities.min()) > 0
    >>> test_positive()
    """
    st, hnp = _strategies()

    @st.composite
    def build(draw):
        n_features = draw(st.integers(min_features, max_features))
        weights = draw(hnp.arrays(np.float64, (2,) * n_features, elements=st.floats(1e-3, 1.0, allow_subnormal=False)))
        return TabularJoint(weights / weights.sum())

    return build()


def ppca_parameters(min_features=1, max_features=7, max_components=3):
    """Hypothesis strategy for PPCA parameters ``(components, mean, noise_variance)``.

    ``components`` has shape ``(n_components, n_features)`` (scikit-learn's convention),
    with ``n_components <= n_features``; ``noise_variance`` lies in [0.05, 5].

    Examples
    --------
    >>> from hypothesis import given
    >>> from skmpt.testing import ppca_parameters
    >>> @given(ppca_parameters(max_features=4))
    ... def test_shapes(params):
    ...     components, mean, noise_variance = params
    ...     assert components.shape[1] == mean.shape[0]
    >>> test_shapes()
    """
    st, hnp = _strategies()
    value = st.floats(-3.0, 3.0, allow_nan=False, allow_subnormal=False)

    @st.composite
    def build(draw):
        n_features = draw(st.integers(min_features, max_features))
        n_components = draw(st.integers(1, min(max_components, n_features)))
        components = draw(hnp.arrays(np.float64, (n_components, n_features), elements=value))
        mean = draw(hnp.arrays(np.float64, (n_features,), elements=value))
        noise_variance = draw(st.floats(0.05, 5.0))
        return components, mean, noise_variance

    return build()
