"""The integer threshold arithmetic of IVM^ε against its exact rational definition.

Section numbers (§) refer to docs/triangles/algorithm.md (thresholds: §2.3)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.triangles.thresholds import (
    MAX_DENOMINATOR,
    Thresholds,
    ceil_scaled_power,
    parse_epsilon,
    thresholds,
)

SMALL_EPS = sorted({Fraction(p, q) for q in range(1, 7) for p in range(q + 1)})
CONSTANTS = (Fraction(1), Fraction(3, 2), Fraction(1, 2))


def is_ceiling(k: int, n: int, eps: Fraction, c: Fraction) -> bool:
    """k = ⌈c·n^ε⌉ exactly: k ≥ c·n^ε > k-1, compared as (k/c)^q vs n^p in rationals."""
    p, q = eps.numerator, eps.denominator
    at_least = (Fraction(k) / c) ** q >= Fraction(n) ** p
    below = k == 0 or (Fraction(k - 1) / c) ** q < Fraction(n) ** p
    return at_least and below


@pytest.mark.parametrize("eps", SMALL_EPS, ids=str)
def test_every_small_n_is_the_exact_ceiling(eps):
    for n in range(1, 400):
        for c in CONSTANTS:
            assert is_ceiling(ceil_scaled_power(n, eps, c), n, eps, c), (n, eps, c)


@settings(max_examples=300)
@given(st.integers(1, 10**6), st.sampled_from(SMALL_EPS), st.sampled_from(CONSTANTS))
def test_large_n_is_the_exact_ceiling(n, eps, c):
    k = ceil_scaled_power(n, eps, c)
    assert is_ceiling(k, n, eps, c)
    real = float(c) * n ** float(eps)
    if abs(real - round(real)) > 1e-6:  # away from integer boundaries, floats agree
        assert k == math.ceil(real)


def test_half_matches_the_closed_forms():
    for n in range(1, 3000):
        t = thresholds(n, Fraction(1, 2))
        assert t.strict == min(k for k in range(n + 2) if k * k >= n)
        assert t.up == min(k for k in range(2 * n + 2) if 4 * k * k >= 9 * n)
        assert t.down == min(k for k in range(n + 2) if 4 * k * k >= n)


def test_boundary_epsilons():
    for n in range(1, 200):
        assert thresholds(n, Fraction(0)) == (1, 2, 1)
        assert thresholds(n, Fraction(1)) == (n, -(-3 * n // 2), -(-n // 2))


def test_small_n_thresholds_are_one_to_three():
    """§2.3: for N ≤ 3 and 0 < ε < 1 the thresholds are small and the ceilings matter.

    "1-3" holds for ε ≤ ½; above it θ_up reaches 4 (⌈1.5·3^{2/3}⌉ = ⌈3.12⌉)."""
    for eps in (Fraction(1, 4), Fraction(1, 3), Fraction(1, 2)):
        for n in (1, 2, 3):
            t = thresholds(n, eps)
            assert all(1 <= v <= 3 for v in t), (n, eps, t)
    assert thresholds(3, Fraction(2, 3)) == (3, 4, 2)
    assert thresholds(1, Fraction(1, 2)) == (1, 2, 1)
    assert thresholds(2, Fraction(1, 2)) == (2, 3, 1)
    assert thresholds(3, Fraction(1, 2)) == (2, 3, 1)


# Hand-checked golden values, for the Spark side to reproduce bit for bit.
GOLDEN = [
    (10, "1/2", (4, 5, 2)),  # √10 = 3.162: 1.5·3.162 = 4.74, 0.5·3.162 = 1.58
    (16, "1/2", (4, 6, 2)),
    (17, "1/2", (5, 7, 3)),  # √17 = 4.123: 6.18, 2.06
    (64, "1/3", (4, 6, 2)),  # exact cube root
    (65, "1/3", (5, 7, 3)),  # 4.0207: 6.03, 2.01
    (1000, "2/3", (100, 150, 50)),
    (1001, "2/3", (101, 151, 51)),
    (81, "1/4", (3, 5, 2)),  # 3, 4.5, 1.5
    (801, "1/2", (29, 43, 15)),  # 28.30: 42.45, 14.15
    (10**6, "1/2", (1000, 1500, 500)),
]


@pytest.mark.parametrize(("n", "eps", "expect"), GOLDEN)
def test_golden(n, eps, expect):
    assert thresholds(n, parse_epsilon(eps)) == Thresholds(*expect)


def test_parse_epsilon_accepts_exact_forms():
    assert parse_epsilon("1/2") == Fraction(1, 2)
    assert parse_epsilon(" 0.25 ") == Fraction(1, 4)
    assert parse_epsilon(0.3) == Fraction(3, 10)  # as written, not the binary float
    assert parse_epsilon(0) == 0
    assert parse_epsilon(1) == 1
    assert parse_epsilon(Fraction(2, 3)) == Fraction(2, 3)
    assert parse_epsilon(f"1/{MAX_DENOMINATOR}") == Fraction(1, MAX_DENOMINATOR)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "rational"),
        ("2", r"\[0, 1\]"),
        ("-1/2", r"\[0, 1\]"),
        ("abc", "rational like"),
        ("1/0", "rational like"),
        (float("nan"), "finite"),
        (f"1/{MAX_DENOMINATOR + 1}", "denominator"),
        ([1, 2], "list"),
    ],
)
def test_parse_epsilon_refuses(value, message):
    with pytest.raises(ValueError, match=message):
        parse_epsilon(value)


def test_ceil_scaled_power_refuses_bad_base():
    with pytest.raises(ValueError, match="≥ 1"):
        ceil_scaled_power(0, Fraction(1, 2), Fraction(1))
