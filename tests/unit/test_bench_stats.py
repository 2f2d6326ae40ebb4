"""The runtime benchmark's confidence interval for a median (order statistics of the sign test)."""

from __future__ import annotations

import random

import pytest

from bench.runtime import median_ci


@pytest.mark.parametrize(
    ("n", "rank"),
    # The usual 95% sign-test ranks, worked out by hand from Bin(n, 1/2): e.g. n=15, P(X <= 3) = 0.0176
    # (coverage 0.965) and P(X <= 4) = 0.0592 (0.882), so rank 4. Interval: [x_(rank), x_(n + 1 - rank)].
    [(6, 1), (7, 1), (8, 1), (9, 2), (10, 2), (15, 4), (20, 6), (25, 8), (30, 10)],
)
def test_ranks_match_the_published_table(n, rank):
    values = [float(i) for i in range(1, n + 1)]
    random.Random(n).shuffle(values)  # order of input must not matter
    assert median_ci(values) == (float(rank), float(n + 1 - rank))


def test_too_few_values_give_no_interval():
    assert median_ci([0.5] * 5) is None
    assert median_ci([]) is None


def test_coverage_by_simulation():
    """Fixed seed, 4,000 samples of n=15 from a skewed distribution with known median ln 2: the
    nominal coverage is 96.5%, so a 95% target with 4,000 trials fails a correct CI with p < 1e-6."""
    rng = random.Random(20261122)
    true_median = 0.6931471805599453  # median of Exp(1)
    hits = 0
    trials = 4000
    for _ in range(trials):
        lo, hi = median_ci([rng.expovariate(1.0) for _ in range(15)])
        hits += lo <= true_median <= hi
    assert hits / trials >= 0.95
