"""Chi-square tail probabilities without SciPy (regularized upper incomplete gamma, Numerical-Recipes
style: series below a+1, Lentz's continued fraction above), for the uniformity tests."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence


def _gamma_q(a: float, x: float) -> float:
    if x <= 0:
        return 1.0
    gln = math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        ap = a
        for _ in range(10_000):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return 1.0 - total * math.exp(-x + a * math.log(x) - gln)
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - gln) * h


def chi2_sf(x: float, dof: int) -> float:
    """P(X >= x) for X ~ χ²(dof)."""
    return _gamma_q(dof / 2, x / 2)


def inclusion_p_value(samples: Sequence[Iterable[Hashable]], population: Sequence[Hashable], k: int) -> float:
    """The inclusion-frequency test for uniform k-samples without replacement from ``population``
    (M results): with c_r the number of trials containing r and E = T·k/M, the statistic
    (M-1)/(M-k) · Σ (c_r - E)²/E is χ²(M-1) under uniformity (each trial's k inclusions are
    negatively correlated, which the factor corrects). Requires k < M."""
    m, t = len(population), len(samples)
    counts = dict.fromkeys(population, 0)
    for s in samples:
        for r in s:
            counts[r] += 1  # a KeyError here is a result outside the join: a test failure too
    expected = t * k / m
    stat = sum((c - expected) ** 2 for c in counts.values()) / expected
    return chi2_sf(stat * (m - 1) / (m - k), m - 1)


def multinomial_p_value(draws: Sequence[Hashable], population: Sequence[Hashable]) -> float:
    """Plain χ² goodness of fit of independent draws against the uniform distribution."""
    counts = dict.fromkeys(population, 0)
    for r in draws:
        counts[r] += 1
    expected = len(draws) / len(population)
    stat = sum((c - expected) ** 2 for c in counts.values()) / expected
    return chi2_sf(stat, len(population) - 1)
