"""Exact arithmetic for the vwap service: ints stay ints, decimals are exact, fractions cross-multiply.

Inputs are Python ints (the fast path) or ``Decimal``s (``exact`` columns). Decimal addition and
multiplication are exact under ``EXACT`` (no rounding at any precision we can reach), so engines run
their updates inside ``exact_context()``. Query constants such as 0.25 are ``Fraction``s and are only
ever used by cross-multiplication (``4·key < T``), never by dividing a running sum.
"""

from __future__ import annotations

from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, localcontext
from fractions import Fraction
from typing import Any

Number = int | Decimal

EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


def exact_context() -> Any:
    """A context manager under which Decimal + and * never round."""
    return localcontext(EXACT)


def parse_fraction(v: Any, what: str = "value") -> Fraction:
    """A query constant from config: int, "1/4", "0.25" (floats by their repr, so 0.1 means 1/10)."""
    if isinstance(v, bool):
        raise ValueError(f"{what} must be a number or a fraction like '1/4'")
    if isinstance(v, float):
        v = repr(v)
    try:
        return Fraction(v)
    except (ValueError, TypeError, ZeroDivisionError):
        raise ValueError(f"{what} must be a number or a fraction like '1/4', got {v!r}") from None


def _json_int(i: int) -> int | str:
    """An integer as JSON encoders take it: itself within 64 bits (orjson's range), else its exact
    decimal text (a product such as a level's PV leaves 64 bits; ``from_json`` reads the text back)."""
    return i if -(2**63) <= i < 2**64 else str(i)


def to_json(v: Any) -> Any:
    """Exact JSON form: ints and integral decimals as ints where JSON encoders take them (64 bits), as
    exact decimal text beyond; other decimals as exact decimal strings.

    A Fraction whose decimal expansion terminates is written as a decimal string; otherwise as "p/q"."""
    if type(v) is int:
        return _json_int(v)
    if isinstance(v, Decimal):
        if v == v.to_integral_value():
            return _json_int(int(v))
        return format(v.normalize(), "f")
    if isinstance(v, Fraction):
        if v.denominator == 1:
            return _json_int(v.numerator)
        d = v.denominator
        for p in (2, 5):
            while d % p == 0:
                d //= p
        if d == 1:  # terminating: numerator * (10^k / denominator) is an exact integer
            k = 0
            while (10**k) % v.denominator:
                k += 1
            return format(Decimal(v.numerator * (10**k // v.denominator)).scaleb(-k).normalize(), "f")
        return f"{v.numerator}/{v.denominator}"
    return v


def from_json(v: Any) -> Number:
    """Inverse of the snapshot encoding: ints stay ints, strings are exact decimals."""
    if type(v) is int:
        return v
    return Decimal(v)


def scale(x: Number, f: Fraction) -> Fraction | Number:
    """x·f exactly (an int or Decimal times a Fraction); only for reporting, never on the hot path."""
    return Fraction(x) * f


def decimal_quotient(x: Number | Fraction, divisor: int, places: int = 12) -> str:
    """x / divisor as a decimal string rounded half-even to ``places`` digits (Q17's SUM(...) / 7.0).

    The exact numerator is always reported next to it, so nothing is lost by the rounding."""
    n = round(Fraction(x) / divisor * 10**places)  # Fraction rounding is half-even
    return format(Decimal(n).scaleb(-places), "f")
