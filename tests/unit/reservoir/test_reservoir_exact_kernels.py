"""The compiled step of the exact join index (services/reservoir/_exact_kernels.c, SJoin's counts: an
item re-weighed in its keys' Fenwick trees and every count change propagated up the join tree) leaves
every container exactly as its Python reference (``JoinIndex._reweigh`` in exact mode and the methods
it calls) does: counts, each key's rows in order, the Fenwick trees, the positions, the changed-key log
and the work counters, after every insert and delete, on every query shape, plain and grouped, with
duplicates and skewed keys; counts beyond 64 bits included. Both agree with the join counted by nested
loops after every step. An engine on the compiled step draws the same sample as one on the Python
steps."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.reservoir import exact_kernels
from ivmstream.services.reservoir.index import JoinIndex, _fen_add, _fen_append, _fen_find, _fen_point
from ivmstream.services.reservoir.query import parse_query
from tests.unit.extension_checks import require_built
from tests.unit.reservoir.kernel_checks import (
    SHAPES,
    engines_on_one_stream,
    index_pair,
    pure_python_switch,
)
from tests.unit.reservoir.oracle import DUMBBELL, LINE3, STAR3, options

require_built(
    exact_kernels.compiled,
    "exact-count kernels",
    "ivmstream.services.reservoir._exact_kernels",
    "services/reservoir/_exact_kernels.c",
)


def pair(shape: str, grouped: bool) -> tuple[JoinIndex, JoinIndex, Any]:
    """(compiled, Python) exact indexes over the same query."""
    return index_pair(shape, grouped, exact=True, slot="exact_native", native=exact_kernels.compiled)


def state(ix: JoinIndex) -> list[Any]:
    """Everything the re-weighing writes, with every dict's and list's order (a Fenwick tree as the list
    of its nodes)."""
    out: list[Any] = [ix.places, ix.propagations, sorted(ix.dirty, key=repr)]
    for d in ix.ds:
        out.append([list(getattr(d, name).items()) for name in ("cnt", "rcnt", "rows", "where")])
        out.append([(v, list(tree)) for v, tree in d.fen.items()])
    return out


def nested_loops(ix: JoinIndex, q: Any) -> int:
    """|J| over the index's current tuples, by nested loops (independent of the counts)."""
    found = 0
    for combo in itertools.product(*(list(n.tuples) for n in ix.nodes)):
        bind: dict[str, Any] = {}
        found += all(
            bind.setdefault(a, x) == x
            for node, t in zip(q.nodes, combo, strict=True)
            for a, x in zip(node.attrs, t, strict=True)
        )
    return found


def value(data: Any, domain: int, hot: bool) -> int:
    """A join value; with ``hot``, value 0 three times in four (a skewed key)."""
    if hot and data.draw(st.integers(0, 3)):
        return 0
    v: int = data.draw(st.integers(0, domain - 1))
    return v


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_compiled_exact_counts_match_the_python_steps_and_the_nested_loops(
    shape: str, grouped: bool, data: Any
):
    """Random inserts, duplicate inserts (refused) and deletes over a small, optionally skewed domain,
    the changed-key log on or off: after every step the two indexes hold the same containers in the same
    order, |J| equals the join counted by nested loops, and an insert's batch size equals its number of
    new results."""
    compiled, python, q = pair(shape, grouped)
    compiled.tracking = python.tracking = data.draw(st.booleans())
    domain, hot = data.draw(st.integers(2, 4)), data.draw(st.booleans())
    present: list[tuple[int, tuple[int, ...]]] = []
    for _ in range(data.draw(st.integers(1, 30))):
        before = compiled.full_size()
        if present and data.draw(st.integers(0, 2)) == 0:
            e, t = present.pop(data.draw(st.integers(0, len(present) - 1)))
            assert compiled.remove(e, t) and python.remove(e, t)
        else:
            e = data.draw(st.integers(0, len(q.nodes) - 1))
            t = tuple(value(data, domain, hot) for _ in q.nodes[e].attrs)
            added = compiled.insert(e, t)
            assert python.insert(e, t) == added
            if added:
                present.append((e, t))
                size, radices = compiled.delta_size(e, t)
                assert python.delta_size(e, t) == (size, radices)
                assert size == compiled.full_size() - before  # the insert's new results, exactly
        assert state(compiled) == state(python)
        assert compiled.full_size() == nested_loops(compiled, q)


@pytest.mark.parametrize("forged", [2**62 + 1, 2**70], ids=["crossing-64-bits", "beyond-64-bits"])
@pytest.mark.parametrize("grouped", [False, True])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_compiled_exact_counts_beyond_64_bits_match_the_python_steps(grouped: bool, forged: int, data: Any):
    """A leaf's count forged in both indexes: at 2**62 + 1 the Fenwick sums above it cross 64 bits while
    the tree is being updated (its nodes move to Python ints mid-update), at 2**70 they start beyond; the
    two indexes agree after every insert and delete."""
    compiled, python, q = pair("line3", grouped)
    # the last leaf structure: its count reaches the super-root through two levels
    leaf = [d for d in compiled.ds if not d.children and d.parent >= 0][-1]
    v = tuple(data.draw(st.integers(0, 2)) for _ in leaf.key_pos)
    for ix in (compiled, python):
        ix.ds[leaf.idx].cnt[v] = ix.ds[leaf.idx].rcnt[v] = forged
    present: list[tuple[int, tuple[int, ...]]] = []
    for _ in range(data.draw(st.integers(1, 25))):
        if present and data.draw(st.integers(0, 2)) == 0:
            e, t = present.pop(data.draw(st.integers(0, len(present) - 1)))
            assert compiled.remove(e, t) and python.remove(e, t)
        else:
            e = data.draw(st.integers(0, len(q.nodes) - 1))
            if e == leaf.node:
                continue  # the forged count stays as it is
            t = tuple(data.draw(st.integers(0, 2)) for _ in q.nodes[e].attrs)
            if compiled.insert(e, t):
                assert python.insert(e, t)
                present.append((e, t))
        assert state(compiled) == state(python)


@pytest.mark.parametrize("strategy", ["sjoin", "sjoin-opt"])
@pytest.mark.parametrize("query", [LINE3, STAR3, DUMBBELL], ids=["line3", "star3", "dumbbell"])
def test_an_engine_on_the_compiled_exact_step_draws_the_same_sample(query: dict[str, Any], strategy: str):
    """Same seed, same stream (inserts, then deletes of a third of the tuples): the same sample, the
    same generator state, the same snapshot of the index, the same work counters."""
    done: list[Any] = []
    for e in engines_on_one_stream(query, strategy, 7, "exact_native"):
        ix = e.index
        done.append((e.sampler.rows(), e.rng.getstate(), ix.dump_directed(), ix.places, ix.propagations))
    assert done[0] == done[1]
    assert done[0][0]  # a non-empty sample was compared


NODE_VALUES = st.one_of(
    st.integers(-(2**64), 2**64), st.integers(2**63 - 3, 2**63 + 3), st.integers(-(2**63) - 3, -(2**63) + 3)
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 4), NODE_VALUES, st.integers(0, 10**6)), max_size=40))
def test_a_compiled_fenwick_tree_reads_and_writes_as_a_list_of_ints(ops: list[tuple[int, int, int]]):
    """The compiled tree under index.py's helpers (append, add, point, find, pop) against a list of
    Python ints: the same nodes and answers after every operation, values crossing 64 bits both ways."""
    tree, ref = exact_kernels.compiled.Fenwick(), list[int]()
    for op, x, at in ops:
        if op == 0 or not ref:
            _fen_append(tree, x)
            _fen_append(ref, x)
        elif op == 1:
            _fen_add(tree, at % len(ref), x)
            _fen_add(ref, at % len(ref), x)
        elif op == 2:
            assert _fen_point(tree, at % len(ref)) == _fen_point(ref, at % len(ref))
            assert _fen_find(tree, x) == _fen_find(ref, x)
        elif op == 3:
            assert tree.pop() == ref.pop()
        else:
            tree[at % len(ref)] = x
            ref[at % len(ref)] = x
        assert list(tree) == ref and len(tree) == len(ref)
        if any(not -(2**63) <= n < 2**63 for n in ref):
            assert tree.wide  # a node beyond 64 bits: the tree holds Python ints (and keeps them)


def test_a_compiled_fenwick_tree_refuses_what_a_list_of_ints_would_not_hold():
    tree = exact_kernels.compiled.Fenwick()
    with pytest.raises(TypeError):
        tree.append("1")  # type: ignore[arg-type]  # what a typed caller cannot pass, refused at run time
    with pytest.raises(IndexError):
        tree.pop()
    tree.append(2**80)
    assert tree.wide and list(tree) == [2**80] and repr(tree) == f"Fenwick([{2**80}])"
    with pytest.raises(IndexError):
        tree[1] = 0


def test_the_exact_kernel_refuses_a_rounded_index():
    """The compiled step reads Fenwick trees: called on a rounded index it says so instead of writing."""
    q = parse_query(options(LINE3))
    rounded = JoinIndex([n.attrs for n in q.nodes], q.neighbours(), q.columns)
    with pytest.raises(ValueError, match="exact index"):
        exact_kernels.compiled.reweigh(rounded, 0, (1, 2), 0, 1)


def test_pure_python_switch_turns_the_compiled_exact_step_off():
    """IVMSTREAM_PURE_PYTHON=1 gives the Python steps (as for the event decoder); unset, the compiled."""
    probe = "from ivmstream.services.reservoir import exact_kernels as k; print(k.ACTIVE, k.native is None)"
    runs = pure_python_switch(probe)
    assert runs == {"1": ["python", "True"], "0": ["compiled", "False"]}
