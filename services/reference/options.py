"""Options of the reference service and the relations it accepts, declared in the config itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ivmstream.sdk import (
    Option,
    Relation,
    boolean,
    declared_relations,
    optional,
    positive_int,
    relations_option,
)

# It sums and fingerprints values of every type, so it takes each one; it has no joins, so no aliases.
DEFAULT_RELATIONS = {"items": {"item": "str", "qty": "int", "price": "decimal"}}

OPTIONS = {
    "relations": relations_option(DEFAULT_RELATIONS),
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
    return declared_relations(options["relations"])
