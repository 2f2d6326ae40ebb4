"""Strategy ``auto`` (docs/algorithms/vwap.md §6.5): answers stay exact across plan switches, the
choice survives snapshots and incremental state unchanged, and the cost model's choices follow the
shapes it was fitted for."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.vwap import auto
from services.vwap.catalog import QUERIES
from services.vwap.engine import create_engine
from shared.events import UpdateEvent
from shared.events.orderbook import OrderBookAdaptor
from tests.unit.vwap.book_streams import answer, book_events, cut, op

DATA = Path(__file__).resolve().parents[3] / "services" / "vwap" / "data"
MODELLED = sorted(auto.MODELS)


def flip():
    """A chooser that moves to the next candidate after every batch, so every batch boundary is a
    switch: the rebuild from the live book is what is under test, not the cost model."""

    def choose(query, running, batch, touched, domain):
        names = auto.candidates(query)
        if running is None:
            return names[0], "first"
        return names[(names.index(running) + 1) % len(names)], "next"

    return mock.patch.object(auto, "choose", choose)


@pytest.mark.parametrize("query", MODELLED)
@given(ops=st.lists(op, max_size=50), sizes=st.lists(st.integers(1, 20), min_size=1, max_size=4))
def test_answers_stay_exact_across_switches(query, ops, sizes):
    with flip():
        check_switches(query, ops, sizes)


def check_switches(query, ops, sizes):
    engine = create_engine(query, "auto")
    oracle = create_engine(query, "recompute")
    seen = {engine.running}
    for batch in cut(book_events(ops, asks=True), sizes):
        got = [(r.index, r.code) for r in engine.apply(batch)]
        want = [(i, r.code) for i, ev in enumerate(batch) for r in oracle.apply([ev])]
        assert got == want
        assert answer(engine) == answer(oracle), (query, engine.running)
        seen.add(engine.running)
    if len(ops) > 30:
        assert len(seen) == min(len(auto.candidates(query)), 1 + engine.switches)


@pytest.mark.parametrize("query", MODELLED)
@given(
    ops=st.lists(op, min_size=2, max_size=50),
    at=st.integers(0, 50),
    sizes=st.lists(st.integers(1, 9), min_size=1),
)
def test_snapshot_and_entries_restore_the_choice(query, ops, at, sizes):
    with flip():
        check_restores(query, ops, at, sizes)


def check_restores(query, ops, at, sizes):
    batches = cut(book_events(ops, asks=True), sizes)
    at = min(at, len(batches))
    straight = create_engine(query, "auto")
    for batch in batches:
        straight.apply(batch)
    first = create_engine(query, "auto")
    for batch in batches[:at]:
        first.apply(batch)
    from_snapshot = create_engine(query, "auto")
    from_snapshot.restore(first.snapshot())
    assert from_snapshot.snapshot() == first.snapshot()
    from_entries = create_engine(query, "auto")
    from_entries.restore_entries(list(first.all_entries()))
    for engine in (from_snapshot, from_entries):
        assert engine.running == first.running
        for batch in batches[at:]:
            engine.apply(batch)
        assert engine.running == straight.running
        assert engine.snapshot() == straight.snapshot()
        assert answer(engine) == answer(straight)


def test_a_snapshot_without_a_choice_decides_from_the_book():
    rpai = create_engine("vwap", "rpai")
    rpai.apply(book_events([("insert", p, 2, 1, p % 4, 0) for p in range(1, 6)]))
    engine = create_engine("vwap", "auto")
    engine.restore(rpai.snapshot())
    assert engine.running in auto.candidates("vwap")
    assert answer(engine) == answer(rpai)


def test_stats_name_the_running_plan_and_the_estimates_it_was_chosen_on():
    engine = create_engine("mst", "auto")
    engine.apply(book_events([("insert", p, 3, 1, p % 4, 0) for p in range(1, 9)]))
    stats = engine.stats()
    running = [s for s in auto.candidates("mst") if stats[f"auto_running_{s}"] == 1.0]
    assert running == [engine.running]
    costs = {s: stats[f"auto_estimate_{s}_us"] for s in auto.candidates("mst")}
    assert costs == auto.estimates("mst", 8, 8, 8)
    assert stats["auto_domain"] == 8 and stats["auto_batch_events"] == 8
    assert engine.auto_reason.startswith(f"{engine.running} (")
    assert "at batch 8, 8 touched, domain 8; estimated" in engine.auto_reason


def trace(n: int, book: str = "both") -> list[UpdateEvent]:
    adaptor = OrderBookAdaptor(book=book)
    out = []
    with open(DATA / "finance-standard.csv") as fh:
        for line in fh:
            out += [UpdateEvent(e["relation"], e["row"], e["delta"], None) for e in adaptor.feed_line(line)]
            if len(out) >= n:
                return out[:n]
    return out


def test_the_model_switches_psp_with_the_batch_size_and_stays_exact():
    """On the sample trace, events one at a time make the DBToaster-style plan's scan over the distinct
    volumes the cost (rpai runs); batches of 1,600 make the trees' per-event walks the cost (dbtoaster
    runs); back to single events, rpai again. The answer equals a fixed plan's after every phase."""
    events = trace(5020)
    engine = create_engine("psp", "auto")
    oracle = create_engine("psp", "rpai")
    plans = []
    for phase, (lo, hi, size) in enumerate([(0, 800, 1), (800, 4000, 1600), (4000, 5020, 1)]):
        for i in range(lo, hi, size):
            engine.apply(events[i : min(i + size, hi)])
        oracle.apply(events[lo:hi])
        assert answer(engine) == answer(oracle), phase
        plans.append(engine.running)
    assert plans == ["rpai", "dbtoaster", "rpai"]
    assert engine.switches >= 2  # and one near the start, where a few volumes make the scan cheap


@pytest.mark.parametrize("query", [q for q in QUERIES if q not in auto.MODELS])
def test_queries_without_a_model_run_rpai(query):
    engine = create_engine(query, "auto")
    assert engine.running == auto.FIXED == "rpai"


def test_hysteresis_keeps_the_running_plan_near_the_boundary():
    costs = auto.estimates("psp", 1, 1, 100)
    better, worse = sorted(costs, key=lambda s: costs[s])
    if costs[better] > auto.SWITCH_RATIO * costs[worse]:
        assert auto.choose("psp", worse, 1, 1, 100)[0] == worse
    for d in range(1, 400, 7):  # from nothing, the cheapest estimate wins outright
        assert d * 7 // 8 <= auto.coarse(d) <= d
        est = auto.estimates("psp", 1, 1, auto.coarse(d))  # decided on the coarse domain size
        assert auto.choose("psp", None, 1, 1, d)[0] == min(est, key=lambda s: (est[s], s))
