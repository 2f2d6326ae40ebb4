"""A service's inputs: the config key ``inputs``, a list of topics each with its format and relation.

    inputs:
      - {topic: pg.public.orders, format: debezium-json, relation: orders}
      - {topic: pg.public.items, format: debezium-json, relation: items, project: true}
      - {topic: prices, format: upsert-json, relation: prices, primary_key: [sku]}

``input_topic: T`` is the shorthand for ``inputs: [{topic: T, format: native}]``. Per input: ``format``
(``native`` or a change format), ``relation`` (default: the record's table; required for upsert-json),
``project`` (drop columns the relation does not declare; default false, so a column the view does not
expect is refused rather than silently ignored), ``primary_key`` (columns naming a row where records
carry no key), ``mode`` (``full``: retract the record's before-image; ``upsert``: retract the last image
kept for the row's key; upsert-json is always upsert).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ivmstream.events.changes import CHANGE_FORMATS, NATIVE, ChangeSpec
from ivmstream.options import Parser

FORMATS = (NATIVE, *CHANGE_FORMATS)
_KEYS = ("topic", "format", "relation", "project", "primary_key", "mode")
_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass(frozen=True)
class InputSpec:
    """One input topic: its format, and how its change records are read (None for the native envelope)."""

    topic: str
    format: str = NATIVE
    change: ChangeSpec | None = None

    def describe(self) -> dict[str, Any]:
        """The input as the state envelope records it (state is never restored under other inputs)."""
        out: dict[str, Any] = {"topic": self.topic, "format": self.format}
        if self.change is not None:
            c = self.change
            out.update(relation=c.relation, project=c.project, images=c.images)
            if c.primary_key is not None:
                out["primary_key"] = list(c.primary_key)
        return out


def _one(item: Any, i: int) -> InputSpec:
    where = f"entry {i}:"
    if not isinstance(item, dict):
        raise ValueError(f"{where} must be a mapping {{topic, format, relation}}")
    unknown = sorted(set(item) - set(_KEYS))
    if unknown:
        raise ValueError(f"{where} unknown key {unknown[0]!r} (keys: {', '.join(_KEYS)})")
    topic = item.get("topic")
    if type(topic) is not str or not topic or any(c not in _TOPIC_CHARS for c in topic):
        raise ValueError(f"{where} topic must be a Kafka topic name (got {topic!r})")
    fmt = item.get("format", NATIVE)
    if fmt not in FORMATS:
        raise ValueError(f"{where} format must be one of {', '.join(FORMATS)} (got {fmt!r})")
    relation = item.get("relation")
    if relation is not None and (type(relation) is not str or not relation):
        raise ValueError(f"{where} relation must be a relation name (got {relation!r})")
    project = item.get("project", False)
    if type(project) is not bool:
        raise ValueError(f"{where} project must be true or false")
    pk = item.get("primary_key")
    if pk is not None:
        if isinstance(pk, str):
            pk = [pk]
        if not isinstance(pk, list) or not pk or any(type(c) is not str or not c for c in pk):
            raise ValueError(f"{where} primary_key must be a column name or a list of them")
        pk = tuple(pk)
    mode = item.get("mode", "upsert" if fmt == "upsert-json" else "full")
    if mode not in ("full", "upsert") or (fmt == "upsert-json" and mode != "upsert"):
        allowed = "upsert" if fmt == "upsert-json" else "full or upsert"
        raise ValueError(f"{where} mode must be {allowed} (got {mode!r})")
    if fmt == NATIVE:
        extra = [k for k in ("relation", "project", "primary_key", "mode") if k in item]
        if extra:
            raise ValueError(f"{where} {extra[0]} applies to change formats, not the native envelope")
        return InputSpec(topic)
    if fmt == "upsert-json" and relation is None:
        raise ValueError(f"{where} upsert-json needs relation (its rows name no table)")
    return InputSpec(topic, fmt, ChangeSpec(fmt, relation, pk, project, mode == "upsert"))


def _accept(value: Any) -> tuple[InputSpec, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError("must be a non-empty list of {topic, format, relation} mappings")
    specs = tuple(_one(item, i) for i, item in enumerate(value))
    topics = [s.topic for s in specs]
    if len(set(topics)) != len(topics):
        raise ValueError("must name each topic once")
    return specs


inputs_list: Parser[tuple[InputSpec, ...]] = Parser("a list of {topic, format, relation} mappings", _accept)
