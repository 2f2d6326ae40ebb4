"""The F-IVM benchmark's engine-level experiments: E1 (SUM over Housing, also shuffled), E4 (covariance
over Housing), E6 (triangle cofactor), E8 (factorized against listing representations) and E3 (matrix
chain, dense and hash-map).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from bench.fivm_data import housing, housing_config, housing_fanout
from bench.fivm_runs import (
    FEATURES_6,
    FEATURES_10,
    FEATURES_27,
    MATRIX_CHAIN,
    REL_TOL,
    TRIANGLE,
    Stream,
    answer,
    compare_case,
    events,
    rel_diff,
    run_stream,
)
from bench.lib.progress import progress
from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.rings.matrix import (
    add_low_rank,
    chain_product,
    expand,
    factorized_delta,
    first_order_delta,
    row_update,
)

# --- E1: SUM over Housing --------------------------------------------------------------------------------

E1_STRATEGIES = ("fivm", "dbt", "1-ivm", "f-re", "dbt-re")


def e1_sum(scales: Sequence[int], postcodes: int, budget: float) -> list[dict[str, Any]]:
    rows = []
    for s in scales:
        fan = housing_fanout(s)
        stream = Stream(events(housing(s, postcodes, seed=s)))
        expected = fan**3 * sum(float(p) ** 2 for p in range(postcodes))  # Σ_p p² · |join per postcode|

        def check(got: Any, expected: float = expected) -> str | None:
            diff = rel_diff(got["value"], expected)
            return None if diff <= REL_TOL else f"SUM {got['value']} != closed form {expected}"

        progress(f"  E1 s={s}: {stream.tuples:,} tuples")
        configs = {
            st: housing_config("sum", sum=["postcode", "postcode"], strategy=st) for st in E1_STRATEGIES
        }
        rows.append(
            {
                "scale": s,
                "fanout": fan,
                "tuples": stream.tuples,
                "runs": compare_case(configs, stream, budget, "fivm", check),
            }
        )
    return rows


def shuffled(database: Mapping[str, Sequence[dict[str, Any]]], seed: int) -> dict[str, list[dict[str, Any]]]:
    """Each relation's rows in a random order: the generator lists a postcode's rows together, so a batch
    of 1,000 tuples holds few postcodes and a strategy that evaluates once per distinct join value in a
    batch (1-ivm, docs/fivm/baselines.md §3) shares that work among a postcode's rows."""
    rng = random.Random(seed)
    out = {}
    for name, rows in database.items():
        copy = list(rows)
        rng.shuffle(copy)
        out[name] = copy
    return out


def e1_shuffled(scales: Sequence[int], postcodes: int, budget: float) -> list[dict[str, Any]]:
    """E1's query and data, every relation's rows shuffled: fivm, dbt and 1-ivm."""
    rows = []
    for s in scales:
        fan = housing_fanout(s)
        stream = Stream(events(shuffled(housing(s, postcodes, seed=s), seed=s)))
        expected = fan**3 * sum(float(p) ** 2 for p in range(postcodes))

        def check(got: Any, expected: float = expected) -> str | None:
            diff = rel_diff(got["value"], expected)
            return None if diff <= REL_TOL else f"SUM {got['value']} != closed form {expected}"

        progress(f"  E1 shuffled s={s}: {stream.tuples:,} tuples")
        configs = {
            st: housing_config("sum", sum=["postcode", "postcode"], strategy=st)
            for st in ("fivm", "dbt", "1-ivm")
        }
        rows.append(
            {
                "scale": s,
                "fanout": fan,
                "tuples": stream.tuples,
                "runs": compare_case(configs, stream, budget, "fivm", check),
            }
        )
    return rows


# --- E4: covariance over Housing ------------------------------------------------------------------------


def e4_cofactor(
    scales: Sequence[int], postcodes: int, budget: float, widths: Sequence[int]
) -> list[dict[str, Any]]:
    features = {6: FEATURES_6, 10: FEATURES_10, 27: FEATURES_27}
    rows = []
    for s in scales:
        fan = housing_fanout(s)
        stream = Stream(events(housing(s, postcodes, seed=s)))
        for m in widths:
            strategies = ["fivm", "sql-opt", "dbt-ring", "dbt"] + (["1-ivm"] if m <= 10 else [])
            join = postcodes * fan**3

            def check(got: Any, join: int = join) -> str | None:
                return None if got["value"]["count"] == join else f"count {got['value']['count']} != {join}"

            progress(f"  E4 s={s} m={m}: {stream.tuples:,} tuples")
            configs = {st: housing_config("covariance", features[m], strategy=st) for st in strategies}
            # What column execution (docs/fivm/algorithm.md §2.14) buys: the same strategy per tuple; and
            # per tuple with the dense m-by-m payloads dbt-ring keeps, so the two compare like for like.
            configs[FIVM_PER_TUPLE] = housing_config(
                "covariance", features[m], strategy="fivm", execution="per-tuple"
            )
            configs[FIVM_PER_TUPLE_DENSE] = housing_config(
                "covariance", features[m], strategy="fivm", ring_options={"payload": "dense"}
            )
            rows.append(
                {
                    "scale": s,
                    "m": m,
                    "features": list(features[m]),
                    "tuples": stream.tuples,
                    "runs": compare_case(configs, stream, budget, "fivm", check),
                }
            )
    return rows


# --- E6: triangle cofactor ---------------------------------------------------------------------------------


def chung_lu_edges(n: int, vertices: int, rng: random.Random, exponent: float = 0.6) -> list[tuple[int, int]]:
    """``n`` distinct directed edges between vertices drawn with weight 1/(i+1)^exponent (power-law
    degrees, no self-loops)."""
    weights = list(range(vertices))
    cum = []
    acc = 0.0
    for i in weights:
        acc += 1.0 / (i + 1) ** exponent
        cum.append(acc)
    out: dict[tuple[int, int], None] = {}
    while len(out) < n:
        a, b = rng.choices(weights, cum_weights=cum, k=2)
        if a != b:
            out[(a, b)] = None
    return list(out)


def triangle_oracle(db: Mapping[str, Sequence[dict[str, Any]]]) -> dict[str, Any]:
    """Brute force: the number of triangles and Σ A, Σ B, Σ C over them."""
    s_by_b: dict[int, list[int]] = {}
    for r in db["S"]:
        s_by_b.setdefault(r["B"], []).append(r["C"])
    t = {(r["C"], r["A"]) for r in db["T"]}
    count = sa = sb = sc = 0
    for r in db["R"]:
        a, b = r["A"], r["B"]
        for c in s_by_b.get(b, ()):
            if (c, a) in t:
                count += 1
                sa, sb, sc = sa + a, sb + b, sc + c
    return {"count": count, "sum": {"A": sa, "B": sb, "C": sc}}


# The paper's variable order for the triangle: A → B → C, R(A,B) under B, S(B,C) and T(C,A) under C.
TRIANGLE_ORDER: dict[str, Any] = {"A": {"B": {"C": {}}}}
E6_ONE = ("fivm-one", "1-ivm", "1-ivm-ring")


def e6_triangle(sizes: Sequence[int], budget: float) -> list[dict[str, Any]]:
    """Every strategy on the round-robin stream of R, S and T; then the paper's ONE set-up: only R is
    updatable, S and T load first (F-IVM-ONE precomputes V@C = S ⋈ T there) and R streams, with the
    first-order baselines on the same R stream."""
    rows = []
    for n in sizes:
        rng = random.Random(n)
        vertices = max(100, n // 3)
        db = {
            "R": [{"A": a, "B": b} for a, b in chung_lu_edges(n, vertices, rng)],
            "S": [{"B": a, "C": b} for a, b in chung_lu_edges(n, vertices, rng)],
            "T": [{"C": a, "A": b} for a, b in chung_lu_edges(n, vertices, rng)],
        }
        oracle = triangle_oracle(db)
        stream = Stream(events(db))
        static = {r: db[r] for r in ("S", "T")}
        one = Stream(events(static) + events({"R": db["R"]}), load=len(events(static)))
        base: dict[str, Any] = {
            "relations": TRIANGLE,
            "ring": "covariance",
            "features": ["A", "B", "C"],
            "variable_order": TRIANGLE_ORDER,
        }
        configs = {
            "fivm+indicators": base | {"strategy": "fivm", "indicators": True},
            "fivm": base | {"strategy": "fivm"},
            "dbt-ring": base | {"strategy": "dbt-ring"},
            "1-ivm-ring": base | {"strategy": "1-ivm-ring"},
            "1-ivm": base | {"strategy": "1-ivm"},
        }

        def check(got: Any, oracle: dict[str, Any] = oracle) -> str | None:
            value = got["value"]
            sums = dict(zip(value["variables"], value["sum"], strict=True))
            if value["count"] != oracle["count"] or rel_diff(sums, oracle["sum"]) > REL_TOL:
                return f"count/sums {value['count']}, {sums} != brute force {oracle}"
            return None

        progress(f"  E6 N={n:,}: {stream.tuples:,} tuples, {oracle['count']:,} triangles")
        runs = compare_case(configs, stream, budget, "fivm+indicators", check)
        progress(f"  E6 N={n:,} ONE: S and T loaded, {one.tuples:,} updates to R")
        one_runs = compare_case(
            {label: base | {"strategy": label, "updatable": ["R"]} for label in E6_ONE},
            one,
            budget,
            "fivm-one",
            check,
        )
        rows.append(
            {
                "edges_per_relation": n,
                "vertices": vertices,
                "tuples": stream.tuples,
                "triangles": oracle["count"],
                "runs": runs,
                "one": one_runs,
            }
        )
    return rows


# --- E8: factorized against listing representations ------------------------------------------------------

E8_STRATEGIES = ("fact-payloads", "list-payloads", "list-keys")
FIVM_PER_TUPLE = "fivm per-tuple"
FIVM_PER_TUPLE_DENSE = "fivm per-tuple dense"
E8_GOAL_SCALE = 4


def e8_listing(scales: Sequence[int], postcodes: int, budget: float) -> list[dict[str, Any]]:
    free = list(FEATURES_27)
    rows = []
    for s in scales:
        fan = housing_fanout(s)
        stream = Stream(events(housing(s, postcodes, seed=s)))
        join = postcodes * fan**3

        def check(got: Any, join: int = join) -> str | None:
            v = got["value"]
            return None if v["join_size"] == join == v["distinct"] else f"listing {v} != {join} rows"

        progress(f"  E8 s={s}: {stream.tuples:,} tuples, join {join:,} rows")
        configs = {st: housing_config("listing", free=free, strategy=st) for st in E8_STRATEGIES}
        rows.append(
            {
                "scale": s,
                "fanout": fan,
                "tuples": stream.tuples,
                "join_rows": join,
                "runs": compare_case(configs, stream, budget, "fact-payloads", check),
            }
        )
    return rows


# --- E3: matrix chain ------------------------------------------------------------------------------------

FIVM_FACTORIZED = "fivm factorized"


def row_event(row: Sequence[UpdateEvent]) -> UpdateEvent:
    """A one-row change of A2 as the factorized event ``e_i ⊗ v``: factor J = {i: 1}, factor K = v."""
    i = row[0].row["J"]
    spec = [
        {"columns": ["J"], "entries": [[[i], 1]]},
        {"columns": ["K"], "entries": [[[ev.row["K"]], ev.delta] for ev in row]},
    ]
    return UpdateEvent("A2:factorized", {"factors": orjson.dumps(spec).decode()}, 1)


def _timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def dense_chain(n: int, updates: Sequence[tuple[Any, Any]], rng: np.random.Generator) -> dict[str, Any]:
    """REEVAL, 1-IVM and F-IVM on the same updates ``δA2 = U·Vᵀ``; per-update seconds (best and median)
    and the final results checked against a fresh ``A1·A2·A3``."""
    a1, a2, a3 = (rng.random((n, n)) for _ in range(3))
    deltas = [expand(u, v) for u, v in updates]  # what a non-factorized strategy receives
    final_a2 = a2 + sum(deltas)
    truth = chain_product([a1, final_a2, a3])
    out: dict[str, Any] = {}

    def reeval() -> list[float]:
        m2 = a2.copy()
        times = []
        result = chain_product([a1, m2, a3])
        for d in deltas:

            def step(d: Any = d) -> None:
                nonlocal result
                m2.__iadd__(d)
                result = chain_product([a1, m2, a3])

            times.append(_timed(step))
        out["reeval_error"] = _max_rel(result, truth)
        return times

    def first_order() -> list[float]:
        m2, result = a2.copy(), chain_product([a1, a2, a3])
        times = []
        for d in deltas:

            def step(d: Any = d) -> None:
                m2.__iadd__(d)
                result.__iadd__(first_order_delta(a1, d, a3))

            times.append(_timed(step))
        out["1-ivm_error"] = _max_rel(result, truth)
        return times

    def fivm() -> list[float]:
        result = chain_product([a1, a2, a3])
        times = []
        for u, v in updates:

            def step(u: Any = u, v: Any = v) -> None:
                left, right = factorized_delta(a1, u, v, a3)
                add_low_rank(result, left, right, inplace=True)

            times.append(_timed(step))
        out["fivm_error"] = _max_rel(result, truth)
        return times

    for name, fn in (("reeval", reeval), ("1-ivm", first_order), ("fivm", fivm)):
        times = fn()
        out[name] = {
            "median_seconds": statistics.median(times),
            "min_seconds": min(times),
            "updates": len(times),
        }
    for name in ("reeval", "1-ivm", "fivm"):
        if out[f"{name}_error"] > 1e-9:
            raise AssertionError(f"dense matrix chain n={n}: {name} is off by {out[name + '_error']}")
    return out


def _max_rel(a: Any, b: Any) -> float:
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def e3_dense(
    sizes: Sequence[int], rank_n: int, ranks: Sequence[int], updates: int, seed: int
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        ups = [row_update(n, int(rng.integers(n)), rng.random(n)) for _ in range(updates)]
        res = dense_chain(n, ups, rng)
        rows.append({"n": n, **res})
        progress(
            f"  E3 dense rows n={n}: per update reeval {res['reeval']['min_seconds'] * 1e3:.2f} ms, "
            f"1-ivm {res['1-ivm']['min_seconds'] * 1e3:.2f} ms, "
            f"fivm {res['fivm']['min_seconds'] * 1e3:.3f} ms"
        )
    rank_rows = []
    for r in ranks:
        ups = [(rng.random((rank_n, r)), rng.random((rank_n, r))) for _ in range(updates)]
        res = dense_chain(rank_n, ups, rng)
        rank_rows.append({"n": rank_n, "rank": r, **res})
        progress(
            f"  E3 dense rank r={r} n={rank_n}: 1-ivm {res['1-ivm']['min_seconds'] * 1e3:.2f} ms, "
            f"fivm {res['fivm']['min_seconds'] * 1e3:.3f} ms"
        )
    return {"rows": rows, "ranks": rank_rows}


def e3_hashmap(sizes: Sequence[int], updates: int, budget: float, seed: int) -> list[dict[str, Any]]:
    """The chain through the engine (``ring: matrix``, integer entries as multiplicities): A1 and A3
    static, A2 loaded then updated one row at a time (n events per update, small integer changes)."""
    out = []
    for n in sizes:
        rng = random.Random(seed + n)
        load = [
            [
                UpdateEvent(rel, {cols[0]: i, cols[1]: j}, rng.randint(1, 9))
                for i in range(n)
                for j in range(n)
            ]
            for rel, cols in (("A1", ("I", "J")), ("A3", ("K", "L")), ("A2", ("J", "K")))
        ]
        ups = []
        for _ in range(updates):
            row = rng.randrange(n)
            ups.append([UpdateEvent("A2", {"J": row, "K": k}, rng.choice((-2, -1, 1, 2))) for k in range(n)])
        stream = Stream(load + ups, load=3)
        base = {"relations": MATRIX_CHAIN, "ring": "matrix", "free": ["I", "L"], "updatable": ["A2"]}
        configs = {st: base | {"strategy": st} for st in ("fivm", "1-ivm-ring", "reeval")}
        progress(f"  E3 hash-map n={n}: {updates} row updates of {n} entries")
        runs = compare_case(configs, stream, budget, "reeval")
        # The same row updates as one factorized event each, e_i ⊗ v (docs/fivm/algorithm.md §2.13).
        factorized = Stream(load + [[row_event(batch)] for batch in ups], load=3)
        record, engine = run_stream(configs["fivm"], factorized, budget)
        _, reference = run_stream(configs["reeval"], stream, math.inf)
        diff = rel_diff(answer(engine), answer(reference))
        if diff > REL_TOL:
            raise AssertionError(f"E3 n={n}: factorized fivm disagrees with reeval ({diff})")
        record["label"] = FIVM_FACTORIZED
        record["max_rel_diff_vs_reference"] = diff
        runs[FIVM_FACTORIZED] = record
        for rec in runs.values():
            rec["seconds_per_row_update"] = rec["seconds"] / rec["batches"]
        progress(
            f"    {FIVM_FACTORIZED}: {record['seconds_per_row_update'] * 1e3:.2f} ms per row update, "
            f"fivm on the expanded rows {runs['fivm']['seconds_per_row_update'] * 1e3:.2f} ms"
        )
        out.append({"n": n, "row_updates": updates, "runs": runs})
    return out
