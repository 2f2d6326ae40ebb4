"""Spark side of the fivm service: engine state from a snapshot, and the result recomputed in SQL.

docs/fivm/algorithm.md §8. ``build_state`` evaluates the view tree bottom-up with Spark
(``batch_views``) and writes each partition key's materialized views, supports and meta entries in the
engine's snapshot format (§4); ``recompute`` evaluates the query as one flat SQL join
(``batch_sql``), independently of the view tree, for reconciliation.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import orjson
from pyspark.errors import ArithmeticException, PythonException
from pyspark.sql import DataFrame, SparkSession

from ivmstream.sdk.batch import BatchError, BatchJobs
from ivmstream.services.fivm import state as st
from ivmstream.services.fivm.batch_sql import RECOMPUTED_RINGS, Aggregates, recompute_query, shaped
from ivmstream.services.fivm.batch_views import (
    Plan,
    canonical_relations,
    collect_all,
    evaluate,
    tagged,
    view_rows,
)
from ivmstream.services.fivm.engine import SNAPSHOT_FORMAT, query_config
from ivmstream.services.fivm.query import RING_FACTORY, Query, parse_query
from ivmstream.services.fivm.rings import Ring, make_ring
from ivmstream.services.fivm.rings.cofactor import Cofactor, exact_array

BUILT_RINGS = ("count", "sum", "covariance")
BUILT_STRATEGIES = ("fivm", "fivm-one")
_PRESENT = "@present:"  # labels of the collected rows that are not view rows
_SUPPORT = "@base:"
Rows = list[tuple[tuple[Any, ...], list[Any]]]  # (view key, payload components) of one partition key


def _query(options: Mapping[str, Any]) -> Query:
    return parse_query(query_config(options))


def _overflow(exc: Exception) -> BatchError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return BatchError(f"fivm: an exact value exceeds Spark's 38-digit decimals ({first}); use replay instead")


# --- bootstrap ----------------------------------------------------------------------------------------


def _refuse_unbuilt(query: Query, job: str) -> None:
    """Queries the Spark jobs do not model are refused in one line instead of built or checked wrongly:
    weighted tuples (a tuple counts weight·multiplicity)."""
    if query.weights:
        raise BatchError(f"fivm {job} does not handle weighted tuples (weights); use replay")


def build_state(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> Iterator[tuple[str, bytes]]:
    """Each partition key's engine snapshot, built from the net bags with Spark (fivm.md §8.1)."""
    query = _query(options)
    _refuse_unbuilt(query, "bootstrap")
    if query.ring not in BUILT_RINGS or query.strategy not in BUILT_STRATEGIES:
        raise BatchError(
            f"bootstrap supports rings {', '.join(BUILT_RINGS)} for strategies "
            f"{', '.join(BUILT_STRATEGIES)}; use replay to build state for ring {query.ring} "
            f"with strategy {query.strategy}"
        )
    try:
        states = spark_build(spark, bags, query)
    except (ArithmeticException, PythonException) as exc:
        if isinstance(exc, PythonException) and "ArithmeticError" not in str(exc):
            raise
        raise _overflow(exc) from None
    yield from sorted(states.items())


def spark_build(spark: SparkSession, bags: Mapping[str, DataFrame], query: Query) -> dict[str, bytes]:
    """Views, supports and phase per partition key, encoded as ``FivmEngine.snapshot()`` encodes them.

    One Spark job computes every view of μ(τ, all relations) (a superset of μ(τ, U)), the supports
    and which relations each partition key has tuples of; the phase then picks each key's views."""
    plan = Plan.of(query)
    ring = make_ring(
        RING_FACTORY.get(query.ring, query.ring), plan.tree.lifted, **query.ring_factory_options()
    )
    base = canonical_relations(plan, bags)
    needed = plan.targets(loading=True)
    frames = evaluate(plan, base, needed)
    parts, read_view = view_rows(plan, frames, sorted(needed))
    for name, df in base.items():
        parts.append(tagged(df.select("k").distinct(), _PRESENT + name, [], [], []))
    for name in plan.supports():
        cols = [c for c in base[name].columns if c.startswith("a")]  # the tuple (not its units)
        parts.append(tagged(base[name], _SUPPORT + name, cols, ["m"], []))
    views: dict[str, dict[str, Rows]] = {name: {} for name in needed}
    supports: dict[str, dict[str, Rows]] = {name: {} for name in plan.supports()}
    present: dict[str, set[str]] = {name: set() for name in base}
    try:
        rows = collect_all(parts)
    finally:
        for df in frames.values():
            df.unpersist()
    for row in rows:
        label, key = row["label"], row["k"]
        if label.startswith(_PRESENT):
            present[label[len(_PRESENT) :]].add(key)
        elif label.startswith(_SUPPORT):
            t = tuple(orjson.loads(row["key"]).values())
            supports[label[len(_SUPPORT) :]].setdefault(key, []).append((t, [row["xs"][0]]))
        else:
            views[label].setdefault(key, []).append(read_view(row))
    every_key = set().union(*present.values())
    static = {r.name for r in query.relations} - set(query.updatable)
    # The engine loads static relations until the first update to U arrives (fivm.md §2.7).
    sealed = set().union(*(present[r] for r in query.updatable)) if static else every_key
    out = {}
    for key in every_key:
        phase = "sealed" if key in sealed else "loading"
        own = {name: views[name].get(key, []) for name in sorted(plan.targets(phase == "loading"))}
        support = {name: [(t, int(m[0])) for t, m in per.get(key, [])] for name, per in supports.items()}
        out[key] = snapshot(plan, ring, own, support, phase)
    return out


def payload(plan: Plan, block: list[int], components: list[Any]) -> Any:
    """A view row's components as the ring's payload object (for the ring's own byte encoding)."""
    if not plan.cofactor:
        return int(components[0]) if plan.exact else float(components[0])
    k = len(block)
    count, sums, quad = int(components[0]), components[1 : 1 + k], components[1 + k :]
    lo = block[0] if block else 0
    if plan.exact:
        return Cofactor(lo, count, exact_array([int(v) for v in sums]), exact_array([int(v) for v in quad]))
    return Cofactor(lo, count, np.asarray(sums, dtype=np.float64), np.asarray(quad, dtype=np.float64))


def snapshot(
    plan: Plan,
    ring: Ring[Any],
    views: Mapping[str, Rows],
    supports: Mapping[str, list[tuple[tuple[Any, ...], int]]],
    phase: str,
) -> bytes:
    """The engine's snapshot (fivm.md §4.1): view entries numbered in key order (any creation order
    is a valid one; a view's next number is its size), supports, and the meta entries."""
    nodes = plan.tree.by_name()
    maps: dict[str, list[tuple[bytes, bytes]]] = {}
    seq: dict[str, int] = {}
    for name, rows in views.items():
        block = plan.block(nodes[name])
        encoded = sorted((st.encode_key(k), ring.encode(payload(plan, block, comps))) for k, comps in rows)
        maps[name] = [(k, st.encode_view_value(i, v)) for i, (k, v) in enumerate(encoded)]
        seq[name] = len(encoded)
    for rel, tuples in supports.items():
        maps[st.support_map(rel)] = [(st.encode_key(t), st.encode_int(m)) for t, m in tuples]
    maps[st.META] = [
        (b"config", st.encode_json(plan.query.raw)),
        (b"phase", st.encode_json(phase)),
        (b"seq", st.encode_json(seq)),
    ]
    body = {
        "format": SNAPSHOT_FORMAT,
        "maps": {
            name: [[k.decode(), base64.b64encode(v).decode()] for k, v in sorted(rows)]
            for name, rows in sorted(maps.items())
            if rows
        },
    }
    return orjson.dumps(body)


# --- reconcile ----------------------------------------------------------------------------------------


def _recompute_plan(options: Mapping[str, Any]) -> Plan:
    query = _query(options)
    _refuse_unbuilt(query, "reconcile")
    if query.ring not in RECOMPUTED_RINGS:
        raise BatchError(
            f"reconcile recomputes rings {', '.join(RECOMPUTED_RINGS)} in Spark SQL, not {query.ring}"
        )
    return Plan.of(query)


def recompute(
    spark: SparkSession, bags: Mapping[str, DataFrame], options: Mapping[str, Any]
) -> dict[str, Any]:
    """Every key's result by one flat SQL join, in the published form without ``stats`` (fivm.md §8.2)."""
    plan = _recompute_plan(options)
    try:
        return recompute_query(spark, bags, plan, options["model"])
    except (ArithmeticException, PythonException) as exc:
        if isinstance(exc, PythonException) and "ArithmeticError" not in str(exc):
            raise
        raise _overflow(exc) from None


def comparable(result: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's diagnostics (``stats``) are not recomputed; everything else is."""
    return {k: v for k, v in result.items() if k != "stats"}


def empty(options: Mapping[str, Any]) -> dict[str, Any]:
    """The result of a key whose join is empty."""
    plan = _recompute_plan(options)
    if plan.query.group_by:
        return {"groups": []}
    agg = Aggregates(plan)
    return shaped(agg, agg.zero(), options["model"])


JOBS = BatchJobs(build_state=build_state, recompute=recompute, comparable=comparable, empty=empty)
