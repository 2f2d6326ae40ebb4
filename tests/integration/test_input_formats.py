"""Input formats from the command line and the runtime: tbl for a service, what produce reports,
and declared relations that receive no event (replay, produce, the worker's log line and metric)."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import orjson
from helpers import (
    catch_up_with_workers,
    ivm,
    read_topic,
    replay_result,
    run_args,
    stream_config,
    write_config,
)

from ivmstream.config import load_config
from ivmstream.events import OrderBookAdaptor, read_source
from ivmstream.runtime import Worker
from ivmstream.runtime.clients import KafkaClients
from ivmstream.runtime.produce import produce_records
from ivmstream.runtime.progress import group_progress
from ivmstream.service import load_service
from ivmstream.state import open_store

TINY = Path(__file__).resolve().parents[2] / "services" / "vwap" / "data" / "finance-tiny.csv"
RELATIONS = {
    "items": {"item": "str", "qty": "int", "price": "decimal"},
    "returns": {"item": "str", "qty": "int"},
}
ITEMS_TBL = "0042|3|1.50|\npear|-2|0.25\nfig|7|10|\n"  # a trailing | on some lines, as dbgen writes
ITEM_EVENTS = [  # the same rows, written out by hand
    {"relation": "items", "row": {"item": "0042", "qty": 3, "price": "1.50"}, "delta": 1},
    {"relation": "items", "row": {"item": "pear", "qty": -2, "price": "0.25"}, "delta": 1},
    {"relation": "items", "row": {"item": "fig", "qty": 7, "price": 10}, "delta": 1},
]


def tiny_book_counts() -> Counter[str]:
    adaptor = OrderBookAdaptor(book="both")
    return Counter(ev["relation"] for line in TINY.read_text().splitlines() for ev in adaptor.feed_line(line))


def test_replay_reads_tbl_with_the_services_columns_and_names_silent_relations(tmp_path):
    cfg = write_config(tmp_path / "c.json", relations=RELATIONS)
    tbl = tmp_path / "items.tbl"
    tbl.write_text(ITEMS_TBL)
    jsonl = tmp_path / "items.jsonl"
    jsonl.write_text("".join(json.dumps(e) + "\n" for e in ITEM_EVENTS))
    proc = ivm("replay", "reference", "--config", str(cfg), "--input", str(tbl))  # .tbl: format and relation
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    assert last == replay_result(cfg, jsonl)
    assert last["events"] == 3 and last["rejected"] == 0
    assert proc.stderr.count("warning") == 1
    assert f"no event for relation(s) returns in {tbl} (reference declares items, returns)" in proc.stderr
    # --relation overrides the file name
    other = tmp_path / "data.tbl"
    other.write_text(ITEMS_TBL)
    named = replay_result(cfg, other, extra=["--format", "tbl", "--relation", "items"])
    assert named == last


def test_produce_tbl_for_a_service_uses_its_columns_topic_and_key(broker, unique, tmp_path):
    cfg = stream_config(tmp_path / "c.json", unique, relations=RELATIONS, key_field="store")
    tbl = tmp_path / "items.tbl"
    tbl.write_text("".join(f"{line.rstrip('|')}|north\n" for line in ITEMS_TBL.splitlines()))
    columns = "item,qty,price,store"
    proc = ivm(
        "produce", "--bootstrap", broker.bootstrap, "--service", "reference", "--config", str(cfg),
        "--input", str(tbl), "--read-option", f"columns={columns}",
    )  # fmt: skip
    assert f"produced 3 records to {unique}.updates" in proc.stdout
    assert "relations emitted: items 3" in proc.stderr
    assert "no event for relation(s) returns" in proc.stderr
    msgs = read_topic(broker.bootstrap, f"{unique}.updates", expect=3)
    assert [m.key() for m in msgs] == [b"north"] * 3  # the config's key_field
    expected = [dict(e, row={**e["row"], "store": "north"}) for e in ITEM_EVENTS]
    assert [orjson.loads(m.value()) for m in msgs] == expected


def test_produce_reports_the_relations_it_emitted(broker, unique, tmp_path):
    counts = tiny_book_counts()
    assert counts["bids"] and counts["asks"]
    topic = f"{unique}.book"
    proc = ivm(
        "produce",
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        topic,
        "--input",
        str(TINY),
        "--format",
        "orderbook",
    )
    # without a service nothing the trace holds is left out: both sides
    assert f"relations emitted: bids {counts['bids']}, asks {counts['asks']}" in proc.stderr
    assert f"produced {counts.total()} records to {topic}" in proc.stdout
    psp = write_config(tmp_path / "psp.json", query="psp")
    proc = ivm(
        "produce", "--bootstrap", broker.bootstrap, "--topic", f"{unique}.bids", "--input", str(TINY),
        "--format", "orderbook", "--book", "bids", "--service", "vwap", "--config", str(psp),
    )  # fmt: skip
    assert f"relations emitted: bids {counts['bids']}\n" in proc.stderr
    assert (
        "warning: no event for relation(s) asks" in proc.stderr
        and "(vwap declares bids, asks)" in proc.stderr
    )


def _run_to_end(worker: Worker, topic: str, group: str, bootstrap: str) -> None:
    ends = {p.partition: p.high for p in group_progress(bootstrap, group, topic)}
    worker.run(until=lambda w: all((w.positions().get(p) or 0) == hi for p, hi in ends.items()))


def test_worker_logs_a_relation_without_events_once_and_counts_events_per_relation(
    broker, unique, tmp_path, caplog
):
    service = load_service("vwap")
    config = load_config(service, stream_config(tmp_path / "c.json", unique, query="psp", batch_size=10))
    records = list(read_source(TINY, "orderbook", book="bids"))
    bids = tiny_book_counts()["bids"]
    assert len(records) == bids
    broker.create_topic(config.input_topic, 1)
    assert produce_records(broker.bootstrap, config.input_topic, records).sent == bids

    caplog.set_level(logging.WARNING, logger="ivmstream.runtime")
    group = f"{unique}-g"
    worker = Worker(
        service,
        config,
        KafkaClients(broker.bootstrap),
        open_store("memory", group),
        group=group,
        silent_relation_after=20,
    )
    _run_to_end(worker, config.input_topic, group, broker.bootstrap)
    warnings = [r.getMessage() for r in caplog.records if "received no event" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once, though many batches followed and the worker stopped
    assert "vwap: relation asks received no event in the first" in warnings[0]
    sample = worker.metrics.registry.get_sample_value
    assert sample("ivmstream_relation_events_total", {"service": "vwap", "relation": "bids"}) == bids
    assert sample("ivmstream_relation_events_total", {"service": "vwap", "relation": "asks"}) == 0

    # Without a threshold the report comes at shutdown.
    caplog.clear()
    group = f"{unique}-h"
    worker = Worker(
        service,
        config,
        KafkaClients(broker.bootstrap),
        open_store("memory", group),
        group=group,
        silent_relation_after=None,
    )
    _run_to_end(worker, config.input_topic, group, broker.bootstrap)
    warnings = [r.getMessage() for r in caplog.records if "received no event" in r.getMessage()]
    assert (
        len(warnings) == 1 and f"asks received no event before shutdown ({bids} input records)" in warnings[0]
    )


def test_run_names_a_silent_relation_once_after_the_given_input(broker, unique, tmp_path):
    cfg = stream_config(tmp_path / "c.json", unique, query="mst", batch_size=10)
    broker.create_topic(f"{unique}.updates", 1)
    proc = ivm(
        "produce", "--bootstrap", broker.bootstrap, "--service", "vwap", "--config", str(cfg),
        "--input", str(TINY), "--format", "orderbook", "--book", "bids",
    )  # fmt: skip
    assert f"produced {tiny_book_counts()['bids']} records to {unique}.updates" in proc.stdout
    args = run_args("vwap", broker.bootstrap, cfg, group=f"{unique}-g", state_dir=tmp_path / "s")
    catch_up_with_workers([*args, "--silent-relation-after", "30"], broker, unique, tmp_path)
    log = (tmp_path / "w0.log").read_text()
    assert log.count("received no event") == 1, log
    assert "vwap: relation asks received no event in the first " in log


TOY_SERVICE = '''
"""A service that reuses the reference engine and adds an input format of its own."""
import dataclasses

import orjson

from ivmstream.events import InputFormat, ReadOption, SourceRecord
from ivmstream.options import positive_int
from ivmstream.service import load_service


def read_pairs(req):
    scale = req.options["scale"]
    lines = req.path.read_text().split()

    def records():
        for i, line in enumerate(lines, 1):
            item, qty = line.split("=")
            row = {"item": item, "qty": int(qty) * scale, "price": 1}
            yield SourceRecord(i, orjson.dumps({"relation": "items", "row": row, "delta": 1}))

    return records()


SCALE = ReadOption(1, positive_int(text=True), "factor")
PAIRS = InputFormat("pairs", "item=qty words", read_pairs, {"scale": SCALE})
SERVICE = dataclasses.replace(load_service("reference"), name="toy", formats={"pairs": PAIRS})
'''


def test_replay_accepts_the_formats_a_service_declares(tmp_path, monkeypatch, capfd):
    from ivmstream.cli import main

    (tmp_path / "toy_service.py").write_text(TOY_SERVICE)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = write_config(tmp_path / "c.json")
    words = tmp_path / "in.words"
    words.write_text("fig=2 kiwi=5\n")
    jsonl = tmp_path / "same.jsonl"
    jsonl.write_text(
        "".join(
            json.dumps({"relation": "items", "row": {"item": i, "qty": q, "price": 1}, "delta": 1}) + "\n"
            for i, q in (("fig", 6), ("kiwi", 15))
        )
    )
    replay = ["replay", "toy_service:SERVICE", "--config", str(cfg), "--input", str(words)]
    assert main([*replay, "--format", "pairs", "--read-option", "scale=3"]) == 0
    got = json.loads(capfd.readouterr().out.strip().splitlines()[-1])
    assert got == replay_result(cfg, jsonl)
    assert main([*replay, "--format", "pairs", "--read-option", "scale=0"]) == 1
    err = capfd.readouterr().err
    assert "format pairs: read option 'scale' must be a positive integer (got '0')" in err
    assert main([*replay, "--format", "words"]) == 1
    assert (
        "(known: jsonl, csv, tbl, orderbook, tpch, debezium-json, maxwell-json, canal-json, upsert-json, "
        "pairs)" in capfd.readouterr().err
    )
    # the built-in registry is unchanged: other services do not see it
    reference = ["replay", "reference", "--config", str(cfg), "--input", str(words)]
    assert main([*reference, "--format", "pairs"]) == 1
    assert "unknown input format 'pairs'" in capfd.readouterr().err
