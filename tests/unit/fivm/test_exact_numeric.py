"""Exact decimals (docs/fivm/rings.md §8): with ``decimals`` set, SUM and covariance results
do not depend on how the stream was cut into batches, equal DuckDB's DECIMAL arithmetic on the same
rounded values exactly, cancel to nothing under deletes, and survive snapshots and entry restores.

Values are arbitrary floats (many with more decimals than kept, halfway ties included) over few
distinct values per variable, so joins are dense and float sums would depend on the order of additions.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import duckdb
import numpy as np
import orjson
import pandas as pd  # type: ignore[import-untyped]
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ivmstream.engine import EngineError
from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.engine import FivmEngine
from ivmstream.services.fivm.rings.cofactor import Cofactor
from tests.unit.entry_store import fold_changes
from tests.unit.fivm.fivm_oracle import (
    PANDAS_TYPES,
    Database,
    acyclic_schema,
    occurrences,
    relation_columns,
    relation_types,
    without_stats,
)

FLOATS = st.one_of(
    st.floats(-1000, 1000, allow_nan=False, allow_infinity=False),
    st.integers(-20_000, 20_000).map(lambda i: i / 1000),
    st.integers(-400, 400).map(lambda i: i * 0.005),  # halfway cases at two decimals
    st.sampled_from([0.1, 0.2, 0.3, 0.7, 2.675, -0.125, 0.125]),
)
BIG_FLOATS = st.one_of(FLOATS, st.floats(-1e17, 1e17, allow_nan=False, allow_infinity=False))


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    yield c
    c.close()


def rounded(value: Any, decimals: int) -> Decimal:
    """The numeric contract, stated independently: the decimal the value spells, rounded half to even."""
    spelled = Decimal(value) if isinstance(value, int) else Decimal(repr(float(value)))
    return spelled.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_EVEN)


# --- random queries and streams --------------------------------------------------------------------------


@st.composite
def exact_query(draw: st.DrawFn, rings: Sequence[str] = ("sum", "covariance")) -> dict[str, Any]:
    """A random acyclic join (maybe a product), SUM of one or two numeric variables or the covariance
    of one to three, at most one group-by variable, ``decimals`` from 0 to 4."""
    config = draw(acyclic_schema(components=draw(st.integers(1, 2))))
    types = {c: t for _, _, cols, ts in occurrences(config) for c, t in zip(cols, ts, strict=True)}
    numeric = sorted(v for v, t in types.items() if t != "str")
    assume(numeric)
    # Mostly float variables: int sums are exact in either mode.
    retype = {v: draw(st.sampled_from(["float", "float", "int"])) for v in numeric}
    config["relations"] = {
        r: [{c: retype.get(c, t) for c, t in col.items()} for col in cols]
        for r, cols in config["relations"].items()
    }
    ring = draw(st.sampled_from(list(rings)))
    if ring == "sum":
        aggregated = draw(st.lists(st.sampled_from(numeric), min_size=1, max_size=2))
        config.update(ring="sum", sum=aggregated)
    else:
        aggregated = draw(st.lists(st.sampled_from(numeric), min_size=1, max_size=3, unique=True))
        config.update(ring="covariance", features=aggregated)
    others = sorted(v for v in types if v not in aggregated)
    config["free"] = draw(st.lists(st.sampled_from(others), max_size=1)) if others else []
    config["decimals"] = draw(st.integers(0, 4))
    config["debug"] = draw(st.booleans())
    return config


@st.composite
def stream(
    draw: st.DrawFn, config: dict[str, Any], floats: st.SearchStrategy[float] = FLOATS, max_events: int = 24
) -> list[UpdateEvent]:
    """Inserts and deletes (duplicates, absent tuples, negative multiplicities) over 1-2 values per
    variable shared by every relation, so that joins match; every relation gets an insert."""
    cols, types = relation_columns(config), relation_types(config)
    var_type = {c: t for r in cols for c, t in zip(cols[r], types[r], strict=True)}
    kinds = {"float": floats, "int": st.integers(-5, 5), "str": st.sampled_from(["u", "v", "w"])}
    pools = {v: draw(st.lists(kinds[t], min_size=1, max_size=2)) for v, t in sorted(var_type.items())}
    tuples = {
        r: draw(st.lists(st.tuples(*(st.sampled_from(pools[c]) for c in cols[r])), min_size=1, max_size=4))
        for r in sorted(cols)
    }
    event = st.sampled_from(sorted(cols)).flatmap(
        lambda r: st.tuples(st.just(r), st.sampled_from(tuples[r]), st.sampled_from([1, 1, 2, -1, -2]))
    )
    seed = [(r, draw(st.sampled_from(tuples[r])), 1) for r in sorted(cols)]  # every relation joins in
    events = draw(st.permutations(seed + draw(st.lists(event, min_size=4, max_size=max_events))))
    return [UpdateEvent(r, dict(zip(cols[r], t, strict=True)), m) for r, t, m in events]


@st.composite
def batched(draw: st.DrawFn, events: list[UpdateEvent]) -> list[list[UpdateEvent]]:
    """``events`` cut into consecutive batches at random points (maybe one batch, maybe one per event)."""
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(events) - 1)))) - {len(events)})
    bounds = [0, *cuts, len(events)]
    return [events[a:b] for a, b in itertools.pairwise(bounds)]


def run(config: dict[str, Any], batches: list[list[UpdateEvent]]) -> FivmEngine:
    engine = FivmEngine(config)
    for batch in batches:
        assert engine.apply(batch) == []
    return engine


def negated(events: list[UpdateEvent]) -> list[UpdateEvent]:
    return [UpdateEvent(e.relation, e.row, -e.delta) for e in events]


# --- the DuckDB DECIMAL oracle -----------------------------------------------------------------------------


def decimal_oracle(config: dict[str, Any], db: Database, con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """Rows ``(*free key, aggregate, ...)`` with exact Decimal aggregates, sorted by key: SUM(m·Πx) for
    ring sum; SUM(m), SUM(m·x_i), SUM(m·x_i·x_j) (i <= j, in ``features`` order) for covariance. Each
    aggregated value is the rounded decimal cast to DECIMAL(38, N); joins compare the original values."""
    n = config["decimals"]
    free = list(config.get("free") or [])
    ring = config["ring"]
    aggregated = list(config["sum"] if ring == "sum" else config["features"])
    cur = con.cursor()
    try:
        first: dict[str, int] = {}
        conds = []
        occs = occurrences(config)
        for i, (_, base, cols, types) in enumerate(occs):
            rows = list(db.relations.get(base, {}).items())
            frame: dict[str, pd.Series] = {}
            for j, (c, typ) in enumerate(zip(cols, types, strict=True)):
                frame[c] = pd.Series([t[j] for t, _ in rows], dtype=PANDAS_TYPES[typ])
                if c in aggregated:
                    frame[f"{c}__d"] = pd.Series([str(rounded(t[j], n)) for t, _ in rows], dtype="object")
            frame["m"] = pd.Series([m for _, m in rows], dtype="int64")
            cur.register(f"t{i}", pd.DataFrame(frame))
            for c in cols:
                if c in first:
                    conds.append(f't{i}."{c}" = t{first[c]}."{c}"')
                else:
                    first[c] = i
        mult = " * ".join(f"CAST(t{i}.m AS DECIMAL(38, 0))" for i in range(len(occs)))

        def value(v: str) -> str:
            return f'CAST(t{first[v]}."{v}__d" AS DECIMAL(38, {n}))'

        if ring == "sum":
            aggs = [f"SUM({' * '.join([mult, *(value(v) for v in aggregated)])})"]
        else:
            aggs = [f"SUM({mult})"] + [f"SUM({mult} * {value(v)})" for v in aggregated]
            aggs += [
                f"SUM({mult} * {value(v)} * {value(w)})"
                for a, v in enumerate(aggregated)
                for w in aggregated[a:]
            ]
        keys = [f't{first[v]}."{v}"' for v in free]
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        source = ", ".join(f"t{i}" for i in range(len(occs)))
        if not free:
            (row,) = cur.execute(f"SELECT {', '.join(aggs)} FROM {source}{where}").fetchall()
            return [tuple(Decimal(0) if a is None else Decimal(a) for a in row)]
        nonzero = " OR ".join(f"{a} <> 0" for a in aggs)
        group = f"GROUP BY {', '.join(keys)} HAVING {nonzero}"
        rows = cur.execute(f"SELECT {', '.join(keys + aggs)} FROM {source}{where} {group}").fetchall()
        return sorted(
            (tuple(r[: len(free)]) + tuple(Decimal(a) for a in r[len(free) :]) for r in rows),
            key=lambda r: r[: len(free)],
        )
    finally:
        cur.close()


def expected_result(config: dict[str, Any], variables: Sequence[str], rows: list[tuple]) -> dict[str, Any]:
    """The engine's result form (floats) of the oracle's exact rows; ``variables`` is the order the
    covariance result lists its variables in."""
    free = list(config.get("free") or [])

    def payload(aggs: tuple) -> Any:
        if config["ring"] == "sum":
            return float(aggs[0])
        features = list(config["features"])
        at = {v: i for i, v in enumerate(features)}
        sums, prods = aggs[1 : 1 + len(features)], aggs[1 + len(features) :]
        pair = {}
        it = iter(prods)
        for a, v in enumerate(features):
            for w in features[a:]:
                pair[v, w] = pair[w, v] = next(it)
        return {
            "count": int(aggs[0]),
            "variables": list(variables),
            "sum": [float(sums[at[v]]) for v in variables],
            "sumprod": [[float(pair[v, w]) for w in variables] for v in variables],
        }

    if not free:
        return {"value": payload(rows[0])}
    k = len(free)
    return {"groups": [{"key": dict(zip(free, r[:k], strict=True)), "value": payload(r[k:])} for r in rows]}


def root_payload(engine: FivmEngine) -> Any:
    """The product of the root views' payloads of a query without free variables."""
    ring = engine.ring
    out = ring.one()
    for view in engine.maint.roots():
        p = view.get(())
        out = ring.zero() if p is None else ring.mul(out, p)
    return out


def assert_exact_units(config: dict[str, Any], engine: FivmEngine, aggs: tuple) -> None:
    """The root payload's ints are the oracle's decimals in units of 10^-N per factor (a sum of int
    variables only is plain ints)."""
    n = config["decimals"]
    p = root_payload(engine)
    if config["ring"] == "sum":
        types = {c: t for _, _, cols, ts in occurrences(config) for c, t in zip(cols, ts, strict=True)}
        int_only = all(types[v] == "int" for v in config["sum"])  # exact already: no decimal scale
        assert p == aggs[0].scaleb(0 if int_only else n * len(config["sum"]))
        return
    assert isinstance(p, Cofactor)
    variables = engine.ring.variables  # type: ignore[attr-defined]
    s, q = p.dense(0, len(variables))
    features = list(config["features"])
    assert p.count == aggs[0]
    for a, v in enumerate(features):
        assert s[variables.index(v)] == aggs[1 + a].scaleb(n)
    it = iter(aggs[1 + len(features) :])
    for a, v in enumerate(features):
        for w in features[a:]:
            assert q[variables.index(v), variables.index(w)] == next(it).scaleb(2 * n)


# --- (a) batching does not matter, and the result is DuckDB's DECIMAL result ------------------------------


@settings(max_examples=80)
@given(data=st.data())
def test_results_are_bit_identical_however_the_stream_is_batched(data: st.DataObject) -> None:
    config = data.draw(exact_query())
    events = data.draw(stream(config))
    one, other = data.draw(batched(events)), data.draw(batched(events))
    a, b = run(config, one), run(config, other)
    assert orjson.dumps(a.result()) == orjson.dumps(b.result())
    assert orjson.dumps(a.result()) == orjson.dumps(run(config, [events]).result())
    assert orjson.dumps(a.result()) == orjson.dumps(run(config, [[e] for e in events]).result())


@settings(max_examples=60)
@given(data=st.data())
def test_results_equal_duckdb_decimal_arithmetic_after_every_batch(data: st.DataObject, con: Any) -> None:
    config = data.draw(exact_query())
    engine = FivmEngine(config)
    db = Database()
    cols = relation_columns(config)
    variables = getattr(engine.ring, "variables", ())
    for batch in data.draw(batched(data.draw(stream(config)))):
        assert engine.apply(batch) == []
        db.apply(batch, cols)
        rows = decimal_oracle(config, db, con)
        assert without_stats(engine.result()) == expected_result(config, variables, rows)
        if not config["free"]:
            assert_exact_units(config, engine, rows[0])


def test_values_round_half_to_even_on_the_decimal_they_spell(con: Any) -> None:
    """2.675 is stored as 2.67499999999999982..., yet it spells 2.675: the tie rounds to even (2.68);
    0.125 and -0.125 round to the even 0.12 and -0.12 (DuckDB's cast rounds ties away from zero)."""
    config = {"relations": {"R": ["x"]}, "ring": "sum", "sum": "x", "decimals": 2}
    for x, want in ((2.675, "2.68"), (0.125, "0.12"), (-0.125, "-0.12"), (0.135, "0.14"), (1e-9, "0.00")):
        engine = run(config, [[UpdateEvent("R", {"x": x}, 1)]])
        assert engine.result()["value"] == float(Decimal(want)) == float(rounded(x, 2))
        assert root_payload(engine) == int(Decimal(want).scaleb(2))


def test_float_mode_depends_on_the_batching_where_exact_mode_does_not() -> None:
    """The difference demonstrated: 0.1 + (0.2 + 0.3) and (0.1 + 0.2) + 0.3 are different floats."""
    events = [UpdateEvent("R", {"x": x}, 1) for x in (0.1, 0.2, 0.3)]
    cuttings = ([events], [events[:1], events[1:]])
    float_config = {"relations": {"R": ["x"]}, "ring": "sum", "sum": "x"}
    floats = {run(float_config, c).result()["value"] for c in cuttings}
    assert len(floats) == 2
    exact = {run({**float_config, "decimals": 1}, c).result()["value"] for c in cuttings}
    assert exact == {0.6}


# --- (b) deletes cancel exactly --------------------------------------------------------------------------


@settings(max_examples=80)
@given(data=st.data())
def test_inserting_then_deleting_everything_empties_every_view(data: st.DataObject) -> None:
    config = data.draw(exact_query())
    events = data.draw(stream(config))
    undo = negated(events)
    random.Random(data.draw(st.integers(0, 2**32))).shuffle(undo)
    engine = run(config, data.draw(batched(events)) + data.draw(batched(undo)))
    assert {name: len(view) for name, view in engine.maint.views.items()} == dict.fromkeys(
        engine.maint.views, 0
    )
    assert all(not s.data for s in engine.maint.supports.values())
    empty = run(config, []).result()
    assert without_stats(engine.result()) == without_stats(empty)


def test_float_mode_leaves_residue_where_exact_mode_empties_the_views() -> None:
    """The same churn in both modes: float sums keep 1e-16 residue, so keys with a zero count stay."""
    config: dict[str, Any] = {
        "relations": {"R": [{"k": "int"}, "a"], "S": [{"k": "int"}, "b"]},
        "ring": "covariance",
    }
    inserts = [UpdateEvent("R", {"k": 1, "a": a}, 1) for a in (0.1, 0.2, 0.3)]
    inserts.append(UpdateEvent("S", {"k": 1, "b": 0.7}, 1))
    deletes = negated(inserts)
    batches = [inserts, deletes[:1], deletes[1:]]
    floats = run(config, batches)
    residue = [p for view in floats.maint.views.values() for p in view.data.values()]
    assert residue and all(p.count == 0 for p in residue)
    exact = run({**config, "decimals": 1}, batches)
    assert all(not view.data for view in exact.maint.views.values())


def test_groups_that_cancel_disappear_in_exact_mode() -> None:
    config: dict[str, Any] = {
        "relations": {"R": [{"g": "str"}, "x"]},
        "ring": "sum",
        "sum": "x",
        "free": ["g"],
    }
    events = [UpdateEvent("R", {"g": "a", "x": x}, 1) for x in (0.1, 0.2, 0.3)]
    batches = [events, negated(events[:1]), negated(events[1:])]
    assert run(config, batches).result()["groups"] != []  # float residue keeps the group
    assert run({**config, "decimals": 2}, batches).result()["groups"] == []


# --- (c) state ---------------------------------------------------------------------------------------------


@settings(max_examples=60)
@given(data=st.data())
def test_snapshot_and_entry_restores_continue_exactly(data: st.DataObject) -> None:
    """Large values make products wider than 64 bits, so the wide integer encoding is exercised too."""
    config = data.draw(exact_query())
    batches = data.draw(batched(data.draw(stream(config, BIG_FLOATS))))
    cut = data.draw(st.integers(0, len(batches)))
    live = run(config, batches[:cut])
    snap = live.snapshot()
    from_snapshot = FivmEngine(config)
    from_snapshot.restore(snap)
    entries = list(live.all_entries())
    random.Random(data.draw(st.integers(0, 2**32))).shuffle(entries)
    from_entries = FivmEngine(config)
    from_entries.restore_entries(entries)
    assert from_snapshot.snapshot() == snap and from_entries.snapshot() == snap
    for batch in batches[cut:]:
        for engine in (live, from_snapshot, from_entries):
            assert engine.apply(batch) == []
        want = orjson.dumps(live.result())
        assert orjson.dumps(from_snapshot.result()) == want and orjson.dumps(from_entries.result()) == want
        assert from_entries.snapshot() == live.snapshot()


@settings(max_examples=40)
@given(data=st.data())
def test_changed_entries_fold_into_all_entries(data: st.DataObject) -> None:
    config = data.draw(exact_query())
    engine = FivmEngine(config)
    store: dict[tuple[str, bytes], bytes] = {}
    for batch in data.draw(batched(data.draw(stream(config, BIG_FLOATS)))):
        engine.apply(batch)
        fold_changes(store, engine.changed_entries())
        assert store == {(n, k): v for n, k, v in engine.all_entries()}
        restored = FivmEngine(config)
        restored.restore_entries([(n, k, v) for (n, k), v in store.items()])
        assert orjson.dumps(restored.result()) == orjson.dumps(engine.result())


def test_float_state_does_not_restore_into_an_exact_engine() -> None:
    config: dict[str, Any] = {"relations": {"R": ["x"]}, "ring": "sum", "sum": "x"}
    floats = run(config, [[UpdateEvent("R", {"x": 0.5}, 1)]])
    with pytest.raises(EngineError, match="written with"):
        FivmEngine({**config, "decimals": 2}).restore(floats.snapshot())


# --- configuration and the model ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"decimals": -1}, "integer from 0"),
        ({"decimals": 2.0}, "integer from 0"),
        ({"decimals": True}, "integer from 0"),
        ({"decimals": 31}, "integer from 0"),
        ({"ring": "count", "sum": None, "decimals": 2}, "applies to rings sum and covariance"),
    ],
)
def test_bad_decimals_are_refused(change: dict[str, Any], message: str) -> None:
    config = {"relations": {"R": ["x"]}, "ring": "sum", "sum": "x", **change}
    with pytest.raises(EngineError, match=message):
        FivmEngine(config)


def test_null_decimals_is_the_float_mode() -> None:
    config: dict[str, Any] = {"relations": {"R": ["x"]}, "ring": "sum", "sum": "x"}
    assert FivmEngine({**config, "decimals": None}).query.raw == FivmEngine(config).query.raw


@settings(max_examples=30)
@given(rows=st.lists(st.tuples(FLOATS, FLOATS), min_size=3, max_size=12))
def test_the_model_fits_the_exact_result(rows: list[tuple[float, float]]) -> None:
    """The regression reads the exact ring's result form (or its root payload with the ring): the fit
    is least squares on the data rounded to the configured decimals."""
    from ivmstream.services.fivm.model import fit

    x = np.array([float(rounded(x, 3)) for x, _ in rows])
    y = np.array([float(rounded(y, 3)) for _, y in rows])
    assume(np.ptp(x) >= 1.0)  # well-conditioned: the comparison below is about inputs, not numerics
    config: dict[str, Any] = {"relations": {"R": ["x", "y"]}, "ring": "covariance", "decimals": 3}
    engine = run(config, [[UpdateEvent("R", {"x": x, "y": y}, 1) for x, y in rows]])
    model = fit(engine.result()["value"], "y", ["x"])
    assert model == fit(root_payload(engine), "y", ["x"], ring=engine.ring)  # type: ignore[arg-type]
    theta, *_ = np.linalg.lstsq(np.column_stack([np.ones(len(x)), x]), y, rcond=None)
    assert model["status"] == "ok"
    tol = 1e-7 * (1.0 + float(np.abs(y).max()))
    assert model["intercept"] == pytest.approx(theta[0], abs=tol * (1.0 + float(np.abs(x).max())))
    assert model["coefficients"]["x"] == pytest.approx(theta[1], abs=tol)


# --- baselines ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["sql-opt", "f-re", "dbt-re"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_baselines_in_exact_decimals_equal_fivm_bit_for_bit(strategy: str, data: st.DataObject) -> None:
    """The degree-indexed baseline and the re-evaluations compute the same exact moments as the
    cofactor ring, however either stream is batched."""
    config = data.draw(exact_query(rings=("covariance",)))
    config["debug"] = False
    events = data.draw(stream(config))
    fivm = run(config, data.draw(batched(events)))
    other = run(config | {"strategy": strategy}, data.draw(batched(events)))
    views = {k: v for k, v in fivm.result().items() if k != "stats"}
    assert orjson.dumps({k: v for k, v in other.result().items() if k != "stats"}) == orjson.dumps(views)


@pytest.mark.parametrize("strategy", ["1-ivm", "1-ivm-ring", "dbt", "dbt-ring"])
def test_strategies_with_float_covariance_payloads_refuse_decimals(strategy: str) -> None:
    config = {
        "relations": {"R": [{"a": "int"}, "x"], "S": [{"a": "int"}, "y"]},
        "ring": "covariance",
        "features": ["x", "y"],
        "decimals": 2,
        "strategy": strategy,
    }
    with pytest.raises(EngineError, match="decimals is supported by"):
        FivmEngine(config)
