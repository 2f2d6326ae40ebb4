"""Snapshots and incremental state entries (docs/fivm/algorithm.md §4): restoring mid-stream gives an
engine that continues exactly like the original (same results, same snapshot bytes, also for float
sums whose value depends on the order of additions); restoring from entries in any order equals
restoring from a snapshot; the folded ``changed_entries()`` log equals ``all_entries()``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.engine import EngineError
from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.engine import FivmEngine
from tests.unit.entry_store import fold_changes
from tests.unit.fivm.fivm_oracle import acyclic_schema, event_batches, relation_columns
from tests.unit.fivm.state_checks import check_checkpoints_fold, check_restore_mid_stream

TRIANGLE = {
    "relations": {
        "R": [{"A": "int"}, {"B": "int"}],
        "S": [{"B": "int"}, {"C": "int"}],
        "T": [{"C": "int"}, {"A": "int"}],
    },
    "indicators": True,
}


@st.composite
def scenario(draw: st.DrawFn) -> tuple[dict[str, Any], list[list[UpdateEvent]]]:
    """A random query (acyclic or the triangle with indicators; count or a float sum; maybe group-by,
    maybe fivm-one with static relations loading first) and a stream with non-dyadic float values."""
    config = draw(st.sampled_from([None, TRIANGLE]))
    if config is None:
        config = draw(acyclic_schema(components=draw(st.integers(1, 2))))
    config = dict(config)
    types = {next(iter(c)): next(iter(c.values())) for spec in config["relations"].values() for c in spec}
    floats = sorted(v for v, t in types.items() if t == "float")
    if floats and draw(st.booleans()):
        config.update(ring="sum", sum=[draw(st.sampled_from(floats))])
    free_choices = sorted(v for v in types if v not in config.get("sum", []))
    config["free"] = draw(st.lists(st.sampled_from(free_choices), max_size=1)) if free_choices else []
    config["debug"] = draw(st.booleans())
    rels = list(relation_columns(config))
    batches: list[list[UpdateEvent]] = []
    if len(rels) > 1 and draw(st.booleans()):
        big = draw(st.sampled_from(rels))
        config.update(strategy="fivm-one", updatable=[big])
        static = [r for r in rels if r != big]
        batches += draw(event_batches(config, relations=static, max_batches=3, float_step=0.1))
        batches += draw(event_batches(config, relations=[big], float_step=0.1))
    else:
        batches += draw(event_batches(config, max_batches=8, float_step=0.1))
    return config, batches


@settings(max_examples=100)
@given(case=scenario(), data=st.data())
def test_restore_mid_stream_continues_identically(case: tuple[dict[str, Any], list[Any]], data: Any) -> None:
    config, batches = case
    cut = data.draw(st.integers(0, len(batches)))
    check_restore_mid_stream(config, batches, cut, data.draw(st.integers(0, 2**32)))


@settings(max_examples=100)
@given(case=scenario(), data=st.data())
def test_changed_entries_fold_into_all_entries(case: tuple[dict[str, Any], list[Any]], data: Any) -> None:
    config, batches = case
    check_checkpoints_fold(config, batches, [data.draw(st.booleans()) for _ in batches])


def test_snapshots_are_deterministic_and_refuse_another_configuration() -> None:
    config = dict(TRIANGLE, ring="count")
    events = [UpdateEvent("R", {"A": 1, "B": 2}, 1), UpdateEvent("S", {"B": 2, "C": 3}, 2)]
    a, b = FivmEngine(config), FivmEngine(config)
    a.apply(events)
    b.apply(events[:1])
    b.apply(events[1:])
    assert a.snapshot() == b.snapshot()
    other = FivmEngine(dict(config, indicators=False))
    with pytest.raises(EngineError, match="written with"):
        other.restore(a.snapshot())
    with pytest.raises(EngineError, match="snapshot"):
        other.restore(b"not json")


def test_views_dropped_at_the_seal_delete_their_keys_deleted_since_the_last_checkpoint() -> None:
    """fivm-one drops the views outside μ(τ, U) at the first update of U; a key such a view deleted
    after the last checkpoint is still stored, and the drop must delete it too."""
    config = {
        "relations": {
            "R": [{"A": "int"}, {"B": "int"}],
            "S": [{"B": "int"}, {"C": "int"}],
            "T": [{"C": "int"}, {"A": "int"}],
        },
        "ring": "count",
        "strategy": "fivm-one",
        "updatable": ["R"],
        "variable_order": {"A": {"B": {"C": {}}}},
    }
    engine = FivmEngine(config)
    store: dict[tuple[str, bytes], bytes] = {}

    def checkpoint() -> None:
        fold_changes(store, engine.changed_entries())

    t = {"C": 0, "A": 0}
    engine.apply([UpdateEvent("T", t, 1)])
    checkpoint()
    engine.apply([UpdateEvent("T", t, 1), UpdateEvent("T", t, -2)])  # T's tuple is gone again
    engine.apply([UpdateEvent("R", {"A": 0, "B": 0}, 1)])  # the seal
    checkpoint()
    assert store == {(n, k): v for n, k, v in engine.all_entries()}
