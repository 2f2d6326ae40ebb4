"""The tables a sketch query may read: the TPC-H catalog or relations declared in the config.

A column has a SQL name (what the query writes) and an event name (the key in an update event's
row). They differ only for TPC-H, whose events use the platform's unprefixed names (``orderkey``)
while the standard queries write ``l_orderkey``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ivmstream.sdk import COLUMN_TYPES, TPCH_TABLES

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
    """``"tpch"``, or ``{table: [column, ...]}`` (type ``number``) or ``{table: {column: type}}``."""
    if v == "tpch":
        return tpch_catalog()
    if not isinstance(v, Mapping) or not v:
        raise ValueError('must be "tpch" or map table names to columns')
    out = {}
    for name, cols in v.items():
        if isinstance(cols, list) and cols and all(isinstance(c, str) for c in cols):
            typed = {c: "number" for c in cols}
        elif isinstance(cols, Mapping) and cols:
            typed = dict(cols)
        else:
            raise ValueError(f"table {name!r} must list its columns or map them to types")
        for col, typ in typed.items():
            if typ not in COLUMN_TYPES:
                raise ValueError(f"{name}.{col} has unknown type {typ!r} (known: {', '.join(COLUMN_TYPES)})")
        if len(typed) != len(cols):
            raise ValueError(f"table {name!r} names a column twice")
        names = tuple(typed)
        out[str(name).lower()] = Table(str(name).lower(), names, names, tuple(typed.values()))
    return out
