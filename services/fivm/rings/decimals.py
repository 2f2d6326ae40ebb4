"""Exact decimals: values as integer counts of 10^-N units (docs/fivm/rings.md §8).

Float addition is not associative, so float payloads depend on how a stream was cut into batches and
leave residue (1e-17) after deletes. With ``decimals = N`` a ring converts each value it lifts to the
exact integer ``round_half_even(value · 10^N)`` once, computes in Python ints, and divides by the
scale only when it writes a result. The value converted is the decimal the float spells (its shortest
round-trip representation, the digits a JSON reader was given), so ``2.675`` is 2.675, not the binary
2.67499999999999982236431605997495353221893310546875.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_EVEN, Context, Decimal
from functools import lru_cache
from typing import Any

MAX_DECIMALS = 30

# Conversions never round to a context precision: a float spells at most 17 significant digits and
# the result is an integer, so this precision is never reached.
_CONTEXT = Context(prec=400, rounding=ROUND_HALF_EVEN, Emax=999_999, Emin=-999_999)


def check_decimals(decimals: Any) -> int:
    """``decimals`` as an int in [0, MAX_DECIMALS]; ValueError otherwise (bools are not numbers)."""
    if decimals.__class__ is not int or not 0 <= decimals <= MAX_DECIMALS:
        raise ValueError(f"decimals must be an integer from 0 to {MAX_DECIMALS}, got {decimals!r}")
    return int(decimals)


@lru_cache(maxsize=1 << 16)
def _float_units(value: float, decimals: int) -> int:
    d = Decimal(repr(value)).scaleb(decimals, context=_CONTEXT)
    return int(d.to_integral_value(rounding=ROUND_HALF_EVEN, context=_CONTEXT))


def to_units(value: Any, decimals: int) -> int:
    """The exact number of 10^-decimals units in ``value``, rounded half to even.

    Ints (int columns) convert exactly; floats must be finite (the intake refuses others).
    """
    if value.__class__ is int:
        return int(value) * 10**decimals
    if value.__class__ is bool:
        raise TypeError(f"expected a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{x!r} is not a finite number")
    return _float_units(x + 0.0, decimals)


def from_units(units: int, exponent: int) -> float:
    """``units / 10^exponent`` as the nearest float (Python's int division rounds correctly), so equal
    exact values give bit-identical floats; beyond the float range, ±inf as float arithmetic gives."""
    try:
        return units / 10**exponent if exponent else float(units)
    except OverflowError:
        return math.inf if units > 0 else -math.inf
