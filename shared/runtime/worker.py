"""The one consumer loop every service runs: consume a batch, decode, apply, publish, checkpoint.

Exactly-once state rests on three rules kept here:
1. On assignment a partition's engines and next offset come from the state store, and the consumer
   is positioned there explicitly (never at the group's committed offset, which is informational).
2. A checkpoint first flushes every published result and dead letter, then writes the changed
   engine snapshots and the next offset in one atomic store write.
3. On revocation and on shutdown the owned partitions are checkpointed before they are released.

A sharded query (config key ``shard_by``) keeps one engine per input partition, also applies the
broadcast partition to each (``ivmstream.runtime.broadcast``) and publishes each partition's result as a
partial result tagged with both offsets; ``ivmstream.runtime.coordinator`` sums them.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import orjson
import redis
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from ivmstream import changelog
from ivmstream.config import ConfigError, ServiceConfig, producer_message_max_bytes, schema_of
from ivmstream.events import EventCodec, EventError, UpdateEvent
from ivmstream.events.coverage import RelationCoverage
from ivmstream.metrics import RuntimeMetrics
from ivmstream.runtime.broadcast import BroadcastFeed, first_unapplied, resume_offset
from ivmstream.runtime.kafka import BrokerUnavailable, BrokerWatch, consumer_settings, producer_settings
from ivmstream.runtime.output import Output, build_record
from ivmstream.runtime.partition import PartitionState, store_backing
from ivmstream.runtime.routing import ShardRouting, routing_of
from ivmstream.secrets import redact
from ivmstream.service import ServiceDefinition, load_sharding
from ivmstream.state import StateStore, check_envelope, envelope_for
from ivmstream.state.base import KeyLoader, MemoryBounded, StateLost

log = logging.getLogger("ivmstream.runtime")

FaultHook = Callable[[str], None]


class HistoryTruncated(RuntimeError):
    """The input log no longer holds updates the state has not seen: the view would be silently wrong."""


KEYLESS = ""  # the partition key of a service without key_field (see EventCodec.decode_grouped)

# Unbound accessors, mapped over a whole batch in C.
_message_error = Message.error
_message_partition = Message.partition
_message_value = Message.value


class Worker:
    def __init__(
        self,
        service: ServiceDefinition,
        config: ServiceConfig,
        bootstrap: str,
        store: StateStore,
        *,
        group: str | None = None,
        redis_client: redis.Redis | None = None,
        metrics: RuntimeMetrics | None = None,
        fault_hook: FaultHook | None = None,
        silent_relation_after: int | None = 100_000,
        codec: Any = None,
    ) -> None:
        """``silent_relation_after``: input records after which a declared relation that received no
        event is logged (once; and at shutdown either way). ``codec``: what turns input records into
        events, if not the service's ``EventCodec`` (the coordinator reads published results)."""
        self.service = service
        self.config = config
        self.store = store
        if isinstance(store, MemoryBounded):
            store.set_memory(config.rocksdb_block_cache_mib << 20, config.rocksdb_write_buffer_mib << 20)
        # maps the engines read through the store: not loaded on assignment (refused here if unservable)
        probe = service.engine(config.options)
        self._backed = store_backing(store, probe, config.state_layout == "incremental")
        self.group = group or f"ivmstream.{service.name}"
        self.codec = codec if codec is not None else EventCodec(schema_of(service, config))
        self.metrics = metrics or RuntimeMetrics(service.name)
        self._fault = fault_hook or (lambda _point: None)
        self.broker_watch = BrokerWatch(bootstrap, config.broker_timeout, self._metadata_answered)
        self.consumer = Consumer(
            consumer_settings(
                bootstrap,
                self.group,
                config.session_timeout_ms,
                {
                    **config.kafka.get("consumer", {}),
                    "stats_cb": self._on_stats,
                    "error_cb": self.broker_watch.on_error,
                },
            )
        )
        # the producer reports outages too: a checkpoint waiting on output acknowledgements polls only it.
        # Output reads delivery reports for failures only, so a delivered record (a result, a dead letter
        # in a flood) calls no Python at all; lz4 batches: a flood's dead letters repeat the bad records'
        # bytes (oversized ones above all), which the broker then receives compressed. message.max.bytes
        # leaves room for the largest dead letter (docs/security.md, "Hostile input").
        message_max = producer_message_max_bytes(config.dead_letter_max_bytes, config.kafka)
        self.producer = Producer(
            producer_settings(
                bootstrap,
                {
                    "delivery.report.only.error": True,
                    "compression.type": "lz4",
                    "message.max.bytes": message_max,
                    **config.kafka.get("producer", {}),
                    "error_cb": self.broker_watch.on_error,
                },
            )
        )
        self.output = Output(
            service.name,
            self.producer,
            config.output_topic,
            config.dlq_topic,
            redis_client,
            dead_letter_max_bytes=config.dead_letter_max_bytes,
        )
        self.partitions: dict[int, PartitionState] = {}
        self._stop = threading.Event()
        self._closing = False  # set before consumer.close(): a rebalance finishing inside it takes nothing
        self._last_checkpoint = time.monotonic()
        self._options = config.options
        self._every_event = config.emit == "every-event"
        self.coverage = RelationCoverage(self.codec.schema.relations, silent_relation_after)
        self.metrics.count_relations(dict.fromkeys(self.coverage.relations, 0))
        self.routing: ShardRouting | None = None
        self.broadcast: BroadcastFeed | None = None
        sharding = self._setup_sharding(bootstrap) if config.sharded else None
        self._envelope = envelope_for(service, config.options, config.state_layout, sharding)
        self._envelope_bytes = self._envelope.to_bytes()
        self._last_size_probe = 0.0

    def _metadata_answered(self, timeout: float = 1.0) -> bool:
        """Whether some broker answers a metadata request for the input topic now."""
        try:
            self.consumer.list_topics(self.config.input_topic, timeout=timeout)
        except KafkaException:
            return False
        return True

    def _setup_sharding(self, bootstrap: str) -> dict[str, Any]:
        """A sharded query: its routing over the input topic's partitions, and the broadcast reader
        (only if some relation lacks the shard variable). Returns the envelope's sharding entry."""
        config = self.config
        topics = self.consumer.list_topics(timeout=10).topics  # every topic: creates none
        meta = topics.get(config.input_topic)
        if meta is None or not meta.partitions:
            raise ConfigError(
                f"{config.source}: the input topic {config.input_topic} of a sharded query must exist "
                "before its workers start (its partition count is the number of shards)"
            )
        shards = len(meta.partitions)
        self.routing = routing_of(self.codec.schema.relations.values(), config, shards)
        sharding = load_sharding(self.service)
        assert sharding is not None  # build_config refuses shard_by otherwise
        self._partial_result = sharding.partial_result
        if self.routing.broadcast:
            bmeta = topics.get(config.broadcast_topic)
            if bmeta is None or len(bmeta.partitions) != 1:
                found = "does not exist" if bmeta is None else f"has {len(bmeta.partitions)} partitions"
                raise ConfigError(
                    f"{config.source}: the broadcast topic {config.broadcast_topic} {found}; it must have "
                    f"exactly one partition (events of {', '.join(sorted(self.routing.broadcast))})"
                )
            self.broadcast = BroadcastFeed(
                bootstrap,
                config.broadcast_topic,
                self.group,
                config.session_timeout_ms,
                config.kafka.get("consumer", {}),
            )
        return {"shard_by": config.shard_by, "shards": shards}

    # --- lifecycle ---------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stop())

    def run(self, until: Callable[[Worker], bool] | None = None) -> None:
        """Process until stopped (or ``until(self)`` is true), then checkpoint and leave the group."""
        self.consumer.subscribe(
            [self.config.input_topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        feed = self.broadcast
        health = self.metrics.health
        watch = self.broker_watch
        try:
            while not self._stop.is_set():
                msgs = self.consumer.consume(self.config.batch_size, 0.2 if feed is None else 0.1)
                if msgs:
                    watch.reachable()
                    self._process(msgs)
                watch.check()
                if feed is not None:  # the same loop: no engine is ever applied to twice at once
                    side = feed.consume(self.config.batch_size, 0.0 if msgs else 0.1)
                    if side:
                        self._process_broadcast(side)
                    msgs = msgs or side
                if not msgs:
                    self.producer.poll(0)
                health.last_beat = now = time.monotonic()  # liveness (shared/health.py)
                if now - self._last_checkpoint >= self.config.checkpoint_interval:
                    self.checkpoint()
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
        self._closing = True
        self.consumer.close()
        if self.broadcast is not None:
            self.broadcast.close()
        self.output.flush()
        self.output.leave()
        self.store.close()

    def _abandon(self) -> None:
        """After a failure nothing unsafe may be checkpointed: drop the partitions, then leave."""
        for state in list(self.partitions.values()):
            self.store.release(state.topic, state.partition)
        self.partitions.clear()
        self._closing = True
        try:
            self.consumer.close()
            if self.broadcast is not None:
                self.broadcast.close()
        finally:
            self.store.close()

    # --- rebalance callbacks -----------------------------------------------------------------------

    def _new_engine(self) -> Any:
        return self.service.engine(self._options)

    def _on_assign(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        if self._closing:
            # A rebalance that completes inside consumer.close(): the handle is being destroyed, so
            # reading offsets would fail (_DESTROY) and the worker exit 1 on a clean stop; the
            # partitions are never consumed here and are revoked again at once, so load nothing.
            log.info("leaving the group: not taking %d partition(s) assigned during shutdown", len(tps))
            return
        self.metrics.health.restoring()
        loader = self.store if self.config.resident_keys is not None else None
        if loader is not None and not isinstance(loader, KeyLoader):
            loader = None  # a store that cannot read single keys keeps every engine resident
        for tp in tps:
            cp = (
                loader.load_header(tp.topic, tp.partition)
                if loader is not None
                else self.store.load(tp.topic, tp.partition, skip_maps=self._backed)
            )
            where = f"the {self.store.name} state of {tp.topic}:{tp.partition}"
            check_envelope(cp.envelope, self._envelope, where, has_state=not cp.empty)
            if cp.offset is None:
                self._check_not_lost(consumer, tp)
            self._check_history(consumer, tp, cp.offset)
            if self.broadcast is not None:
                self._check_broadcast_history(tp, cp.broadcast_offset)
            state = self.partitions[tp.partition] = PartitionState(
                tp.topic,
                tp.partition,
                self._new_engine,
                cp,
                incremental=self.config.state_layout == "incremental",
                store=self.store if self._backed else None,  # type: ignore[arg-type]  # store_backing checked it
                backed=self._backed,
                loader=loader,
                resident_keys=self.config.resident_keys if loader is not None else None,
            )
            if self.output.redis is not None and self.routing is None and state.key_count:
                # Redis lost results while no worker ran: publish those keys' current results again
                missing = self.output.missing_results(state.all_keys())
                if missing:
                    self._republish(state, missing)
                    log.warning(
                        "%s: %d result(s) missing in Redis published again", state.label, len(missing)
                    )
            if self.routing is not None and state.next_offset is None:
                # _check_history: without a checkpoint the log starts at 0; a broadcast record may be
                # applied before the first input record, and the checkpoint then needs an input offset
                state.next_offset = 0
            tp.offset = cp.offset if cp.offset is not None else OFFSET_BEGINNING
            log.info(
                "assigned %s:%d from offset %s%s",
                tp.topic,
                tp.partition,
                cp.offset if cp.offset is not None else "earliest",
                f" and broadcast offset {cp.broadcast_offset or 0}" if self.broadcast is not None else "",
            )
        consumer.assign(tps)
        self._restart_broadcast()
        self._update_gauges()
        self.metrics.health.consuming(len(self.partitions))

    def _check_broadcast_history(self, tp: TopicPartition, stored: int | None) -> None:
        assert self.broadcast is not None
        low = self.broadcast.low_watermark()
        if (stored or 0) < low:
            raise HistoryTruncated(
                f"{self.broadcast.topic}:0 starts at offset {low}, but the state of "
                f"{tp.topic}:{tp.partition} needs broadcast offset {stored or 0}: records were deleted by "
                "retention; bootstrap the state from a snapshot (ivmstream bootstrap) or raise the retention"
            )

    def _restart_broadcast(self) -> None:
        """Read the broadcast partition from the smallest offset an owned partition still needs."""
        if self.broadcast is not None:
            offset = resume_offset(s.broadcast_next for s in self.partitions.values())
            self.broadcast.start_at(offset)
            log.info("reading %s:0 from offset %s", self.broadcast.topic, offset)

    def _check_not_lost(self, consumer: Consumer, tp: TopicPartition) -> None:
        """No stored state, yet the group has committed an offset here: the offsets mirrored into the group
        follow checkpoints, so a checkpoint existed. In Redis, which every worker of the group shares,
        that state is lost (restarted without persistence, flushed): starting from the earliest offset
        would rebuild it silently while results already published go back in time, so refuse and say
        so. RocksDB state is local to a worker's volume: a partition that moved to a worker without
        its database is rebuilt from the log (``_check_history`` refuses when the log lost records),
        and the worker says so. The memory store keeps nothing across restarts by design."""
        if self.store.name not in ("redis", "rocksdb"):
            return
        offset = self._committed_offset(consumer, tp)
        if offset < 0:
            return
        if self.store.name == "rocksdb":
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
            f"the {self.store.name} state of {tp.topic}:{tp.partition} is empty, but group {self.group} "
            f"committed offset {offset} there after a checkpoint: the state was lost (Redis "
            "restarted without persistence, or was flushed); refusing to rebuild it silently from the "
            "earliest offset: bootstrap it (`ivmstream bootstrap`), or rebuild it from the log under a "
            "new --group"
        )

    def _committed_offset(self, consumer: Consumer, tp: TopicPartition) -> int:
        """The group's committed offset of ``tp``, asked again while Kafka does not answer (brokers going
        down during an assignment) until ``broker_timeout`` passes, then the worker stops as for any
        outage: nothing of this partition was processed, so a restart resumes exactly."""
        watch = self.broker_watch
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
                if self._stop.is_set():
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

    @staticmethod
    def _check_history(consumer: Consumer, tp: TopicPartition, stored: int | None) -> None:
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

    def _on_revoke(self, _consumer: Consumer, tps: list[TopicPartition]) -> None:
        owned = [self.partitions[tp.partition] for tp in tps if tp.partition in self.partitions]
        self.metrics.health.rebalancing()
        self.checkpoint(owned)
        self._drop(tps)

    def _on_lost(self, _consumer: Consumer, tps: list[TopicPartition]) -> None:
        """Lost (session expired): another member may own these now, so write nothing."""
        self.metrics.health.rebalancing()
        self._drop(tps)

    def _drop(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            if self.partitions.pop(tp.partition, None) is not None:
                self.store.release(tp.topic, tp.partition)
        self._restart_broadcast()
        self._update_gauges()

    # --- processing --------------------------------------------------------------------------------

    def _process(self, msgs: list[Message]) -> None:
        started = time.perf_counter()
        by_partition: dict[int, list[Message]]
        first = msgs[0].partition() if msgs else None
        if (
            msgs
            and not any(map(_message_error, msgs))
            and list(map(_message_partition, msgs)).count(first) == len(msgs)
        ):
            by_partition = {first: msgs}  # the common case, checked in C: one partition, no errors
        else:
            by_partition = defaultdict(list)
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    if err.fatal() or not err.retriable():
                        raise KafkaException(err)
                    log.warning("consumer error: %s", err.str())
                    continue
                by_partition[msg.partition()].append(msg)
        published = 0
        for partition, pmsgs in by_partition.items():
            state = self.partitions.get(partition)
            if state is None:
                continue  # revoked while these were in flight
            if state.next_offset is not None and pmsgs[0].offset() < state.next_offset:
                pmsgs = [m for m in pmsgs if m.offset() >= state.next_offset]
                if not pmsgs:
                    continue
            touched = self._apply_partition(state, pmsgs)
            state.next_offset = pmsgs[-1].offset() + 1
            if self.routing is not None:
                published += self._publish_partial(state)
                continue
            if self._every_event:  # the changelog went to the topic; Redis keeps each key's latest
                published += self.output.store_latest((key, self._record(state, key)) for key in touched)
                continue
            published += self.output.publish((key, self._record(state, key)) for key in touched)
        self.metrics.events_in.inc(len(msgs))
        for relation in self.coverage.observe(len(msgs)):
            self._warn_silent(relation, f"in the first {self.coverage.records} input records")
        self.metrics.events_out.inc(published)
        self.metrics.batch_size.observe(len(msgs))
        self.metrics.batch_seconds.observe(time.perf_counter() - started)

    def _apply_partition(self, state: PartitionState, msgs: list[Message]) -> list[str]:
        """Decode and apply one partition's records; each key's events keep their log order."""
        codec = self.codec
        if codec.schema.key_field is None and state.partition != 0 and self.routing is None:
            detail = (
                "service has no key_field, so its input must be one ordered stream on partition 0, "
                f"not partition {state.partition}"
            )
            for msg, item in zip(msgs, codec.decode_many(map(_message_value, msgs)), strict=True):
                if item.__class__ is UpdateEvent:
                    self._reject(msg, "keyless-partition", detail)
                else:
                    self._reject(msg, item.code, item.detail)
            self.metrics.events_applied.inc(0)
            return []
        decoded, groups, errors = codec.decode_grouped(map(_message_value, msgs))
        self.metrics.count_relations(self.coverage.count(groups.values()))
        if errors:
            self._reject_decoded(state, msgs, decoded)  # type: ignore[arg-type]
        if self._every_event:
            return self._apply_each(state, msgs, decoded)
        if self.routing is not None:
            groups = self._drop_misrouted(state.partition, msgs, decoded, groups)
        applied = 0
        index: dict[int, int] | None = None  # id(event) -> position, built if an engine rejects
        state.prefetch(groups)
        for key, events in groups.items():
            given = events.copy()  # maps rejections back to records whatever the engine does to its list
            rejections = state.engine(key).apply(events)
            if rejections:
                if index is None:
                    index = {id(item): i for i, item in enumerate(decoded)}  # decoding made each event
                for r in rejections:
                    self._reject(msgs[index[id(given[r.index])]], r.code, r.detail)
            applied += len(given) - len(rejections)
            state.dirty.add(key)
        self.metrics.events_applied.inc(applied)
        return list(groups)

    def _apply_each(
        self, state: PartitionState, msgs: list[Message], decoded: list[UpdateEvent | EventError]
    ) -> list[str]:
        """``emit: every-event``: events applied one at a time in log order; after each, a changelog
        record (the JSON Patch from the key's previous result, ``ivmstream.changelog``) with the event's
        offset goes to the output topic. A key without state starts from ``{}``, so its first record
        carries its whole result. Replayed after a crash from the same checkpoint, the same events give
        the same records."""
        applied = 0
        changes: list[tuple[str, dict[str, Any]]] = []
        latest: dict[str, Any] = {}  # each touched key's result after its last event in this batch
        topic, partition, name = state.topic, state.partition, self.service.name
        for msg, item in zip(msgs, decoded, strict=True):
            if item.__class__ is not UpdateEvent:
                continue
            assert isinstance(item, UpdateEvent)
            key = item.key if item.key is not None else KEYLESS
            if key in latest:
                engine, before = state.engines[key], latest[key]
            else:
                existed = state.has_state(key)
                engine = state.engine(key)
                before = latest[key] = engine.result() if existed else {}
            rejections = engine.apply([item])  # a refused event leaves the engine as it was
            state.dirty.add(key)
            if rejections:
                self._reject(msg, rejections[0].code, rejections[0].detail)
                continue
            applied += 1
            offset = msg.offset()
            changes.append(
                (
                    key,
                    {
                        "service": name,
                        "key": key,
                        "event": f"{topic}:{partition}:{offset}",
                        "offsets": {f"{topic}:{partition}": offset + 1},
                        "patch": changelog.diff(before, after := engine.result()),
                    },
                )
            )
            latest[key] = after
        self.output.publish_changes(changes)
        self.metrics.events_applied.inc(applied)
        return list(latest)

    def _record(self, state: PartitionState, key: str, engine: Any = None) -> dict[str, Any]:
        """A key's published record; an engine that sums upstream results (the coordinator) also says
        which upstream offsets its result reflects. ``engine``: one read from the store, not resident."""
        engine = engine if engine is not None else state.engines[key]
        record = build_record(
            self.service.name, key, engine.result(), state.topic, state.partition, state.next_offset or 0
        )
        reflects = getattr(engine, "reflects", None)
        if reflects is not None:
            record["reflects"] = reflects()
        return record

    def _drop_misrouted(
        self,
        partition: int,
        msgs: list[Message],
        decoded: list[UpdateEvent | EventError],
        groups: dict[str, list[UpdateEvent]],
    ) -> dict[str, list[UpdateEvent]]:
        """A sharded query's input partition: dead-letter the events that belong elsewhere (another
        partition, or the broadcast topic), since joined with this slice they would count wrongly."""
        routing = self.routing
        assert routing is not None
        kept: dict[str, list[UpdateEvent]] = {}
        index: dict[int, int] | None = None
        for key, events in groups.items():
            ok = []
            for ev in events:
                detail = routing.misplaced_input(ev, partition)
                if detail is None:
                    ok.append(ev)
                    continue
                if index is None:
                    index = {id(item): i for i, item in enumerate(decoded)}
                self._reject(msgs[index[id(ev)]], "misrouted", detail)
            if ok:
                kept[key] = ok
        return kept

    def _process_broadcast(self, msgs: list[Message]) -> None:
        """Apply broadcast records to every owned partition that has not applied them yet, in log order,
        and publish each such partition's partial result. A refused broadcast record is dead-lettered
        once, by the owner of input partition 0, rather than once per partition."""
        started = time.perf_counter()
        routing = self.routing
        assert routing is not None
        good = []
        for msg in msgs:
            err = msg.error()
            if err is None:
                good.append(msg)
            elif err.code() != KafkaError._PARTITION_EOF:
                if err.fatal() or not err.retriable():
                    raise KafkaException(err)
                log.warning("broadcast consumer error: %s", err.str())
        if not good or not self.partitions:
            return
        decoded = self.codec.decode_many(map(_message_value, good))
        refused: dict[int, tuple[str, str]] = {}
        events: list[tuple[int, UpdateEvent]] = []
        for i, item in enumerate(decoded):
            if item.__class__ is not UpdateEvent:
                refused[i] = (item.code, item.detail)  # type: ignore[union-attr]
                continue
            detail = routing.misplaced_broadcast(item)  # type: ignore[arg-type]
            if detail is not None:
                refused[i] = ("misrouted", detail)
            else:
                events.append((i, item))  # type: ignore[arg-type]
        self.metrics.count_relations(self.coverage.count([[ev for _i, ev in events]]))
        offsets = [m.offset() for m in good]
        positions = [i for i, _ev in events]
        published = applied = 0
        for state in sorted(self.partitions.values(), key=lambda s: s.partition):
            start = first_unapplied(offsets, state.broadcast_next)
            if start == len(good):
                continue  # applied all of them before (the reader restarted behind this partition)
            first = first_unapplied(positions, start)
            mine = [ev for _i, ev in events[first:]]
            rejections = state.engine(KEYLESS).apply(list(mine)) if mine else []
            if mine:
                state.dirty.add(KEYLESS)
            applied += len(mine) - len(rejections)
            if state.partition == 0:
                for i in range(start, len(good)):
                    if i in refused:
                        self._reject(good[i], *refused[i])
                for r in rejections:
                    self._reject(good[positions[first + r.index]], r.code, r.detail)
            state.broadcast_next = offsets[-1] + 1
            published += self._publish_partial(state)
        self.metrics.events_in.inc(len(good))
        self.metrics.events_applied.inc(applied)
        self.metrics.events_out.inc(published)
        self.metrics.batch_seconds.observe(time.perf_counter() - started)

    def _publish_partial(self, state: PartitionState) -> int:
        """A sharded query's partition result, keyed by its input partition and tagged with its input and
        broadcast offsets; every partial goes to partition 0 of the output topic, the coordinator's input."""
        record = build_record(
            self.service.name,
            state.label,
            self._partial_result(state.engine(KEYLESS)),
            state.topic,
            state.partition,
            state.next_offset or 0,
        )
        if self.broadcast is not None:
            record["offsets"][f"{self.broadcast.topic}:0"] = state.broadcast_next or 0
        return self.output.publish([(state.label, record)], partition=0)

    def _republish(self, state: PartitionState, keys: list[str] | None = None) -> int:
        """Publish again the current results of ``keys`` (None: every key) of a partition, after Redis
        lost them; keys not resident are read from the store into throwaway engines."""
        if self.routing is not None:
            return self._publish_partial(state)
        wanted = state.all_keys() if keys is None else keys
        records = []
        for key in wanted:
            engine = state.engines.get(key)
            if engine is None:
                engine = state.read_engine(key)
            records.append((key, self._record(state, key, engine)))
        if self._every_event:  # the topic carries changelog records only
            return self.output.store_latest(records)
        return self.output.publish(records)

    def _heal_redis_results(self) -> None:
        """Redis restarted empty or was flushed while results were published: publish every owned key's
        result again, so Redis is whole by the next checkpoint."""
        if not self.output.redis_lost_results():
            return
        n = sum(self._republish(state) for state in self.partitions.values())
        self.metrics.redis_results_lost.inc()
        log.warning(
            "Redis lost the published results of %s; published %d current results again", self.service.name, n
        )

    def _warn_silent(self, relation: str, when: str) -> None:
        log.warning(
            "%s: relation %s received no event %s (the service declares %s)",
            self.service.name,
            relation,
            when,
            ", ".join(self.coverage.relations),
        )

    def _reject(self, msg: Message, code: str, detail: str) -> None:
        self._reject_many([(msg, code, detail)])

    def _reject_many(self, refused: list[tuple[Message, str, str]]) -> None:
        """Dead-letter and count refused records as one batch: a flood of bad input costs one produce per
        record, and one metric update per reason and batch (not a label lookup per record)."""
        self.output.dead_letters(refused)
        counts: dict[str, int] = {}
        for _, code, _ in refused:
            counts[code] = counts.get(code, 0) + 1
        for code, n in counts.items():
            self.metrics.reject(code, n)
        if log.isEnabledFor(logging.DEBUG):
            for msg, code, detail in refused:
                log.debug(
                    "rejected %s:%d:%d %s: %s", msg.topic(), msg.partition(), msg.offset(), code, detail
                )

    def _reject_decoded(
        self, state: PartitionState, msgs: list[Message], decoded: list[UpdateEvent | EventError]
    ) -> None:
        """Dead-letter the records of one partition the codec refused (its EventErrors in ``decoded``), in
        one pass over the batch (a flood's hot path: shared/runtime/output.py dead_letter_decoded)."""
        if log.isEnabledFor(logging.DEBUG):  # the per-record debug lines
            self._reject_many(
                [
                    (msgs[i], item.code, item.detail)  # type: ignore[union-attr]
                    for i, item in enumerate(decoded)
                    if item.__class__ is not UpdateEvent
                ]
            )
            return
        counts = self.output.dead_letter_decoded(state.topic, state.partition, msgs, decoded, UpdateEvent)
        for code, n in counts.items():
            self.metrics.reject(code, n)

    # --- checkpoints -------------------------------------------------------------------------------

    def checkpoint(self, partitions: list[PartitionState] | None = None) -> None:
        """Flush outputs, then commit each changed partition's snapshots and offset atomically."""
        self._last_checkpoint = time.monotonic()
        if self.output.redis is not None:
            self._heal_redis_results()
        owned = [
            p
            for p in (partitions if partitions is not None else self.partitions.values())
            if p.next_offset is not None
        ]
        todo = [p for p in owned if p.needs_checkpoint]
        if todo:
            started = time.perf_counter()
            self.output.flush(check=self.broker_watch.check)
            size = entries = 0
            for state in todo:
                stats = self.store.commit(
                    state.topic,
                    state.partition,
                    state.next_offset,
                    state.take_changes(),
                    self._envelope_bytes,
                )
                size += stats.bytes
                entries += stats.entries
                state.committed_offset = state.next_offset
                state.committed_broadcast = state.broadcast_next
                state.evict_idle()
            self._fault("after-state-commit")
            self.metrics.checkpoints.inc()
            self.metrics.checkpoint_bytes.observe(size)
            self.metrics.checkpoint_entries.observe(entries)
            self.metrics.checkpoint_seconds.observe(time.perf_counter() - started)
            self._update_gauges()
            self._probe_state_size()
        self._commit_group_offsets([p for p in owned if p.group_offset != p.committed_offset])

    def _commit_group_offsets(self, states: list[PartitionState]) -> None:
        """Mirror the stored offsets into the consumer group, for lag tooling only (restarts use the
        store). A commit lost in a rebalance is retried by the next owner, whose group offset is unknown."""
        if not states:
            return
        try:
            done = self.consumer.commit(
                offsets=[TopicPartition(s.topic, s.partition, s.committed_offset) for s in states],
                asynchronous=False,
            )
        except KafkaException as exc:
            log.info("group offset commit deferred (state is safe): %s", exc.args[0].str())
            return
        by_partition = {s.partition: s for s in states}
        for tp in done or []:
            if tp.error is None and tp.partition in by_partition:
                by_partition[tp.partition].group_offset = tp.offset

    # --- metrics -----------------------------------------------------------------------------------

    def _update_gauges(self) -> None:
        self.metrics.assigned_partitions.set(len(self.partitions))
        self.metrics.state_keys.set(sum(p.key_count for p in self.partitions.values()))
        self.metrics.resident_engines.set(sum(len(p.engines) for p in self.partitions.values()))
        totals: dict[str, float] = defaultdict(float)
        for p in self.partitions.values():
            for engine in p.engines.values():
                stats = getattr(engine, "stats", None)
                if stats is not None:
                    for name, value in stats().items():
                        totals[name] += value
        self.metrics.set_engine_stats(totals)

    def _probe_state_size(self, every: float = 30.0) -> None:
        """``ivmstream_state_bytes`` from the backend's own estimate, at most every ``every`` seconds."""
        now = time.monotonic()
        if now - self._last_size_probe < every:
            return
        self._last_size_probe = now
        sizes = [self.store.size_bytes(p.topic, p.partition) for p in self.partitions.values()]
        if all(s is not None for s in sizes):
            self.metrics.state_bytes.set(sum(s for s in sizes if s is not None))

    def _on_stats(self, stats_json: str) -> None:
        stats = orjson.loads(stats_json)
        self.broker_watch.on_stats(stats)
        for topic, tstats in stats.get("topics", {}).items():
            for pid, pstats in tstats.get("partitions", {}).items():
                lag = pstats.get("consumer_lag", -1)
                if pid != "-1" and lag >= 0 and int(pid) in self.partitions:
                    self.metrics.consumer_lag.labels(self.service.name, topic, pid).set(lag)

    # --- introspection (tests, demo) ---------------------------------------------------------------

    def results(self) -> dict[str, Any]:
        return {key: result for p in self.partitions.values() for key, result in p.results().items()}

    def positions(self) -> dict[int, int | None]:
        return {p: s.next_offset for p, s in self.partitions.items()}
