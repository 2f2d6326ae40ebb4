"""Views over topic-backed tables (``CREATE TABLE t (...) WITH (topic, format, key)``), read by
``sql run`` directly from the tables' topics through the runtime's ``inputs``.

A unit of such a view runs its service's engine behind a ``FeedEngine``: the worker decodes each
record by its topic's format into events of the *base tables* (the change formats' decoders, upsert
images and atomic checkpoints are the runtime's own, docs/change-data.md), and the engine passes them
through the unit's feeds (selections, derived factors, the renaming onto the service's relations)
before the service's engine sees them. Feeds hold no state, so the service's state is the whole state
and the checkpoint is the service's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ivmstream.engine import JSON, Engine, Rejection
from ivmstream.events import Relation, UpdateEvent
from ivmstream.events.changes import NATIVE, inverse
from ivmstream.events.codec import COLUMN_TYPES
from ivmstream.service import ServiceDefinition
from ivmstream.sql.errors import SqlError
from ivmstream.sql.model import Table, TopicSource
from ivmstream.sql.plan import Feed, Unit

# The model's column types as the platform's relations declare them (dates are ISO text).
PLATFORM_TYPE = {
    "int": "int",
    "float": "float",
    "exact": "exact",
    "str": "str",
    "date": "str",
    "bool": "bool",
}
Checked = tuple[str, Callable[[Mapping[str, Any]], Any], Callable[[Any], Any]]
_CASTS: dict[str, Callable[[Any], Any]] = {"float": float, "int": int, "str": str}


def table_relation(table: Table) -> Relation:
    """The base table as a platform relation (what its topic's records decode into)."""
    return Relation(table.name, tuple((c, PLATFORM_TYPE[k]) for c, k in table.columns.items()))


def topic_tables(unit: Unit, tables: Mapping[str, Table]) -> list[Table]:
    """The topic-backed tables a unit reads (empty: it reads files through ``sql produce``). Beside
    them a unit may read static tables from files (``CREATE TABLE ... FROM FILE``), which ``sql
    bootstrap`` loads into its state (``file_tables``); SqlError for a stream from a file beside topics."""
    read = [tables[name] for name in dict.fromkeys(f.table for f in unit.feeds)]
    on_topics = [t for t in read if isinstance(t.source, TopicSource)]
    streams = [t.name for t in read if not isinstance(t.source, TopicSource) and not t.static]
    if on_topics and streams:
        raise SqlError(
            f"unsupported: a view over topic-backed tables ({', '.join(t.name for t in on_topics)}) and "
            f"streams from files ({', '.join(streams)}); declare each stream WITH (topic = ...) (static "
            "tables from files may stand beside topics: sql bootstrap loads them)",
            on_topics[0].where,
        )
    return on_topics


def file_tables(unit: Unit, tables: Mapping[str, Table]) -> list[Table]:
    """The static tables from files a unit over topic-backed tables reads (loaded by ``sql bootstrap``)."""
    read = [tables[name] for name in dict.fromkeys(f.table for f in unit.feeds)]
    if not any(isinstance(t.source, TopicSource) for t in read):
        return []
    return [t for t in read if not isinstance(t.source, TopicSource)]


def topic_inputs(tables: Sequence[Table]) -> list[dict[str, Any]]:
    """The runtime's ``inputs`` entries of the tables: one per topic, the table as its relation."""
    out: dict[str, dict[str, Any]] = {}
    for t in tables:
        src = t.source
        assert isinstance(src, TopicSource)
        if src.format == NATIVE:
            if src.topic in out and out[src.topic]["format"] != NATIVE:
                raise SqlError(f"topic {src.topic!r} is read in two formats", src.where)
            out[src.topic] = {"topic": src.topic, "format": NATIVE}  # events name their table
            continue
        if src.topic in out:
            raise SqlError(
                f"topic {src.topic!r} is read by two tables in a change format (one table per topic)",
                src.where,
            )
        entry: dict[str, Any] = {"topic": src.topic, "format": src.format, "relation": t.name}
        if t.primary_key:
            entry["primary_key"] = list(t.primary_key)
        if src.project:
            entry["project"] = True
        if src.mode is not None and src.format != "upsert-json":
            entry["mode"] = src.mode
        out[src.topic] = entry
    return list(out.values())


class FeedEngine:
    """Base-table events -> the unit's feeds -> the service's engine. A base event the service refuses
    any part of is undone whole and refused once (its index, the service's reason)."""

    def __init__(self, inner: Engine, feeds: Sequence[Feed], relations: Sequence[Relation]) -> None:
        self.inner = inner
        types = {r.name: dict(r.columns) for r in relations}
        self.routes: dict[str, list[tuple[Feed, list[Checked]]]] = {}
        for feed in feeds:
            checks: list[Checked] = []
            for c, f in feed.columns:
                kind = types[feed.relation][c]
                parts = getattr(f, "parts", None)
                cast = _CASTS.get(kind)
                if parts is not None and cast is not None and parts[1] is cast:
                    checks.append((c, parts[0], cast))  # the cast makes the type: no check, no frame
                else:
                    checks.append((c, f, COLUMN_TYPES[kind]))
            self.routes.setdefault(feed.table, []).append((feed, checks))

    def __getattr__(self, name: str) -> Any:
        # The service engine's optional protocols (incremental entries, stored maps, stats).
        return getattr(self.inner, name)

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        try:
            fed, origin = self._feed(events)
        except (TypeError, ValueError, ArithmeticError):
            return self._apply_each(events)
        rejections = self.inner.apply(fed) if fed else []
        return self._undo(fed, origin, rejections, {}) if rejections else []

    def _feed(self, events: Sequence[UpdateEvent]) -> tuple[list[UpdateEvent], list[int]]:
        routes = self.routes.get
        fed: list[UpdateEvent] = []
        origin: list[int] = []
        add, mark = fed.append, origin.append
        for i, ev in enumerate(events):
            for feed, checks in routes(ev.relation, ()):
                row = ev.row
                if feed.keep is not None and not feed.keep(row):
                    continue
                add(UpdateEvent(feed.relation, {c: conv(get(row)) for c, get, conv in checks}, ev.delta))
                mark(i)
        return fed, origin

    def _apply_each(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        """A batch some event of which the feeds cannot make: each event on its own."""
        fed: list[UpdateEvent] = []
        origin: list[int] = []
        refused: dict[int, Rejection] = {}
        for i, ev in enumerate(events):
            for feed, checks in self.routes.get(ev.relation, ()):
                row = ev.row
                if feed.keep is not None and not feed.keep(row):
                    continue
                try:
                    out = {c: check(f(row)) for c, f, check in checks}
                except (TypeError, ValueError, ArithmeticError) as exc:
                    refused[i] = Rejection(i, "wrong-type", f"{feed.relation}: {exc}")
                    break
                fed.append(UpdateEvent(feed.relation, out, ev.delta))
                origin.append(i)
        if refused:
            keep = [j for j, o in enumerate(origin) if o not in refused]
            fed, origin = [fed[j] for j in keep], [origin[j] for j in keep]
        rejections = self.inner.apply(fed) if fed else []
        return self._undo(fed, origin, rejections, refused)

    def _undo(
        self,
        fed: list[UpdateEvent],
        origin: list[int],
        rejections: list[Rejection],
        refused: dict[int, Rejection],
    ) -> list[Rejection]:
        """Each base event any of whose service events was refused: undone whole, refused once."""
        bad = {r.index for r in rejections}
        for r in rejections:
            refused.setdefault(origin[r.index], Rejection(origin[r.index], r.code, r.detail))
        undo = [inverse(e) for j, e in enumerate(fed) if j not in bad and origin[j] in refused]
        if undo:
            self.inner.apply(undo[::-1])
        return [refused[i] for i in sorted(refused)]

    def result(self) -> JSON:
        return self.inner.result()

    def snapshot(self) -> bytes:
        return self.inner.snapshot()

    def restore(self, data: bytes) -> None:
        self.inner.restore(data)


def table_service(service: ServiceDefinition, unit: Unit, tables: Sequence[Table]) -> ServiceDefinition:
    """The service as a worker of base-table events: the tables as its relations, its engine behind
    the unit's feeds (options, validation, state and results are the service's)."""
    relations = [table_relation(t) for t in tables]

    def engine(options: Mapping[str, Any]) -> Engine:
        return FeedEngine(service.engine(options), unit.feeds, service.relations(options))

    return dataclasses.replace(
        service, relations=lambda _options: relations, engine=engine, demo=None, workloads=(), sharding=None
    )
