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


def weight_column(table: str) -> str:
    return f"__m_{table}"


def quotient(num: exp.Expression, den: exp.Expression) -> exp.Expression:
    """DBToaster's quotient (docs/sql.md): 0 when the numerator is 0 (AVG over no rows, 0 over 0), else
    the SQL quotient (NULL over 0)."""
    zero = exp.Literal.number(0)
    return exp.Case(
        ifs=[exp.If(this=exp.EQ(this=exp.Paren(this=num.copy()), expression=zero.copy()), true=zero.copy())],
        default=exp.Div(
            this=exp.Paren(this=num.copy()), expression=exp.Nullif(this=den.copy(), expression=zero)
        ),
    )


def _occurrences(select: exp.Select) -> list[tuple[str, str]]:
    """(alias, table) of the FROM list and joins."""
    from_ = select.args.get("from_") or select.args.get("from")
    sources = [from_.this] if from_ is not None else []
    sources += [j.this for j in select.args.get("joins") or []]
    return [((s.alias or s.name).lower(), s.name.lower()) for s in sources if isinstance(s, exp.Table)]


def weighted(select: exp.Select, features: Sequence[str] | None = None) -> exp.Select:
    """The SELECT over tables carrying their rows' multiplicities (``__m_<table>``, possibly negative:
    DBToaster's relations are multisets with integer multiplicities): every aggregate weighted by the
    product of its occurrences' multiplicities, a group present while its multiplicity is non-zero."""
    occ = _occurrences(select)
    w: exp.Expression = exp.column(weight_column(occ[0][1]), table=occ[0][0])
    for alias, table in occ[1:]:
        w = exp.Mul(this=w, expression=exp.column(weight_column(table), table=alias))
    zero = exp.Literal.number(0)

    def total(e: exp.Expression | None) -> exp.Expression:
        arg = w.copy() if e is None else exp.Mul(this=exp.Paren(this=e.copy()), expression=w.copy())
        return exp.Coalesce(this=exp.Sum(this=arg), expressions=[zero.copy()])

    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Count):
            return total(None)
        if isinstance(node, exp.Sum):
            return total(node.this)
        if isinstance(node, exp.Avg):
            return quotient(total(node.this), total(None))
        return node

    def quotients(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Div) and node.find_ancestor(exp.AggFunc) is None:
            return quotient(node.this, node.expression)  # arithmetic over aggregates
        return node

    out = select.copy()
    if features is not None:
        groups = [g.copy() for g in (out.args["group"].expressions if out.args.get("group") else [])]
        aggs: list[exp.Expression] = [exp.Count(this=exp.Star())]
        aggs += [exp.Sum(this=exp.column(f)) for f in features]
        aggs += [
            exp.Sum(this=exp.Mul(this=exp.column(a), expression=exp.column(b)))
            for i, a in enumerate(features)
            for b in features[i:]
        ]
        out.set("expressions", [*groups, *aggs])
    out = out.transform(quotients)  # type: ignore[assignment]
    out = out.transform(fix)  # type: ignore[assignment]
    if out.args.get("group"):
        out.set("having", exp.Having(this=exp.NEQ(this=total(None), expression=zero.copy())))
    return out


def _value(v: Any, kind: str) -> Any:
    if v is None:
        return None
    if kind == "date":
        return dt.date.fromisoformat(v) if isinstance(v, str) else v
    if kind in ("float", "exact"):
        return float(v)
    return v


def cofactor_rows(rows: Iterable[Sequence[Any]], groups: int, features: Sequence[str]) -> list[list[Any]]:
    """The cofactor query's rows as the covariance ring's values (count, sum, sumprod)."""
    n = len(features)
    out = []
    for row in rows:
        count, sums, tri = row[groups], list(row[groups + 1 : groups + 1 + n]), row[groups + 1 + n :]
        prod = [[0.0] * n for _ in range(n)]
        k = 0
        for i in range(n):
            for j in range(i, n):
                prod[i][j] = prod[j][i] = tri[k]
                k += 1
        value = {"count": count, "variables": list(features), "sum": sums, "sumprod": prod}
        out.append([*row[:groups], value])
    return out


def evaluate(
    spark: Any,
    view: View,
    tables: Mapping[str, Table],
    bags: Mapping[str, Bag],
    features: Sequence[str] | None = None,
) -> list[list[Any]]:
    """The view's rows by Spark SQL over the tables' net bags, in a session of its own (temporary views
    by table name). A view without subqueries reads each row once with its multiplicity (negative
    ones too, ``weighted``); one with subqueries reads a row of multiplicity m > 0 m times.
    ``features``: the view lifts them into the cofactor ring (F-IVM's dialect)."""
    session = spark.newSession()
    session.conf.set("spark.sql.ansi.enabled", "false")  # a zero denominator is NULL, as in docs/sql.md
    flat = not any(s is not view.select for s in view.select.find_all(exp.Select))
    for name, bag in bags.items():
        table = tables[name]
        columns = [f"`{c}` {SPARK_TYPES[k]}" for c, k in table.columns.items()]
        kinds = list(table.columns.values())
        if flat:
            columns.append(f"`{weight_column(name)}` BIGINT")
            rows = [
                (*(_value(v, k) for v, k in zip(row, kinds, strict=True)), m) for row, m in bag.items() if m
            ]
        else:
            rows = [
                tuple(_value(v, k) for v, k in zip(row, kinds, strict=True))
                for row, m in bag.items()
                for _ in range(max(m, 0))
            ]
        session.createDataFrame(rows, ", ".join(columns)).createOrReplaceTempView(name)
    if not flat:
        return [list(r) for r in session.sql(spark_sql(view)).collect()]
    sql = weighted(view.select, features).sql(dialect="spark")
    found = [list(r) for r in session.sql(sql).collect()]
    if features is None:
        return found
    groups = len(view.select.args["group"].expressions) if view.select.args.get("group") else 0
    return cofactor_rows(found, groups, features)


def _norm(v: Any) -> Any:
    if isinstance(v, dict) and "variables" in v and "sumprod" in v:  # a cofactor value: by variable name
        names = v["variables"]
        return {
            "count": v["count"],
            "sum": {a: v["sum"][i] for i, a in enumerate(names)},
            "sumprod": {
                f"{a}*{b}": v["sumprod"][i][j] for i, a in enumerate(names) for j, b in enumerate(names)
            },
        }
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
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_close(x[k], y[k], rel) for k in x)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_close(a, b, rel) for a, b in zip(x, y, strict=True))
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
