"""How a worker applies one partition's records and publishes what changed: the apply mode, chosen once
when the worker starts (``Worker._apply_mode``) rather than tested per batch.

- ``PerBatch``: each key's events of a batch applied together, then each touched key's result published.
- ``AtCheckpoint`` (``emit: checkpoint``): each batch applied, each touched key's result published once
  before the checkpoint that covers it and whenever the worker has caught up, for results that cost a
  pass over the state to compute.
- ``PerEvent`` (``emit: every-event``): events applied one at a time in log order, each followed by a
  changelog record (``ivmstream.changelog``); Redis keeps each key's full latest result.
- ``Coordinator`` (``--role coordinator``): per batch over the partial results of a sharded query's
  workers; each published result also says which partials it sums.
- ``Sharded`` (config key ``shard_by``): ``ivmstream.runtime.sharded``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Message

from ivmstream import changelog
from ivmstream.engine import Engine, columnar_entry
from ivmstream.events import EventCodec, EventError, Schema, UpdateEvent
from ivmstream.events.columns import EventColumns, decode_columns, event_columns, events_of
from ivmstream.runtime.coordinator import PartialsEngine
from ivmstream.runtime.output import Output, build_record
from ivmstream.runtime.partition import PartitionState
from ivmstream.runtime.refusals import Refusals

log = logging.getLogger("ivmstream.runtime")

KEYLESS = ""  # the partition key of a service without key_field (see EventCodec.decode_grouped)

# Unbound accessors, mapped over a whole batch in C.
_message_error = Message.error
_message_partition = Message.partition
_message_value = Message.value

Decoded = list[UpdateEvent | EventError]


class Codec(Protocol):
    """What turns input records into events: an ``EventCodec``, or the coordinator's ``PartialCodec``."""

    @property
    def schema(self) -> Schema: ...

    def decode_many(self, values: Iterable[bytes | None]) -> Decoded: ...

    def decode_grouped(
        self, values: Iterable[bytes | None]
    ) -> tuple[Decoded, dict[str, list[UpdateEvent]], int]: ...


class RelationCounter(Protocol):
    def __call__(self, groups: Iterable[list[UpdateEvent]] | Iterable[EventColumns]) -> None: ...


class RecordOf:
    """The input record a decoded event came from, to dead-letter it. Decoding makes each event, so an
    event's identity finds its position; the index is built at the first lookup, since most batches
    refuse nothing."""

    __slots__ = ("_decoded", "_index", "_msgs")

    def __init__(self, msgs: Sequence[Message], decoded: Decoded) -> None:
        self._msgs, self._decoded = msgs, decoded
        self._index: dict[int, int] | None = None

    def __call__(self, event: UpdateEvent) -> Message:
        if self._index is None:
            self._index = {id(item): i for i, item in enumerate(self._decoded)}
        return self._msgs[self._index[id(event)]]


def by_partition(msgs: list[Message]) -> dict[int, list[Message]]:
    """A consumed batch's records per partition, in log order; client errors other than a partition's end
    are logged if retriable, raised if not."""
    first: int = msgs[0].partition()  # type: ignore[assignment]  # set on every consumed record
    if not any(map(_message_error, msgs)) and list(map(_message_partition, msgs)).count(first) == len(msgs):
        return {first: msgs}  # the common case, checked in C: one partition, no errors
    parts: dict[int, list[Message]] = defaultdict(list)
    for msg in msgs:
        err = msg.error()
        if err is None:
            parts[msg.partition()].append(msg)  # type: ignore[index]
        elif err.code() != KafkaError._PARTITION_EOF:
            if err.fatal() or not err.retriable():
                raise KafkaException(err)
            log.warning("consumer error: %s", err.str())
    return parts


class ApplyMode:
    """Applies one partition's records (``apply``) and publishes results again (``republish``)."""

    keyless_on_partition_0 = True  # a keyless view is one ordered stream: input partition 0 only
    # Whether a service whose engines take columns (``ColumnarEngine``) gets its records decoded as
    # columns (``EventCodec.decode_columns``): the modes that apply a batch per key (``_touched``).
    takes_columns = False

    def __init__(
        self, service: str, codec: Codec, output: Output, refusals: Refusals, count: RelationCounter
    ) -> None:
        """``count``: told each batch's valid events, grouped by key (relation coverage and metrics)."""
        self.service = service
        self.codec = codec
        self.output = output
        self.refusals = refusals
        self.count = count

    def apply(self, state: PartitionState, msgs: list[Message]) -> tuple[int, int]:
        """Decode and apply ``msgs`` (one partition's, in log order) and publish; (applied, published)."""
        if self.keyless_on_partition_0 and self.codec.schema.key_field is None and state.partition != 0:
            self._refuse_keyless(state, msgs)
            return 0, 0
        if self.takes_columns and state.takes_columns and isinstance(self.codec, EventCodec):
            return self._apply_columns(state, msgs)
        decoded, groups, errors = self.codec.decode_grouped(map(_message_value, msgs))
        self.count(groups.values())
        if errors:
            self.refusals.decoded(state.topic, state.partition, msgs, decoded)
        return self._apply(state, msgs, decoded, groups)

    def _apply(
        self,
        state: PartitionState,
        msgs: list[Message],
        decoded: Decoded,
        groups: dict[str, list[UpdateEvent]],
    ) -> tuple[int, int]:
        raise NotImplementedError

    def _apply_columns(self, state: PartitionState, msgs: list[Message]) -> tuple[int, int]:
        """``apply`` with the records decoded as columns: the same refusals (decoding's first, then the
        engines'), the same keys applied and published."""
        assert isinstance(self.codec, EventCodec)
        values = list(map(_message_value, msgs))
        errors, batches, records = decode_columns(self.codec, values, state.decimal_text)
        self.count(batches.values())
        if errors:
            self.refusals.decoded(
                state.topic, state.partition, [msgs[i] for i, _e in errors], [e for _i, e in errors]
            )
        key_of = (lambda key: key) if self.codec.schema.key_field is not None else (lambda _key: None)
        applied = apply_columns(state, msgs, batches, records, self.refusals, key_of)
        return applied, self._touched(state, batches)

    def _touched(self, state: PartitionState, keys: Iterable[str]) -> int:
        """After a batch applied ``keys``: publish (or mark) their results; how many were published."""
        raise NotImplementedError

    def republish(self, state: PartitionState, keys: list[str] | None = None) -> int:
        """Publish again the current results of ``keys`` (None: every key) of a partition, after Redis
        lost them; keys not resident are read from the store into throwaway engines."""
        records = []
        for key in state.all_keys() if keys is None else keys:
            engine = state.engines.get(key)
            records.append(
                (key, self.record(state, key, engine if engine is not None else state.read_engine(key)))
            )
        return self._publish_again(records)

    def _publish_again(self, records: list[tuple[str, dict[str, Any]]]) -> int:
        return self.output.publish(records)

    def publish_pending(self, partitions: Iterable[PartitionState]) -> int:
        """Publish the results applied but not published yet (``AtCheckpoint``); how many."""
        return 0

    def republish_lost(self, partitions: Iterable[PartitionState]) -> bool:
        """If Redis restarted empty or was flushed since results were published, publish every owned key's
        result again, so Redis is whole by the next checkpoint; whether it had."""
        if self.output.redis is None or not self.output.redis_lost_results():
            return False
        n = sum(self.republish(state) for state in partitions)
        log.warning(
            "Redis lost the published results of %s; published %d current results again", self.service, n
        )
        return True

    def restored(self, state: PartitionState) -> None:
        """A partition was just restored: publish again its results Redis (or PostgreSQL) lost, or never
        had, while no worker ran, and those PostgreSQL holds otherwise than the checkpoint."""
        if not self.output.keeps_results or not state.key_count:
            return

        def result_of(key: str) -> Any:
            engine = state.engines.get(key)
            return (engine if engine is not None else state.read_engine(key)).result()

        missing = self.output.missing_results(state.all_keys(), result_of)
        if missing:
            self.republish(state, missing)
            log.warning("%s: %d missing result(s) published again", state.label, len(missing))

    def record(self, state: PartitionState, key: str, engine: Engine | None = None) -> dict[str, Any]:
        """A key's published record (``engine``: one read from the store, not resident)."""
        engine = engine if engine is not None else state.engines[key]
        record = build_record(
            self.service, key, engine.result(), state.topic, state.partition, state.next_offset or 0
        )
        if state.origins:  # a re-keyed view: the last input record applied, per input partition
            record["origins"] = {where: list(mark) for where, mark in state.origins.items()}
        return record

    def _refuse_keyless(self, state: PartitionState, msgs: list[Message]) -> None:
        detail = (
            "service has no key_field, so its input must be one ordered stream on partition 0, "
            f"not partition {state.partition}"
        )
        refused = [
            (msg, "keyless-partition", detail)
            if item.__class__ is UpdateEvent
            else (msg, item.code, item.detail)  # type: ignore[union-attr]
            for msg, item in zip(msgs, self.codec.decode_many(map(_message_value, msgs)), strict=True)
        ]
        self.refusals.records(state.topic, state.partition, refused)


def apply_groups(
    state: PartitionState,
    msgs: Sequence[Message],
    decoded: Decoded,
    groups: dict[str, list[UpdateEvent]],
    refusals: Refusals,
) -> int:
    """Apply each key's events (in log order) to its engine; dead-letter what the engines refuse.
    Returns how many were applied. An engine with ``apply_columns`` (``ivmstream.engine.ColumnarEngine``)
    takes each key's events as columns, any other its events as a read-only ``Sequence`` (the Engine
    protocol; ``ivmstream.replay`` relies on it too), so a rejection's index points into ``events``
    itself, and the map from event to record is built only for a batch with rejections."""
    applied = 0
    refused: list[tuple[Message, str, str]] = []
    record_of = RecordOf(msgs, decoded)
    state.prefetch(groups)
    for key, events in groups.items():
        engine = state.engine(key)
        take_columns = columnar_entry(engine)
        rejections = take_columns(event_columns(events)) if take_columns is not None else engine.apply(events)
        if rejections:
            refused += [(record_of(events[r.index]), r.code, r.detail) for r in rejections]
        applied += len(events) - len(rejections)
        state.dirty.add(key)
    if refused:
        refusals.records(state.topic, state.partition, refused)
    return applied


def apply_columns(
    state: PartitionState,
    msgs: Sequence[Message],
    batches: dict[str, EventColumns],
    records: dict[str, list[int]],
    refusals: Refusals,
    key_of: Callable[[str], str | None],
) -> int:
    """``apply_groups`` for batches decoded as columns: each key's ``EventColumns`` to its engine's
    ``apply_columns`` (as events to an engine without it), a rejection's record found through the key's
    record indexes."""
    applied = 0
    refused: list[tuple[Message, str, str]] = []
    state.prefetch(batches)
    for key, batch in batches.items():
        engine = state.engine(key)
        take_columns = columnar_entry(engine)
        if take_columns is not None:
            rejections = take_columns(batch)
        else:
            rejections = engine.apply(events_of(batch, key_of(key)))
        if rejections:
            at = records[key]
            refused += [(msgs[at[r.index]], r.code, r.detail) for r in rejections]
        applied += batch.size - len(rejections)
        state.dirty.add(key)
    if refused:
        refusals.records(state.topic, state.partition, refused)
    return applied


class PerBatch(ApplyMode):
    takes_columns = True

    def _touched(self, state: PartitionState, keys: Iterable[str]) -> int:
        return self.output.publish((key, self.record(state, key)) for key in keys)

    def _apply(
        self,
        state: PartitionState,
        msgs: list[Message],
        decoded: Decoded,
        groups: dict[str, list[UpdateEvent]],
    ) -> tuple[int, int]:
        applied = apply_groups(state, msgs, decoded, groups, self.refusals)
        published = self.output.publish((key, self.record(state, key)) for key in groups)
        return applied, published


class AtCheckpoint(PerBatch):
    """``emit: checkpoint``. A batch's touched keys wait in ``state.unpublished``; the checkpoint publishes
    them before it waits for the outputs' acknowledgements, so every checkpoint covers published results
    (exactly once as for ``PerBatch``), and the last result published equals the engine's."""

    def _apply(
        self,
        state: PartitionState,
        msgs: list[Message],
        decoded: Decoded,
        groups: dict[str, list[UpdateEvent]],
    ) -> tuple[int, int]:
        applied = apply_groups(state, msgs, decoded, groups, self.refusals)
        state.unpublished.update(groups)
        return applied, 0

    def _touched(self, state: PartitionState, keys: Iterable[str]) -> int:
        state.unpublished.update(keys)
        return 0

    def publish_pending(self, partitions: Iterable[PartitionState]) -> int:
        published = 0
        for state in partitions:
            if state.unpublished:
                keys = sorted(state.unpublished)
                state.unpublished.clear()
                published += self.republish(state, keys)
        return published


class Coordinator(PerBatch):
    """Sums a sharded query's partial results (``ivmstream.runtime.coordinator``)."""

    takes_columns = False

    def record(self, state: PartitionState, key: str, engine: Engine | None = None) -> dict[str, Any]:
        engine = engine if engine is not None else state.engines[key]
        record = super().record(state, key, engine)
        assert isinstance(engine, PartialsEngine)
        record["reflects"] = engine.reflects()
        return record


class PerEvent(ApplyMode):
    """``emit: every-event``. A key without state starts from ``{}``, so its first changelog record
    carries its whole result; replayed after a crash from the same checkpoint, the same events give
    the same records."""

    def _apply(
        self,
        state: PartitionState,
        msgs: list[Message],
        decoded: Decoded,
        groups: dict[str, list[UpdateEvent]],
    ) -> tuple[int, int]:
        applied = 0
        changes: list[tuple[str, dict[str, Any]]] = []
        refused: list[tuple[Message, str, str]] = []
        latest: dict[str, Any] = {}  # each touched key's result after its last event in this batch
        topic, partition, name = state.topic, state.partition, self.service
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
                refused.append((msg, rejections[0].code, rejections[0].detail))
                continue
            applied += 1
            offset: int = msg.offset()  # type: ignore[assignment]  # set on every consumed record
            after = engine.result()
            changes.append(
                (
                    key,
                    {
                        "service": name,
                        "key": key,
                        "event": f"{topic}:{partition}:{offset}",
                        "offsets": {f"{topic}:{partition}": offset + 1},
                        "patch": changelog.diff(before, after),
                    },
                )
            )
            latest[key] = after
        self.refusals.records(topic, partition, refused)
        self.output.publish_changes(changes)
        # the changelog went to the topic; Redis keeps each key's latest
        return applied, self.output.store_latest((key, self.record(state, key)) for key in latest)

    def _publish_again(self, records: list[tuple[str, dict[str, Any]]]) -> int:
        """Redis only: the topic carries changelog records."""
        return self.output.store_latest(records)
