"""Fixed-length vectors that add elementwise: the abelian-group payloads of multi-sum indexes.

MST keys one tree node per price level but carries (count, Σ price·volume) per broker, NQ1 carries
(volume, price·volume). Trees only ever use ``+``, ``-`` and ``==`` on payloads, so ints and Vecs
are interchangeable there.
"""

from __future__ import annotations

from operator import add, neg, sub
from typing import Any


class Vec(tuple):
    """Operands must have equal length (one index never mixes lengths); ``map`` keeps this the
    cheapest elementwise form in CPython, which matters: tree sums add payloads on every path step."""

    __slots__ = ()

    def __add__(self, other: Any) -> Vec:  # type: ignore[override]
        return Vec(map(add, self, other))

    def __radd__(self, other: Any) -> Vec:
        if other == 0:
            return self
        return Vec(map(add, other, self))

    def __sub__(self, other: Any) -> Vec:
        return Vec(map(sub, self, other))

    def __neg__(self) -> Vec:
        return Vec(map(neg, self))

    def __mul__(self, k: Any) -> Vec:  # type: ignore[override]
        return Vec([a * k for a in self])

    __rmul__ = __mul__

    def is_zero(self) -> bool:
        return not any(self)

    @classmethod
    def zero(cls, n: int) -> Vec:
        return cls([0] * n)
