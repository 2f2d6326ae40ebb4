"""SQL values: NULL-aware exact arithmetic, three-valued logic and the sort keys of the total order.

Numbers stay exact (docs/sketches/algorithm.md §2.2): ints and Decimals add and multiply exactly, and
a division or an average is a Fraction. A sum that drifted (floats) could flip a HAVING decision and
with it the sketch, so floats only appear where a float column was declared.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from math import gcd
from typing import Any


def exact(value: Any) -> Any:
    """One form per number: an integral Decimal is an int (``2.0`` and ``2`` are one bag member)."""
    if type(value) is Decimal:
        if value == value.to_integral_value():
            return int(value)
        return value.normalize()
    return value


def as_fraction(value: Any) -> Any:
    return Fraction(value) if isinstance(value, Decimal) else value


class Ratio(Fraction):
    """A Fraction that remembers its hash: an average in a group's image is hashed at every operator a
    batch's output passes (tuples do not cache their hashes), and Fraction's hash costs a modular
    inverse each time. Equal to, and hashed like, the Fraction of the same value."""

    __slots__ = ("_hash",)
    _hash: int | None

    def __hash__(self) -> int:  # type: ignore[override]
        try:
            h = self._hash
        except AttributeError:  # made by Fraction's own constructor (a copy, an unpickled value)
            h = None
        if h is None:
            h = self._hash = Fraction.__hash__(self)
        return h

    def __eq__(self, other: Any) -> bool:
        # Another average (a group's old and new image compared): lowest terms make it field by field.
        if type(other) is Ratio:
            return bool(self.numerator == other.numerator and self.denominator == other.denominator)
        return Fraction.__eq__(self, other)

    # Against an int (HAVING AVG(x) < 750), compare the cross products directly: what Fraction's own
    # comparison computes (its denominator is positive), without its generic numeric-tower checks.
    def __lt__(self, other: Any) -> bool:
        if type(other) is int:
            return bool(self.numerator < other * self.denominator)
        return Fraction.__lt__(self, other)

    def __le__(self, other: Any) -> bool:
        if type(other) is int:
            return bool(self.numerator <= other * self.denominator)
        return Fraction.__le__(self, other)

    def __gt__(self, other: Any) -> bool:
        if type(other) is int:
            return bool(self.numerator > other * self.denominator)
        return Fraction.__gt__(self, other)

    def __ge__(self, other: Any) -> bool:
        if type(other) is int:
            return bool(self.numerator >= other * self.denominator)
        return Fraction.__ge__(self, other)


def average(total: Any, count: int) -> Fraction:
    """``total / count`` exactly (count > 0): integer sums skip Fraction's generic constructor."""
    if type(total) is int:
        g = gcd(total, count)
        out: Any = object.__new__(Ratio)
        out._numerator, out._denominator, out._hash = total // g, count // g, None
        return out  # type: ignore[no-any-return]
    return Fraction(as_fraction(total)) / count


def _mixed(op: Any, a: Any, b: Any) -> Any:
    """Decimal and Fraction do not mix in Python arithmetic; Fractions do with everything exact."""
    return op(as_fraction(a), as_fraction(b))


def add(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    try:
        return a + b
    except TypeError:
        return _mixed(lambda x, y: x + y, a, b)


def sub(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    try:
        return a - b
    except TypeError:
        return _mixed(lambda x, y: x - y, a, b)


def mul(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    try:
        return a * b
    except TypeError:
        return _mixed(lambda x, y: x * y, a, b)


def div(a: Any, b: Any) -> Any:
    """Exact division (SQL's NULL for a zero divisor, as DuckDB returns)."""
    if a is None or b is None or b == 0:
        return None
    if isinstance(a, float) or isinstance(b, float):
        return a / b
    return Fraction(as_fraction(a)) / as_fraction(b)


def neg(a: Any) -> Any:
    return None if a is None else -a


def tri_and(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def tri_or(a: Any, b: Any) -> Any:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def tri_not(a: Any) -> Any:
    return None if a is None else not a


def like(value: Any, pattern: str) -> Any:
    """SQL LIKE with ``%`` and ``_`` (no escape character)."""
    if value is None:
        return None
    return _like(str(value), pattern)


def _like(s: str, p: str) -> bool:
    if not p:
        return not s
    head = p[0]
    if head == "%":
        return any(_like(s[i:], p[1:]) for i in range(len(s) + 1))
    if not s:
        return False
    return (head == "_" or head == s[0]) and _like(s[1:], p[1:])


class Descending:
    """A value that sorts in reverse (DESC order keys of any comparable type)."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: Descending) -> bool:
        return bool(other.v < self.v)

    def __gt__(self, other: Descending) -> bool:
        return bool(other.v > self.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descending) and bool(self.v == other.v)

    def __hash__(self) -> int:
        return hash(self.v)


def order_key(value: Any, descending: bool) -> tuple[Any, ...]:
    """ORDER BY key of one value: NULLS LAST in both directions (docs/sketches/algorithm.md §2.9)."""
    if value is None:
        return (1,)
    return (0, Descending(value) if descending else value)


def value_key(value: Any) -> tuple[Any, ...]:
    """A total order over the values of one column, NULL first (tie-breaks and sorted answers)."""
    if value is None:
        return (0,)
    if isinstance(value, str):
        return (2, value)
    return (1, value)


def row_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(value_key(v) for v in row)


def to_json(value: Any) -> Any:
    """An answer value in JSON: exact decimals as text, fractions (averages, divisions) as floats."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, Fraction):
        return float(value)
    return value
