"""Incremental state: for random update streams and random checkpoint and crash points, an engine
restored from the stored entries equals the engine that saw the same prefix, for every strategy; and
restoring from entries equals restoring from a whole snapshot."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.engine import Engine, EngineError, is_incremental
from ivmstream.events import UpdateEvent
from ivmstream.services.triangles.engine import STRATEGIES as TRIANGLE_STRATEGIES
from ivmstream.services.triangles.engine import create_engine
from ivmstream.services.vwap.catalog import QUERIES as VWAP_QUERIES
from ivmstream.services.vwap.engine import create_engine as create_vwap_engine
from ivmstream.state import MemoryStore, StateChanges
from tests.unit.vwap.test_vwap_engine import book_events

KEY = "k"


def commit(store: MemoryStore, offset: int, engine: Engine) -> None:
    """One checkpoint of one key, as the worker writes it."""
    changes = StateChanges(entries={KEY: engine.changed_entries()})  # type: ignore[attr-defined]
    store.commit("t", 0, offset, changes, b"{}")


def run_with_crashes(
    factory: Callable[[], Engine], events: Sequence[UpdateEvent], plan: Sequence[tuple[int, str]]
) -> tuple[Engine, Engine]:
    """Feed ``events`` one by one to an engine that checkpoints or crashes at the planned positions (a
    crash loses everything since the last checkpoint, restores from the entries and re-applies the lost
    events, as a restarted worker re-reads them); and to an uninterrupted engine. Returns both."""
    plain, live, store = factory(), factory(), MemoryStore()
    for event in events:
        plain.apply([event])
    acts = dict(plan)
    committed = 0
    i = 0
    while i < len(events):
        act = acts.pop(i, None)
        if act == "checkpoint":
            commit(store, i, live)
            committed = i
        elif act == "crash":
            live = factory()
            stored = store.load("t", 0).entries
            if KEY in stored:  # a key with nothing stored starts from a fresh engine, as in the worker
                live.restore_entries(stored[KEY])  # type: ignore[attr-defined]
            i = committed
            continue
        live.apply([events[i]])
        i += 1
    commit(store, len(events), live)
    restored = factory()
    stored = store.load("t", 0).entries
    if KEY in stored:
        restored.restore_entries(stored[KEY])  # type: ignore[attr-defined]
    assert sorted(restored.all_entries()) == sorted(live.all_entries())  # type: ignore[attr-defined]
    return plain, restored


def assert_same_engine(a: Engine, b: Engine) -> None:
    assert a.result() == b.result()
    assert sorted(a.all_entries()) == sorted(b.all_entries())  # type: ignore[attr-defined]


def graph_events(draw_ops: list[tuple[int, int, bool]]) -> list[UpdateEvent]:
    """Edge toggles on few vertices (so degrees cross IVM^ε thresholds), deletes of present edges."""
    present: set[tuple[int, int]] = set()
    out = []
    for u, v, delete in draw_ops:
        if u == v:
            continue
        e = (min(u, v), max(u, v))
        d = -1 if (delete and e in present) else 1
        if d == 1 and e in present:
            d = -1
        (present.discard if d == -1 else present.add)(e)
        out.append(UpdateEvent("edges", {"src": u, "dst": v}, d))
    return out


COLS = {"R": ("a", "b"), "S": ("b", "c"), "T": ("c", "a")}

ops = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9), st.booleans()), max_size=160)
rel_ops = st.lists(
    st.tuples(
        st.sampled_from("RST"), st.integers(0, 6), st.integers(0, 6), st.sampled_from([1, 1, -1, 3, -2])
    ),
    max_size=160,
)
plans = st.lists(
    st.tuples(st.integers(0, 160), st.sampled_from(["checkpoint", "checkpoint", "crash"])), max_size=12
)


@pytest.mark.parametrize("strategy", TRIANGLE_STRATEGIES)
@settings(max_examples=30)
@given(ops=ops, plan=plans)
def test_triangles_graph_restores_from_entries_at_any_checkpoint_and_crash(strategy, ops, plan):
    events = graph_events(ops)
    plain, restored = run_with_crashes(lambda: create_engine("graph", strategy, None, False), events, plan)
    assert_same_engine(plain, restored)
    if strategy == "ivm-eps":
        restored.check_invariants()


@pytest.mark.parametrize("strategy", TRIANGLE_STRATEGIES)
@settings(max_examples=30)
@given(ops=rel_ops, plan=plans)
def test_triangles_relations_restore_from_entries_at_any_checkpoint_and_crash(strategy, ops, plan):
    events = [UpdateEvent(r, {COLS[r][0]: x, COLS[r][1]: y}, d) for r, x, y, d in ops]
    eps = "1/3" if strategy == "ivm-eps" else None  # thresholds low enough to rebalance often
    plain, restored = run_with_crashes(lambda: create_engine("relations", strategy, eps, False), events, plan)
    assert_same_engine(plain, restored)


@pytest.mark.parametrize("mode", ["graph", "relations"])
@pytest.mark.parametrize("strategy", TRIANGLE_STRATEGIES)
def test_triangles_restore_from_entries_equals_restore_from_snapshot(mode, strategy):
    import random

    rng = random.Random(7)
    engine = create_engine(mode, strategy, None, False)
    assert is_incremental(engine)
    for _ in range(2000):
        if mode == "graph":
            engine.apply([UpdateEvent("edges", {"src": rng.randrange(40), "dst": rng.randrange(40)}, 1)])
        else:
            r = rng.choice("RST")
            engine.apply(
                [
                    UpdateEvent(
                        r, {COLS[r][0]: rng.randrange(15), COLS[r][1]: rng.randrange(15)}, rng.choice([1, -1])
                    )
                ]
            )
    from_snapshot = create_engine(mode, strategy, None, False)
    from_snapshot.restore(engine.snapshot())
    from_entries = create_engine(mode, strategy, None, False)
    from_entries.restore_entries(list(engine.all_entries()))
    assert_same_engine(from_snapshot, from_entries)
    assert from_entries.result() == engine.result()


# --- vwap: every query, every strategy ---------------------------------------------------------------

VWAP_CASES = [(q, s) for q, info in VWAP_QUERIES.items() for s in info.strategies]

# Small domains per column type, so tuples recur (multiplicities > 1), TPC-H keys join and the text
# predicates of Q17/Q18 (brand, container) are met by some rows.
_DOMAINS: dict[str, list[object]] = {
    "int": [1, 2, 3],
    "exact": [Decimal(1), Decimal("2.5"), Decimal(4), Decimal("0.25")],
    "decimal": [Decimal(1), Decimal("2.5"), Decimal(4)],
    "str": ["Brand#23", "WRAP BOX", "x"],
}

vwap_ops = st.lists(
    st.tuples(st.integers(0, 10**6), st.sampled_from([1, 1, 1, -1, 2]), st.integers(0, 10**6)),
    max_size=80,
)


def vwap_events(query: str, draws: Sequence[tuple[int, int, int]]) -> list[UpdateEvent]:
    """Random valid updates of every relation of the query: inserts of rows from small domains and
    deletes of live rows (refused events cannot change state, which the conformance suite checks)."""
    info = VWAP_QUERIES[query]
    if info.book:
        ops = [
            (("insert", "delete", "execute")[a % 3], ("bids", "asks")[b % 2], 1 + a % 7, 1 + c % 4, c % 5, c)
            for a, b, c in draws
        ]
        return book_events(ops)
    live: list[tuple[str, dict[str, object]]] = []
    out = []
    for a, d, c in draws:
        if d < 0 and live:
            rel, row = live.pop(c % len(live))
            out.append(UpdateEvent(rel, row, -1))
            continue
        relation = info.relations[a % len(info.relations)]
        row = {}
        for j, (name, typ) in enumerate(relation.columns):
            domain = _DOMAINS[typ]
            row[name] = domain[(a // (j + 1) + c * (j + 3)) % len(domain)]
        live.extend([(relation.name, row)] * abs(d))
        out.append(UpdateEvent(relation.name, row, abs(d)))
    return out


@pytest.mark.parametrize(("query", "strategy"), VWAP_CASES)
@settings(max_examples=15, deadline=None)
@given(ops=vwap_ops, plan=plans)
def test_vwap_restores_from_entries_at_any_checkpoint_and_crash(query, strategy, ops, plan):
    events = vwap_events(query, ops)
    plain, restored = run_with_crashes(lambda: create_vwap_engine(query, strategy), events, plan)
    assert_same_engine(plain, restored)
    assert restored.snapshot() == plain.snapshot()


@pytest.mark.parametrize(("query", "strategy"), VWAP_CASES)
def test_vwap_restore_from_entries_equals_restore_from_snapshot(query, strategy):
    import random

    rng = random.Random(11)
    draws = [(rng.randrange(10**6), rng.choice([1, 1, 1, -1, 2]), rng.randrange(10**6)) for _ in range(600)]
    engine = create_vwap_engine(query, strategy)
    assert is_incremental(engine)
    assert not any(engine.apply(vwap_events(query, draws)))  # valid updates only
    assert engine.stats()["live_tuples"] > 0
    from_snapshot = create_vwap_engine(query, strategy)
    from_snapshot.restore(engine.snapshot())
    from_entries = create_vwap_engine(query, strategy)
    from_entries.restore_entries(list(engine.all_entries()))
    assert_same_engine(from_snapshot, from_entries)
    assert from_entries.result() == engine.result()
    assert from_entries.snapshot() == engine.snapshot()


def test_vwap_entries_of_another_query_are_refused():
    engine = create_vwap_engine("vwap", "rpai")
    engine.apply(vwap_events("vwap", [(1, 1, 2), (3, 1, 4)]))
    other = create_vwap_engine("sq1", "rpai")
    with pytest.raises(EngineError, match="written by"):
        other.restore_entries(list(engine.all_entries()))


def test_vwap_checkpoint_writes_only_touched_tuples_and_deletes_emptied_ones():
    engine = create_vwap_engine("vwap", "rpai")
    row = {"t": 1, "id": 1, "broker_id": 0, "volume": 2, "price": 5}
    engine.apply([UpdateEvent("bids", {**row, "id": i}, 1) for i in range(100)])
    assert len([c for c in engine.changed_entries() if c[0] == "b"]) == 100
    engine.apply([UpdateEvent("bids", row, -1), UpdateEvent("bids", {**row, "id": 500}, 1)])
    changes = {key: value for name, key, value in engine.changed_entries() if name == "b"}
    assert len(changes) == 2
    assert sorted(v is None for v in changes.values()) == [False, True]
    assert engine.changed_entries() == [c for c in engine.changed_entries() if c[0] == "s"]


# --- triangles: what a checkpoint writes ----------------------------------------------------------------


def test_triangles_graph_checkpoint_writes_one_entry_per_undirected_edge():
    engine = create_engine("graph", "ivm-eps", "1/2", False)
    engine.changed_entries()
    engine.apply([UpdateEvent("edges", {"src": u, "dst": u + 1}, 1) for u in range(50)])
    engine.apply([UpdateEvent("edges", {"src": 7, "dst": 6}, -1)])  # deleted from the other direction
    tuples = {key: value for name, key, value in engine.changed_entries() if name == "t"}
    assert len(tuples) == 50
    assert [key for key, value in tuples.items() if value is None] == [b"[0,6,7]"]


@pytest.mark.parametrize("strategy", TRIANGLE_STRATEGIES)
def test_triangles_graph_directed_tuples_survive_entries_restore(strategy):
    """apply_tuple may store one direction only (or unequal ones); entries keep both exactly."""
    engine = create_engine("graph", strategy, None, False)
    logged = create_engine("graph", strategy, None, False)
    logged.changed_entries()  # a checkpoint took the empty state: what follows is logged
    for x, y, m in [(1, 2, 1), (2, 1, 3), (3, 1, 1), (4, 4, 2), ("a", 1, 1), (1, "b", -1)]:
        engine.apply_tuple("E", x, y, m)
        logged.apply_tuple("E", x, y, m)
    restored = create_engine("graph", strategy, None, False)
    restored.restore_entries(list(engine.all_entries()))
    from_snapshot = create_engine("graph", strategy, None, False)
    from_snapshot.restore(engine.snapshot())
    assert_same_engine(restored, from_snapshot)
    again = create_engine("graph", strategy, None, False)
    store = MemoryStore()
    store.commit("t", 0, 1, StateChanges(entries={KEY: logged.changed_entries()}), b"{}")
    again.restore_entries(store.load("t", 0).entries[KEY])
    assert_same_engine(again, from_snapshot)


def test_triangles_moving_a_row_between_parts_rewrites_one_entry_not_its_tuples():
    engine = create_engine("relations", "ivm-eps", "1/2", False)
    engine.apply([UpdateEvent("S", {"b": y, "c": y}, 1) for y in range(2000)])
    engine.changed_entries()
    y = 0
    while (0, 0) not in engine._heavy_rows():  # grow R's row a=0 one tuple per checkpoint until heavy
        assert y < 2000, "row a=0 never became heavy"
        changes = engine.changed_entries()
        engine.apply([UpdateEvent("R", {"a": 0, "b": y}, 1)])
        y += 1
    assert y > 1  # it started light
    changes = engine.changed_entries()
    assert ("h", b"[0,0]", b"1") in changes
    assert [c[1] for c in changes if c[0] == "t"] == [orjson.dumps((0, 0, y - 1))]  # not its other tuples
    while (0, 0) in engine._heavy_rows():  # and back: deletes until the row is light again
        y -= 1
        engine.apply([UpdateEvent("R", {"a": 0, "b": y}, -1)])
    changes = engine.changed_entries()
    assert ("h", b"[0,0]", None) in changes
    restored = create_engine("relations", "ivm-eps", "1/2", False)
    restored.restore_entries(list(engine.all_entries()))
    assert_same_engine(restored, engine)


@pytest.mark.parametrize("epsilon", ["0", "1"])
@settings(max_examples=30)
@given(ops=rel_ops, plan=plans)
def test_triangles_ivm_eps_extreme_epsilons_restore_from_entries(epsilon, ops, plan):
    """ε = 0: every new row starts heavy; ε = 1: none is ever heavy (the part map stays empty)."""
    events = [UpdateEvent(r, {COLS[r][0]: x, COLS[r][1]: y}, d) for r, x, y, d in ops]
    factory = lambda: create_engine("relations", "ivm-eps", epsilon, False)  # noqa: E731
    plain, restored = run_with_crashes(factory, events, plan)
    assert_same_engine(plain, restored)
    restored.check_invariants()


def test_whole_snapshot_checkpoints_leave_an_incremental_engine_without_a_change_log():
    """With state_layout snapshot the runtime never asks for changes, so the engine never starts a log:
    after updates and after a checkpoint it holds no record of what changed."""
    from ivmstream.runtime.partition import PartitionState
    from ivmstream.state import PartitionCheckpoint

    cp = PartitionCheckpoint(None, {}, {}, None)
    state = PartitionState(
        "t", 0, lambda: create_engine("graph", "ivm-eps", "1/2", False), cp, incremental=False
    )
    engine = state.engine(KEY)
    engine.apply([UpdateEvent("edges", {"src": u, "dst": u + 1}, 1) for u in range(100)])
    assert engine.pending_changes() == 0
    state.dirty.add(KEY)
    changes = state.take_changes()
    assert KEY in changes.snapshots and not changes.entries
    engine.apply([UpdateEvent("edges", {"src": u, "dst": u + 2}, 1) for u in range(100)])
    assert engine.pending_changes() == 0
