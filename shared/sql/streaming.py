"""Views over Kafka: each unit of a view is an ordinary service worker on a topic of its own, fed by
``sql produce`` (the base tables' events through the unit's feeds, as ``replay`` applies them).

Topics are named after the view (``<view>.updates``, ``<view>.results``, ``<view>.dlq``; a view of
several units adds the unit's number). The services read one ordered stream without a partition
key, so every event goes to partition 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ivmstream.config import ServiceConfig, build_config
from ivmstream.service import ServiceDefinition, load_service
from ivmstream.sql.inputs import Event
from ivmstream.sql.plan import Unit, ViewPlan
from ivmstream.sql.replay import encode


def topic_stem(plan: ViewPlan, index: int) -> str:
    """The topic prefix of a view's unit (letters, digits, '.', '_', '-' only)."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", plan.view.name)
    return stem if len(plan.units) == 1 else f"{stem}.{index + 1}"


@dataclass
class StreamUnit:
    """One unit ready to run: its service, its worker configuration and its feeds."""

    plan: ViewPlan
    unit: Unit
    service: ServiceDefinition
    config: ServiceConfig


def stream_units(plans: list[ViewPlan], settings: dict[str, Any] | None = None) -> list[StreamUnit]:
    """Every unit with its topics (``settings``: further runtime keys, e.g. ``checkpoint_interval``)."""
    out = []
    for plan in plans:
        for i, unit in enumerate(plan.units):
            stem = topic_stem(plan, i)
            raw = {
                **unit.options,
                **(settings or {}),
                "input_topic": f"{stem}.updates",
                "output_topic": f"{stem}.results",
                "dlq_topic": f"{stem}.dlq",
            }
            service = load_service(unit.service)
            out.append(StreamUnit(plan, unit, service, build_config(service, raw, source=plan.view.name)))
    return out


def produce_events(
    units: list[StreamUnit], events: Iterable[Event], send: Callable[[str, bytes], None]
) -> dict[str, int]:
    """Send each base event, through every feed reading its table, to the unit's input topic;
    the count per topic."""
    routes: dict[str, list[tuple[str, Any]]] = {}
    for u in units:
        for feed in u.unit.feeds:
            routes.setdefault(feed.table, []).append((u.config.input_topic, feed))
    counts: dict[str, int] = {u.config.input_topic: 0 for u in units}
    for table, row, delta in events:
        for topic, feed in routes.get(table, ()):
            ev = feed.event(row, delta)
            if ev is not None:
                send(topic, encode(ev))
                counts[topic] += 1
    return counts


def tables_of(units: list[StreamUnit]) -> set[str]:
    return {feed.table for u in units for feed in u.unit.feeds}


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
