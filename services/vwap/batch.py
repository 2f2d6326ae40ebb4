"""Spark side of the vwap service: engine states built from a snapshot (docs/vwap/algorithm.md §6.3),
and every query recomputed with Spark SQL for reconciliation (``batch_recompute``).

Bootstrap, per partition key (a book): the netted bag of each relation the query reads (the ledger
deletes are validated against) and, for the book sides ``bids``/``asks``, the per-price levels
W = Σ volume·mult, cnt = Σ mult, PV = Σ price·volume·mult, aggregated by Spark (prices ascending).
Both are written in the engine's snapshot format (``ivmstream.services.vwap.snapshot.encode``); the engine
builds its price-keyed indexes from the levels in one ascending pass and cross-checks them against
the bag. No engine or plan code runs here. Level arithmetic uses ``batch_recompute``'s exact
DECIMAL(18,3) narrowing (see its docstring for the assumption on the data).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivmstream.sdk.batch import KEY, MULT, BatchJobs
from ivmstream.services.vwap.batch_recompute import comparable, empty, narrow_exact, query_of, recompute
from ivmstream.services.vwap.snapshot import Level, encode

BOOK_SIDES = ("bids", "asks")


def bag_rows(bag: DataFrame, relation: str) -> dict[str, dict[tuple[Any, ...], int]]:
    """Per key: tuple (in the relation's column order) -> net multiplicity."""
    cols = [c for c in bag.columns if c not in (KEY, MULT)]
    out: dict[str, dict[tuple[Any, ...], int]] = {}
    for row in bag.select(KEY, *cols, MULT).toLocalIterator():
        m = row[-1]
        if m < 0:
            values = dict(zip(cols, row[1:-1], strict=True))
            raise ValueError(
                f"snapshot nets {relation} tuple {values} of key {row[0]!r} to multiplicity {m}: "
                "more deletes than inserts"
            )
        out.setdefault(row[0], {})[tuple(row[1:-1])] = m
    return out


def price_levels(bag: DataFrame, relation: str) -> dict[str, list[Level]]:
    """Per key: one book side's (price, W, cnt, PV) levels, prices ascending, aggregated by Spark."""
    narrowed = bag.select(*narrow_exact(bag, relation))
    mult = F.col(MULT)
    agg = narrowed.groupBy(KEY, "price").agg(
        F.sum(F.col("volume") * mult).alias("w"),
        F.sum(mult).alias("cnt"),
        F.sum(F.col("price") * F.col("volume") * mult).alias("pv"),
        F.min("volume").alias("min_volume"),
    )
    out: dict[str, list[Level]] = {}
    for row in agg.toLocalIterator():
        if not row["min_volume"] > 0:  # the engine refuses such tuples (they break RPAI monotonicity)
            raise ValueError(
                f"snapshot has a {relation} tuple of key {row[KEY]!r} at price {row['price']} with "
                f"volume {row['min_volume']}; order-book volumes must be > 0"
            )
        out.setdefault(row[KEY], []).append((row["price"], row["w"], row["cnt"], row["pv"]))
    for levels in out.values():
        levels.sort(key=lambda lv: lv[0])
    return out


def spark_build(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> dict[str, tuple[dict[str, dict[tuple[Any, ...], int]], dict[str, list[Level]] | None]]:
    """Per key: (bag per relation, levels per book side or None).

    The bag covers every relation the service accepts for the query (``bags``: the engine's ledger
    holds them all, e.g. asks under VWAP); levels cover the book sides among them."""
    query_of(options)
    relations = list(bags)
    rows = {rel: bag_rows(bags[rel], rel) for rel in relations}
    sides = [rel for rel in relations if rel in BOOK_SIDES]
    levels = {rel: price_levels(bags[rel], rel) for rel in sides}
    keys = sorted({k for per_key in rows.values() for k in per_key})
    return {
        key: (
            {rel: rows[rel].get(key, {}) for rel in relations},
            {rel: levels[rel].get(key, []) for rel in sides} if sides else None,
        )
        for key in keys
    }


def build_state(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> Iterator[tuple[str, bytes]]:
    query = query_of(options)
    strategy = options.get("strategy")
    if not isinstance(strategy, str):
        raise ValueError(f"vwap bootstrap needs the engine strategy option, got {strategy!r}")
    for key, (bag, levels) in spark_build(spark, bags, options).items():
        yield key, encode(query, strategy, bag, levels)


JOBS = BatchJobs(build_state=build_state, recompute=recompute, comparable=comparable, empty=empty)
