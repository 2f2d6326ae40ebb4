"""Triangle counts recomputed with Spark SQL joins over the net bags (independent of the engine)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from ivmstream.sdk.batch import KEY, MULT


def count_relations(spark: SparkSession, bags: Mapping[str, DataFrame]) -> dict[str, int]:
    """Q = Σ R(a,b)·S(b,c)·T(c,a) per key, with multiplicities (Z-relations)."""
    for name in ("R", "S", "T"):
        bags[name].createOrReplaceTempView(f"tri_{name}")
    rows = spark.sql(
        f"""
        SELECT r.`{KEY}` AS k, SUM(CAST(r.`{MULT}` AS DECIMAL(38,0)) * s.`{MULT}` * t.`{MULT}`) AS q
        FROM tri_R r
        JOIN tri_S s ON s.`{KEY}` = r.`{KEY}` AND s.b = r.b
        JOIN tri_T t ON t.`{KEY}` = r.`{KEY}` AND t.c = s.c AND t.a = r.a
        GROUP BY r.`{KEY}`
        """
    ).collect()
    return {row["k"]: int(row["q"]) for row in rows}


def count_graph(spark: SparkSession, edges: DataFrame) -> dict[str, int]:
    """Ordered cycles of the symmetric edge relation per key: 6 * sum over a<b<c of E(a,b)E(b,c)E(a,c).

    Edges are undirected, so (u, v) and (v, u) name one edge: net them on the canonical pair first."""
    edges.createOrReplaceTempView("tri_E_raw")
    spark.sql(
        f"""
        SELECT `{KEY}` AS k, LEAST(src, dst) AS u, GREATEST(src, dst) AS v, SUM(`{MULT}`) AS m
        FROM tri_E_raw WHERE src <> dst
        GROUP BY `{KEY}`, LEAST(src, dst), GREATEST(src, dst) HAVING SUM(`{MULT}`) <> 0
        """
    ).createOrReplaceTempView("tri_E")
    rows = spark.sql(
        """
        SELECT e1.k AS k, SUM(CAST(e1.m AS DECIMAL(38,0)) * e2.m * e3.m) * 6 AS q
        FROM tri_E e1
        JOIN tri_E e2 ON e2.k = e1.k AND e2.u = e1.v
        JOIN tri_E e3 ON e3.k = e1.k AND e3.u = e1.u AND e3.v = e2.v
        GROUP BY e1.k
        """
    ).collect()
    return {row["k"]: int(row["q"]) for row in rows}


def recompute(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> dict[str, Any]:
    if options["mode"] == "graph":
        counts = count_graph(spark, bags["edges"])
        return {k: {"count": q, "triangles": q // 6} for k, q in counts.items()}
    return {k: {"count": q} for k, q in count_relations(spark, bags).items()}


def empty(options: Mapping[str, Any]) -> dict[str, Any]:
    return {"count": 0, "triangles": 0} if options["mode"] == "graph" else {"count": 0}


def comparable(result: Mapping[str, Any]) -> dict[str, Any]:
    """Work counters, sizes and thresholds are the engine's diagnostics, not part of the answer."""
    return {k: v for k, v in result.items() if k != "stats"}
