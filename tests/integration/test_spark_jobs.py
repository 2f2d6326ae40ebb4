"""Spark bootstrap and reconciliation through the framework, on the reference service."""

from __future__ import annotations

import json

import orjson
import pytest
from helpers import SAMPLE, ivm, offline_results, write_config

from shared.config import load_config
from shared.events import read_source
from shared.redis_client import connect
from shared.replay import replay_all
from shared.runtime import Worker
from shared.runtime.output import result_key
from shared.runtime.produce import produce_records
from shared.runtime.progress import group_progress
from shared.service import load_service
from shared.spark.jobs import BatchError, run_bootstrap, run_reconcile
from shared.state import open_store

SPLIT = 2000  # the snapshot holds the sample's first 2000 events, the topic the rest


def _run_to_end(service, config, bootstrap, store, group, redis_client=None):
    ends = {p.partition: p.high for p in group_progress(bootstrap, group, config.input_topic)}
    worker = Worker(service, config, bootstrap, store, group=group, redis_client=redis_client)
    results = {}

    def done(w: Worker) -> bool:
        if all((w.positions().get(p) or 0) == hi for p, hi in ends.items()):
            results.update(w.results())
            return True
        return False

    worker.run(until=done)
    return results


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
    cfg_path = write_config(
        tmp_path / "c.json",
        key_field="store",
        input_topic=topic,
        output_topic=f"{unique}.results",
        dlq_topic=f"{unique}.dlq",
        checkpoint_interval=0.2,
    )
    service = load_service("reference")
    config = load_config(service, cfg_path)
    snapshot = head if snapshot_form == "events-jsonl" else _as_table_dir(tmp_path / "snap", head)

    # The bootstrapped state equals what the engine builds from the same events.
    state_dir = tmp_path / "state"
    report = run_bootstrap(
        spark,
        service,
        config,
        str(snapshot),
        open_store("rocksdb", group, state_dir=state_dir),
        bootstrap_servers=broker.bootstrap,
        from_offsets="latest",
    )
    assert report.partitions == {0: 0, 1: 0, 2: 0} and report.keys == 5
    built = open_store("rocksdb", group, state_dir=state_dir)
    states = {k: s for p in range(3) for k, s in built.load(topic, p).snapshots.items()}
    built.close()
    from_engine = replay_all(service, config, read_source(head, key_field="store"))
    for key, engine in from_engine.engines.items():
        fresh = service.engine(config.options)
        fresh.restore(states[key])
        assert fresh.result() == engine.result()

    # Streaming the rest on top of it gives the result of streaming everything.
    produce_records(broker.bootstrap, topic, read_source(tail, key_field="store"))
    results = _run_to_end(
        service, config, broker.bootstrap, open_store("rocksdb", group, state_dir=state_dir), group
    )
    assert results == offline_results(cfg_path, SAMPLE)

    # Bootstrapping into a store that already has state is refused.
    with pytest.raises(BatchError, match="already exists"):
        run_bootstrap(
            spark,
            service,
            config,
            str(snapshot),
            open_store("rocksdb", group, state_dir=state_dir),
            bootstrap_servers=broker.bootstrap,
        )


def test_reconcile_passes_on_correct_results_and_catches_a_corrupted_one(
    spark, broker, redis_server, unique, tmp_path
):
    topic, group, out = f"{unique}.updates", f"{unique}-g", f"{unique}.results"
    broker.create_topic(topic, 3)
    cfg_path = write_config(
        tmp_path / "c.json",
        key_field="store",
        input_topic=topic,
        output_topic=out,
        dlq_topic=f"{unique}.dlq",
        checkpoint_interval=0.2,
    )
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
    _run_to_end(service, config, broker.bootstrap, open_store("memory", group), group, client)

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


def test_reconcile_cli_reports_and_records_the_verdict(broker, redis_server, unique, tmp_path):
    """The command a user runs: one summary line, a JSON report, exit status, verdict for /metrics."""
    topic, out = f"{unique}.updates", f"{unique}.results"
    broker.create_topic(topic, 1)
    cfg_path = write_config(
        tmp_path / "c.json", key_field="store", input_topic=topic, output_topic=out, dlq_topic=f"{unique}.dlq"
    )
    ivm(
        "produce",
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        topic,
        "--input",
        str(SAMPLE),
        "--key-field",
        "store",
    )
    service = load_service("reference")
    config = load_config(service, cfg_path)
    client = connect(redis_server.url)
    _run_to_end(service, config, broker.bootstrap, open_store("memory", f"{unique}-g"), f"{unique}-g", client)
    report = tmp_path / "report.json"
    proc = ivm(
        "reconcile",
        "reference",
        "--config",
        str(cfg_path),
        "--bootstrap",
        broker.bootstrap,
        "--redis",
        redis_server.url,
        "--report",
        str(report),
        timeout=300,
    )
    assert proc.stdout.strip().startswith("reconcile reference: MATCH on 5 key(s)")
    assert json.loads(report.read_text())["verdict"] == "match"
    assert orjson.loads(client.get(f"ivmstream:reconcile:{out}"))["verdict"] == "match"
