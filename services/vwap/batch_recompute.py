"""Every vwap query recomputed with Spark SQL from the net bags, independently of the engine.

The texts are ``ivmstream.services.vwap.sql``'s, rendered ``keyed``: one statement evaluates all partition
keys at once (every subquery correlated on ``__key``, the result grouped by it), so reconciling many
books costs one Spark job per query rather than one per book. The bags become temp views named
after the relations, multiplicities expanded into repeated rows (``sql``'s convention).

**Exactness assumption.** ``exact`` columns arrive as DECIMAL(38,18). Multiplying two of those makes
Spark round the product to 6 fractional digits (``spark.sql.decimalOperations.allowPrecisionLoss``),
so the views narrow them to DECIMAL(18,3): values with at most 15 integer and 3 fractional digits,
which covers the data we use (the DBToaster traces' integer prices and volumes, TPC-H money and
quantities with 2 decimals). With that width every product, sum and cross-multiplied comparison of
the texts keeps its exact scale (≤ 6) within 38 digits, so the results are exact. A value outside
DECIMAL(18,3) makes the job fail loudly (``raise_error``), never round silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

from ivmstream.sdk.batch import KEY, MULT
from ivmstream.services.vwap.exact import decimal_quotient, to_json
from ivmstream.services.vwap.sql import RELATIONS, query_params, render

NARROW = DecimalType(18, 3)  # see the module docstring
RESULT_NAME = {"vwap-paper": "vwap"}  # result key when it is not the query's name
SCALAR = ("vwap", "vwap-paper", "ex21", "psp", "sq1", "sq2", "nq1", "nq2")


def query_of(options: Mapping[str, Any]) -> str:
    query = options.get("query")
    if query not in RELATIONS:
        raise ValueError(f"unknown vwap query {query!r}; expected one of {', '.join(RELATIONS)}")
    return query


def narrow_exact(df: DataFrame, relation: str) -> list[Column]:
    """The bag's columns with exact decimals narrowed to ``NARROW``, failing on any value it cannot hold."""
    cols = []
    for field in df.schema.fields:
        c = field.name
        if c in (KEY, MULT) or not isinstance(field.dataType, DecimalType):
            cols.append(F.col(c))
            continue
        narrowed = F.col(c).cast(NARROW)
        cols.append(
            F.when(F.col(c).isNull() | (narrowed == F.col(c)), narrowed)
            .otherwise(
                F.raise_error(
                    F.concat(
                        F.lit(f"vwap: {relation}.{c} = "),
                        F.col(c).cast("string"),
                        F.lit(f" is not exact in DECIMAL({NARROW.precision},{NARROW.scale})"),
                    )
                )
            )
            .alias(c)
        )
    return cols


def expanded(df: DataFrame, relation: str) -> DataFrame:
    """A bag as the table the SQL reads: ``__key``, the relation's columns, one row per copy."""
    copies = F.explode(F.sequence(F.lit(1).cast("long"), F.col(MULT).cast("long"))).alias("__copy")
    return df.select(*narrow_exact(df, relation), copies).drop(MULT, "__copy")


def register_views(bags: Mapping[str, DataFrame], relations: Iterable[str]) -> None:
    """Each relation's table, materialized once: the texts read a table up to eight times (NQ2), and
    re-deriving it (log decoding, netting, expansion) for every reference would repeat all that work."""
    for name in relations:
        if name not in bags:
            raise ValueError(f"no bag for relation {name!r}")
        expanded(bags[name], name).localCheckpoint(eager=True).createOrReplaceTempView(name)


def _num(v: Any) -> Any:
    return to_json(v) if isinstance(v, Decimal) else v


def shape(query: str, rows: Iterable[Any]) -> dict[str, Any]:
    """Keyed result rows (first column ``__key``) in the engine's result format, per key."""
    out: dict[str, Any] = {}
    if query in SCALAR:
        name = RESULT_NAME.get(query, query)
        for r in rows:
            out[r[0]] = {name: _num(r[1])}
    elif query == "mst":
        for r in rows:
            out.setdefault(r[0], {"mst": {}})["mst"][str(r[1])] = _num(r[2])
    elif query == "q17":
        for r in rows:
            out[r[0]] = {"avg_yearly": decimal_quotient(r[1], 7), "sum_extendedprice": _num(r[1])}
    elif query == "q17a":
        for r in rows:
            out[r[0]] = {"sum_extendedprice": _num(r[1])}
    elif query == "q18":
        groups: dict[str, list[tuple[Any, ...]]] = {}
        for r in rows:
            groups.setdefault(r[0], []).append(tuple(r[1:]))
        for key, items in groups.items():
            # name, custkey, orderkey, orderdate, totalprice, sum: by orderkey, custkey, name, orderdate
            items.sort(key=lambda g: (g[2], g[1], g[0], g[3], g[4]))
            out[key] = {"q18": [[_num(v) for v in g] for g in items]}
    else:
        raise ValueError(f"unknown vwap query {query!r}")
    return out


def recompute(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> dict[str, Any]:
    """``{key: result}`` for every key with a non-empty result row; other keys' result is ``empty``."""
    query = query_of(options)
    register_views(bags, RELATIONS[query])
    text = render(query, query_params(query, options), keyed=True, dialect="spark")
    return shape(query, spark.sql(text).collect())


def empty(options: Mapping[str, Any]) -> dict[str, Any]:
    """The result of a key whose bags are empty (empty SUM = 0, no groups)."""
    query = query_of(options)
    if query == "mst":
        return {"mst": {}}
    if query == "q17":
        return {"avg_yearly": decimal_quotient(0, 7), "sum_extendedprice": 0}
    if query == "q17a":
        return {"sum_extendedprice": 0}
    if query == "q18":
        return {"q18": []}
    return {RESULT_NAME.get(query, query): 0}


def comparable(result: Mapping[str, Any]) -> dict[str, Any]:
    """Work counters and tree sizes are the engine's diagnostics, not part of the answer."""
    return {k: v for k, v in result.items() if k != "stats"}
