"""Every strategy of every order-book query agrees with the literal nested-loop oracle after every
event, on random books with tiny price domains (ties), duplicates, deletes and refused events."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ivmstream.engine import EngineError
from ivmstream.events import UpdateEvent
from ivmstream.services.vwap.catalog import QUERIES
from ivmstream.services.vwap.engine import create_engine
from ivmstream.services.vwap.trees.rpai import black_height

BOOK_QUERIES = [q for q, info in QUERIES.items() if info.book]

op = st.tuples(
    st.sampled_from(["insert", "insert", "insert", "delete", "delete", "execute", "bad"]),
    st.sampled_from(["bids", "asks"]),
    st.integers(1, 12),  # price: a tiny domain forces ties
    st.integers(1, 5),  # volume
    st.integers(0, 5),  # order id: identical tuples recur
    st.integers(0, 999),  # which live tuple a delete picks
)


def book_events(ops, decimals: bool = False) -> list[UpdateEvent]:
    """Valid inserts, deletes and partial executions of live tuples, plus refused events (absent
    deletes, zero volumes)."""
    live: list[tuple[str, dict]] = []
    out = []
    for kind, rel, price, vol, oid, pick in ops:
        if decimals:
            price, vol = Decimal(price) / 4, Decimal(vol) / 2
        row = {"t": 1, "id": oid, "broker_id": oid % 10, "volume": vol, "price": price}
        if kind == "delete" and live:
            rel, row = live.pop(pick % len(live))
            out.append(UpdateEvent(rel, dict(row), -1, None))
        elif kind == "execute" and live:  # a partial execution: the order leaves, its remainder returns
            rel, row = live.pop(pick % len(live))
            out.append(UpdateEvent(rel, dict(row), -1, None))
            rest = dict(row, volume=row["volume"] - vol)
            if rest["volume"] > 0:
                live.append((rel, rest))
                out.append(UpdateEvent(rel, dict(rest), 1, None))
        elif kind == "bad":
            if pick % 2:
                out.append(UpdateEvent(rel, dict(row, volume=0), 1, None))
            else:
                out.append(UpdateEvent(rel, dict(row, price=price + 100), -1, None))
        else:
            live.append((rel, row))
            out.append(UpdateEvent(rel, dict(row), 1, None))
    return out


def comparable(result):
    return {k: v for k, v in result.items() if k != "stats"}


def run_all(query: str, events: list[UpdateEvent]) -> None:
    oracle = create_engine(query, "recompute")
    others = {s: create_engine(query, s) for s in QUERIES[query].strategies if s != "recompute"}
    for i, ev in enumerate(events):
        want_rej = [r.code for r in oracle.apply([ev])]
        want = comparable(oracle.result())
        for name, engine in others.items():
            assert [r.code for r in engine.apply([ev])] == want_rej, (name, i)
            assert comparable(engine.result()) == want, (query, name, i, ev)
        for engine in (oracle, *others.values()):
            check_stats(engine)


def check_stats(engine) -> None:
    """The gauges kept incrementally agree with a recount: live tuples with the ledger, the black height
    with the trees' true height (bh <= h <= 2 bh in a red-black tree)."""
    stats = engine.stats()
    assert stats["live_tuples"] == sum(sum(b.values()) for b in engine.bag.values())
    trees = engine.plan.trees() if hasattr(engine.plan, "trees") else []
    if trees:
        bhs = [black_height(t) for t in trees]
        assert stats["tree_height"] == max(bhs)
        for t, bh in zip(trees, bhs, strict=True):
            assert bh <= t.height() <= 2 * bh


@pytest.mark.parametrize("query", BOOK_QUERIES)
@given(ops=st.lists(op, max_size=70))
def test_every_strategy_equals_the_oracle_after_every_event(query, ops):
    run_all(query, book_events(ops))


@pytest.mark.parametrize("query", ["vwap", "vwap-paper", "mst", "psp", "nq1", "sq1"])
@given(ops=st.lists(op, max_size=40))
def test_exact_decimals(query, ops):
    run_all(query, book_events(ops, decimals=True))


@given(
    ops=st.lists(
        st.tuples(st.integers(1, 4), st.integers(-3, 3), st.booleans(), st.integers(0, 99)), max_size=60
    )
)
def test_ex21_pai_map_equals_the_oracle(ops):
    live: list[dict] = []
    events = []
    for a, b, delete, pick in ops:
        if delete and live:
            events.append(UpdateEvent("R", live.pop(pick % len(live)), -1, None))
        else:
            live.append({"a": a, "b": b})
            events.append(UpdateEvent("R", {"a": a, "b": b}, 1, None))
    run_all("ex21", events)


def test_sq1_variant_b_and_parameters_reach_the_plans():
    events = book_events([("insert", "bids", p % 7 + 1, p % 4 + 1, p % 6, 0) for p in range(40)])
    for params in ({"variant": "b"}, {"fraction": Decimal("0.5")}):
        from fractions import Fraction

        params = {k: Fraction(v) if k == "fraction" else v for k, v in params.items()}
        a = create_engine("sq1", "rpai", params)
        b = create_engine("sq1", "recompute", params)
        a.apply(events)
        b.apply(events)
        assert comparable(a.result()) == comparable(b.result())


@pytest.mark.parametrize("query", BOOK_QUERIES)
@given(ops=st.lists(op, min_size=2, max_size=50), cut=st.integers(0, 50))
def test_snapshot_restore_mid_stream_equals_uninterrupted(query, ops, cut):
    events = book_events(ops)
    cut = min(cut, len(events))
    whole = create_engine(query, "rpai")
    whole.apply(events)
    first = create_engine(query, "rpai")
    first.apply(events[:cut])
    second = create_engine(query, "rpai")
    second.restore(first.snapshot())
    second.apply(events[cut:])
    assert comparable(second.result()) == comparable(whole.result())
    assert second.snapshot() == whole.snapshot()
    assert second.stats()["live_tuples"] == whole.stats()["live_tuples"]  # work counters and tree shapes
    check_stats(second)  # may differ: a restore builds the trees in one pass


def test_refusals_have_reasons_and_change_nothing():
    e = create_engine("mst", "rpai")
    ok = {"t": 1, "id": 3, "broker_id": 3, "volume": 2, "price": 10}
    rej = e.apply(
        [
            UpdateEvent("bids", dict(ok, volume=0), 1, None),
            UpdateEvent("bids", dict(ok, volume=-2), 1, None),
            UpdateEvent("bids", dict(ok), -1, None),
            UpdateEvent("bids", dict(ok, broker_id=12), 1, None),
            UpdateEvent("asks", dict(ok), 1, None),
        ]
    )
    assert [(r.index, r.code) for r in rej] == [
        (0, "non-positive-volume"),
        (1, "non-positive-volume"),
        (2, "absent-tuple"),
        (3, "broker-out-of-range"),
    ]
    assert e.stats()["rejected"] == 4 and e.result()["stats"]["events"] == 1
    assert comparable(e.result()) == {"mst": {}}


def test_corrupt_snapshot_levels_are_refused():
    e = create_engine("vwap")
    e.apply([UpdateEvent("bids", {"t": 1, "id": 1, "broker_id": 1, "volume": 5, "price": 7}, 1, None)])
    data = e.snapshot().replace(
        b'"levels":{"asks":[],"bids":[[7,5,1,35]]}', b'"levels":{"asks":[],"bids":[[7,6,1,42]]}'
    )
    assert data != e.snapshot()
    with pytest.raises(EngineError, match="levels disagree"):
        create_engine("vwap").restore(data)


def test_unknown_query_and_strategy_are_engine_errors():
    with pytest.raises(EngineError, match="unknown query"):
        create_engine("nope")
    with pytest.raises(EngineError, match="crosscheck"):
        create_engine("mst", "crosscheck")


@given(
    st.lists(
        st.one_of(
            st.integers(-(2**63), 2**63 - 1),
            st.decimals(allow_nan=False, allow_infinity=False, places=3),
            st.text(max_size=4),
        ),
        max_size=6,
    )
)
@example([Decimal("-12283826816462094336.000"), Decimal("18446744073709551616")])
def test_a_bag_key_is_the_json_of_its_encoded_row(values):
    import orjson

    from ivmstream.services.vwap import snapshot as snap

    assert snap.bag_key("bids", tuple(values)) == orjson.dumps(["bids", *snap.encode_row(values)])


def test_an_integral_decimal_beyond_64_bits_is_kept_as_exact_text():
    import orjson

    from ivmstream.services.vwap import snapshot as snap

    values = (Decimal("-12283826816462094336.000"), Decimal("18446744073709551616"), Decimal("42.000"))
    encoded = snap.encode_row(values)
    assert encoded == ["-12283826816462094336", "18446744073709551616", 42]
    assert snap.decode_row(encoded, ["exact", "exact", "exact"]) == values
    assert orjson.loads(snap.bag_key("bids", values)) == ["bids", *encoded]


def test_a_snapshot_keeps_level_sums_beyond_64_bits_as_exact_text():
    """A level's PV is m * volume * price: in-range columns multiply beyond 64 bits."""
    from fractions import Fraction

    from ivmstream.events import Relation
    from ivmstream.services.vwap import snapshot as snap
    from ivmstream.services.vwap.exact import to_json

    assert to_json(10**24) == to_json(Fraction(10**24)) == to_json(Decimal(10**24)) == str(10**24)
    assert to_json(-(2**63)) == -(2**63) and to_json(2**64 - 1) == 2**64 - 1 and to_json(2**64) == str(2**64)
    bids = {(10**12, 10**12): 1, (10**12, 3): 2}
    levels = snap.book_levels(bids, ["price", "volume"])
    relation = Relation.of("bids", price="int", volume="int")
    restored = snap.decode(snap.encode("vwap", "auto", {"bids": bids}, {"bids": levels}), {"bids": relation})
    assert restored["levels"] == {"bids": [(10**12, 10**12 + 6, 3, 10**24 + 6 * 10**12)]}
    assert restored["bag"] == {"bids": bids}


def test_a_bag_key_refuses_what_is_not_json():
    from fractions import Fraction

    from ivmstream.services.vwap import snapshot as snap

    with pytest.raises(TypeError):
        snap.bag_key("bids", (1, Fraction(1, 3)))
