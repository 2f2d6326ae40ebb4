"""The TPC-H reader of the vwap service: the tables' schema, the bundled tiny tables, exact decimals on
the wire, bad lines, decimals and bytes as error records, routing by the CLI, and interleaving."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import orjson
import pytest

from ivmstream.cli import build_parser
from ivmstream.events import SourceError
from ivmstream.events.readers import FORMATS, read_source
from ivmstream.events.tpch import TPCH_TABLES, interleave_tpch, parse_tpch_line, read_tpch
from ivmstream.services.vwap.catalog import tpch_relation
from tests.unit.vwap.tpch_helpers import TINY, codec_for

ALL_TABLES = tuple(TPCH_TABLES)


def write(tmp: Path, name: str, text: str | bytes) -> Path:
    p = tmp / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


LI_LINE = (
    "1|5|4|1|17|17954.55|0.04|0.02|N|O|1996-03-13|1996-02-12|1996-03-22|"
    "DELIVER IN PERSON|TRUCK|egular courts "
)


# --- schema and reader ---------------------------------------------------------------------------------


def test_schema_shape() -> None:
    assert set(TPCH_TABLES) == {
        "lineitem",
        "orders",
        "customer",
        "part",
        "partsupp",
        "supplier",
        "nation",
        "region",
    }
    assert [c for c, _ in TPCH_TABLES["lineitem"]][:6] == [
        "orderkey",
        "partkey",
        "suppkey",
        "linenumber",
        "quantity",
        "extendedprice",
    ]
    assert len(TPCH_TABLES["lineitem"]) == 16 and len(TPCH_TABLES["orders"]) == 9
    assert len(TPCH_TABLES["customer"]) == 8 and len(TPCH_TABLES["part"]) == 9
    types = {c: t for c, t in TPCH_TABLES["lineitem"]}
    assert types["partkey"] == "int" and types["quantity"] == "exact" and types["shipdate"] == "str"
    assert dict(TPCH_TABLES["orders"])["totalprice"] == "exact"
    for table, cols in TPCH_TABLES.items():
        tpch_relation(table)  # every type is a codec column type
        assert all(not c.startswith(("l_", "o_", "c_", "p_", "ps_", "s_", "n_", "r_")) for c, _ in cols)


@pytest.mark.parametrize("table", ALL_TABLES)
def test_tiny_tables_parse(table: str) -> None:
    path = TINY / f"{table}.csv"
    lines = [ln for ln in path.read_bytes().splitlines() if ln.strip()]
    recs = list(read_tpch(path))
    assert len(recs) == len(lines) and all(r.error is None for r in recs)
    codec = codec_for(table)
    for r in recs:
        ev = codec.decode_slow(r.value)
        assert ev.relation == table and ev.delta == 1
        for col, typ in TPCH_TABLES[table]:
            v = ev.row[col]
            assert isinstance(v, {"int": int, "str": str, "exact": (int, Decimal)}[typ])


def test_exact_decimals_on_the_wire() -> None:
    rec = next(iter(read_tpch(TINY / "lineitem.csv")))
    obj = orjson.loads(rec.value)
    assert obj["relation"] == "lineitem" and obj["delta"] == 1
    row = obj["row"]
    assert row["quantity"] == 17 and type(row["quantity"]) is int
    assert row["extendedprice"] == "17954.55" and row["discount"] == "0.04"  # strings: no float ever
    ev = codec_for("lineitem").decode(rec.value)
    assert ev.row["extendedprice"] == Decimal("17954.55") and ev.row["quantity"] == 17
    assert ev.row["comment"] == "egular courts above the"
    part = orjson.loads(next(iter(read_tpch(TINY / "part.csv"))).value)["row"]
    assert (
        part["retailprice"] == "901.00" and part["brand"] == "Brand#13" and part["container"] == "JUMBO PKG"
    )


def test_trailing_separator_and_relation_from_name(tmp_path: Path) -> None:
    plain = write(tmp_path, "lineitem.csv", LI_LINE + "\n")
    dbgen = write(tmp_path, "lineitem.tbl", LI_LINE + "|\r\n")
    split = write(tmp_path, "lineitem.tbl.2", LI_LINE + "|\n")
    a, b, c = (list(read_tpch(p)) for p in (plain, dbgen, split))
    assert a[0].value == b[0].value == c[0].value and a[0].error is None
    assert orjson.loads(a[0].value)["row"]["comment"] == "egular courts "  # text kept verbatim
    named = list(read_tpch(write(tmp_path, "x.tbl", LI_LINE + "|\n"), relation="lineitem"))
    assert named[0].value == a[0].value


def test_key_field(tmp_path: Path) -> None:
    p = write(tmp_path, "lineitem.tbl", LI_LINE + "|\n")
    assert next(iter(read_tpch(p, key_field="partkey"))).key == b"5"
    assert next(iter(read_tpch(p, key_field="book"))).key is None  # like read_csv: no such column
    assert next(iter(read_tpch(p))).key is None


def test_bad_lines_become_error_records(tmp_path: Path) -> None:
    good = "0|ALGERIA|0| haggle. carefully|"
    text = "\n".join(
        [
            good,  # 1
            "1|ARGENTINA|1",  # 2: too few fields
            "2|BRAZIL|1|c|extra|",  # 3: too many
            "x3|CANADA|1|c|",  # 4: bad integer
            "",  # 5: blank, skipped
            "   ",  # 6: blank, skipped
            "4|EGYPT||c|",  # 7: empty integer
            "5|ETHIOPIA|99999999999999999999|c|",  # 8: beyond 64 bits
            good,  # 9
        ]
    )
    recs = list(read_tpch(write(tmp_path, "nation.tbl", text + "\n")))
    assert [r.lineno for r in recs] == [1, 2, 3, 4, 7, 8, 9]
    errs = {r.lineno: r.error for r in recs if r.error}
    assert set(errs) == {2, 3, 4, 7, 8}
    assert errs[2] == "nation has 4 columns, the line has 3 fields"
    assert errs[3] == "nation has 4 columns, the line has 6 fields"
    assert errs[4] == "column 'nationkey': expected an integer, got 'x3'"
    assert errs[7] == "column 'regionkey': expected an integer, got ''"
    assert "does not fit in 64 bits" in errs[8]
    assert recs[1].value == b"1|ARGENTINA|1"  # the raw line, for the dead-letter report
    assert orjson.loads(recs[-1].value)["row"]["comment"] == " haggle. carefully"


@pytest.mark.parametrize(
    ("cell", "reason"),
    [
        ("1.2.3", "expected a decimal number, got '1.2.3'"),
        ("1e5", "expected a decimal number, got '1e5'"),
        ("NaN", "expected a decimal number, got 'NaN'"),
        ("", "expected a decimal number, got ''"),
        ("12,50", "expected a decimal number, got '12,50'"),
    ],
)
def test_bad_decimals(tmp_path: Path, cell: str, reason: str) -> None:
    line = f"7|Supplier#7|addr|3|13-111|{cell}|c|"
    (rec,) = read_tpch(write(tmp_path, "supplier.tbl", line + "\n"))
    assert rec.error == f"column 'acctbal': {reason}"


def test_decimal_forms(tmp_path: Path) -> None:
    for cell, wire in [
        ("5", 5),
        ("-5", -5),
        ("+5.50", "5.50"),
        ("-0.25", "-0.25"),
        (".5", ".5"),
        ("7.", "7."),
    ]:
        row = parse_tpch_line("supplier", f"7|S|a|3|p|{cell}|c|")
        assert row["acctbal"] == wire
        dec = parse_tpch_line("supplier", f"7|S|a|3|p|{cell}|c|", decimals=True)["acctbal"]
        assert dec == Decimal(str(wire))


def test_bad_utf8(tmp_path: Path) -> None:
    recs = list(read_tpch(write(tmp_path, "region.tbl", b"0|AFRICA|ok|\n1|AM\xffERICA|x|\n")))
    assert recs[0].error is None and recs[1].error is not None and "UTF-8" in recs[1].error


def test_unknown_table_and_missing_file(tmp_path: Path) -> None:
    p = write(tmp_path, "lineitems.tbl", LI_LINE + "\n")
    with pytest.raises(SourceError, match=r"unknown TPC-H table 'lineitems'.*--relation"):
        read_tpch(p)  # raised by the call, not on first iteration
    with pytest.raises(SourceError, match=r"unknown TPC-H table 'bogus'"):
        read_tpch(p, relation="bogus")
    with pytest.raises(SourceError, match="input file not found"):
        read_tpch(tmp_path / "lineitem.tbl")
    assert next(iter(read_tpch(p, relation="lineitem"))).error is None


def test_read_source_and_cli_route_tpch(tmp_path: Path) -> None:
    assert "tpch" in FORMATS
    p = write(tmp_path, "lineitem.tbl", LI_LINE + "|\n")
    recs = list(read_source(p, "tpch"))
    assert recs[0].value == next(iter(read_tpch(p))).value
    assert next(iter(read_source(p, "tpch", key_field="orderkey"))).key == b"1"
    odd = write(tmp_path, "li.dat", LI_LINE + "\n")
    with pytest.raises(SourceError, match="unknown TPC-H table"):
        read_source(odd, "tpch")
    assert next(iter(read_source(odd, "tpch", relation="lineitem"))).value == recs[0].value
    args = build_parser().parse_args(
        ["replay", "vwap", "--config", "c.yaml", "--input", str(p), "--format", "tpch"]
    )
    assert args.format == "tpch" and args.relation is None


def test_interleave_proportional(tmp_path: Path) -> None:
    def table(name: str, n: int, ncols: int) -> Path:
        return write(tmp_path, f"{name}.tbl", "".join(f"{i}|" + "1|" * (ncols - 1) + "\n" for i in range(n)))

    big = table("region", 30, 3)
    small = table("nation", 10, 4)
    out = list(interleave_tpch([big, small]))
    assert len(out) == 40 and all(r.error is None for _, r in out)
    rels = [rel for rel, _ in out]
    for k in range(1, 41):  # every prefix holds each table's share, to within one row
        assert abs(rels[:k].count("nation") - k * 10 / 40) <= 1
    assert [r.lineno for rel, r in out if rel == "region"] == list(range(1, 31))  # file order kept
    seq = list(interleave_tpch([big, small], proportional=False))
    assert [rel for rel, _ in seq] == ["region"] * 30 + ["nation"] * 10
    with pytest.raises(SourceError, match="listed twice"):
        interleave_tpch([big, big])
    with pytest.raises(SourceError, match="unknown TPC-H table"):
        interleave_tpch([big, write(tmp_path, "foo.tbl", "1|\n")])


def test_interleave_error_names_file(tmp_path: Path) -> None:
    a = write(tmp_path, "region.tbl", "0|A|c|\nbad\n")
    (err,) = [r for _, r in interleave_tpch([a]) if r.error]
    assert err.lineno == 2 and err.error.startswith("region.tbl: region has 3 columns")
