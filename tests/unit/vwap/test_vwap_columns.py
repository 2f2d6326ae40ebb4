"""The vwap engine's columnar entry (``VwapEngine.apply_columns``) against its per-event entry and the
brute-force oracle: the ledger loop read from columns (compiled and in Python) leaves what the loop over
events leaves (ledger, netted levels, change log, refusals, net change), and an engine fed columns
refuses the same events with the same reasons and reaches the same answers, gauges and checkpoint
entries as one fed events, and the answers of the ``recompute`` strategy, on streams with deletes of
absent tuples, zero volumes, brokers out of range, unknown relations and batches of both sides."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events.columns import event_columns
from ivmstream.sdk import UpdateEvent
from ivmstream.services.vwap import kernels
from ivmstream.services.vwap.engine import create_engine
from tests.unit.extension_checks import require_built
from tests.unit.vwap.book_streams import answer, book_events, cut, op

require_built(kernels.compiled, "vwap kernels", "ivmstream.services.vwap._kernels", "services/vwap/_*.c")

NAMES = ("t", "id", "broker_id", "volume", "price")
COLUMNS = {rel: NAMES for rel in ("bids", "asks")}
LOOPS = {"compiled": kernels.compiled.ledger_columns, "python": kernels.py_ledger_columns}

# Values of both signs and zero, ints whose products or sums leave 64 bits, exact decimals.
numbers = st.one_of(
    st.integers(-2, 6),
    st.sampled_from([2**62, 2**64 + 1, -(2**65)]),
    st.sampled_from([Decimal("1.5"), Decimal("2.50"), Decimal("-0.5"), Decimal("0")]),
)
deltas = st.one_of(st.integers(-3, 3), st.sampled_from([2**63, -(2**63) - 1])).filter(bool)
rows = st.fixed_dictionaries(
    {"t": st.integers(0, 2), "id": st.integers(0, 2), "broker_id": st.integers(-1, 4), "volume": numbers}
).flatmap(lambda r: st.builds(lambda p: {**r, "price": p}, numbers))
relation_events = st.lists(
    st.builds(UpdateEvent, st.sampled_from(["bids", "bids", "asks", "trades"]), rows, deltas), max_size=40
)


def _left(run: Any, bag: Any, netted: Any, changed: Any) -> Any:
    levels = None if netted is None else {rel: list(lv.items()) for rel, lv in netted.items()}
    log = None if changed is None else [(rel, list(t.items())) for rel, t in changed.items()]
    return run, {rel: list(ledger.items()) for rel, ledger in bag.items()}, levels, log


@settings(max_examples=120, deadline=None)
@given(relation_events, relation_events, st.booleans(), st.booleans(), st.sampled_from([None, 3]))
def test_the_column_loops_leave_what_the_event_loop_leaves(first, batch, netting, logged, brokers):
    """Each relation's rows through ``ledger_columns`` (compiled and Python), one relation after the
    other, against ``py_ledger_pass`` over the events: the same ledger, levels and refusals (mapped back
    to batch positions); the change log the same per relation."""
    bag: dict[str, dict[Any, int]] = {"bids": {}, "asks": {}}
    kernels.py_ledger_pass(first, bag, COLUMNS, frozenset(), None, None, None, False, None, lambda *a: None)
    reads = frozenset({"bids"})

    def by_events() -> Any:
        b, netted = copy.deepcopy(bag), {"bids": {}} if netting else None
        changed: Any = {} if logged else None
        refused: list[Any] = []
        net = kernels.py_ledger_pass(
            batch, b, COLUMNS, reads, netted, None, changed, True, brokers,
            lambda i, ev, have: refused.append((i, have)),
        )  # fmt: skip
        return _left((net, refused), b, netted, changed)

    def by_columns(loop: Any) -> Any:
        b, netted = copy.deepcopy(bag), {"bids": {}} if netting else None
        changed: Any = {} if logged else None
        refused: list[Any] = []
        net = 0
        for rel, part in event_columns(batch).relations.items():
            lists = [part.columns[c] for c in NAMES] if rel in COLUMNS else []

            def reject(i: int, ev: Any, have: Any, at: Any = part.positions) -> None:
                assert ev is None
                refused.append((at[i], have))

            net += loop(rel, part.deltas, lists, b, COLUMNS, reads, netted, changed, True, brokers, reject)
        refused.sort(key=lambda r: r[0])
        return _left((net, refused), b, netted, changed)

    want = by_events()
    for name, loop in LOOPS.items():
        got = by_columns(loop)
        assert got[:3] == want[:3], name
        if logged:  # the same tuples per relation; the relations' order is the engine's to keep
            assert sorted(got[3]) == sorted(want[3]), name


def test_the_column_loops_refuse_columns_that_do_not_fit():
    for loop in LOOPS.values():
        with pytest.raises(ValueError):  # one list short
            loop("bids", [1], [[1]] * 4, {"bids": {}}, COLUMNS, frozenset(), None, None, True, None, print)
        with pytest.raises(ValueError):  # a column shorter than the deltas
            short = [[1, 2]] * 4 + [[1]]
            loop("bids", [1, 1], short, {"bids": {}}, COLUMNS, frozenset(), None, None, True, None, print)


# Engines fed columns and events side by side: every book query on its batch plans and baselines.
PAIRS = [
    ("vwap", "auto"),
    ("vwap", "rpai"),
    ("vwap", "crosscheck"),
    ("vwap", "dbtoaster"),
    ("mst", "auto"),
    ("mst", "rpai"),
    ("psp", "auto"),
    ("psp", "dbtoaster"),
    ("sq1", "auto"),
    ("nq2", "rpai"),
]
odd = st.lists(st.tuples(st.integers(0, 999), st.sampled_from(["trades", "broker"])), max_size=3)


def _with_odd_events(events: list[UpdateEvent], odd_ones: list[tuple[int, str]]) -> list[UpdateEvent]:
    """``events`` with a few refused ones put in: a relation the query does not have, a broker out of
    range (mst's ``brokers``)."""
    out = list(events)
    for pick, kind in odd_ones:
        row = {"t": 1, "id": 9, "broker_id": 0 if kind == "trades" else 10**6, "volume": 1, "price": 2}
        out.insert(pick % (len(out) + 1), UpdateEvent("trades" if kind == "trades" else "asks", row, 1, None))
    return out


@pytest.mark.parametrize("loop", sorted(LOOPS))
@pytest.mark.parametrize(("query", "strategy"), PAIRS)
@settings(max_examples=25, deadline=None)
@given(
    st.lists(op, max_size=60),
    odd,
    st.lists(st.integers(1, 12), min_size=1, max_size=4),
    st.integers(0, 4),
    st.booleans(),
)
def test_an_engine_on_columns_equals_one_on_events_and_the_oracle(
    query, strategy, loop, ops, odd_ones, sizes, checkpoint_at, decimals
):
    events = _with_odd_events(book_events(ops, decimals=decimals, asks=True), odd_ones)
    on_events, on_columns = create_engine(query, strategy), create_engine(query, strategy)
    oracle = create_engine(query, "recompute")
    active = kernels.ledger_columns
    kernels.ledger_columns = LOOPS[loop]
    try:
        for n, batch in enumerate(cut(events, sizes)):
            if n == checkpoint_at:  # from here on both log the tuples they touch
                assert sorted(on_columns.all_entries()) == sorted(on_events.all_entries())
            want = on_events.apply(batch)
            assert on_columns.apply_columns(event_columns(batch)) == want
            assert [r.code for r in oracle.apply(batch)] == [r.code for r in want]
            assert answer(on_columns) == answer(on_events) == answer(oracle)
            assert on_columns.stats() == on_events.stats()
            assert on_columns.running == on_events.running
            if n >= checkpoint_at:
                assert on_columns.changed_entries() == on_events.changed_entries()
    finally:
        kernels.ledger_columns = active
    assert {r: list(b.items()) for r, b in on_columns.bag.items()} == {
        r: list(b.items()) for r, b in on_events.bag.items()
    }
