"""Bulk producing a benchmark's input to the (embedded) broker and checking it is all there.

The input is produced before the clock starts, with the runtime's producer settings plus lz4:
librdkafka's mock broker keeps at most 5 MiB of message sets per partition and silently drops the
oldest beyond that (``mpart->max_size`` in rdkafka_mock.c), which ~55K uncompressed JSON events
already exceed. A worker started from the beginning of such a log would wait forever for records that
are gone, so the watermarks are checked before anything is timed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def produce_all(producer: Producer, topic: str, records: Iterable[tuple[bytes | None, bytes, int]]) -> None:
    """Produce ``(key, value, partition)`` records, waiting whenever the local queue is full, then flush;
    RuntimeError if any record is not acknowledged."""
    failures: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    for i, (key, value, partition) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    if remaining or failures:
        raise RuntimeError(
            f"producing to {topic}: {remaining} unacknowledged, {len(failures)} failed"
            + (f" ({failures[0]})" if failures else "")
        )


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """The first and next offset of one partition."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe", "enable.auto.commit": False})
    try:
        low, high = probe.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return low, high
    finally:
        probe.close()


def produce_lz4(bootstrap: str, topic: str, values: Sequence[bytes], key: bytes | None = None) -> None:
    """Produce ``values`` to partition 0 of ``topic`` with the runtime's producer settings plus lz4."""
    from ivmstream.runtime.kafka import producer_settings

    producer = Producer(producer_settings(bootstrap, {"compression.type": "lz4"}))
    produce_all(producer, topic, ((key, v, 0) for v in values))


def check_holds(bootstrap: str, topic: str, count: int) -> int:
    """RuntimeError unless partition 0 of ``topic`` holds offsets [0, count); its end offset."""
    start, end = watermarks(bootstrap, topic)
    if (start, end) != (0, count):
        raise RuntimeError(f"{topic} holds offsets [{start}, {end}), produced {count}")
    return end


def produce_checked(bootstrap: str, topic: str, values: Sequence[bytes], key: bytes | None = None) -> int:
    """``produce_lz4`` then ``check_holds``: the input of a timed run, all there; its end offset."""
    produce_lz4(bootstrap, topic, values, key)
    return check_holds(bootstrap, topic, len(values))
