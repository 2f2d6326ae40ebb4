"""The coordinator of a sharded query: it sums the shards' partial results into the global result.

Each input partition of a sharded query publishes its partial result, keyed by the partition and
tagged with the input and broadcast offsets it reflects, to partition 0 of the output topic. The
coordinator is an ordinary worker over that topic (``ivmstream run SERVICE --role coordinator``): its
events are partial results (``PartialCodec``) and its engine (``PartialsEngine``) keeps the latest
partial per shard and publishes their sum (the service's ``Sharding.combine_partials``). Its state is
checkpointed with its input offset like any engine's, so the runtime's exactly-once machinery applies
unchanged; and since a partial replaces the held one only if its offsets are at least as far along
everywhere and somewhere further, replayed and duplicated partials change nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial

import orjson

from ivmstream.config import ConfigError, ServiceConfig
from ivmstream.engine import JSON, Entry, EntryChange, Rejection
from ivmstream.events import EventError, Relation, Schema, UpdateEvent
from ivmstream.service import ServiceDefinition, load_sharding

PARTIAL = "partial"  # the coordinator's one relation: a partial result
PARTIALS_MAP = "partials"  # its state: one entry per shard
SNAPSHOT_FORMAT = "ivmstream.partials/1"

Offsets = dict[str, int]


def supersedes(new: Mapping[str, int], held: Mapping[str, int]) -> bool:
    """Whether a partial tagged ``new`` replaces one tagged ``held``: no offset behind, one ahead.

    A shard's state is a function of the records before its offsets, so equal offsets are the same
    partial (a duplicate or a replay), offsets behind are an older state, and offsets that are ahead on
    one topic and behind on another come from a restarted worker that interleaved the input and
    broadcast records differently: the shard's later partials, ahead on both, replace the held one."""
    names = new.keys() | held.keys()
    ahead = False
    for name in names:
        a, b = new.get(name, 0), held.get(name, 0)
        if a < b:
            return False
        ahead = ahead or a > b
    return ahead


class PartialsEngine:
    """The latest partial result of each shard and their sum. Pure; an ``IncrementalEngine`` with one
    entry per shard."""

    def __init__(self, combine: Callable[[Sequence[JSON]], JSON]) -> None:
        self._combine = combine
        self.partials: dict[str, tuple[Offsets, JSON]] = {}
        self._changed: set[str] = set()

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        for ev in events:
            source, offsets, result = ev.row["source"], ev.row["offsets"], ev.row["result"]
            held = self.partials.get(source)
            if held is None or supersedes(offsets, held[0]):
                self.partials[source] = (dict(offsets), result)
                self._changed.add(source)
        return []

    def result(self) -> JSON:
        return self._combine([result for _source, (_offsets, result) in sorted(self.partials.items())])

    def reflects(self) -> dict[str, Offsets]:
        """Per shard, the offsets of the partial the result sums."""
        return {source: dict(offsets) for source, (offsets, _result) in sorted(self.partials.items())}

    # --- state -------------------------------------------------------------------------------------

    @staticmethod
    def _value(offsets: Offsets, result: JSON) -> bytes:
        return orjson.dumps({"offsets": offsets, "result": result}, option=orjson.OPT_SORT_KEYS)

    def snapshot(self) -> bytes:
        return orjson.dumps(
            {
                "format": SNAPSHOT_FORMAT,
                "partials": {s: {"offsets": o, "result": r} for s, (o, r) in self.partials.items()},
            },
            option=orjson.OPT_SORT_KEYS,
        )

    def restore(self, data: bytes) -> None:
        body = orjson.loads(data)
        if not isinstance(body, dict) or body.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(f"not a {SNAPSHOT_FORMAT} snapshot")
        self.partials = {s: (p["offsets"], p["result"]) for s, p in body["partials"].items()}
        self._changed.clear()

    def changed_entries(self) -> list[EntryChange]:
        out: list[EntryChange] = [
            (PARTIALS_MAP, s.encode(), self._value(*self.partials[s])) for s in sorted(self._changed)
        ]
        self._changed.clear()
        return out

    def all_entries(self) -> Iterator[Entry]:
        for source, (offsets, result) in sorted(self.partials.items()):
            yield PARTIALS_MAP, source.encode(), self._value(offsets, result)

    def restore_entries(self, entries: Iterable[Entry]) -> None:
        self.partials = {}
        for map_name, key, value in entries:
            if map_name != PARTIALS_MAP:
                raise ValueError(f"coordinator state has map {map_name!r}, not {PARTIALS_MAP!r}")
            body = orjson.loads(value)
            self.partials[key.decode()] = (body["offsets"], body["result"])
        self._changed.clear()


class PartialCodec:
    """Turns the records sharded workers publish into the coordinator's events: one ``partial`` event
    per record, ``row = {"source", "offsets", "result"}``. Anything else is refused (dead-lettered)."""

    name = "partials"

    def __init__(self, service: str) -> None:
        self.service = service
        self.schema = Schema.of(Relation.of(PARTIAL, source="str"))

    def decode(self, value: bytes | None) -> UpdateEvent:
        if value is None:
            raise EventError("malformed-json", "empty record value")
        try:
            record = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise EventError("malformed-json", f"not valid JSON: {exc}") from None
        if type(record) is not dict or not {"service", "key", "result", "offsets"} <= record.keys():
            raise EventError(
                "not-a-partial", "a partial result is a published record: service, key, result, offsets"
            )
        if record["service"] != self.service:
            raise EventError(
                "not-a-partial", f"published by service {record['service']!r}, not {self.service!r}"
            )
        source, offsets = record["key"], record["offsets"]
        if type(source) is not str or type(offsets) is not dict or not offsets:
            raise EventError("not-a-partial", "key must be a string and offsets a non-empty object")
        if any(type(v) is not int or v < 0 for v in offsets.values()):
            raise EventError("not-a-partial", f"offsets must be non-negative integers, got {offsets!r}")
        return UpdateEvent(PARTIAL, {"source": source, "offsets": offsets, "result": record["result"]}, 1)

    def decode_many(self, values: Iterable[bytes | None]) -> list[UpdateEvent | EventError]:
        out: list[UpdateEvent | EventError] = []
        for value in values:
            try:
                out.append(self.decode(value))
            except EventError as err:
                out.append(err)
        return out

    def decode_grouped(
        self, values: Iterable[bytes | None]
    ) -> tuple[list[UpdateEvent | EventError], dict[str, list[UpdateEvent]], int]:
        """As ``EventCodec.decode_grouped``: every event under the one (empty) key."""
        decoded = self.decode_many(values)
        events = [item for item in decoded if isinstance(item, UpdateEvent)]
        return decoded, ({"": events} if events else {}), len(decoded) - len(events)


def coordinator_of(
    service: ServiceDefinition, config: ServiceConfig
) -> tuple[ServiceDefinition, ServiceConfig, PartialCodec]:
    """What ``--role coordinator`` runs for a sharded ``config``: a service reading the workers' output
    topic and publishing to ``global_topic``, and the codec of its input."""
    sharding = load_sharding(service)
    if not config.sharded or sharding is None:
        raise ConfigError(f"{config.source}: the coordinator role needs a sharded config (shard_by)")
    combine = sharding.combine_partials
    definition = ServiceDefinition(
        name=f"{service.name}.coordinator",
        summary=f"the sum of the partial results of sharded {service.name} workers",
        options=service.options,  # the query's options decide what the held partials mean
        relations=lambda _options: [Relation.of(PARTIAL, source="str")],
        engine=lambda options: PartialsEngine(partial(combine, options)),
        state_version=1,
        platform_only=True,
    )
    derived = dataclasses.replace(
        config,
        input_topic=config.output_topic,
        output_topic=config.global_topic,
        key_field=None,
        shard_by=None,
    )
    return definition, derived, PartialCodec(service.name)
