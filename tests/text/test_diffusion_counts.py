"""Diffusion step counts and schedules over their whole space: integers accepted, everything else named.

``n_steps`` of 2.7, 1.5, "3" or True used to be truncated or coerced silently, NaN gave numpy's
message; a valid schedule that stays at alpha = 1 for a while gave NaN weights (0 / 0 where the
limit is 0).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skmpt.text import schedule_weights
from skmpt.text.diffusion import check_n_steps

INTEGER_TYPES = [int, np.int8, np.int32, np.int64, np.uint16]


@settings(max_examples=60, deadline=None)
@given(value=st.integers(1, 120), to_type=st.sampled_from(INTEGER_TYPES))
def test_a_positive_integer_of_any_integer_type_is_its_int(value, to_type):
    counted = check_n_steps(to_type(value))
    assert counted == value and type(counted) is int


NOT_COUNTS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),  # 3.0 too: a float is not a count
    st.integers(max_value=0),
    st.booleans(),
    st.text(max_size=4),
    st.integers(1, 50).map(str),
    st.floats(1, 50).map(np.float64),
    st.lists(st.integers(1, 5), max_size=2),
)


@settings(max_examples=80, deadline=None)
@given(value=NOT_COUNTS)
def test_anything_but_a_positive_integer_is_named(value):
    with pytest.raises(ValueError, match=r"'n_steps' parameter of schedule_weights must be None or an int") as raised:
        check_n_steps(value)
    assert repr(value) in str(raised.value)


@settings(max_examples=60, deadline=None)
@given(flat=st.floats(0, 0.95), n_steps=st.integers(1, 40), length=st.integers(1, 12),
       power=st.floats(0.25, 4))
def test_a_schedule_that_stays_at_one_for_a_while_has_finite_non_negative_weights(flat, n_steps, length, power):
    def alpha(t):  # 1 until t = flat, then down to 0 at t = 1
        t = np.asarray(t, dtype=float)
        return 1 - np.clip((t - flat) / (1 - flat), 0, 1) ** power

    weights = schedule_weights(alpha, n_steps=n_steps)(length)
    assert weights.shape == (length,)
    assert np.all(np.isfinite(weights)) and np.all(weights >= 0)
    # the continuous-time limit: every weight 1, whatever the schedule
    np.testing.assert_allclose(schedule_weights(alpha, n_steps=None)(length), np.ones(length))
