"""A batch given as columns (``FivmEngine.apply_columns``, what the worker hands a columnar engine) must
leave the engine as ``apply`` of the same events does, and as the events applied one at a time: the same
refusals, views, result and checkpoint entries, whatever mix of good and bad values, zeros, deletes and
multiplicities, static relations and loading it holds."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent as Ev
from ivmstream.events.columns import event_columns
from ivmstream.services.fivm.engine import FivmEngine

RELATIONS = {"A": ["k", "x"], "B": ["k", "y"], "C": ["k"]}
CONFIGS = [
    {"relations": RELATIONS, "ring": "count", "free": ["x"]},
    {"relations": RELATIONS, "ring": "covariance", "features": ["x", "y"]},
    {"relations": RELATIONS, "ring": "covariance", "features": ["x", "y"], "updatable": ["A", "B"]},
]

GOOD = st.sampled_from([0.0, -0.0, 1.0, 2.5, -3.0, 1e308])
BAD = st.sampled_from([math.nan, math.inf, -math.inf, 2, True, "1", None])
VALUE = st.one_of(GOOD, GOOD, GOOD, GOOD, BAD)
DELTA = st.one_of(st.just(1), st.just(1), st.just(1), st.integers(-3, 3), st.just(True))
# Every row of a relation in one batch holds the same columns (the codec checks the names): a batch's
# shape per relation is its declared columns, one missing or one extra.
SHAPE = st.sampled_from(["declared"] * 6 + ["missing", "extra"])


@st.composite
def batch(draw: st.DrawFn) -> list[Ev]:
    clean = draw(st.booleans())  # half the batches hold no row to refuse (the columns' own path)
    shapes = {rel: "declared" if clean else draw(SHAPE) for rel in RELATIONS}
    value, delta = (GOOD, st.sampled_from([1, 1, 1, 2, -1])) if clean else (VALUE, DELTA)
    out = []
    for _ in range(draw(st.integers(0, 30))):
        rel = draw(st.sampled_from(["A", "A", "B", "B", "C"]))
        row: dict[str, Any] = {c: draw(value) for c in RELATIONS[rel]}
        if shapes[rel] == "missing":
            del row["k"]
        elif shapes[rel] == "extra":
            row["z"] = 1.0
        out.append(Ev(rel, row, draw(delta)))
    return out


def state(engine: FivmEngine) -> dict[str, dict[Any, Any]]:
    return {name: dict(view.data) for name, view in engine.maint.views.items()}


@pytest.mark.filterwarnings(
    "ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning"
)  # 1e308 squared
@settings(max_examples=100, deadline=None)
@given(st.sampled_from(CONFIGS), st.lists(batch(), max_size=4))
def test_a_batch_as_columns_equals_its_events(config: dict[str, Any], batches: list[list[Ev]]) -> None:
    columns = FivmEngine(config)
    events = FivmEngine(config)
    single = FivmEngine(config)
    for engine in (columns, events, single):
        engine.all_entries()  # checkpointing: changes are logged from here on
    for evs in batches:
        refused = [(r.index, r.code) for r in columns.apply_columns(event_columns(evs))]
        assert refused == [(r.index, r.code) for r in events.apply(evs)]
        assert refused == [(i, r.code) for i, ev in enumerate(evs) for r in single.apply([ev])]
        # repr: the same floats bit for bit, NaN included (which never equals itself)
        assert repr(state(columns)) == repr(state(events))
        assert repr(columns.result()) == repr(events.result())
        assert columns.changed_entries() == events.changed_entries()
        if config["ring"] == "count":  # exact: one at a time sums the same (floats may round otherwise)
            assert state(single) == state(columns)
            assert single.result() == columns.result()
    assert sorted(columns.all_entries()) == sorted(events.all_entries())


def test_the_columnar_path_takes_clean_batches_without_events() -> None:
    """A batch of declared, finite float rows is summed from its columns (the per-event ``apply`` is
    not called), and a batch with a row to refuse goes through ``apply``."""
    engine = FivmEngine(CONFIGS[1])
    calls: list[int] = []
    apply = engine.apply
    engine.apply = lambda evs: calls.append(len(evs)) or apply(evs)  # type: ignore[method-assign]
    good = [
        Ev("A", {"k": 1.0, "x": 2.0}, 1),
        Ev("B", {"k": 1.0, "y": -0.0}, 2),
        Ev("C", {"k": 1.0}, 1),
        Ev("A", {"k": 1.0, "x": 2.0}, 1),
    ]
    assert engine.apply_columns(event_columns(good)) == []
    assert calls == []
    assert engine.result()["value"]["count"] == 4  # A's (1.0, 2.0) twice, B's tuple twice, C's once
    bad = [Ev("A", {"k": 1.0, "x": math.nan}, 1)]
    assert [r.code for r in engine.apply_columns(event_columns(bad))] == [r.code for r in apply(bad)] != []
    assert calls == [1]
