"""The join Bloom filter: never a false negative, and a false-positive rate near its target.

Statistical check: with n = 2,000 keys at target p = 1 %, 100,000 absent probes; under H0 (true rate
<= 1.5 p) the observed count exceeds the one-sided binomial bound at significance 0.001 with
probability < 0.001. The seed is fixed, so the test is deterministic.
"""

from __future__ import annotations

import math
import random

from ivmstream.services.sketches.bloom import BloomFilter, key_bytes


def test_no_false_negatives_and_false_positive_rate_within_bound() -> None:
    rng = random.Random(20261123)
    n, target, probes = 2_000, 0.01, 100_000
    bloom = BloomFilter(capacity=n, fp_rate=target)
    keys = {(rng.randrange(10**12), f"k{rng.randrange(10**6)}") for _ in range(n)}
    for k in keys:
        bloom.add(k)
    assert all(bloom.might_contain(k) for k in keys)
    hits = 0
    for _ in range(probes):
        k = (rng.randrange(10**12, 2 * 10**12), "absent")
        hits += bloom.might_contain(k)
    p = 1.5 * target
    bound = probes * p + 3.09 * math.sqrt(probes * p * (1 - p))  # z for one-sided 0.001
    assert hits <= bound


def test_equal_values_hash_equally() -> None:
    assert key_bytes((2,)) == key_bytes((2.0,))
    assert key_bytes(("2",)) != key_bytes((2,))
