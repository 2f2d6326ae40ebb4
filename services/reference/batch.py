"""Spark side of the reference service: state from a snapshot, and the result recomputed in SQL."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from ivmstream.sdk import relation_columns
from ivmstream.sdk.batch import KEY, MULT, BatchJobs

from .engine import BagEngine

_NUMERIC = frozenset(("int", "float", "number", "decimal"))


def build_state(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> Iterator[tuple[str, bytes]]:
    """Spark nets the snapshot into bags; each key's engine is assembled from its bag."""
    relations = relation_columns(options["relations"])
    per_key: dict[str, dict[str, dict[tuple, int]]] = defaultdict(lambda: {r: {} for r in relations})
    for name, df in bags.items():
        cols = list(relations[name])
        for row in df.select(KEY, *cols, MULT).toLocalIterator():
            per_key[row[KEY]][name][tuple(row[c] for c in cols)] = row[MULT]
    for key in sorted(per_key):
        engine = BagEngine.from_bags(relations, options["allow_negative"], per_key[key])
        yield key, engine.snapshot()


def recompute(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> dict[str, Any]:
    """count / distinct / per-column sums per key and relation, in Spark SQL over the net bags."""
    relations = relation_columns(options["relations"])
    out: dict[str, Any] = {}
    for name, df in bags.items():
        view = f"bag_{name}"
        df.createOrReplaceTempView(view)
        numeric = [c for c, t in relations[name].items() if t in _NUMERIC]
        sums = "".join(f", SUM(`{c}` * `{MULT}`) AS `sum_{c}`" for c in numeric)
        query = f"SELECT `{KEY}` AS k, SUM(`{MULT}`) AS cnt, COUNT(*) AS distinct_tuples{sums} FROM {view}"
        rows = spark.sql(f"{query} GROUP BY `{KEY}`").collect()
        for row in rows:
            out.setdefault(row["k"], {})[name] = {
                "count": row["cnt"],
                "distinct": row["distinct_tuples"],
                "sums": {c: row[f"sum_{c}"] for c in numeric},
            }
    results = {}
    for key, per_rel in out.items():
        full = {**empty(options)["relations"], **per_rel}
        results[key] = {"count": sum(r["count"] for r in full.values()), "relations": full}
    return results


def empty(options: Mapping[str, Any]) -> dict[str, Any]:
    """A key whose tuples were all deleted."""
    return {
        "count": 0,
        "relations": {
            name: {"count": 0, "distinct": 0, "sums": {c: 0 for c, t in cols.items() if t in _NUMERIC}}
            for name, cols in relation_columns(options["relations"]).items()
        },
    }


def comparable(result: Mapping[str, Any]) -> dict[str, Any]:
    """The fingerprint is the engine's own diagnostic; everything else is recomputed."""
    return {k: v for k, v in result.items() if k != "fingerprint"}


JOBS = BatchJobs(build_state=build_state, recompute=recompute, comparable=comparable, empty=empty)
