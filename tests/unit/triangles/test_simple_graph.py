"""The compiled batch path of graph-mode first-order maintenance (services/triangles/_graph_kernels.c,
services/triangles/simple_graph.py) against the Python path and brute force: after every batch (and,
with batches of one, after every event) both paths give the same count, rejections, result, change
log and snapshot (up to the order of the indexes' rows), and the count is the brute-force one. Events
mix inserts, deletes, duplicate inserts, absent deletes, self-loops, bad multiplicities, bad ids and
foreign relations; ``auto`` with rebuilds priced at nothing switches plans inside batches."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from ivmstream.services.triangles import simple_graph
from ivmstream.services.triangles.auto import AutoEngine, CostModel
from ivmstream.services.triangles.base import support
from ivmstream.services.triangles.baselines import FirstOrderEngine
from ivmstream.services.triangles.engine import create_engine
from tests.unit.extension_checks import require_built

require_built(
    simple_graph.compiled,
    "graph kernel",
    "ivmstream.services.triangles._graph_kernels",
    "services/triangles/_graph_kernels.c",
)

TWITCHY = CostModel(
    rebuild_fixed=0, rebuild_per_tuple=0, rebuild_per_view_entry=0, eps_rebuild_per_tuple=0, sample_stride=1
)


@pytest.fixture(autouse=True, scope="module")
def _compiled_path() -> Iterator[None]:
    """These tests are about the compiled path: it runs even under IVMSTREAM_PURE_PYTHON=1."""
    with path("compiled"):
        yield


@contextmanager
def path(active: str) -> Iterator[None]:
    """Graph batches applied inside run on the ``compiled`` mirror or the ``python`` path, whatever
    IVMSTREAM_PURE_PYTHON says (the choice is read when a batch builds the mirror)."""
    saved = simple_graph.ACTIVE
    simple_graph.ACTIVE = active
    try:
        yield
    finally:
        simple_graph.ACTIVE = saved


def brute_count(edges: set[frozenset[Any]]) -> int:
    """Ordered triangles (6 per triangle) of a simple graph, by checking every node triple."""
    nodes = sorted({n for e in edges for n in e}, key=repr)
    return 6 * sum(
        1
        for a, b, c in itertools.combinations(nodes, 3)
        if {frozenset((a, b)), frozenset((b, c)), frozenset((a, c))} <= edges
    )


NODES = st.one_of(st.integers(0, 7), st.sampled_from(["a", "b", "é"]))
# Mostly valid toggles (an insert of an absent edge, a delete of a present one) so the graph grows and
# shrinks; the rest is everything the service rejects.
RAW = st.tuples(
    st.sampled_from(["toggle"] * 8 + ["dup", "absent", "loop", "mult", "bad-id", "relation", "missing"]),
    NODES,
    NODES,
)
BATCHES = st.lists(st.lists(RAW, min_size=1, max_size=25), min_size=1, max_size=8)


def concrete(raw: tuple[str, Any, Any], edges: set[frozenset[Any]]) -> UpdateEvent:
    """One event from a raw draw; ``edges`` follows the valid ones (the brute-force state)."""
    kind, u, v = raw
    e = frozenset((u, v))
    if kind == "loop" or (u == v and kind in ("toggle", "dup", "absent")):
        return UpdateEvent("edges", {"src": u, "dst": u}, 1)
    if kind == "toggle":
        m = -1 if e in edges else 1
        (edges.discard if m < 0 else edges.add)(e)
        return UpdateEvent("edges", {"src": u, "dst": v}, m)
    if kind == "dup":
        return UpdateEvent("edges", {"src": u, "dst": v}, 1 if e in edges else -1)
    if kind == "absent":
        return UpdateEvent("edges", {"src": u, "dst": v}, -1 if e not in edges else 1)
    if kind == "mult":
        return UpdateEvent("edges", {"src": u, "dst": v}, 2)
    if kind == "bad-id":
        return UpdateEvent("edges", {"src": 2**63, "dst": v}, 1)
    if kind == "relation":
        return UpdateEvent("R", {"src": u, "dst": v}, 1)
    return UpdateEvent("edges", {"src": u}, 1)


def canonical(value: Any) -> Any:
    """A snapshot's JSON with every dumped index ([[x, [y1, m1, ...]], ...]) as a sorted list of its
    tuples: the compiled path rewrites the dict indexes from its adjacency sets, so their rows (and the
    entries of a row) can come in another order than the Python path's insertions."""
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(e, list) and len(e) == 2 and isinstance(e[1], list) for e in value):
            return sorted(
                (repr(x), repr(y), repr(m))
                for x, flat in value
                for y, m in zip(flat[::2], flat[1::2], strict=True)
            )
        return [canonical(v) for v in value]
    return value


def observed(engine: Any, rejected: list[Any]) -> tuple[Any, ...]:
    entries = sorted(engine.changed_entries(), key=repr), sorted(engine._entries(), key=repr)
    snapshot = canonical(orjson.loads(engine.snapshot()))
    return engine.result(), [(r.index, r.code, r.detail) for r in rejected], entries, snapshot


def run_both(make: Any, batches: list[list[tuple[str, Any, Any]]], checkpoint: bool = True) -> list[Any]:
    """Apply the batches on a compiled-path and a Python-path engine; return the compiled one's mirror
    states seen. Both must agree after every batch, and the count must be the brute-force count."""
    fast, slow = make(), make()
    if checkpoint:  # log changes from the start, as a worker that has taken a checkpoint does
        list(fast.all_entries())
        list(slow.all_entries())
    edges: set[frozenset[Any]] = set()
    mirrors = []
    for raw_batch in batches:
        events = [concrete(raw, edges) for raw in raw_batch]
        with path("compiled"):
            got = observed(fast, fast.apply(events))
        with path("python"):
            want = observed(slow, slow.apply(events))
        assert got == want
        assert fast.q == brute_count(edges)
        plan = getattr(fast, "plan", fast)
        mirrors.append(plan._fast if isinstance(plan, FirstOrderEngine) else None)
        slow_plan = getattr(slow, "plan", slow)
        assert not getattr(slow_plan, "_fast", None)  # the reference never ran on a mirror
    fast.check_invariants()
    return mirrors


def mirror_matches(engine: FirstOrderEngine) -> None:
    g = engine._fast
    fwd = engine.fwd[0]
    assert g.tuples == support(fwd) == engine.rsize[0]
    assert all(g.has_edge(x, y) for x, row in fwd.items() for y in row)
    assert g.node_count() == len(fwd)


@settings(max_examples=120, deadline=None)
@given(BATCHES)
def test_first_order_batches_equal_the_python_path_and_brute_force(batches):
    mirrors = run_both(lambda: create_engine("graph", "first-order"), batches)
    assert all(m for m in mirrors)  # every batch ran on the mirror


@settings(max_examples=60, deadline=None)
@given(st.lists(RAW, min_size=1, max_size=60))
def test_every_single_event_equals_the_python_path_and_brute_force(raws):
    run_both(lambda: create_engine("graph", "first-order"), [[raw] for raw in raws])


@settings(max_examples=80, deadline=None)
@given(BATCHES, st.booleans())
def test_auto_switches_inside_batches_exactly_as_the_python_path(batches, twitchy):
    """With rebuilds priced at nothing, ``auto`` leaves first-order inside a batch (and comes back):
    each priced event stops the compiled loop, so the switch happens before the next event on both paths."""
    run_both(lambda: AutoEngine("graph", TWITCHY if twitchy else CostModel()), batches, checkpoint=twitchy)


@settings(max_examples=60, deadline=None)
@given(BATCHES)
def test_the_mirror_holds_exactly_the_engines_edges(batches):
    engine = FirstOrderEngine("graph")
    edges: set[frozenset[Any]] = set()
    for raw_batch in batches:
        engine.apply([concrete(raw, edges) for raw in raw_batch])
        mirror_matches(engine)
        assert engine.q == brute_count(edges)


def test_apply_tuple_leaves_the_mirror_and_a_non_simple_graph_runs_the_python_path():
    engine = FirstOrderEngine("graph")
    engine.apply(
        [UpdateEvent("edges", {"src": 1, "dst": 2}, 1), UpdateEvent("edges", {"src": 2, "dst": 3}, 1)]
    )
    assert engine._fast
    engine.apply_tuple("E", 3, 1, 1)  # a directed tuple: E is no longer symmetric
    assert engine._fast is None
    engine.apply([UpdateEvent("edges", {"src": 4, "dst": 5}, 1)])
    assert engine._fast is False  # not a simple graph: the Python path ran
    engine.apply_tuple("E", 1, 3, 1)  # symmetric again: 1-2-3 is a triangle
    engine.apply([UpdateEvent("edges", {"src": 5, "dst": 6}, 1)])
    assert engine.q == 6
    engine.check_invariants()


def test_the_indexes_catch_up_with_the_mirror_when_read():
    """Batches leave the dict indexes behind; reading them (a snapshot, an invariant check, a Python-path
    update) rewrites them from the mirror first."""
    engine = FirstOrderEngine("graph")
    triangle = [UpdateEvent("edges", {"src": u, "dst": v}, 1) for u, v in ((1, 2), (2, 3), (3, 1))]
    engine.apply(triangle)
    assert engine._stale and engine._fwd[0] == {}  # behind
    assert engine.fwd[0] == {1: {2: 1, 3: 1}, 2: {1: 1, 3: 1}, 3: {1: 1, 2: 1}} == engine.bwd[0]
    assert not engine._stale
    engine.apply([UpdateEvent("edges", {"src": 3, "dst": 1}, -1)])
    assert engine._mult(0, 1, 3) == 0 and engine._mult(0, 1, 2) == 1  # answered by the mirror
    engine.apply_tuple("E", 1, 3, 1)  # the Python path: caught up first, then the mirror is dropped
    assert engine._fast is None and engine.fwd[0][1] == {2: 1, 3: 1} and 1 not in engine.fwd[0][3]
    engine.check_invariants()


@pytest.mark.parametrize("bad", [{1: {2: 1}}, {1: {1: 1}}, {1: {2: 2}, 2: {1: 2}}])
def test_a_graph_that_is_not_simple_has_no_mirror(bad):
    assert (
        simple_graph.mirror(
            bad,
            {
                y: {x: m for x, row in bad.items() for yy, m in row.items() if yy == y}
                for y in {y for row in bad.values() for y in row}
            },
        )
        is None
    )


def test_restore_then_batches_continue_identically():
    engine = create_engine("graph", "auto")
    engine.load([(1, 2), (2, 3), (3, 4), ("x", 1)])
    snap = engine.snapshot()
    again = create_engine("graph", "auto")
    again.restore(snap)
    events = [UpdateEvent("edges", {"src": 1, "dst": 3}, 1), UpdateEvent("edges", {"src": "x", "dst": 2}, 1)]
    assert engine.apply(events) == again.apply(events) == []
    assert engine.result() == again.result() and engine.snapshot() == again.snapshot()
    assert engine.q == 6 * 2  # 1-2-3 and x-1-2


def test_a_full_scan_of_ids_the_mirror_cannot_order_reads_the_dicts():
    """Restored state may hold ids no event can carry (floats here): the mirror takes them, and the full
    scan of entries, which orders each edge's ids, falls back to the caught-up dicts."""
    engine = FirstOrderEngine("graph")
    engine._build([{1.5: {2.5: 1}, 2.5: {1.5: 1}}])
    engine.apply([UpdateEvent("edges", {"src": 1, "dst": 2}, 1)])
    assert engine._stale
    keys = sorted(key for name, key, _ in engine._entries() if name == "t")
    assert keys == [b"[0,1,2]", b"[0,1.5,2.5]"]


def test_auto_leaves_first_order_and_comes_back_inside_one_batch():
    """Two hubs sharing 120 neighbours, then their edge toggled between sparse inserts: with rebuilds
    priced at nothing ``auto`` moves to IVM^ε on each toggle and back to first-order on the sparse
    edge after it, inside one batch, the same number of times on both paths."""

    def edge(u: int, v: int, m: int = 1) -> UpdateEvent:
        return UpdateEvent("edges", {"src": u, "dst": v}, m)

    hubs = [edge(h, x) for x in range(2, 122) for h in (0, 1)]
    toggles = [e for i in range(40) for e in (edge(0, 1, 1 - 2 * (i % 2)), edge(200 + i, 300 + i))]
    engines = {}
    for active in ("compiled", "python"):
        with path(active):
            engine = AutoEngine("graph", TWITCHY)
            list(engine.all_entries())
            assert engine.apply(hubs) == engine.apply(toggles) == []
            engines[active] = engine, observed(engine, [])
    (fast, got), (slow, want) = engines["compiled"], engines["python"]
    assert got == want
    assert fast.switches == slow.switches == 80
    assert fast.q == 0  # the hubs' edge is absent after an even number of toggles
    fast.check_invariants()
