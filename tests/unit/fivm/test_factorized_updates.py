"""Factorized updates (docs/fivm/algorithm.md §2.13): a delta given as a product of factors.

For random matrix chains (exact ints, or weights in exact decimals) and random rank-r and one-row
updates, ``apply_factorized`` and the ``R:factorized`` event give exactly the result and the stored
view contents that the expanded tuple deltas give, for fivm (factorized) and for every baseline that
accepts the query (expanded); the same holds on random acyclic joins, against DuckDB too. Stored views
absorb the expansion only where μ stores them (the engine's counters say which).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import duckdb
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.engine import EngineError
from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.engine import STRATEGIES, FivmEngine
from ivmstream.services.fivm.factorized_updates import Factor
from tests.unit.fivm.fivm_oracle import (
    Database,
    acyclic_schema,
    brute_force,
    event_batches,
    relation_columns,
    relation_types,
    values_of,
    without_stats,
)

CHAIN_ORDER: dict[str, Any] = {"I": {"L": {"K": {"J": {}}}}}
MATRIX_CHAIN: dict[str, Any] = {
    "relations": {
        "A1": [{"I": "int"}, {"J": "int"}],
        "A2": [{"J": "int"}, {"K": "int"}],
        "A3": [{"K": "int"}, {"L": "int"}],
    },
    "ring": "matrix",
    "free": ["I", "L"],
}
WEIGHTED_CHAIN: dict[str, Any] = {
    "relations": {
        "A1": [{"I": "int"}, {"J": "int"}, "a"],
        "A2": [{"J": "int"}, {"K": "int"}, "b"],
        "A3": [{"K": "int"}, {"L": "int"}, "c"],
    },
    "ring": "sum",
    "weights": {"A1": "a", "A2": "b", "A3": "c"},
    "free": ["I", "L"],
}
# Exact decimal values whose products stay within 4 decimals (two factors of at most 2 each).
DECIMALS = st.integers(-300, 300).map(lambda i: i / 100)


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    yield c
    c.close()


def engines_for(config: dict[str, Any]) -> dict[str, FivmEngine]:
    """Every strategy that accepts ``config`` (fivm-one when one relation is updatable)."""
    out = {}
    for s in STRATEGIES:
        try:
            out[s] = FivmEngine(dict(config, strategy=s))
        except EngineError:
            continue
    assert "fivm" in out
    return out


def contents(engine: FivmEngine) -> dict[str, Any]:
    """The stored state by value: every view's and support's key -> payload (creation order aside)."""
    maint = engine.maint
    views = {name: dict(v.data) for name, v in maint.views.items()}
    return {"views": views, "supports": {r: dict(s.data) for r, s in maint.supports.items()}}


def product(values: list[Any], exact: bool) -> Any:
    """Π values, exactly in decimals when ``exact`` (the decimal each float spells)."""
    out: Any = 1
    for v in values:
        out = out * (Decimal(repr(v)) if exact and isinstance(v, float) else v)
    return out


def expanded_events(
    relation: str,
    columns: list[str],
    factors: list[tuple[tuple[str, ...], dict[tuple[Any, ...], Any]]],
    weight: str | None,
    exact: bool,
    copies: int = 1,
) -> list[UpdateEvent]:
    """The delta as tuple events, written independently of the engine: copies · Π values of each tuple,
    or, weighted, ``copies`` of the tuple whose weight is Π values."""
    out = []
    for combo in itertools.product(*(f.items() for _, f in factors)):
        row: dict[str, Any] = {}
        for (cols, _), (key, _) in zip(factors, combo, strict=True):
            row.update(zip(cols, key, strict=True))
        value = product([copies, *(v for _, v in combo)], exact)
        if weight is None:
            if value:
                out.append(UpdateEvent(relation, {c: row[c] for c in columns}, int(value)))
        else:
            weight_value = product([v for _, v in combo], exact)
            if weight_value:
                row[weight] = float(weight_value) if isinstance(weight_value, Decimal) else weight_value
                out.append(UpdateEvent(relation, {c: row[c] for c in columns}, copies))
    return out


def factorized_event(
    relation: str, factors: list[tuple[tuple[str, ...], dict[Any, Any]]], copies: int
) -> Any:
    spec = [{"columns": list(cols), "entries": [[list(k), v] for k, v in f.items()]} for cols, f in factors]
    return UpdateEvent(f"{relation}:factorized", {"factors": orjson.dumps(spec).decode()}, copies)


# --- random matrix chains and updates ------------------------------------------------------------------


@st.composite
def chain_setup(draw: st.DrawFn) -> tuple[dict[str, Any], list[UpdateEvent], Any]:
    """A 3-matrix chain (matrix ring with multiplicities, or weights in exact decimals or ints), the
    initial entries, and the value strategy of factor payloads."""
    kind = draw(st.sampled_from(["matrix", "decimal", "int"]))
    n = draw(st.integers(1, 4))
    only_a2 = draw(st.booleans())
    if kind == "matrix":
        config: dict[str, Any] = dict(MATRIX_CHAIN)
        values: Any = st.integers(-3, 3)
    elif kind == "decimal":
        config = dict(WEIGHTED_CHAIN, decimals=4)
        values = DECIMALS
    else:
        rels = {r: [*cols[:2], {cols[2]: "int"}] for r, cols in WEIGHTED_CHAIN["relations"].items()}
        config = dict(WEIGHTED_CHAIN, relations=rels)
        values = st.integers(-4, 4)
    config["variable_order"] = CHAIN_ORDER
    if only_a2:
        config["updatable"] = ["A2"]
    columns = relation_columns(config)
    events = []
    for rel, (x, y) in (("A1", ("I", "J")), ("A2", ("J", "K")), ("A3", ("K", "L"))):
        for i, j in itertools.product(range(n), range(n)):
            if not draw(st.booleans()):
                continue
            row = {x: i, y: j}
            if kind == "matrix":
                events.append(UpdateEvent(rel, row, draw(st.integers(1, 3))))
            else:
                w = columns[rel][2]
                events.append(UpdateEvent(rel, {**row, w: draw(values.filter(bool))}, 1))
    return config, events, (n, values)


@st.composite
def chain_updates(draw: st.DrawFn, n: int, values: Any) -> list[tuple[list[Any], int]]:
    """Rank-r updates of A2 (r products u[J] ⊗ v[K]) and one-row changes e_j ⊗ v, with copies ±1, 2.
    Entries are non-zero, so each product has tuples (an empty product still ends a loading phase,
    which no tuple event would do)."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        vec = st.dictionaries(
            st.integers(0, n).map(lambda i: (i,)), values.filter(bool), min_size=1, max_size=n + 1
        )
        if draw(st.booleans()):
            j = draw(st.integers(0, n))
            u = {(j,): draw(values.filter(bool))}
        else:
            u = draw(vec)
        out.append(([(("J",), u), (("K",), draw(vec))], draw(st.sampled_from([1, 1, -1, 2]))))
    return out


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_matrix_chain_products_equal_their_expansion_for_every_strategy(data: st.DataObject) -> None:
    config, initial, (n, values) = data.draw(chain_setup())
    weight = (config.get("weights") or {}).get("A2")
    exact = "decimals" in config
    factorized = engines_for(config)
    expanded = {s: FivmEngine(dict(config, strategy=s)) for s in factorized}
    events = [ev for ev in initial if ev.relation != "A2"] + [ev for ev in initial if ev.relation == "A2"]
    updates = data.draw(chain_updates(n, values))
    columns = relation_columns(config)["A2"]
    cut = data.draw(st.integers(0, len(updates)))
    for s in factorized:
        for engine in (factorized[s], expanded[s]):
            assert engine.apply(events) == [], s
    for step, (factors, copies) in enumerate(updates):
        if step == cut:  # restore the factorized engines mid-stream from their snapshots
            for s, engine in factorized.items():
                fresh = FivmEngine(dict(config, strategy=s))
                fresh.restore(engine.snapshot())
                factorized[s] = fresh
        use_event = data.draw(st.booleans())
        tuples = expanded_events("A2", columns, factors, weight, exact, copies)
        for s in factorized:
            if use_event:
                assert factorized[s].apply([factorized_event("A2", factors, copies)]) == [], s
            else:
                factorized[s].apply_factorized("A2", [Factor(c, f) for c, f in factors], copies)
            assert expanded[s].apply(tuples) == [], s
            assert without_stats(factorized[s].result()) == without_stats(expanded[s].result()), s
            assert contents(factorized[s]) == contents(expanded[s]), s
    results = {s: without_stats(e.result()) for s, e in factorized.items()}
    assert all(r == results["fivm"] for r in results.values()), results


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_only_stored_views_absorb_the_product(data: st.DataObject) -> None:
    """Updates to A2 only: μ stores A1, A3 and the root V@K, not A2 nor V@J; the root alone absorbs,
    one entry per non-zero pair (Σ_J A1·u)[i]·(Σ_K v·A3)[l]. With every relation updatable A2 and V@J
    are stored and absorb too."""
    n = data.draw(st.integers(1, 4))
    ints = st.integers(-3, 3)
    a1 = {(i, j): data.draw(ints) for i in range(n) for j in range(n)}
    a3 = {(k, c): data.draw(ints) for k in range(n) for c in range(n)}
    u = {(j,): data.draw(ints) for j in range(n)}
    v = {(k,): data.draw(ints) for k in range(n)}
    load = [UpdateEvent("A1", {"I": i, "J": j}, m) for (i, j), m in a1.items() if m]
    load += [UpdateEvent("A3", {"K": k, "L": c}, m) for (k, c), m in a3.items() if m]
    only = FivmEngine(dict(MATRIX_CHAIN, variable_order=CHAIN_ORDER, updatable=["A2"]))
    only.apply(load)
    absorbed = only.apply_factorized("A2", [(("J",), u), (("K",), v)])
    assert set(only.result()["stats"]["views"]) == {"A1", "A3", "V@K"}
    left = {i: sum(a1[i, j] * u[(j,)] for j in range(n)) for i in range(n)}
    right = {c: sum(v[(k,)] * a3[k, c] for k in range(n)) for c in range(n)}
    pairs = sum(1 for i in range(n) for c in range(n) if left[i] * right[c])
    assert absorbed == ({"V@K": pairs} if pairs else {})
    assert only.stats().get("factorized_absorbed_V@K", 0.0) == pairs
    assert "factorized_absorbed_V@J" not in only.stats()

    every = FivmEngine(dict(MATRIX_CHAIN, variable_order=CHAIN_ORDER))
    every.apply(load)
    absorbed = every.apply_factorized("A2", [(("J",), u), (("K",), v)])
    nonzero_u = sum(1 for x in u.values() if x)
    nonzero_v = sum(1 for x in v.values() if x)
    assert set(every.result()["stats"]["views"]) == {"A1", "A2", "A3", "V@J", "V@K"}
    assert absorbed.get("A2", 0) == nonzero_u * nonzero_v
    assert set(absorbed) <= {"A2", "V@J", "V@K"}


# --- general acyclic joins -------------------------------------------------------------------------------


@st.composite
def acyclic_product_update(draw: st.DrawFn) -> tuple[dict[str, Any], str, list[Any]]:
    """A random acyclic join (count or an int/float sum, maybe grouped) and a product delta of one
    relation: its columns split into random disjoint groups, each a factor of random entries."""
    config = draw(acyclic_schema(components=draw(st.integers(1, 2))))
    types = {
        c: t
        for r, ts in relation_types(config).items()
        for c, t in zip(relation_columns(config)[r], ts, strict=True)
    }
    variables = sorted(types)
    free = draw(st.lists(st.sampled_from(variables), max_size=2, unique=True))
    numeric = [v for v in variables if types[v] != "str" and v not in free]
    config["free"] = free
    summed = draw(st.lists(st.sampled_from(numeric), max_size=2)) if numeric else []
    if summed:
        config.update(ring="sum", sum=summed)
    rel = draw(st.sampled_from(sorted(config["relations"])))
    cols = list(relation_columns(config)[rel])
    perm = draw(st.permutations(cols))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(cols) - 1)))) - {len(cols)})
    groups = [tuple(perm[a:b]) for a, b in itertools.pairwise([0, *cuts, len(cols)])]
    factors = []
    for g in groups:
        keys = st.tuples(*(values_of(types[c], 3) for c in g))
        factors.append((g, draw(st.dictionaries(keys, st.integers(-2, 2), min_size=1, max_size=3))))
    return config, rel, factors


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_acyclic_products_equal_their_expansion_and_duckdb(data: st.DataObject, con: Any) -> None:
    config, rel, factors = data.draw(acyclic_product_update())
    batches = data.draw(event_batches(config))
    columns = relation_columns(config)
    factorized = engines_for(config)
    expanded = {s: FivmEngine(dict(config, strategy=s)) for s in factorized}
    db = Database()
    tuples = expanded_events(rel, columns[rel], factors, None, exact=False)
    steps: list[list[UpdateEvent] | None] = [*batches, None, *batches[:1]]  # None: the product
    for batch in steps:
        if batch is None:
            for s in factorized:
                factorized[s].apply_factorized(rel, [Factor(c, f) for c, f in factors])
                expanded[s].apply(tuples)
            db.apply(tuples, columns)
        else:
            for s in factorized:
                factorized[s].apply(batch)
                expanded[s].apply(batch)
            db.apply(batch, columns)
        want = brute_force(config, db, con)
        for s in factorized:
            got = without_stats(factorized[s].result())
            assert got == without_stats(expanded[s].result()), s
            assert contents(factorized[s]) == contents(expanded[s]), s
            if s == "fivm":
                assert got == want


def test_self_join_products_run_through_every_occurrence() -> None:
    """E(a,b) ⋈ E2(b,c) with E2 an alias of E: a product delta of E reaches both leaves in turn."""
    config = {
        "relations": {"E": [{"a": "int"}, {"b": "int"}], "E2": {"alias_of": "E", "columns": ["b", "c"]}},
        "free": ["a"],
    }
    load = [UpdateEvent("E", {"a": a, "b": b}, 1) for a, b in [(0, 1), (1, 2), (2, 0), (1, 1)]]
    factors: list[tuple[tuple[str, ...], dict[tuple[Any, ...], Any]]] = [
        (("a",), {(0,): 2, (1,): -1}),
        (("b",), {(1,): 1, (2,): 3}),
    ]
    one, other = FivmEngine(config), FivmEngine(config)
    one.apply(load)
    other.apply(load)
    one.apply_factorized("E", factors)
    other.apply(expanded_events("E", ["a", "b"], factors, None, exact=False))
    assert one.result() == other.result()
    assert contents(one) == contents(other)


def test_debug_mode_and_indicators_take_the_expansion() -> None:
    """With a support to keep (debug checks, indicator projections of a cyclic join) fivm expands the
    product into tuples, and still equals the tuple route."""
    triangle = {
        "relations": {
            "R": [{"A": "int"}, {"B": "int"}],
            "S": [{"B": "int"}, {"C": "int"}],
            "T": [{"C": "int"}, {"A": "int"}],
        },
        "indicators": True,
    }
    load = [UpdateEvent("R", {"A": a, "B": b}, 1) for a in range(2) for b in range(2)]
    load += [UpdateEvent("T", {"C": c, "A": a}, 1) for c in range(2) for a in range(2)]
    factors = [(("A",), {(0,): 2, (1,): 1}), (("B",), {(1,): -1})]
    for config in (dict(MATRIX_CHAIN, debug=True), triangle):
        rel = "A2" if "ring" in config else "S"  # the triangle keeps indicator projections of S
        cols = relation_columns(config)[rel]
        names = [tuple(cols[:1]), tuple(cols[1:])]
        a, b = FivmEngine(config), FivmEngine(config)
        first = load if rel == "S" else [UpdateEvent("A1", {"I": 0, "J": 0}, 1)]
        a.apply(first)
        b.apply(first)
        mine: list[tuple[tuple[str, ...], dict[tuple[Any, ...], Any]]] = [
            (n, f) for n, (_, f) in zip(names, factors, strict=True)
        ]
        assert a.apply_factorized(rel, mine) == {}
        b.apply(expanded_events(rel, cols, mine, None, exact=False))
        assert a.result() == b.result()
        assert contents(a) == contents(b)


# --- the event form and its refusals ---------------------------------------------------------------------


def test_the_event_form_accepts_lists_and_json_text() -> None:
    listed = UpdateEvent(
        "A2:factorized",
        {"factors": [{"columns": ["J"], "entries": [[[0], 2]]}, {"columns": ["K"], "entries": [[[1], 3]]}]},
        1,
    )
    text = factorized_event("A2", [(("J",), {(0,): 2}), (("K",), {(1,): 3})], 1)
    a, b = FivmEngine(MATRIX_CHAIN), FivmEngine(MATRIX_CHAIN)
    load = [UpdateEvent("A1", {"I": 5, "J": 0}, 1), UpdateEvent("A3", {"K": 1, "L": 7}, 1)]
    assert a.apply([*load, listed]) == []
    assert b.apply([*load, text]) == []
    assert a.result() == b.result()
    assert a.result()["groups"] == [{"key": {"I": 5, "L": 7}, "value": 6.0}]


def _event(row: dict[str, Any], relation: str = "A2:factorized", delta: Any = 1) -> UpdateEvent:
    return UpdateEvent(relation, row, delta)


def _factors(*specs: tuple[list[str], list[Any]]) -> dict[str, Any]:
    return {"factors": [{"columns": c, "entries": e} for c, e in specs]}


J0 = (["J"], [[[0], 1]])
K0 = (["K"], [[[0], 1]])


@pytest.mark.parametrize(
    ("config", "event", "code"),
    [
        (MATRIX_CHAIN, _event(_factors(J0, K0), relation="A9:factorized"), "unknown-relation"),
        (MATRIX_CHAIN, _event(_factors(J0, K0), delta=0), "bad-delta"),
        (MATRIX_CHAIN, _event({"factors": "[not json"}), "bad-factors"),
        (MATRIX_CHAIN, _event({"factors": [{"columns": ["J"]}]}), "bad-factors"),
        (MATRIX_CHAIN, _event({"factors": [], "extra": 1}), "bad-factors"),
        (MATRIX_CHAIN, _event({"factors": []}), "bad-factors"),
        (MATRIX_CHAIN, _event(_factors((["J"], [[0, 1]]), K0)), "bad-factors"),
        (MATRIX_CHAIN, _event(_factors(J0)), "factor-columns"),
        (MATRIX_CHAIN, _event(_factors(J0, (["J", "K"], [[[0, 0], 1]]))), "factor-columns"),
        (MATRIX_CHAIN, _event(_factors(J0, (["X"], [[[0], 1]]))), "factor-columns"),
        (MATRIX_CHAIN, _event(_factors(J0, (["K"], [[[0, 1], 1]]))), "bad-factors"),
        (MATRIX_CHAIN, _event(_factors(J0, (["K"], [[["a"], 1]]))), "wrong-type"),
        (MATRIX_CHAIN, _event(_factors(J0, (["K"], [[[None], 1]]))), "null-value"),
        (MATRIX_CHAIN, _event(_factors(J0, (["K"], [[[0], 0.5]]))), "factor-value"),
        (WEIGHTED_CHAIN, _event(_factors(J0, (["K", "b"], [[[0, 1.0], 1]]))), "factor-columns"),
        (WEIGHTED_CHAIN, _event(_factors(J0, (["K"], [[[0], "x"]]))), "factor-value"),
        (WEIGHTED_CHAIN, _event(_factors(J0, (["K"], [[[0], float("nan")]]))), "factor-value"),
        (
            dict(WEIGHTED_CHAIN, decimals=2),
            _event(_factors((["J"], [[[0], 0.25]]), (["K"], [[[0], 0.5]]))),
            "factor-precision",
        ),
        (dict(MATRIX_CHAIN, updatable=["A1"]), _event(_factors(J0, K0)), "static-relation"),
    ],
)
def test_bad_factorized_events_are_refused_and_change_nothing(
    config: dict[str, Any], event: UpdateEvent, code: str
) -> None:
    engine = FivmEngine(config)
    engine.apply([UpdateEvent("A1", {"I": 0, "J": 0, **({"a": 1.0} if "weights" in config else {})}, 1)])
    if code == "static-relation":
        engine.apply([UpdateEvent("A1", {"I": 0, "J": 1}, 1)])  # A1 is the updatable one: loading ends
    before = engine.snapshot()
    rejections = engine.apply([event])
    assert [r.code for r in rejections] == [code], rejections
    assert "\n" not in rejections[0].detail
    assert engine.snapshot() == before


def test_the_api_refuses_in_one_line() -> None:
    engine = FivmEngine(MATRIX_CHAIN)
    for factors, copies in (([(("J",), {0: 1})], 1), ([(("J",), {0: 1}), (("K",), {0: 1})], 0)):
        with pytest.raises(EngineError) as err:
            engine.apply_factorized("A2", factors, copies)
        assert "\n" not in str(err.value)


def test_decimal_weights_stay_exact_where_floats_round() -> None:
    """0.1 · 0.3 is 0.03 exactly in decimals; the factorized and expanded paths agree to the bit."""
    config = dict(WEIGHTED_CHAIN, decimals=4)
    a, b = FivmEngine(config), FivmEngine(config)
    load = [
        UpdateEvent("A1", {"I": 0, "J": 0, "a": 0.1}, 1),
        UpdateEvent("A3", {"K": 0, "L": 0, "c": 0.7}, 1),
    ]
    a.apply(load)
    b.apply(load)
    a.apply_factorized("A2", [(("J",), {0: 0.1}), (("K",), {0: 0.3})], copies=3)
    b.apply([UpdateEvent("A2", {"J": 0, "K": 0, "b": 0.03}, 3)])
    assert a.result() == b.result()
    assert contents(a) == contents(b)
