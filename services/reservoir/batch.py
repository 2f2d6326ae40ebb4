"""Spark side of the reservoir service (docs/reservoir/algorithm.md §8).

- ``build_state`` (bootstrap): per partition key, the base relations of the snapshot (tuples present
  with a positive net multiplicity) and the index's counts for every directed edge of the join tree,
  computed bottom-up with Spark; the engine is built from those relations on the driver, its counts
  checked against Spark's, and its sample drawn from the exact join with its seeded generator (§8.1).
- ``recompute`` (reconcile): the join recomputed with Spark SQL (θ as a filter), |Q_θ| per key, and the
  join itself kept as a DataFrame. ``comparable`` turns a published result into the claims that must
  hold: the sample size is min(k, |Q_θ|), |Q_θ| is equal where the engine claims it exactly, and every
  sampled row is a join row (checked by an anti-join when the two are compared) (§8.2).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DecimalType

from ivmstream.sdk.batch import KEY, MULT, BatchError, BatchJobs
from ivmstream.services.reservoir.engine import ReservoirEngine
from ivmstream.services.reservoir.predicate import compile_predicate
from ivmstream.services.reservoir.query import Query, parse_query

COUNT = DecimalType(38, 0)  # counts exceed 64 bits on skewed data; beyond 38 digits the job refuses
_R = "__r"  # a directed edge's count per key (rounded or exact)
_W = "__w"
# a column type -> its value from Spark's text of it (a number column is a double in Spark)
PARSE: dict[str, Any] = {
    "int": int,
    "float": float,
    "number": float,
    "str": str,
    "bool": lambda s: s == "true",
}
CHECKED = {"rsjoin": False, "redraw": False, "sjoin": True}  # strategy -> exact counts (others: |Q| only)


def nextpow2(c: Column) -> Column:
    """The smallest power of two >= c (0 for 0), exactly, in Spark SQL (no Python worker): e = ceil(log2 c)
    in floating point is off by at most one near powers of two and beyond 2^53, so the answer is the
    first of 2^(e-1), 2^e, 2^(e+1) that is >= c, compared as exact decimals (CASE evaluates only the
    branch it takes, so nothing beyond 38 digits is built)."""
    e = F.ceil(F.log2(c.cast("double")))

    def power(x: Column) -> Column:
        """2^x exactly, as a product of three powers below 2^63 (a double cast to a decimal is not exact)."""
        x = F.greatest(x, F.lit(0))
        a = F.least(x, F.lit(62))
        b = F.least(x - a, F.lit(62))
        return (_shift(a) * _shift(b) * _shift(x - a - b)).cast(COUNT)

    return (
        F.when(c == 0, F.lit(0).cast(COUNT))
        .when(power(e - 1) >= c, power(e - 1))
        .when(power(e) >= c, power(e))
        .otherwise(power(e + 1))
    )


def _shift(n: Column) -> Column:
    """2^n for 0 <= n <= 62: exact as a double, then as a long, then as a decimal."""
    return F.pow(F.lit(2.0), n).cast("long").cast(DecimalType(20, 0))


def alias_frames(bags: Mapping[str, DataFrame], query: Query) -> dict[str, DataFrame]:
    """Each alias as a set of tuples: its base relation's present tuples under the alias's columns."""
    out = {}
    for base, aliases in query.fanout.items():
        present = bags[base].where(F.col(MULT) > 0)
        for alias in aliases:
            cols = [F.col(b).alias(a) for b, a in zip(query.bases[base], query.relations[alias], strict=True)]
            out[alias] = present.select(KEY, *cols).distinct()
    return out


def natural_join(frames: Sequence[DataFrame]) -> DataFrame:
    joined = frames[0]
    for f in frames[1:]:
        shared = [c for c in f.columns if c in joined.columns]
        joined = joined.join(f, on=shared, how="inner")
    return joined


def node_frames(aliases: Mapping[str, DataFrame], query: Query) -> list[DataFrame]:
    """Each index node's tuples: an alias, or the join of a bag's aliases (§4)."""
    return [natural_join([aliases[a] for a in n.members]).select(KEY, *n.attrs) for n in query.nodes]


def directed_counts(
    nodes: Sequence[DataFrame], query: Query, exact: bool
) -> dict[tuple[int, int], DataFrame]:
    """For every directed edge e→p (and the super-root 0→-1): per key and join value, the sum over e's
    tuples of the product of its children's counts (rounded up to powers of two unless ``exact``)."""
    nbrs = query.neighbours()
    memo: dict[tuple[int, int], DataFrame] = {}

    def counts(e: int, p: int) -> DataFrame:
        if (e, p) in memo:
            return memo[(e, p)]
        attrs = query.nodes[e].attrs
        df = nodes[e].withColumn(_W, F.lit(1).cast(COUNT))
        for c in nbrs[e]:
            if c == p:
                continue
            child = counts(c, e)
            shared = [a for a in attrs if a in query.nodes[c].attrs]
            df = df.join(child.withColumnRenamed(_R, "__c"), on=[KEY, *shared], how="inner")
            df = df.withColumn(_W, (F.col(_W) * F.col("__c")).cast(COUNT)).drop("__c")
        key = [a for a in attrs if p >= 0 and a in query.nodes[p].attrs]
        summed = df.groupBy(KEY, *key).agg(F.sum(_W).cast(COUNT).alias("__cnt"))
        out = summed.withColumn(_R, F.col("__cnt") if exact else nextpow2(F.col("__cnt"))).cache()
        memo[(e, p)] = out
        return out

    for e in range(len(query.nodes)):
        for p in nbrs[e]:
            counts(e, p)
    counts(0, -1)
    return memo


def _all_counts(
    memo: Mapping[tuple[int, int], DataFrame], key_cols: Mapping[tuple[int, int], Sequence[str]]
) -> DataFrame:
    """Every directed edge's counts in one frame (one Spark job): the edge, its key values as a JSON
    array of strings (their types differ from edge to edge; ``PARSE`` reads them back), the count."""
    frames = []
    for (e, p), df in memo.items():
        cols = key_cols[(e, p)]
        values = F.to_json(F.array(*[F.col(c).cast("string") for c in cols])) if cols else F.lit("[]")
        frames.append(
            df.select(KEY, F.lit(e).alias("__e"), F.lit(p).alias("__p"), values.alias("__v"), "__cnt")
        )
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def build_state(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> Iterator[tuple[str, bytes]]:
    query = parse_query(options)
    aliases = alias_frames(bags, query)
    base_rows: dict[str, dict[str, list[tuple[Any, ...]]]] = defaultdict(lambda: {b: [] for b in query.bases})
    for base, cols in query.bases.items():
        for row in bags[base].where(F.col(MULT) > 0).select(KEY, *cols).distinct().collect():
            base_rows[row[KEY]][base].append(tuple(row[c] for c in cols))
    checked = CHECKED.get(options["strategy"])
    spark_counts: dict[str, dict[tuple[int, int], dict[tuple[Any, ...], int]]] = defaultdict(dict)
    if checked is not None:
        memo = directed_counts(node_frames(aliases, query), query, exact=checked)
        key_cols = {edge: [c for c in df.columns if c not in (KEY, "__cnt", _R)] for edge, df in memo.items()}
        for row in _all_counts(memo, key_cols).collect():
            if row["__cnt"] is None:
                raise BatchError("reservoir bootstrap: a count exceeds 38 digits; build the state by replay")
            edge = (row["__e"], row["__p"])
            value = tuple(
                PARSE[query.types[c]](v)
                for c, v in zip(key_cols[edge], orjson.loads(row["__v"]), strict=True)
            )
            spark_counts[row[KEY]].setdefault(edge, {})[value] = int(row["__cnt"])
    for key in sorted(base_rows):
        engine = ReservoirEngine.bootstrap(options, {b: sorted(ts) for b, ts in base_rows[key].items()})
        if checked is not None:
            _check_counts(engine, spark_counts.get(key, {}), key)
        yield key, engine.snapshot()


def _check_counts(
    engine: ReservoirEngine, want: Mapping[tuple[int, int], Mapping[tuple[Any, ...], int]], key: str
) -> None:
    """The engine's index counts are a function of the tuple set alone, so they must equal Spark's."""
    index = engine.index
    for (e, p), d_index in index.into.items():
        got = {v: c for v, c in index.counts(index.ds[d_index]).items() if c}
        if got != dict(want.get((e, p), {})):
            raise BatchError(
                f"reservoir bootstrap: key {key!r}: the index counts of {e}->{p} differ from Spark's"
            )


# --- reconcile ----------------------------------------------------------------------------------------


class Size:
    """|Q_θ| as claimed: a published null (not known exactly) agrees with any recomputed size."""

    def __init__(self, value: int | None) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Size):
            return NotImplemented
        return self.value is None or other.value is None or self.value == other.value

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "unknown" if self.value is None else str(self.value)


class Rows:
    """Either the recomputed join of one key (a DataFrame; None: empty) or a published sample; a sample
    equals a join when every sampled row is one of the join's rows."""

    def __init__(self, *, join: DataFrame | None = None, sample: list[dict[str, Any]] | None = None) -> None:
        self.join, self.sample = join, sample
        self.outside: int | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Rows):
            return NotImplemented
        joined, sampled = (self, other) if other.sample is not None else (other, self)
        rows = sampled.sample or []
        if not rows:
            return True
        if joined.join is None:
            sampled.outside = len(rows)
            return False
        df = joined.join
        cols = [c for c in df.columns if c != KEY]
        published = df.sparkSession.createDataFrame(
            [tuple(r[c] for c in cols) for r in rows], df.select(*cols).schema
        )
        sampled.outside = published.join(df.select(*cols), on=cols, how="left_anti").count()
        return sampled.outside == 0

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        if self.sample is None:
            return "the join's rows"
        extra = "" if self.outside is None else f", {self.outside} of them not join rows"
        return f"{len(self.sample)} sampled rows{extra}"


def _expected(options: Mapping[str, Any], size: int, join: DataFrame | None) -> dict[str, Any]:
    k = options["k"]
    drawn = (k if size else 0) if options["with_replacement"] else min(k, size)
    return {"k": k, "sample_size": drawn, "join_size": Size(size), "sample": Rows(join=join)}


def recompute(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> dict[str, Any]:
    query = parse_query(options)
    join = natural_join(list(alias_frames(bags, query).values())).select(KEY, *query.columns)
    if options["predicate"] is not None:
        theta = compile_predicate(options["predicate"], query.columns)
        keep = F.udf(lambda *row: theta(row), BooleanType())
        join = join.where(keep(*[F.col(c) for c in query.columns]))
    join = join.cache()
    sizes = {row[KEY]: row["n"] for row in join.groupBy(KEY).agg(F.count(F.lit(1)).alias("n")).collect()}
    return {key: _expected(options, n, join.where(F.col(KEY) == key)) for key, n in sizes.items()}


def comparable(result: Mapping[str, Any]) -> dict[str, Any]:
    """The claims a published result makes that the recomputation can check (see the module doc)."""
    return {
        "k": result["k"],
        "sample_size": len(result["sample"]),
        "join_size": Size(result["join_size"]),
        "sample": Rows(sample=list(result["sample"])),
    }


def empty(options: Mapping[str, Any]) -> dict[str, Any]:
    """A key whose join is empty."""
    return _expected(options, 0, None)


JOBS = BatchJobs(
    build_state=build_state, recompute=recompute, comparable=comparable, empty=empty, snapshot_as_set=True
)
