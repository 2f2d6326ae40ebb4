"""Spark side of the firstorder service: engine states from a snapshot's bags, and the query recomputed
in Spark SQL (a join of the bags, the predicate and the aggregates translated from the expression
language into SQL), independently of the engine's delta queries (docs/firstorder/index.md)."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
from pyspark.sql import DataFrame, SparkSession

from ivmstream.sdk import UpdateEvent, relation_columns
from ivmstream.sdk.batch import KEY, MULT, BatchJobs

from .engine import make_engine
from .expressions import parse

_COMPARE = {ast.Eq: "=", ast.NotEq: "<>", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}


def build_state(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> Iterator[tuple[str, bytes]]:
    """Each key's engine after inserting its bags' tuples with their multiplicities."""
    relations = relation_columns(options["relations"])
    per_key: dict[str, list[UpdateEvent]] = defaultdict(list)
    for name, df in bags.items():
        cols = list(relations[name])
        for row in df.select(KEY, *cols, MULT).toLocalIterator():
            per_key[row[KEY]].append(UpdateEvent(name, {c: row[c] for c in cols}, row[MULT]))
    for key in sorted(per_key):
        engine = make_engine(options)
        refused = engine.apply(per_key[key])
        if refused:
            raise ValueError(f"cannot bootstrap key {key!r}: {refused[0].detail}")
        yield key, engine.snapshot()


class _Sql:
    """An expression of the service's language as Spark SQL over the aliases ``r0, r1, ...``."""

    def __init__(self, owner: Mapping[str, str]) -> None:
        self.owner = owner  # variable -> the alias whose column it is read from

    def __call__(self, node: ast.AST) -> str:
        if isinstance(node, ast.Constant):
            if node.value is None:
                return "NULL"
            if isinstance(node.value, str):
                return "'" + node.value.replace("'", "''") + "'"
            return repr(node.value)
        if isinstance(node, ast.Name):
            return f"{self.owner[node.id]}.`{node.id}`"
        if isinstance(node, ast.BoolOp):
            op = " AND " if isinstance(node.op, ast.And) else " OR "
            return "(" + op.join(self(v) for v in node.values) + ")"
        if isinstance(node, ast.UnaryOp):
            return (
                f"(NOT {self(node.operand)})" if isinstance(node.op, ast.Not) else f"(-{self(node.operand)})"
            )
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Div):
                return f"({self(node.left)} / NULLIF({self(node.right)}, 0))"
            return f"({self(node.left)} {_ARITH[type(node.op)]} {self(node.right)})"
        if isinstance(node, ast.Compare):
            if isinstance(node.ops[0], ast.In | ast.NotIn):
                values = ", ".join(self(e) for e in node.comparators[0].elts)  # type: ignore[attr-defined]
                neg = "NOT " if isinstance(node.ops[0], ast.NotIn) else ""
                return f"({self(node.left)} {neg}IN ({values}))"
            terms = [node.left, *node.comparators]
            parts = [
                f"{self(a)} {_COMPARE[type(op)]} {self(b)}"
                for a, op, b in zip(terms, node.ops, terms[1:], strict=False)
            ]
            return "(" + " AND ".join(parts) + ")"
        if isinstance(node, ast.IfExp):
            return f"(CASE WHEN {self(node.test)} THEN {self(node.body)} ELSE {self(node.orelse)} END)"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            fn = "LEAST" if node.func.id == "min" else "GREATEST"
            return f"{fn}({', '.join(self(a) for a in node.args)})"
        raise ValueError(f"{ast.unparse(node)!r} has no SQL form")  # the options' validation refuses it


def recompute(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> dict[str, Any]:
    """Per key: the groups of the join of the bags where the predicate holds, with COUNT and the SUMs."""
    relations = relation_columns(options["relations"])
    aliases = {name: f"r{i}" for i, name in enumerate(relations)}
    owner: dict[str, str] = {}
    joins = []
    for name, cols in relations.items():
        bags[name].createOrReplaceTempView(f"fo_bag_{aliases[name]}")
        on = [f"{aliases[name]}.`{KEY}` = r0.`{KEY}`"] if aliases[name] != "r0" else []
        on += [f"{aliases[name]}.`{c}` = {owner[c]}.`{c}`" for c in cols if c in owner]
        for c in cols:
            owner.setdefault(c, aliases[name])
        source = f"fo_bag_{aliases[name]} {aliases[name]}"
        joins.append(source if not on else f"JOIN {source} ON {' AND '.join(on)}")
    sql = _Sql(owner)
    mult = " * ".join(f"{a}.`{MULT}`" for a in aliases.values())
    free = list(options["free"] or [])
    sums = "".join(f", SUM({mult} * {sql(parse(e))}) AS `s_{n}`" for n, e in options["aggregates"].items())
    keys = "".join(f", {owner[v]}.`{v}` AS `g_{v}`" for v in free)
    where = f" WHERE {sql(parse(options['predicate']))}" if options["predicate"] else ""
    group = ", ".join([f"r0.`{KEY}`", *(f"{owner[v]}.`{v}`" for v in free)])
    query = (
        f"SELECT r0.`{KEY}` AS k{keys}, SUM({mult}) AS cnt{sums} FROM {' '.join(joins)}{where} "
        f"GROUP BY {group} HAVING SUM({mult}) <> 0"
    )
    out: dict[str, list[tuple[bytes, dict[str, Any]]]] = defaultdict(list)
    for row in spark.sql(query).collect():
        key = [row[f"g_{v}"] for v in free]
        group_result = {
            "key": dict(zip(free, key, strict=True)),
            "count": row["cnt"],
            "sums": {n: row[f"s_{n}"] if row[f"s_{n}"] is not None else 0 for n in options["aggregates"]},
        }
        out[row["k"]].append((orjson.dumps(key), group_result))
    return {k: {"groups": [g for _s, g in sorted(groups, key=lambda sg: sg[0])]} for k, groups in out.items()}


def empty(options: Mapping[str, Any]) -> dict[str, Any]:
    """A key whose join is empty."""
    return {"groups": []}


JOBS = BatchJobs(build_state=build_state, recompute=recompute, empty=empty)
