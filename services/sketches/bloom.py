"""A Bloom filter over join keys (docs/sketches/algorithm.md §2.6.2).

Keys are hashed from one canonical byte encoding for both ``add`` and ``might_contain`` (a filter that
hashed them differently would report false negatives and lose join results). Multi-column keys are
hashed as one composite key. The filter only grows: a deleted key leaves its bits (a false positive
costs one lookup, a false negative a wrong sketch).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any


def key_bytes(key: tuple[Any, ...]) -> bytes:
    """One encoding per key value: type tag and text of each column (``2`` and ``2.0`` are one value)."""
    parts = []
    for v in key:
        if isinstance(v, str):
            parts.append("s" + v)
        elif isinstance(v, int | float) and float(v).is_integer():
            parts.append("i" + str(int(v)))
        else:
            parts.append("n" + repr(float(v)) if isinstance(v, float) else "n" + str(v))
    return "\x00".join(parts).encode()


class BloomFilter:
    def __init__(self, capacity: int = 1 << 16, fp_rate: float = 0.01) -> None:
        self.size = max(64, math.ceil(-capacity * math.log(fp_rate) / math.log(2) ** 2))
        self.hashes = max(1, round(self.size / capacity * math.log(2)))
        self.bits = bytearray((self.size + 7) // 8)
        self.count = 0

    def _positions(self, key: tuple[Any, ...]) -> list[int]:
        digest = hashlib.blake2b(key_bytes(key), digest_size=16).digest()
        h1 = int.from_bytes(digest[:8], "little")
        h2 = int.from_bytes(digest[8:], "little") | 1
        return [(h1 + i * h2) % self.size for i in range(self.hashes)]

    def add(self, key: tuple[Any, ...]) -> None:
        bits = self.bits
        for pos in self._positions(key):
            bits[pos >> 3] |= 1 << (pos & 7)
        self.count += 1

    def might_contain(self, key: tuple[Any, ...]) -> bool:
        bits = self.bits
        return all(bits[pos >> 3] >> (pos & 7) & 1 for pos in self._positions(key))
