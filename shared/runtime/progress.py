"""How far a consumer group has checkpointed a topic, seen from outside (demo, tests, operators).

Workers commit the group offset right after the atomic state checkpoint, and only after flushing
their outputs, so ``committed == high watermark`` on every partition means every published result
covers the whole topic.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from ivmstream.runtime.kafka import client_security


@dataclass(frozen=True)
class PartitionProgress:
    partition: int
    committed: int  # next offset the group will read; 0 if nothing committed
    high: int  # high watermark: one past the last record

    @property
    def lag(self) -> int:
        return max(0, self.high - self.committed)


def group_progress(bootstrap: str, group: str, topic: str, timeout: float = 10.0) -> list[PartitionProgress]:
    settings = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    consumer = Consumer({**client_security(), **settings})  # the environment's security settings too
    try:
        meta = consumer.list_topics(topic, timeout=timeout).topics[topic]
        tps = [TopicPartition(topic, p) for p in sorted(meta.partitions)]
        committed = consumer.committed(tps, timeout=timeout)
        out = []
        for tp in committed:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=timeout)
            out.append(PartitionProgress(tp.partition, max(tp.offset, 0), high))
        return out
    finally:
        consumer.close()


def wait_caught_up(
    bootstrap: str, group: str, topic: str, timeout: float = 120.0, poll: float = 0.5
) -> list[PartitionProgress]:
    deadline = time.monotonic() + timeout
    while True:
        progress = group_progress(bootstrap, group, topic)
        if all(p.lag == 0 for p in progress):
            return progress
        if time.monotonic() > deadline:
            raise TimeoutError(f"group {group} still behind on {topic}: {progress}")
        time.sleep(poll)
