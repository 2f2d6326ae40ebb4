"""The F-IVM engine against DuckDB after every batch, on random schemas and random update streams.

Random alpha-acyclic joins (stars, paths, snowflakes), Cartesian products (forests), the triangle (with
and without indicator projections), a 4-cycle, self-joins, COUNT and SUM over Z and R, with and
without group-by variables; batches mix inserts, deletes of present and absent tuples (negative
multiplicities), duplicates and insert/delete pairs, over few distinct join values (skew). Half the
runs also check every invariant of docs/fivm/algorithm.md §5.2 after every delta (debug mode).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ivmstream.services.fivm.engine import FivmEngine
from tests.unit.fivm.fivm_oracle import (
    Database,
    acyclic_schema,
    brute_force,
    event_batches,
    relation_columns,
    without_stats,
)


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    yield c
    c.close()


@st.composite
def aggregate(draw: st.DrawFn, config: dict[str, Any]) -> dict[str, Any]:
    """COUNT or SUM (over one or two numeric variables, maybe a repeated one), free variables or none."""
    types: dict[str, str] = {}
    for spec in config["relations"].values():
        if isinstance(spec, list):
            for c in spec:
                (name, typ), *_ = c.items() if isinstance(c, dict) else [(c, "float")]
                types[name] = typ
    variables = sorted(types)
    free = draw(st.lists(st.sampled_from(variables), max_size=2, unique=True))
    numeric = [v for v in variables if types[v] != "str" and v not in free]
    out = dict(config, free=free, debug=draw(st.booleans()))
    if numeric and draw(st.booleans()):
        out["ring"] = "sum"
        out["sum"] = draw(st.lists(st.sampled_from(numeric), min_size=1, max_size=2))
    else:
        out["ring"] = "count"
    return out


def run_against_oracle(config: dict[str, Any], batches: list[list[Any]], con: Any) -> None:
    engine = FivmEngine(config)
    db = Database()
    cols = relation_columns(config)
    for batch in batches:
        assert engine.apply(batch) == []
        db.apply(batch, cols)
        assert without_stats(engine.result()) == brute_force(config, db, con)


@settings(max_examples=150)
@given(data=st.data())
def test_random_acyclic_joins_equal_duckdb_after_every_batch(data: st.DataObject, con: Any) -> None:
    config = data.draw(aggregate(data.draw(acyclic_schema())))
    run_against_oracle(config, data.draw(event_batches(config)), con)


@settings(max_examples=80)
@given(data=st.data())
def test_cartesian_products_of_random_trees_equal_duckdb(data: st.DataObject, con: Any) -> None:
    config = data.draw(aggregate(data.draw(acyclic_schema(components=2))))
    run_against_oracle(config, data.draw(event_batches(config)), con)


TRIANGLE = {
    "R": [{"A": "int"}, {"B": "int"}],
    "S": [{"B": "int"}, {"C": "int"}],
    "T": [{"C": "int"}, {"A": "int"}],
}


@settings(max_examples=120)
@given(
    data=st.data(),
    indicators=st.booleans(),
    order=st.sampled_from([None, {"A": {"B": {"C": {}}}}, {"C": {"A": {"B": {}}}}]),
)
def test_triangle_equals_duckdb_with_and_without_indicator_projections(
    data: st.DataObject, indicators: bool, order: Any, con: Any
) -> None:
    config = data.draw(aggregate({"relations": TRIANGLE}))
    config.update(indicators=indicators, variable_order=order if not config["free"] else None)
    run_against_oracle(config, data.draw(event_batches(config, domain=data.draw(st.integers(1, 4)))), con)


@settings(max_examples=60)
@given(data=st.data(), indicators=st.booleans())
def test_four_cycle_equals_duckdb(data: st.DataObject, indicators: bool, con: Any) -> None:
    rels = {
        "R": [{"A": "int"}, {"B": "int"}],
        "S": [{"B": "int"}, {"C": "str"}],
        "T": [{"C": "str"}, {"D": "float"}],
        "U": [{"D": "float"}, {"A": "int"}, {"w": "int"}],
    }
    config = data.draw(aggregate({"relations": rels}))
    config["indicators"] = indicators
    run_against_oracle(config, data.draw(event_batches(config)), con)


@settings(max_examples=80)
@given(data=st.data(), indicators=st.booleans())
def test_self_joins_through_aliases_equal_duckdb(data: st.DataObject, indicators: bool, con: Any) -> None:
    """E(a,b) ⋈ E(b,c) ⋈ E(c,a) over one stored relation: each update runs through all three leaves."""
    shape = data.draw(st.sampled_from(["path", "triangle"]))
    rels: dict[str, Any] = {
        "E": [{"a": "int"}, {"b": "int"}],
        "E2": {"alias_of": "E", "columns": ["b", "c"]},
    }
    if shape == "triangle":
        rels["E3"] = {"alias_of": "E", "columns": ["c", "a"]}
    config = data.draw(aggregate({"relations": rels}))
    config["indicators"] = indicators
    run_against_oracle(config, data.draw(event_batches(config, domain=3)), con)


@settings(max_examples=60)
@given(data=st.data())
def test_fivm_one_loads_static_relations_then_streams_the_updatable_one(
    data: st.DataObject, con: Any
) -> None:
    """Static relations load until the first update to U; later updates to them are refused and
    change nothing; the result equals DuckDB throughout (docs/fivm/algorithm.md §2.7)."""
    schema = data.draw(acyclic_schema())
    config = data.draw(aggregate(schema))
    rels = list(relation_columns(config))
    big = data.draw(st.sampled_from(rels))
    static = [r for r in rels if r != big]
    config.update(strategy="fivm-one", updatable=[big])
    engine = FivmEngine(config)
    db = Database()
    cols = relation_columns(config)
    for batch in data.draw(event_batches(config, relations=static, max_batches=3)):
        assert engine.apply(batch) == []
        db.apply(batch, cols)
        assert without_stats(engine.result()) == brute_force(config, db, con)
    sealed = False
    for batch in data.draw(event_batches(config, relations=[big])):
        late = data.draw(event_batches(config, relations=static, max_batches=1))[0]
        refused = engine.apply(batch + late)
        sealed = sealed or bool(batch)
        assert engine.maint.loading is not sealed
        if sealed:
            assert [(r.index, r.code) for r in refused] == [
                (len(batch) + i, "static-relation") for i in range(len(late))
            ]
            db.apply(batch, cols)
        else:
            assert refused == []
            db.apply(late, cols)
        assert without_stats(engine.result()) == brute_force(config, db, con)
    assert set(engine.result()["stats"]["views"]) == set(engine.maint.target_views())


@settings(max_examples=40)
@given(data=st.data())
def test_fivm_one_on_the_triangle_stores_only_the_join_of_s_and_t(data: st.DataObject, con: Any) -> None:
    """The paper's F-IVM-ONE for the triangle (order A → B → C, only R updatable): S and T load, then
    only the root and V@C[A,B] = Σ_C S(B,C)·T(C,A) are stored and every R update equals DuckDB."""
    config = data.draw(aggregate({"relations": TRIANGLE}))
    config.update(strategy="fivm-one", updatable=["R"], free=[], variable_order={"A": {"B": {"C": {}}}})
    if config["ring"] == "sum":
        config["sum"] = [v for v in config["sum"] if v in "ABC"] or ["A"]
    engine = FivmEngine(config)
    db = Database()
    cols = relation_columns(config)
    domain = data.draw(st.integers(1, 4))
    for batch in data.draw(event_batches(config, relations=["S", "T"], max_batches=3, domain=domain)):
        assert engine.apply(batch) == []
        db.apply(batch, cols)
    sealed = False
    for batch in data.draw(event_batches(config, relations=["R"], domain=domain)):
        assert engine.apply(batch) == []
        db.apply(batch, cols)
        sealed = sealed or bool(batch)  # the first update to R ends the loading
        assert without_stats(engine.result()) == brute_force(config, db, con)
        if sealed:
            assert set(engine.maint.views) == {"V@A", "V@C"}


@settings(max_examples=60)
@given(data=st.data())
def test_covariance_ring_roots_equal_duckdb_moments(data: st.DataObject, con: Any) -> None:
    """The cofactor payload at the root holds COUNT, SUM(x_i) and SUM(x_i·x_j) over the join (with
    multiplicity): the engine's product order must keep every partial product on contiguous blocks."""
    config = data.draw(acyclic_schema(components=data.draw(st.integers(1, 2))))
    types = {next(iter(c)): next(iter(c.values())) for spec in config["relations"].values() for c in spec}
    numeric = sorted(v for v, t in types.items() if t != "str")
    assume(numeric)
    features = data.draw(st.lists(st.sampled_from(numeric), min_size=1, max_size=4, unique=True))
    config.update(ring="covariance", features=features, debug=data.draw(st.booleans()))
    config["execution"] = data.draw(st.sampled_from(["auto", "per-tuple"]))  # columns or per tuple (§2.14)
    if data.draw(st.booleans()):  # the baselines' dense m-by-m payloads (docs/fivm/baselines.md §2.3)
        config["ring_options"] = {"payload": "dense"}
    engine = FivmEngine(config)
    db = Database()
    cols = relation_columns(config)
    for batch in data.draw(event_batches(config, max_batches=4)):
        assert engine.apply(batch) == []
        db.apply(batch, cols)
        got = engine.result()["value"]
        index = {v: i for i, v in enumerate(got["variables"])}
        count = brute_force({**config, "ring": "count"}, db, con)["value"]
        assert got["count"] == count
        for v in features:
            want = brute_force({**config, "ring": "sum", "sum": [v]}, db, con)["value"]
            assert got["sum"][index[v]] == pytest.approx(want, abs=1e-9)
            for w in features:
                want = brute_force({**config, "ring": "sum", "sum": [v, w]}, db, con)["value"]
                assert got["sumprod"][index[v]][index[w]] == pytest.approx(want, abs=1e-9)
