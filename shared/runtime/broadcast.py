"""The broadcast partition of a sharded query, read by every worker beside its input partitions.

Each owned input partition's state covers the broadcast records before its own broadcast offset,
which is checkpointed with its input offset in one atomic write. A worker reads the broadcast
partition by manual assignment (not through the consumer group: every worker reads all of it) from
the smallest broadcast offset among the partitions it owns, and hands a record to a partition only if
that partition has not applied it yet (``first_unapplied``). Whenever the owned partitions change, the
reader is put back to the new smallest offset. So each partition applies each broadcast record exactly
once, in log order, however partitions move between workers.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import Message, TopicPartition

from ivmstream.runtime.clients import ClientFactory


def first_unapplied(offsets: Sequence[int], applied_before: int | None) -> int:
    """The index of the first of ``offsets`` (ascending) that a partition whose state covers the
    broadcast records before offset ``applied_before`` (None: none) has not applied."""
    return bisect_left(offsets, applied_before or 0)


def resume_offset(applied_before: Iterable[int | None]) -> int | None:
    """Where the reader must start so that every owned partition gets every record it lacks: the
    smallest of their broadcast offsets (None: no partition owned, read nothing)."""
    offsets = [o or 0 for o in applied_before]
    return min(offsets) if offsets else None


class BroadcastFeed:
    """A consumer of partition 0 of the broadcast topic, positioned by the worker, never committed."""

    def __init__(
        self,
        clients: ClientFactory,
        topic: str,
        group: str,
        session_timeout_ms: int,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        # a group id is required by the client; the partition is assigned by hand, so no group forms
        self.consumer = clients.consumer(f"{group}.broadcast", session_timeout_ms, overrides)
        self.position: int | None = None  # where reading (re)started; None: not reading

    def start_at(self, offset: int | None) -> None:
        """Read from ``offset`` on (None: stop reading). Unassigning first drops whatever was fetched
        for the previous position."""
        self.consumer.unassign()
        if offset is not None:
            self.consumer.assign([TopicPartition(self.topic, 0, offset)])
        self.position = offset

    def consume(self, limit: int, timeout: float) -> list[Message]:
        if self.position is None:
            return []
        return self.consumer.consume(limit, timeout)

    def low_watermark(self) -> int:
        low, _high = self.consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=10)
        return int(low)

    def close(self) -> None:
        self.consumer.close()
