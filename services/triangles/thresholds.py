"""Deterministic integer thresholds of IVM^ε, shared by the stream engine and Spark jobs.

Why integers and how they are computed: docs/triangles/algorithm.md §2.3.

Heavy/light decisions compare integer degrees with ``c·N^ε``. Computing ``N**eps`` in floating point
lets two implementations (Python here, a JVM in Spark) disagree in the last ulp and so disagree on
heavy/light exactly at the boundary; everything here is exact integer arithmetic on ε = p/q instead.
This module imports nothing but ``fractions`` so a Spark job can ship it to executors as is.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any, NamedTuple

# ε = p/q is evaluated as (k·c_den)^q ≥ c_num^q·N^p: the integers have ~q·log2(N) bits, cheap for
# q ≤ 1000, and a finer ε than 1/1000 buys nothing measurable.
MAX_DENOMINATOR = 1000

STRICT = Fraction(1)
UP = Fraction(3, 2)
DOWN = Fraction(1, 2)


class Thresholds(NamedTuple):
    """Integer thresholds for one ε at one threshold base N."""

    strict: int  # ⌈N^ε⌉: heavy in a strict partition iff deg ≥ strict
    up: int  # ⌈1.5·N^ε⌉: light → heavy (minor rebalancing) iff deg_l ≥ up
    down: int  # ⌈0.5·N^ε⌉: heavy → light (minor rebalancing) iff 1 ≤ deg_h < down


def parse_epsilon(value: Any) -> Fraction:
    """ε from a Fraction, an int, a string ("1/2", "0.25", "1") or a float (read as written: 0.3 is 3/10).

    Raises ValueError naming what is wrong; ε must lie in [0, 1] with a denominator ≤ MAX_DENOMINATOR.
    """
    if isinstance(value, bool):
        raise ValueError(f"epsilon must be a rational number in [0, 1], got {value!r}")
    if isinstance(value, Fraction):
        eps = value
    elif isinstance(value, int):
        eps = Fraction(value)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"epsilon must be a finite rational number in [0, 1], got {value!r}")
        eps = Fraction(repr(value))  # the shortest repr is what the user wrote; Fraction(0.3) is not 3/10
    elif isinstance(value, str):
        try:
            eps = Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"epsilon must be a rational like '1/2' or '0.25', got {value!r}") from None
    else:
        raise ValueError(f"epsilon must be a rational number in [0, 1], got {type(value).__name__}")
    if not 0 <= eps <= 1:
        raise ValueError(f"epsilon must lie in [0, 1], got {eps}")
    if eps.denominator > MAX_DENOMINATOR:
        raise ValueError(f"epsilon {eps} has a denominator above {MAX_DENOMINATOR}; use a coarser rational")
    return eps


def ceil_scaled_power(n: int, eps: Fraction, c: Fraction) -> int:
    """The smallest integer k ≥ 0 with k ≥ c·n^ε, i.e. (k·c_den)^q ≥ c_num^q·n^p for ε = p/q, c > 0.

    A binary search over Python ints; the answer is exact for every n ≥ 1 (no rounding anywhere)."""
    if type(n) is not int or n < 1:
        raise ValueError(f"threshold base must be an integer ≥ 1, got {n!r}")
    if not 0 <= eps <= 1 or c <= 0:
        raise ValueError(f"need 0 ≤ ε ≤ 1 and c > 0, got ε={eps}, c={c}")
    p, q = eps.numerator, eps.denominator
    a, b = c.numerator, c.denominator
    target = a**q * n**p
    lo, hi = 0, -(-a * n // b)  # ⌈c·n⌉ ≥ c·n^ε because n ≥ 1 and ε ≤ 1
    while lo < hi:
        mid = (lo + hi) // 2
        if (mid * b) ** q >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


@functools.lru_cache(maxsize=4096)
def thresholds(n: int, eps: Fraction) -> Thresholds:
    """(θ_strict, θ_up, θ_down) for threshold base n; ε=0 gives (1, 2, 1) and ε=1 gives (n, ⌈1.5n⌉, ⌈n/2⌉).

    Cached: N only takes O(log N) values between restarts, and the invariant checker asks often."""
    return Thresholds(
        ceil_scaled_power(n, eps, STRICT), ceil_scaled_power(n, eps, UP), ceil_scaled_power(n, eps, DOWN)
    )
