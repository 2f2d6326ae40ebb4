"""An average in a group's image is a Ratio: equal to, hashed like and ordered like the Fraction of the
same value, whatever its sum's type, so images compare and deduplicate as before."""

from __future__ import annotations

import pickle
from decimal import Decimal
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from ivmstream.services.sketches.values import average


@given(st.integers(-(10**30), 10**30), st.integers(1, 10**6))
def test_integer_average_equals_the_fraction(total: int, count: int) -> None:
    a, want = average(total, count), Fraction(total, count)
    assert a == want and hash(a) == hash(want) and hash(a) == hash(a)
    assert (a.numerator, a.denominator) == (want.numerator, want.denominator)
    assert {a: 1}[want] == 1 and not a < want and a <= want
    if want.denominator == 1:
        assert a == want.numerator and hash(a) == hash(want.numerator)
    b = pickle.loads(pickle.dumps(a))
    assert b == want and hash(b) == hash(want)


def test_decimal_sum_averages_exactly() -> None:
    assert average(Decimal("1.10"), 3) == Fraction(11, 30)
    assert average(Fraction(7, 2), 7) == Fraction(1, 2)
