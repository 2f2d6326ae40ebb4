"""Invariants after every update, against brute force (docs/reservoir/algorithm.md §6.1), for every
strategy, on random streams with duplicates, deletes, skew (tiny domains), joins that empty out and
inserts that break a declared key; the refusals are those of a model of the relations kept apart."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from ivmstream.services.reservoir.engine import ReservoirEngine
from ivmstream.services.reservoir.query import STRATEGIES
from tests.unit.reservoir.oracle import QUERIES, Model, bases, brute_join, engine, event, options

PREDICATES = {
    "line3": "a != d",
    "two": "x <= z",
    "star3": "a + b > 1",
    "branch": "A != E or C == 0",
    "dumbbell": "x1 != x4",
    "cycle4": "a != c",
    "fk": "cat != region",
}


@st.composite
def streams(draw: Any, query: str) -> list[tuple[str, tuple[str, ...], tuple[int, ...], int]]:
    """Events over a domain of 2-3 values (so keys repeat and counts cross powers of two), some of
    them repeats of earlier events and some deletes of earlier tuples."""
    rels = bases(engine(QUERIES[query]))
    domain = draw(st.integers(2, 3))
    out: list[tuple[str, tuple[str, ...], tuple[int, ...], int]] = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["insert"] * 6 + ["again", "delete"]))
        if kind != "insert" and out:
            rel, cols, vals, _ = out[draw(st.integers(0, len(out) - 1))]
            out.append((rel, cols, vals, -1 if kind == "delete" else 1))
            continue
        rel, cols = draw(st.sampled_from(rels))
        vals = tuple(draw(st.integers(0, domain - 1)) for _ in cols)
        out.append((rel, cols, vals, 1))
    return out


def check(e: ReservoirEngine) -> None:
    """Sample ⊆ Q_θ, distinct, |S| = min(k, |Q_θ|) (with replacement: k draws from Q_θ), exact sizes
    where the engine claims them, and |J| >= |Q|."""
    join = brute_join(e)
    qualifying = {r for r in join if e.theta is None or e.theta(r)}
    rows = e.rows()
    assert set(rows) <= qualifying
    if e.with_replacement:
        assert len(rows) == (e.k if qualifying else 0)
    else:
        assert len(rows) == len(set(rows)) == min(e.k, len(qualifying))
    size = e.join_size()
    if size is not None:
        assert size == len(qualifying)
    if e.strategy in ("sjoin", "sjoin-opt") and e.theta is None:
        assert size == len(join)  # the exact index always knows |Q|
    assert e.join_size_bound() >= len(join)
    result = e.result()
    assert [tuple(r.values()) for r in result["sample"]] == sorted(
        rows, key=lambda r: tuple((type(v).__name__, v) for v in r)
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("query", sorted(QUERIES))
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_sample_is_a_valid_sample_of_the_current_join_after_every_event(strategy: str, query: str, data: Any):
    k = data.draw(st.sampled_from([1, 3, 50]))
    theta = data.draw(st.sampled_from([None, PREDICATES[query]]))
    replacement = data.draw(st.booleans())
    e = engine(QUERIES[query], k=k, strategy=strategy, predicate=theta, with_replacement=replacement)
    model = Model(e)
    for rel, cols, vals, delta in data.draw(streams(query)):
        want = model.apply(rel, vals, delta)
        assert [r.code for r in e.apply([event(rel, cols, vals, delta)])] == ([want] if want else [])
        assert {a: set(r) for a, r in e.rels.items()} == model.relations()
        check(e)


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_batches_and_restores_mid_stream_give_the_bit_identical_engine(strategy: str, data: Any):
    """The same events applied one by one, in one batch, or with a snapshot/restore in between: the
    same snapshot bytes and result (the reservoir depends on the event order only)."""
    query = data.draw(st.sampled_from(sorted(QUERIES)))
    events = [event(r, c, v, d) for r, c, v, d in data.draw(streams(query))]
    opts = {"k": 2, "strategy": strategy, "with_replacement": data.draw(st.booleans())}
    one = engine(QUERIES[query], **opts)
    for ev in events:
        one.apply([ev])
    whole = engine(QUERIES[query], **opts)
    whole.apply(events)
    cut = data.draw(st.integers(0, len(events)))
    first = engine(QUERIES[query], **opts)
    first.apply(events[:cut])
    snap = first.snapshot()
    second = engine(QUERIES[query], **opts)
    second.restore(snap)
    assert second.snapshot() == snap
    second.apply(events[cut:])
    assert one.snapshot() == whole.snapshot() == second.snapshot()
    assert one.result() == whole.result() == second.result()


def test_a_duplicate_insert_is_refused_and_draws_nothing():
    e = engine(QUERIES["line3"], k=2)
    for v in [(0, 1), (1, 2), (2, 0), (1, 0), (0, 2)]:
        e.apply([event("E", ["src", "dst"], v)])
    before = e.snapshot()
    refused = e.apply([event("E", ["src", "dst"], (1, 2))])
    assert [r.code for r in refused] == ["duplicate-tuple"]
    assert e.snapshot() == before  # the random generator's state included


@pytest.mark.parametrize(
    ("opts", "delta", "code"),
    [({"append_only": True}, -1, "append-only"), ({}, -1000, "set-semantics"), ({}, 2, "set-semantics")],
)
def test_refused_events_leave_the_state_untouched(opts: dict[str, Any], delta: int, code: str):
    e = engine(QUERIES["line3"], k=2, **opts)
    e.apply([event("E", ["src", "dst"], v) for v in [(0, 1), (1, 2), (2, 0)]])
    before = e.snapshot()
    refused = e.apply([event("E", ["src", "dst"], (0, 1), delta)])
    assert [r.code for r in refused] == [code]
    assert e.snapshot() == before


def test_deleting_an_absent_tuple_is_refused():
    e = engine(QUERIES["two"], k=2)
    e.apply([UpdateEvent("R", {"x": 1, "y": 2}, 1)])
    before = e.snapshot()
    assert [r.code for r in e.apply([UpdateEvent("S", {"y": 2, "z": 3}, -1)])] == ["absent-tuple"]
    assert e.snapshot() == before


def test_a_self_join_reads_each_base_event_once_per_alias():
    """line-3 over one edge relation: the base event reaches G1, G2 and G3 in turn, so a single edge
    (v, v) already makes the walk v→v→v→v."""
    e = engine(QUERIES["line3"], k=5)
    e.apply([event("E", ["src", "dst"], (7, 7))])
    assert e.result()["sample"] == [{"a": 7, "b": 7, "c": 7, "d": 7}]
    assert e.counters["inserts"] == 3


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_bootstrap_from_relations_is_a_valid_engine_with_the_streamed_index_counts(strategy: str, data: Any):
    """The Spark bootstrap's driver half: relations in, a valid sample out, and index counts equal to
    those of an engine that streamed the same tuples (counts depend on the tuple set only)."""
    query = data.draw(st.sampled_from(sorted(QUERIES)))
    opts = {
        "k": data.draw(st.sampled_from([1, 4])),
        "strategy": strategy,
        "with_replacement": data.draw(st.booleans()),
    }
    streamed = engine(QUERIES[query], **opts)
    for rel, cols, vals, delta in data.draw(streams(query)):
        streamed.apply([event(rel, cols, vals, delta)])
    present = {b: [t for t in streamed.rels[aliases[0]]] for b, aliases in streamed.query.fanout.items()}
    built = ReservoirEngine.bootstrap(streamed.options, {b: sorted(ts) for b, ts in present.items()})
    check(built)
    counts = [[e.index.counts(d) for d in e.index.ds] for e in (built, streamed)]
    assert counts[0] == counts[1]
    again = engine(QUERIES[query], **opts)
    again.restore(built.snapshot())
    assert again.snapshot() == built.snapshot()


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_changed_entries_fold_into_the_entries_and_rebuild_the_same_engine(strategy: str, data: Any):
    """Incremental checkpoints (§9): the entries written so far plus each checkpoint's changes equal
    the engine's entries at every checkpoint (deletes included), the log counts one record per changed
    entry (``pending_changes``), and an engine restored
    from them continues exactly like the live one."""
    query = data.draw(st.sampled_from(sorted(QUERIES)))
    events = [event(r, c, v, d) for r, c, v, d in data.draw(streams(query))]
    opts = {"k": 2, "strategy": strategy, "with_replacement": data.draw(st.booleans())}
    live = engine(QUERIES[query], **opts)
    stored = {(m, k): v for m, k, v in live.all_entries()}
    live.changed_entries()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(events)), max_size=4)))
    done = 0
    for cut in [*cuts, len(events)]:
        live.apply(events[done:cut])
        done = cut
        pending = live.pending_changes()
        changes = live.changed_entries()
        assert pending == len(changes)  # one record per entry the checkpoint writes
        assert live.pending_changes() == 0
        for m, k, v in changes:
            if v is None:
                stored.pop((m, k), None)
            else:
                stored[(m, k)] = v
        assert stored == {(m, k): v for m, k, v in live.all_entries()}
    rebuilt = engine(QUERIES[query], **opts)
    rebuilt.restore_entries([(m, k, v) for (m, k), v in stored.items()])
    assert rebuilt.snapshot() == live.snapshot()
    more = [event(r, c, v, d) for r, c, v, d in data.draw(streams(query))]
    rebuilt.apply(more)
    live.apply(more)
    assert rebuilt.snapshot() == live.snapshot()
    assert rebuilt.result() == live.result()


@pytest.mark.parametrize("query", ["line3", "cycle4"])
def test_a_node_of_one_alias_is_stored_once_as_its_alias_entries(query: str):
    """A node of one alias holds the alias's tuples under the alias's arrival numbers, so its entries
    are the alias's (REL) alone; a bag of several aliases keeps node entries of its own. The engine
    restored from them, mid-stream after a delete, equals the live one and continues like it."""
    live = engine(QUERIES[query], k=3, strategy="rsjoin")
    tuples = [
        (r, c, tuple((i + j * (i // 3)) % 3 for j in range(len(c))))
        for i, (r, c) in enumerate(bases(live) * 5)
    ]
    stream = [event(r, c, v) for r, c, v in tuples]
    stored = {(m, k): v for m, k, v in live.all_entries()}
    live.apply(stream[:-2])
    assert not live.apply([event(*tuples[0], -1)])
    for m, k, v in live.changed_entries():
        if v is None:
            stored.pop((m, k), None)
        else:
            stored[(m, k)] = v
    shared = {e for e, n in enumerate(live.query.nodes) if len(n.members) == 1}
    node_owners = {orjson.loads(k)[0] for m, k in stored if m == "node"}
    assert node_owners == set(range(len(live.query.nodes))) - shared  # line3: none; cycle4: the bag's
    rebuilt = engine(QUERIES[query], k=3, strategy="rsjoin")
    rebuilt.restore_entries([(m, k, v) for (m, k), v in stored.items()])
    assert rebuilt.snapshot() == live.snapshot()
    rebuilt.apply(stream[-2:])
    live.apply(stream[-2:])
    assert rebuilt.snapshot() == live.snapshot()


@pytest.mark.parametrize("strategy", ["rsjoin", "rsjoin-opt", "sjoin"])
@pytest.mark.parametrize("query", ["line3", "cycle4"])
def test_an_insert_only_engine_is_stored_without_its_structures_and_rebuilt_by_replay(
    query: str, strategy: str
):
    """While every tuple arrived by an insert, a checkpoint writes no structure (dir) entry and a restore
    re-inserts the alias tuples in arrival order: the same index, bucket for bucket. The first delete
    makes the next checkpoint write every structure; a bootstrapped engine writes them from the start."""
    live = engine(QUERIES[query], k=3, strategy=strategy)
    tuples = [
        (r, c, tuple((i * 7 + j * (i // 2)) % 3 for j in range(len(c))))
        for i, (r, c) in enumerate(bases(live) * 6)
    ]
    stored = {(m, k): v for m, k, v in live.all_entries()}

    def checkpoint() -> None:
        for m, k, v in live.changed_entries():
            if v is None:
                stored.pop((m, k), None)
            else:
                stored[(m, k)] = v

    def restored() -> ReservoirEngine:
        again = engine(QUERIES[query], k=3, strategy=strategy)
        again.restore_entries([(m, k, v) for (m, k), v in stored.items()])
        assert again.snapshot() == live.snapshot()
        return again

    live.apply([event(*x) for x in tuples[:-3]])
    checkpoint()
    assert not any(m == "dir" for m, _ in stored)
    again = restored()
    for e in (live, again):
        e.apply([event(*tuples[-3])])
    assert again.snapshot() == live.snapshot()
    for e in (live, again):
        assert not e.apply([event(*tuples[0], -1), event(*tuples[-2])])
    assert again.snapshot() == live.snapshot()
    checkpoint()
    assert {m for m, _ in stored} >= {"dir"}
    assert stored == {(m, k): v for m, k, v in live.all_entries()}
    restored()
    relations: dict[str, list[tuple[int, ...]]] = {r: [] for r, _ in bases(live)}
    for r, _, v in dict.fromkeys(tuples):
        relations[r].append(v)
    boot = ReservoirEngine.bootstrap(options(QUERIES[query], k=3, strategy=strategy), relations)
    assert any(m == "dir" for m, _, _ in boot.all_entries())


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(
        st.tuples(*[st.one_of(st.integers(-3, 3), st.booleans(), st.text(max_size=2))] * 3), max_size=12
    ),
    ints_only=st.booleans(),
)
def test_the_published_sample_is_in_canonical_order_for_any_column_types(values: Any, ints_only: bool):
    """The result lists the sample ordered by (type name, value) per column, whether every value is an
    int (ordered by the values alone) or types mix."""
    live = engine(QUERIES["two"], k=50, strategy="rsjoin")
    for row in values:
        a, b, c = ((v if isinstance(v, int) else len(v)) % 4 for v in row) if ints_only else row
        live.apply([event("R", ("x", "y"), (a, b)), event("S", ("y", "z"), (b, c))])
    assert len(live.rows()) == len(brute_join(live))
    want = sorted(live.rows(), key=lambda r: tuple((type(v).__name__, v) for v in r))
    assert [tuple(r.values()) for r in live.result()["sample"]] == want
