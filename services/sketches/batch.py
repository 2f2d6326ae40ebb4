"""Spark side of the sketches service: bootstrap and reconcile (docs/sketches/algorithm.md §8).

* ``recompute``: per key, the sketch captured with Spark SQL over the snapshot (the query rewritten to
  return the fragment ids of its provenance, §8.1), the query's answer over all the data, and the rows a
  scan of the sketched fragments reads. Reconciling against the published results therefore compares
  the maintained sketch with a recapture fragment by fragment, and checks safety: the engine's answer
  over the sketched fragments must equal the query over everything.
* ``build_state``: each key's table store from the net bags; the engine bootstraps its operator state
  from it, and the sketch it derives must equal the Spark SQL capture (else the bootstrap fails).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import sqlglot
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivmstream.sdk.batch import KEY, MULT, BatchError, BatchJobs
from ivmstream.services.sketches.capture_sql import FRAG, answer_sql, branches, capture_sql, fragment_sql
from ivmstream.services.sketches.compiler import Compiled, compile_options
from ivmstream.services.sketches.engine import SketchEngine
from ivmstream.services.sketches.values import exact, row_key, to_json


def _register(spark: SparkSession, bags: Mapping[str, DataFrame], compiled: Compiled, key: str) -> None:
    """Per table two views of this key's bag, one row per copy: ``<t>`` and ``__p_<t>`` (plus ``__frag``)."""
    specs = {s.table: s for s in compiled.specs}
    for name, table in compiled.tables.items():
        df = bags[name].where(F.col(KEY) == key)
        df = df.select(
            *[F.col(e).alias(s) for e, s in zip(table.event_columns, table.sql_columns, strict=True)],
            F.explode(F.array_repeat(F.lit(1), F.col(MULT).cast("int"))).alias("__copy"),
        ).drop("__copy")
        df.createOrReplaceTempView(name)
        spec = specs.get(name)
        frag = fragment_sql(spec.column, spec) if spec else "-1"
        df.selectExpr("*", f"{frag} AS {FRAG}").createOrReplaceTempView(f"__p_{name}")


def capture(spark: SparkSession, compiled: Compiled, sql: str) -> int:
    """The sketch of ``sql`` over the registered views, as global fragment bits."""
    columns = {name: table.sql_columns for name, table in compiled.tables.items()}
    sketch = 0
    for b in branches(sqlglot.parse_one(sql)):  # type: ignore[arg-type]
        for row in spark.sql(capture_sql(b, columns, "spark")).collect():
            for v in row:
                if v is not None and v >= 0:
                    sketch |= 1 << int(v)
    return sketch


def _keys(bags: Mapping[str, DataFrame]) -> list[str]:
    keys: set[str] = set()
    for df in bags.values():
        keys |= {r[KEY] for r in df.select(KEY).distinct().collect()}
    return sorted(keys)


def _rows_scanned(spark: SparkSession, compiled: Compiled, sketch: int | None) -> int:
    total = 0
    specs = {s.table: s for s in compiled.specs}
    for name in compiled.tables:
        spec = specs.get(name)
        rows = spark.sql(f"SELECT {FRAG} AS f, COUNT(*) AS n FROM __p_{name} GROUP BY {FRAG}").collect()
        for r in rows:
            if sketch is None or spec is None or sketch >> int(r["f"]) & 1:
                total += int(r["n"])
    return total


def _fragment_lists(compiled: Compiled, sketch: int) -> dict[str, list[int]]:
    return {s.table: [f for f in range(s.fragments) if sketch >> (s.offset + f) & 1] for s in compiled.specs}


def number(v: Any) -> Any:
    """Answers compare as numbers rounded to 10 significant digits (Spark's decimal scales differ)."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, str):
        try:
            return float(f"{float(v):.10g}")
        except ValueError:
            return v
    return float(f"{float(v):.10g}")


def comparable(result: Mapping[str, Any]) -> dict[str, Any]:
    """What reconciliation compares: sketch, fragments, answer (numbers normalised), rows scanned."""
    return {
        "sketch": result["sketch"],
        "fragments": result["fragments"],
        "answer": [[number(v) for v in row] for row in result["answer"]],
        "rows_scanned": result["rows_scanned"],
        "rows_total": result["rows_total"],
    }


def recompute(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> dict[str, Any]:
    compiled = compile_options(options)
    out: dict[str, Any] = {}
    columns = {name: table.sql_columns for name, table in compiled.tables.items()}
    spark_sql = answer_sql(options["query"], columns, "spark")
    for key in _keys(bags):
        _register(spark, bags, compiled, key)
        sketch = capture(spark, compiled, options["query"])
        rows = [tuple(exact(v) for v in r) for r in spark.sql(spark_sql).collect()]
        if not compiled.ordered:
            rows.sort(key=row_key)
        scan = sketch if compiled.safety is not None else None
        out[key] = comparable(
            {
                "sketch": _fragment_lists(compiled, sketch),
                "fragments": {s.table: s.fragments for s in compiled.specs},
                "answer": [[to_json(v) for v in r] for r in rows],
                "rows_scanned": _rows_scanned(spark, compiled, scan),
                "rows_total": _rows_scanned(spark, compiled, None),
            }
        )
    return out


def build_state(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> Iterator[tuple[str, bytes]]:
    compiled = compile_options(options)
    for key in _keys(bags):
        engine = SketchEngine(options)
        batch: dict[str, dict[tuple[Any, ...], int]] = {}
        for name, table in compiled.tables.items():
            df = bags[name].where(F.col(KEY) == key).select(*table.event_columns, MULT)
            batch[name] = {
                tuple(exact(r[c]) for c in table.event_columns): int(r[MULT]) for r in df.collect()
            }
        engine.maintain(batch)
        _register(spark, bags, compiled, key)
        captured = capture(spark, compiled, options["query"])
        if options["strategy"] != "nosketch" and engine.sketch() != captured:
            raise BatchError(
                f"key {key!r}: the engine's bootstrapped sketch {_fragment_lists(compiled, engine.sketch())} "
                f"differs from the Spark SQL capture {_fragment_lists(compiled, captured)}"
            )
        yield key, engine.snapshot()


def empty(options: Mapping[str, Any]) -> dict[str, Any]:
    """A key whose rows were all deleted: the engine's result over the empty database."""
    return comparable(SketchEngine(options).result())


JOBS = BatchJobs(build_state=build_state, recompute=recompute, comparable=comparable, empty=empty)
