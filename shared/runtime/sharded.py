"""The apply mode of a sharded query (config key ``shard_by``, docs/architecture.md "Scaling one query
over workers"): one engine per input partition, which also applies the broadcast partition
(``ivmstream.runtime.broadcast``); each partition's result is published as a partial result tagged with
both offsets, to partition 0 of the output topic, where ``ivmstream.runtime.coordinator`` sums them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message

from ivmstream.config import ConfigError, ServiceConfig
from ivmstream.engine import JSON, Engine
from ivmstream.events import UpdateEvent
from ivmstream.runtime.apply import (
    KEYLESS,
    ApplyMode,
    Codec,
    Decoded,
    RecordOf,
    RelationCounter,
    apply_groups,
)
from ivmstream.runtime.broadcast import BroadcastFeed, first_unapplied
from ivmstream.runtime.clients import ClientFactory, Consumer
from ivmstream.runtime.output import Output, build_record
from ivmstream.runtime.partition import PartitionState
from ivmstream.runtime.refusals import Refusals
from ivmstream.runtime.rekey import fresh_indices
from ivmstream.runtime.routing import ShardRouting, routing_of
from ivmstream.service import ServiceDefinition, load_sharding

log = logging.getLogger("ivmstream.runtime")

BROADCAST_STREAM = "broadcast|"  # the origin marks of broadcast records, apart from the input partition's


class Sharded(ApplyMode):
    keyless_on_partition_0 = False  # every input partition is one shard of the one keyless view

    def __init__(
        self,
        service: str,
        codec: Codec,
        output: Output,
        refusals: Refusals,
        count: RelationCounter,
        routing: ShardRouting,
        partial_result: Callable[[Engine], JSON],
        feed: BroadcastFeed | None,
    ) -> None:
        super().__init__(service, codec, output, refusals, count)
        self.routing = routing
        self.partial_result = partial_result
        self.feed = feed

    def _apply(
        self,
        state: PartitionState,
        msgs: list[Message],
        decoded: Decoded,
        groups: dict[str, list[UpdateEvent]],
    ) -> tuple[int, int]:
        groups = self._drop_misrouted(state, msgs, decoded, groups)
        applied = apply_groups(state, msgs, decoded, groups, self.refusals)
        return applied, self.publish_partial(state)

    def _drop_misrouted(
        self,
        state: PartitionState,
        msgs: list[Message],
        decoded: Decoded,
        groups: dict[str, list[UpdateEvent]],
    ) -> dict[str, list[UpdateEvent]]:
        """Dead-letter the events that belong elsewhere (another partition, or the broadcast topic), since
        joined with this slice they would count wrongly."""
        routing, partition = self.routing, state.partition
        kept: dict[str, list[UpdateEvent]] = {}
        refused = []
        record_of = RecordOf(msgs, decoded)
        for key, events in groups.items():
            ok = []
            for ev in events:
                detail = routing.misplaced_input(ev, partition)
                if detail is None:
                    ok.append(ev)
                    continue
                refused.append((record_of(ev), "misrouted", detail))
            if ok:
                kept[key] = ok
        self.refusals.records(state.topic, partition, refused)
        return kept

    def republish(self, state: PartitionState, keys: list[str] | None = None) -> int:
        return self.publish_partial(state)

    def restored(self, state: PartitionState) -> None:
        if state.next_offset is None:
            # without a checkpoint the log starts at 0; a broadcast record may be applied before the first
            # input record, and the checkpoint then needs an input offset
            state.next_offset = 0

    def publish_partial(self, state: PartitionState) -> int:
        """A partition's result, keyed by its input partition and tagged with its input and broadcast
        offsets; every partial goes to partition 0 of the output topic, the coordinator's input."""
        record = build_record(
            self.service,
            state.label,
            self.partial_result(state.engine(KEYLESS)),
            state.topic,
            state.partition,
            state.next_offset or 0,
        )
        if self.feed is not None:
            record["offsets"][f"{self.feed.topic}:0"] = state.broadcast_next or 0
        return self.output.publish([(state.label, record)], partition=0)

    def apply_broadcast(self, partitions: list[PartitionState], msgs: list[Message]) -> tuple[int, int, int]:
        """Apply broadcast records to every owned partition that has not applied them yet, in log order,
        and publish each such partition's partial result; (records, applied, published). A refused
        broadcast record is dead-lettered once, by the owner of input partition 0, not once per partition."""
        routing, feed = self.routing, self.feed
        assert feed is not None
        good = []
        for msg in msgs:
            err = msg.error()
            if err is None:
                good.append(msg)
            elif err.code() != KafkaError._PARTITION_EOF:
                if err.fatal() or not err.retriable():
                    raise KafkaException(err)
                log.warning("broadcast consumer error: %s", err.str())
        if not good or not partitions:
            return 0, 0, 0
        decoded = self.codec.decode_many(msg.value() for msg in good)
        refused: dict[int, tuple[str, str]] = {}
        events: list[tuple[int, UpdateEvent]] = []
        for i, item in enumerate(decoded):
            if not isinstance(item, UpdateEvent):
                refused[i] = (item.code, item.detail)
                continue
            detail = routing.misplaced_broadcast(item)
            if detail is not None:
                refused[i] = ("misrouted", detail)
            else:
                events.append((i, item))
        self.count([[ev for _i, ev in events]])
        offsets: list[int] = [m.offset() for m in good]  # type: ignore[misc]  # set on every consumed record
        positions = [i for i, _ev in events]
        published = applied = 0
        for state in sorted(partitions, key=lambda s: s.partition):
            start = first_unapplied(offsets, state.broadcast_next)
            if start == len(good):
                continue  # applied all of them before (the reader restarted behind this partition)
            # records a re-keying step wrote again (origin tags at or below this state's marks) dropped
            new = {start + i for i in fresh_indices(state.origins, good[start:], BROADCAST_STREAM)}
            first = first_unapplied(positions, start)
            chosen = [(i, ev) for i, ev in events[first:] if i in new]
            mine = [ev for _i, ev in chosen]
            rejections = state.engine(KEYLESS).apply(list(mine)) if mine else []
            if mine:
                state.dirty.add(KEYLESS)
            applied += len(mine) - len(rejections)
            if state.partition == 0:
                dead = [(good[i], *refused[i]) for i in range(start, len(good)) if i in refused and i in new]
                dead += [(good[chosen[r.index][0]], r.code, r.detail) for r in rejections]
                self.refusals.records(feed.topic, 0, dead)
            state.broadcast_next = offsets[-1] + 1
            published += self.publish_partial(state)
        return len(good), applied, published


def sharded_setup(
    service: ServiceDefinition,
    config: ServiceConfig,
    codec: Codec,
    consumer: Consumer,
    clients: ClientFactory,
    group: str,
) -> tuple[ShardRouting, Callable[[Engine], JSON], BroadcastFeed | None, dict[str, Any]]:
    """A sharded query's routing over the input topic's partitions, its partial results, the broadcast
    reader (only if some relation lacks the shard variable) and the state envelope's sharding entry."""
    topics = consumer.list_topics(timeout=10).topics  # every topic: creates none
    meta = topics.get(config.input_topic)
    if meta is None or not meta.partitions:
        raise ConfigError(
            f"{config.source}: the input topic {config.input_topic} of a sharded query must exist "
            "before its workers start (its partition count is the number of shards)"
        )
    shards = len(meta.partitions)
    routing = routing_of(codec.schema.relations.values(), config, shards)
    sharding = load_sharding(service)
    assert sharding is not None  # build_config refuses shard_by otherwise
    feed = None
    if routing.broadcast:
        bmeta = topics.get(config.broadcast_topic)
        if bmeta is None or len(bmeta.partitions) != 1:
            found = "does not exist" if bmeta is None else f"has {len(bmeta.partitions)} partitions"
            raise ConfigError(
                f"{config.source}: the broadcast topic {config.broadcast_topic} {found}; it must have "
                f"exactly one partition (events of {', '.join(sorted(routing.broadcast))})"
            )
        feed = BroadcastFeed(
            clients,
            config.broadcast_topic,
            group,
            config.session_timeout_ms,
            config.kafka.get("consumer", {}),
        )
    return routing, sharding.partial_result, feed, {"shard_by": config.shard_by, "shards": shards}
