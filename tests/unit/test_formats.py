"""The input-format registry, reader options, the tbl format, order-book sides and relation coverage."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import write_file as write

from ivmstream.events import (
    FORMATS,
    EventCodec,
    EventError,
    FormatRegistry,
    InputFormat,
    OrderBookAdaptor,
    ReadOption,
    ReadRequest,
    Relation,
    Schema,
    SourceError,
    SourceRecord,
    UpdateEvent,
    read_source,
    relation_of,
)
from ivmstream.events.coverage import RelationCoverage
from ivmstream.events.formats import merge_options, name_list, one_char, parse_assignments
from ivmstream.options import positive_int

EVENTS_DIR = Path(__file__).resolve().parents[2] / "shared" / "events"

TRADES = Relation.of("trades", sym="str", qty="int", px="exact", ok="bool", w="float")
QUOTES = Relation.of("quotes", sym="str", bid="int")
SCHEMA = Schema.of(TRADES, QUOTES)
BOOK_COLS = {"t": "int", "id": "int", "broker_id": "int", "volume": "int", "price": "int"}
BIDS, ASKS = Relation.of("bids", **BOOK_COLS), Relation.of("asks", **BOOK_COLS)


def rows(records: list[SourceRecord]) -> list[dict[str, Any]]:
    return [orjson.loads(r.value)["row"] for r in records]


# --- the registry ------------------------------------------------------------------------------------


def test_builtin_formats_are_registered_by_name() -> None:
    assert list(FORMATS)[:5] == ["jsonl", "csv", "tbl", "orderbook", "tpch"]
    assert list(FORMATS)[5:] == ["debezium-json", "maxwell-json", "canal-json", "upsert-json"]
    assert "tbl" in FORMATS and FORMATS["orderbook"].name == "orderbook"
    assert set(FORMATS["orderbook"].options) == {"book", "brokers"}
    assert set(FORMATS["csv"].options) == {"delimiter", "columns", "delta_column"}


def test_unknown_format_names_the_known_ones(tmp_path: Path) -> None:
    p = write(tmp_path, "a.jsonl", "")
    with pytest.raises(SourceError, match=r"unknown input format 'parquet' \(known: jsonl, csv, tbl"):
        read_source(p, "parquet")


def _echo_reader(req: ReadRequest) -> Iterator[SourceRecord]:
    """A toy format: every line is one event of ``req.relation`` whose single column is the line, scaled."""
    if req.schema is None:
        raise SourceError("echo needs a service")
    lines = req.path.read_text().splitlines()
    scale = req.options["scale"]
    return iter(
        SourceRecord(
            i,
            orjson.dumps({"relation": req.relation, "row": {"v": int(line) * scale}, "delta": 1}),
            relation=req.relation,
        )
        for i, line in enumerate(lines, 1)
    )


ECHO = InputFormat(
    "echo",
    "test lines",
    _echo_reader,
    {"scale": ReadOption(1, positive_int(text=True), "factor")},
    (".echo",),
)


def test_a_service_format_extends_a_copy_of_the_registry(tmp_path: Path) -> None:
    mine = FORMATS.extended({"echo": ECHO}, owner="service toy")
    assert "echo" in mine and "echo" not in FORMATS  # the built-in registry is left as it was
    assert list(mine)[: len(FORMATS)] == list(FORMATS)
    p = write(tmp_path, "x.echo", "1\n2\n")
    schema = Schema.of(Relation.of("r", v="int"))
    recs = list(read_source(p, formats=mine, relation="r", schema=schema, scale="10"))  # guessed by suffix
    assert rows(recs) == [{"v": 10}, {"v": 20}]
    assert [relation_of(r) for r in recs] == ["r", "r"]
    with pytest.raises(SourceError, match="echo needs a service"):
        read_source(p, "echo", formats=mine)  # the reader's own check runs on the call
    with pytest.raises(SourceError, match="cannot tell the format"):
        read_source(p)  # the built-ins know no .echo


def test_registration_mistakes_are_refused() -> None:
    with pytest.raises(ValueError, match="takes the name of a format registered already"):
        FORMATS.extended({"csv": InputFormat("csv", "mine", _echo_reader)}, owner="service toy")
    with pytest.raises(ValueError, match="must map to an InputFormat named 'other'"):
        FORMATS.extended({"other": ECHO}, owner="service toy")
    registry = FormatRegistry([ECHO])
    with pytest.raises(ValueError, match="registered already"):
        registry.register(ECHO)
    with pytest.raises(TypeError):
        registry.register("echo")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("a.jsonl", "jsonl"),
        ("b.ndjson", "jsonl"),
        ("c.csv", "csv"),
        ("lineitem.tbl", "tbl"),
        ("D.TBL", "tbl"),
    ],
)
def test_guess_by_suffix(name: str, fmt: str) -> None:
    assert FORMATS.guess(name) == fmt


def test_help_lists_every_format_and_option_default() -> None:
    text = FORMATS.describe()
    for name in FORMATS:
        assert f"{name}: " in text
    assert (
        "book (default auto)" in text and "brokers (default 10)" in text and "delimiter (default ,)" in text
    )


# --- read options -------------------------------------------------------------------------------------


def test_options_get_defaults_and_are_typed_from_text_or_values() -> None:
    ob = FORMATS["orderbook"]
    assert ob.parse_options({}) == {"book": "auto", "brokers": 10}
    assert ob.parse_options({"brokers": "4"}) == {"book": "auto", "brokers": 4}
    assert ob.parse_options({"brokers": 4, "book": "asks"}) == {"book": "asks", "brokers": 4}
    assert FORMATS["csv"].parse_options({"delimiter": "\\t", "columns": "a, b"})["delimiter"] == "\t"
    assert FORMATS["csv"].parse_options({"columns": "a, b"})["columns"] == ("a", "b")


def test_an_unknown_option_names_the_format_the_key_and_the_allowed_keys() -> None:
    with pytest.raises(SourceError) as info:
        FORMATS["orderbook"].parse_options({"bok": "bids"})
    assert str(info.value) == "format orderbook: unknown read option 'bok' (options: book, brokers)"
    with pytest.raises(
        SourceError, match=r"format jsonl: unknown read option 'book' \(options: it takes none\)"
    ):
        FORMATS["jsonl"].parse_options({"book": "bids"})


def test_a_bad_value_names_the_format_the_key_and_the_allowed_values() -> None:
    with pytest.raises(SourceError) as info:
        FORMATS["orderbook"].parse_options({"book": "sells"})
    assert str(info.value) == (
        "format orderbook: read option 'book' must be one of auto, bids, asks, both (got 'sells')"
    )
    with pytest.raises(
        SourceError, match="format orderbook: read option 'brokers' must be a positive integer"
    ):
        FORMATS["orderbook"].parse_options({"brokers": "-3"})
    with pytest.raises(SourceError, match="format csv: read option 'delimiter' must be one character"):
        FORMATS["csv"].parse_options({"delimiter": ";;"})


@pytest.mark.parametrize(
    "bad", ["0", "x", "1.5", " ", True, 0, -1, "\u0661"]
)  # an Arabic-Indic digit: str.isdigit() says yes
def test_positive_int_refuses(bad: Any) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        positive_int(text=True)(bad)


def test_small_parsers() -> None:
    assert one_char("tab") == "\t" and one_char("space") == " " and one_char("|") == "|"
    for bad in ("", "ab", "\n", 3):
        with pytest.raises(ValueError):
            one_char(bad)
    assert name_list(["a", "b"]) == ("a", "b")
    for bad in ("a,,b", "a,a", "", 5):
        with pytest.raises(ValueError):
            name_list(bad)


def test_assignments_and_merging() -> None:
    assert parse_assignments(["book=asks", "columns=a,b=c"]) == {"book": "asks", "columns": "a,b=c"}
    with pytest.raises(SourceError, match="--read-option expects KEY=VALUE, got 'book'"):
        parse_assignments(["book"])
    with pytest.raises(SourceError, match="--read-option book given twice"):
        parse_assignments(["book=asks", "book=bids"])
    assert merge_options({"book": "asks"}, {"book": "asks", "brokers": 3}) == {"book": "asks", "brokers": 3}
    with pytest.raises(SourceError, match="read option 'book' given twice"):
        merge_options({"book": "asks"}, {"book": "bids"})


def test_bad_options_fail_on_the_call_not_on_iteration(tmp_path: Path) -> None:
    p = write(tmp_path, "f.csv", "1,2,B,3,4\n")
    with pytest.raises(SourceError, match="unknown read option 'delimiter'"):
        read_source(p, "orderbook", delimiter=";")
    with pytest.raises(SourceError, match="input file not found"):
        read_source(tmp_path / "none.tbl", "tbl", options={"columns": "a"})


# --- tbl -----------------------------------------------------------------------------------------------


def test_tbl_types_cells_by_the_relations_declared_columns(tmp_path: Path) -> None:
    p = write(tmp_path, "trades.tbl", "007|3|17.50|true|2.5|\nIBM|-4|+12|False|3\n")
    recs = list(read_source(p, schema=SCHEMA))  # .tbl -> tbl; the relation from the file name
    assert [(r.lineno, r.relation, r.error) for r in recs] == [(1, "trades", None), (2, "trades", None)]
    assert rows(recs) == [
        {"sym": "007", "qty": 3, "px": "17.50", "ok": True, "w": 2.5},  # a str column keeps its digits
        {"sym": "IBM", "qty": -4, "px": 12, "ok": False, "w": 3.0},
    ]
    codec = EventCodec(SCHEMA)
    assert codec.decode(recs[0].value) == UpdateEvent(
        "trades", {"sym": "007", "qty": 3, "px": Decimal("17.50"), "ok": True, "w": 2.5}, 1
    )


def test_tbl_relation_from_the_flag_or_the_name_up_to_its_first_dot(tmp_path: Path) -> None:
    split = write(tmp_path, "quotes.tbl.2", "A|5\n")
    (rec,) = read_source(split, "tbl", schema=SCHEMA)
    assert orjson.loads(rec.value) == {"relation": "quotes", "row": {"sym": "A", "bid": 5}, "delta": 1}
    other = write(tmp_path, "q.tbl", "A|5\n")
    (rec,) = read_source(other, relation="quotes", schema=SCHEMA)
    assert rec.relation == "quotes"
    with pytest.raises(
        SourceError, match=r"format tbl: 'q' \(from the file name 'q.tbl'\) is not a relation"
    ):
        read_source(other, schema=SCHEMA)
    with pytest.raises(SourceError, match=r"'nope' \(from --relation\) is not a relation .*trades, quotes"):
        read_source(other, relation="nope", schema=SCHEMA)


def test_tbl_without_a_service_needs_columns(tmp_path: Path) -> None:
    p = write(tmp_path, "quotes.tbl", "A|5|\nB|x\n")
    with pytest.raises(SourceError, match=r"format tbl needs the columns of 'quotes'.*columns=a,b,c"):
        read_source(p)
    recs = list(read_source(p, options={"columns": "sym,bid"}))
    assert rows(recs) == [{"sym": "A", "bid": 5}, {"sym": "B", "bid": "x"}]  # untyped: guessed like CSV
    typed = list(read_source(p, options={"columns": "bid,sym"}, schema=SCHEMA))  # a different order
    assert rows(typed) == [{"bid": "A", "sym": "5"}, {"bid": "B", "sym": "x"}]


def test_tbl_bad_rows_still_become_events_that_validation_names(tmp_path: Path) -> None:
    p = write(tmp_path, "quotes.tbl", b"A\nB|1|2|\nC||\nD|x\n\n E|\xff\n")
    recs = list(read_source(p, schema=SCHEMA))
    assert [r.lineno for r in recs] == [1, 2, 3, 4, 6]
    assert recs[4].error is not None and "UTF-8" in recs[4].error
    codec = EventCodec(SCHEMA)
    codes = []
    for rec in recs[:4]:
        with pytest.raises(EventError) as info:
            codec.decode(rec.value)
        codes.append(info.value.code)
    assert codes == ["missing-column", "unexpected-column", "null-value", "wrong-type"]


def test_tbl_keys_records_by_a_key_column_named_in_columns(tmp_path: Path) -> None:
    p = write(tmp_path, "quotes.tbl", "north|A|5\n")
    keyed = Schema.of(QUOTES, key_field="store")
    (rec,) = read_source(p, schema=keyed, key_field="store", options={"columns": "store,sym,bid"})
    assert rec.key == b"north"
    assert EventCodec(keyed).decode(rec.value) == UpdateEvent("quotes", {"sym": "A", "bid": 5}, 1, "north")


# --- order book sides -------------------------------------------------------------------------------

TRACE = "1,10,B,5,100\n2,11,S,7,101\n3,10,E,2,0\n4,11,D,0,0\n5,12,S,1,99\n"


def adaptor_events(book: str) -> list[dict[str, Any]]:
    a = OrderBookAdaptor(book=book)
    return [ev for line in TRACE.splitlines() for ev in a.feed_line(line)]


@pytest.mark.parametrize(
    ("schema", "book"),
    [
        (Schema.of(BIDS, ASKS), "both"),
        (Schema.of(BIDS), "bids"),
        (Schema.of(ASKS), "asks"),
        (None, "both"),  # no service: nothing the trace holds is left out
    ],
)
def test_orderbook_auto_reads_the_sides_the_service_declares(
    tmp_path: Path, schema: Schema | None, book: str
) -> None:
    p = write(tmp_path, "finance.csv", TRACE)
    recs = list(read_source(p, "orderbook", schema=schema))
    assert [orjson.loads(r.value) for r in recs] == adaptor_events(book)
    assert [r.relation for r in recs] == [ev["relation"] for ev in adaptor_events(book)]


def test_orderbook_explicit_book_wins_and_a_bookless_service_is_an_error(tmp_path: Path) -> None:
    p = write(tmp_path, "finance.csv", TRACE)
    recs = list(read_source(p, "orderbook", schema=Schema.of(BIDS, ASKS), book="bids"))
    assert [orjson.loads(r.value) for r in recs] == adaptor_events("bids")
    with pytest.raises(SourceError, match=r"declares neither bids nor asks .*book=bids\|asks\|both"):
        read_source(p, "orderbook", schema=SCHEMA)


# --- record relations and coverage -------------------------------------------------------------------


def test_relation_of_reads_what_the_reader_said_or_the_bytes() -> None:
    assert relation_of(SourceRecord(1, b"{}", relation="r")) == "r"
    assert relation_of(SourceRecord(1, b'{"relation":"bids","row":{},"delta":1}')) == "bids"
    assert relation_of(SourceRecord(1, b'{"delta":1, "relation": "a\\u0062", "row":{}}')) == "ab"
    assert relation_of(SourceRecord(1, b"not json")) is None
    assert relation_of(SourceRecord(1, b'{"relation": 5}')) is None


def ev(relation: str) -> UpdateEvent:
    return UpdateEvent(relation, {}, 1)


def test_coverage_counts_per_relation_and_reports_silent_ones_once() -> None:
    cov = RelationCoverage(["bids", "asks", "trades"], report_after=5)
    assert cov.count([[ev("bids"), ev("bids")], [ev("trades")]]) == {"bids": 2, "trades": 1}
    assert cov.observe(3) == []  # not yet at the threshold
    assert cov.observe(3) == ["asks"]
    assert cov.observe(10) == []  # said once
    cov.count([[ev("asks")]])
    assert cov.counts == {"bids": 2, "asks": 1, "trades": 1} and cov.silent() == []
    assert cov.final() == []


def test_coverage_of_one_relation_and_the_final_report() -> None:
    cov = RelationCoverage(["r"])
    assert cov.observe(10**9) == []  # no threshold: only the final report
    assert cov.count([[], []]) == {}
    assert cov.final() == ["r"] and cov.final() == []
    cov = RelationCoverage(["r"])
    assert cov.count([[ev("r")] * 3, [ev("r")]]) == {"r": 4}
    assert cov.final() == []


# --- module structure -------------------------------------------------------------------------------


def _imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):  # function-level imports count too: no lazy import may hide a cycle
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ivmstream.events."):
            found.add(node.module.rsplit(".", 1)[1])
        elif isinstance(node, ast.Import):
            found.update(
                a.name.rsplit(".", 1)[1] for a in node.names if a.name.startswith("ivmstream.events.")
            )
    return found


def test_event_modules_import_each_other_one_way_only() -> None:
    graph = {p.stem: _imports_of(p) for p in EVENTS_DIR.glob("*.py") if p.stem != "__init__"}
    assert "readers" not in graph["tpch"] and "tpch" in graph["readers"]
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"import cycle: {' -> '.join((*path, node))}"
        if node in done:
            return
        for nxt in graph.get(node, ()):
            visit(nxt, (*path, node))
        done.add(node)

    for module in graph:
        visit(module, ())
