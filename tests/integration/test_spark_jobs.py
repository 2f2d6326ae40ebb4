"""Spark bootstrap and reconciliation through the framework, on the reference service."""

from __future__ import annotations

import json

import orjson
import pytest
from helpers import (
    SAMPLE,
    catch_up_with_workers,
    ivm_bootstrap,
    ivm_produce,
    ivm_reconcile,
    offline_results,
    published_results,
    rocksdb_snapshots,
    run_args,
    run_worker_to_end,
    spark_bootstrap,
    stream_config,
)

from ivmstream.config import load_config
from ivmstream.events import read_source
from ivmstream.redis_client import connect
from ivmstream.replay import replay_all
from ivmstream.runtime.output import result_key
from ivmstream.runtime.produce import produce_records
from ivmstream.service import load_service
from ivmstream.spark.jobs import BatchError
from ivmstream.spark.runs import run_reconcile
from ivmstream.state import open_store

SPLIT = 2000  # the snapshot holds the sample's first 2000 events, the topic the rest


@pytest.fixture
def split_sample(tmp_path):
    lines = SAMPLE.read_bytes().splitlines()
    head, tail = tmp_path / "head.jsonl", tmp_path / "tail.jsonl"
    head.write_bytes(b"\n".join(lines[:SPLIT]) + b"\n")
    tail.write_bytes(b"\n".join(lines[SPLIT:]) + b"\n")
    return head, tail


def _as_table_dir(path, events_file):
    """The same snapshot as a CSV table: the net bag, one row per tuple with its multiplicity."""
    bag: dict[tuple, int] = {}
    for line in events_file.read_bytes().splitlines():
        ev = orjson.loads(line)
        r = ev["row"]
        t = (r["store"], r["item"], r["qty"], r["price"])
        bag[t] = bag.get(t, 0) + ev["delta"]
    path.mkdir()
    rows = ["store,item,qty,price,delta"] + [",".join(map(str, t)) + f",{m}" for t, m in bag.items() if m]
    (path / "items.csv").write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("snapshot_form", ["events-jsonl", "csv-table"])
def test_bootstrap_then_stream_equals_streaming_everything(
    spark, broker, redis_server, unique, tmp_path, split_sample, snapshot_form
):
    head, tail = split_sample
    topic, group = f"{unique}.updates", f"{unique}-g"
    broker.create_topic(topic, 3)
    cfg_path = stream_config(tmp_path / "c.json", unique, key_field="store", checkpoint_interval=0.2)
    service = load_service("reference")
    config = load_config(service, cfg_path)
    snapshot = head if snapshot_form == "events-jsonl" else _as_table_dir(tmp_path / "snap", head)

    # The bootstrapped state equals what the engine builds from the same events.
    state_dir = tmp_path / "state"
    report = spark_bootstrap(
        spark,
        service,
        config,
        snapshot,
        group=group,
        state_dir=state_dir,
        bootstrap=broker.bootstrap,
        from_offsets="latest",
    )
    assert report.partitions == {0: 0, 1: 0, 2: 0} and report.keys == 5
    states = rocksdb_snapshots(
        group, state_dir, topic, partitions=3, new_engine=lambda: service.engine(config.options)
    )
    from_engine = replay_all(service, config, read_source(head, key_field="store"))
    for key, engine in from_engine.engines.items():
        fresh = service.engine(config.options)
        fresh.restore(states[key])
        assert fresh.result() == engine.result()

    # Streaming the rest on top of it gives the result of streaming everything.
    produce_records(broker.bootstrap, topic, read_source(tail, key_field="store"))
    results = run_worker_to_end(
        service, config, broker.bootstrap, open_store("rocksdb", group, state_dir=state_dir), group
    )
    assert results == offline_results(cfg_path, SAMPLE)

    # Bootstrapping into a store that already has state is refused.
    with pytest.raises(BatchError, match="already exists"):
        spark_bootstrap(
            spark, service, config, snapshot, group=group, state_dir=state_dir, bootstrap=broker.bootstrap
        )


def test_reconcile_passes_on_correct_results_and_catches_a_corrupted_one(
    spark, broker, redis_server, unique, tmp_path
):
    topic, group, out = f"{unique}.updates", f"{unique}-g", f"{unique}.results"
    broker.create_topic(topic, 3)
    cfg_path = stream_config(tmp_path / "c.json", unique, key_field="store", checkpoint_interval=0.2)
    service = load_service("reference")
    config = load_config(service, cfg_path)
    # The sample plus records the stream must refuse: they must not count in the recomputation either.
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(
        b'{"relation":"items","row":{"item":"fig","qty":1,"price":"1","store":"north"},"delta":-5}\n'
        b'{"relation":"items","row":{"item":"fig","qty":"x","price":"1","store":"north"},"delta":1}\n'
        b"not json\n"
    )
    produce_records(broker.bootstrap, topic, read_source(bad, key_field="store"))
    produce_records(broker.bootstrap, topic, read_source(SAMPLE, key_field="store"))
    client = connect(redis_server.url)
    run_worker_to_end(service, config, broker.bootstrap, open_store("memory", group), group, client)

    good = run_reconcile(spark, service, config, broker.bootstrap, client)
    assert good.verdict == "match", good.mismatches
    # north's refused delete and its badly typed row lie inside the checked range (before its result).
    assert good.keys == 5 and good.engine_refused == 1 and good.undecodable == 2
    # Without Redis the results come from the results topic itself, with the same verdict.
    assert run_reconcile(spark, service, config, broker.bootstrap, None).verdict == "match"

    record = orjson.loads(client.get(result_key(out, "north")))
    record["result"]["relations"]["items"]["sums"]["qty"] += 1
    client.set(result_key(out, "north"), orjson.dumps(record))
    bad_report = run_reconcile(spark, service, config, broker.bootstrap, client)
    assert bad_report.verdict == "mismatch"
    assert list(bad_report.mismatches) == ["north"]
    assert "sums.qty" in bad_report.mismatches["north"][0]


def test_reconcile_cli_reports_and_records_the_verdict(spark, broker, redis_server, unique, tmp_path):
    """The command a user runs: one summary line, a JSON report, exit status, verdict for /metrics."""
    topic, out = f"{unique}.updates", f"{unique}.results"
    broker.create_topic(topic, 1)
    cfg_path = stream_config(tmp_path / "c.json", unique, key_field="store")
    ivm_produce(broker.bootstrap, topic, SAMPLE, key_field="store")
    service = load_service("reference")
    config = load_config(service, cfg_path)
    client = connect(redis_server.url)
    run_worker_to_end(
        service, config, broker.bootstrap, open_store("memory", f"{unique}-g"), f"{unique}-g", client
    )
    report = tmp_path / "report.json"
    proc = ivm_reconcile(
        "reference", cfg_path, bootstrap=broker.bootstrap, redis=redis_server.url, report=report
    )
    assert proc.stdout.strip().startswith("reconcile reference: MATCH on 5 key(s)")
    assert json.loads(report.read_text())["verdict"] == "match"
    assert orjson.loads(client.get(f"ivmstream:reconcile:{out}"))["verdict"] == "match"


def test_snapshot_readers_parquet_tbl_csv_and_jsonl_agree(spark, tmp_path):
    """One bag written in every snapshot format reads back as the same typed rows."""
    from decimal import Decimal

    from ivmstream.events import Relation, Schema
    from ivmstream.spark.decode import KEY, MULT
    from ivmstream.spark.snapshot import SnapshotError, read_snapshot

    schema = Schema.of(Relation.of("lineitem", orderkey="int", price="decimal", flag="str"))
    rows = [(1, "10.50", "A"), (2, "0.25", "N"), (2, "0.25", "N")]
    expected = sorted(
        [("", 1, Decimal("10.5"), "A", 1), ("", 2, Decimal("0.25"), "N", 1), ("", 2, Decimal("0.25"), "N", 1)]
    )
    forms = {}
    d = tmp_path / "csv"
    d.mkdir()
    (d / "lineitem.csv").write_text("orderkey,price,flag\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    forms["csv"] = d
    d = tmp_path / "tbl"
    d.mkdir()
    (d / "lineitem.tbl").write_text("".join(f"{a}|{b}|{c}|\n" for a, b, c in rows))  # TPC-H: trailing '|'
    forms["tbl"] = d
    d = tmp_path / "parquet"
    d.mkdir()
    spark.createDataFrame(rows, "orderkey long, price string, flag string").write.parquet(str(d / "lineitem"))
    forms["parquet"] = d
    d = tmp_path / "jsonl"
    d.mkdir()
    (d / "lineitem.jsonl").write_text(
        "".join(f'{{"orderkey": {a}, "price": "{b}", "flag": "{c}"}}\n' for a, b, c in rows)
    )
    forms["jsonl"] = d
    for form, path in forms.items():
        df = read_snapshot(spark, path, schema)["lineitem"]
        got = sorted(
            (r[KEY], r["orderkey"], r["price"].normalize(), r["flag"], r[MULT]) for r in df.collect()
        )
        assert got == [(k, o, p.normalize(), f, m) for k, o, p, f, m in expected], form
    with pytest.raises(SnapshotError, match="no table for relation 'lineitem'"):
        read_snapshot(spark, tmp_path, schema)


def test_verdict_is_exported_on_the_workers_metrics(redis_server, unique):
    from prometheus_client import generate_latest

    from ivmstream.metrics import RuntimeMetrics
    from ivmstream.spark.jobs import ReconcileReport, record_verdict
    from ivmstream.verdict import reconcile_key

    client = connect(redis_server.url)
    metrics = RuntimeMetrics("reference")
    metrics.export_reconcile(client, reconcile_key(f"{unique}.results"))
    assert b"ivmstream_reconcile_ok" not in generate_latest(metrics.registry)  # nothing recorded yet
    record_verdict(client, ReconcileReport("reference", f"{unique}.results", "mismatch", 5, {"north": ["x"]}))
    text = generate_latest(metrics.registry).decode()
    assert 'ivmstream_reconcile_ok{service="reference"} 0.0' in text
    assert 'ivmstream_reconcile_mismatched_keys{service="reference"} 1.0' in text
    assert 'ivmstream_reconcile_keys{service="reference"} 5.0' in text


def test_bootstrap_cli_then_run_cli_continues(broker, redis_server, unique, tmp_path, split_sample):
    """The user path: `ivmstream bootstrap` writes RocksDB state, `ivmstream run` resumes from it."""
    head, tail = split_sample
    topic, group, out = f"{unique}.updates", f"{unique}-g", f"{unique}.results"
    broker.create_topic(topic, 2)
    cfg = stream_config(tmp_path / "c.json", unique, key_field="store", checkpoint_interval=0.2)
    state = tmp_path / "state"
    proc = ivm_bootstrap("reference", cfg, head, bootstrap=broker.bootstrap, state_dir=state, group=group)
    assert proc.stdout.startswith("bootstrapped 5 key(s) of reference into rocksdb state")
    ivm_produce(broker.bootstrap, topic, tail, key_field="store")
    args = run_args("reference", broker.bootstrap, cfg, group=group, state_dir=state, redis=redis_server.url)
    catch_up_with_workers(args, broker, unique, tmp_path)
    published = published_results(redis_server.url, out)
    assert published == offline_results(cfg, SAMPLE)
