"""Options of the reference service and the relations it accepts, declared in the config itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ivmstream.sdk import COLUMN_TYPES, Option, Relation, boolean, optional, positive_int

DEFAULT_RELATIONS = {"items": {"item": "str", "qty": "int", "price": "decimal"}}


def parse_relations(v: Any) -> dict[str, dict[str, str]]:
    if not isinstance(v, dict) or not v:
        raise ValueError("must map relation names to {column: type}")
    for rel, cols in v.items():
        if not isinstance(rel, str) or not isinstance(cols, dict) or not cols:
            raise ValueError(f"relation {rel!r} must map column names to types")
        for col, typ in cols.items():
            if typ not in COLUMN_TYPES:
                raise ValueError(f"{rel}.{col} has unknown type {typ!r} (known: {', '.join(COLUMN_TYPES)})")
    return {r: dict(c) for r, c in v.items()}


OPTIONS = {
    "relations": Option(DEFAULT_RELATIONS, parse_relations, "relations as {name: {column: type}}"),
    "allow_negative": Option(False, boolean(), "accept deletes that drive a multiplicity below 0"),
    "resident_entries": Option(
        None,
        optional(positive_int()),
        "keep each key's bag in the state store, at most this many tuples cached in memory "
        "(null: the whole bag in memory)",
        state=False,  # the stored entries are the same whatever the cache size
    ),
}


def relations(options: Mapping[str, Any]) -> Sequence[Relation]:
    return [Relation(name, tuple(cols.items())) for name, cols in options["relations"].items()]
