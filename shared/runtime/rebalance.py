"""Taking and giving up input partitions, the other half of exactly-once state (the first is
``ivmstream.runtime.checkpoint``): on assignment a partition's engines and next offset come from the
state store and the consumer is positioned there explicitly (never at the group's committed offset,
which is informational); on revocation the partition is checkpointed before it is released; a lost
partition (session expired: another member may own it now) is dropped without writing anything."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from ivmstream.config import ServiceConfig
from ivmstream.engine import Engine
from ivmstream.health import Health
from ivmstream.runtime.apply import ApplyMode
from ivmstream.runtime.broadcast import BroadcastFeed, resume_offset
from ivmstream.runtime.checkpoint import Checkpointer
from ivmstream.runtime.clients import Consumer
from ivmstream.runtime.hooks import Hooks, PartitionsChanged, fire
from ivmstream.runtime.kafka import BrokerUnavailable, BrokerWatch
from ivmstream.runtime.partition import PartitionState
from ivmstream.secrets import redact
from ivmstream.state import Envelope, StateStore, check_envelope
from ivmstream.state.base import KeyLoader, StateLost

log = logging.getLogger("ivmstream.runtime")


class HistoryTruncated(RuntimeError):
    """The input log no longer holds updates the state has not seen: the view would be silently wrong."""


class Rebalance:
    """The consumer's rebalance callbacks for one worker, over its map of owned ``partitions``."""

    def __init__(
        self,
        *,
        store: StateStore,
        config: ServiceConfig,
        envelope: Envelope,
        group: str,
        partitions: dict[int, PartitionState],
        new_engine: Callable[[], Engine],
        backed: frozenset[str],
        mode: ApplyMode,
        feed: BroadcastFeed | None,
        checkpointer: Checkpointer,
        hooks: Hooks,
        health: Health,
        watch: BrokerWatch,
        stop: threading.Event,
    ) -> None:
        self.store, self.config, self.envelope, self.group = store, config, envelope, group
        self.partitions, self.new_engine, self.backed = partitions, new_engine, backed
        self.mode, self.feed, self.checkpointer, self.hooks = mode, feed, checkpointer, hooks
        self.health, self.watch, self.stop = health, watch, stop
        self.closing = False  # set before consumer.close(): a rebalance finishing inside it takes nothing

    def on_assign(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        if self.closing:
            # A rebalance that completes inside consumer.close(): the handle is being destroyed, so
            # reading offsets would fail (_DESTROY) and the worker exit 1 on a clean stop; the
            # partitions are never consumed here and are revoked again at once, so load nothing.
            log.info("leaving the group: not taking %d partition(s) assigned during shutdown", len(tps))
            return
        self.take(consumer, tps)
        consumer.assign(tps)

    def take(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        """Restore ``tps`` and set each one's ``offset`` to where it resumes, without assigning them: a
        runtime whose consumer assigns itself (Faust) positions it from the offsets."""
        started = time.perf_counter()
        self.health.restoring()
        for tp in tps:
            self._take(consumer, tp)
        self.restart_broadcast()
        if self.hooks.partitions_assigned and tps:
            changed = PartitionsChanged(
                tps[0].topic, tuple(tp.partition for tp in tps), time.perf_counter() - started
            )
            fire(self.hooks.partitions_assigned, changed)
        self.health.consuming(len(self.partitions))

    def _take(self, consumer: Consumer, tp: TopicPartition) -> None:
        """Restore ``tp``'s state and set ``tp.offset`` to where it resumes."""
        store, config = self.store, self.config
        loader = store if config.resident_keys is not None and isinstance(store, KeyLoader) else None
        cp = (
            loader.load_header(tp.topic, tp.partition)
            if loader is not None
            else store.load(tp.topic, tp.partition, skip_maps=self.backed)
        )
        where = f"the {store.name} state of {tp.topic}:{tp.partition}"
        check_envelope(cp.envelope, self.envelope, where, has_state=not cp.empty)
        if cp.offset is None:
            self._check_not_lost(consumer, tp)
        check_history(consumer, tp, cp.offset)
        if self.feed is not None:
            self._check_broadcast_history(tp, cp.broadcast_offset)
        state = self.partitions[tp.partition] = PartitionState(
            tp.topic,
            tp.partition,
            self.new_engine,
            cp,
            incremental=config.state_layout == "incremental",
            store=store if self.backed else None,  # type: ignore[arg-type]  # store_backing checked it
            backed=self.backed,
            loader=loader,
            resident_keys=config.resident_keys if loader is not None else None,
        )
        self.mode.restored(state)
        tp.offset = cp.offset if cp.offset is not None else OFFSET_BEGINNING
        log.info(
            "assigned %s:%d from offset %s%s",
            tp.topic,
            tp.partition,
            cp.offset if cp.offset is not None else "earliest",
            f" and broadcast offset {cp.broadcast_offset or 0}" if self.feed is not None else "",
        )

    def on_revoke(self, _consumer: Consumer, tps: list[TopicPartition]) -> None:
        owned = [self.partitions[tp.partition] for tp in tps if tp.partition in self.partitions]
        self.health.rebalancing()
        self.checkpointer.write(owned)
        self._drop(tps, lost=False)

    def on_lost(self, _consumer: Consumer, tps: list[TopicPartition]) -> None:
        """Lost (session expired): another member may own these now, so write nothing."""
        self.health.rebalancing()
        self._drop(tps, lost=True)

    def _drop(self, tps: list[TopicPartition], lost: bool) -> None:
        for tp in tps:
            if self.partitions.pop(tp.partition, None) is not None:
                self.store.release(tp.topic, tp.partition)
        self.restart_broadcast()
        if self.hooks.partitions_revoked and tps:
            fire(
                self.hooks.partitions_revoked,
                PartitionsChanged(tps[0].topic, tuple(tp.partition for tp in tps), lost=lost),
            )

    def abandon(self) -> None:
        """After a failure nothing unsafe may be checkpointed: drop the partitions unwritten."""
        for state in list(self.partitions.values()):
            self.store.release(state.topic, state.partition)
        self.partitions.clear()
        self.closing = True

    def restart_broadcast(self) -> None:
        """Read the broadcast partition from the smallest offset an owned partition still needs."""
        if self.feed is not None:
            offset = resume_offset(s.broadcast_next for s in self.partitions.values())
            self.feed.start_at(offset)
            log.info("reading %s:0 from offset %s", self.feed.topic, offset)

    def _check_broadcast_history(self, tp: TopicPartition, stored: int | None) -> None:
        assert self.feed is not None
        low = self.feed.low_watermark()
        if (stored or 0) < low:
            raise HistoryTruncated(
                f"{self.feed.topic}:0 starts at offset {low}, but the state of "
                f"{tp.topic}:{tp.partition} needs broadcast offset {stored or 0}: records were deleted by "
                "retention; bootstrap the state from a snapshot (ivmstream bootstrap) or raise the retention"
            )

    def _check_not_lost(self, consumer: Consumer, tp: TopicPartition) -> None:
        """No stored state, yet the group has committed an offset here: the offsets mirrored into the group
        follow checkpoints, so a checkpoint existed. In Redis, which every worker of the group shares,
        that state is lost (restarted without persistence, flushed): starting from the earliest offset
        would rebuild it silently while results already published go back in time, so refuse and say
        so. RocksDB state is local to a worker's volume: a partition that moved to a worker without
        its database is rebuilt from the log (``check_history`` refuses when the log lost records),
        and the worker says so. The memory store keeps nothing across restarts by design."""
        name = self.store.name
        if name not in ("redis", "rocksdb"):
            return
        offset = committed_offset(consumer, tp, self.watch, self.stop)
        if offset < 0:
            return
        if name == "rocksdb":
            log.warning(
                "%s:%d has no state in this worker's RocksDB but group %s committed offset %d: rebuilding it "
                "from the log (its results are published again as it catches up)",
                tp.topic,
                tp.partition,
                self.group,
                offset,
            )
            return
        raise StateLost(
            f"the {name} state of {tp.topic}:{tp.partition} is empty, but group {self.group} "
            f"committed offset {offset} there after a checkpoint: the state was lost (Redis "
            "restarted without persistence, or was flushed); refusing to rebuild it silently from the "
            "earliest offset: bootstrap it (`ivmstream bootstrap`), or rebuild it from the log under a "
            "new --group"
        )


def committed_offset(
    consumer: Consumer, tp: TopicPartition, watch: BrokerWatch, stop: threading.Event
) -> int:
    """The group's committed offset of ``tp``, asked again while Kafka does not answer (brokers going
    down during an assignment) until ``broker_timeout`` passes, then the worker stops as for any
    outage: nothing of this partition was processed, so a restart resumes exactly."""
    started = time.monotonic()
    while True:
        try:
            (committed,) = consumer.committed([TopicPartition(tp.topic, tp.partition)], timeout=5)
            return int(committed.offset)
        except KafkaException as exc:
            err = exc.args[0]
            if not isinstance(err, KafkaError) or err.fatal():
                raise
            waited = time.monotonic() - started
            if stop.is_set():
                where, why = redact(watch.bootstrap), redact(err.str())
                raise BrokerUnavailable(
                    f"stopped while Kafka at {where} did not answer ({why}); the state is at its last "
                    "checkpoint, so a restart resumes exactly"
                ) from None
            if watch.timeout is not None and waited > watch.timeout:
                raise watch.unavailable(waited) from None
            log.warning(
                "%s:%d: the group's committed offset is unknown (%s); asking again",
                tp.topic,
                tp.partition,
                redact(err.str()),
            )
            time.sleep(0.2)


def check_history(consumer: Consumer, tp: TopicPartition, stored: int | None) -> None:
    """A view needs every update after its state: refuse to start past deleted records. A partition
    whose leader is unreachable (one broker down) is taken all the same, so the others progress: its
    fetch waits for the leader, and a position deleted meanwhile stops the worker there
    (``auto.offset.reset`` is ``error``)."""
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)
    except KafkaException as exc:
        log.warning(
            "%s:%d: its start offset is unknown (%s); taking it, to be read once its leader answers",
            tp.topic,
            tp.partition,
            exc.args[0].str(),
        )
        return
    needed = stored if stored is not None else 0
    if needed < low:
        raise HistoryTruncated(
            f"{tp.topic}:{tp.partition} starts at offset {low}, but the state needs offset {needed} "
            f"({'no checkpoint' if stored is None else 'last checkpoint'}): records were deleted by "
            "retention; bootstrap the state from a snapshot (ivmstream bootstrap) or raise the retention"
        )
