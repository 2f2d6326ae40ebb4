"""Weighted tuples (docs/fivm/algorithm.md §1.2): ``weights: {R: w}`` makes each tuple of R count
``w · multiplicity``; the result is ``SUM(w · m · …)`` per group, checked against DuckDB for fivm and
every strategy that accepts the option, in floats, ints and exact decimals. Strategies that do not
compute the sum ring refuse the option in one line.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.engine import EngineError
from ivmstream.services.fivm.engine import STRATEGIES, FivmEngine
from tests.unit.fivm.fivm_oracle import (
    Database,
    acyclic_schema,
    brute_force,
    event_batches,
    occurrences,
    relation_columns,
    without_stats,
)

ACCEPTING = ["fivm", "1-ivm", "1-ivm-ring", "dbt", "dbt-ring", "f-re", "dbt-re"]

SELF_JOIN = {"A4": {"alias_of": "A1", "columns": ["L", "M", "z"]}}
CHAIN = {
    "A1": [{"I": "int"}, {"J": "int"}, "a"],
    "A2": [{"J": "int"}, {"K": "int"}, "b"],
    "A3": [{"K": "int"}, {"L": "int"}, "c"],
}


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    yield c
    c.close()


def close(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)


def oracle_config(config: dict[str, Any]) -> dict[str, Any]:
    """The same aggregate for the oracle, which knows no weights: SUM(m · Π summed · Π weights)."""
    sums = list(config.get("sum") or [])
    out = {k: v for k, v in config.items() if k not in ("weights", "strategy", "decimals")}
    return dict(out, ring="sum", sum=sums + list(config["weights"].values()))


@st.composite
def weighted_query(draw: st.DrawFn) -> dict[str, Any]:
    """A random acyclic join (maybe a product) with a fresh weight column on 1..n relations, maybe
    also a summed variable, up to two group-by variables."""
    config = draw(acyclic_schema(components=draw(st.integers(1, 2))))
    rels = sorted(config["relations"])
    weighted = draw(st.lists(st.sampled_from(rels), min_size=1, unique=True))
    wtype = draw(st.sampled_from(["int", "float"]))
    weights = {}
    for r in weighted:
        col = f"w_{r}"
        config["relations"][r] = [*config["relations"][r], {col: wtype}]
        weights[r] = col
    types = {c: t for _, _, cols, ts in occurrences(config) for c, t in zip(cols, ts, strict=True)}
    plain = sorted(v for v in types if v not in weights.values())
    free = draw(st.lists(st.sampled_from(plain), max_size=2, unique=True)) if plain else []
    numeric = [v for v in plain if types[v] != "str" and v not in free]
    sums = draw(st.lists(st.sampled_from(numeric), max_size=1)) if numeric else []
    return dict(config, ring="sum", sum=sums, weights=weights, free=free)


def run(config: dict[str, Any], strategies: list[str], batches: list[Any], con: Any) -> None:
    engines = {s: FivmEngine(dict(config, strategy=s)) for s in strategies}
    db = Database()
    cols = relation_columns(config)
    for batch in batches:
        db.apply(batch, cols)
        want = brute_force(oracle_config(config), db, con)
        for s, engine in engines.items():
            assert engine.apply(batch) == [], s
            got = without_stats(engine.result())
            assert close(got, want), (s, got, want)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_weighted_joins_equal_duckdb_for_every_accepting_strategy(data: st.DataObject, con: Any) -> None:
    config = data.draw(weighted_query())
    run(config, ACCEPTING, data.draw(event_batches(config)), con)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), decimals=st.integers(1, 3))
def test_weighted_joins_in_exact_decimals_equal_duckdb(data: st.DataObject, decimals: int, con: Any) -> None:
    """Values are multiples of 0.5, so DuckDB's float sums are exact and the decimal engine must give
    the same floats exactly."""
    config = dict(data.draw(weighted_query()), decimals=decimals)
    engines = {s: FivmEngine(dict(config, strategy=s)) for s in ("fivm", "f-re", "dbt-re")}
    db = Database()
    cols = relation_columns(config)
    for batch in data.draw(event_batches(config)):
        db.apply(batch, cols)
        want = brute_force(oracle_config(config), db, con)
        for s, engine in engines.items():
            assert engine.apply(batch) == [], s
            assert without_stats(engine.result()) == want, s


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_weighted_matrix_chain_equals_duckdb_and_survives_a_restore(data: st.DataObject, con: Any) -> None:
    """A real-valued matrix chain: entries are the weights; a restored engine continues identically."""
    weights = {"A1": "a", "A2": "b", "A3": "c"}
    config = {"relations": CHAIN, "ring": "sum", "weights": weights, "free": ["I", "L"]}
    batches = data.draw(event_batches(config, domain=3))
    run(config, ACCEPTING, batches, con)
    engine = FivmEngine(dict(config, updatable=["A2"]))
    half = len(batches) // 2
    for batch in batches[:half]:
        engine.apply(batch)
    restored = FivmEngine(dict(config, updatable=["A2"]))
    restored.restore(engine.snapshot())
    for batch in batches[half:]:
        assert engine.apply(batch) == restored.apply(batch)
    assert restored.snapshot() == engine.snapshot()


def test_the_weight_multiplies_the_multiplicity() -> None:
    """A hand-checkable case: 3 copies of a tuple of weight 2.5 joined with one of weight -4."""
    from ivmstream.events import UpdateEvent

    config = {"relations": {"R": [{"A": "int"}, "w"], "S": [{"A": "int"}, "v"]}, "ring": "sum"}
    engine = FivmEngine(dict(config, weights={"R": "w", "S": "v"}))
    engine.apply([UpdateEvent("R", {"A": 1, "w": 2.5}, 3), UpdateEvent("S", {"A": 1, "v": -4.0}, 1)])
    assert engine.result()["value"] == 3 * 2.5 * -4.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"weights": ["A2"]}, "must be a mapping"),
        ({"weights": {"A9": "b"}}, "not a relation"),
        ({"weights": {"A2": "x"}}, "not a column"),
        ({"weights": {"A2": "J"}}, "join variable"),
        ({"weights": {"A2": "b"}, "free": ["I", "b"]}, "free"),
        ({"weights": {"A2": "b"}, "sum": ["b"]}, "also summed"),
        ({"weights": {"A2": "b"}, "ring": "count"}, "applies to ring sum"),
        ({"weights": {"A2": "b"}, "ring": "matrix"}, "applies to ring sum"),
        ({"weights": {"A2": "b"}, "variable_order": {"I": {"L": {"K": {"J": {"b": {}}}}}}}, "variable_order"),
        ({"weights": {"S": "s"}, "relations": {**CHAIN, "S": [{"I": "int"}, {"s": "str"}]}}, "string column"),
        (
            {"weights": {"A1": "a"}, "relations": {**CHAIN, **SELF_JOIN}},
            "has an alias",
        ),
    ],
)
def test_bad_weights_are_refused_in_one_line(change: dict[str, Any], message: str) -> None:
    config = {"relations": CHAIN, "ring": "sum", "free": ["I", "L"], **change}
    with pytest.raises(EngineError, match=message) as err:
        FivmEngine(config)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("strategy", sorted(set(STRATEGIES) - {*ACCEPTING, "fivm-one"}))
def test_strategies_without_the_sum_ring_refuse_weights_in_one_line(strategy: str) -> None:
    config = {"relations": CHAIN, "ring": "sum", "weights": {"A2": "b"}, "free": ["I", "L"]}
    config["strategy"] = strategy
    with pytest.raises(EngineError) as err:
        FivmEngine(config)
    assert "\n" not in str(err.value)


def test_fivm_one_accepts_weights() -> None:
    config = {"relations": CHAIN, "ring": "sum", "weights": {"A2": "b"}, "free": ["I", "L"]}
    engine = FivmEngine(dict(config, strategy="fivm-one", updatable=["A2"]))
    assert engine.maint.ring.lifts("b")
