"""The inequality index of docs/vwap/algorithm.md §3.2 against its definition: after every update,
one node per live price level, keyed by the θ-aggregate recomputed from scratch, valued by the level's
Σ payload."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from ivmstream.services.vwap.trees.index import THETAS, InequalityIndex

# (price, weight) tuples and whether the step deletes a live tuple instead of inserting one.
steps = st.lists(
    st.tuples(st.integers(1, 8), st.integers(1, 4), st.booleans(), st.integers(0, 99)),
    min_size=1,
    max_size=60,
)


def expected_nodes(theta: str, live: Counter) -> list[tuple[int, int]]:
    """(key, Σ price·weight) per live price, from the definition of key(q) for θ."""
    prices = sorted({p for (p, _w), m in live.items() if m})
    out = []
    for q in prices:
        key = sum(
            w * m for (c, w), m in live.items() if {"<=": c <= q, "<": c < q, ">=": c >= q, ">": c > q}[theta]
        )
        pay = sum(c * w * m for (c, w), m in live.items() if c == q)
        out.append((key, pay))
    return sorted(out)


@given(theta=st.sampled_from(THETAS), ops=steps)
def test_index_matches_definition_after_every_update(theta, ops):
    ix = InequalityIndex(theta)
    live: Counter = Counter()
    for p, w, delete, pick in ops:
        present = sorted(t for t, m in live.items() if m)
        if delete and present:
            p, w = present[pick % len(present)]
            ix.update(p, -1, w, p * w)
            live[(p, w)] -= 1
        else:
            ix.update(p, 1, w, p * w)
            live[(p, w)] += 1
        ix.idx.check()
        ix.bound.check()
        nodes = expected_nodes(theta, live)
        assert sorted(ix.idx.items()) == nodes
        assert len(ix) == len(nodes) == len(ix.idx)
        assert ix.total == sum(w * m for (_p, w), m in live.items())
        assert ix.idx.total() == sum(p * w * m for (p, w), m in live.items())
        for q in {p for (p, _w), m in live.items() if m}:
            assert ix.group_key(q) in dict(ix.idx.items())


@given(theta=st.sampled_from(THETAS), ops=steps)
def test_bulk_build_equals_incremental(theta, ops):
    ix = InequalityIndex(theta)
    live: Counter = Counter()
    for p, w, _delete, _pick in ops:
        ix.update(p, 1, w, p * w)
        live[(p, w)] += 1
    levels: dict[int, list[int]] = {}
    for (p, w), m in live.items():
        lv = levels.setdefault(p, [0, 0, 0])
        lv[0] += w * m
        lv[1] += m
        lv[2] += p * w * m
    built = InequalityIndex(theta)
    built.build((p, lv[0], lv[1], lv[2]) for p, lv in sorted(levels.items()))
    built.idx.check()
    assert list(built.idx.items()) == list(ix.idx.items())
    assert built.total == ix.total
    assert list(built.bound.items()) == list(ix.bound.items())


def test_rising_prices_stay_balanced_and_emptying_all_levels_leaves_nothing():
    for theta in THETAS:
        ix = InequalityIndex(theta)
        for p in range(1, 1025):
            ix.update(p, 1, 1, p)
        assert ix.idx.height() <= 2 * 11
        for p in range(1, 1025):
            ix.update(p, -1, 1, p)
        assert len(ix) == 0 and len(ix.idx) == 0 and ix.total == 0
