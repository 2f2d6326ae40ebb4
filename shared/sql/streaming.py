"""Views over Kafka: each unit of a view is an ordinary service worker on a topic of its own, fed by
``sql produce`` (the base tables' events through the unit's feeds, as ``replay`` applies them).

Topics are named after the view (``<view>.updates``, ``<view>.results``, ``<view>.dlq``; a view of
several units adds the unit's number). The services read one ordered stream without a partition
key, so every event goes to partition 0. A view over topic-backed tables reads the tables' topics
instead, as the runtime's ``inputs`` (``ivmstream.sql.topics``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ivmstream.config import ServiceConfig, build_config
from ivmstream.events.changes import NATIVE
from ivmstream.service import ServiceDefinition, load_service
from ivmstream.sql.inputs import Event
from ivmstream.sql.model import Table, TopicSource
from ivmstream.sql.plan import Unit, ViewPlan
from ivmstream.sql.replay import encode
from ivmstream.sql.topics import file_tables, table_service, topic_inputs, topic_tables


def topic_stem(plan: ViewPlan, index: int) -> str:
    """The topic prefix of a view's unit (letters, digits, '.', '_', '-' only)."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", plan.view.name)
    return stem if len(plan.units) == 1 else f"{stem}.{index + 1}"


@dataclass
class StreamUnit:
    """One unit ready to run: its service, its worker configuration and its feeds. ``tables``: the
    topic-backed tables it reads directly (empty: it reads ``<view>.updates``, fed by produce);
    ``files``: the static tables from files it reads beside them (loaded by ``sql bootstrap``)."""

    plan: ViewPlan
    unit: Unit
    service: ServiceDefinition
    config: ServiceConfig
    tables: list[Table] = field(default_factory=list)
    files: list[Table] = field(default_factory=list)


def stream_units(
    plans: list[ViewPlan],
    settings: dict[str, Any] | None = None,
    tables: Mapping[str, Table] | None = None,
) -> list[StreamUnit]:
    """Every unit with its topics (``settings``: further runtime keys, e.g. ``checkpoint_interval``;
    ``tables``: the script's, so that units over topic-backed tables read their topics)."""
    out = []
    for plan in plans:
        for i, unit in enumerate(plan.units):
            stem = topic_stem(plan, i)
            service = load_service(unit.service)
            on_topics = topic_tables(unit, tables) if tables is not None else []
            source: dict[str, Any] = {"input_topic": f"{stem}.updates"}
            if on_topics:
                service = table_service(service, unit, on_topics)
                source = {"inputs": topic_inputs(on_topics)}
            raw = {
                **unit.options,
                **(settings or {}),
                **source,
                "output_topic": f"{stem}.results",
                "dlq_topic": f"{stem}.dlq",
            }
            config = build_config(service, raw, source=plan.view.name)
            files = file_tables(unit, tables) if on_topics and tables is not None else []
            out.append(StreamUnit(plan, unit, service, config, on_topics, files))
    return out


def produce_events(
    units: list[StreamUnit], events: Iterable[Event], send: Callable[[str, bytes], None]
) -> dict[str, int]:
    """Send each base event, through every feed reading its table, to the unit's input topic;
    the count per topic."""
    routes: dict[str, list[tuple[str, Any]]] = {}
    counts: dict[str, int] = {}
    for u in units:
        if u.tables:
            for t in u.tables:
                src = t.source
                if isinstance(src, TopicSource) and src.format == NATIVE and t.name not in routes:
                    routes[t.name] = [(src.topic, None)]  # the table's own events, once
                    counts.setdefault(src.topic, 0)
            continue
        for feed in u.unit.feeds:
            routes.setdefault(feed.table, []).append((u.config.input_topic, feed))
        counts[u.config.input_topic] = 0
    for table, row, delta in events:
        for topic, feed in routes.get(table, ()):
            ev = (
                feed.event(row, delta)
                if feed is not None
                else {"relation": table, "row": row, "delta": delta}
            )
            if ev is not None:
                send(topic, encode(ev))
                counts[topic] += 1
    return counts


def tables_of(units: list[StreamUnit]) -> set[str]:
    """The tables produce reads from files: those of units fed through ``<view>.updates``, and
    topic-backed tables in the native format (change formats come from their CDC tool)."""
    out = {feed.table for u in units if not u.tables for feed in u.unit.feeds}
    for u in units:
        out |= {t.name for t in u.tables if isinstance(t.source, TopicSource) and t.source.format == NATIVE}
    return out


def view_rows(units: list[StreamUnit], results: list[Any]) -> dict[str, Any]:
    """A view's row object from its units' latest results (in unit order)."""
    plan = units[0].plan
    out = {
        "view": plan.view.name,
        "service": plan.service,
        "columns": plan.columns,
        "rows": plan.assemble(results),
    }
    out.update(plan.fields(results))
    return out


def group_of(unit: StreamUnit) -> str:
    """The unit's consumer group (and state namespace): after its input topic, or for a unit over
    topic-backed tables, which other views may read too, after its own results topic."""
    if unit.tables:
        return f"ivmstream.sql.{unit.config.output_topic.removesuffix('.results')}"
    return f"ivmstream.sql.{unit.config.input_topic}"
