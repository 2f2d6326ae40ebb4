"""The vwap service from the command line: order-book and multi-table TPC-H replays, readable errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import ivm, replay_result, write_config

from ivmstream.events import EventCodec, Schema, UpdateEvent
from ivmstream.events.orderbook import OrderBookAdaptor
from ivmstream.events.tpch import interleave_tpch
from ivmstream.services.vwap.engine import create_engine

DATA = Path(__file__).resolve().parents[2] / "services" / "vwap" / "data"
TINY = DATA / "finance-tiny.csv"  # DBToaster's tiny order-book trace
ORDERBOOK = ("--format", "orderbook")


def book_events(book: str) -> list[UpdateEvent]:
    """The tiny trace through the order-book adaptor, as the events an engine is given."""
    adaptor = OrderBookAdaptor(book=book)
    return [
        UpdateEvent(ev["relation"], ev["row"], ev["delta"], None)
        for line in TINY.read_text().splitlines()
        for ev in adaptor.feed_line(line)
    ]


def test_replay_of_the_tiny_trace_reproduces_dbtoasters_vwap(tmp_path):
    cfg = write_config(tmp_path / "c.json", query="vwap")
    bids_only = replay_result(cfg, TINY, "vwap", extra=[*ORDERBOOK, "--book", "bids"])
    assert bids_only["events"] == 84 and bids_only["rejected"] == 0
    assert bids_only["result"]["vwap"] == 491070000  # DBToaster's published value
    # By default the reader emits the sides the service declares (both): the VWAP reads only bids.
    default = replay_result(cfg, TINY, "vwap", extra=ORDERBOOK)
    assert default["events"] == len(book_events("both")) > 84
    assert default["result"]["vwap"] == 491070000


@pytest.mark.parametrize("query", ["psp", "mst"])
def test_two_sided_queries_read_both_book_sides_by_default(tmp_path, query):
    """psp and mst read bids and asks: replay must not feed them one side (psp then answered 0)."""
    cfg = write_config(tmp_path / "c.json", query=query)
    proc = ivm("replay", "vwap", "--config", str(cfg), "--input", str(TINY), *ORDERBOOK)
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    baseline = create_engine(query, "recompute")  # a different algorithm, given the trace's whole book
    assert not baseline.apply(book_events("both"))
    assert last["result"][query] == baseline.result()[query]
    assert last["result"][query], "the tiny trace has orders on both sides"
    assert "warning" not in proc.stderr
    # One side only, asked for explicitly: the result ignores asks, and replay says so once.
    proc = ivm("replay", "vwap", "--config", str(cfg), "--input", str(TINY), *ORDERBOOK, "--book", "bids")
    assert proc.stderr.count("warning") == 1
    assert "no event for relation(s) asks in" in proc.stderr and "(vwap declares bids, asks)" in proc.stderr


def test_replay_of_several_tpch_tables_interleaves_them(tmp_path):
    cfg = write_config(tmp_path / "c.json", query="q18", threshold=150)
    tables = [str(DATA / "tpch-tiny" / f"{t}.csv") for t in ("customer", "orders", "lineitem")]
    args = ["replay", "vwap", "--config", str(cfg), "--format", "tpch"]
    for t in tables:
        args += ["--input", t]
    last = json.loads(ivm(*args).stdout.strip().splitlines()[-1])
    engine = create_engine("q18", "recompute", {"threshold": 150})
    codec = EventCodec(Schema.of(*engine.relations.values()))
    events = [codec.decode(rec.value) for _rel, rec in interleave_tpch(tables)]
    assert not engine.apply(events)
    assert last["events"] == len(events)
    assert last["result"]["q18"] == engine.result()["q18"]
    assert last["result"]["q18"], "the tiny tables have orders above the threshold"


def test_bad_inputs_are_one_line_errors(tmp_path):
    cfg = write_config(tmp_path / "c.json", query="vwap")
    tiny = str(TINY)
    proc = ivm(
        "replay",
        "vwap",
        "--config",
        str(cfg),
        "--input",
        tiny,
        "--input",
        str(tmp_path / "missing.csv"),
        "--format",
        "orderbook",
        check=False,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "missing.csv" in proc.stderr
    bad = write_config(tmp_path / "bad.json", query="vwap", variant="b")
    proc = ivm("replay", "vwap", "--config", str(bad), "--input", tiny, "--format", "orderbook", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "variant" in proc.stderr


def test_refused_events_are_reported_with_line_numbers(tmp_path):
    cfg = write_config(tmp_path / "c.json", query="vwap")
    row = {"t": 1, "id": 1, "broker_id": 1, "volume": 5, "price": 100}
    lines = [
        {"relation": "bids", "row": row, "delta": 1},
        {"relation": "bids", "row": dict(row, volume=0), "delta": 1},
        {"relation": "bids", "row": dict(row, id=2), "delta": -1},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    proc = ivm("replay", "vwap", "--config", str(cfg), "--input", str(src), check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        "ivmstream: error: 2 of 3 input events were rejected, listed above (--allow-rejects exits 0 anyway)"
    )
    assert "in.jsonl:2: rejected (non-positive-volume)" in proc.stderr
    assert "in.jsonl:3: rejected (absent-tuple)" in proc.stderr
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    assert last["events"] == 1 and last["rejected"] == 2 and last["result"]["vwap"] == 500
    tolerated = ivm("replay", "vwap", "--config", str(cfg), "--input", str(src), "--allow-rejects")
    assert json.loads(tolerated.stdout.strip().splitlines()[-1]) == last


def test_adaptor_and_cli_agree_on_both_books(tmp_path):
    cfg = write_config(tmp_path / "c.json", query="mst")
    last = replay_result(cfg, TINY, "vwap", extra=[*ORDERBOOK, "--read-option", "book=both"])
    engine = create_engine("mst", "dbtoaster")
    for event in book_events("both"):
        engine.apply([event])
    assert last["result"]["mst"] == engine.result()["mst"]
