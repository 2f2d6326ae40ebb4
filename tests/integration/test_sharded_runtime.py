"""The runtime's side of sharded queries (docs/architecture.md, "Scaling one query over workers"):
routing by one hash, the broadcast-offset bookkeeping of input partitions, the stored broadcast offset,
and the coordinator's engine, which is idempotent under replayed and duplicated partial results."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.config import build_config
from ivmstream.events import Relation, UpdateEvent
from ivmstream.options import ConfigError
from ivmstream.partitioner import murmur2
from ivmstream.runtime.broadcast import first_unapplied, resume_offset
from ivmstream.runtime.coordinator import PartialCodec, PartialsEngine, coordinator_of, supersedes
from ivmstream.runtime.partition import PartitionState
from ivmstream.runtime.routing import ShardRouting, shard_of, shard_text
from ivmstream.service import load_service
from ivmstream.state import MemoryStore, PartitionCheckpoint, StateChanges, open_store
from ivmstream.state.rocksdb import RocksDBStore

# --- routing ----------------------------------------------------------------------------------------

RELATIONS = [
    Relation.of("Sales", store="int", item="str", qty="int"),
    Relation.of("Stores", store="int", city="str"),
    Relation.of("Items", item="str", price="float"),
]


@given(st.integers(-(2**53), 2**53), st.integers(1, 64))
def test_equal_values_of_any_type_share_a_shard(i, shards):
    text = shard_text(i)
    assert (
        text
        == shard_text(float(i))
        == shard_text(Decimal(i))
        == shard_text(Decimal(i).scaleb(0) + Decimal("0.00"))
    )
    assert (
        shard_of(i, shards) == shard_of(float(i), shards) == (murmur2(str(i).encode()) & 0x7FFFFFFF) % shards
    )


def test_shard_text_of_other_values():
    assert shard_text(-0.0) == shard_text(0) == b"0"
    assert shard_text(2.5) == b"2.5" and shard_text(Decimal("2.50")) == b"2.5"
    assert shard_text("ab") == b"ab" and shard_text(True) == b"true"
    with pytest.raises(TypeError):
        shard_text([1])


EVENTS = st.one_of(
    st.builds(
        lambda s, i, q: ("Sales", {"store": s, "item": i, "qty": q}),
        st.integers(-50, 50),
        st.text(max_size=3),
        st.integers(1, 3),
    ),
    st.builds(lambda s, c: ("Stores", {"store": s, "city": c}), st.integers(-50, 50), st.text(max_size=3)),
    st.builds(lambda i, p: ("Items", {"item": i, "price": p}), st.text(max_size=3), st.floats(0, 10)),
)


@given(EVENTS, st.integers(1, 8))
def test_route_sends_an_event_where_the_worker_accepts_it(item, shards):
    relation, row = item
    routing = ShardRouting(RELATIONS, "store", shards, "in", "in.b")
    dest = routing.route(orjson.dumps({"relation": relation, "row": row, "delta": 1}))
    ev = UpdateEvent(relation, row, 1)
    if relation == "Items":
        assert (dest.topic, dest.partition) == ("in.b", 0)
        assert routing.misplaced_broadcast(ev) is None
        assert all(routing.misplaced_input(ev, p) is not None for p in range(shards))
    else:
        want = (murmur2(str(row["store"]).encode()) & 0x7FFFFFFF) % shards
        assert (dest.topic, dest.partition, dest.key) == ("in", want, str(row["store"]).encode())
        assert routing.misplaced_broadcast(ev) is not None
        assert [p for p in range(shards) if routing.misplaced_input(ev, p) is None] == [want]


def test_unroutable_records_go_to_input_partition_0_to_be_dead_lettered():
    routing = ShardRouting(RELATIONS, "store", 4, "in", "in.b")
    for value in (
        b"{",
        b"[]",
        b'{"relation": "Nope", "row": {}}',
        b'{"relation": "Sales", "row": {"item": "x"}}',
    ):
        assert routing.route(value) == ("in", 0, None)


# --- broadcast bookkeeping --------------------------------------------------------------------------


@st.composite
def rebalances(draw: st.DrawFn) -> tuple[list[int], list[tuple[str, Any]]]:
    """A broadcast log (increasing offsets, with gaps) and a run of steps: assign or revoke input
    partitions, consume a batch, checkpoint, or crash (uncheckpointed progress lost)."""
    offsets = sorted(draw(st.sets(st.integers(0, 200), max_size=40)))
    steps = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("assign"), st.integers(0, 3)),
                st.tuples(st.just("revoke"), st.integers(0, 3)),
                st.tuples(st.just("consume"), st.integers(1, 10)),
                st.tuples(st.just("checkpoint"), st.integers(0, 3)),
                st.tuples(st.just("crash"), st.just(0)),
            ),
            max_size=60,
        )
    )
    return offsets, steps


@given(rebalances())
@settings(max_examples=300)
def test_each_partition_applies_each_broadcast_record_once_in_order(case):
    """The worker's rules (shared/runtime/broadcast.py) over any rebalances and crashes: the reader
    restarts at ``resume_offset`` of the owned partitions whenever they change, and each partition takes
    a batch from ``first_unapplied``; what a partition applied is always exactly the log before its
    offset, each record once, in order (a crash rewinds both to the stored checkpoint)."""
    log, steps = case
    stored: dict[int, tuple[int | None, list[int]]] = {
        p: (None, []) for p in range(4)
    }  # partition -> (broadcast offset, applied) as checkpointed
    owned: dict[int, tuple[int | None, list[int]]] = {}
    position: int | None = None

    def restart() -> int | None:
        return resume_offset(o for o, _applied in owned.values())

    for op, arg in steps:
        if op == "assign" and arg not in owned:
            owned[arg] = (stored[arg][0], list(stored[arg][1]))
            position = restart()
        elif op == "revoke" and arg in owned:
            stored[arg] = owned.pop(arg)  # revocation checkpoints first
            position = restart()
        elif op == "checkpoint" and arg in owned:
            stored[arg] = (owned[arg][0], list(owned[arg][1]))
        elif op == "crash":
            owned, position = {}, None
        elif op == "consume" and position is not None:
            batch = [o for o in log if o >= position][:arg]
            if not batch:
                continue
            position = batch[-1] + 1
            for p, (offset, applied) in owned.items():
                start = first_unapplied(batch, offset)
                if start < len(batch):
                    owned[p] = (batch[-1] + 1, applied + batch[start:])
        for offset, applied in [*owned.values(), *stored.values()]:
            assert applied == [o for o in log if o < (offset or 0)]


def test_partition_state_checkpoints_broadcast_progress_alone():
    state = PartitionState(
        "t", 0, lambda: PartialsEngine(sum), PartitionCheckpoint(offset=5, broadcast_offset=3)
    )
    assert not state.needs_checkpoint
    state.broadcast_next = 9
    assert state.needs_checkpoint
    assert state.take_changes().broadcast_offset == 9


@pytest.mark.parametrize("backend", ["memory", "rocksdb", "redis"])
def test_stores_keep_the_broadcast_offset_with_the_input_offset(backend, tmp_path, request, unique):
    if backend == "memory":
        store: Any = MemoryStore()
    elif backend == "rocksdb":
        store = RocksDBStore(tmp_path, unique)
    else:
        store = open_store("redis", unique, redis_url=request.getfixturevalue("redis_server").url)
    try:
        store.commit("t", 0, 4, StateChanges(snapshots={"": b"x"}), b"{}")
        assert store.load("t", 0).broadcast_offset is None  # unsharded state: no broadcast offset
        store.commit("t", 0, 7, StateChanges(broadcast_offset=11), b"{}")
        cp = store.load("t", 0)
        assert (cp.offset, cp.broadcast_offset, cp.snapshots) == (7, 11, {"": b"x"})
        store.commit("t", 0, 8, StateChanges(), b"{}")  # no broadcast offset given: the stored one stays
        assert store.load("t", 0).broadcast_offset == 11
        assert not PartitionCheckpoint(broadcast_offset=0).empty
    finally:
        store.close()


# --- the coordinator ----------------------------------------------------------------------------------


def value_at(shard: int, offsets: dict[str, int]) -> int:
    """A shard's partial result is a function of the offsets it reflects (its state covers exactly the
    records before them), whatever the order a worker applied them in."""
    return (shard + 1) * 1_000_000 + offsets["in"] * 1000 + offsets["b"]


@st.composite
def partial_streams(draw: st.DrawFn) -> tuple[list[tuple[int, dict[str, int]]], dict[int, dict[str, int]]]:
    """What workers publish for each shard: partials at any offsets up to the shard's end, in any order
    (replays after crashes, duplicates, other interleavings of input and broadcast), then the end."""
    ends: dict[int, dict[str, int]] = {}
    stream: list[tuple[int, dict[str, int]]] = []
    for shard in range(draw(st.integers(1, 4))):
        end = {"in": draw(st.integers(0, 20)), "b": draw(st.integers(0, 20))}
        ends[shard] = end
        earlier = draw(st.lists(st.tuples(st.integers(0, end["in"]), st.integers(0, end["b"])), max_size=15))
        stream += [(shard, {"in": i, "b": b}) for i, b in earlier]
    rng = random.Random(draw(st.integers(0, 2**32)))
    rng.shuffle(stream)
    finals = [(shard, end) for shard, end in ends.items()]
    rng.shuffle(finals)
    # a shard's end is published after its earlier partials (one ordered partition); duplicates follow
    tail = [item for item in finals for _ in range(draw(st.integers(1, 3)))]
    return stream + tail, ends


def partial_event(shard: int, offsets: dict[str, int]) -> UpdateEvent:
    row = {"source": f"in:{shard}", "offsets": dict(offsets), "result": value_at(shard, offsets)}
    return UpdateEvent("partial", row, 1)


@given(partial_streams(), st.integers(1, 5), st.integers(0, 100))
def test_coordinator_sums_the_latest_partial_of_each_shard(case, batch, cut):
    stream, ends = case
    events = [partial_event(shard, offsets) for shard, offsets in stream]
    engine = PartialsEngine(sum)
    restored = PartialsEngine(sum)
    cut = min(cut, len(events))
    held: dict[str, dict[str, int]] = {}
    for i in range(0, cut, batch):
        assert engine.apply(events[i : i + batch]) == []
        now = engine.reflects()
        # what the result reflects never goes back on any topic of any shard
        assert all(all(now[s][t] >= o for t, o in offsets.items()) for s, offsets in held.items())
        held = now
    # a restart from a checkpoint (entries) re-applies the rest and anything replayed before it
    restored.restore_entries(list(engine.all_entries()))
    assert restored.result() == engine.result()
    for e in (engine, restored):
        e.apply(events[max(0, cut - batch) :])
    want = sum(value_at(shard, end) for shard, end in ends.items())
    assert engine.result() == restored.result() == want
    assert engine.reflects() == {f"in:{s}": end for s, end in sorted(ends.items())}
    again = PartialsEngine(sum)
    again.restore(engine.snapshot())
    again.apply(events)  # the whole stream replayed once more changes nothing
    assert again.result() == want


def test_supersedes_needs_every_offset_at_least_and_one_ahead():
    assert supersedes({"a": 2, "b": 1}, {"a": 1, "b": 1})
    assert not supersedes({"a": 1, "b": 1}, {"a": 1, "b": 1})  # a duplicate
    assert not supersedes({"a": 3, "b": 0}, {"a": 1, "b": 1})  # another interleaving: not comparable
    assert not supersedes({"a": 0, "b": 5}, {"a": 1, "b": 1})


def test_changed_entries_hold_the_replaced_partials_only():
    engine = PartialsEngine(sum)
    engine.apply([partial_event(0, {"in": 1, "b": 0}), partial_event(1, {"in": 1, "b": 0})])
    assert [k for _m, k, _v in engine.changed_entries()] == [b"in:0", b"in:1"]
    engine.apply([partial_event(0, {"in": 1, "b": 0}), partial_event(1, {"in": 2, "b": 0})])
    assert [k for _m, k, _v in engine.changed_entries()] == [b"in:1"]


def test_partial_codec_reads_published_records_and_refuses_others():
    codec = PartialCodec("fivm")
    record = {
        "service": "fivm",
        "key": "in:0",
        "result": {"x": 1},
        "offsets": {"in:0": 3},
        "published_at": 1.0,
    }
    ev = codec.decode(orjson.dumps(record))
    assert (ev.relation, ev.row) == (
        "partial",
        {"source": "in:0", "offsets": {"in:0": 3}, "result": {"x": 1}},
    )
    bad = [
        b"{",
        orjson.dumps({**record, "service": "other"}),
        orjson.dumps({**record, "offsets": {"in:0": -1}}),
    ]
    decoded, groups, errors = codec.decode_grouped([orjson.dumps(record), *bad])
    assert errors == 3 and [getattr(e, "code", None) for e in decoded[1:]] == [
        "malformed-json",
        "not-a-partial",
        "not-a-partial",
    ]
    assert groups == {"": [ev]}


# --- configuration ------------------------------------------------------------------------------------

FIVM = {
    "relations": {"R": [{"a": "int"}, {"b": "int"}], "S": [{"b": "int"}, {"c": "int"}]},
    "ring": "count",
}


def test_sharded_config_defaults_and_coordinator():
    service = load_service("fivm")
    config = build_config(service, {**FIVM, "shard_by": "a", "input_topic": "x", "output_topic": "y"})
    assert (config.broadcast_topic, config.global_topic) == ("x.broadcast", "y.global")
    definition, derived, _codec = coordinator_of(service, config)
    assert (derived.input_topic, derived.output_topic, derived.shard_by) == ("y", "y.global", None)
    assert definition.name == "fivm.coordinator"
    with pytest.raises(ConfigError, match="needs a sharded config"):
        coordinator_of(service, build_config(service, FIVM))


@pytest.mark.parametrize(
    ("service", "raw", "reason"),
    [
        ("fivm", {**FIVM, "shard_by": "a", "key_field": "k"}, "exclude each other"),
        ("fivm", {**FIVM, "shard_by": "zz"}, "column of no relation"),
        ("fivm", {**FIVM, "shard_by": "a", "updatable": ["R"]}, "static relations"),
        ("reference", {"shard_by": "item"}, "cannot be sharded"),
    ],
)
def test_sharded_configs_refused(service, raw, reason):
    with pytest.raises(ConfigError, match=reason):
        build_config(load_service(service), raw)
