"""Runs of one all-float relation are taken in whole-run passes (docs/fivm/algorithm.md §1.2): a batch
must give the same views and the same refusals as the same events applied one at a time, which go
through the per-event checks, whatever mix of good and bad values, zeros and multiplicities it holds."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent as Ev
from ivmstream.services.fivm.engine import FivmEngine

# Counts keep every comparison exact; 1e308 twice in a run overflows the run's finiteness check.
CONFIG = {"relations": {"A": ["k", "x"], "B": ["k", "y"]}, "ring": "count", "free": ["x"]}

GOOD = st.sampled_from([0.0, -0.0, 1.0, 2.5, -3.0, 1e308])
BAD = st.sampled_from([math.nan, math.inf, -math.inf, 2, True, "1", None])
VALUE = st.one_of(GOOD, GOOD, GOOD, BAD)
DELTA = st.one_of(st.just(1), st.just(1), st.integers(-3, 3), st.just(True))


@st.composite
def event(draw: st.DrawFn) -> Ev:
    rel = draw(st.sampled_from(["A", "A", "A", "B"]))
    col = "x" if rel == "A" else "y"
    row: dict[str, Any] = {"k": draw(VALUE), col: draw(VALUE)}
    shape = draw(st.integers(0, 12))
    if shape == 0:
        del row["k"]
    elif shape == 1:
        row["z"] = 1.0
    return Ev(rel, row, draw(DELTA))


def state(engine: FivmEngine) -> dict[str, dict[Any, Any]]:
    return {name: dict(view.data) for name, view in engine.maint.views.items()}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(event(), max_size=30), max_size=4))
def test_a_batch_equals_its_events_one_at_a_time(batches: list[list[Ev]]) -> None:
    whole = FivmEngine(CONFIG)
    single = FivmEngine(CONFIG)
    for batch in batches:
        refused = [(r.index, r.code) for r in whole.apply(batch)]
        one_by_one = [(i, r.code) for i, ev in enumerate(batch) for r in single.apply([ev])]
        assert refused == one_by_one
        assert state(whole) == state(single)
        assert whole.result() == single.result()
    for data in state(whole).values():
        assert all(math.copysign(1.0, v) > 0 for key in data for v in key if v == 0.0)  # no -0.0 stored
