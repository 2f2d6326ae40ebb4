"""Reading topics back to the end, in the driver: dead letters and published results.

For small operational topics (a dead-letter topic, a results topic) a plain consumer beats a Spark
job; these helpers read every partition from its start to its current end.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from confluent_kafka import Consumer, Message, TopicPartition


@dataclass(frozen=True)
class DeadLetter:
    topic: str
    partition: int
    offset: int
    reason: str
    detail: str
    value: bytes


def read_to_end(bootstrap: str, topic: str, timeout: float = 60.0) -> list[Message]:
    """Every record of ``topic`` up to its current end, in partition order (empty if it does not exist)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ivmstream-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        meta = consumer.list_topics(timeout=10).topics.get(topic)
        if meta is None or not meta.partitions:
            return []
        marks = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in meta.partitions
        }
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
    finally:
        consumer.close()


def read_dead_letters(bootstrap: str, dlq_topic: str) -> list[DeadLetter]:
    out = []
    for msg in read_to_end(bootstrap, dlq_topic):
        h = {k: v.decode(errors="replace") for k, v in (msg.headers() or [])}
        head, _, offset = h.get("ivmstream.source", "").rpartition(":")
        topic, _, partition = head.rpartition(":")
        if topic and partition.isdigit() and offset.isdigit():
            out.append(
                DeadLetter(
                    topic,
                    int(partition),
                    int(offset),
                    h.get("ivmstream.reason", ""),
                    h.get("ivmstream.detail", ""),
                    msg.value() or b"",
                )
            )
    return out


def latest_results(bootstrap: str, output_topic: str) -> dict[str, dict[str, Any]]:
    """Each key's last published record on the results topic (what Redis would hold)."""
    latest: dict[str, dict[str, Any]] = {}
    for msg in read_to_end(bootstrap, output_topic):
        record = orjson.loads(msg.value())
        latest[record["key"]] = record  # one key's records share a partition, so log order is publish order
    return latest
