"""Incremental checkpoints of the firstorder engines: a checkpoint after one update writes that tuple's
entry, its group's and the counters, whatever the state holds; checkpoints folded into a store after
randomized batches (inserts, deletes, duplicates, refused deletes, groups emptied) hold exactly the
engine's entries, and an engine restored from the store, or from a snapshot, continues like the live one."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from tests.unit.entry_store import fold_changes
from tests.unit.firstorder.test_firstorder_engine import CASES, _engine, streams


def _event(name: str, rel: str, tup: tuple[Any, ...], delta: int) -> UpdateEvent:
    return UpdateEvent(rel, dict(zip(CASES[name].config["relations"][rel], tup, strict=True)), delta)


@pytest.mark.parametrize("strategy", ["first-order", "recompute"])
def test_a_checkpoint_after_one_update_writes_what_it_touched(strategy: str) -> None:
    engine = _engine(CASES["gap"], strategy)
    engine.apply(
        [UpdateEvent("r", {"b": b, "p": float(i), "v": 1}, 1) for b in range(20) for i in range(10)]
        + [UpdateEvent("s", {"b": b, "q": float(i) + 10, "w": 2}, 1) for b in range(20) for i in range(10)]
    )
    assert engine.pending_changes() == 0  # nothing logged before a checkpoint takes the state
    first = engine.changed_entries()  # the first checkpoint: every entry
    groups = 20 if strategy == "first-order" else 0
    assert len(first) == 400 + groups + 2
    engine.apply([UpdateEvent("r", {"b": 3, "p": 100.0, "v": 1}, 1)])
    changes = engine.changed_entries()
    assert sorted((name, key) for name, key, _v in changes) == sorted(
        [("b", b'["r",[3,100.0,1]]'), ("s", b"applied"), ("s", b"query")]
        + ([("g", b"[3]")] if strategy == "first-order" else [])
    )
    assert engine.pending_changes() == 0
    assert [(n, k) for n, k, _v in engine.changed_entries()] == [("s", b"query"), ("s", b"applied")]


def test_entries_are_refused_by_another_query() -> None:
    entries = list(_engine(CASES["gap"], "first-order").all_entries())
    with pytest.raises(ValueError, match="written for"):
        _engine(CASES["gap"], "recompute").restore_entries(entries)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("strategy", ["first-order", "recompute"])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_checkpoints_fold_into_the_engines_entries(name: str, strategy: str, data: st.DataObject) -> None:
    stream = data.draw(streams(CASES[name]))
    cuts = data.draw(st.lists(st.booleans(), min_size=len(stream), max_size=len(stream)))
    engine = _engine(CASES[name], strategy)
    store: dict[tuple[str, bytes], bytes] = {}
    for i, ((rel, tup, delta), checkpoint) in enumerate(zip(stream, cuts, strict=True)):
        engine.apply([_event(name, rel, tup, delta)])
        if not checkpoint:
            continue  # changes accumulate until the next checkpoint
        fold_changes(store, engine.changed_entries())
        assert store == {(n, k): v for n, k, v in engine.all_entries()}
        entries = [(n, k, v) for (n, k), v in store.items()]
        random.Random(i).shuffle(entries)
        restored = _engine(CASES[name], strategy)
        restored.restore_entries(entries)
        assert restored.snapshot() == engine.snapshot()
        assert restored.result() == engine.result()
        from_snapshot = _engine(CASES[name], strategy)
        from_snapshot.restore(engine.snapshot())
        assert from_snapshot.pending_changes() == 0
        engine = restored  # the restored engine continues, its log started empty
