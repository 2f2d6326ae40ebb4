"""F-IVM against its baselines, every strategy of an experiment on the same stream in one run.

The experiments of docs/algorithms/fivm-baselines.md at Python scale (workloads: ``bench/fivm_data.py``).
Unless stated, ``FivmEngine`` is fed the round-robin stream (relations in increasing size, one batch of
1,000 tuples each per round) and the throughput is tuples over the total time of the ``apply`` calls.
Each strategy has a time budget (``--budget``): when it runs out the run stops, the throughput over the
processed prefix is reported and the run is marked as timed out.

* **E1** SUM(postcode²) over the Housing join, s = 1..5: fivm, dbt, 1-ivm, f-re, dbt-re.
* **E3** matrix chain ``A = A1·A2·A3`` with updates to A2, dense numpy (single-threaded BLAS): F-IVM's
  factorized update ``A += (A1·U)(Vᵀ·A3)`` against first-order IVM ``A += A1·δA2·A3`` and
  re-evaluation ``A1·A2·A3``, for one-row updates at n = 256, 512, 1,024 and rank-r updates at
  n = 1,024; per-update times. Also the hash-map variant through the engine (``ring: matrix``) at small n.
* **E4** covariance (cofactor ring) on Housing s = 1..3 over m = 6, 10 and 27 features: fivm, sql-opt,
  dbt-ring, the scalar-payload dbt (one query per aggregate), and the scalar-payload 1-ivm at m = 6 and
  10 (its 406 queries at m = 27 would only time out).
* **E6** the triangle R(A,B) ⋈ S(B,C) ⋈ T(C,A) with the degree-3 cofactor over 3 x N edges of a
  power-law (Chung-Lu) graph: fivm, fivm with indicator projections, fivm-one (R and S static, loaded
  first; only T's updates are timed), dbt-ring, 1-ivm-ring, 1-ivm.
* **E8** the full Housing join listed, s = 1..4 (the goal's scale) and 6, 8 (where the gap goes):
  fact-payloads, list-payloads, list-keys.
* **service**: the fivm service through the real ``Worker`` on the embedded broker at the runtime's
  default batch size, against the engine alone on the same events in the same batches.

Every strategy of an experiment must give the same result: counts exactly, floats within a relative
1e-9 (a timed-out run is compared with the reference strategy replaying the same prefix), and the
reference is checked against a closed form or a brute-force count. A disagreement aborts the run.
Stored entries and bytes (the state entries as the engine encodes them) are a deterministic memory
measure.

Writes ``bench/results/fivm.json`` and ``fivm.png``. Run: ``.venv/bin/python bench/fivm.py``
(``--quick`` for a smoke run writing ``fivm_quick.*``). ``--markdown FILE.json`` prints the section of
docs/benchmarks.md from a report.
"""

from __future__ import annotations

import os

# Single-threaded BLAS: the dense matrix runs compare algorithms, not core counts, on a shared machine.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import itertools  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable, Mapping, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import orjson  # noqa: E402

from bench.fivm_data import HOUSING, housing, housing_config, housing_fanout, round_robin  # noqa: E402
from bench.lib.machine import machine_info  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from bench.lib.report import command_line  # noqa: E402
from bench.lib.worker_patches import run_until_caught_up  # noqa: E402
from ivmstream.events import UpdateEvent  # noqa: E402
from ivmstream.runtime.gc_policy import worker_gc  # noqa: E402
from ivmstream.services.fivm.engine import FivmEngine  # noqa: E402
from ivmstream.services.fivm.rings.matrix import (  # noqa: E402
    add_low_rank,
    chain_product,
    expand,
    factorized_delta,
    first_order_delta,
    row_update,
)

RESULTS = REPO / "bench" / "results"
BATCH = 1_000
REL_TOL = 1e-9
SERIES_POINTS = 20  # throughput samples along the stream per run
# Short runs are repeated (best of ``runs``) while their total stays below ``below_seconds``.
REPEATS: dict[str, float] = {"runs": 3, "below_seconds": 10.0}

# E4: features spread over the relations, so every relation's leaf lifts something.
FEATURES_6 = (
    "price",
    "pricerangeshop",
    "sizeinstitution",
    "pricerangerest",
    "averagesalary",
    "distancecitycentre",
)
FEATURES_10 = (*FEATURES_6, "livingarea", "openinghoursshop", "unemployment", "nbtrainstations")
FEATURES_27 = tuple(dict.fromkeys(c for cols in HOUSING.values() for c in cols))  # postcode included

TRIANGLE = {
    "R": [{"A": "int"}, {"B": "int"}],
    "S": [{"B": "int"}, {"C": "int"}],
    "T": [{"C": "int"}, {"A": "int"}],
}
MATRIX_CHAIN = {
    "A1": [{"I": "int"}, {"J": "int"}],
    "A2": [{"J": "int"}, {"K": "int"}],
    "A3": [{"K": "int"}, {"L": "int"}],
}

Batches = list[list[UpdateEvent]]


# --- results: equal across strategies ------------------------------------------------------------------


def rel_diff(a: Any, b: Any) -> float:
    """The largest relative difference between two JSON results: 0 when equal, inf on a structural or
    exact (int, str) mismatch, |a-b|/max(1,|a|,|b|) for floats."""
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        return 0.0 if a == b else math.inf
    if isinstance(a, int) and isinstance(b, int):
        return 0.0 if a == b else math.inf
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) / max(1.0, abs(a), abs(b))
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return math.inf
        return max((rel_diff(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return math.inf
        return max((rel_diff(a[k], b[k]) for k in a), default=0.0)
    return 0.0 if a == b else math.inf


def answer(engine: FivmEngine) -> Any:
    """The result without its diagnostics."""
    out = engine.result()
    out.pop("stats", None)
    return out


# --- one strategy on one stream --------------------------------------------------------------------------


@dataclass
class Stream:
    """Batches of events; the first ``load`` batches load static relations (timed separately)."""

    batches: Batches
    load: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def tuples(self) -> int:
        return sum(map(len, self.batches[self.load :]))


def state_size(engine: FivmEngine) -> tuple[int, int]:
    """(entries, bytes) of the engine's state entries (views, supports, metadata): deterministic."""
    entries = nbytes = 0
    for _name, key, value in engine.all_entries():
        entries += 1
        nbytes += len(key) + len(value)
    return entries, nbytes


def run_stream(config: Mapping[str, Any], stream: Stream, budget: float) -> tuple[dict[str, Any], FivmEngine]:
    """Feed ``stream`` to a fresh engine until it ends or ``budget`` seconds of ``apply`` have passed.

    What earlier cases left on the heap is collected and frozen first, so every strategy runs on the
    same clean heap and the collector's passes skip it (a worker holds only its own engines)."""
    gc.collect()
    gc.freeze()
    try:
        return _run_stream(config, stream, budget)
    finally:
        gc.unfreeze()


def _run_stream(
    config: Mapping[str, Any], stream: Stream, budget: float
) -> tuple[dict[str, Any], FivmEngine]:
    engine = FivmEngine(config)
    t0 = time.perf_counter()
    for b in stream.batches[: stream.load]:
        rejected = engine.apply(b)
        assert not rejected, rejected[:3]
    load_s = time.perf_counter() - t0
    total = stream.tuples
    step = max(1, total // SERIES_POINTS)
    series: list[list[float]] = []
    done = batches = 0
    elapsed = 0.0
    timed_out = False
    next_mark = step
    for b in stream.batches[stream.load :]:
        t0 = time.perf_counter()
        rejected = engine.apply(b)
        elapsed += time.perf_counter() - t0
        assert not rejected, rejected[:3]
        done += len(b)
        batches += 1
        if done >= next_mark or done == total:
            series.append([done, elapsed])
            next_mark = done + step
        if elapsed > budget and done < total:
            timed_out = True
            break
    entries, nbytes = state_size(engine)
    record = {
        "strategy": config.get("strategy", "fivm"),
        "tuples": total,
        "processed": done,
        "batches": batches,
        "seconds": elapsed,
        "tuples_per_second": done / elapsed if elapsed else None,
        "timed_out": timed_out,
        "load_seconds": load_s if stream.load else None,
        "views": len(engine.maint.views),
        "view_entries": sum(len(v) for v in engine.maint.views.values()),
        "view_sizes": {name: len(v) for name, v in sorted(engine.maint.views.items())},
        "stored_entries": entries,
        "stored_bytes": nbytes,
        "series": series,  # [tuples processed, seconds] along the stream
    }
    return record, engine


def compare_case(
    runs: Mapping[str, Mapping[str, Any]],
    stream: Stream,
    budget: float,
    reference: str,
    check: Callable[[Any], str | None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run every labelled config on ``stream``; assert every result equals the reference strategy's on
    the same prefix and, for the reference's full run, ``check`` (a closed form or brute force).

    Short runs are then repeated in rounds over the strategies (``REPEATS``; every repeat must give the
    same result) and the fastest is kept: on a shared machine load comes and goes, and rounds spread it
    over the strategies instead of letting it decide the ratio of two one-second runs."""
    out: dict[str, dict[str, Any]] = {}
    answers: dict[str, Any] = {}
    ref_cfg = runs[reference]
    ref_answer: Any = None
    ref_batches = -1
    order = [reference, *(label for label in runs if label != reference)]
    for label in order:
        record, engine = run_stream(runs[label], stream, budget)
        got = answers[label] = answer(engine)
        del engine
        record["label"] = label
        if label == reference:
            if record["timed_out"]:
                raise RuntimeError(f"the reference strategy {label} timed out; raise --budget")
            if check is not None:
                problem = check(got)
                if problem:
                    raise AssertionError(f"{label}: {problem}")
            ref_answer, ref_batches = got, record["batches"]
        want = ref_answer
        if record["batches"] != ref_batches or want is None:
            prefix = Stream(stream.batches[: stream.load + record["batches"]], stream.load)
            _, ref_engine = run_stream(ref_cfg, prefix, math.inf)
            want = answer(ref_engine)
            del ref_engine
        diff = rel_diff(got, want)
        if diff > REL_TOL:
            raise AssertionError(
                f"{label} disagrees with {reference} (relative difference {diff}): {got} vs {want}"
            )
        record["max_rel_diff_vs_reference"] = diff
        record["seconds_all"] = [record["seconds"]]
        out[label] = record
    for _round in range(int(REPEATS["runs"]) - 1):
        for label in order:
            rec = out[label]
            if rec["timed_out"] or sum(rec["seconds_all"]) >= REPEATS["below_seconds"]:
                continue
            again, engine = run_stream(runs[label], stream, budget)
            diff = rel_diff(answer(engine), answers[label])
            del engine
            if diff > REL_TOL or again["timed_out"]:
                raise AssertionError(f"a repeat of {label} differs from its first run: {diff}")
            rec["seconds_all"].append(again["seconds"])
            if again["seconds"] < rec["seconds"]:
                for key in ("seconds", "tuples_per_second", "series", "load_seconds"):
                    rec[key] = again[key]
    for label in order:
        record = out[label]
        rate = record["tuples_per_second"] or 0.0
        flag = (
            f" TIMED OUT after {record['processed']:,} of {record['tuples']:,}" if record["timed_out"] else ""
        )
        progress(
            f"    {label:>14}: {rate:>11,.0f} tuples/s, {record['views']} views, "
            f"{record['stored_entries']:,} entries, {record['stored_bytes']:,} B{flag}"
        )
    return {label: out[label] for label in runs}


def events(database: Mapping[str, Sequence[dict[str, Any]]], batch: int = BATCH) -> Batches:
    return [[UpdateEvent(rel, row, d) for row in rows] for rel, rows, d in round_robin(database, batch)]


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
    batch (1-ivm, docs/algorithms/fivm-baselines.md §3) shares that work among a postcode's rows."""
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
            # What column execution (docs/algorithms/fivm.md §2.14) buys: the same strategy per tuple.
            configs[FIVM_PER_TUPLE] = housing_config(
                "covariance", features[m], strategy="fivm", execution="per-tuple"
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


def e6_triangle(sizes: Sequence[int], budget: float) -> list[dict[str, Any]]:
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
        # fivm-one: R and S static and loaded first, then T streams (its updates are the timed ones).
        static = {r: db[r] for r in ("R", "S")}
        one = Stream(events(static) + events({"T": db["T"]}), load=len(events(static)))
        base: dict[str, Any] = {"relations": TRIANGLE, "ring": "covariance", "features": ["A", "B", "C"]}
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
        one_runs = compare_case(
            {
                "fivm+indicators": configs["fivm+indicators"],
                "fivm-one": base | {"strategy": "fivm-one", "updatable": ["T"]},
            },
            one,
            budget,
            "fivm+indicators",
            check,
        )
        runs["fivm-one"] = one_runs["fivm-one"]
        rows.append(
            {
                "edges_per_relation": n,
                "vertices": vertices,
                "tuples": stream.tuples,
                "triangles": oracle["count"],
                "runs": runs,
            }
        )
    return rows


# --- E8: factorized against listing representations ------------------------------------------------------

E8_STRATEGIES = ("fact-payloads", "list-payloads", "list-keys")
FIVM_PER_TUPLE = "fivm per-tuple"
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
        for rec in runs.values():
            rec["seconds_per_row_update"] = rec["seconds"] / rec["batches"]
        out.append({"n": n, "row_updates": updates, "runs": runs})
    return out


# --- the service through the Worker ---------------------------------------------------------------------


def service_point(scale: int, postcodes: int, features: Sequence[str], repeats: int = 2) -> dict[str, Any]:
    """The fivm service through the real ``Worker`` on the embedded broker (batch size and checkpoint
    interval at their defaults) against ``FivmEngine`` alone on the same events in the same batches;
    the best of ``repeats`` worker runs (one topic, fresh groups and stores) and of ``repeats + 1``
    engine runs, since a shared machine's noise is of the order of the difference measured."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from bench.lib.broker import produce_all
    from ivmstream.config import build_config
    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.events import encode_event
    from ivmstream.runtime.kafka import producer_settings
    from ivmstream.service import load_service
    from ivmstream.state import open_store

    query = housing_config("covariance", features)
    flat = [ev for batch in events(housing(scale, postcodes, seed=scale)) for ev in batch]
    service = load_service("fivm")
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-fivm-bench-"))
    try:
        with BrokerProcess() as broker:
            topic = f"fivm-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, 1)
            config = build_config(
                service,
                {**query, "input_topic": topic, "output_topic": f"{topic}.out", "dlq_topic": f"{topic}.dlq"},
            )
            batch = config.batch_size
            values = [encode_event(ev) for ev in flat]
            # lz4: the embedded broker keeps at most ~5 MiB per partition and drops the oldest beyond.
            producer = Producer(producer_settings(broker.bootstrap, {"compression.type": "lz4"}))
            produce_all(producer, topic, ((None, v, 0) for v in values))
            probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"probe-{topic}"})
            start, end = probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            probe.close()
            if (start, end) != (0, len(values)):
                raise RuntimeError(f"{topic} holds offsets [{start}, {end}), produced {len(values)}")
            worker_runs = [
                _worker_run(
                    service,
                    config,
                    broker.bootstrap,
                    open_store("rocksdb", f"fivm.{topic}.{i}", state_dir=tmp),
                    f"{topic}-g{i}",
                    end,
                )
                for i in range(repeats)
            ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    engine_times = []
    for _ in range(repeats + 1):
        engine = FivmEngine(query)
        t0 = time.perf_counter()
        for i in range(0, len(flat), batch):
            rejected = engine.apply(flat[i : i + batch])
            assert not rejected, rejected[:3]
        engine_times.append(time.perf_counter() - t0)
    want = engine.result()["value"]
    diff = 0.0
    for run in worker_runs:
        result = run.pop("result")
        diff = max(diff, rel_diff({k: result[k] for k in want}, want))
    if diff > REL_TOL:
        raise AssertionError(f"the worker's result differs from the engine's: {diff}")
    worker_s = min(r["seconds"] for r in worker_runs)
    engine_s = min(engine_times)
    return {
        "query": f"covariance over {len(features)} features, Housing s={scale}, {postcodes:,} postcodes",
        "events": len(flat),
        "batch_size": batch,
        "checkpoint_interval_s": config.checkpoint_interval,
        "repeats": {"worker": repeats, "engine": repeats + 1},
        "worker_runs": worker_runs,
        "engine_seconds_all": engine_times,
        "worker_seconds": worker_s,  # the best run
        "worker_events_per_second": len(flat) / worker_s,
        "engine_seconds": engine_s,  # the best run
        "engine_events_per_second": len(flat) / engine_s,
        "worker_share_of_engine": engine_s / worker_s,
        "max_rel_diff_worker_vs_engine": diff,
    }


def _worker_run(
    service: Any, config: Any, bootstrap: str, store: Any, group: str, end: int
) -> dict[str, Any]:
    """One worker from the start of the topic to caught up (final checkpoint included): seconds from its
    first batch, its checkpoints, its in-memory result at the end."""
    from ivmstream.metrics import RuntimeMetrics
    from ivmstream.runtime import Worker

    metrics = RuntimeMetrics(service.name)
    worker = Worker(service, config, bootstrap, store, group=group, metrics=metrics)
    # Where the worker's time goes: the engine's own calls, timed inside the worker (the checkpoint's
    # total comes from the runtime's metric; encoding the changed state is fivm's share of it).
    spent = {"apply": 0.0, "encode": 0.0, "result": 0.0}
    originals = {name: getattr(FivmEngine, method) for name, method in _ENGINE_CALLS.items()}

    def timed(name: str) -> Callable[..., Any]:
        inner = originals[name]

        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t0

        return call

    for name, method in _ENGINE_CALLS.items():
        setattr(FivmEngine, method, timed(name))
    try:
        seconds, results = run_until_caught_up(worker, {0: end}, timeout=900)
    finally:
        for name, method in _ENGINE_CALLS.items():
            setattr(FivmEngine, method, originals[name])
    checkpoints = {"count": 0.0, "sum": 0.0}
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "ivmstream_checkpoint_seconds_count":
                checkpoints["count"] = sample.value
            elif sample.name == "ivmstream_checkpoint_seconds_sum":
                checkpoints["sum"] = sample.value
    (result,) = results.values()
    return {
        "seconds": seconds,
        "checkpoints": checkpoints["count"],
        "checkpoint_seconds": checkpoints["sum"],
        "engine_apply_seconds": spent["apply"],
        "engine_encode_seconds": spent["encode"],  # changed_entries, inside the checkpoints
        "engine_result_seconds": spent["result"],
        # the runtime's own share: polling, decoding, publishing, the store's write and closing
        "runtime_seconds": seconds - spent["apply"] - spent["result"] - checkpoints["sum"],
        "result": result,
    }


_ENGINE_CALLS = {"apply": "apply", "encode": "changed_entries", "result": "result"}


# --- summary and goals -------------------------------------------------------------------------------------


def _rate(runs: Mapping[str, Any], label: str) -> float | None:
    rec = runs.get(label)
    return rec["tuples_per_second"] if rec else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    s: dict[str, Any] = {}
    e1 = report.get("e1") or []
    if e1:
        s["e1_fivm_over_1ivm"] = {
            r["scale"]: _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "1-ivm")) for r in e1
        }
        s["e1_fivm_over_dbt"] = {
            r["scale"]: _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "dbt")) for r in e1
        }
        s["e1_fivm_over_fre"] = {
            r["scale"]: _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "f-re")) for r in e1
        }
        s["e1_fivm_over_dbtre"] = {
            r["scale"]: _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "dbt-re")) for r in e1
        }
        ratios = [s["e1_fivm_over_1ivm"][r["scale"]] for r in e1]
        last = ratios[-1]
        s["goal_e1"] = {
            "text": f"F-IVM/1-IVM >= 3x at s = {e1[-1]['scale']} and growing with s (as generated)",
            "value": last,
            "growing": bool(last and ratios[0] and last > ratios[0]),
            "monotonic": all(a and b and b >= a for a, b in itertools.pairwise(ratios)),
            "met": bool(last and ratios[0] and last >= 3 and last > ratios[0]),
        }
    e1s = report.get("e1_shuffled") or []
    if e1s:
        s["e1_shuffled_fivm_over_1ivm"] = {
            r["scale"]: _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "1-ivm")) for r in e1s
        }
        s["e1_shuffled_fivm_over_dbt"] = {
            r["scale"]: _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "dbt")) for r in e1s
        }
        ratios = [s["e1_shuffled_fivm_over_1ivm"][r["scale"]] for r in e1s]
        s["goal_e1_shuffled"] = {
            "text": f"the same on the shuffled stream, s = {e1s[-1]['scale']}",
            "value": ratios[-1],
            "growing": bool(ratios[-1] and ratios[0] and ratios[-1] > ratios[0]),
            "monotonic": all(a and b and b >= a for a, b in itertools.pairwise(ratios)),
            "met": bool(ratios[-1] and ratios[0] and ratios[-1] >= 3 and ratios[-1] > ratios[0]),
        }
    e3 = report.get("e3") or {}
    if e3.get("rows"):
        rows = e3["rows"]
        s["e3_row_fivm_over_1ivm"] = {
            r["n"]: r["1-ivm"]["min_seconds"] / r["fivm"]["min_seconds"] for r in rows
        }
        s["e3_row_fivm_over_reeval"] = {
            r["n"]: r["reeval"]["min_seconds"] / r["fivm"]["min_seconds"] for r in rows
        }
        biggest = rows[-1]["n"]
        ranks = e3.get("ranks") or []
        fit = _linear_fit([r["rank"] for r in ranks], [r["fivm"]["min_seconds"] for r in ranks])
        s["e3_rank_fit"] = fit
        crossing = [r["rank"] for r in ranks if r["fivm"]["min_seconds"] >= r["1-ivm"]["min_seconds"]]
        s["e3_rank_fivm_slower_than_1ivm_from"] = crossing[0] if crossing else None
        s["goal_e3"] = {
            "text": f"F-IVM >= 10x over 1-IVM at n = {biggest} for row updates; F-IVM time linear in r",
            "value": s["e3_row_fivm_over_1ivm"][biggest],
            "rank_fit_r2": fit["r2"] if fit else None,
            "met": s["e3_row_fivm_over_1ivm"][biggest] >= 10 and bool(fit and fit["r2"] >= 0.95),
        }
    e4 = report.get("e4") or []
    if e4:
        s["e4_fivm_over_dbt"] = {
            f"s={r['scale']},m={r['m']}": _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "dbt"))
            for r in e4
            if "dbt" in r["runs"]
        }
        s["e4_fivm_over_sqlopt"] = {
            f"s={r['scale']},m={r['m']}": _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "sql-opt"))
            for r in e4
        }
        s["e4_fivm_over_dbtring"] = {
            f"s={r['scale']},m={r['m']}": _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "dbt-ring"))
            for r in e4
        }
        s["e4_columns_over_per_tuple"] = {
            f"s={r['scale']},m={r['m']}": _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], FIVM_PER_TUPLE))
            for r in e4
            if FIVM_PER_TUPLE in r["runs"]
        }
        s["e4_per_tuple_over_dbt"] = {
            f"s={r['scale']},m={r['m']}": _ratio(_rate(r["runs"], FIVM_PER_TUPLE), _rate(r["runs"], "dbt"))
            for r in e4
            if FIVM_PER_TUPLE in r["runs"] and "dbt" in r["runs"]
        }
        at10 = [v for k, v in s["e4_fivm_over_dbt"].items() if k.endswith("m=10") and v]
        s["goal_e4"] = {
            "text": "cofactor F-IVM >= 10x over scalar-payload DBT at m = 10 (every scale)",
            "value": min(at10) if at10 else None,
            "met": bool(at10) and min(at10) >= 10,
        }
    e6 = report.get("e6") or []
    if e6:
        s["e6_rates"] = {
            r["edges_per_relation"]: {label: rec["tuples_per_second"] for label, rec in r["runs"].items()}
            for r in e6
        }
    e8 = report.get("e8") or []
    if e8:

        def speedups(runs: Mapping[str, Any]) -> dict[str, float | None]:
            fact = _rate(runs, "fact-payloads")
            return {k: _ratio(fact, _rate(runs, k)) for k in ("list-payloads", "list-keys")}

        # The goal is stated at s = 4; larger scales show where the gap keeps growing to.
        at = next((r for r in e8 if r["scale"] == E8_GOAL_SCALE), e8[-1])
        last = at["runs"]
        speed = speedups(last)
        size = {
            k: last[k]["stored_bytes"] / last["fact-payloads"]["stored_bytes"]
            for k in ("list-payloads", "list-keys")
        }
        s["e8_speedup_by_scale"] = {str(r["scale"]): speedups(r["runs"]) for r in e8}
        s["e8_first_scale_10x_faster"] = next(
            (r["scale"] for r in e8 if all(v is not None and v >= 10 for v in speedups(r["runs"]).values())),
            None,
        )
        s["e8_speedup_at_goal_scale"] = speed
        s["e8_size_ratio_at_goal_scale"] = size
        s["goal_e8"] = {
            "text": f"factorized >= 10x faster and smaller than listing at s = {at['scale']}",
            "speed": speed,
            "size": size,
            "faster_met": all(v is not None and v >= 10 for v in speed.values()),
            "smaller_met": all(v >= 10 for v in size.values()),
        }
        s["goal_e8"]["met"] = s["goal_e8"]["faster_met"] and s["goal_e8"]["smaller_met"]
    if report.get("service"):
        s["service_worker_share_of_engine"] = report["service"]["worker_share_of_engine"]
    return s


def _linear_fit(xs: Sequence[float], ys: Sequence[float]) -> dict[str, float] | None:
    if len(xs) < 3:
        return None
    slope, intercept = (float(v) for v in np.polyfit(xs, ys, 1))
    pred = [intercept + slope * x for x in xs]
    mean = sum(ys) / len(ys)
    ss_tot = sum((y - mean) ** 2 for y in ys)
    ss_res = sum((y - p) ** 2 for y, p in zip(ys, pred, strict=True))
    return {
        "slope_seconds_per_rank": float(slope),
        "intercept_seconds": float(intercept),
        "r2": float(1 - ss_res / ss_tot),
    }


# --- plot --------------------------------------------------------------------------------------------------


COLORS = {
    "fivm": "tab:blue",
    "fivm+indicators": "tab:cyan",
    "fivm-one": "tab:purple",
    "fact-payloads": "tab:blue",
    "dbt": "tab:orange",
    "dbt-ring": "tab:brown",
    "list-payloads": "tab:orange",
    "1-ivm": "tab:green",
    "1-ivm-ring": "tab:olive",
    "list-keys": "tab:green",
    "sql-opt": "tab:pink",
    "f-re": "tab:red",
    "dbt-re": "tab:gray",
    "reeval": "tab:red",
}


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 4, figsize=(22, 10))
    a = axes.flat
    rate_label = "tuples/s over the total time (x: timed out)"

    def rates(ax: Any, rows: list[dict[str, Any]], xkey: str, title: str, xlabel: str) -> None:
        for label in dict.fromkeys(label for r in rows for label in r["runs"]):
            pts = [(r[xkey], r["runs"][label]) for r in rows if label in r["runs"]]
            xs = [p[0] for p in pts]
            color = COLORS.get(label)
            ax.semilogy(xs, [p[1]["tuples_per_second"] for p in pts], "o-", color=color, label=label)
            for x, (_, rec) in zip(xs, pts, strict=True):
                if rec["timed_out"]:
                    ax.plot([x], [rec["tuples_per_second"]], "x", color=color, ms=12, mew=2)
        ax.set(title=title, xlabel=xlabel, ylabel=rate_label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)

    if report.get("e1"):
        rates(a[0], report["e1"], "scale", "E1 SUM(postcode²), Housing (- - rows shuffled)", "scale s")
        for label in ("fivm", "dbt", "1-ivm"):
            pts = [
                (r["scale"], r["runs"][label]["tuples_per_second"]) for r in report.get("e1_shuffled") or []
            ]
            if pts:
                a[0].semilogy(*zip(*pts, strict=True), "s--", color=COLORS[label], alpha=0.6, mfc="none")
        last = report["e1"][-1]
        for label, rec in last["runs"].items():
            pts = rec["series"]
            fr = [p[0] / rec["tuples"] for p in pts]
            tp = [p[0] / p[1] for p in pts]
            a[1].semilogy(fr, tp, ".-", color=COLORS.get(label), label=label)
        a[1].set(
            title=f"E1 along the stream, s={last['scale']}",
            xlabel="fraction of the stream processed",
            ylabel="tuples/s so far (cumulative)",
        )
        a[1].grid(True, which="both", alpha=0.3)
        a[1].legend(fontsize=8)
    e3 = report.get("e3") or {}
    if e3.get("rows"):
        ax = a[2]
        for name in ("reeval", "1-ivm", "fivm"):
            ax.loglog(
                [r["n"] for r in e3["rows"]],
                [r[name]["min_seconds"] for r in e3["rows"]],
                "o-",
                color=COLORS[name],
                label=f"{name} (dense numpy)",
            )
        hashmap = e3.get("hashmap") or []
        for name, key in (("reeval", "reeval"), ("1-ivm-ring", "1-ivm"), ("fivm", "fivm")):
            pts = [(r["n"], r["runs"][name]["seconds_per_row_update"]) for r in hashmap if name in r["runs"]]
            if pts:
                ax.loglog(
                    *zip(*pts, strict=True), "s:", color=COLORS[key], mfc="none", label=f"{name} (hash-map)"
                )
        ax.set(
            title="E3 matrix chain, one-row updates",
            xlabel="n",
            ylabel="seconds per update (best of the updates)",
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        ax = a[3]
        rk = e3.get("ranks") or []
        for name in ("reeval", "1-ivm", "fivm"):
            ax.plot(
                [r["rank"] for r in rk],
                [r[name]["min_seconds"] for r in rk],
                "o-",
                color=COLORS[name],
                label=name,
            )
        n = rk[0]["n"] if rk else ""
        ax.set(
            title=f"E3 rank-r updates, n={n} (dense numpy)",
            xlabel="rank r",
            ylabel="seconds per update (best of the updates)",
        )
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    if report.get("e4"):
        ax = a[4]
        rows = report["e4"]
        styles = {6: ":", 10: "--", 27: "-"}
        for m in sorted({r["m"] for r in rows}):
            sub = [r for r in rows if r["m"] == m]
            for label in dict.fromkeys(lbl for r in sub for lbl in r["runs"]):
                pts = [(r["scale"], r["runs"][label]) for r in sub if label in r["runs"]]
                xs = [p[0] for p in pts]
                color = COLORS.get(label)
                ax.semilogy(
                    xs,
                    [p[1]["tuples_per_second"] for p in pts],
                    "o" + styles.get(m, "-"),
                    color=color,
                    label=label if m == 27 else None,
                )
                for x, (_, rec) in zip(xs, pts, strict=True):
                    if rec["timed_out"]:
                        ax.plot([x], [rec["tuples_per_second"]], "x", color=color, ms=12, mew=2)
        ax.set(
            title="E4 covariance, Housing (m = 6 dotted, 10 dashed, 27 solid)",
            xlabel="scale s",
            ylabel=rate_label,
        )
        ax.grid(True, which="both", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        for label in ("1-ivm",):
            if label not in labels and any(label in r["runs"] for r in rows):
                handles.append(plt.Line2D([], [], color=COLORS[label], marker="o"))
                labels.append(label)
        ax.legend(handles, labels, fontsize=8)
    if report.get("e6"):
        rates(
            a[5],
            report["e6"],
            "edges_per_relation",
            "E6 triangle cofactor (fivm-one: T's updates only)",
            "edges per relation",
        )
        a[5].set_xticks([r["edges_per_relation"] for r in report["e6"]])
        a[5].set_xticklabels([f"{r['edges_per_relation']:,}" for r in report["e6"]])
    if report.get("e8"):
        ax = a[6]
        rates(
            ax,
            report["e8"],
            "scale",
            "E8 Housing join listed: throughput (o-), stored bytes (s--)",
            "scale s",
        )
        tw = ax.twinx()
        for label in E8_STRATEGIES:
            pts = [(r["scale"], r["runs"][label]["stored_bytes"]) for r in report["e8"] if label in r["runs"]]
            tw.semilogy(*zip(*pts, strict=True), "s--", color=COLORS[label], alpha=0.5, mfc="none")
        tw.set_ylabel("stored bytes (state entries)")
    svc = report.get("service")
    ax = a[7]
    if svc:
        ax.bar(
            ["engine alone", "worker"],
            [svc["engine_events_per_second"], svc["worker_events_per_second"]],
            color=["tab:blue", "tab:gray"],
        )
        ax.set(
            title=f"fivm service, {svc['events']:,} events, batch {svc['batch_size']:,}",
            ylabel="events/s over the total time (best run)",
        )
    else:
        ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


# --- markdown ----------------------------------------------------------------------------------------------


def _fmt_rate(rec: Mapping[str, Any] | None) -> str:
    if rec is None:
        return "-"
    r = rec["tuples_per_second"]
    cell = f"{r:,.0f}"
    if rec["timed_out"]:
        cell += f" (timed out at {rec['processed'] / rec['tuples']:.0%})"
    return cell


def _x(v: float | None) -> str:
    return "-" if v is None else (f"{v:,.1f}x" if v < 100 else f"{v:,.0f}x")


def _ms(rec: Mapping[str, Any], digits: int = 2) -> str:
    return f"{rec['min_seconds'] * 1e3:,.{digits}f} ms"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _met(flag: bool) -> str:
    return "**met**" if flag else "**not met**"


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    s = report["summary"]
    o = report["options"]
    noisy = (
        "; the machine was shared, so absolute rates are noisy and the ratios, measured back to back, "
        "are what to read"
        if m["loadavg_1_5_15"][0] > 1
        else ""
    )
    lines = [
        "## F-IVM against its baselines (`bench/fivm.py`)",
        "",
        f"Command: `.venv/bin/python bench/fivm.py` (the strategies of docs/algorithms/fivm-baselines.md in "
        f"`FivmEngine`, round-robin streams in batches of {BATCH:,} tuples, a {o['budget']:g} s budget per "
        "strategy and case after which the throughput over the processed prefix is reported as *timed out*; "
        f"runs shorter than {o['repeats']['below_seconds']:g} s are repeated, best of up to "
        f"{o['repeats']['runs']:g}). "
        "Results: `bench/results/fivm.json`, `bench/results/fivm.png`. Recorded run "
        f"`{report['run_id']}` ({m['cpu_count']} CPUs, {m['cpu_model']}, Python {m['python']}, "
        f"{report['seconds'] / 60:.1f} min, load average {m['loadavg_1_5_15'][0]} at the end{noisy}). "
        + (
            "Each experiment, and each E8 scale, ran in a fresh process, and each timed run starts on a "
            "collected, frozen heap, so no case inherits what an earlier one left in memory."
            if "--in-process" not in report["command"]
            else "All cases ran in one process (`--in-process`)."
        ),
        "",
        "Every strategy of a case gives the same result (counts exactly, floats within a relative 1e-9; a "
        "timed-out run is compared with the reference strategy on the same prefix), and the reference is "
        "checked against a closed form (Housing: Σ p² · fan-out³, join size postcodes · fan-out³) or a "
        "brute-force triangle count. Throughput is tuples over total time (all relations counted); "
        "stored entries and bytes are the engine's state entries as it encodes them, a deterministic memory "
        f"measure. Housing uses {o['postcodes']:,} postcodes (E1), {o['e4_postcodes']:,} (E4) and "
        f"{o['e8_postcodes']:,} (E8) instead of 25,000, to fit the run in minutes; at scale s three "
        "relations hold max(1, ⌊0.9·s + 0.5⌋) rows per postcode (`bench/fivm_data.py`).",
    ]
    if report.get("e1"):
        lines += [
            "",
            "### E1: SUM(postcode²) over the Housing join",
            "",
            "| s | tuples | " + " | ".join(E1_STRATEGIES) + " | fivm / 1-ivm | fivm / dbt | fivm / f-re |",
            "|---|---|" + "---|" * (len(E1_STRATEGIES) + 3),
        ]
        for r in report["e1"]:
            sc = r["scale"]
            lines.append(
                f"| {sc} | {r['tuples']:,} | "
                + " | ".join(_fmt_rate(r["runs"].get(st)) for st in E1_STRATEGIES)
                + f" | {_x(s['e1_fivm_over_1ivm'][str(sc)])} | {_x(s['e1_fivm_over_dbt'][str(sc)])} "
                f"| {_x(s['e1_fivm_over_fre'][str(sc)])} |"
            )
    if report.get("e1_shuffled"):
        lines += [
            "",
            "The same query with every relation's rows shuffled (the generator lists a postcode's rows "
            "together, as the F-IVM authors' published scale-1 Housing files do, and the stream keeps "
            "each relation's order; so a batch of the stream above holds about 1,000 / fan-out "
            "postcodes, and `1-ivm`, which evaluates each other relation once per distinct postcode in a "
            "batch, shares that work among them):",
            "",
            "| s | fivm | dbt | 1-ivm | fivm / 1-ivm | fivm / dbt |",
            "|---|---|---|---|---|---|",
        ]
        for r in report["e1_shuffled"]:
            sc = str(r["scale"])
            lines.append(
                f"| {sc} | "
                + " | ".join(_fmt_rate(r["runs"].get(st)) for st in ("fivm", "dbt", "1-ivm"))
                + f" | {_x(s['e1_shuffled_fivm_over_1ivm'][sc])} | {_x(s['e1_shuffled_fivm_over_dbt'][sc])} |"
            )
    for key in ("goal_e1", "goal_e1_shuffled"):
        if key in s:
            g = s[key]
            lines += [
                "",
                f"Goal: {g['text']}: {_met(g['met'])} ({_x(g['value'])}; larger than at the smallest s: "
                f"{_yes(g['growing'])}; growing at every step: {_yes(g['monotonic'])}).",
            ]
    e3 = report.get("e3") or {}
    if e3.get("rows"):
        lines += [
            "",
            "### E3: matrix chain A = A1·A2·A3, updates to A2",
            "",
            "Dense numpy variant (single-threaded OpenBLAS), per-update time (the fastest of "
            f"{e3['rows'][0]['fivm']['updates']} updates; the JSON has the medians too): re-evaluation "
            "`A1·A2·A3`, first-order IVM "
            "`A += A1·δA2·A3` with δA2 as a full matrix, F-IVM `A += (A1·u)(vᵀ·A3)`. Final results equal a "
            "fresh product within 1e-9.",
            "",
            "| n | reeval | 1-ivm | fivm | fivm / 1-ivm | fivm / reeval |",
            "|---|---|---|---|---|---|",
        ]
        for r in e3["rows"]:
            lines.append(
                f"| {r['n']:,} | {_ms(r['reeval'])} | {_ms(r['1-ivm'])} | {_ms(r['fivm'], 3)} "
                f"| {_x(s['e3_row_fivm_over_1ivm'][str(r['n'])])} "
                f"| {_x(s['e3_row_fivm_over_reeval'][str(r['n'])])} |"
            )
        if e3.get("ranks"):
            lines += [
                "",
                f"Rank-r updates `δA2 = U·Vᵀ` at n = {e3['ranks'][0]['n']:,}:",
                "",
                "| r | reeval | 1-ivm | fivm |",
                "|---|---|---|---|",
            ]
            for r in e3["ranks"]:
                lines.append(
                    f"| {r['rank']} | {_ms(r['reeval'])} | {_ms(r['1-ivm'])} | {_ms(r['fivm'], 3)} |"
                )
            fit = s["e3_rank_fit"]
            if fit:
                lines += [
                    "",
                    f"F-IVM's time fits {fit['intercept_seconds'] * 1e3:.3f} ms "
                    f"+ r · {fit['slope_seconds_per_rank'] * 1e3:.3f} ms "
                    f"(R² = {fit['r2']:.3f}); "
                    + (
                        f"it is slower than 1-IVM from r = {s['e3_rank_fivm_slower_than_1ivm_from']}."
                        if s["e3_rank_fivm_slower_than_1ivm_from"]
                        else "it stays faster than 1-IVM at every measured r."
                    ),
                ]
        if e3.get("hashmap"):
            lines += [
                "",
                "Hash-map variant through the engine (`ring: matrix`, integer entries as multiplicities, A1 "
                "and A3 static, a row update is n events; the event format has no rank-1 form, so F-IVM "
                "cannot use the factorization here):",
                "",
                "| n | fivm | 1-ivm-ring | reeval |",
                "|---|---|---|---|",
            ]
            for r in e3["hashmap"]:
                cells = [
                    f"{r['runs'][k]['seconds_per_row_update'] * 1e3:,.1f} ms"
                    for k in ("fivm", "1-ivm-ring", "reeval")
                ]
                lines.append(f"| {r['n']} | " + " | ".join(cells) + " |")
        g = s["goal_e3"]
        lines += [
            "",
            f"Goal: {g['text']}: {_met(g['met'])} ({_x(g['value'])} at the largest n; rank fit R² "
            f"{g['rank_fit_r2']:.3f}).",
        ]
    if report.get("e4"):
        labels = ["fivm", FIVM_PER_TUPLE, "sql-opt", "dbt-ring", "dbt", "1-ivm"]
        lines += [
            "",
            "### E4: covariance (cofactor ring) over the Housing join",
            "",
            "Throughput (tuples/s), then views and stored entries / bytes per strategy. `dbt` and `1-ivm` "
            "run one query per aggregate (1 + m + m(m+1)/2 of them). `fivm` runs relation deltas in "
            "columns (docs/algorithms/fivm.md §2.14), the service's default; `fivm per-tuple` is the same "
            "strategy with `execution: per-tuple`; every baseline runs per tuple.",
            "",
            "| s | m | " + " | ".join(labels) + " | fivm / dbt | fivm / dbt-ring | fivm / sql-opt |",
            "|---|---|" + "---|" * (len(labels) + 3),
        ]
        for r in report["e4"]:
            k = f"s={r['scale']},m={r['m']}"
            lines.append(
                f"| {r['scale']} | {r['m']} | "
                + " | ".join(_fmt_rate(r["runs"].get(st)) for st in labels)
                + f" | {_x(s['e4_fivm_over_dbt'].get(k))} | {_x(s['e4_fivm_over_dbtring'].get(k))} "
                f"| {_x(s['e4_fivm_over_sqlopt'].get(k))} |"
            )
        lines += ["", "| s | m | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
        for r in report["e4"]:
            cells = []
            for st in labels:
                rec = r["runs"].get(st)
                cells.append(
                    "-"
                    if rec is None
                    else f"{rec['views']} views, {rec['stored_entries']:,} / "
                    f"{rec['stored_bytes'] / 1e6:,.1f} MB"
                )
            lines.append(f"| {r['scale']} | {r['m']} | " + " | ".join(cells) + " |")
        g = s["goal_e4"]
        lines += ["", f"Goal: {g['text']}: {_met(g['met'])} (smallest ratio {_x(g['value'])})."]
        per_tuple = [v for k, v in s.get("e4_per_tuple_over_dbt", {}).items() if k.endswith("m=10") and v]
        gain = [v for v in s.get("e4_columns_over_per_tuple", {}).values() if v]
        if per_tuple and gain:
            lines[-1] += (
                f" Per tuple, fivm is {_x(min(per_tuple))} to {_x(max(per_tuple))} faster than scalar dbt "
                f"at m = 10; column execution is {_x(min(gain))} to {_x(max(gain))} faster than per tuple."
            )
        at27 = [v for k, v in s["e4_fivm_over_dbt"].items() if k.endswith("m=27") and v]
        if at27:
            lines[-1] += (
                f" At m = 27 (406 aggregates) F-IVM is {_x(min(at27))} to {_x(max(at27))} faster than "
                "scalar dbt."
            )
        small = [v for k, v in s["e4_fivm_over_sqlopt"].items() if not k.endswith("m=27") and v]
        if small and min(small) < 1:
            lines[-1] += (
                " At m = 6 and 10 `sql-opt` (the same views, payloads as dicts of monomials) is faster than "
                "F-IVM's numpy cofactor blocks, likely because at these widths a numpy call's fixed cost "
                "outweighs the few scalar operations it replaces (not measured separately)."
            )
    if report.get("e6"):
        labels = list(report["e6"][0]["runs"])
        lines += [
            "",
            "### E6: triangle with the degree-3 cofactor",
            "",
            "R(A,B) ⋈ S(B,C) ⋈ T(C,A), each relation N distinct edges of a Chung-Lu power-law graph on N/3 "
            "vertices. fivm-one: R and S static, loaded first (not timed); its rate is over T's updates "
            "only. Tuples/s, then stored entries.",
            "",
            "| N | triangles | " + " | ".join(labels) + " |",
            "|---|---|" + "---|" * len(labels),
        ]
        for r in report["e6"]:
            lines.append(
                f"| {r['edges_per_relation']:,} | {r['triangles']:,} | "
                + " | ".join(_fmt_rate(r["runs"][k]) for k in labels)
                + " |"
            )
        for r in report["e6"]:
            lines.append(
                f"| {r['edges_per_relation']:,} (entries) | | "
                + " | ".join(f"{r['runs'][k]['stored_entries']:,}" for k in labels)
                + " |"
            )
    if report.get("e8"):
        lines += [
            "",
            "### E8: the Housing join listed: factorized against listing payloads and listing keys",
            "",
            "| s | join rows | "
            + " | ".join(E8_STRATEGIES)
            + " | stored MB ("
            + " / ".join(E8_STRATEGIES)
            + ") |",
            "|---|---|" + "---|" * (len(E8_STRATEGIES) + 1),
        ]
        for r in report["e8"]:
            lines.append(
                f"| {r['scale']} | {r['join_rows']:,} | "
                + " | ".join(_fmt_rate(r["runs"][k]) for k in E8_STRATEGIES)
                + " | "
                + " / ".join(f"{r['runs'][k]['stored_bytes'] / 1e6:,.1f}" for k in E8_STRATEGIES)
                + " |"
            )
        g = s["goal_e8"]
        speed = ", ".join(f"{_x(v)} over {k}" for k, v in g["speed"].items())
        size = ", ".join(f"{_x(v)} over {k}" for k, v in g["size"].items())
        lines += [
            "",
            f"Goal: {g['text']}: faster {_met(g['faster_met'])} ({speed}), "
            f"smaller {_met(g['smaller_met'])} ({size}).",
        ]
        by_scale = s["e8_speedup_by_scale"]
        growth = ", ".join(
            f"s = {sc}: {_x(v['list-payloads'])} / {_x(v['list-keys'])}" for sc, v in by_scale.items()
        )
        first_10x = s["e8_first_scale_10x_faster"]
        lines[-1] += (
            f" Speed ratio over list-payloads / list-keys by scale: {growth}"
            + (f"; 10x over both from s = {first_10x}" if first_10x is not None else "; 10x not reached")
            + ". The listing holds fan-out³ rows per postcode and an update adds fan-out² of them; the"
            " factorized views grow linearly and an update costs O(1) views."
        )
    svc = report.get("service")
    if svc:
        best = min(svc["worker_runs"], key=lambda r: r["seconds"])
        lines += [
            "",
            "### The fivm service through the worker",
            "",
            f"{svc['query']}, {svc['events']:,} events through the real `Worker` on the embedded broker "
            f"(batch size {svc['batch_size']:,}, checkpoints every {svc['checkpoint_interval_s']:g} s), and "
            "`FivmEngine` alone on the same events in the same batches, same run: the worker runs at "
            f"{svc['worker_events_per_second']:,.0f} events/s, the engine alone at "
            f"{svc['engine_events_per_second']:,.0f}; the engine's share of the worker's time is "
            f"{svc['worker_share_of_engine']:.2f} (best of {svc['repeats']['worker']} worker and "
            f"{svc['repeats']['engine']} engine runs; in the best worker run {best['checkpoints']:.0f} "
            f"checkpoint{'' if best['checkpoints'] == 1 else 's'} took {best['checkpoint_seconds']:.2f} s "
            f"of {best['seconds']:.2f} s). "
            + (
                f"Of that run's {best['seconds']:.2f} s, the engine's `apply` took "
                f"{best['engine_apply_seconds']:.2f} s and its results "
                f"{best['engine_result_seconds']:.2f} s, "
                f"the checkpoint {best['checkpoint_seconds']:.2f} s (of which fivm encoding the changed "
                f"state entries {best['engine_encode_seconds']:.2f} s, the store's write the rest), and the "
                f"runtime's polling, decoding, publishing and closing {best['runtime_seconds']:.2f} s. "
                if "engine_apply_seconds" in best
                else ""
            )
            + "Results equal.",
        ]
    lines += [
        "",
        "The section above is printed by "
        "`.venv/bin/python bench/fivm.py --markdown bench/results/fivm.json`.",
    ]
    return "\n".join(lines) + "\n"


# --- main --------------------------------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=30.0, help="seconds of apply() per strategy and case")
    p.add_argument("--repeats", type=int, default=3, help="best of this many runs for short runs")
    p.add_argument("--postcodes", type=int, default=10_000, help="E1 Housing postcodes")
    p.add_argument("--e1-scales", default="1,2,3,4,5")
    p.add_argument("--e3-sizes", default="256,512,1024")
    p.add_argument("--e3-ranks", default="1,2,4,8,16,32,64")
    p.add_argument("--e3-updates", type=int, default=10, help="updates per dense matrix case")
    p.add_argument("--e3-hashmap-sizes", default="16,32")
    p.add_argument("--e4-scales", default="1,2,3")
    p.add_argument("--e4-widths", default="6,10,27")
    p.add_argument("--e4-postcodes", type=int, default=3_000)
    p.add_argument("--e6-sizes", default="10000,20000,30000")
    p.add_argument("--e8-scales", default="1,2,3,4,6,8")
    p.add_argument("--e8-postcodes", type=int, default=3_000)
    p.add_argument("--service-postcodes", type=int, default=5_000, help="0: skip the worker run")
    p.add_argument("--experiments", default="e1,e3,e4,e6,e8,service")
    p.add_argument("--out", default=str(RESULTS / "fivm.json"))
    p.add_argument("--markdown", metavar="FILE.json", help="print the docs section of a stored report")
    p.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, a short budget")
    p.add_argument(
        "--in-process",
        action="store_true",
        help="run every case in this process (default: each experiment, and each E8 scale, in a fresh one)",
    )
    p.add_argument("--part", metavar="FILE.json", help=argparse.SUPPRESS)  # a child's cases, unmerged
    p.add_argument("--part-e8-scale", type=int, help=argparse.SUPPRESS)  # a child's one E8 scale
    args = p.parse_args(argv)
    if args.markdown:
        print(markdown(orjson.loads(Path(args.markdown).read_bytes())), end="")
        return 0
    if args.quick:
        args.budget, args.postcodes, args.e1_scales = 5.0, 200, "1,3"
        args.e3_sizes, args.e3_ranks, args.e3_updates, args.e3_hashmap_sizes = "32,64", "1,2,4", 3, "6"
        args.e4_scales, args.e4_widths, args.e4_postcodes = "1,2", "6,27", 100
        args.e6_sizes, args.e8_scales, args.e8_postcodes, args.service_postcodes = "300,600", "1,2", 100, 100
        if args.out == str(RESULTS / "fivm.json"):
            args.out = str(RESULTS / "fivm_quick.json")
    if args.part_e8_scale is not None:
        args.e8_scales = str(args.part_e8_scale)
    wanted = set(args.experiments.split(","))
    REPEATS["runs"] = args.repeats
    started = time.time()
    report: dict[str, Any] = {
        "benchmark": "fivm",
        "run_id": uuid.uuid4().hex[:8],
        "started": started,
        "command": command_line("bench/fivm.py", argv),
        "quick": args.quick,
        "options": {
            "budget": args.budget,
            "repeats": REPEATS,
            "batch": BATCH,
            "postcodes": args.postcodes,
            "e4_postcodes": args.e4_postcodes,
            "e8_postcodes": args.e8_postcodes,
            "service_postcodes": args.service_postcodes,
            "rel_tol": REL_TOL,
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        },
    }
    if not args.in_process and not args.part:
        report.update(run_isolated(sys.argv[1:] if argv is None else argv, wanted, args))
    else:
        report.update(run_cases(wanted, args))
    if args.part:
        Path(args.part).write_bytes(orjson.dumps(report, option=orjson.OPT_NON_STR_KEYS))
        return 0
    report = orjson.loads(orjson.dumps(report, option=orjson.OPT_NON_STR_KEYS))
    report["summary"] = orjson.loads(orjson.dumps(summarize(report), option=orjson.OPT_NON_STR_KEYS))
    report["seconds"] = time.time() - started
    report["machine"] = machine_info()
    out = Path(args.out).with_suffix(".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    plot(report, out.with_suffix(".png"))
    print(orjson.dumps(report["summary"], option=orjson.OPT_INDENT_2).decode())
    return 0


EXPERIMENTS = ("e1", "e3", "e4", "e6", "e8", "service")
RESULT_KEYS = {"e1": ("e1", "e1_shuffled"), "e3": ("e3",), "e4": ("e4",), "e6": ("e6",), "e8": ("e8",)}


def run_isolated(argv: Sequence[str], wanted: set[str], args: argparse.Namespace) -> dict[str, Any]:
    """Each experiment, and each E8 scale, in a fresh interpreter, one after the other: a case's timing
    must not depend on what earlier cases left in the process (a fragmented heap slowed the factorized
    E8 runs by a fifth), as a worker process holds only its own engines. Children get this command
    line with one experiment (and scale) and write their cases to a file merged here."""
    children: list[tuple[str, list[str]]] = []
    for name in EXPERIMENTS:
        if name not in wanted or (name == "service" and not args.service_postcodes):
            continue
        if name == "e8":
            children += [
                ("e8", ["--experiments", "e8", "--part-e8-scale", str(s)]) for s in _ints(args.e8_scales)
            ]
        else:
            children.append((name, ["--experiments", name]))
    merged: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fivm-bench-") as tmp:
        for n, (name, extra) in enumerate(children):
            part = Path(tmp) / f"{n}.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), *argv, *extra, "--part", str(part)]
            proc = subprocess.run(cmd, cwd=REPO, check=False)
            if proc.returncode != 0:
                raise RuntimeError(
                    f"the {name} case ({' '.join(extra)}) failed with exit code {proc.returncode}"
                )
            got = orjson.loads(part.read_bytes())
            for key in RESULT_KEYS.get(name, (name,)):
                if key not in got:
                    continue
                if isinstance(got[key], list):
                    merged.setdefault(key, []).extend(got[key])
                else:
                    merged[key] = got[key]
    return merged


def run_cases(wanted: set[str], args: argparse.Namespace) -> dict[str, Any]:
    """The wanted experiments, in this process."""
    report: dict[str, Any] = {}
    with worker_gc():  # the GC policy a worker process runs under, for the engine runs too
        if "e1" in wanted:
            report["e1"] = e1_sum(_ints(args.e1_scales), args.postcodes, args.budget)
            report["e1_shuffled"] = e1_shuffled(_ints(args.e1_scales), args.postcodes, args.budget)
        if "e3" in wanted:
            report["e3"] = e3_dense(
                _ints(args.e3_sizes), _ints(args.e3_sizes)[-1], _ints(args.e3_ranks), args.e3_updates, 3
            )
            report["e3"]["hashmap"] = e3_hashmap(
                _ints(args.e3_hashmap_sizes), args.e3_updates, args.budget, 3
            )
        if "e4" in wanted:
            report["e4"] = e4_cofactor(
                _ints(args.e4_scales), args.e4_postcodes, args.budget, _ints(args.e4_widths)
            )
        if "e6" in wanted:
            report["e6"] = e6_triangle(_ints(args.e6_sizes), args.budget)
        if "e8" in wanted:
            report["e8"] = e8_listing(_ints(args.e8_scales), args.e8_postcodes, args.budget)
        if "service" in wanted and args.service_postcodes:
            progress("  service: the worker on the embedded broker")
            report["service"] = service_point(1, args.service_postcodes, FEATURES_27)
    return report


if __name__ == "__main__":
    sys.exit(main())
