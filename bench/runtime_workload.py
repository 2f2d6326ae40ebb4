"""The runtime benchmark's constants, its two bench services (a no-op engine and a counting one) and its
input: records produced to the embedded broker before anything is timed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from confluent_kafka import (
    Consumer,
    Producer,
    TopicPartition,
)

from bench.lib.broker import produce_all
from bench.lib.report import REPO
from ivmstream.engine import Rejection
from ivmstream.events import Relation, UpdateEvent
from ivmstream.runtime.kafka import producer_settings
from ivmstream.service import ServiceDefinition

RESULTS = REPO / "bench" / "results"
PARTITIONS = 4
KEYS = 64
KEY_FIELD = "k"
BATCH = 2000  # the runtime's default batch_size, and the raw consumer's num_messages
POLL_TIMEOUT = 0.2  # what Worker.run passes to consume()
SESSION_TIMEOUT_MS = 10000  # the runtime's default session_timeout_ms
PRODUCE_BATCH = 10000  # records per produced MessageSet (see produce())
MEASURE_TIMEOUT = 600.0  # seconds one measurement may take before the bench gives up

# The four requested cases use exactly the runtime's consumer settings. The two "fastfetch" cases are a
# diagnostic: librdkafka >= 2.3 stops fetching for fetch.queue.backoff.ms (default 1000 ms) whenever its
# prefetch queue exceeds queued.min.messages (100000), which caps a fast consumer far below what it
# could read; the diagnostic pair lowers that backoff for both sides to show the unthrottled ratio.
CASES = (
    "raw",
    "runtime-noop",
    "runtime-rocksdb",
    "runtime-redis",
    "runtime-noop-gc-default",
    "runtime-noop-python",
    "raw-fastfetch",
    "runtime-noop-fastfetch",
)
LABELS = {
    "raw": "raw confluent-kafka",
    "runtime-noop": "Worker, no-op engine, memory",
    "runtime-rocksdb": "Worker, counting, RocksDB",
    "runtime-redis": "Worker, counting, Redis",
    "runtime-noop-gc-default": "Worker, no-op, no GC policy (diagnostic)",
    "runtime-noop-python": "Worker, no-op, Python decoder (diagnostic)",
    "raw-fastfetch": "raw, fast fetch (diagnostic)",
    "runtime-noop-fastfetch": "Worker no-op, fast fetch (diagnostic)",
}


_RELATIONS = (Relation("items", (("item", "str"), ("qty", "int"))),)
_CONSTANT_RESULT = {"ok": True}


class NoopEngine:
    """Does nothing: what is left of a run is the runtime's own cost."""

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        return []

    def result(self) -> Any:
        return _CONSTANT_RESULT

    def snapshot(self) -> bytes:
        return b""

    def restore(self, data: bytes) -> None:
        pass


class CountingEngine:
    """Sums the deltas; a snapshot of a few bytes, so every checkpoint writes something."""

    def __init__(self) -> None:
        self.count = 0

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        self.count += sum(ev.delta for ev in events)
        return []

    def result(self) -> Any:
        return {"count": self.count}

    def snapshot(self) -> bytes:
        return str(self.count).encode()

    def restore(self, data: bytes) -> None:
        self.count = int(data) if data else 0


NOOP_SERVICE = ServiceDefinition(
    name="bench_noop",
    summary="no-op engine (runtime benchmark)",
    options={},
    relations=lambda _options: _RELATIONS,
    engine=lambda _options: NoopEngine(),
    platform_only=True,
)
COUNT_SERVICE = ServiceDefinition(
    name="bench_count",
    summary="counting engine (runtime benchmark)",
    options={},
    relations=lambda _options: _RELATIONS,
    engine=lambda _options: CountingEngine(),
    platform_only=True,
)


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class Workload:
    """The input records, column by column.

    Three lists of untracked scalars (ints and bytes) rather than one object per record: the cyclic GC
    walks every tracked object of the process on a full collection, and 200,000 record objects held by
    the harness would put several times a real worker's heap under each measured run."""

    partitions: list[int]
    keys: list[bytes]
    values: list[bytes]

    def __len__(self) -> int:
        return len(self.values)


def make_records(n: int) -> Workload:
    """Valid update events over KEYS keys; key i lives on partition i % PARTITIONS."""
    partitions, keys, values = [], [], []
    for i in range(n):
        k = i % KEYS
        key = f"key{k}"
        values.append(
            orjson.dumps(
                {
                    "relation": "items",
                    "row": {"item": f"item{i % 997}", "qty": i % 50 + 1, KEY_FIELD: key},
                    "delta": 1,
                }
            )
        )
        keys.append(key.encode())
        partitions.append(k % PARTITIONS)
    return Workload(partitions, keys, values)


def produce(bootstrap: str, topic: str, records: Workload, batch_messages: int = 10000) -> None:
    """Idempotent producer; every MessageSet holds ``batch_messages`` records (the tail excepted).

    The batch size is pinned (a long linger, so only the count closes a batch) because librdkafka's mock
    broker answers a Fetch with at most ONE MessageSet per partition: with timing-dependent batches the
    consumer-side ceiling would swing by 4x from run to run. 10000 records of ~75 bytes is ~750 KB,
    close to what a real broker returns per partition fetch (max.partition.fetch.bytes = 1 MB).
    """
    producer = Producer(
        producer_settings(  # enable.idempotence=True
            bootstrap, {"linger.ms": 5000, "batch.num.messages": batch_messages, "batch.size": 16_000_000}
        )
    )
    produce_all(producer, topic, zip(records.keys, records.values, records.partitions, strict=True))


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's end offset; RuntimeError if a partition no longer starts at offset 0.

    librdkafka's mock broker keeps at most 5 MiB of message sets per partition and drops the oldest
    beyond that (``mpart->max_size`` in rdkafka_mock.c): a consumer started from the beginning then
    waits forever for records that are gone."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe", "enable.auto.commit": False})
    try:
        meta = probe.list_topics(topic, timeout=10).topics[topic]
        marks = {
            p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in meta.partitions
        }
    finally:
        probe.close()
    dropped = {p: low for p, (low, _high) in marks.items() if low > 0}
    if dropped:
        raise RuntimeError(
            f"the embedded broker dropped the oldest records of {topic} (partition: first offset kept "
            f"{dropped}): it keeps at most 5 MiB per partition, so use fewer --events"
        )
    return {p: marks[p][1] for p in sorted(marks)}
