"""Every baseline strategy against DuckDB and against ``fivm`` after every batch.

docs/fivm/baselines.md §7. Random alpha-acyclic joins, Cartesian products, the triangle and
self-joins; COUNT and SUM over Z and R, covariance (checked aggregate by aggregate against DuckDB),
listings of conjunctive queries, and the matrix chain; batches with duplicates, deletes of present
and absent tuples (negative multiplicities) and insert/delete pairs over few join values.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.engine import FivmEngine
from tests.unit.fivm.fivm_oracle import (
    Database,
    acyclic_schema,
    brute_force,
    event_batches,
    occurrences,
    relation_columns,
    without_stats,
)

SCALAR = ["1-ivm", "1-ivm-ring", "dbt", "dbt-ring", "f-re", "dbt-re"]
COVARIANCE = [*SCALAR, "sql-opt"]
LISTING = ["list-keys", "list-payloads", "fact-payloads", "1-ivm-ring", "dbt-ring", "f-re", "dbt-re"]
WITH_ALIASES = ["f-re", "dbt-re"]

TRIANGLE = {
    "R": [{"A": "int"}, {"B": "int"}],
    "S": [{"B": "int"}, {"C": "int"}],
    "T": [{"C": "int"}, {"A": "int"}],
}


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    yield c
    c.close()


def close(a: Any, b: Any, tol: float = 1e-9) -> bool:
    """JSON values equal, floats up to a relative tolerance (ints and strings exactly)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, int | float)
            and isinstance(b, int | float)
            and math.isclose(a, b, rel_tol=tol, abs_tol=tol)
        )
    return bool(a == b)


def variable_types(config: dict[str, Any]) -> dict[str, str]:
    return {c: t for _, _, cols, types in occurrences(config) for c, t in zip(cols, types, strict=True)}


@st.composite
def aggregate(draw: st.DrawFn, config: dict[str, Any], rings: Sequence[str]) -> dict[str, Any]:
    """COUNT, SUM (one or two numeric variables) or covariance (1-3 numeric features, join variables
    included), with up to two group-by variables, or none."""
    types = variable_types(config)
    variables = sorted(types)
    free = draw(st.lists(st.sampled_from(variables), max_size=2, unique=True))
    numeric = [v for v in variables if types[v] != "str" and v not in free]
    ring = draw(st.sampled_from([r for r in rings if r == "count" or numeric]))
    out = dict(config, free=free, ring=ring)
    if ring == "sum":
        out["sum"] = draw(st.lists(st.sampled_from(numeric), min_size=1, max_size=2))
    if ring == "covariance":
        out["features"] = draw(st.lists(st.sampled_from(numeric), min_size=1, max_size=3, unique=True))
    return out


def covariance_oracle(config: dict[str, Any], variables: list[str], db: Database, con: Any) -> dict[str, Any]:
    """The covariance result from one DuckDB SUM per aggregate (count, Σ x_i, Σ x_i·x_j) over the
    lifted variables in the order the result reports them."""
    base = {k: v for k, v in config.items() if k not in ("ring", "features", "strategy")}
    free = list(config.get("free") or [])

    def query(sums: list[str]) -> dict[tuple[Any, ...], Any]:
        cfg = dict(base, ring="sum", sum=sums) if sums else dict(base, ring="count")
        res = brute_force(cfg, db, con)
        if not free:
            return {(): res["value"]}
        return {tuple(g["key"][v] for v in free): g["value"] for g in res["groups"]}

    m = len(variables)
    count = query([])
    sums = [query([v]) for v in variables]
    prods = [[query([variables[i], variables[j]]) for j in range(m)] for i in range(m)]
    keys = set(count) | {k for s in sums for k in s} | {k for row in prods for p in row for k in p}

    def payload(k: tuple[Any, ...]) -> dict[str, Any]:
        return {
            "count": int(count.get(k, 0)),
            "variables": variables,
            "sum": [float(s.get(k, 0)) for s in sums],
            "sumprod": [[float(p.get(k, 0)) for p in row] for row in prods],
        }

    if not free:
        return {"value": payload(())}
    groups = [
        {"key": dict(zip(free, k, strict=True)), "value": payload(k)}
        for k in sorted(keys)
        if count.get(k, 0) or any(s.get(k, 0) for s in sums) or any(p.get(k, 0) for row in prods for p in row)
    ]
    return {"groups": groups}


def listing_rows(result: dict[str, Any]) -> dict[tuple[Any, ...], int]:
    """A listing result as {(column, value) pairs sorted by column: multiplicity}."""
    value = result["value"]
    cols = value.get("columns", [])
    return {tuple(sorted(zip(cols, r[:-1], strict=True))): r[-1] for r in value.get("rows", [])}


def listing_oracle(config: dict[str, Any], db: Database, con: Any) -> dict[tuple[Any, ...], int]:
    free = list(config.get("free") or [])
    res = brute_force(dict(config, ring="count"), db, con)
    if not free:
        return {(): res["value"]} if res["value"] else {}
    return {tuple(sorted(g["key"].items())): g["value"] for g in res["groups"]}


def run(
    config: dict[str, Any], strategies: Sequence[str], batches: list[list[UpdateEvent]], con: Any
) -> None:
    """Every strategy and fivm on the same stream; after every batch each equals the oracle."""
    engines = {s: FivmEngine(dict(config, strategy=s)) for s in ["fivm", *strategies]}
    db = Database()
    cols = relation_columns(config)
    ring = config.get("ring", "count")
    for batch in batches:
        results = {}
        for s, engine in engines.items():
            assert engine.apply(batch) == [], s
            results[s] = without_stats(engine.result())
        db.apply(batch, cols)
        if ring == "listing":
            want_rows = listing_oracle(config, db, con)
            for s, got in results.items():
                assert listing_rows(got) == want_rows, s
                assert got["value"]["join_size"] == sum(want_rows.values()), s
                assert got["value"]["distinct"] == len(want_rows), s
            continue
        if ring == "covariance":
            variables = list(engines["fivm"].maint.ring.variables)  # type: ignore[attr-defined]
            want = covariance_oracle(config, variables, db, con)
        else:
            want = brute_force(config, db, con)
        for s, got in results.items():
            assert close(got, want), (s, got, want)


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_random_acyclic_joins_every_baseline_equals_duckdb(data: st.DataObject, con: Any) -> None:
    config = data.draw(aggregate(data.draw(acyclic_schema()), ["count", "sum", "covariance"]))
    strategies = COVARIANCE if config["ring"] == "covariance" else SCALAR
    run(config, strategies, data.draw(event_batches(config)), con)


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_cartesian_products_every_baseline_equals_duckdb(data: st.DataObject, con: Any) -> None:
    config = data.draw(aggregate(data.draw(acyclic_schema(components=2)), ["count", "sum", "covariance"]))
    strategies = COVARIANCE if config["ring"] == "covariance" else SCALAR
    run(config, strategies, data.draw(event_batches(config)), con)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), indicators=st.booleans())
def test_triangle_every_baseline_equals_duckdb(data: st.DataObject, indicators: bool, con: Any) -> None:
    config = data.draw(aggregate({"relations": TRIANGLE}, ["count", "sum", "covariance"]))
    config["indicators"] = indicators
    strategies = COVARIANCE if config["ring"] == "covariance" else SCALAR
    run(config, strategies, data.draw(event_batches(config, domain=data.draw(st.integers(1, 4)))), con)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_self_joins_reevaluation_baselines_equal_duckdb(data: st.DataObject, con: Any) -> None:
    rels: dict[str, Any] = {
        "E": [{"a": "int"}, {"b": "int"}],
        "E2": {"alias_of": "E", "columns": ["b", "c"]},
        "E3": {"alias_of": "E", "columns": ["c", "a"]},
    }
    config = data.draw(aggregate({"relations": rels}, ["count", "sum"]))
    run(config, WITH_ALIASES, data.draw(event_batches(config, domain=3)), con)


@st.composite
def conjunctive(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """A conjunctive query over ``schema``: every variable or a random subset as output."""
    variables = sorted(variable_types(schema))
    free = variables if draw(st.booleans()) else draw(st.lists(st.sampled_from(variables), unique=True))
    return dict(schema, ring="listing", free=free, ring_options={"rows": True})


@settings(max_examples=80, deadline=None)
@given(data=st.data(), components=st.integers(1, 2))
def test_listing_variants_equal_duckdb(data: st.DataObject, components: int, con: Any) -> None:
    """List keys, list payloads, fact payloads and the other baselines with listing payloads, with
    deletes of absent tuples: multiplicities go negative and values' derivations cancel (§6.3)."""
    config = data.draw(conjunctive(data.draw(acyclic_schema(components=components))))
    run(config, LISTING, data.draw(event_batches(config)), con)


def test_fact_payloads_list_tuples_whose_derivations_cancel_in_sum(con: Any) -> None:
    """A value whose join rows have multiplicities +1 and -1 (a delete of an absent tuple) has
    multiplicity 0 in its view; its rows are still listed, at every depth of the order (§6.3)."""
    rels = {
        "R": [{"A": "int"}, {"B": "int"}],
        "S": [{"A": "int"}, {"C": "int"}],
        "T": [{"C": "int"}, {"D": "int"}],
    }
    config = {
        "relations": rels,
        "ring": "listing",
        "free": ["A", "B", "C", "D"],
        "ring_options": {"rows": True},
    }
    batches = [
        [UpdateEvent("R", {"A": 1, "B": 1}, 1), UpdateEvent("R", {"A": 1, "B": 2}, -1)],
        [UpdateEvent("S", {"A": 1, "C": 5}, 1), UpdateEvent("T", {"C": 5, "D": 7}, 1)],
        [UpdateEvent("T", {"C": 5, "D": 8}, -1), UpdateEvent("S", {"A": 1, "C": 6}, 2)],
        [UpdateEvent("T", {"C": 6, "D": 9}, 1), UpdateEvent("R", {"A": 1, "B": 2}, 1)],
    ]
    run(config, ["fact-payloads"], batches, con)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_listing_variants_on_the_triangle(data: st.DataObject, con: Any) -> None:
    config = data.draw(conjunctive({"relations": TRIANGLE}))
    run(config, LISTING, data.draw(event_batches(config, domain=3)), con)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), length=st.integers(1, 4))
def test_matrix_chain_reevaluation_equals_duckdb(data: st.DataObject, length: int, con: Any) -> None:
    """REEVAL: A = A1·…·Ak as dense products; entries are the multiplicities of (row, column) tuples."""
    names = [f"X{i}" for i in range(length + 1)]
    rels = {f"A{i + 1}": [{names[i]: "int"}, {names[i + 1]: "int"}] for i in range(length)}
    config = {"relations": rels, "ring": "matrix", "free": [names[0], names[-1]]}
    run(config, ["reeval", "f-re", "dbt-re", "1-ivm-ring", "dbt-ring"], data.draw(event_batches(config)), con)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_static_relations_load_first_for_every_baseline(data: st.DataObject, con: Any) -> None:
    """With one updatable relation, static relations load until its first update; later updates to them
    are refused; the result equals DuckDB throughout and dbt keeps only the views updates need."""
    config = data.draw(aggregate(data.draw(acyclic_schema()), ["count", "sum"]))
    rels = list(relation_columns(config))
    big = data.draw(st.sampled_from(rels))
    static = [r for r in rels if r != big]
    config["updatable"] = [big]
    strategies = ["fivm-one", *SCALAR]
    engines = {s: FivmEngine(dict(config, strategy=s)) for s in strategies}
    db = Database()
    cols = relation_columns(config)
    batches = data.draw(event_batches(config, relations=static, max_batches=3))
    updates = data.draw(event_batches(config, relations=[big]))
    late = data.draw(event_batches(config, relations=static, max_batches=1))[0]
    sealed = False
    for i, batch in enumerate(batches + updates):
        extra = late if i >= len(batches) else []
        sealed = sealed or (i >= len(batches) and bool(batch))
        for s, engine in engines.items():
            refused = engine.apply(batch + extra)
            if i >= len(batches) and sealed:
                assert [r.code for r in refused] == ["static-relation"] * len(extra), s
        db.apply(batch, cols)
        if i >= len(batches) and not sealed:
            db.apply(extra, cols)
        want = brute_force(config, db, con)
        for s, engine in engines.items():
            assert close(without_stats(engine.result()), want), s
