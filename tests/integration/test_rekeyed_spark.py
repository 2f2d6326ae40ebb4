"""Spark for a keyed view fed through ``ivmstream rekey``: bootstrap it from half of two Debezium topics
(4 partitions each, keyed by primary key, half the records schema-wrapped, bad ones among them), let the
step (stopped once after uncheckpointed writes, so the re-keyed topic holds copies) and a worker go on
from there (their results equal the offline replay), and reconcile each key's published result: the
input records its origin marks cover, decoded from the input topics and recomputed in Spark SQL."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ivmstream.config import build_config
from ivmstream.runtime import Worker
from ivmstream.runtime.clients import KafkaClients
from ivmstream.runtime.kafka import producer_settings
from ivmstream.runtime.rekey import ORIGIN_HEADER, RekeyStep
from ivmstream.service import load_service
from ivmstream.spark.jobs import read_published
from ivmstream.spark.rekeyed import BOOTSTRAPPED
from ivmstream.spark.runs import run_bootstrap, run_reconcile
from ivmstream.state import MemoryStore
from tests.helpers_cdc import RELATIONS, Record, offline_keyed, workload

pytestmark = pytest.mark.spark

SERVICE = load_service("reference")
TOPICS = ("db.orders", "db.customers")


def _produce(bootstrap: str, records: list[Record], topics: dict[str, str]) -> None:
    producer = Producer(producer_settings(bootstrap))
    for r in records:
        producer.produce(topics[r.topic], r.value, r.key, partition=r.partition)
    producer.flush(30)


def _log(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    """Every record of ``topic``, read to its end."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-read", "enable.auto.commit": False}
    )
    try:
        ends = [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        ]
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        while len(out) < sum(ends):
            out += [m for m in consumer.consume(500, 1.0) if m.error() is None]
        return out
    finally:
        consumer.close()


def test_bootstrap_a_rekeyed_view_then_the_step_and_worker_then_reconcile(spark, broker, unique) -> None:
    w = workload(seed=5, changes=240, key_field="tenant")
    topics = {t: f"{unique}.{t.split('.')[1]}" for t in TOPICS}
    for topic in topics.values():
        broker.create_topic(topic, 4)
    rekeyed = f"{unique}.rekeyed"
    broker.create_topic(rekeyed, 3)
    half = len(w.records) // 2
    _produce(broker.bootstrap, w.records[:half], topics)
    config = build_config(
        SERVICE,
        {
            "relations": RELATIONS,
            "inputs": [{"topic": t, "format": "debezium-json"} for t in topics.values()],
            "key_field": "tenant",
            "rekey_topic": rekeyed,
            "output_topic": f"{unique}.out",
            "dlq_topic": f"{unique}.dlq",
            "batch_size": 17,
        },
    )
    store, step_store = MemoryStore(), MemoryStore()
    report = run_bootstrap(
        spark, SERVICE, config, None, store, bootstrap_servers=broker.bootstrap, step_store=step_store
    )
    assert report.keys > 1 and sum(report.inputs.values()) == half
    _produce(broker.bootstrap, w.records[half:], topics)
    # a delete of a row never created: the step decodes it, a worker's engine refuses it (absent-tuple)
    ghost = {"id": 7777, "customer": "nobody", "amount": "1.00", "tenant": "t1"}
    value = orjson.dumps({"op": "d", "before": ghost, "after": None, "source": {"table": "orders"}})
    _produce(broker.bootstrap, [Record("db.orders", 0, b"7777", value)], topics)

    clients = KafkaClients(broker.bootstrap)
    stopped = RekeyStep(SERVICE, config, clients, step_store)
    stopped.start()
    for _ in range(3):
        stopped.process(stopped.consumer.consume(config.batch_size, 5.0))
    stopped.output.flush()  # written, never checkpointed: the next step writes them again
    stopped.consumer.close()
    step = RekeyStep(SERVICE, config, clients, step_store)
    step.run(until=lambda s: sum(s.positions().values()) >= len(w.records) + 1)
    log = _log(broker.bootstrap, rekeyed, 3)
    tags = [dict(m.headers() or [])[ORIGIN_HEADER] for m in log]
    assert len(tags) > len(set(tags)), "the stopped step left no copies"
    ends = {p: sum(1 for m in log if m.partition() == p) for p in range(3)}

    worker = Worker(SERVICE, config, clients, store, group=f"{unique}-g")
    worker.run(until=lambda w_: all((w_.positions().get(p) or 0) >= e for p, e in ends.items()))  # type: ignore[arg-type,misc]
    published = read_published(None, broker.bootstrap, config.output_topic, {})
    results = {key: record["result"] for key, record in sorted(published.items())}
    assert results == offline_keyed(w, SERVICE, "tenant", TOPICS)

    # each result carries the last input record its partition applied, per input partition
    marks = {where for record in published.values() for where in record["origins"]}
    assert marks == {f"{t}:{p}" for t in topics.values() for p in range(4)}
    assert all(m[1] != BOOTSTRAPPED for record in published.values() for m in record["origins"].values())

    verdict = run_reconcile(spark, SERVICE, config, broker.bootstrap, None)
    assert verdict.verdict == "match", verdict.mismatches
    assert verdict.engine_refused == 1  # the ghost delete, not recomputed
    assert verdict.keys == len(results)
