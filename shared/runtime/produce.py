"""Publish input records to a topic: the ``produce`` command, the demo and tests share this."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer

from ivmstream.events import SourceRecord, relation_of
from ivmstream.runtime.kafka import producer_settings
from ivmstream.runtime.routing import ShardRouting


@dataclass
class ProduceReport:
    sent: int = 0
    skipped: list[SourceRecord] = field(default_factory=list)  # lines no event could be made of
    failures: list[str] = field(default_factory=list)
    relations: Counter[str | None] = field(default_factory=Counter)  # records sent per relation they name
    topics: Counter[str] = field(default_factory=Counter)  # records sent per topic


def produce_records(
    bootstrap: str,
    topic: str,
    records: Iterable[SourceRecord],
    *,
    on_progress: Callable[[SourceRecord, int], None] | None = None,
    on_skip: Callable[[SourceRecord], None] | None = None,
    flush_timeout: float = 60.0,
    routing: ShardRouting | None = None,
) -> ProduceReport:
    """Keyed records are hashed like the Java client (murmur2); unkeyed ones form one ordered stream on
    partition 0, since a service without a partition key is a single query instance. With ``routing``
    (a sharded query) each record goes where it says, ``topic`` unused: its shard's input partition or
    the broadcast topic, the partition passed explicitly."""
    producer = Producer(producer_settings(bootstrap))
    report = ProduceReport()

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            report.failures.append(err.str())

    for rec in records:
        if rec.error is not None:
            report.skipped.append(rec)
            if on_skip is not None:
                on_skip(rec)
            continue
        if routing is not None:
            target, partition, key = routing.route(rec.value)
        else:
            target, partition, key = topic, (-1 if rec.key is not None else 0), rec.key
        while True:
            try:
                producer.produce(target, rec.value, key, partition=partition, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        report.sent += 1
        report.topics[target] += 1
        report.relations[relation_of(rec)] += 1
        if report.sent % 1000 == 0:
            producer.poll(0)
            if on_progress is not None:
                on_progress(rec, report.sent)
    remaining = producer.flush(flush_timeout)
    if remaining:
        report.failures.append(f"{remaining} records still unacknowledged after {flush_timeout}s")
    return report
