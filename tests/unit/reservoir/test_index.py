"""The dynamic index against its definition recomputed from scratch (docs/reservoir/algorithm.md
§2.3-§2.5, §6.1): counts, rounded counts, buckets, exact counts, and the virtual batch of every
insert decoding to exactly the new join results."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.reservoir.index import BUCKETS, CNT, EXPS, WHERE, Directed, JoinIndex, nextpow2
from ivmstream.services.reservoir.query import parse_query
from tests.unit.reservoir.oracle import BRANCH, LINE3, STAR3, TWO_TABLE, options

SHAPES: dict[str, dict[str, Any]] = {"line3": LINE3, "two": TWO_TABLE, "star3": STAR3, "branch": BRANCH}
MODES = [(False, False), (False, True), (True, False), (True, True)]  # (exact, grouped)


def build(shape: str, exact: bool, grouped: bool) -> tuple[JoinIndex, Any]:
    q = parse_query(options(SHAPES[shape]))
    return JoinIndex([n.attrs for n in q.nodes], q.neighbours(), q.columns, exact=exact, grouped=grouped), q


def reference_count(index: JoinIndex, d: Directed, v: tuple[Any, ...]) -> int:
    """cnt by its recursive definition (rounded children in rounded mode), not by the stored state."""
    node = index.nodes[d.node]
    total = 0
    for item in node.all_items():
        if tuple(item[i] for i in d.key_pos) != v:
            continue
        members = node.members(item)
        w = (len(members) if index.exact else nextpow2(len(members))) if index.grouped else 1
        for c, pos in zip(d.children, d.child_pos, strict=True):
            child = reference_count(index, index.ds[c], tuple(item[i] for i in pos))
            w *= child if index.exact or not child else nextpow2(child)
        total += w
    return total


def exact_subtree(index: JoinIndex, d: Directed, v: tuple[Any, ...]) -> int:
    """The number of join results of the subtree below d agreeing with v, by nested loops."""
    node = index.nodes[d.node]
    total = 0
    for t in node.tuples:
        item = node.item_of(t)
        if tuple(item[i] for i in d.key_pos) != v:
            continue
        w = 1
        for c, pos in zip(d.children, d.child_pos, strict=True):
            w *= exact_subtree(index, index.ds[c], tuple(item[i] for i in pos))
        total += w
    return total


def check_index(index: JoinIndex) -> None:
    for d in index.ds:
        node = index.nodes[d.node]
        keys = {tuple(item[i] for i in d.key_pos) for item in node.all_items()}
        for v in keys:
            want = reference_count(index, d, v)
            assert index.count(d, v) == want
            assert index.rounded(d, v) == (want if index.exact or not want else nextpow2(want))
            exact = exact_subtree(index, d, v)
            assert exact <= want
            if index.exact:
                assert exact == want
        if not index.exact:
            for rec in d.recs.values():
                per = {x: arr for x, arr in enumerate(rec[BUCKETS]) if arr is not None}
                assert all(per.values())  # an emptied bucket's position holds None
                assert sum(len(a) << x for x, a in per.items()) == rec[CNT]
                assert rec[EXPS] == sorted(per)
                assert len(rec[WHERE]) == sum(len(a) for a in per.values())
                for x, arr in per.items():
                    for i, item in enumerate(arr):
                        assert rec[WHERE][item] == i
                        weight = (nextpow2(len(node.members(item))) if index.grouped else 1) * _children(
                            index, d, item
                        )
                        assert weight == 1 << x
            bucketed = {item for rec in d.recs.values() for arr in rec[BUCKETS] if arr for item in arr}
            assert bucketed == {item for item in node.all_items() if _children(index, d, item)}


def _children(index: JoinIndex, d: Directed, item: tuple[Any, ...]) -> int:
    w = 1
    for c, pos in zip(d.children, d.child_pos, strict=True):
        w *= index.rounded(index.ds[c], tuple(item[i] for i in pos))
    return w


def brute(index: JoinIndex, q: Any) -> set[tuple[Any, ...]]:
    out = set()
    for combo in itertools.product(*(list(n.tuples) for n in index.nodes)):
        bind: dict[str, Any] = {}
        if all(
            bind.setdefault(a, x) == x
            for node, t in zip(q.nodes, combo, strict=True)
            for a, x in zip(node.attrs, t, strict=True)
        ):
            out.add(tuple(bind[c] for c in q.columns))
    return out


@pytest.mark.parametrize(("exact", "grouped"), MODES)
@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_index_equals_its_definition_and_batches_decode_to_the_new_results(
    shape: str, exact: bool, grouped: bool, data: Any
):
    index, q = build(shape, exact, grouped)
    domain = data.draw(st.integers(2, 4))
    before: set[tuple[Any, ...]] = set()
    for _ in range(data.draw(st.integers(1, 25))):
        e = data.draw(st.integers(0, len(q.nodes) - 1))
        t = tuple(data.draw(st.integers(0, domain - 1)) for _ in q.nodes[e].attrs)
        if not index.insert(e, t):
            continue
        check_index(index)
        after = brute(index, q)
        size, radices = index.delta_size(e, t)
        decoded = [index.delta_get(e, t, radices, z) for z in range(size)]
        reals = [r for r in decoded if r is not None]
        assert sorted(reals) == sorted(after - before)  # each new result exactly once
        if exact:
            assert len(reals) == size  # exact batches hold no dummies
        full = [index.full_get(z) for z in range(index.full_size())]
        assert sorted(r for r in full if r is not None) == sorted(after)
        before = after


def test_rounded_counts_only_double_and_change_rarely():
    """Monotone rounded counts: inserting 1..n tuples under one key moves its rounded count
    log2(n) + 1 times (and the propagation loop runs only then)."""
    index, q = build("two", exact=False, grouped=False)
    s = q.nodes[1]
    assert s.attrs == ("y", "z")
    changes, last = 0, 0
    for z in range(1, 65):
        index.insert(1, (0, z))
        now = index.rounded(index.ds[index.into[(1, 0)]], (0,))
        assert now >= last
        changes += now != last
        last = now
    assert changes == 7  # 1, 2, 4, ..., 64


@pytest.mark.parametrize(("exact", "grouped"), MODES)
@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_removes_keep_the_index_equal_to_its_definition(shape: str, exact: bool, grouped: bool, data: Any):
    """Inserts and removes in any order (§5): after each, the counts, buckets and Fenwick trees are
    those of the current tuples, no key of count 0 is kept, J reads exactly the current join, and
    every insert's batch still decodes to its new results."""
    index, q = build(shape, exact, grouped)
    domain = data.draw(st.integers(2, 3))
    present: list[tuple[int, tuple[Any, ...]]] = []
    for _ in range(data.draw(st.integers(1, 40))):
        before = brute(index, q)
        if present and data.draw(st.booleans()):
            e, t = present.pop(data.draw(st.integers(0, len(present) - 1)))
            assert index.remove(e, t)
            assert not index.remove(e, t)
        else:
            e = data.draw(st.integers(0, len(q.nodes) - 1))
            t = tuple(data.draw(st.integers(0, domain - 1)) for _ in q.nodes[e].attrs)
            if not index.insert(e, t):
                continue
            present.append((e, t))
            size, radices = index.delta_size(e, t)
            reals = [r for r in (index.delta_get(e, t, radices, z) for z in range(size)) if r is not None]
            assert sorted(reals) == sorted(brute(index, q) - before)
        check_index(index)
        for d in index.ds:
            counts = index.counts(d)
            assert all(counts.values()) and set(counts) == set(d.rows if exact else d.recs)
            if exact:
                assert set(d.cnt) == set(d.rcnt)
            else:  # a rounded structure keeps its keys in their records alone
                assert not d.cnt and not d.rcnt
        full = [index.full_get(z) for z in range(index.full_size())]
        assert sorted(r for r in full if r is not None) == sorted(brute(index, q))
        if exact:
            assert None not in full  # the Fenwick trees hold exactly the current weights
