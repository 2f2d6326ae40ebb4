"""A keyless view over every partition of every input topic: one engine, one stored state, the next
offset of each input partition in that state's atomic checkpoint.

A view without ``key_field`` is one query over all of its input, so it cannot be split across
consumer-group members by partition: the worker assigns itself every partition of every input topic
(``inputs``), positioned at the offsets its state covers, and applies each record once through one
engine. Each input is decoded by its format (the native envelope, or change records:
``ivmstream.events.change_formats``); an input in upsert mode keeps its last images beside the engine,
checkpointed in the same write. Stored under ``<service>.inputs`` partition 0 of the state store:

| stored key | map | entry | value |
|---|---|---|---|
| ``\\0inputs`` | ``offsets`` | ``<topic>:<partition>`` | the next offset |
| ``\\0inputs`` | ``spec`` | ``inputs`` | the inputs as configured (checked on restore) |
| ``\\0images:<topic>`` | ``images`` | ``[relation, primary key]`` | the row's last image |

Records of one partition are applied in their log order; partitions interleave as the consumer
returns them, which leaves a view of multisets (every service here) where an uninterrupted run leaves
it once every record is applied. Run one worker per keyless view: its partitions are not shared.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from confluent_kafka import OFFSET_BEGINNING, Message, TopicPartition

from ivmstream.config import ServiceConfig
from ivmstream.engine import Engine
from ivmstream.events import EventCodec, EventError, Schema, UpdateEvent
from ivmstream.events.change_formats import ChangeCodec
from ivmstream.events.changes import ImageTable, inverse
from ivmstream.events.inputs import InputSpec
from ivmstream.runtime.apply import KEYLESS, by_partition
from ivmstream.runtime.clients import Consumer
from ivmstream.runtime.output import Output, build_record
from ivmstream.runtime.partition import PartitionState
from ivmstream.runtime.refusals import Refusals
from ivmstream.state import PartitionCheckpoint, StateChanges, StateError, StateStore, check_envelope
from ivmstream.state.envelope import Envelope

log = logging.getLogger("ivmstream.runtime")

INPUTS_KEY = "\x00inputs"
IMAGES_KEY = "\x00images:"
_OFFSETS, _SPEC = "offsets", "spec"

Where = tuple[str, int]
# A record that decoded: its message, its input's change codec (None: native) and its events.
Decoded = tuple[Message, ChangeCodec | None, list[UpdateEvent]]


def slot_topic(service: str) -> str:
    """Where a merged view's state is stored (partition 0 of this name)."""
    return f"{service}.inputs"


class MergedState(PartitionState):
    """The one engine of a merged view, the next offset of each input partition and the inputs' images.
    ``next_offset`` counts the records taken (it only tells the checkpointer that something moved)."""

    def __init__(self, topic: str, factory: Callable[[], Engine], cp: PartitionCheckpoint, incremental: bool):
        reserved = {k: v for k, v in cp.entries.items() if k.startswith("\x00")}
        own = PartitionCheckpoint(
            cp.offset, cp.snapshots, {k: v for k, v in cp.entries.items() if k not in reserved}, cp.envelope
        )
        super().__init__(topic, 0, factory, own, incremental=incremental)
        self.offsets: dict[Where, int] = {}
        self.spec: bytes | None = None
        self.images: dict[str, ImageTable] = {}
        for _map, entry, value in reserved.get(INPUTS_KEY, []):
            if _map == _OFFSETS:
                topic_name, _, partition = entry.decode().rpartition(":")
                self.offsets[(topic_name, int(partition))] = int(value)
            elif _map == _SPEC:
                self.spec = value
        for key, entries in reserved.items():
            if key.startswith(IMAGES_KEY):
                table = self.images[key[len(IMAGES_KEY) :]] = ImageTable()
                table.restore_entries(entries)
        self.committed_offsets = dict(self.offsets)
        self._group_offset: int | None = None

    @property  # type: ignore[override]
    def group_offset(self) -> int | None:
        """The group's offsets are not mirrored (the view reads by assignment): always up to date."""
        return self.committed_offset

    @group_offset.setter
    def group_offset(self, _value: int | None) -> None:
        pass

    def take_changes(self) -> StateChanges:
        changes = super().take_changes()
        moved = [(w, n) for w, n in self.offsets.items() if self.committed_offsets.get(w) != n]
        inputs = [(_OFFSETS, f"{t}:{p}".encode(), str(n).encode()) for (t, p), n in moved]
        if self.spec is not None:
            inputs.append((_SPEC, b"inputs", self.spec))
        changes.entries[INPUTS_KEY] = inputs  # type: ignore[assignment]
        for topic, table in self.images.items():
            changed = table.changed_entries()
            if changed:
                changes.entries[IMAGES_KEY + topic] = changed
        self.committed_offsets = dict(self.offsets)
        return changes


class MergedView:
    """Reads every input partition into one ``MergedState`` (in ``partitions[0]``) and applies it."""

    def __init__(
        self,
        service: str,
        config: ServiceConfig,
        schema: Schema,
        store: StateStore,
        envelope: Envelope,
        output: Output,
        refusals: Refusals,
        partitions: dict[int, PartitionState],
        new_engine: Callable[[], Engine],
        count: Callable[[Iterable[list[UpdateEvent]]], None],
    ) -> None:
        self.service, self.config, self.schema, self.store = service, config, schema, store
        self.envelope, self.output, self.refusals = envelope, output, refusals
        self.partitions, self.new_engine, self.count = partitions, new_engine, count
        self.inputs: dict[str, InputSpec] = {spec.topic: spec for spec in config.inputs}
        self.spec = orjson.dumps([spec.describe() for spec in config.inputs])
        self.native = EventCodec(schema)
        self.codecs: dict[str, ChangeCodec] = {}
        self.state: MergedState | None = None

    def start(self, consumer: Consumer) -> None:
        """Restore the view and assign every partition of every input at the offset its state covers."""
        started = time.perf_counter()
        topic = slot_topic(self.service)
        cp = self.store.load(topic, 0)
        where = f"the {self.store.name} state of the view {topic}"
        check_envelope(cp.envelope, self.envelope, where, has_state=not cp.empty)
        state = MergedState(topic, self.new_engine, cp, self.config.state_layout == "incremental")
        if state.spec is not None and state.spec != self.spec:
            raise StateError(
                f"{where} was written for inputs {state.spec.decode()}, but this worker reads "
                f"{self.spec.decode()}: use the config that wrote it, or a new --group/--state-dir"
            )
        state.spec = self.spec
        for spec in self.inputs.values():
            if spec.change is not None:
                images = state.images.setdefault(spec.topic, ImageTable()) if spec.change.images else None
                self.codecs[spec.topic] = ChangeCodec(spec.change, self.schema, images)
        tps = input_partitions(consumer, list(self.inputs), state.offsets)
        self.state = self.partitions[0] = state
        consumer.assign(tps)
        log.info(
            "view %s: %d input partition(s) of %s assigned in %.2fs",
            topic,
            len(tps),
            ", ".join(self.inputs),
            time.perf_counter() - started,
        )

    def apply(self, msgs: list[Message]) -> tuple[int, int]:
        """Decode each record by its topic's format, apply its events to the one engine (all of them or
        none) and publish the result; (applied, published)."""
        state = self.state
        if state is None:
            return 0, 0
        for table in state.images.values():
            table.journal = []  # this batch's image changes, to take back a record the engine refuses
        records: list[Decoded] = []
        for topic, tmsgs in split_by_topic(msgs).items():
            for partition, pmsgs in by_partition(tmsgs).items():
                where = (topic, partition)
                start = state.offsets.get(where)
                if start is not None and pmsgs[0].offset() < start:  # type: ignore[operator]
                    pmsgs = [m for m in pmsgs if m.offset() >= start]  # type: ignore[operator]
                    if not pmsgs:
                        continue
                state.offsets[where] = pmsgs[-1].offset() + 1  # type: ignore[operator]
                self._decode(topic, partition, pmsgs, records)
        state.next_offset = sum(state.offsets.values())
        if not records:
            return 0, 0
        events = [e for _msg, _codec, evs in records for e in evs]
        self.count([events])
        applied = self._apply_atomic(state, records, events)
        record = build_record(self.service, KEYLESS, state.engine(KEYLESS).result(), state.topic, 0, 0)
        record["offsets"] = {f"{t}:{p}": n for (t, p), n in sorted(state.offsets.items())}
        return applied, self.output.publish([(KEYLESS, record)])

    def _decode(self, topic: str, partition: int, msgs: list[Message], records: list[Decoded]) -> None:
        """Each record's events appended to ``records``; the records the decoder refuses dead-lettered."""
        codec = self.codecs.get(topic)
        refused: list[tuple[Message, EventError]] = []
        if codec is None:
            for m, item in zip(msgs, self.native.decode_many(m.value() for m in msgs), strict=True):
                if item.__class__ is UpdateEvent:
                    records.append((m, None, [item]))  # type: ignore[list-item]
                else:
                    refused.append((m, item))  # type: ignore[arg-type]
        else:
            for msg in msgs:
                out = codec.decode(msg.key(), msg.value())
                if isinstance(out, EventError):
                    refused.append((msg, out))
                else:
                    records.append((msg, codec, out))
        if refused:
            self.refusals.decoded(topic, partition, [m for m, _ in refused], [e for _, e in refused])

    def _apply_atomic(self, state: MergedState, records: list[Decoded], events: list[UpdateEvent]) -> int:
        """Apply ``events`` (the records' events, in order). Where the engine refuses any, the batch is
        taken back (the engine's applied events inverted, the images restored) and applied again record
        by record, each record re-decoded against the images its predecessors left: a record the engine
        refuses changes neither the view nor the images and is dead-lettered once with the engine's
        reason, and the outcome does not depend on where batches begin."""
        if not events:
            return 0
        engine = state.engine(KEYLESS)
        state.dirty.add(KEYLESS)
        rejections = engine.apply(events)
        if not rejections:
            return len(events)
        refused = {r.index for r in rejections}
        self._undo(state, engine, [e for i, e in enumerate(events) if i not in refused])
        for table in state.images.values():
            table.rollback(0)
        return self._one_by_one(state, engine, records)

    def _one_by_one(self, state: MergedState, engine: Engine, records: list[Decoded]) -> int:
        applied = 0
        skipped = {id(codec): Counter(codec.skipped) for codec in self.codecs.values()}
        by_where: dict[Where, list[tuple[Message, str, str]]] = {}
        for msg, codec, first in records:
            events = first
            images = codec.images if codec is not None else None
            at = images.savepoint() if images is not None else 0
            if codec is not None:
                out = codec.decode(msg.key(), msg.value())
                if isinstance(out, EventError):
                    where = (msg.topic(), msg.partition())
                    by_where.setdefault(where, []).append((msg, out.code, out.detail))  # type: ignore[arg-type]
                    continue
                events = out
            if not events:
                continue
            rejections = engine.apply(events)
            if not rejections:
                applied += len(events)
                continue
            refused = {r.index for r in rejections}
            self._undo(state, engine, [e for i, e in enumerate(events) if i not in refused])
            if images is not None:
                images.rollback(at)
            where = (msg.topic(), msg.partition())
            by_where.setdefault(where, []).append((msg, rejections[0].code, rejections[0].detail))  # type: ignore[arg-type]
        for codec in self.codecs.values():  # a record's skip is counted once
            codec.skipped = skipped[id(codec)]
        for (topic, partition), refused_records in by_where.items():
            self.refusals.records(topic, partition, refused_records)
        return applied

    @staticmethod
    def _undo(state: MergedState, engine: Engine, applied: list[UpdateEvent]) -> None:
        """Take back ``applied`` (in reverse order, so a set engine sees each undo as valid)."""
        if not applied:
            return
        failed = engine.apply([inverse(e) for e in reversed(applied)])
        if failed:
            log.error("view %s: %d applied event(s) could not be taken back", state.topic, len(failed))


def input_partitions(
    consumer: Consumer, topics: list[str], offsets: dict[Where, int]
) -> list[TopicPartition]:
    """Every partition of every input topic, at its stored next offset (else the earliest)."""
    tps = []
    for name in topics:
        meta = consumer.list_topics(name, timeout=10).topics.get(name)
        if meta is None or meta.error is not None or not meta.partitions:
            raise StateError(f"input topic {name} does not exist (create it, with its partitions, first)")
        for p in sorted(meta.partitions):
            offset = offsets.get((name, p))
            tps.append(TopicPartition(name, p, OFFSET_BEGINNING if offset is None else offset))
    return tps


def split_by_topic(msgs: list[Message]) -> dict[str, list[Message]]:
    first = msgs[0].topic()
    if all(m.topic() == first for m in msgs):
        return {first: msgs}  # type: ignore[dict-item]
    out: dict[str, list[Message]] = {}
    for m in msgs:
        out.setdefault(m.topic(), []).append(m)  # type: ignore[arg-type]
    return out


def describe_offsets(state: MergedState) -> dict[str, Any]:
    """Each input partition's next offset (tests, introspection)."""
    return {f"{t}:{p}": n for (t, p), n in sorted(state.offsets.items())}
