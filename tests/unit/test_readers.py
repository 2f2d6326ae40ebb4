"""Input readers: jsonl, CSV, read_source and guess_format (the registry and tbl: test_formats.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import write_file as write

from ivmstream.events import (
    FORMATS,
    EventCodec,
    EventError,
    Relation,
    Schema,
    SourceError,
    SourceRecord,
    UpdateEvent,
    read_csv,
    read_jsonl,
    read_source,
)
from ivmstream.events.readers import guess_format, parse_scalar

TRADES = Relation.of("trades", qty="int", px="float", sym="str")
CODEC = EventCodec(Schema.of(TRADES))
KEYED = EventCodec(Schema.of(TRADES, key_field="acct"))


def events(records: list[SourceRecord]) -> list[dict[str, Any]]:
    return [orjson.loads(r.value) for r in records]


def code_of(codec: EventCodec, rec: SourceRecord) -> str:
    with pytest.raises(EventError) as info:
        codec.decode(rec.value)
    return info.value.code


# --- jsonl -----------------------------------------------------------------------------------------

L1 = b'{"relation": "trades",  "row": {"qty": 1, "px": 2.5, "sym": "A", "acct": "u1"}, "delta": 1}'
L2 = b'{"delta":-1,"row":{"acct":7,"sym":"B","px":1,"qty":2},"relation":"trades"}'
L3 = b'{"relation":"trades","row":{"qty":3,"px":1.0,"sym":"C"},"delta":1}'


def test_jsonl_skips_blank_lines_and_keeps_line_numbers_and_bytes(tmp_path: Path) -> None:
    p = write(tmp_path, "in.jsonl", b"\n" + L1 + b"\n   \n\t\n" + L2 + b"\r\n\n" + L3)
    recs = list(read_jsonl(p))
    assert [r.lineno for r in recs] == [2, 5, 7]
    assert [r.value for r in recs] == [L1, L2, L3]  # byte for byte, not re-serialised
    assert all(r.key is None and r.error is None for r in recs)


def test_jsonl_key_extracted_from_row(tmp_path: Path) -> None:
    bad = b'{"relation": "trades", "row":'
    nokey = b'{"relation":"trades","row":{"qty":1},"delta":1}'
    rowless = b"[1, 2, 3]"
    p = write(tmp_path, "in.jsonl", b"\n".join([L1, L2, bad, nokey, rowless]) + b"\n")
    recs = list(read_jsonl(p, key_field="acct"))
    assert [r.key for r in recs] == [b"u1", b"7", None, None, None]
    assert [r.value for r in recs] == [L1, L2, bad, nokey, rowless]  # malformed lines still forwarded
    assert [r.lineno for r in recs] == [1, 2, 3, 4, 5]
    # and the codec with the same key_field agrees with the reader's key
    assert KEYED.decode(recs[0].value).key == recs[0].key.decode()
    assert KEYED.decode(recs[1].value).key == recs[1].key.decode()
    assert code_of(KEYED, recs[2]) == "malformed-json"
    assert code_of(KEYED, recs[3]) == "missing-key"


def test_jsonl_empty_file(tmp_path: Path) -> None:
    assert list(read_jsonl(write(tmp_path, "e.jsonl", b""))) == []
    assert list(read_jsonl(write(tmp_path, "b.jsonl", b"\n\n  \n"))) == []


# --- CSV -------------------------------------------------------------------------------------------


def test_csv_header_types_and_default_delta(tmp_path: Path) -> None:
    p = write(tmp_path, "t.csv", 'qty,px,sym\n1,2.5,AB\n-3, 4 ,"x,y"\n12345678901234567890,1e3,007x\n')
    recs = list(read_csv(p, "trades"))
    assert [r.lineno for r in recs] == [2, 3, 4]
    evs = events(recs)
    assert evs[0] == {"relation": "trades", "row": {"qty": 1, "px": 2.5, "sym": "AB"}, "delta": 1}
    assert evs[1]["row"] == {"qty": -3, "px": 4, "sym": "x,y"}
    assert type(evs[1]["row"]["px"]) is int  # CSV cells carry no types: "4" is an int
    assert evs[2]["row"] == {"qty": 12345678901234567890, "px": 1000.0, "sym": "007x"}
    assert type(evs[2]["row"]["px"]) is float
    decoded = [CODEC.decode(r.value) for r in recs]
    assert decoded[0] == UpdateEvent("trades", {"qty": 1, "px": 2.5, "sym": "AB"}, 1)
    assert decoded[1].row["px"] == 4.0 and type(decoded[1].row["px"]) is float
    assert all(r.key is None and r.error is None for r in recs)


def test_csv_delta_column(tmp_path: Path) -> None:
    p = write(tmp_path, "t.csv", "qty,delta,px,sym\n1,-1,2.5,A\n2,3,1.5,B\n3,,1.5,C\n4,1.5,1,D\n5,0,1,E\n")
    recs = list(read_csv(p, "trades"))
    evs = events(recs)
    assert [e["delta"] for e in evs] == [-1, 3, None, 1.5, 0]
    assert all("delta" not in e["row"] for e in evs)
    assert CODEC.decode(recs[0].value) == UpdateEvent("trades", {"qty": 1, "px": 2.5, "sym": "A"}, -1)
    assert CODEC.decode(recs[1].value).delta == 3
    assert code_of(CODEC, recs[2]) == "bad-delta"
    assert code_of(CODEC, recs[3]) == "bad-delta"
    assert code_of(CODEC, recs[4]) == "zero-delta"


def test_csv_custom_delta_column_name(tmp_path: Path) -> None:
    p = write(tmp_path, "t.csv", "qty,px,sym,mult\n1,1.5,A,-2\n")
    (rec,) = read_csv(p, "trades", delta_column="mult")
    assert CODEC.decode(rec.value) == UpdateEvent("trades", {"qty": 1, "px": 1.5, "sym": "A"}, -2)


def test_csv_empty_cell_is_null_and_validation_rejects_it(tmp_path: Path) -> None:
    p = write(tmp_path, "t.csv", "qty,px,sym\n1,,A\n")
    (rec,) = read_csv(p, "trades")
    assert orjson.loads(rec.value)["row"] == {"qty": 1, "px": None, "sym": "A"}
    with pytest.raises(EventError) as info:
        CODEC.decode(rec.value)
    assert info.value.code == "null-value" and info.value.detail == "trades.px is null"


def test_csv_too_few_and_too_many_cells(tmp_path: Path) -> None:
    p = write(tmp_path, "t.csv", "qty,px,sym\n1,2.5\n1,2.5,A,extra,9\n")
    few, many = read_csv(p, "trades")
    assert orjson.loads(few.value)["row"] == {"qty": 1, "px": 2.5}
    assert orjson.loads(many.value)["row"] == {
        "qty": 1,
        "px": 2.5,
        "sym": "A",
        "_extra1": "extra",
        "_extra2": 9,
    }
    with pytest.raises(EventError) as info:
        CODEC.decode(few.value)
    assert info.value.code == "missing-column" and info.value.detail == "trades.sym is missing"
    with pytest.raises(EventError) as info:
        CODEC.decode(many.value)
    assert info.value.code == "unexpected-column"
    assert info.value.detail == "trades has unexpected column(s) _extra1, _extra2"


def test_csv_blank_lines_skipped_and_line_numbers(tmp_path: Path) -> None:
    p = write(tmp_path, "t.csv", "qty , px,sym\r\n\r\n1,1.5,A\r\n   \r\n\r\n2,2.5,B\r\n")
    recs = list(read_csv(p, "trades"))
    assert [r.lineno for r in recs] == [3, 6]
    assert [orjson.loads(r.value)["row"]["qty"] for r in recs] == [1, 2]
    assert "qty" in orjson.loads(recs[0].value)["row"]  # header names are stripped


def test_csv_key_field(tmp_path: Path) -> None:
    p = write(tmp_path, "t.csv", "acct,qty,px,sym\nu1,1,1.5,A\n42,2,2.5,B\n,3,3.5,C\n")
    recs = list(read_csv(p, "trades", key_field="acct"))
    assert [r.key for r in recs] == [b"u1", b"42", None]
    assert KEYED.decode(recs[0].value) == UpdateEvent("trades", {"qty": 1, "px": 1.5, "sym": "A"}, 1, "u1")
    assert KEYED.decode(recs[1].value).key == "42"
    assert code_of(KEYED, recs[2]) == "wrong-type"  # a null key


def test_csv_without_relation(tmp_path: Path) -> None:
    p = write(tmp_path, "t.csv", "qty\n1\n")
    with pytest.raises(SourceError, match="--relation"):
        list(read_csv(p, ""))


def test_tbl_headerless_pipe_with_trailing_separator(tmp_path: Path) -> None:
    cols = ["c_custkey", "c_name", "c_acctbal"]
    p = write(
        tmp_path, "customer.tbl", "1|Customer#1|711.56|\n2|Customer#2|-5|\n3|Customer#3|0.5\n4|x|1|2|\n"
    )
    recs = list(read_csv(p, "customer", delimiter="|", columns=cols))
    assert [r.lineno for r in recs] == [1, 2, 3, 4]
    rows = [orjson.loads(r.value)["row"] for r in recs]
    assert rows[0] == {"c_custkey": 1, "c_name": "Customer#1", "c_acctbal": 711.56}
    assert rows[1] == {"c_custkey": 2, "c_name": "Customer#2", "c_acctbal": -5}
    assert rows[2] == {"c_custkey": 3, "c_name": "Customer#3", "c_acctbal": 0.5}  # no trailing "|"
    assert rows[3] == {"c_custkey": 4, "c_name": "x", "c_acctbal": 1, "_extra1": 2, "_extra2": None}
    codec = EventCodec(Schema.of(Relation.of("customer", c_custkey="int", c_name="str", c_acctbal="decimal")))
    assert str(codec.decode(recs[0].value).row["c_acctbal"]) == "711.56"
    with pytest.raises(EventError) as info:
        codec.decode(recs[3].value)
    assert info.value.code == "unexpected-column"


def test_trailing_empty_cell_kept_with_comma_delimiter(tmp_path: Path) -> None:
    # only "|" files get the TPC-H treatment; a trailing "," is an extra empty cell
    p = write(tmp_path, "t.csv", "1,1.5,A,\n")
    (rec,) = read_csv(p, "trades", columns=["qty", "px", "sym"])
    assert orjson.loads(rec.value)["row"] == {"qty": 1, "px": 1.5, "sym": "A", "_extra1": None}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", 42),
        ("-3", -3),
        (" 7 ", 7),
        ("+5", 5),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        ("-0.0", -0.0),
        ("abc", "abc"),
        ("0x10", "0x10"),
        ("", None),
        ("   ", None),
        # Python's int()/float() accept these, CSV numbers do not (fixed in parse_scalar)
        ("1_000", "1_000"),
        ("1_0.5", "1_0.5"),
        ("١٢", "١٢"),
        ("nan", "nan"),
        ("NaN", "NaN"),
        ("inf", "inf"),
        ("-Infinity", "-Infinity"),
        ("1e400", "1e400"),
        # orjson cannot encode integers outside 64 bits: they stay exact text
        (str(2**64 - 1), 2**64 - 1),
        (str(-(2**63)), -(2**63)),
        (str(2**64), str(2**64)),
        (str(-(2**63) - 1), str(-(2**63) - 1)),
    ],
)
def test_parse_scalar(text: str, expected: Any) -> None:
    got = parse_scalar(text)
    assert type(got) is type(expected) and got == expected
    if isinstance(got, (int, float)):
        assert orjson.loads(orjson.dumps(got)) == got


def test_csv_special_cells_stay_strings_and_never_crash(tmp_path: Path) -> None:
    # "nan" used to become null (a misleading null-value); a huge integer crashed the reader
    big = "123456789012345678901234567890"
    p = write(tmp_path, "t.csv", f"qty,px,sym\n1,1.5,nan\n{big},1.5,A\n2,2.5,B\n")
    recs = list(read_csv(p, "trades"))
    assert len(recs) == 3
    assert CODEC.decode(recs[0].value).row["sym"] == "nan"
    with pytest.raises(EventError) as info:
        CODEC.decode(recs[1].value)
    assert info.value.code == "wrong-type" and info.value.detail.startswith("trades.qty must be an integer")
    assert CODEC.decode(recs[2].value).row["qty"] == 2
    dec = EventCodec(Schema.of(Relation.of("trades", qty="decimal", px="float", sym="str")))
    assert str(dec.decode(recs[1].value).row["qty"]) == big  # exact for a decimal column


# --- read_source / guess_format ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("a.jsonl", "jsonl"),
        ("a.ndjson", "jsonl"),
        ("a.json", "jsonl"),
        ("A.JSONL", "jsonl"),
        ("a.csv", "csv"),
        ("x/lineitem.tbl", "tbl"),
        ("a.CSV", "csv"),
    ],
)
def test_guess_format(name: str, fmt: str) -> None:
    assert guess_format(name) == fmt
    assert fmt in FORMATS


@pytest.mark.parametrize("name", ["a.txt", "noext", "a.csv.gz", "a.parquet"])
def test_guess_format_unknown(name: str) -> None:
    with pytest.raises(SourceError, match="--format"):
        guess_format(name)


def test_read_source_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(SourceError, match="input file not found") as info:
        read_source(missing)
    assert str(missing) in str(info.value)
    with pytest.raises(SourceError):
        read_source(tmp_path)  # a directory is not an input file


def test_read_source_unknown_format(tmp_path: Path) -> None:
    p = write(tmp_path, "a.jsonl", L3)
    with pytest.raises(SourceError, match=r"unknown input format 'parquet'"):
        read_source(p, "parquet")
    with pytest.raises(SourceError, match="cannot tell the format"):
        read_source(write(tmp_path, "a.txt", "x"))


def test_read_source_csv_without_relation_fails_on_the_call(tmp_path: Path) -> None:
    p = write(tmp_path, "a.csv", "qty\n1\n")
    with pytest.raises(SourceError, match="--relation"):
        read_source(p)  # raised by the call itself, not on first iteration
    with pytest.raises(SourceError, match="--relation"):
        read_source(p, "csv", relation="")


def test_read_source_bad_orderbook_options_fail_on_the_call(tmp_path: Path) -> None:
    p = write(tmp_path, "f.csv", "1,2,B,3,4\n")
    with pytest.raises(SourceError, match="format orderbook: read option 'book' must be one of auto, bids"):
        read_source(p, "orderbook", book="nope")
    with pytest.raises(SourceError, match="format orderbook: read option 'brokers' must be a positive int"):
        read_source(p, "orderbook", brokers=0)


def test_read_source_dispatch(tmp_path: Path) -> None:
    j = write(tmp_path, "a.jsonl", L1 + b"\n" + L3 + b"\n")
    assert [r.value for r in read_source(j, key_field="acct")] == [L1, L3]
    assert [r.key for r in read_source(j, key_field="acct")] == [b"u1", None]
    c = write(tmp_path, "a.csv", "qty;px;sym\n1;1.5;A\n")
    (rec,) = read_source(c, relation="trades", delimiter=";")
    assert CODEC.decode(rec.value) == UpdateEvent("trades", {"qty": 1, "px": 1.5, "sym": "A"}, 1)
    ob = write(tmp_path, "finance.csv", "1,13,B,3,4\n2,14,S,5,6\n")
    recs = list(read_source(ob, "orderbook", book="both", brokers=4))
    assert events(recs) == [
        {"relation": "bids", "row": {"t": 1, "id": 13, "broker_id": 1, "volume": 3, "price": 4}, "delta": 1},
        {"relation": "asks", "row": {"t": 2, "id": 14, "broker_id": 2, "volume": 5, "price": 6}, "delta": 1},
    ]
