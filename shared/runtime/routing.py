"""Where an event of a sharded query goes: its shard's input partition, or the broadcast topic.

A sharded query (config key ``shard_by: P``, docs/architecture.md "Scaling one query over workers")
sends each event of a relation with column P to input partition ``shard_of(P value, n)`` and each
event of any other relation to the one-partition broadcast topic. The same function decides it for
producers, for the worker's check of what it consumes and for batch jobs, so it is defined once, here:

    shard_of(v, n) = (murmur2(shard_text(v)) & 0x7fffffff) mod n

``murmur2`` is Kafka's (``ivmstream.partitioner``), and ``shard_text`` is the value's canonical text:
equal join values get equal text, whatever type the producer wrote them in (``5``, ``5.0`` and the
decimal ``5.00`` all read ``5``), so they meet in one shard. The record key is that text too, so the
shard is also what Kafka's default partitioner would choose, but producers pass the partition
explicitly and never rely on a client's partitioner.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, NamedTuple

import orjson

from ivmstream.events import Relation, UpdateEvent
from ivmstream.partitioner import partition_for


def shard_text(value: Any) -> bytes:
    """The canonical text of a shard variable's value: integers (and integral floats and decimals) in
    decimal digits, other floats by their shortest repr, decimals without exponent or trailing zeros,
    strings as UTF-8, booleans as ``true``/``false``."""
    cls = value.__class__
    if cls is str:
        return value.encode()
    if cls is bool:
        return b"true" if value else b"false"
    if cls is int:
        return str(value).encode()
    if cls is float:
        if math.isfinite(value) and value == int(value):
            return str(int(value)).encode()
        return repr(value).encode()
    if cls is Decimal:
        if value.is_finite() and value == value.to_integral_value():
            return str(int(value)).encode()
        return format(value.normalize(), "f").encode()
    raise TypeError(f"cannot shard by a value of type {cls.__name__}: {value!r}")


def shard_of(value: Any, shards: int) -> int:
    """The input partition (of ``shards``) an event whose shard variable holds ``value`` belongs to."""
    return partition_for(shard_text(value), shards)


class Destination(NamedTuple):
    topic: str
    partition: int
    key: bytes | None


class ShardRouting:
    """One sharded query's routing: where a produced record goes, and whether a consumed event was
    put where it belongs (a misrouted event would be joined with the wrong slice: it is refused)."""

    def __init__(
        self,
        relations: Iterable[Relation],
        shard_by: str,
        shards: int,
        input_topic: str,
        broadcast_topic: str,
    ) -> None:
        if shards < 1:
            raise ValueError(f"a sharded query needs at least one input partition, got {shards}")
        rels = list(relations)
        self.shard_by = shard_by
        self.shards = shards
        self.input_topic = input_topic
        self.broadcast_topic = broadcast_topic
        self.sharded = frozenset(r.name for r in rels if shard_by in r.column_names)
        self.broadcast = frozenset(r.name for r in rels) - self.sharded

    def route(self, value: bytes) -> Destination:
        """The destination of one record's bytes. A record the worker will refuse anyway (unreadable, an
        unknown relation, no shard value) goes to input partition 0, where it is dead-lettered."""
        try:
            obj = orjson.loads(value)
        except orjson.JSONDecodeError:
            return Destination(self.input_topic, 0, None)
        relation = obj.get("relation") if type(obj) is dict else None
        if relation in self.broadcast:
            return Destination(self.broadcast_topic, 0, None)
        row = obj.get("row") if relation in self.sharded else None
        v = row.get(self.shard_by) if type(row) is dict else None
        try:
            key = shard_text(v) if v is not None else None
        except TypeError:
            key = None
        if key is None:
            return Destination(self.input_topic, 0, None)
        return Destination(self.input_topic, partition_for(key, self.shards), key)

    def misplaced_input(self, event: UpdateEvent, partition: int) -> str | None:
        """Why a (valid) event consumed from input partition ``partition`` does not belong there."""
        if event.relation not in self.sharded:
            return (
                f"relation {event.relation} has no column {self.shard_by}: its events belong on the "
                f"broadcast topic {self.broadcast_topic}"
            )
        value = event.row[self.shard_by]
        home = shard_of(value, self.shards)
        if home != partition:
            return (
                f"{self.shard_by}={value!r} belongs on partition {home} of the {self.shards} of "
                f"{self.input_topic}, not {partition}"
            )
        return None

    def misplaced_broadcast(self, event: UpdateEvent) -> str | None:
        """Why a (valid) event consumed from the broadcast topic does not belong there."""
        if event.relation in self.sharded:
            home = shard_of(event.row[self.shard_by], self.shards)
            return (
                f"relation {event.relation} has column {self.shard_by}: its events belong on partition "
                f"{home} of {self.input_topic}, not on the broadcast topic"
            )
        return None


def routing_of(relations: Iterable[Relation], config: Any, shards: int) -> ShardRouting:
    """The routing of a sharded ``config`` (a ``ServiceConfig`` with ``shard_by``) over ``shards`` input
    partitions; ``relations`` are the service's (``schema_of(service, config).relations.values()``)."""
    if config.shard_by is None:
        raise ValueError(f"{config.source}: not a sharded config (no shard_by)")
    return ShardRouting(relations, config.shard_by, shards, config.input_topic, config.broadcast_topic)
