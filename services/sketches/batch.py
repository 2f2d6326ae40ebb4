"""Spark side of the sketches service: bootstrap and reconcile (docs/algorithms/sketches.md §8).

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
from sqlglot import exp

from services.sketches.engine import SketchEngine
from services.sketches.partition import RangeSpec
from services.sketches.query import Compiled, compile_options
from services.sketches.values import exact, row_key, to_json
from shared.spark.decode import KEY, MULT
from shared.spark.jobs import BatchError, BatchJobs

FRAG = "__frag"


def _fragment_sql(column: str, spec: RangeSpec) -> str:
    """The global fragment id of ``column`` as a balanced CASE tree (NULL: fragment 0, as the engine)."""

    def tree(lo: int, hi: int) -> str:  # fragments lo..hi, boundaries lo+1..hi separate them
        if lo == hi:
            return str(spec.offset + lo)
        mid = (lo + hi + 1) // 2
        b = spec.boundaries[mid - 1]
        lit = f"'{b}'" if isinstance(b, str) else repr(b)
        return f"CASE WHEN {column} < {lit} THEN {tree(lo, mid - 1)} ELSE {tree(mid, hi)} END"

    return f"CASE WHEN {column} IS NULL THEN {spec.offset} ELSE {tree(0, len(spec.boundaries))} END"


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
        frag = _fragment_sql(spec.column, spec) if spec else "-1"
        df.selectExpr("*", f"{frag} AS {FRAG}").createOrReplaceTempView(f"__p_{name}")


def _tables(select: exp.Select) -> list[exp.Table]:
    items = [select.args["from_"].this, *(j.this for j in select.args.get("joins") or [])]
    return [t for t in items if isinstance(t, exp.Table)]


def _with_provenance_tables(select: exp.Select) -> tuple[exp.Select, list[str]]:
    """The select reading ``__p_<t>`` views (aliased as before); the fragment columns of its aliases."""
    out = select.copy()
    frags = []
    for t in _tables(out):
        alias = t.alias or t.name
        frags.append(f"{alias}.{FRAG}")
        t.set("this", exp.to_identifier(f"__p_{t.name.lower()}"))
        t.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return out, frags


def _core(select: exp.Select, items: list[str]) -> exp.Select:
    """``SELECT items FROM <the query's tables> WHERE <its predicates>`` (no grouping, order, limit)."""
    core = select.copy()
    for key in ("group", "having", "order", "limit", "distinct"):
        core.set(key, None)
    core.set("expressions", [sqlglot.parse_one(i, read="spark") for i in items])
    return core


def _nulls_last(order: exp.Order | None) -> list[exp.Ordered]:
    out = []
    for o in order.expressions if order else []:
        o = o.copy()
        o.set("nulls_first", False)
        out.append(o)
    return out


def answer_sql(sql: str) -> str:
    """The query in Spark SQL, with the engine's total order (§2.9) spelled out: NULLS LAST on its own
    keys, then ties broken by the group values (aggregates), the selected values (DISTINCT) or every
    column (select-project-join)."""
    tree = sqlglot.parse_one(sql)
    if not isinstance(tree, exp.Select) or not (tree.args.get("order") or tree.args.get("limit")):
        return tree.sql(dialect="spark")
    select = tree.copy()
    group = list(select.args["group"].expressions) if select.args.get("group") else []
    aggregated = bool(group) or any(True for _ in select.find_all(exp.AggFunc))
    if aggregated:
        ties = [g.copy() for g in group]
    elif select.args.get("distinct"):
        ties = [(e.this if isinstance(e, exp.Alias) else e).copy() for e in select.expressions]
    else:
        ties = [
            sqlglot.parse_one(f"{t.alias or t.name}.{c}") for t in _tables(select) for c in _columns_of(t)
        ]
    order = [*_nulls_last(select.args.get("order")), *(exp.Ordered(this=t, nulls_first=True) for t in ties)]
    select.set("order", exp.Order(expressions=order))
    return select.sql(dialect="spark")


def _capture_sql(select: exp.Select) -> str:
    """A Spark SQL query whose rows are the fragment ids of the query's provenance (§8.1)."""
    select, frags = _with_provenance_tables(select)
    frag_items = [f"{f} AS __f{i}" for i, f in enumerate(frags)]
    group = list(select.args["group"].expressions) if select.args.get("group") else []
    aggregated = bool(group) or any(isinstance(x, exp.AggFunc) for x in select.find_all(exp.AggFunc))
    having, limit = select.args.get("having"), select.args.get("limit")
    if having is None and limit is None:
        return _core(select, frag_items).sql(dialect="spark")  # every row is provenance
    if aggregated:  # the result's groups, joined back to their input rows
        result = select.copy()
        extra = [exp.alias_(g.copy(), f"__g{i}") for i, g in enumerate(group)]
        result.set("expressions", [*result.expressions, *extra])
        ties = [exp.Ordered(this=exp.column(f"__g{i}"), nulls_first=True) for i in range(len(group))]
        if select.args.get("order") or limit is not None:
            result.set("order", exp.Order(expressions=[*_nulls_last(select.args.get("order")), *ties]))
        core = _core(select, frag_items)
        on = [f"({g.sql(dialect='spark')}) <=> __res.__g{i}" for i, g in enumerate(group)]
        keys = ", ".join(f"__g{i}" for i in range(len(group))) or "1 AS __one"
        groups = f"SELECT {keys} FROM ({result.sql(dialect='spark')}) AS __r"  # only the keys are visible
        core = core.join(f"({groups}) AS __res", join_type="cross")
        if on:
            core = core.where(" AND ".join(on))
        return core.sql(dialect="spark")
    items = list(select.expressions)
    if select.args.get("distinct"):  # DISTINCT ... ORDER BY ... LIMIT k: its rows, joined back
        result = select.copy()
        result.set("expressions", [exp.alias_(e.copy(), f"__d{i}") for i, e in enumerate(items)])
        names = {(e.alias or e.sql()).lower(): i for i, e in enumerate(items)}
        order = []
        for o in _nulls_last(select.args.get("order")):
            ref = o.this.sql().lower()
            if ref in names:
                o.set("this", exp.column(f"__d{names[ref]}"))
            order.append(o)
        ties = [exp.Ordered(this=exp.column(f"__d{i}"), nulls_first=True) for i in range(len(items))]
        result.set("order", exp.Order(expressions=[*order, *ties]))
        core = _core(select, frag_items)
        on = [
            f"({(e.this if isinstance(e, exp.Alias) else e).sql(dialect='spark')}) <=> __res.__d{i}"
            for i, e in enumerate(items)
        ]
        core = core.join(f"({result.sql(dialect='spark')}) AS __res", join_type="cross")
        return core.where(" AND ".join(on)).sql(dialect="spark")
    # top-k over select-project-join: the first k joined rows under the ORDER BY, ties by every column
    cols = [f"{t.alias or t.name}.{c}" for t in _tables(select) for c in _columns_of(t)]
    top = _core(select, [*frag_items, *cols])
    ties = [exp.Ordered(this=sqlglot.parse_one(c), nulls_first=True) for c in cols]
    top.set("order", exp.Order(expressions=[*_nulls_last(select.args.get("order")), *ties]))
    top.set("limit", limit.copy() if limit is not None else None)
    return f"SELECT {', '.join(f'__f{i}' for i in range(len(frags)))} FROM ({top.sql(dialect='spark')})"


_COLUMNS: dict[str, tuple[str, ...]] = {}


def _columns_of(t: exp.Table) -> tuple[str, ...]:
    return _COLUMNS[t.name.lower().removeprefix("__p_")]


def capture(spark: SparkSession, compiled: Compiled, sql: str) -> int:
    """The sketch of ``sql`` over the registered views, as global fragment bits."""
    for name, table in compiled.tables.items():
        _COLUMNS[name] = table.sql_columns
    branches = _branches(sqlglot.parse_one(sql))  # type: ignore[arg-type]
    sketch = 0
    for b in branches:
        for row in spark.sql(_capture_sql(b)).collect():
            for v in row:
                if v is not None and v >= 0:
                    sketch |= 1 << int(v)
    return sketch


def _branches(tree: exp.Expression) -> list[exp.Select]:
    if isinstance(tree, exp.Union):
        return _branches(tree.this) + _branches(tree.expression)
    assert isinstance(tree, exp.Select)
    return [tree]


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
    for name, table in compiled.tables.items():
        _COLUMNS[name] = table.sql_columns
    spark_sql = answer_sql(options["query"])
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
