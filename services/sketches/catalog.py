"""The tables a sketch query may read: the TPC-H catalog or relations declared in the config.

A column has a SQL name (what the query writes) and an event name (the key in an update event's
row). They differ only for TPC-H, whose events use the platform's unprefixed names (``orderkey``)
while the standard queries write ``l_orderkey``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ivmstream.sdk import TPCH, TPCH_TABLES, relation_columns
from ivmstream.sdk import parse_relations as parse_relations_

_TPCH_PREFIX = {
    "lineitem": "l_",
    "orders": "o_",
    "customer": "c_",
    "part": "p_",
    "partsupp": "ps_",
    "supplier": "s_",
    "nation": "n_",
    "region": "r_",
}


@dataclass(frozen=True)
class Table:
    name: str
    sql_columns: tuple[str, ...]  # as the query names them
    event_columns: tuple[str, ...]  # as update events name them
    types: tuple[str, ...]

    def position(self, column: str) -> int | None:
        """The column's position, by its SQL or its event name."""
        for names in (self.sql_columns, self.event_columns):
            if column in names:
                return names.index(column)
        return None


def tpch_catalog() -> dict[str, Table]:
    out = {}
    for name, cols in TPCH_TABLES.items():
        prefix = _TPCH_PREFIX[name]
        out[name] = Table(
            name,
            tuple(prefix + c for c, _ in cols),
            tuple(c for c, _ in cols),
            tuple(t for _, t in cols),
        )
    return out


def parse_relations(v: Any) -> dict[str, Table]:
    """The tables of a relation declaration (``ivmstream.sdk.parse_relations``): ``"tpch"`` gives the
    TPC-H catalog, whose queries may also write the prefixed column names (``l_orderkey``)."""
    declared = declare(v)
    if declared == TPCH:
        return tpch_catalog()
    out = {}
    for name, typed in relation_columns(declared).items():
        names = tuple(typed)
        out[name.lower()] = Table(name.lower(), names, names, tuple(typed.values()))
    return out


# Sketches takes every column type; a query joins a table with itself by naming it twice.
NO_ALIASES = "sketches joins a table with itself by naming it twice in the query"


def declare(v: Any) -> str | dict[str, Any]:
    """The canonical declaration (the one parser of every service's ``relations``)."""
    return parse_relations_(v, aliases=NO_ALIASES)
