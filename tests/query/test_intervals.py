"""Interval arithmetic of released values (post-processing): exact, against the definition."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from statcurator.query.aggregates import iv_div

ends = st.fractions(min_value=-50, max_value=50, max_denominator=20)


@settings(max_examples=1500, deadline=None)
@given(ends, ends, ends, ends)
def test_iv_div_is_the_hull_of_the_quotients_of_the_ends(a0, a1, b0, b1):
    """x/y over x in [a0, a1], y in [b0, b1] not holding 0: its extremes are quotients of
    ends (x/y is monotone in each argument on such a box)."""
    a, b = (min(a0, a1), max(a0, a1)), (min(b0, b1), max(b0, b1))
    got = iv_div(a, b)
    if b[0] <= 0 <= b[1]:
        assert got is None
        return
    q = [x / y for x in a for y in b]
    assert got == (min(q), max(q))
    assert all(isinstance(v, Fraction) for v in got)
