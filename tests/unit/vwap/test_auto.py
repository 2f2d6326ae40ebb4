"""Strategy ``auto`` (docs/vwap/algorithm.md §6.5): answers stay exact across plan switches, the
choice survives snapshots and incremental state unchanged, and the cost model's choices follow the
shapes it was fitted for."""

from __future__ import annotations

import contextlib
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from ivmstream.events.orderbook import OrderBookAdaptor
from ivmstream.services.vwap import auto
from ivmstream.services.vwap.catalog import QUERIES
from ivmstream.services.vwap.engine import create_engine
from tests.unit.vwap.book_streams import answer, book_events, cut, op

DATA = Path(__file__).resolve().parents[3] / "services" / "vwap" / "data"
MODELLED = sorted(auto.MODELS)


@contextlib.contextmanager
def flip(first: int = 0):
    """A chooser that moves to the next candidate after every batch, so every batch boundary is a
    switch: the rebuild from the live book is what is under test, not the cost model. Its choices are
    not a function of the shape, so the engine may not skip a decision on an unchanged one: an empty
    coarse range turns that off."""

    def decide(query, running, batch, touched, domain, tuples, credit):
        names = auto.candidates(query)
        if running is None:
            return names[first], "first", 0
        return names[(names.index(running) + 1) % len(names)], "next", credit + 1

    with mock.patch.object(auto, "decide", decide), mock.patch.object(auto, "coarse_range", lambda d: (0, 0)):
        yield


@pytest.mark.parametrize("query", MODELLED)
@given(ops=st.lists(op, max_size=50), sizes=st.lists(st.integers(1, 20), min_size=1, max_size=4))
def test_answers_stay_exact_across_switches(query, ops, sizes):
    with flip():
        check_switches(query, ops, sizes)


@pytest.mark.parametrize("query", MODELLED)
@settings(max_examples=40)
@given(ops=st.lists(op, max_size=40), sizes=st.lists(st.integers(1, 20), min_size=1, max_size=4))
def test_a_first_batch_fed_to_a_plan_without_a_bulk_build_stays_exact(query, ops, sizes):
    """The last candidate (the DBToaster-style plan) has no bulk build: a batch that starts on an empty
    book is fed to it as the batch's valid updates."""
    with flip(first=-1):
        check_switches(query, ops, sizes, first=-1)


def check_switches(query, ops, sizes, first=0):
    """Every batch that starts on a live book and changes it switches plans; one that starts on an empty
    book goes to the ledger and the chosen plan is built from the book it leaves."""
    engine = create_engine(query, "auto")
    oracle = create_engine(query, "recompute")
    switches = 0
    for batch in cut(book_events(ops, asks=True), sizes):
        live = oracle.live_tuples > 0
        got = [(r.index, r.code) for r in engine.apply(batch)]
        want = [(i, r.code) for i, ev in enumerate(batch) for r in oracle.apply([ev])]
        assert got == want
        assert answer(engine) == answer(oracle), (query, engine.running)
        switches += live and len(want) < len(batch)
        if not live and len(want) < len(batch):
            assert engine.running == auto.candidates(query)[first]
    assert engine.switches == switches


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
    """On the sample trace, events one at a time over a few hundred distinct volumes make the
    DBToaster-style plan's scan over them the cost (rpai runs); batches of 1,400 make the trees'
    per-event walks the cost (dbtoaster runs); back to single events, rpai again. The answer equals a
    fixed plan's after every phase."""
    events = trace(5020)
    engine = create_engine("psp", "auto")
    oracle = create_engine("psp", "rpai")
    plans = []
    for phase, (lo, hi, size) in enumerate([(0, 1200, 1), (1200, 4000, 1400), (4000, 5020, 1)]):
        for i in range(lo, hi, size):
            engine.apply(events[i : min(i + size, hi)])
        oracle.apply(events[lo:hi])
        assert answer(engine) == answer(oracle), phase
        plans.append(engine.running)
    assert plans == ["rpai", "dbtoaster", "rpai"]
    # and one more near the start, where a few volumes make the scan the cheaper
    assert engine.switches == 3


@pytest.mark.parametrize("query", [q for q in QUERIES if q not in auto.MODELS])
def test_queries_without_a_model_run_rpai(query):
    engine = create_engine(query, "auto")
    assert engine.running == auto.FIXED == "rpai"


def test_near_the_boundary_the_running_plan_is_kept_and_from_nothing_the_cheapest_wins():
    for query in MODELLED:
        for batch in (1, 100, 2000):
            for d in range(1, 3000, 41):
                assert d * 31 // 32 <= auto.coarse(d) <= d
                costs = auto.estimates(query, batch, batch, auto.coarse(d))  # decided on the coarse size
                best = min(costs, key=lambda s: (costs[s], s))
                assert auto.decide(query, None, batch, batch, d, 0, 0) == (best, "cheapest", 0)
                for other in costs:
                    if other != best and costs[best] >= auto.NEAR * costs[other]:
                        assert auto.decide(query, other, batch, batch, d, 10**6, 7) == (other, "kept", 0)


@pytest.mark.parametrize("tuples", [100, 4_000, 100_000])
def test_a_cheaper_plan_runs_once_the_credit_and_the_look_ahead_cover_its_rebuild(tuples):
    """sq1 at batch 2,000 over 553 levels: rpai is estimated cheaper than the DBToaster-style plan by more
    than the band. The extra cost accrued while staying never exceeds the rebuild by more than a batch's
    difference, and staying is never chosen once the look-ahead alone covers the rebuild."""
    costs = auto.estimates("sq1", 2000, 2000, auto.coarse(553))
    assert costs["rpai"] < auto.NEAR * costs["dbtoaster"]
    excess = costs["dbtoaster"] - costs["rpai"]
    rebuild = auto.rebuild_cost(tuples)
    ahead = excess * auto.HORIZON * tuples / 2000
    running, credit, stayed = "dbtoaster", 0, 0
    while running == "dbtoaster":
        running, why, credit = auto.decide("sq1", running, 2000, 2000, 553, tuples, credit)
        stayed += running == "dbtoaster"
        assert stayed < 10_000
    assert why == "switched" and credit == 0
    assert stayed * excess <= max(0.0, rebuild - ahead) + 1
    assert (stayed + 1) * excess + 1 >= rebuild - ahead


def test_a_first_batch_on_an_empty_book_builds_the_plan_for_the_book_it_leaves():
    """sq1, the first 1,000 bid events of the sample trace in one batch: the shape (one large batch, a
    few hundred levels) makes the DBToaster-style read the cheaper, and that plan is built from the
    book directly: no plan chosen blind before the batch is rebuilt after it."""
    events = trace(1000, book="bids")
    engine = create_engine("sq1", "auto")
    engine.apply(events)
    costs = auto.estimates("sq1", 1000, engine.shape[1], engine.stats()["auto_domain"])
    assert engine.running == min(costs, key=lambda s: costs[s]) == "dbtoaster"
    assert engine.switches == 0
    oracle = create_engine("sq1", "rpai")
    oracle.apply(events)
    assert answer(engine) == answer(oracle)


def test_the_credit_survives_snapshots_and_entries():
    engine = create_engine("psp", "auto")
    engine.apply(trace(300))
    engine.credit = 1234
    for restore, data in (("restore", engine.snapshot()), ("restore_entries", list(engine.all_entries()))):
        other = create_engine("psp", "auto")
        getattr(other, restore)(data)
        assert (other.running, other.shape, other.credit) == (engine.running, engine.shape, 1234)
