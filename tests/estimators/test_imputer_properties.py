"""MaskedImputer never changes an observed entry, whatever the table, the marker and the holes."""

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedImputer, MaskedPPCA

MARKERS = st.sampled_from([np.nan, -1.0, -999.0, 1e300])


@st.composite
def tables(draw):
    n, d = draw(st.integers(5, 12)), draw(st.integers(2, 4))
    # Multiples of 1/8 up to 1000: a spread that float64 variances can hold, or none at all (a spread
    # of 1e-198 is refused with an error that says to rescale, which is not what this test is about).
    values = draw(arrays(np.float64, (n, d), elements=st.integers(-8000, 8000).map(lambda v: v / 8)))
    holes = draw(arrays(np.bool_, (n, d)))
    holes[0] = False  # every feature observed at least once
    return values, holes


@settings(max_examples=15, deadline=None)
@given(tables(), MARKERS, st.booleans())
def test_observed_entries_are_never_changed(table, marker, sample_posterior):
    values, holes = table
    if not np.isnan(marker):
        values = np.where(values == marker, 0.0, values)  # the marker is not a value of the data
    marked = np.where(holes, marker, values)
    imputer = MaskedImputer(MaskedPPCA(1, max_epochs=2, random_state=0), missing_values=marker,
                            sample_posterior=sample_posterior, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        out = imputer.fit_transform(marked)
    np.testing.assert_array_equal(out[~holes], values[~holes])
    assert np.isfinite(out).all()
