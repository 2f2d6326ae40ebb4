"""Reading topics back to the end, in the driver: dead letters and published results.

For small operational topics (a dead-letter topic, a results topic) a plain consumer beats a Spark
job; these helpers read every partition from its start to its current end. Their consumers get the
same security settings as the worker's (``client_security``: the environment's, then ``kafka``, a
config's ``kafka.consumer`` section), and a failure to read is one line without any secret.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from ivmstream.runtime.kafka import BrokerUnavailable, client_security
from ivmstream.secrets import redact


@dataclass(frozen=True)
class DeadLetter:
    topic: str
    partition: int
    offset: int
    reason: str
    detail: str
    value: bytes  # the refused record's value, or its first dead_letter_max_bytes (see truncated_from)
    truncated_from: int | None = None  # the full length of a value that was cut


def reader_settings(bootstrap: str, kafka: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A consumer in a group of its own that commits nothing, with the security settings every client
    gets; its log is silent (a failure is reported once, by the caller)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"ivmstream-reader-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "log_level": 0,
    }
    return {**conf, **client_security(kafka)}


def read_to_end(
    bootstrap: str, topic: str, timeout: float = 60.0, kafka: Mapping[str, Any] | None = None
) -> list[Message]:
    """Every record of ``topic`` up to its current end, in partition order (empty if it does not exist)."""
    try:
        consumer = Consumer(reader_settings(bootstrap, kafka))
        try:
            return _read(consumer, topic, timeout)
        finally:
            consumer.close()
    except KafkaException as exc:  # a bad setting, or no broker answering
        raise BrokerUnavailable(f"cannot read {topic} at {bootstrap}: {redact(exc.args[0].str())}") from None


def _read(consumer: Consumer, topic: str, timeout: float) -> list[Message]:
    meta = consumer.list_topics(timeout=10).topics.get(topic)
    if meta is None or not meta.partitions:
        return []
    marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in meta.partitions}
    todo = {p: hi for p, (lo, hi) in marks.items() if hi > lo}
    consumer.assign([TopicPartition(topic, p, marks[p][0]) for p in todo])
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    while todo:
        if time.monotonic() > deadline:
            raise TimeoutError(f"reading {topic} did not finish in {timeout}s")
        for msg in consumer.consume(1000, 0.5):
            if msg.error() is not None:
                continue
            out.append(msg)
            if msg.offset() + 1 >= todo.get(msg.partition(), 0):
                todo.pop(msg.partition(), None)
    out.sort(key=lambda m: (m.partition(), m.offset()))
    return out


def dead_letter_of(msg: Message) -> DeadLetter | None:
    """The dead letter a record of a dead-letter topic holds (None: not one the worker wrote)."""
    h = {k: v.decode(errors="replace") for k, v in (msg.headers() or [])}
    head, _, offset = h.get("ivmstream.source", "").rpartition(":")
    topic, _, partition = head.rpartition(":")
    if not (topic and partition.isdigit() and offset.isdigit()):
        return None
    full = h.get("ivmstream.truncated", "")
    return DeadLetter(
        topic,
        int(partition),
        int(offset),
        h.get("ivmstream.reason", ""),
        h.get("ivmstream.detail", ""),
        msg.value() or b"",
        int(full) if full.isdigit() else None,
    )


def read_dead_letters(
    bootstrap: str, dlq_topic: str, kafka: Mapping[str, Any] | None = None
) -> list[DeadLetter]:
    """Every dead letter of ``dlq_topic``, in partition order."""
    found = (dead_letter_of(msg) for msg in read_to_end(bootstrap, dlq_topic, kafka=kafka))
    return [d for d in found if d is not None]


def latest_results(
    bootstrap: str, output_topic: str, kafka: Mapping[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """Each key's last published record on the results topic (what Redis would hold)."""
    latest: dict[str, dict[str, Any]] = {}
    for msg in read_to_end(bootstrap, output_topic, kafka=kafka):
        record = orjson.loads(msg.value())
        latest[record["key"]] = record  # one key's records share a partition, so log order is publish order
    return latest
