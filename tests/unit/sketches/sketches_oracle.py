"""Oracles for the sketches tests: DuckDB over all the data, and answers normalised for comparison."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import duckdb

from ivmstream.events import UpdateEvent
from ivmstream.services.sketches.engine import SketchEngine

# Random-test schema: two small tables, values in 0..9 (duplicates, ties, group collisions); c may be NULL.
SCHEMA: dict[str, dict[str, str]] = {
    "r": {"a": "int", "b": "int", "c": "int"},
    "s": {"a": "int", "d": "int"},
}


def norm(v: Any) -> Any:
    """One comparable form for DuckDB's and the engine's numbers (averages are floats on both sides)."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, Decimal | Fraction | float):
        f = float(v)
        return int(f) if f.is_integer() else round(f, 9)
    return v


def norm_rows(rows: Sequence[Sequence[Any]], ordered: bool) -> list[tuple[Any, ...]]:
    out = [tuple(norm(v) for v in r) for r in rows]
    return out if ordered else sorted(out, key=lambda r: [(v is None, str(type(v)), v) for v in r])


def duckdb_answer(
    sql: str, data: Mapping[str, Counter[tuple[Any, ...]]], ordered: bool
) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    try:
        for table, cols in SCHEMA.items():
            con.execute(f"CREATE TABLE {table} ({', '.join(f'{c} BIGINT' for c in cols)})")
            rows = [r for r, n in data.get(table, Counter()).items() for _ in range(n)]
            if rows:
                con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' for _ in cols)})", rows)
        return norm_rows(con.execute(sql).fetchall(), ordered)
    finally:
        con.close()


def event(table: str, row: tuple[Any, ...], delta: int) -> UpdateEvent:
    return UpdateEvent(table, dict(zip(SCHEMA[table], row, strict=True)), delta)


def options(query: str, partition: Mapping[str, Any], strategy: str = "imp", **flags: Any) -> dict[str, Any]:
    return {
        "query": query,
        "relations": SCHEMA,
        "partition": dict(partition),
        "strategy": strategy,
        "selection_pushdown": flags.get("selection_pushdown", True),
        "bloom": flags.get("bloom", False),
        "allow_unsafe": flags.get("allow_unsafe", False),
        "monotone_aggregates": flags.get("monotone_aggregates", False),
        "top_m": flags.get("top_m", 0),
        "join": flags.get("join", "mat"),
        "instances": flags.get("instances", []),
    }


def engine(query: str, partition: Mapping[str, Any], strategy: str = "imp", **flags: Any) -> SketchEngine:
    return SketchEngine(options(query, partition, strategy, **flags))
