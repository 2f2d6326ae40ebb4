"""The running example of the rings' tests (docs/fivm/rings.md §4-§5): Q(A, B, C, D) = R(A, B),
S(A, C, E), T(C, D) with E bound, over the variable order A -> {B -> R, C -> {D -> T, E -> S}}; the
output variables in preorder, random relations, products in a random order and the join by brute force."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from hypothesis import strategies as st

OUTPUT = ["A", "B", "C", "D"]


def random_product(ring: Any, rnd: random.Random, *factors: Any) -> Any:
    """The product of ``factors`` in a random order, each multiplied on a random side."""
    shuffled = list(factors)
    rnd.shuffle(shuffled)
    out = ring.one()
    for f in shuffled:
        out = ring.mul(out, f) if rnd.random() < 0.5 else ring.mul(f, out)
    return out


def brute_force(R: dict, S: dict, T: dict) -> dict[tuple, int]:
    """The join's tuples (A, B, C, D) with their multiplicities, zeros left out."""
    out: Counter = Counter()
    for (a, b), mr in R.items():
        for (a2, c, _e), ms in S.items():
            for (c2, d), mt in T.items():
                if a == a2 and c == c2:
                    out[(a, b, c, d)] += mr * ms * mt
    return {t: m for t, m in out.items() if m}


def z_relation(width: int, mults: st.SearchStrategy[int]) -> st.SearchStrategy[dict[tuple, int]]:
    """A relation of ``width`` columns over {0, 1, 2} with multiplicities drawn from ``mults``."""
    return st.dictionaries(st.tuples(*(st.integers(0, 2) for _ in range(width))), mults, max_size=8)
