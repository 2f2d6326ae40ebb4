"""The one consumer loop every service runs: consume a batch, decode, apply, publish, checkpoint.

A worker is assembled from parts, each in its own module:
- its Kafka clients come from a factory (``ivmstream.runtime.clients``; in-memory ones in
  ``ivmstream.runtime.harness``);
- the apply mode (per batch, per event, sharded, coordinator) is chosen once, when it starts
  (``ivmstream.runtime.apply``, ``ivmstream.runtime.sharded``);
- exactly-once state rests on ``ivmstream.runtime.rebalance`` (restore and seek on assignment,
  checkpoint before revocation) and ``ivmstream.runtime.checkpoint`` (outputs flushed, then state and
  offsets in one atomic store write);
- refused input takes one dead-letter path (``ivmstream.runtime.refusals``);
- what happens is reported through ``Hooks`` (``ivmstream.runtime.hooks``), which the metrics
  (``ivmstream.runtime.sensors``), tests and benchmarks attach to.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal

import redis
from confluent_kafka import KafkaException, Message

from ivmstream.config import ServiceConfig, schema_of
from ivmstream.events import EventCodec, UpdateEvent
from ivmstream.events.columns import EventColumns
from ivmstream.events.coverage import RelationCoverage
from ivmstream.metrics import RuntimeMetrics
from ivmstream.runtime.apply import (
    ApplyMode,
    AtCheckpoint,
    Codec,
    Coordinator,
    PerBatch,
    PerEvent,
    by_partition,
)
from ivmstream.runtime.checkpoint import Checkpointer
from ivmstream.runtime.clients import ClientFactory, clients_of, output_settings
from ivmstream.runtime.hooks import BatchApplied, Hooks, fire
from ivmstream.runtime.kafka import BrokerWatch
from ivmstream.runtime.merged import MergedView
from ivmstream.runtime.output import Output
from ivmstream.runtime.partition import PartitionState, store_backing
from ivmstream.runtime.postgres import PostgresSink
from ivmstream.runtime.rebalance import HistoryTruncated, Rebalance
from ivmstream.runtime.refusals import Refusals
from ivmstream.runtime.rekey import fresh
from ivmstream.runtime.sensors import MetricsSensor, RefusalLog
from ivmstream.runtime.sharded import Sharded, sharded_setup
from ivmstream.service import ServiceDefinition
from ivmstream.state import StateStore, envelope_for
from ivmstream.state.base import MemoryBounded

__all__ = ["HistoryTruncated", "Role", "Worker"]

log = logging.getLogger("ivmstream.runtime")

Role = Literal["worker", "coordinator"]


class Worker:
    """One service instance over its input topic: a member of its consumer group."""

    def __init__(
        self,
        service: ServiceDefinition,
        config: ServiceConfig,
        clients: ClientFactory | str,
        store: StateStore,
        *,
        group: str | None = None,
        redis_client: redis.Redis | None = None,
        postgres: PostgresSink | None = None,
        metrics: RuntimeMetrics | None = None,
        hooks: Hooks | None = None,
        role: Role = "worker",
        codec: Codec | None = None,
        silent_relation_after: int | None = 100_000,
    ) -> None:
        """``clients``: a client factory, or a Kafka bootstrap address. ``role`` coordinator: sum the
        partial results of a sharded ``config``'s workers (``ivmstream.runtime.coordinator``).
        ``codec``: what turns input records into events, if not the service's own. ``postgres``: a sink
        the results are also upserted into (``ivmstream.runtime.postgres``; the worker closes it).
        ``silent_relation_after``:
        input records after which a declared relation that received no event is logged (once; and at
        shutdown either way)."""
        if role == "coordinator":
            from ivmstream.runtime.coordinator import coordinator_of

            service, config, partials = coordinator_of(service, config)
            codec = codec or partials
        self.service, self.config, self.store = service, config, store
        self.clients = clients = clients_of(clients)
        if isinstance(store, MemoryBounded):
            store.set_memory(config.rocksdb_block_cache_mib << 20, config.rocksdb_write_buffer_mib << 20)
        probe = service.engine(config.options)  # maps read through the store (refused here if unservable)
        self._backed = store_backing(store, probe, config.state_layout == "incremental")
        self.group = group or f"ivmstream.{service.name}"
        self._codec: Codec = codec if codec is not None else EventCodec(schema_of(service, config))
        self.metrics = metrics or RuntimeMetrics(service.name)
        self.hooks = hooks or Hooks()
        self.partitions: dict[int, PartitionState] = {}
        sensor = MetricsSensor(self.metrics, store, self.partitions)
        sensor.attach(self.hooks)
        self.refusal_log = RefusalLog(service.name, config.dlq_topic)
        self.refusal_log.attach(self.hooks)
        self.broker_watch = watch = BrokerWatch(
            clients.bootstrap, config.broker_timeout, self._metadata_answered
        )
        self.consumer = clients.consumer(
            self.group,
            config.session_timeout_ms,
            {
                **config.kafka.get("consumer", {}),
                "stats_cb": sensor.stats_callback(watch),
                "error_cb": watch.on_error,
            },
        )
        self.producer = clients.producer(output_settings(config, self.broker_watch.on_error))
        self.output = Output(
            service.name,
            self.producer,
            config.output_topic,
            config.dlq_topic,
            redis_client,
            dead_letter_max_bytes=config.dead_letter_max_bytes,
            postgres=postgres,
        )
        self._stop = threading.Event()
        self.coverage = RelationCoverage(self.codec.schema.relations, silent_relation_after)
        self.metrics.count_relations(dict.fromkeys(self.coverage.relations, 0))
        self.mode, sharding = self._apply_mode(role)
        self.broadcast = self.mode.feed if isinstance(self.mode, Sharded) else None
        envelope = envelope_for(service, config.options, config.state_layout, sharding)
        self.checkpointer = Checkpointer(
            store,
            self.output,
            self.consumer,
            envelope.to_bytes(),
            config.checkpoint_interval,
            self.hooks,
            self.broker_watch.check,
            self._publish_pending,
        )
        self.rebalance = Rebalance(
            store=store,
            config=config,
            envelope=envelope,
            group=self.group,
            partitions=self.partitions,
            new_engine=lambda: service.engine(config.options),
            backed=self._backed,
            mode=self.mode,
            feed=self.broadcast,
            checkpointer=self.checkpointer,
            hooks=self.hooks,
            health=self.metrics.health,
            watch=self.broker_watch,
            stop=self._stop,
        )
        self.merged = (
            MergedView(
                service.name,
                config,
                self.codec.schema,
                store,
                envelope,
                self.output,
                Refusals(self.output, self.hooks),
                self.partitions,
                lambda: service.engine(config.options),
                self._count,
            )
            if config.inputs and not config.rekeyed and role == "worker"
            else None
        )
        self._rekeyed = config.rekeyed  # records carry their origin: copies from a step's restart are dropped

    def _apply_mode(self, role: Role) -> tuple[ApplyMode, dict[str, Any] | None]:
        """The apply mode of this worker's role and config, and the state envelope's sharding entry."""
        args = (self.service.name, self.codec, self.output, Refusals(self.output, self.hooks), self._count)
        if role == "coordinator":
            return Coordinator(*args), None
        if self.config.sharded:
            routing, partial, feed, sharding = sharded_setup(
                self.service, self.config, self.codec, self.consumer, self.clients, self.group
            )
            return Sharded(*args, routing, partial, feed), sharding
        modes = {"batch": PerBatch, "checkpoint": AtCheckpoint, "every-event": PerEvent}
        return modes[self.config.emit](*args), None

    @property
    def codec(self) -> Codec:
        """Read-only: the apply mode holds it (another codec is given to the constructor)."""
        return self._codec

    def _count(self, groups: Iterable[list[UpdateEvent]] | Iterable[EventColumns]) -> None:
        self.metrics.count_relations(self.coverage.count(groups))

    def _metadata_answered(self, timeout: float = 1.0) -> bool:
        """Whether some broker answers a metadata request for the input topic now."""
        try:
            self.consumer.list_topics(self.config.input_topic, timeout=timeout)
        except KafkaException:
            return False
        return True

    # --- lifecycle ---------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stop())

    def run(self, until: Callable[[Worker], bool] | None = None) -> None:
        """Process until stopped (or ``until(self)`` is true), then checkpoint and leave the group."""
        rebalance = self.rebalance
        if self.merged is not None:  # one view over every input partition: assigned, not shared
            self.merged.start(self.consumer)
        else:
            self.consumer.subscribe(
                [self.config.input_topic],
                on_assign=rebalance.on_assign,
                on_revoke=rebalance.on_revoke,
                on_lost=rebalance.on_lost,
            )
        feed, health, watch = self.broadcast, self.metrics.health, self.broker_watch
        batch_size, received = self.config.batch_size, self.hooks.batch_received
        try:
            while not self._stop.is_set():
                msgs = self.consumer.consume(batch_size, 0.2 if feed is None else 0.1)
                if msgs:
                    watch.reachable()
                    if received:
                        fire(received, len(msgs))
                    self._process(msgs)
                watch.check()
                if feed is not None:  # the same loop: no engine is ever applied to twice at once
                    side = feed.consume(batch_size, 0.0 if msgs else 0.1)
                    if side:
                        self._process_broadcast(side)
                    msgs = msgs or side
                if not msgs:
                    self._publish_pending(self.partitions.values())  # caught up: nothing held back
                    self.producer.poll(0)
                health.last_beat = now = time.monotonic()  # liveness (shared/health.py)
                if self.checkpointer.due(now):
                    self.checkpoint(periodic=True)
                if until is not None and until(self):
                    break
            health.stopping()
            self.checkpoint()
            for relation in self.coverage.final():
                self._warn_silent(relation, f"before shutdown ({self.coverage.records} input records)")
        except BaseException:
            health.failed()
            self._abandon()
            raise
        self.close()

    def close(self) -> None:
        """Leave the group cleanly: the revocation checkpoints whatever is still owned."""
        self.rebalance.closing = True
        self.consumer.close()
        if self.broadcast is not None:
            self.broadcast.close()
        self.output.flush()
        self.output.leave()
        self.store.close()
        self.refusal_log.flush(force=True)

    def _abandon(self) -> None:
        """After a failure nothing unsafe may be checkpointed: drop the partitions, then leave."""
        self.rebalance.abandon()
        try:
            self.consumer.close()
            if self.broadcast is not None:
                self.broadcast.close()
        finally:
            self.store.close()

    # --- processing --------------------------------------------------------------------------------

    def _process(self, msgs: list[Message]) -> None:
        started = time.perf_counter()
        applied = published = 0
        if self.merged is not None:
            applied, published = self.merged.apply(msgs)
        for partition, pmsgs in by_partition(msgs).items() if self.merged is None else ():
            state = self.partitions.get(partition)
            if state is None:
                continue  # revoked while these were in flight
            if state.next_offset is not None and pmsgs[0].offset() < state.next_offset:  # type: ignore[operator]
                pmsgs = [m for m in pmsgs if m.offset() >= state.next_offset]  # type: ignore[operator]
                if not pmsgs:
                    continue
            state.next_offset = pmsgs[-1].offset() + 1  # type: ignore[operator]  # what the results reflect
            if self._rekeyed:
                pmsgs = fresh(state.origins, pmsgs)
                if not pmsgs:
                    continue
            done = self.mode.apply(state, pmsgs)
            applied += done[0]
            published += done[1]
        for relation in self.coverage.observe(len(msgs)):
            self._warn_silent(relation, f"in the first {self.coverage.records} input records")
        if self.hooks.batch_applied:
            fire(
                self.hooks.batch_applied,
                BatchApplied(len(msgs), applied, published, time.perf_counter() - started),
            )

    def _process_broadcast(self, msgs: list[Message]) -> None:
        started = time.perf_counter()
        assert isinstance(self.mode, Sharded)
        records, applied, published = self.mode.apply_broadcast(list(self.partitions.values()), msgs)
        if records and self.hooks.batch_applied:
            done = BatchApplied(records, applied, published, time.perf_counter() - started, broadcast=True)
            fire(self.hooks.batch_applied, done)

    def _warn_silent(self, relation: str, when: str) -> None:
        log.warning(
            "%s: relation %s received no event %s (the service declares %s)",
            self.service.name,
            relation,
            when,
            ", ".join(self.coverage.relations),
        )

    # --- checkpoints -------------------------------------------------------------------------------

    def _publish_pending(self, partitions: Iterable[PartitionState]) -> int:
        """Publish the results the apply mode holds back (``emit: checkpoint``), counted as results out."""
        published = self.mode.publish_pending(partitions)
        if published:
            self.metrics.events_out.inc(published)
        return published

    def checkpoint(self, *, periodic: bool = False) -> None:
        """Publish again what Redis lost, then checkpoint every owned partition (``periodic``: without
        waiting for the PostgreSQL sink's writes, ``Checkpointer.write``)."""
        if self.mode.republish_lost(self.partitions.values()):
            self.metrics.redis_results_lost.inc()
        self.checkpointer.write(self.partitions.values(), periodic=periodic)

    # --- introspection (tests, demo) ---------------------------------------------------------------

    def results(self) -> dict[str, Any]:
        return {key: result for p in self.partitions.values() for key, result in p.results().items()}

    def positions(self) -> dict[int, int | None]:
        return {p: s.next_offset for p, s in self.partitions.items()}
