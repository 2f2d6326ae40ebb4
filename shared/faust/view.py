"""A service's view as an agent of a Faust app, exactly-once by ivmstream's own checkpoints.

Faust reads the input topic (aiokafka) and hands the agent batches of events without acknowledging
them; the agent applies them with the default runtime's parts: the service's codec and apply mode
(``ivmstream.runtime.apply``), its dead-letter path, its outputs (an idempotent confluent-kafka
producer, so a checkpoint can wait for every result and dead letter to be acknowledged) and its
``Checkpointer``, which writes each partition's state and next offset in one atomic store write.
Only then are the covered events acknowledged to Faust, whose committed offset therefore never
passes the stored one; on assignment each partition is restored from the store
(``Rebalance.take``) and every event below its stored offset is skipped. Faust's transactions are
not used: its default at-least-once delivery is enough."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Literal, cast

import faust
import redis
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka import Message as KafkaMessage
from faust.types import TP, AppT

from ivmstream.config import ConfigError, ServiceConfig, schema_of
from ivmstream.events import EventCodec, UpdateEvent
from ivmstream.events.columns import EventColumns
from ivmstream.events.coverage import RelationCoverage
from ivmstream.metrics import RuntimeMetrics
from ivmstream.runtime.apply import ApplyMode, AtCheckpoint, PerBatch, PerEvent
from ivmstream.runtime.checkpoint import Checkpointer
from ivmstream.runtime.clients import KafkaClients, output_settings
from ivmstream.runtime.hooks import BatchApplied, Hooks, fire
from ivmstream.runtime.kafka import BrokerWatch
from ivmstream.runtime.output import Output
from ivmstream.runtime.partition import PartitionState, store_backing
from ivmstream.runtime.postgres import PostgresSink
from ivmstream.runtime.rebalance import Rebalance, committed_offset
from ivmstream.runtime.refusals import Refusals
from ivmstream.runtime.sensors import MetricsSensor, RefusalLog
from ivmstream.service import ServiceDefinition
from ivmstream.state import StateStore, envelope_for
from ivmstream.state.base import MemoryBounded, StateLost

log = logging.getLogger("ivmstream.faust")


def kafka_bootstrap(app: faust.App) -> str:
    """The ``host:port`` list of a Faust app's brokers (``kafka://a:9092;b:9092`` and lists of URLs)."""
    return ",".join(f"{url.host}:{url.port or 9092}" for url in app.conf.broker)


class Acks:
    """The consumer the ``Checkpointer`` commits to: committing an offset acknowledges to Faust every
    event held below it, so Faust commits no further than the state store holds."""

    def __init__(self, app: faust.App) -> None:
        self.app = app
        self.held: dict[int, list[Any]] = defaultdict(list)  # partition -> Faust messages, in log order

    def hold(self, partition: int, messages: list[Any]) -> None:
        self.held[partition].extend(messages)

    def ack(self, messages: Iterable[Any]) -> None:
        consumer = self.app.consumer
        for message in messages:
            message.ack(consumer)

    def commit(
        self, *, offsets: list[TopicPartition], asynchronous: Literal[False] = False
    ) -> list[TopicPartition]:
        for tp in offsets:
            held = self.held.get(tp.partition)
            if held:
                self.held[tp.partition] = [m for m in held if m.offset >= tp.offset]
                self.ack(m for m in held if m.offset < tp.offset)
        return offsets

    def drop(self, partition: int) -> None:
        """A partition given up: its events past the checkpoint are not acknowledged."""
        self.held.pop(partition, None)


class FaustView:
    """One service's view inside a Faust app (``ivmstream.faust.attach`` builds it)."""

    def __init__(
        self,
        app: faust.App,
        service: ServiceDefinition,
        config: ServiceConfig,
        store: StateStore,
        *,
        bootstrap: str | None = None,
        redis_client: redis.Redis | None = None,
        metrics: RuntimeMetrics | None = None,
        hooks: Hooks | None = None,
        postgres: PostgresSink | None = None,
        silent_relation_after: int | None = 100_000,
    ) -> None:
        """``bootstrap``: the cluster results and dead letters are written to (default: the app's);
        ``postgres``: a results sink, as ``ivmstream run --postgres`` makes one;
        ``silent_relation_after``: input records after which a declared relation that received no
        event is logged (once; and at shutdown either way), as the default runtime's worker does."""
        if config.sharded:
            raise ConfigError(
                f"{config.source}: shard_by runs on the default runtime only (the Faust runtime has no "
                "broadcast consumer or coordinator)"
            )
        self.app, self.service, self.config, self.store = app, service, config, store
        self.group = app.conf.id  # Faust's consumer group
        self.clients = clients = KafkaClients(bootstrap or kafka_bootstrap(app))
        if isinstance(store, MemoryBounded):
            store.set_memory(config.rocksdb_block_cache_mib << 20, config.rocksdb_write_buffer_mib << 20)
        backed = store_backing(store, service.engine(config.options), config.state_layout == "incremental")
        self.codec = EventCodec(schema_of(service, config))
        self.metrics = metrics or RuntimeMetrics(service.name, runtime="faust")
        self.hooks = hooks or Hooks()
        self.partitions: dict[int, PartitionState] = {}
        MetricsSensor(self.metrics, store, self.partitions).attach(self.hooks)
        self.refusal_log = RefusalLog(service.name, config.dlq_topic)  # counts per reason, a line per 10 s
        self.refusal_log.attach(self.hooks)
        self.watch = watch = BrokerWatch(clients.bootstrap, config.broker_timeout, self._metadata_answered)
        # group metadata only (committed offsets, watermarks): it never subscribes, so it is no member
        self.metadata = clients.consumer(
            self.group,
            config.session_timeout_ms,
            {**config.kafka.get("consumer", {}), "error_cb": watch.on_error},
        )
        self.output = Output(
            service.name,
            clients.producer(output_settings(config, watch.on_error)),
            config.output_topic,
            config.dlq_topic,
            redis_client,
            dead_letter_max_bytes=config.dead_letter_max_bytes,
            postgres=postgres,
        )
        self.coverage = RelationCoverage(self.codec.schema.relations, silent_relation_after)
        self.metrics.count_relations(dict.fromkeys(self.coverage.relations, 0))
        mode_class = {"batch": PerBatch, "checkpoint": AtCheckpoint, "every-event": PerEvent}[config.emit]
        self.mode: ApplyMode = mode_class(
            service.name, self.codec, self.output, Refusals(self.output, self.hooks), self._count
        )
        envelope = envelope_for(service, config.options, config.state_layout, None)
        self.acks = Acks(app)
        self.checkpointer = Checkpointer(
            store,
            self.output,
            self.acks,
            envelope.to_bytes(),
            config.checkpoint_interval,
            self.hooks,
            watch.check,  # type: ignore[arg-type]
            self.mode.publish_pending,  # emit: checkpoint: held-back results, before each checkpoint
        )
        self._stop = threading.Event()
        self.rebalance = Rebalance(
            store=store,
            config=config,
            envelope=envelope,
            group=self.group,
            partitions=self.partitions,
            new_engine=lambda: service.engine(config.options),
            backed=backed,
            mode=self.mode,
            feed=None,
            checkpointer=self.checkpointer,
            hooks=self.hooks,
            health=self.metrics.health,
            watch=watch,
            stop=self._stop,
        )
        self.failed: BaseException | None = None
        self.topic = app.topic(
            config.input_topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
        )
        self.agent = app.agent(self.topic, name=f"ivmstream-{service.name}")(self._agent)
        app.on_partitions_assigned.connect(cast(Any, self._on_assigned))
        app.on_partitions_revoked.connect(cast(Any, self._on_revoked))
        app.on_before_shutdown.connect(cast(Any, self._on_shutdown))
        app.sensors.add(_RebalanceSensor(self))
        app.task(self._ticker)
        self.closed = False

    # --- Faust's side ------------------------------------------------------------------------------

    async def _agent(self, stream: faust.StreamT) -> None:
        """The agent: batches of events, unacknowledged until a checkpoint covers them."""
        batch_size = self.config.batch_size
        async for events in cast(faust.Stream, stream).noack_take(batch_size, within=0.05):
            if self.failed is not None:
                continue
            try:
                self.process([event.message for event in events])
                if self.app.rebalancing or self.app.should_stop:
                    self.checkpoint()  # Faust waits for every event to be acknowledged
            except BaseException as exc:
                await self._fail(exc)

    async def _ticker(self) -> None:
        """Checkpoints on time when no batch comes, and at once while Faust rebalances or stops."""
        while self.failed is None and not self.closed:
            await asyncio.sleep(0.1)
            if self.closed:
                return
            now = time.monotonic()
            self.metrics.health.last_beat = now
            urgent = (self.app.rebalancing or self.app.should_stop) and self.acks.held
            if urgent or self.checkpointer.due(now):
                try:
                    self.watch.check()
                    self.checkpoint()
                except BaseException as exc:
                    await self._fail(exc)

    async def _on_assigned(self, _sender: Any, assigned: set[TP], **_kwargs: Any) -> None:
        tps = [
            TopicPartition(tp.topic, tp.partition) for tp in assigned if tp.topic == self.config.input_topic
        ]
        tps = [tp for tp in tps if tp.partition not in self.partitions]
        if not tps or self.failed is not None:
            return
        try:
            self.rebalance.take(self.metadata, tps)  # type: ignore[arg-type]
            for tp in tps:
                self._check_group_behind(tp)
        except BaseException as exc:
            await self._fail(exc)

    async def _on_shutdown(self, _sender: Any, **_kwargs: Any) -> None:
        """Faust's consumer has stopped: a last checkpoint, then the clients and the store close."""
        try:
            self.close()
        except BaseException as exc:
            await self._fail(exc)

    async def _on_revoked(self, _sender: Any, revoked: set[TP], **_kwargs: Any) -> None:
        tps = [
            TopicPartition(tp.topic, tp.partition) for tp in revoked if tp.topic == self.config.input_topic
        ]
        if not tps or self.failed is not None:
            return
        try:
            self.rebalance.on_revoke(self.metadata, tps)  # type: ignore[arg-type]
        except BaseException as exc:
            await self._fail(exc)
        for tp in tps:
            self.acks.drop(tp.partition)

    def _check_group_behind(self, tp: TopicPartition) -> None:
        """Faust positions its consumer at the group's committed offset, which follows checkpoints; one
        past the stored offset means the store lost state this group had, and the events between
        would never be read: refuse, as the default runtime refuses a Redis store that lost its data."""
        stored = tp.offset if tp.offset >= 0 else 0
        group = committed_offset(self.metadata, tp, self.watch, self._stop)  # type: ignore[arg-type]
        if group > stored:
            raise StateLost(
                f"the {self.store.name} state of {tp.topic}:{tp.partition} resumes at offset {stored}, but "
                f"group {self.group} committed offset {group}: the state was lost, and the Faust runtime "
                "reads from the group's offset; rebuild it under a new group (Faust app id), or bootstrap "
                "it (`ivmstream bootstrap`)"
            )

    async def _fail(self, exc: BaseException) -> None:
        """Nothing past the last checkpoint may be written after a failure: drop the partitions
        unwritten and stop the app (its runner reports the error)."""
        if self.failed is None:
            self.failed = exc
            self.metrics.health.failed()
            self.rebalance.abandon()
            log.error("%s: %s", self.service.name, exc)
        await self.app.crash(exc)

    # --- ivmstream's side --------------------------------------------------------------------------

    def process(self, messages: list[Any]) -> None:
        """Apply Faust messages (any partitions, log order within each) through the apply mode."""
        started = time.perf_counter()
        if self.hooks.batch_received:
            fire(self.hooks.batch_received, len(messages))
        parts: dict[int, list[Any]] = defaultdict(list)
        for message in messages:
            parts[message.partition].append(message)
        applied = published = 0
        for partition, held in parts.items():
            state = self.partitions.get(partition)
            if state is None:  # revoked while these were buffered: the next owner reads them
                continue
            resume = state.next_offset
            if resume is not None and held[0].offset < resume:
                done = [m for m in held if m.offset < resume]  # covered by the state already
                held = held[len(done) :]
                if state.committed_offset is not None and state.committed_offset >= resume:
                    self.acks.ack(done)
                else:
                    self.acks.hold(partition, done)
                if not held:
                    continue
            state.next_offset = held[-1].offset + 1
            records = [
                KafkaMessage(
                    topic=m.topic, partition=partition, offset=m.offset, key=m.key, value=m.value, error=None
                )
                for m in held
            ]
            done_applied, done_published = self.mode.apply(state, records)
            applied += done_applied
            published += done_published
            self.acks.hold(partition, held)
        for relation in self.coverage.observe(len(messages)):
            self._warn_silent(relation, f"in the first {self.coverage.records} input records")
        if self.hooks.batch_applied:
            batch = BatchApplied(len(messages), applied, published, time.perf_counter() - started)
            fire(self.hooks.batch_applied, batch)

    def checkpoint(self) -> None:
        """Publish again what Redis lost, checkpoint every owned partition, then acknowledge to Faust."""
        if self.mode.republish_lost(self.partitions.values()):
            self.metrics.redis_results_lost.inc()
        self.checkpointer.write(self.partitions.values())

    def _count(self, groups: Iterable[list[UpdateEvent]] | Iterable[EventColumns]) -> None:
        self.metrics.count_relations(self.coverage.count(groups))

    def _metadata_answered(self, timeout: float = 1.0) -> bool:
        try:
            self.metadata.list_topics(self.config.input_topic, timeout=timeout)
        except KafkaException:
            return False
        return True

    def close(self) -> None:
        """When the app stops: a last checkpoint (unless failed), then the clients and the store."""
        if self.closed:
            return
        self.closed = True
        if self.failed is None:
            self.checkpoint()
        self.metadata.close()
        self.output.flush()
        self.output.leave()
        self.store.close()
        self.refusal_log.flush(force=True)
        for relation in self.coverage.final():
            self._warn_silent(relation, f"before shutdown ({self.coverage.records} input records)")

    def _warn_silent(self, relation: str, when: str) -> None:
        log.warning(
            "%s: relation %s received no event %s (the service declares %s)",
            self.service.name,
            relation,
            when,
            ", ".join(self.coverage.relations),
        )

    # --- introspection (tests, the web view) -------------------------------------------------------

    def results(self) -> dict[str, Any]:
        return {key: result for p in self.partitions.values() for key, result in p.results().items()}

    def result(self, key: str) -> dict[str, Any] | None:
        """The latest record of ``key`` as published, if a partition owned here has it."""
        for state in self.partitions.values():
            if state.has_state(key):
                return self.mode.record(state, key, state.engines.get(key) or state.read_engine(key))
        return None


class _RebalanceSensor(faust.Sensor):
    """Faust waits at a rebalance until every event taken is acknowledged; events are acknowledged by
    checkpoints, so one is written as the rebalance starts."""

    def __init__(self, view: FaustView, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.view = view

    def on_rebalance_start(self, app: AppT) -> dict[Any, Any]:
        view = self.view
        if view.failed is None and view.partitions:
            try:
                view.checkpoint()
            except BaseException as exc:
                view.failed = exc
                view.rebalance.abandon()
                log.error("%s: %s", view.service.name, exc)
        return super().on_rebalance_start(app)
