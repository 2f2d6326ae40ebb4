"""The DBToaster order-book adaptor (RPAI spec, Appendix A) and the real finance traces."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import EventCodec, OrderBookAdaptor, Relation, Schema, read_orderbook
from ivmstream.events.orderbook import BOOKS

COLS = ("t", "id", "broker_id", "volume", "price")
BUNDLED = Path(__file__).resolve().parents[2] / "services" / "vwap" / "data"  # copies shipped with vwap
TINY = BUNDLED / "finance-tiny.csv"
STANDARD = BUNDLED / "finance-standard.csv"


def row(t: Any, oid: Any, volume: Any, price: Any, brokers: int = 10) -> dict[str, Any]:
    return {"t": t, "id": oid, "broker_id": oid % brokers, "volume": volume, "price": price}


def ins(rel: str, r: dict[str, Any]) -> dict[str, Any]:
    return {"relation": rel, "row": r, "delta": 1}


def dele(rel: str, r: dict[str, Any]) -> dict[str, Any]:
    return {"relation": rel, "row": r, "delta": -1}


def feed(a: OrderBookAdaptor, *lines: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in lines:
        out.extend(a.feed_line(line))
    return out


# --- unit cases ------------------------------------------------------------------------------------


def test_b_inserts_a_bid() -> None:
    a = OrderBookAdaptor()
    assert a.feed_line("100,37,B,50,2000\n") == [ins("bids", row(100, 37, 50, 2000))]
    assert a.live == {"bids": {37: row(100, 37, 50, 2000)}, "asks": {}}


def test_s_inserts_an_ask_when_wanted() -> None:
    a = OrderBookAdaptor(book="both")
    assert a.feed_line("5,12,S,30,990") == [ins("asks", row(5, 12, 30, 990))]
    assert a.live["asks"] == {12: row(5, 12, 30, 990)} and a.live["bids"] == {}


def test_e_partial_execution_keeps_every_other_field_including_t() -> None:
    a = OrderBookAdaptor()
    feed(a, "100,37,B,50,2000")
    out = a.feed_line("999,37,E,20,1")  # the message's t and price are not used
    assert out == [dele("bids", row(100, 37, 50, 2000)), ins("bids", row(100, 37, 30, 2000))]
    assert a.live["bids"][37] == row(100, 37, 30, 2000)
    # executing again works from the remaining volume
    assert a.feed_line("1000,37,E,5,0") == [
        dele("bids", row(100, 37, 30, 2000)),
        ins("bids", row(100, 37, 25, 2000)),
    ]


def test_e_partial_execution_on_asks() -> None:
    a = OrderBookAdaptor(book="asks")
    feed(a, "7,3,S,10,55")
    assert a.feed_line("8,3,E,4,55") == [dele("asks", row(7, 3, 10, 55)), ins("asks", row(7, 3, 6, 55))]


@pytest.mark.parametrize("executed", [50, 51, 1000])
def test_e_full_execution_drops_the_order_and_emits_only_the_delete(executed: int) -> None:
    a = OrderBookAdaptor()
    feed(a, "100,37,B,50,2000")
    assert a.feed_line(f"101,37,E,{executed},2000") == [dele("bids", row(100, 37, 50, 2000))]
    assert a.live["bids"] == {}
    assert feed(a, "102,37,E,1,2000", "103,37,D,0,0", "104,37,F,0,0") == []


@pytest.mark.parametrize("action", ["E", "D", "F"])
def test_unknown_ids_are_ignored(action: str) -> None:
    a = OrderBookAdaptor(book="both")
    feed(a, "1,1,B,10,100", "2,2,S,10,100")
    before = {side: dict(m) for side, m in a.live.items()}
    assert a.feed_line(f"3,99,{action},5,100") == []
    assert a.live == before


@pytest.mark.parametrize("action", ["D", "F"])
def test_d_and_f_delete_the_stored_tuple(action: str) -> None:
    a = OrderBookAdaptor(book="both")
    feed(a, "1,4,B,10,100", "2,4,E,3,0", "3,5,S,7,200")
    assert a.feed_line(f"9,4,{action},0,0") == [dele("bids", row(1, 4, 7, 100))]
    assert a.feed_line(f"9,5,{action},1,1") == [dele("asks", row(3, 5, 7, 200))]
    assert a.live == {"bids": {}, "asks": {}}


@pytest.mark.parametrize("action", ["X", "C", "T"])
def test_x_c_t_are_ignored(action: str) -> None:
    a = OrderBookAdaptor(book="both")
    feed(a, "1,4,B,10,100")
    assert a.feed_line(f"2,4,{action},10,100") == []
    assert a.feed_line(f"2,77,{action},10,100") == []
    assert a.live == {"bids": {4: row(1, 4, 10, 100)}, "asks": {}}


def test_lookup_order_bids_before_asks() -> None:
    a = OrderBookAdaptor(book="both")
    feed(a, "1,8,S,5,50", "2,8,B,6,60")
    assert a.feed_line("3,8,E,1,0") == [dele("bids", row(2, 8, 6, 60)), ins("bids", row(2, 8, 5, 60))]
    assert a.feed_line("4,8,D,0,0") == [dele("bids", row(2, 8, 5, 60))]
    assert a.feed_line("5,8,E,2,0") == [dele("asks", row(1, 8, 5, 50)), ins("asks", row(1, 8, 3, 50))]
    assert a.feed_line("6,8,F,0,0") == [dele("asks", row(1, 8, 3, 50))]
    assert a.feed_line("7,8,D,0,0") == []


def test_bids_only_book_ignores_asks_and_later_messages_for_them() -> None:
    a = OrderBookAdaptor(book="bids")
    assert feed(a, "1,3,S,10,100", "2,3,E,5,100", "3,3,D,0,0", "4,3,F,0,0") == []
    assert a.live == {"bids": {}, "asks": {}}
    assert feed(a, "5,4,B,1,1") == [ins("bids", row(5, 4, 1, 1))]


def test_asks_only_book() -> None:
    a = OrderBookAdaptor(book="asks")
    assert feed(a, "1,3,B,10,100", "2,3,E,5,100", "3,3,D,0,0") == []
    assert feed(a, "4,4,S,2,9", "5,4,D,0,0") == [ins("asks", row(4, 4, 2, 9)), dele("asks", row(4, 4, 2, 9))]
    assert a.live == {"bids": {}, "asks": {}}


def test_both_books() -> None:
    a = OrderBookAdaptor(book="both")
    out = feed(a, "1,1,B,10,100", "2,2,S,20,200")
    assert out == [ins("bids", row(1, 1, 10, 100)), ins("asks", row(2, 2, 20, 200))]


@pytest.mark.parametrize(
    ("brokers", "oid", "broker_id"), [(10, 37, 7), (10, 40, 0), (3, 10, 1), (1, 12345, 0), (7, 6, 6)]
)
def test_broker_id_is_id_mod_brokers(brokers: int, oid: int, broker_id: int) -> None:
    a = OrderBookAdaptor(brokers=brokers)
    (ev,) = a.feed_line(f"1,{oid},B,1,1")
    assert ev["row"]["broker_id"] == broker_id


def test_default_brokers_is_ten() -> None:
    assert OrderBookAdaptor().brokers == 10


@pytest.mark.parametrize(
    ("kwargs", "msg"), [({"book": "nope"}, "book must be one of"), ({"brokers": 0}, "brokers must be")]
)
def test_bad_options(kwargs: dict[str, Any], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        OrderBookAdaptor(**kwargs)


def test_reused_live_id_overwrites_without_retracting() -> None:
    # DBToaster semantics (Appendix A: "store it in bids[id] and emit an insert"): the old tuple stays
    # in the emitted bag. The shipped traces never re-use a live id.
    a = OrderBookAdaptor()
    out = feed(a, "1,5,B,10,100", "2,5,B,20,200", "3,5,D,0,0")
    assert out == [
        ins("bids", row(1, 5, 10, 100)),
        ins("bids", row(2, 5, 20, 200)),
        dele("bids", row(2, 5, 20, 200)),
    ]
    assert a.live["bids"] == {}


def test_whitespace_around_fields_is_tolerated() -> None:
    a = OrderBookAdaptor()
    assert a.feed_line(" 1, 2 , B ,3, 4.5 \r\n") == [ins("bids", row(1, 2, 3, 4.5))]


@pytest.mark.parametrize(
    ("line", "msg"),
    [
        ("1,2,B,3", "expected 5 fields"),
        ("1,2,B,3,4,5", "expected 5 fields"),
        ("", "expected 5 fields"),
        ("x,2,B,3,4", "t 'x' is not a number"),
        ("1,two,B,3,4", "id 'two' is not a number"),
        ("1,2,B,abc,4", "volume 'abc' is not a number"),
        ("1,2,B,3,", "price '' is not a number"),
        ("1,2,B,nan,4", "volume 'nan' is not a number"),
        ("1,2,B,3,inf", "price 'inf' is not a number"),
        ("1,1_2,B,3,4", "id '1_2' is not a number"),
        ("1,123456789012345678901234567890,B,3,4", "outside the 64-bit integer range"),
        ("1,2,Q,3,4", "unknown order-book action 'Q'"),
        ("1,2,,3,4", "unknown order-book action ''"),
        ("1,2,b,3,4", "unknown order-book action 'b'"),
    ],
)
def test_malformed_lines_raise_value_error(line: str, msg: str) -> None:
    a = OrderBookAdaptor(book="both")
    feed(a, "0,2,B,5,5")
    with pytest.raises(ValueError, match=msg):
        a.feed_line(line)
    assert a.live == {"bids": {2: row(0, 2, 5, 5)}, "asks": {}}


def test_read_orderbook_turns_malformed_lines_into_error_records(tmp_path: Path) -> None:
    p = tmp_path / "finance.csv"
    p.write_text("1,2,B,5,5\n1,2,B\n\n2,3,Q,1,1\n 3,2,E,2,5 \n4,x,D,0,0\n1,999999999999999999999,B,1,1\n")
    recs = list(read_orderbook(p, key="vwap"))
    assert [(r.lineno, r.error is not None) for r in recs] == [
        (1, False),
        (2, True),
        (4, True),
        (5, False),
        (5, False),
        (6, True),
        (7, True),
    ]
    assert all(r.key == b"vwap" for r in recs)
    errs = [r for r in recs if r.error]
    assert [r.value for r in errs] == [b"1,2,B", b"2,3,Q,1,1", b"4,x,D,0,0", b"1,999999999999999999999,B,1,1"]
    assert "expected 5 fields" in errs[0].error
    assert "unknown order-book action 'Q'" in errs[1].error
    assert "id 'x' is not a number" in errs[2].error
    assert "64-bit" in errs[3].error
    good = [orjson.loads(r.value) for r in recs if not r.error]
    assert good == [ins("bids", row(1, 2, 5, 5)), dele("bids", row(1, 2, 5, 5)), ins("bids", row(1, 2, 3, 5))]
    assert next(iter(read_orderbook(p))).key is None


# --- property: the emitted bag is the live book --------------------------------------------------

MSG = st.tuples(
    st.integers(0, 50),  # t
    st.integers(0, 4),  # id: a small domain so ids collide across sides and over time
    st.sampled_from("BSEDFXCT"),
    st.integers(-2, 6),  # volume (E may over-execute; a negative execution grows the order)
    st.integers(1, 3),  # price
)


def bag_key(ev: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
    return ev["relation"], tuple(ev["row"][c] for c in COLS)


def live_bag(a: OrderBookAdaptor) -> Counter[tuple[str, tuple[Any, ...]]]:
    return Counter(bag_key({"relation": side, "row": r}) for side, m in a.live.items() for r in m.values())


@settings(max_examples=150)
@given(st.sampled_from(BOOKS), st.integers(1, 4), st.lists(MSG, max_size=40), st.booleans())
def test_emitted_bag_equals_live_book(
    book: str, brokers: int, msgs: list[tuple[Any, ...]], via_line: bool
) -> None:
    a = OrderBookAdaptor(book=book, brokers=brokers)
    wanted = {"bids": book in ("bids", "both"), "asks": book in ("asks", "both")}
    bag: Counter[tuple[str, tuple[Any, ...]]] = Counter()
    for t, oid, action, volume, price in msgs:
        side = "bids" if action == "B" else "asks"
        if action in "BS" and oid in a.live[side]:
            continue  # re-using a live id is the DBToaster overwrite, covered by its own test
        out = (
            a.feed_line(f"{t},{oid},{action},{volume},{price}")
            if via_line
            else a.feed(t, oid, action, volume, price)
        )
        assert len(out) <= 2
        for ev in out:
            assert set(ev) == {"relation", "row", "delta"} and ev["delta"] in (1, -1)
            assert wanted[ev["relation"]]
            assert tuple(ev["row"]) == COLS and ev["row"]["broker_id"] == ev["row"]["id"] % brokers
            bag[bag_key(ev)] += ev["delta"]
            assert bag[bag_key(ev)] >= 0, "a delete of a tuple that is not in the bag"
        assert +bag == bag  # no negative multiplicity
        assert +bag == live_bag(a)
        assert all(wanted[s] or not m for s, m in a.live.items()), "an unwanted side holds orders"
        assert all(r["id"] == i for m in a.live.values() for i, r in m.items())


@settings(max_examples=100)
@given(st.lists(MSG, max_size=40))
def test_bag_never_negative_even_with_reused_ids(msgs: list[tuple[Any, ...]]) -> None:
    a = OrderBookAdaptor(book="both")
    bag: Counter[tuple[str, tuple[Any, ...]]] = Counter()
    for msg in msgs:
        for ev in a.feed(*msg):
            bag[bag_key(ev)] += ev["delta"]
        assert all(m >= 0 for m in bag.values())
        assert not (live_bag(a) - bag), "every live order is in the emitted bag"


# --- the real DBToaster traces -------------------------------------------------------------------

BIDS = Schema.of(Relation.of("bids", t="int", id="int", broker_id="int", volume="int", price="int"))


def replay(path: Path) -> tuple[list[bytes], Counter[tuple[Any, ...]]]:
    recs = list(read_orderbook(path, book="bids"))
    assert [r for r in recs if r.error] == []
    codec = EventCodec(BIDS)
    bag: Counter[tuple[Any, ...]] = Counter()
    for ev in codec.decode_many([r.value for r in recs]):
        assert not isinstance(ev, Exception), ev
        assert ev.relation == "bids"
        key = tuple(ev.row[c] for c in COLS)
        bag[key] += ev.delta
        assert bag[key] >= 0
    return [r.value for r in recs], bag


def test_tiny_trace_yields_84_bid_events() -> None:
    values, bag = replay(TINY)
    assert len(values) == 84
    assert sum(bag.values()) > 0


def test_standard_trace_yields_2185_bid_events() -> None:
    values, _ = replay(STANDARD)
    assert len(values) == 2185


VWAP = """
SELECT SUM(b1.price * b1.volume) FROM bids b1
WHERE 0.25 * (SELECT SUM(b3.volume) FROM bids b3)
      > COALESCE((SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price > b1.price), 0)
"""


def test_tiny_trace_vwap_matches_dbtoaster_with_duckdb_oracle() -> None:
    import duckdb

    _, bag = replay(TINY)
    rows = [k for k, m in bag.items() for _ in range(m)]  # the live bag, multiplicities expanded
    assert rows
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE bids (t BIGINT, id BIGINT, broker_id BIGINT, volume BIGINT, price BIGINT)")
        con.executemany("INSERT INTO bids VALUES (?, ?, ?, ?, ?)", rows)
        assert con.execute("SELECT COUNT(*) FROM bids").fetchone()[0] == len(rows)
        assert con.execute(VWAP).fetchone()[0] == 491070000
    finally:
        con.close()
