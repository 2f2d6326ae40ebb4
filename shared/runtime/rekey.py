"""Re-keying: a keyed view over input topics partitioned by something else (Debezium partitions by
primary key), exactly once; a sharded query over inputs (``shard_by``: events by the shard variable,
the other relations' to the broadcast topic); and a keyless view over inputs that publishes a changelog
record per event (``emit: every-event``), whose events the step writes to a one-partition topic: that
log is then the one order of the view's events, which a worker's restart replays as it was.

The step (``RekeyStep``, ``ivmstream run S --role rekey``) reads every partition of every input topic
(``inputs``), decodes each record by its topic's format and writes each native event it decodes into to
the view's re-keyed topic (``rekey_topic``), keyed by ``key_field`` and tagged with its origin
(``ivmstream.origin``: ``<topic>:<partition>:<offset>:<index>``, the index counting the record's
events). Its checkpoint waits until every write is acknowledged, then stores the next offset of each
input partition and the inputs' kept images (upsert mode) in one atomic write; bad records are
dead-lettered by the step.

A step that crashes resumes from that checkpoint and writes again what followed it, with the same
tags: the decoding is a function of the checkpointed images and each input partition's records, so
a record decodes into the same events in the same order. The view's workers read the re-keyed topic
as any keyed topic and keep, per partition, the last origin tag applied from each input partition in
the same atomic checkpoint as their state (``PartitionState.origins``); a record at or below that
mark is a copy and is dropped (``fresh``). The idempotent producer writes each partition's records of
one session in order and without gaps, so every copy of an event reaches a partition in the same
order relative to the events of its input partition, and each event is applied exactly once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
from confluent_kafka import KafkaError, Message

from ivmstream.config import ServiceConfig, schema_of
from ivmstream.engine import Engine
from ivmstream.events import EventCodec, EventError, UpdateEvent
from ivmstream.events.change_formats import ChangeCodec
from ivmstream.events.changes import ImageTable
from ivmstream.events.codec import encode_event
from ivmstream.partitioner import partition_for
from ivmstream.runtime.apply import by_partition
from ivmstream.runtime.clients import ClientFactory, clients_of, output_settings
from ivmstream.runtime.hooks import CheckpointWritten, Hooks, fire
from ivmstream.runtime.merged import MergedState, input_partitions, split_by_topic
from ivmstream.runtime.output import Output
from ivmstream.runtime.refusals import Refusals
from ivmstream.runtime.routing import ShardRouting, routing_of, shard_text
from ivmstream.service import ServiceDefinition
from ivmstream.state import StateError, StateStore, check_envelope, envelope_for

log = logging.getLogger("ivmstream.runtime")

ORIGIN_HEADER = "ivmstream.origin"

Mark = tuple[int, int]


def step_slot(service: str) -> str:
    """Where the step's positions are stored (partition 0 of this name)."""
    return f"{service}.rekey"


def origin_tag(topic: str, partition: int, offset: int, index: int) -> bytes:
    return f"{topic}:{partition}:{offset}:{index}".encode()


def fresh_indices(marks: dict[str, Mark], msgs: list[Message], stream: str = "") -> list[int]:
    """The positions of the records of one re-keyed log not applied yet, in order; ``marks`` advanced
    past them. A record without an origin tag (written there by something else) is always new.
    ``stream`` names the log among those one state applies (a sharded query's input partition and its
    broadcast topic receive the events of one input partition each in its order, but not in one)."""
    out = []
    for i, msg in enumerate(msgs):
        tag: Any = None
        headers: list[tuple[str, Any]] = msg.headers() or []  # type: ignore[assignment]
        for header in headers:
            if header[0] == ORIGIN_HEADER:
                tag = header[1]
                break
        if tag is None:
            out.append(i)
            continue
        parts = (tag.decode() if type(tag) is bytes else str(tag)).rsplit(":", 2)
        where, at = stream + parts[0], (int(parts[1]), int(parts[2]))
        last = marks.get(where)
        if last is not None and at <= last:
            continue
        marks[where] = at
        out.append(i)
    return out


def fresh(marks: dict[str, Mark], msgs: list[Message]) -> list[Message]:
    """The records of one re-keyed partition not applied yet, in order (``fresh_indices``)."""
    return [msgs[i] for i in fresh_indices(marks, msgs)]


def step_spec(config: ServiceConfig, partitions: int) -> bytes:
    """What a step's positions were written for (checked on restore): its inputs, how it keys their
    events, and the re-keyed topic with its partition count."""
    return orjson.dumps(
        {
            "inputs": [s.describe() for s in config.inputs],
            "key_field": config.key_field,
            "topic": config.input_topic,
            "partitions": partitions,
            **({"shard_by": config.shard_by} if config.sharded else {}),
        }
    )


def step_envelope(service: ServiceDefinition, config: ServiceConfig) -> Any:
    """The state envelope of a step's checkpoint."""
    return envelope_for(service, config.options, config.state_layout, None)


def _no_engine() -> Engine:
    """The step keeps no engine: its state holds positions and images only."""
    raise AssertionError("the re-keying step keeps no engine")


class RekeyStep:
    """Reads a keyed view's inputs and writes their events, keyed by ``key_field``, to its re-keyed topic."""

    def __init__(
        self,
        service: ServiceDefinition,
        config: ServiceConfig,
        clients: ClientFactory | str,
        store: StateStore,
        *,
        group: str | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        if not config.rekeyed:
            raise StateError(
                f"{service.name}: the re-keying step needs inputs and key_field (or emit: every-event) in "
                "the config"
            )
        self.service, self.config, self.store = service, config, store
        self.clients = clients = clients_of(clients)
        self.schema = schema_of(service, config)
        self.hooks = hooks or Hooks()
        self.group = group or f"ivmstream.{service.name}.rekey"
        self.consumer = clients.consumer(
            self.group, config.session_timeout_ms, config.kafka.get("consumer", {})
        )
        self.producer = clients.producer(output_settings(config, self._on_error))
        self.output = Output(service.name, self.producer, config.input_topic, config.dlq_topic, None)
        self.refusals = Refusals(self.output, self.hooks)
        self.envelope = step_envelope(service, config)
        self.native = EventCodec(self.schema)
        self.codecs: dict[str, ChangeCodec] = {}
        self.partitions = 0  # of the re-keyed topic
        self.routing: ShardRouting | None = None  # a sharded query's
        self.state: MergedState | None = None
        self._errors: list[str] = []
        self._stop = threading.Event()
        self._last_checkpoint = time.monotonic()

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._errors.append(err.str())

    def stop(self) -> None:
        self._stop.set()

    def start(self) -> None:
        """Restore the positions and images; assign every input partition where they resume."""
        config, topic = self.config, step_slot(self.service.name)
        cp = self.store.load(topic, 0)
        where = f"the {self.store.name} state of the re-keying step {topic}"
        check_envelope(cp.envelope, self.envelope, where, has_state=not cp.empty)
        state = MergedState(topic, _no_engine, cp, True)
        out = config.input_topic
        meta = self.consumer.list_topics(out, timeout=10).topics.get(out)
        if meta is None or meta.error is not None or not meta.partitions:
            raise StateError(
                f"the re-keyed topic {out} does not exist (create it, with its partitions, first)"
            )
        self.partitions = len(meta.partitions)
        if config.sharded:
            self.routing = routing_of(self.schema.relations.values(), config, self.partitions)
            self._check_broadcast()
        elif config.key_field is None and self.partitions != 1:
            raise StateError(
                f"the re-keyed topic {out} of a keyless view has {self.partitions} partitions; it must have "
                "exactly one (its log is the one order of the view's events)"
            )
        spec = step_spec(config, self.partitions)
        if state.spec is not None and state.spec != spec:
            raise StateError(
                f"{where} was written for {state.spec.decode()}, but this step runs {spec.decode()} (a "
                "re-keyed topic cannot change its partitions under the views' state): use the config that "
                "wrote it, or a new --group/--state-dir and re-keyed topic"
            )
        state.spec = spec
        for s in config.inputs:
            if s.change is not None:
                images = state.images.setdefault(s.topic, ImageTable()) if s.change.images else None
                self.codecs[s.topic] = ChangeCodec(s.change, self.schema, images)
        tps = input_partitions(self.consumer, [s.topic for s in config.inputs], state.offsets)
        self.state = state
        self.consumer.assign(tps)
        log.info("re-keying %d input partition(s) into %s (%d partitions)", len(tps), out, self.partitions)

    def _check_broadcast(self) -> None:
        """A sharded query's broadcast topic (for relations without the shard variable) has one partition."""
        if self.routing is None or not self.routing.broadcast:
            return
        name = self.config.broadcast_topic
        meta = self.consumer.list_topics(name, timeout=10).topics.get(name)
        count = 0 if meta is None or meta.error is not None else len(meta.partitions)
        if count != 1:
            raise StateError(
                f"the broadcast topic {name} has {count} partitions; it must exist with exactly one (events "
                f"of {', '.join(sorted(self.routing.broadcast))})"
            )

    def run(self, until: Callable[[RekeyStep], bool] | None = None) -> None:
        """Re-key until stopped (or ``until(self)``), then checkpoint. On a failure nothing is written."""
        self.start()
        try:
            while not self._stop.is_set():
                msgs = self.consumer.consume(self.config.batch_size, 0.2)
                if msgs:
                    self.process(msgs)
                else:
                    self.producer.poll(0)
                if self._errors:
                    raise StateError(f"the re-keying step's producer failed: {self._errors[0]}")
                if time.monotonic() - self._last_checkpoint >= self.config.checkpoint_interval:
                    self.checkpoint()
                if until is not None and until(self):
                    break
            self.checkpoint()
        finally:
            self.consumer.close()
            self.store.close()

    def positions(self) -> dict[tuple[str, int], int]:
        return dict(self.state.offsets) if self.state is not None else {}

    def process(self, msgs: list[Message]) -> None:
        """Decode each record by its topic's format and write its events to the re-keyed topic."""
        state = self.state
        assert state is not None
        for topic, tmsgs in split_by_topic(msgs).items():
            for partition, pmsgs in by_partition(tmsgs).items():
                start = state.offsets.get((topic, partition))
                if start is not None and pmsgs[0].offset() < start:  # type: ignore[operator]
                    pmsgs = [m for m in pmsgs if m.offset() >= start]  # type: ignore[operator]
                    if not pmsgs:
                        continue
                state.offsets[(topic, partition)] = pmsgs[-1].offset() + 1  # type: ignore[operator]
                self._write(topic, partition, pmsgs)
        state.next_offset = sum(state.offsets.values())

    def _write(self, topic: str, partition: int, msgs: list[Message]) -> None:
        codec, key_field, routing = self.codecs.get(topic), self.config.key_field, self.routing
        produce, out, n = self.output._produce, self.config.input_topic, self.partitions
        decoded: list[list[UpdateEvent] | EventError]
        if codec is None:
            decoded = [
                [e] if isinstance(e, UpdateEvent) else e
                for e in self.native.decode_many(m.value() for m in msgs)
            ]
        else:
            decoded = [codec.decode(m.key(), m.value()) for m in msgs]
        refused: list[tuple[Message, str, str]] = []
        prefix = f"{topic}:{partition}:"
        for msg, events in zip(msgs, decoded, strict=True):
            if isinstance(events, EventError):
                refused.append((msg, events.code, events.detail))
                continue
            at = f"{prefix}{msg.offset()}:"
            for i, event in enumerate(events):
                tag = [(ORIGIN_HEADER, f"{at}{i}".encode())]
                if routing is not None:  # a sharded query: by the shard variable, or broadcast
                    value = encode_event(event, None)
                    if event.relation in routing.sharded:
                        shard = shard_text(event.row[routing.shard_by])
                        produce(out, value, shard, tag, partition_for(shard, n))
                    else:
                        produce(routing.broadcast_topic, value, None, tag, 0)
                    continue
                if key_field is None:  # a keyless view's one partition
                    produce(out, encode_event(event, None), None, tag, 0)
                    continue
                key = str(event.key).encode()  # the codec refuses an event without key_field
                produce(out, encode_event(event, key_field), key, tag, partition_for(key, n))
        self.refusals.records(topic, partition, refused)

    def checkpoint(self) -> None:
        """Every write acknowledged, then the input offsets and images in one atomic write."""
        self._last_checkpoint = time.monotonic()
        state = self.state
        if state is None or state.next_offset is None or not state.needs_checkpoint:
            return
        started = time.perf_counter()
        self.output.flush()
        stats = self.store.commit(
            state.topic, 0, state.next_offset, state.take_changes(), self.envelope.to_bytes()
        )
        state.committed_offset = state.next_offset
        if self.hooks.checkpoint_written:
            done = CheckpointWritten(1, stats.bytes, stats.entries, time.perf_counter() - started)
            fire(self.hooks.checkpoint_written, done)
