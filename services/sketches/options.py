"""Options of the sketches service (docs/sketches/algorithm.md §7), their validation and the relations
it accepts: the tables the configured query reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ivmstream.sdk import (
    Option,
    Parser,
    Relation,
    boolean,
    choice,
    mapping,
    non_negative_int,
    relations_option,
)
from ivmstream.services.sketches.catalog import NO_ALIASES
from ivmstream.services.sketches.compiler import STRATEGIES, compile_options


def _sql(v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ValueError("must be a SQL query")
    return v


def _sql_list(v: Any) -> list[str]:
    if not isinstance(v, list | tuple):
        raise ValueError("must be a list of SQL queries")
    return [_sql(q) for q in v]


# Defaults: TPC-H Q1's shape, lineitem in 64 equal ranges of l_orderkey over its domain at scale factor 1.
DEFAULT_QUERY = (
    "SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty, COUNT(*) AS count_order FROM lineitem "
    "WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus"
)
DEFAULT_PARTITION = {"lineitem": {"column": "l_orderkey", "ranges": 64, "domain": [0, 6_000_000]}}

OPTIONS: dict[str, Option] = {
    "query": Option(
        DEFAULT_QUERY,
        Parser("a SQL query", _sql),
        "the sketched query (SQL, docs/sketches/algorithm.md §1.2)",
    ),
    "relations": relations_option("tpch", aliases=NO_ALIASES),
    "partition": Option(
        DEFAULT_PARTITION,
        mapping(),
        "{table: {column, boundaries: [...]}} or {table: {column, ranges: n, domain: [lo, hi]}}",
    ),
    "strategy": Option(
        "imp", choice(*STRATEGIES), "imp (incremental), full (recapture when stale), nosketch"
    ),
    "selection_pushdown": Option(True, boolean(), "filter each table's rows before the joins (§2.6.1)"),
    "bloom": Option(False, boolean(), "Bloom filters on join keys skip lookups without a partner (§2.6.2)"),
    "allow_unsafe": Option(
        False, boolean(), "maintain a sketch no safety condition proves, never skip with it"
    ),
    "monotone_aggregates": Option(
        False,
        boolean(),
        "S4: accept sum/count > c and ORDER BY sum DESC LIMIT k, refusing negative sum inputs",
    ),
    "join": Option(
        "mat",
        choice("mat", "probe"),
        "mat: joins keep both inputs indexed by key; probe: joins look rows up in the table store (§2.4.5)",
    ),
    "instances": Option(
        [],
        Parser("a list of SQL queries", _sql_list),
        "other instances of the query's template answered over this sketch, when reuse is safe (§2.7.1)",
    ),
    "top_m": Option(
        0,
        non_negative_int(),
        "keep only the m best values per MIN/MAX group and max(m, k) top-k tuples, refilled when deletes "
        "drain them (§2.6.3); 0 keeps them all",
    ),
}


def validate(options: Mapping[str, Any]) -> None:
    """Parse, plan and check safety once, so a bad query or partition fails at configuration time."""
    compile_options(options)


def relations(options: Mapping[str, Any]) -> list[Relation]:
    """The tables the query reads, with the columns and types their update events carry."""
    compiled = compile_options(options)
    return [
        Relation(t.name, tuple(zip(t.event_columns, t.types, strict=True))) for t in compiled.tables.values()
    ]
