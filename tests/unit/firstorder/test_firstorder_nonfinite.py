"""Sums that stop being finite (a product overflowing to ±inf, inf - inf = NaN) and signed zeros survive
a snapshot, a checkpoint's entries and a killed worker exactly: the restored engine continues like the
one that never stopped. The published result writes a non-finite sum as null (JSON has no inf or NaN;
a sum is never null otherwise: it skips rows whose expression is null)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import orjson
import pytest
from helpers_worker import crash_then_resume
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.config import build_config
from ivmstream.events import UpdateEvent
from ivmstream.events.floats import state_bytes
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.service import load_service
from ivmstream.services.firstorder.engine import make_engine
from ivmstream.state import MemoryStore
from tests.unit.entry_store import fold_changes

BIG = 1e308  # finite; BIG * BIG overflows to inf, BIG * -BIG to -inf, and their sum is NaN
CONFIG = {
    "relations": {"r": {"b": "int", "x": "float"}, "s": {"b": "int", "y": "float"}},
    "free": ["b"],
    "aggregates": {"xy": "x * y", "x": "x"},
}
# group 1: inf; group 2: -inf; group 3: NaN (inf + -inf); group 4: -0.0 values, a zero sum
STREAM = [
    ("s", {"b": 1, "y": BIG}, 1),
    ("r", {"b": 1, "x": BIG}, 1),
    ("s", {"b": 2, "y": -BIG}, 1),
    ("r", {"b": 2, "x": BIG}, 1),
    ("s", {"b": 3, "y": BIG}, 1),
    ("s", {"b": 3, "y": -BIG}, 1),
    ("r", {"b": 3, "x": BIG}, 1),
    ("s", {"b": 4, "y": -0.0}, 1),
    ("r", {"b": 4, "x": -0.0}, 1),
]
# updates touching every group after the cut: each sum stays what it was (inf + finite is inf)
LATER = [
    ("r", {"b": 1, "x": 2.0}, 1),
    ("r", {"b": 2, "x": 2.0}, 1),
    ("r", {"b": 3, "x": 2.0}, 1),
    ("r", {"b": 4, "x": 2.0}, 1),
    ("r", {"b": 1, "x": 2.0}, -1),
]
# by hand, IEEE arithmetic: group -> (count, xy, x) after STREAM + LATER. first-order adds each delta
# to the sums, so group 1's xy is inf + inf - inf = NaN; recompute sums the join again: inf.
EXPECTED = {
    1: (1, math.inf, BIG),
    2: (2, -math.inf, BIG),  # BIG + 2.0 rounds to BIG
    3: (4, math.nan, math.inf),  # BIG + BIG overflows
    4: (2, 0.0, 2.0),
}
FIRST_ORDER_GROUP_1 = (1, math.nan, BIG)


def _engine(strategy: str) -> Any:
    return make_engine(build_config(load_service("firstorder"), {**CONFIG, "strategy": strategy}).options)


def _apply(engine: Any, events: list[tuple[str, dict[str, Any], int]]) -> None:
    engine.apply([UpdateEvent(rel, row, delta) for rel, row, delta in events])


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN, and -0.0 told from 0.0."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b


def _groups(engine: Any) -> dict[int, tuple[Any, ...]]:
    return {g["key"]["b"]: (g["count"], g["sums"]["xy"], g["sums"]["x"]) for g in engine.result()["groups"]}


def _check(engine: Any, strategy: str) -> None:
    got = _groups(engine)
    expected = {**EXPECTED, 1: FIRST_ORDER_GROUP_1} if strategy == "first-order" else EXPECTED
    assert sorted(got) == sorted(expected)
    for b, want in expected.items():
        assert all(_same(g, w) for g, w in zip(got[b], want, strict=True)), (b, got[b], want)


@pytest.mark.parametrize("strategy", ["first-order", "recompute"])
def test_a_snapshot_keeps_non_finite_sums_and_the_restored_engine_continues(strategy: str) -> None:
    engine = _engine(strategy)
    _apply(engine, STREAM)
    restored = _engine(strategy)
    restored.restore(engine.snapshot())
    _apply(restored, LATER)
    _check(restored, strategy)
    uninterrupted = _engine(strategy)
    _apply(uninterrupted, STREAM + LATER)
    _check(uninterrupted, strategy)


@pytest.mark.parametrize("strategy", ["first-order", "recompute"])
def test_checkpoint_entries_keep_non_finite_sums_and_the_restored_engine_continues(strategy: str) -> None:
    engine = _engine(strategy)
    store: dict[tuple[str, bytes], bytes] = {}

    def checkpoint() -> None:
        fold_changes(store, engine.changed_entries())

    _apply(engine, STREAM[:4])
    checkpoint()  # the first: every entry
    _apply(engine, STREAM[4:])
    checkpoint()  # the touched ones
    restored = _engine(strategy)
    restored.restore_entries((name, key, value) for (name, key), value in store.items())
    _apply(restored, LATER)
    _check(restored, strategy)
    uninterrupted = _engine(strategy)
    _apply(uninterrupted, STREAM + LATER)
    _check(uninterrupted, strategy)
    if strategy == "first-order":
        assert store[("g", b"[1]")] == b'[1,{"$float":"inf"},1e+308]'
        assert store[("g", b"[3]")] == b'[2,{"$float":"nan"},{"$float":"inf"}]'


def test_entries_of_finite_values_keep_their_bytes_and_stored_ones_restore() -> None:
    """Entries as the format writes them without a tag (a stored checkpoint) restore, and finite state
    is written in those same bytes."""
    written = [
        ("b", b'["r",[1,2.5]]', b"1"),
        ("b", b'["s",[1,0.0]]', b"2"),  # -0.0 and 0.0: one entry, written 0.0
        ("b", b'["s",[1,4.0]]', b"1"),
        ("g", b"[1]", b"[3,10.0,7.5]"),
    ]
    engine = _engine("first-order")
    reference = _engine("first-order")
    scalars = [(n, k, v) for n, k, v in reference.all_entries() if n == "s"]
    scalars = [(n, k, b"3" if k == b"applied" else v) for n, k, v in scalars]
    engine.restore_entries(written + scalars)
    assert _groups(engine) == {1: (3, 10.0, 7.5)}
    assert sorted(e for e in engine.all_entries() if e[0] != "s") == sorted(written)
    _apply(engine, [("r", {"b": 1, "x": 1.0}, 1)])
    assert _groups(engine) == {1: (6, 14.0, 10.5)}  # 2.5 * (-0.0 * 2 + 4.0) + 1.0 * 4.0 = 14.0


Events = list[tuple[str, dict[str, Any], int]]


def _published(events: Events, crash_after: int | None) -> list[dict[str, Any]]:
    cluster = InMemoryCluster()
    cluster.create_topic("in", 1)
    for rel, row, delta in events:
        cluster.produce("in", orjson.dumps({"relation": rel, "row": row, "delta": delta}), None)
    service = load_service("firstorder")
    config = build_config(
        service, {**CONFIG, "input_topic": "in", "output_topic": "out", "dlq_topic": "dlq", "batch_size": 3}
    )
    config = dataclasses.replace(config, checkpoint_interval=0.0)  # a checkpoint after every batch
    crash_then_resume(service, config, cluster, MemoryStore(), crash_after)
    assert cluster.values("dlq") == []
    records = [orjson.loads(v or b"null") for v in cluster.values("out")]
    return [r["result"] for r in records]


@pytest.mark.parametrize("crash_after", [2, 3, 4])
def test_a_killed_worker_publishes_what_an_uninterrupted_one_does(crash_after: int) -> None:
    """Killed after a checkpoint that holds inf, -inf and NaN sums, the restarted worker publishes the
    uninterrupted run's last result; each non-finite sum is published as null."""
    events = STREAM + LATER
    uninterrupted = _published(events, None)
    restarted = _published(events, crash_after)
    assert restarted[-1] == uninterrupted[-1]
    last = {g["key"]["b"]: (g["count"], g["sums"]["xy"], g["sums"]["x"]) for g in uninterrupted[-1]["groups"]}
    assert last == {1: (1, None, BIG), 2: (2, None, BIG + 2.0), 3: (4, None, None), 4: (2, 0.0, 2.0)}


def test_non_finite_numbers_in_events_are_dead_letters() -> None:
    """inf and NaN reach the state only through arithmetic: the intake refuses them in events, each a
    dead letter with its reason, and the partition goes on."""
    cluster = InMemoryCluster()
    cluster.create_topic("in", 1)
    refused = [
        b'{"relation":"r","row":{"b":1,"x":1e999},"delta":1}',
        b'{"relation":"r","row":{"b":1,"x":NaN},"delta":1}',
        b'{"relation":"r","row":{"b":1,"x":-Infinity},"delta":1}',
    ]
    for value in [*refused, b'{"relation":"s","row":{"b":1,"y":2.0},"delta":1}']:
        cluster.produce("in", value, None)
    cluster.produce("in", b'{"relation":"r","row":{"b":1,"x":1.5},"delta":1}', None)
    service = load_service("firstorder")
    config = build_config(service, {**CONFIG, "input_topic": "in", "output_topic": "out", "dlq_topic": "dlq"})
    run_to_end(Worker(service, config, cluster, MemoryStore(), group="g"))
    letters = cluster.messages("dlq")
    assert [m.value() for m in letters] == refused
    assert all(dict(m.headers() or [])["ivmstream.reason"] == b"non-finite-number" for m in letters)
    last = orjson.loads(cluster.values("out")[-1] or b"null")["result"]
    assert last == {"groups": [{"key": {"b": 1}, "count": 1, "sums": {"xy": 3.0, "x": 1.5}}]}


HUGE = st.sampled_from([BIG, -BIG, 1.5e308, -1.5e308, -0.0, 0.0, 1.0, -2.5])


@st.composite
def overflowing_streams(draw: st.DrawFn) -> list[tuple[str, dict[str, Any], int]]:
    """Inserts and deletes of held tuples over few groups, with values whose products and sums overflow."""
    held: list[tuple[str, dict[str, Any]]] = []
    out: list[tuple[str, dict[str, Any], int]] = []
    for _ in range(draw(st.integers(1, 30))):
        if held and draw(st.integers(0, 3)) == 0:  # a delete, one time in four
            rel, row = held.pop(draw(st.integers(0, len(held) - 1)))
            out.append((rel, row, -1))
        else:
            rel = draw(st.sampled_from(["r", "s"]))
            row = {"b": draw(st.integers(1, 3)), ("x" if rel == "r" else "y"): draw(HUGE)}
            held.append((rel, row))
            out.append((rel, row, 1))
    return out


@pytest.mark.parametrize("strategy", ["first-order", "recompute"])
@settings(max_examples=40, deadline=None)
@given(stream=overflowing_streams(), data=st.data())
def test_restored_engines_continue_exactly_on_overflowing_streams(
    strategy: str, stream: list[tuple[str, dict[str, Any], int]], data: st.DataObject
) -> None:
    """At a random cut, an engine restored from its folded checkpoints and one restored from its
    snapshot apply the rest and hold the live engine's sums exactly (NaN, ±inf, -0.0), entry for entry."""
    cut = data.draw(st.integers(0, len(stream)))
    live = _engine(strategy)
    store: dict[tuple[str, bytes], bytes] = {}
    for i, event in enumerate(stream[:cut]):
        _apply(live, [event])
        if i % 3 == 0:
            fold_changes(store, live.changed_entries())
    fold_changes(store, live.changed_entries())
    from_entries, from_snapshot = _engine(strategy), _engine(strategy)
    from_entries.restore_entries((name, key, value) for (name, key), value in store.items())
    from_snapshot.restore(live.snapshot())
    for engine in (live, from_entries, from_snapshot):
        _apply(engine, stream[cut:])
    want = state_bytes(live.result())
    assert state_bytes(from_entries.result()) == want
    assert state_bytes(from_snapshot.result()) == want
    assert sorted(from_entries.all_entries()) == sorted(live.all_entries())
