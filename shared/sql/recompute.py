"""A view's own SQL evaluated by Spark SQL over net bags of its base tables: the independent
recomputation ``sql reconcile`` compares the published rows with (the engines are never involved).

The SELECT is transpiled by sqlglot to Spark's dialect with DBToaster's semantics where they differ
from standard SQL (docs/sql.md): every SUM reads an empty SUM as 0.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from sqlglot import exp

from ivmstream.sql.model import Table, View

SPARK_TYPES = {
    "int": "BIGINT",
    "float": "DOUBLE",
    "exact": "DOUBLE",
    "str": "STRING",
    "date": "DATE",
    "bool": "BOOLEAN",
}
Bag = Mapping[tuple[Any, ...], int]


def spark_sql(view: View) -> str:
    """The view's SELECT in Spark SQL, an empty SUM read as 0."""

    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Sum) and not isinstance(node.parent, exp.Coalesce):
            return exp.Coalesce(this=node.copy(), expressions=[exp.Literal.number(0)])
        return node

    return view.select.copy().transform(fix).sql(dialect="spark")


def _value(v: Any, kind: str) -> Any:
    if v is None:
        return None
    if kind == "date":
        return dt.date.fromisoformat(v) if isinstance(v, str) else v
    if kind in ("float", "exact"):
        return float(v)
    return v


def evaluate(spark: Any, view: View, tables: Mapping[str, Table], bags: Mapping[str, Bag]) -> list[list[Any]]:
    """The view's rows by Spark SQL over the tables' net bags (a row of multiplicity m, m times; a
    non-positive multiplicity is no row), in a session of its own (temporary views by table name)."""
    session = spark.newSession()
    session.conf.set("spark.sql.ansi.enabled", "false")  # a zero denominator is NULL, as in docs/sql.md
    for name, bag in bags.items():
        table = tables[name]
        schema = ", ".join(f"`{c}` {SPARK_TYPES[k]}" for c, k in table.columns.items())
        kinds = list(table.columns.values())
        rows = [
            tuple(_value(v, k) for v, k in zip(row, kinds, strict=True))
            for row, m in bag.items()
            for _ in range(max(m, 0))
        ]
        session.createDataFrame(rows, schema).createOrReplaceTempView(name)
    return [list(r) for r in session.sql(spark_sql(view)).collect()]


def _norm(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, dt.date):
        return v.isoformat()
    return v


def _close(x: Any, y: Any, rel: float) -> bool:
    if x is None or y is None:
        return x in (None, 0) and y in (None, 0)  # an empty SUM: NULL in SQL, 0 in DBToaster
    if isinstance(x, int | float) and isinstance(y, int | float) and not isinstance(x, bool):
        return math.isclose(float(x), float(y), rel_tol=rel, abs_tol=1e-6)
    return bool(x == y)


def row_differences(
    ours: Iterable[Sequence[Any]], theirs: Iterable[Sequence[Any]], rel: float = 1e-6
) -> list[str]:
    """How two bags of rows differ (numbers within ``rel``): empty when they are equal."""

    def key(row: Sequence[Any]) -> str:
        return repr([round(x, 2) if isinstance(x, float) else x for x in row])

    a = sorted(([_norm(v) for v in r] for r in ours), key=key)
    b = sorted(([_norm(v) for v in r] for r in theirs), key=key)
    if len(a) != len(b):
        return [f"{len(a)} published rows, {len(b)} recomputed"]
    out = []
    for ra, rb in zip(a, b, strict=True):
        if len(ra) != len(rb) or not all(_close(x, y, rel) for x, y in zip(ra, rb, strict=True)):
            out.append(f"published {ra}, recomputed {rb}")
    return out


def sample_differences(sample: Iterable[Sequence[Any]], rows: Iterable[Sequence[Any]], k: int) -> list[str]:
    """A uniform sample checked against the full result: a sub-bag of it, of size min(k, |result|)."""
    from collections import Counter

    full = Counter(tuple(_norm(v) for v in r) for r in rows)
    got = Counter(tuple(_norm(v) for v in r) for r in sample)
    out = [f"sampled row {list(r)} is not in the result" for r, n in got.items() if n > full.get(r, 0)]
    want = min(k, sum(full.values()))
    if sum(got.values()) != want:
        out.append(f"{sum(got.values())} sampled rows, expected min(k, |result|) = {want}")
    return out
