"""Checkpoints: what makes a worker's state exactly-once.

A checkpoint first waits until every published result and dead letter is acknowledged, then writes each
changed partition's engine state and next input offset (and broadcast offset) in one atomic store write.
A crash before that write replays the input after the previous checkpoint and publishes identical
(result, offset) pairs again; a crash after it resumes exactly. The offsets are then mirrored into the
consumer group for lag tooling only: assignments restore from the store, never from the group."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Literal, Protocol

from confluent_kafka import KafkaException, TopicPartition

from ivmstream.runtime.hooks import CheckpointWritten, Hooks, fire
from ivmstream.runtime.output import Output
from ivmstream.runtime.partition import PartitionState
from ivmstream.state import StateStore

log = logging.getLogger("ivmstream.runtime")


class OffsetCommitter(Protocol):
    """Where checkpointed offsets are mirrored: the worker's consumer (its group), or whatever a runtime
    that consumes otherwise acknowledges them to (the Faust runtime's ``Acks``)."""

    def commit(
        self, *, offsets: list[TopicPartition], asynchronous: Literal[False]
    ) -> list[TopicPartition] | None: ...


class Checkpointer:
    """Writes checkpoints of a worker's partitions every ``interval`` seconds, or when asked."""

    def __init__(
        self,
        store: StateStore,
        output: Output,
        consumer: OffsetCommitter,
        envelope: bytes,
        interval: float,
        hooks: Hooks,
        waiting: Callable[[], None],
        publish_pending: Callable[[list[PartitionState]], int] | None = None,
    ) -> None:
        """``envelope``: the state's stored description, checked on restore; ``waiting``: called while
        outputs are being acknowledged (a broker outage check may stop the worker there);
        ``publish_pending``: publishes the results an apply mode holds back (``emit: checkpoint``), first."""
        self.store = store
        self.output = output
        self.consumer = consumer
        self.envelope = envelope
        self.interval = interval
        self.hooks = hooks
        self.waiting = waiting
        self.publish_pending = publish_pending
        self.last = time.monotonic()

    def due(self, now: float) -> bool:
        return now - self.last >= self.interval

    def write(self, partitions: Iterable[PartitionState], *, periodic: bool = False) -> None:
        """Flush outputs, then commit each changed partition's snapshots and offset atomically.
        ``periodic``: the PostgreSQL sink's writes are not waited for (``Output.flush``)."""
        self.last = time.monotonic()
        owned = [p for p in partitions if p.next_offset is not None]
        todo = [p for p in owned if p.needs_checkpoint]
        started = time.perf_counter()
        size = entries = 0
        if todo:
            if self.publish_pending is not None:
                self.publish_pending(todo)
            self.output.flush(check=self.waiting, postgres=not periodic)
            for state in todo:
                offset = state.next_offset
                assert offset is not None
                stats = self.store.commit(
                    state.topic, state.partition, offset, state.take_changes(), self.envelope
                )
                size += stats.bytes
                entries += stats.entries
                state.committed_offset = state.next_offset
                state.committed_broadcast = state.broadcast_next
                state.evict_idle()
        if self.hooks.checkpoint_written:
            fire(
                self.hooks.checkpoint_written,
                CheckpointWritten(len(todo), size, entries, time.perf_counter() - started),
            )
        self._commit_group_offsets([p for p in owned if p.group_offset != p.committed_offset])

    def _commit_group_offsets(self, states: list[PartitionState]) -> None:
        """Mirror the stored offsets into the consumer group, for lag tooling only (restarts use the
        store). A commit lost in a rebalance is retried by the next owner, whose group offset is unknown."""
        if not states:
            return
        try:
            done = self.consumer.commit(
                offsets=[
                    TopicPartition(s.topic, s.partition, s.committed_offset)
                    for s in states
                    if s.committed_offset is not None
                ],
                asynchronous=False,
            )
        except KafkaException as exc:
            log.info("group offset commit deferred (state is safe): %s", exc.args[0].str())
            return
        by_partition = {s.partition: s for s in states}
        for tp in done or []:
            if tp.error is None and tp.partition in by_partition:
                by_partition[tp.partition].group_offset = tp.offset
