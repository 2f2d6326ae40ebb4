"""Spark over change data: bootstrap a keyless view over two Debezium topics (4 partitions each, half the
records schema-wrapped, bad ones among them) from the topics, let a worker go on from there, and
reconcile its published view against the records; an upsert topic's images carried from bootstrap to the
worker; a snapshot of change files (Debezium, Maxwell) read as replay reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from ivmstream.config import build_config, schema_of
from ivmstream.events import SourceRecord, read_source
from ivmstream.events.changes import ChangeSpec
from ivmstream.replay import replay_all
from ivmstream.runtime import Worker
from ivmstream.runtime.clients import KafkaClients
from ivmstream.runtime.hooks import Hooks
from ivmstream.runtime.kafka import producer_settings
from ivmstream.service import load_service
from ivmstream.spark.changes import change_file, file_spec
from ivmstream.spark.inputs import read_snapshot_changes
from ivmstream.spark.jobs import BatchError
from ivmstream.spark.runs import run_bootstrap, run_reconcile
from ivmstream.state import MemoryStore
from tests.helpers_cdc import RELATIONS, Record, workload

pytestmark = pytest.mark.spark

SERVICE = load_service("reference")
EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "change-data"


def _produce(bootstrap: str, records: list[Record], topics: dict[str, str]) -> None:
    producer = Producer(producer_settings(bootstrap))
    for r in records:
        producer.produce(topics[r.topic], r.value, r.key, partition=r.partition)
    producer.flush(30)


def _run(config: Any, bootstrap: str, store: MemoryStore, total: int, group: str) -> dict[str, Any]:
    worker = Worker(SERVICE, config, KafkaClients(bootstrap), store, group=group)
    worker.run(until=lambda w: sum(w.positions().values()) >= total)  # type: ignore[arg-type,misc]
    return orjson.loads(orjson.dumps(worker.results()))  # type: ignore[no-any-return]


def _json(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def test_bootstrap_from_debezium_topics_then_the_worker_then_reconcile(spark, broker, unique) -> None:
    w = workload(seed=11, changes=300)
    topics = {"db.orders": f"{unique}.orders", "db.customers": f"{unique}.customers"}
    for topic in topics.values():
        broker.create_topic(topic, 4)
    half = len(w.records) // 2
    _produce(broker.bootstrap, w.records[:half], topics)
    config = build_config(
        SERVICE,
        {
            "relations": RELATIONS,
            "inputs": [{"topic": t, "format": "debezium-json"} for t in topics.values()],
            "output_topic": f"{unique}.out",
            "dlq_topic": f"{unique}.dlq",
            "checkpoint_interval": 0.2,
        },
    )
    store = MemoryStore()
    report = run_bootstrap(spark, SERVICE, config, None, store, bootstrap_servers=broker.bootstrap)
    assert report.keys == 1 and sum(report.inputs.values()) == half
    # The worker resumes where bootstrap ended: it reads only the second half.
    _produce(broker.bootstrap, w.records[half:], topics)
    read: list[int] = []
    hooks = Hooks(batch_received=[read.append])
    worker = Worker(SERVICE, config, KafkaClients(broker.bootstrap), store, group=f"{unique}-g", hooks=hooks)
    worker.run(until=lambda w_: sum(w_.positions().values()) >= len(w.records))  # type: ignore[arg-type,misc]
    expected = replay_all(SERVICE, build_config(SERVICE, {"relations": RELATIONS}), w.final_events()).result()
    assert _json(worker.results()[""]) == _json(expected)
    assert sum(read) == len(w.records) - half

    verdict = run_reconcile(spark, SERVICE, config, broker.bootstrap, None)
    assert verdict.verdict == "match", verdict.mismatches
    # bad records: dead-lettered by the worker, or (read by bootstrap) refused by Spark's decoding
    assert verdict.engine_refused + verdict.undecodable == sum(w.bad.values())
    assert set(verdict.offsets) == {f"{t}:{p}" for t in topics.values() for p in range(4)}


def test_an_upsert_topics_images_go_from_bootstrap_to_the_worker(spark, broker, unique) -> None:
    topic = f"{unique}.prices"
    broker.create_topic(topic, 2)
    rows = [{"sku": f"s{i % 5}", "price": i} for i in range(40)]
    records = [Record(topic, i % 2, orjson.dumps(r["sku"]), orjson.dumps(r)) for i, r in enumerate(rows)]
    records = [Record(topic, int(r.key[2:3]) % 2, r.key, r.value) for r in records]  # each key one partition
    records.append(Record(topic, int(b'"s3"'[2:3]) % 2, b'"s3"', None))  # s3 deleted
    relations = {"prices": {"sku": "str", "price": "int"}}
    config = build_config(
        SERVICE,
        {
            "relations": relations,
            "inputs": [{"topic": topic, "format": "upsert-json", "relation": "prices"}],
            "output_topic": f"{unique}.out",
            "dlq_topic": f"{unique}.dlq",
        },
    )
    _produce(broker.bootstrap, records[:20], {topic: topic})
    store = MemoryStore()
    run_bootstrap(spark, SERVICE, config, None, store, bootstrap_servers=broker.bootstrap)
    _produce(broker.bootstrap, records[20:], {topic: topic})
    result = _run(config, broker.bootstrap, store, len(records), f"{unique}-g")
    final = {r["sku"]: r for r in rows if r["sku"] != "s3"}  # the last image of each sku
    native = [
        SourceRecord(i + 1, orjson.dumps({"relation": "prices", "row": r, "delta": 1}))
        for i, r in enumerate(final.values())
    ]
    assert result[""] == _json(
        replay_all(SERVICE, build_config(SERVICE, {"relations": relations}), native).result()
    )
    assert run_reconcile(spark, SERVICE, config, broker.bootstrap, None).verdict == "match"


def test_a_snapshot_of_change_files_reads_as_replay_reads_them(spark, tmp_path) -> None:
    for name in ("orders.debezium.jsonl", "customers.maxwell.jsonl"):
        (tmp_path / name).write_bytes((EXAMPLES / name).read_bytes())
    config = build_config(SERVICE, {"relations": RELATIONS})
    schema = schema_of(SERVICE, config)
    frames, images = read_snapshot_changes(spark, tmp_path, schema, {})
    assert images == []
    records: list[SourceRecord] = []
    for name in ("orders.debezium.jsonl", "customers.maxwell.jsonl"):
        relation, fmt = change_file(tmp_path / name)  # type: ignore[misc]
        assert file_spec(relation, fmt, {}) == ChangeSpec(fmt, relation)
        records += [r for r in read_source(tmp_path / name, fmt, schema=schema) if r.error is None]
    expected = replay_all(SERVICE, config, records).result()["relations"]
    for relation, df in frames.items():
        bag: dict[tuple[Any, ...], int] = {}
        for r in df.collect():
            t = tuple(r[c] for c in RELATIONS[relation])
            bag[t] = bag.get(t, 0) + r["__mult"]
        net = {t: m for t, m in bag.items() if m}
        assert (sum(net.values()), len(net)) == (expected[relation]["count"], expected[relation]["distinct"])


def test_what_bootstrap_of_a_re_keyed_view_cannot_do_is_refused_in_one_line(spark) -> None:
    raw = {"relations": RELATIONS, "inputs": [{"topic": "a", "format": "debezium-json"}]}
    keyed = build_config(SERVICE, {**raw, "key_field": "tenant"})
    with pytest.raises(BatchError, match="step's state"):  # its step's store is needed too
        run_bootstrap(spark, SERVICE, keyed, None, MemoryStore())
    every_event = build_config(SERVICE, {**raw, "emit": "every-event"})
    with pytest.raises(BatchError, match="ivmstream replay"):
        run_bootstrap(spark, SERVICE, every_event, None, MemoryStore(), step_store=MemoryStore())
