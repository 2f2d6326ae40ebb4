"""Spark side of the triangles service: BUILD(D₀) of IVM^ε computed with Spark, and the count
recomputed with Spark SQL for reconciliation (``batch_recompute``); docs/triangles/algorithm.md §5.3.

BUILD in Spark: tuples netted per key, |D| and N = 2|D|+1, the integer thresholds from the shared
exact function (§2.3), degrees and the strict heavy/light partition, the three views as joins and Q
by joins. The result is written in the engine's snapshot format; the engine only re-indexes it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivmstream.sdk.batch import KEY, MULT, BatchJobs
from ivmstream.services.triangles.batch_recompute import (
    comparable,
    count_graph,
    count_relations,
    empty,
    recompute,
)
from ivmstream.services.triangles.engine import DEFAULT_EPSILON, create_engine
from ivmstream.services.triangles.ivm_eps import parse_epsilons
from ivmstream.services.triangles.thresholds import thresholds

REL_NAMES = ("R", "S", "T")
NEXT = {"R": "S", "S": "T", "T": "R"}  # a view joins K's heavy part with the next relation's light part


def tuples(bags: Mapping[str, DataFrame], graph: bool) -> DataFrame:
    """Every stored tuple as (key, rel, x, y, m): relations as given, graph edges in both directions."""
    if graph:
        e = bags["edges"].where(F.col("src") != F.col("dst"))
        canon = (
            e.groupBy(KEY, F.least("src", "dst").alias("u"), F.greatest("src", "dst").alias("v"))
            .agg(F.sum(MULT).alias("m"))
            .where(F.col("m") != 0)
        )
        fwd = canon.select(KEY, F.lit("E").alias("rel"), F.col("u").alias("x"), F.col("v").alias("y"), "m")
        bwd = canon.select(KEY, F.lit("E").alias("rel"), F.col("v").alias("x"), F.col("u").alias("y"), "m")
        return fwd.unionByName(bwd)
    frames = []
    for name, (xc, yc) in zip(REL_NAMES, (("a", "b"), ("b", "c"), ("c", "a")), strict=True):
        frames.append(
            bags[name].select(
                KEY,
                F.lit(name).alias("rel"),
                F.col(xc).alias("x"),
                F.col(yc).alias("y"),
                F.col(MULT).alias("m"),
            )
        )
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def spark_build(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> dict[str, Any]:
    """Per key: N, thresholds, strict parts, views and Q of BUILD(D₀), all computed with Spark."""
    graph = options["mode"] == "graph"
    names = ("E",) if graph else REL_NAMES
    eps = dict(zip(names, parse_epsilons(options.get("epsilon") or DEFAULT_EPSILON, graph), strict=True))
    t = tuples(bags, graph).cache()
    sizes = {r[KEY]: r["d"] for r in t.groupBy(KEY).agg(F.count("*").alias("d")).collect()}
    theta_rows = []
    per_key: dict[str, dict[str, Any]] = {}
    for key, d in sizes.items():
        n = 2 * d + 1
        thr = {name: thresholds(n, eps[name]) for name in names}
        per_key[key] = {"N": n, "size": d, "thresholds": thr}
        theta_rows += [(key, name, thr[name].strict) for name in names]
    theta = spark.createDataFrame(theta_rows, f"{KEY} string, rel string, theta long")
    degrees = t.groupBy(KEY, "rel", "x").agg(F.count("*").alias("deg"))
    sided = (
        t.join(degrees, [KEY, "rel", "x"])
        .join(F.broadcast(theta), [KEY, "rel"])
        .withColumn("heavy", F.col("deg") >= F.col("theta"))
        .cache()
    )
    parts: dict[str, dict[str, dict[str, dict[Any, dict[Any, int]]]]] = defaultdict(
        lambda: {name: {"h": {}, "l": {}} for name in names}
    )
    for row in (
        sided.select(KEY, "rel", "heavy", "x", "y", "m").orderBy(KEY, "rel", "x", "y").toLocalIterator()
    ):
        part = parts[row[KEY]][row["rel"]]["h" if row["heavy"] else "l"]
        part.setdefault(row["x"], {})[row["y"]] = row["m"]
    # Views: V_K(x, z) = Σ_y K_h(x, y) · next(K)_l(y, z), nonzero entries only.
    views: dict[str, dict[str, dict[tuple[Any, Any], int]]] = defaultdict(dict)
    for name in names:
        nxt = "E" if graph else NEXT[name]
        heavy = sided.where((F.col("rel") == name) & F.col("heavy")).select(
            KEY, "x", F.col("y").alias("j"), F.col("m").alias("mh")
        )
        light = sided.where((F.col("rel") == nxt) & ~F.col("heavy")).select(
            KEY, F.col("x").alias("j"), F.col("y").alias("z"), F.col("m").alias("ml")
        )
        joined = (
            heavy.join(light, [KEY, "j"])
            .groupBy(KEY, "x", "z")
            .agg(F.sum(F.col("mh") * F.col("ml")).alias("v"))
        )
        for row in joined.where(F.col("v") != 0).toLocalIterator():
            views[row[KEY]].setdefault(name, {})[(row["x"], row["z"])] = row["v"]
    counts = count_graph(spark, bags["edges"]) if graph else count_relations(spark, bags)
    t.unpersist()
    sided.unpersist()
    for key, info in per_key.items():
        info["parts"] = parts[key]
        info["views"] = {name: views[key].get(name, {}) for name in names}
        info["q"] = counts.get(key, 0)
    return per_key


def _snapshot(info: Mapping[str, Any], options: Mapping[str, Any]) -> bytes:
    """The engine's snapshot format for a freshly built IVM^ε state (views are rebuilt on restore)."""
    graph = options["mode"] == "graph"
    engine = create_engine(options["mode"], "ivm-eps", options.get("epsilon") or DEFAULT_EPSILON)
    body = orjson.loads(engine.snapshot())  # the empty engine's layout: format, config, counters
    body["q"] = str(info["q"])
    body["counters"]["n"] = info["N"]
    body["relations"] = {
        ("edges" if graph else name): {
            side: [[x, [v for y, m in row.items() for v in (y, m)]] for x, row in rows.items()]
            for side, rows in sides.items()
        }
        for name, sides in info["parts"].items()
    }
    return orjson.dumps(body)


def build_state(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> Iterator[tuple[str, bytes]]:
    if options["strategy"] == "ivm-eps":
        for key, info in sorted(spark_build(spark, bags, options).items()):
            yield key, _snapshot(info, options)
        return
    # Baselines have no partition to compute: Spark nets the tuples, each engine runs its own BUILD.
    graph = options["mode"] == "graph"
    data: dict[str, Any] = defaultdict(lambda: [] if graph else {n: {} for n in REL_NAMES})
    for row in tuples(bags, graph).orderBy(KEY, "rel", "x", "y").toLocalIterator():
        if graph:
            if row["x"] < row["y"]:
                data[row[KEY]].append((row["x"], row["y"]))
        else:
            data[row[KEY]][row["rel"]][(row["x"], row["y"])] = row["m"]
    for key in sorted(data):
        engine = create_engine(
            options["mode"], options["strategy"], None, options.get("always_iterate_s", False)
        )
        engine.load(data[key])
        yield key, engine.snapshot()


JOBS = BatchJobs(build_state=build_state, recompute=recompute, comparable=comparable, empty=empty)
