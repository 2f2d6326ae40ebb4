"""The fivm query recomputed with Spark SQL, for reconciliation (docs/fivm/algorithm.md §8.2).

An oracle independent of the view tree: one SQL statement joins every relation occurrence flat
(natural join on shared variables within each partition key), weighs each join row by the product
of its tuples' multiplicities and aggregates per key and group:

* count: ``SUM(w)``; sum: ``SUM(w · x · y ...)`` (a repeated variable is a power);
* covariance: ``SUM(w)``, ``SUM(w · x_i)`` and ``SUM(w · x_i · x_j)`` for every pair i <= j.

Exact modes (counts, int sums, ``decimals``) sum ``DECIMAL(38, 0)`` values — ``decimals`` in units of
10^-N per factor — and divide by the scale only for the result, as the engine does; floats sum doubles.
The cost is the flat join's size (F-RE's, not F-IVM's): reconciliation checks, it does not scale.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from ivmstream.services.fivm import model
from ivmstream.services.fivm.batch_views import Plan, canonical_relations

INT64 = (-(2**63), 2**63 - 1)
RECOMPUTED_RINGS = ("count", "sum", "covariance")


def from_units(units: int, exponent: int) -> float:
    """The nearest float of ``units · 10^-exponent`` (Python's int division rounds correctly)."""
    return units / 10**exponent if exponent else float(units)


class Aggregates:
    """The SQL aggregate list of a query and how to turn one result row back into the ring's JSON."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        q = plan.query
        self.ring = q.ring
        self.variables: tuple[str, ...] = plan.tree.lifted if q.ring == "covariance" else ()
        self.units = plan.in_units
        self.exact = plan.exact
        self.decimals = q.decimals or 0

    def _num(self, ref: str, var: str) -> str:
        """A lifted variable's value in SQL: its exact units, an exact int or a double."""
        if self.units:
            return ref + "u"
        return f"CAST({ref} AS {'DECIMAL(38,0)' if self.exact else 'DOUBLE'})"

    def expressions(self, ref: Mapping[str, str], weight: str) -> list[str]:
        """``c`` (and ``s{i}``, ``q{i}_{j}``): the aggregates over join rows of weight ``weight``."""
        w = weight if self.exact else f"CAST({weight} AS DOUBLE)"
        if self.ring == "count":
            return [f"SUM({weight}) AS c"]
        if self.ring == "sum":
            factors = " * ".join(self._num(ref[v], v) for v in self.plan.query.sum)
            return [f"SUM({w} * {factors}) AS c"]
        x = [self._num(ref[v], v) for v in self.variables]
        out = [f"SUM({weight}) AS c"]
        out += [f"SUM({w} * {x[i]}) AS s{i}" for i in range(len(x))]
        out += [f"SUM({w} * {x[i]} * {x[j]}) AS q{i}_{j}" for i in range(len(x)) for j in range(i, len(x))]
        return out

    def value(self, row: Any) -> Any:
        """One result row's payload in the ring's result form (its ``to_json``, fivm-rings.md)."""
        if self.ring != "covariance":
            return self._scalar(row["c"])
        n = len(self.variables)
        sums = [self._component(row[f"s{i}"], 1) for i in range(n)]
        quad = [[0.0] * n for _ in range(n)]
        for i in range(n):
            for j in range(i, n):
                quad[i][j] = quad[j][i] = self._component(row[f"q{i}_{j}"], 2)
        return {"count": int(row["c"]), "variables": list(self.variables), "sum": sums, "sumprod": quad}

    def zero(self) -> Any:
        """The result over an empty join."""
        if self.ring != "covariance":
            return self._scalar(0)
        n = len(self.variables)
        return {"count": 0, "variables": list(self.variables), "sum": [0.0] * n, "sumprod": [[0.0] * n] * n}

    def _scalar(self, v: Any) -> Any:
        if self.units:
            return from_units(int(v), self.decimals * len(self.plan.query.sum))
        if self.exact:
            n = int(v)
            return n if INT64[0] <= n <= INT64[1] else str(n)
        return float(v)

    def _component(self, v: Any, degree: int) -> float:
        if self.units:
            return from_units(int(v), self.decimals * degree)
        return float(v)


def _join_sql(
    plan: Plan, views: Mapping[str, str], columns: Mapping[str, Sequence[str]]
) -> tuple[str, dict[str, str], str]:
    """FROM clause of the flat natural join, each variable's column reference (``REF`` its value,
    ``REFu`` its exact units with ``decimals``), the weight expression."""
    ref: dict[str, str] = {}
    parts: list[str] = []
    weights: list[str] = []
    for i, occ in enumerate(plan.query.occurrences):
        names = [f"a{j} AS {plan.column[v]}" for j, v in enumerate(occ.columns)]
        names += [
            f"u{j} AS {plan.column[v]}u" for j, v in enumerate(occ.columns) if f"u{j}" in columns[occ.base]
        ]
        cols = ", ".join(names)
        sub = f"(SELECT k, {cols}, m FROM {views[occ.base]}) r{i}"
        on = [f"r{i}.k = r0.k"] + [f"r{i}.{plan.column[v]} = {ref[v]}" for v in occ.columns if v in ref]
        parts.append(sub if i == 0 else f"JOIN {sub} ON {' AND '.join(on)}")
        for v in occ.columns:
            ref.setdefault(v, f"r{i}.{plan.column[v]}")
        weights.append(f"CAST(r{i}.m AS DECIMAL(38,0))")
    return "FROM " + "\n".join(parts), ref, " * ".join(weights)


def recompute_query(
    spark: SparkSession, bags: Mapping[str, DataFrame], plan: Plan, model_spec: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Every partition key's result (``comparable`` form: no ``stats``) with Spark SQL."""
    q = plan.query
    agg = Aggregates(plan)
    tag = uuid.uuid4().hex[:8]
    views, columns = {}, {}
    for name, df in canonical_relations(plan, bags).items():
        views[name] = f"fivm_{tag}_{name}"
        columns[name] = df.columns
        df.createOrReplaceTempView(views[name])
    source, ref, weight = _join_sql(plan, views, columns)
    free = [ref[v] for v in q.group_by]
    select = ["r0.k AS k", *[f"{r} AS f{i}" for i, r in enumerate(free)], *agg.expressions(ref, weight)]
    sql = f"SELECT {', '.join(select)}\n{source}\nGROUP BY {', '.join(['r0.k', *free])}"
    try:
        rows = spark.sql(sql).collect()
    finally:
        for view in views.values():
            spark.catalog.dropTempView(view)
    per_key: dict[str, list[tuple[tuple[Any, ...], Any]]] = {}
    for row in rows:
        key = tuple(row[f"f{i}"] for i in range(len(free)))
        per_key.setdefault(row["k"], []).append((key, row))
    return {k: _result(agg, q.group_by, groups, model_spec) for k, groups in per_key.items()}


def _result(
    agg: Aggregates,
    free: Sequence[str],
    groups: list[tuple[tuple[Any, ...], Any]],
    model_spec: Mapping[str, Any] | None,
) -> dict[str, Any]:
    if free:
        kept = sorted((g for g in groups if not _all_zero(g[1])), key=lambda g: g[0])
        return {
            "groups": [{"key": dict(zip(free, k, strict=True)), "value": agg.value(row)} for k, row in kept]
        }
    [(_, row)] = groups
    value = agg.value(row)
    return shaped(agg, value, model_spec)


def shaped(agg: Aggregates, value: Any, model_spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """A result without groups in the service's form: covariance statistics (and the model refitted
    from them, docs/fivm/rings.md §7) or ``{"value": v}``."""
    if agg.ring != "covariance":
        return {"value": value}
    out = dict(value)
    if model_spec is not None:
        label = model_spec["label"]
        features = [f for f in agg.plan.query.features if f != label]
        out["model"] = model.fit_spec(value, model_spec, features)
    return out


def _all_zero(row: Any) -> bool:
    """A group whose every aggregate is zero has no payload (the engine drops zero payloads)."""
    return all(v == 0 for name, v in row.asDict().items() if name == "c" or name[0] in "sq")
