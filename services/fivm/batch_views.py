"""The view tree evaluated with Spark, bottom-up, for the bootstrap (docs/fivm/algorithm.md §8.1).

Every view of τ(ω, F) becomes a DataFrame keyed by the partition key and the view's keys, with one
column per payload component (``ivmstream.services.fivm.batch_payloads``): a leaf groups its relation by its
keys with the ring sum of ``multiplicity ⊗ lifts`` of its composed variables, an indicator leaf is the
distinct projection of the tuples present, and a variable's view joins its children on their shared
variables, multiplies their payloads (and the lift of its variable) and groups by its keys. Nothing
here calls the engine's maintenance code; the plan (variable order, view tree, μ) is the engine's.

Internal column names never clash with variables (which may differ only in case, or start with
``__``): the partition key is ``k``, variable i of the query is ``v{i}``, multiplicities are ``m``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ivmstream.sdk.batch import KEY, MULT
from ivmstream.services.fivm import batch_payloads as bp
from ivmstream.services.fivm.order import build_order
from ivmstream.services.fivm.query import Query, RelationDef
from ivmstream.services.fivm.viewtree import (
    INDICATOR,
    LEAF,
    ViewNode,
    ViewTree,
    build_view_tree,
    materialized,
)


@dataclass
class Plan:
    """What evaluating one query needs: its view tree, column names, lifts and payload layout."""

    query: Query
    tree: ViewTree
    column: dict[str, str]  # variable -> internal column name
    index: dict[str, int]  # lifted variable -> its index (view-tree preorder)
    cofactor: bool

    @classmethod
    def of(cls, query: Query) -> Plan:
        tree = build_view_tree(query, build_order(query))
        return cls(
            query,
            tree,
            {v: f"v{i}" for i, v in enumerate(query.variables)},
            {v: i for i, v in enumerate(tree.lifted)},
            query.ring == "covariance",
        )

    @property
    def in_units(self) -> bool:
        """Whether lifted values are exact ``decimals`` units (covariance, or sum over a float)."""
        q = self.query
        if q.decimals is None:
            return False
        return q.ring == "covariance" or q.ring_factory_options().get("domain") != "int"

    @property
    def exact(self) -> bool:
        """Whether payloads are exact integers (counts, int sums, ``decimals``) rather than doubles."""
        if self.query.ring == "covariance":
            return self.in_units
        return self.query.ring_factory_options().get("domain", "int") == "int" or self.in_units

    def block(self, node: ViewNode) -> list[int]:
        """The lifted indexes below ``node``: one contiguous preorder range (fivm.md §2.8)."""
        out: list[int] = []
        for n in node.walk():
            if n.lift and n.var is not None:
                out.append(self.index[n.var])
            out.extend(self.index[v] for v in n.composed_lifted)
        return sorted(out)

    def value(self, var: str, col: Column) -> Column:
        """The number a lifted variable contributes: the value, or its exact ``decimals`` units."""
        q = self.query
        if self.in_units and q.decimals is not None:
            return bp.units(col, q.var_types[var], q.decimals)
        return col.cast(bp.EXACT if self.exact else bp.FLOAT)

    def lift(self, var: str, x: Column) -> bp.Payload:
        """g_var of a value already converted by ``value`` (or read from a units column)."""
        if self.cofactor:
            return bp.covariance_lift(self.index[var], x)
        power = self.query.sum.count(var)
        p = x
        for _ in range(power - 1):
            p = p * x
        return bp.scalar(p)

    def one(self) -> Column:
        return F.lit(1).cast(bp.EXACT)

    def supports(self) -> list[str]:
        """Relations whose support the engine keeps: those with indicator leaves, or all in debug mode."""
        q = self.query
        with_indicators = {n.relation for n in self.tree.nodes() if n.kind == INDICATOR}
        return [
            r.name
            for r in q.relations
            if q.debug or any(o.name in with_indicators for o in q.occurrences_of(r.name))
        ]

    def targets(self, loading: bool) -> frozenset[str]:
        """μ(τ, U) of the phase: every relation is active while loading (fivm.md §2.7)."""
        q = self.query
        active = {r.name for r in q.relations} if loading else set(q.updatable)
        occurrences = {o.name for o in q.occurrences if o.base in active}
        return materialized(self.tree, occurrences, q.distributed)


def canonical_relations(plan: Plan, bags: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
    """Each relation as the engine stores it: ``k``, columns ``a0, a1, ...``, net ``m`` ≠ 0, and with
    ``decimals`` the exact units ``u{i}`` of every column some occurrence lifts.

    As the intake does: rows with NULL or non-finite values never join (they are dropped), ``-0.0`` is
    ``0.0`` (so tuples differing only there net together), ints in float columns are floats."""
    out = {}
    q = plan.query
    for rel in q.relations:
        cols: list[Column] = []
        ok: Column = F.lit(True)
        for i, (name, typ) in enumerate(zip(rel.columns, rel.types, strict=True)):
            c = F.col(name)
            ok = ok & c.isNotNull()
            if typ == "float":
                c = c.cast(bp.FLOAT)
                ok = ok & (F.abs(c) < F.lit(float("inf")))  # NaN compares above infinity in Spark
                c = c + F.lit(0.0)
            cols.append(c.alias(f"a{i}"))
        names = [f"a{i}" for i in range(len(rel.columns))]
        df = bags[rel.name].where(ok).select(F.col(KEY).alias("k"), *cols, F.col(MULT).alias("m"))
        netted = df.groupBy("k", *names).agg(F.sum("m").alias("m")).where(F.col("m") != 0)
        if plan.in_units and q.decimals is not None:
            lifted = {
                i for o in q.occurrences_of(rel.name) for i, v in enumerate(o.columns) if v in plan.index
            }
            for i in sorted(lifted):
                netted = netted.withColumn(f"u{i}", bp.units(F.col(f"a{i}"), rel.types[i], q.decimals))
        out[rel.name] = netted
    return out


def occurrence(plan: Plan, base: Mapping[str, DataFrame], occ: RelationDef) -> DataFrame:
    """An occurrence's tuples under its own variable names (an alias renames positionally), with the
    units of its lifted variables as ``v{i}u``."""
    df = base[occ.base]
    cols = [F.col(f"a{i}").alias(plan.column[v]) for i, v in enumerate(occ.columns)]
    cols += [
        F.col(f"u{i}").alias(plan.column[v] + "u") for i, v in enumerate(occ.columns) if f"u{i}" in df.columns
    ]
    return df.select("k", *cols, "m")


def _occurrence_def(plan: Plan, name: str | None) -> RelationDef:
    return next(o for o in plan.query.occurrences if o.name == name)


def _grouped(
    plan: Plan, df: DataFrame, keys: Iterable[str], payload: bp.Payload, block: list[int]
) -> DataFrame:
    """Σ payload grouped by ``k`` and ``keys`` (columns), zero payloads dropped."""
    key_cols = ["k", *keys]
    rows = df.select(*key_cols, *bp.columns(payload, block, plan.cofactor, plan.one()))
    summed = rows.groupBy(*key_cols).agg(*bp.ring_sum(block, plan.cofactor))
    return summed.where(bp.nonzero(block, plan.cofactor))


def evaluate(plan: Plan, base: Mapping[str, DataFrame], needed: frozenset[str]) -> dict[str, DataFrame]:
    """The DataFrame of every view in ``needed`` (and the views below them); one job computes them
    all, sharing the views below several others."""
    frames: dict[str, DataFrame] = {}

    def build(node: ViewNode) -> DataFrame:
        if node.name in frames:
            return frames[node.name]
        keys = [plan.column[v] for v in node.keys]
        block = plan.block(node)
        if node.kind == LEAF:
            df = occurrence(plan, base, _occurrence_def(plan, node.relation))
            factors = [bp.scalar(F.col("m").cast(bp.EXACT))]
            factors += [
                plan.lift(
                    v, F.col(plan.column[v] + "u") if plan.in_units else plan.value(v, F.col(plan.column[v]))
                )
                for v in node.composed_lifted
            ]
            out = _grouped(plan, df, keys, bp.product(factors), block)
        elif node.kind == INDICATOR:
            df = occurrence(plan, base, _occurrence_def(plan, node.relation))
            out = df.select("k", *keys).distinct().withColumn("c", plan.one())
        else:
            joined: DataFrame | None = None
            factors = []
            for i, child in enumerate(node.children):
                prefix = f"x{i}_"
                cdf = build(child)
                payload_cols = bp.names(plan.block(child), plan.cofactor)
                cdf = cdf.select(
                    *[c for c in cdf.columns if c not in payload_cols],
                    *[F.col(c).alias(prefix + c) for c in payload_cols],
                )
                factors.append(bp.read(plan.block(child), plan.cofactor, prefix))
                if joined is None:
                    joined = cdf
                else:
                    shared = [c for c in cdf.columns if c in joined.columns and not c.startswith("x")]
                    joined = joined.join(cdf, shared)
            assert joined is not None and node.var is not None
            if node.lift:
                factors.append(plan.lift(node.var, plan.value(node.var, F.col(plan.column[node.var]))))
            out = _grouped(plan, joined, keys, bp.product(factors), block)
        frames[node.name] = out.cache()
        return frames[node.name]

    nodes = plan.tree.by_name()
    for name in sorted(needed):
        build(nodes[name])
    return frames


def tagged(
    frame: DataFrame, label: str, keys: Sequence[str], exact: Sequence[str], inexact: Sequence[str]
) -> DataFrame:
    """Rows of any shape in one schema, so that one job collects them all: a label, the partition key,
    the row's key columns as JSON (doubles in their round-trip spelling), exact and float values."""
    return frame.select(
        F.lit(label).alias("label"),
        "k",
        (F.to_json(F.struct(*keys)) if keys else F.lit("{}")).alias("key"),
        F.array(*[F.col(c).cast(bp.EXACT) for c in exact]).cast("array<decimal(38,0)>").alias("xs"),
        F.array(*[F.col(c).cast(bp.FLOAT) for c in inexact]).cast("array<double>").alias("fs"),
    )


def view_rows(
    plan: Plan, frames: Mapping[str, DataFrame], names: Iterable[str]
) -> tuple[list[DataFrame], Any]:
    """``tagged`` rows of the named views, and how to read one back: (view key, components)."""
    nodes = plan.tree.by_name()
    parts = []
    layouts: dict[str, tuple[list[str], list[str], list[str]]] = {}
    for name in names:
        node = nodes[name]
        keys = [plan.column[v] for v in node.keys]
        comps = bp.names(plan.block(node), plan.cofactor)
        exact = [c for c in comps if plan.exact or (plan.cofactor and c == "c")]
        layouts[name] = (keys, comps, exact)
        parts.append(tagged(frames[name], name, keys, exact, [c for c in comps if c not in exact]))

    def read(row: Any) -> tuple[tuple[Any, ...], list[Any]]:
        keys, comps, exact = layouts[row["label"]]
        named = orjson.loads(row["key"])
        xs, fs = iter(row["xs"]), iter(row["fs"])
        return tuple(named[c] for c in keys), [next(xs) if c in exact else next(fs) for c in comps]

    return parts, read


def collect_all(parts: Sequence[DataFrame]) -> list[Any]:
    """Every ``tagged`` row of ``parts`` in one Spark job."""
    union = parts[0]
    for p in parts[1:]:
        union = union.unionByName(p)
    return union.collect()
