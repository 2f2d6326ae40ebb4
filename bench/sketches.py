"""Benchmark of the sketches service (docs/sketches-benchmark.md): IMP against recapture, at Python scale.

Experiments (docs/algorithms/sketches.md §9):

* ``groups``: Q_groups ``SELECT a, AVG(b) FROM t GROUP BY a HAVING AVG(c) < 1.5·G`` over N rows with G
  groups; ``having``: Q_having with 1, 2 and 3 HAVING aggregates at G = 5,000. Batches of Δ = 10, 100,
  1,000 tuples, half deletes of stored rows and half inserts (copies of stored rows under fresh ids).
  Partition ``a`` (S2), 500 equal-width ranges.
* ``breakeven``: Q_groups (G = 1,000) with Δ from 0.1 % to 10 % of the table.
* ``frag``: #fragments 10 … 5,000 for a narrow-sketch partition (``a``, S2) and a wide one (``id``,
  maintained only: unsafe for HAVING), Δ = 1,000.
* ``tpch``: TPC-H Q1, Q3, Q5, Q6, Q10, Q14 at SF 0.01 and 0.1 (``tpchgen-cli``), lineitem batches of
  Δ = 10, 100, 1,000; partition ``l_orderkey`` into 1,000 equal-width ranges. The join queries also
  time IMP with probe joins (``join: probe``) on the same batches.
* ``mixed``: 100 operations alternating update batches and queries (1U1Q, 1U5Q, 5U1Q; Δ = 20, 200) for
  ``imp`` (maintain, answer over the sketch), ``full`` (recapture when stale, answer over the sketch)
  and ``nosketch`` (answer over everything).
* ``worker``: the demo workload through the real worker on the embedded broker.

Baselines for a batch: ``imp`` = ``SketchEngine.maintain``; Python ``full`` = the same engine's capture
over the whole store (what strategy ``full`` does when the sketch is stale); DuckDB ``full`` = the capture
rewritten to SQL (``capture_sql``) run by DuckDB, a vectorised engine, over a copy to which the batch was
applied (moving the batch into DuckDB is recorded as ``duckdb_apply_batch_s`` but not counted, as the
Python baseline's store update is not). Every IMP sketch is checked against both captures.

    python -m bench.sketches              # ~20 min on a loaded 2-core VM; JSON + PNG in bench/results/
    python -m bench.sketches --quick      # smoke test (small sizes)
    python -m bench.sketches --markdown   # print the tables of docs/sketches-benchmark.md from the JSON
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

import duckdb  # noqa: E402
import sqlglot  # noqa: E402

from bench.lib.machine import machine_info  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from bench.lib.report import command_line  # noqa: E402
from bench.lib.worker_patches import run_until_caught_up  # noqa: E402
from ivmstream.events.tpch import TPCH_TABLES, parse_tpch_line  # noqa: E402
from ivmstream.services.sketches import plan as P  # noqa: E402
from ivmstream.services.sketches.capture_sql import FRAG, branches, capture_sql  # noqa: E402
from ivmstream.services.sketches.engine import SketchEngine  # noqa: E402
from ivmstream.services.sketches.values import exact  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SYNTH = {"t": {"id": "int", "a": "int", "b": "int", "c": "int", "d": "int", "e": "int"}}
SLOPES = {"b": 2, "c": 3, "d": 4, "e": 3}


def timed(fn: Callable[[], Any]) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def options(query: str, relations: Any, partition: Mapping[str, Any], **flags: Any) -> dict[str, Any]:
    return {
        "query": query,
        "relations": relations,
        "partition": dict(partition),
        "strategy": flags.get("strategy", "imp"),
        "selection_pushdown": True,
        "bloom": flags.get("bloom", False),
        "allow_unsafe": flags.get("allow_unsafe", False),
        "join": flags.get("join", "mat"),
        "monotone_aggregates": flags.get("monotone_aggregates", False),
        "top_m": flags.get("top_m", 0),
        "instances": flags.get("instances", []),
    }


# --- a sketched database with the three ways of keeping its sketch fresh ---------------------------------


class Updates:
    """Batches against a table: half deletes of stored rows, half inserts of copies of stored rows
    under fresh keys (``make``)."""

    def __init__(self, rows: Sequence[tuple[Any, ...]], seed: int) -> None:
        self.live = list(rows)
        self.rng = random.Random(seed)
        self.next_id = 10**9

    def batch(self, size: int, make: Callable[[tuple[Any, ...], int], tuple[Any, ...]]) -> dict:
        live, rng = self.live, self.rng
        delta: dict[tuple[Any, ...], int] = {}
        for _ in range(size // 2):
            i = rng.randrange(len(live))
            row = live[i]
            live[i] = live[-1]
            live.pop()
            delta[row] = delta.get(row, 0) - 1
        for _ in range(size - size // 2):
            self.next_id += 1
            row = make(live[rng.randrange(len(live))], self.next_id)
            live.append(row)
            delta[row] = delta.get(row, 0) + 1
        return {r: n for r, n in delta.items() if n}


class Bench:
    """One query over one database: the IMP engine, and a DuckDB copy with a fragment column per table."""

    def __init__(
        self,
        opts: Mapping[str, Any],
        data: Mapping[str, dict[tuple[Any, ...], int]],
        seed: int,
        probe: bool = False,
    ) -> None:
        self.engine = SketchEngine(opts)
        self.updates = {t: Updates(list(rows), seed) for t, rows in data.items() if t in self.engine.tables}
        read = {t: dict(r) for t, r in data.items() if t in self.updates}
        self.bootstrap_s = timed(lambda: self.engine.maintain(read))
        # The same query with probe joins, fed the same batches (§2.4.5).
        self.probe = SketchEngine({**opts, "join": "probe"}) if probe else None
        if self.probe is not None:
            self.probe.maintain(read)
        self.duck = duckdb.connect()
        self.duck.execute("SET threads TO 2")
        for name, table in self.engine.tables.items():
            typed = zip(table.sql_columns, table.types, strict=True)
            cols = ", ".join(f"{c} {_duck_type(t)}" for c, t in typed)
            self.duck.execute(f"CREATE TABLE __p_{name} ({cols}, {FRAG} BIGINT)")
            self._insert(name, [r for r, n in data.get(name, {}).items() for _ in range(n)])
        columns = {n: t.sql_columns for n, t in self.engine.tables.items()}
        self.capture_queries = [
            capture_sql(b, columns, "duckdb")
            for b in branches(sqlglot.parse_one(opts["query"]))  # type: ignore[arg-type]
        ]

    def batch(self, table: str, size: int, make: Callable[[tuple[Any, ...], int], tuple[Any, ...]]) -> dict:
        return {table: self.updates[table].batch(size, make)}

    def imp(self, batch: Mapping[str, Mapping[tuple[Any, ...], int]]) -> float:
        return timed(lambda: self.engine.maintain(batch))

    def imp_probe(self, batch: Mapping[str, Mapping[tuple[Any, ...], int]]) -> float:
        probe = self.probe
        assert probe is not None
        return timed(lambda: probe.maintain(batch))

    def full_python(self) -> float:
        return timed(lambda: P.capture_sketch(self.engine.compiled.root, self.engine.view(None)))

    def _insert(self, name: str, rows: Sequence[tuple[Any, ...]], table: str | None = None) -> None:
        """Rows of ``name`` with their fragment id (a stored column, as a fragment-clustered table keeps)."""
        spec = self.engine.specs.get(name)
        frag = (lambda r: spec.offset + spec.fragment(r[spec.position])) if spec else (lambda r: -1)
        cols = [*self.engine.tables[name].sql_columns, FRAG]
        _insert(self.duck, table or f"__p_{name}", cols, [(*r, frag(r)) for r in rows])

    def duck_apply(self, batch: Mapping[str, Mapping[tuple[Any, ...], int]]) -> None:
        """Deletes by the row's key columns (all but the fragment), then inserts."""
        for name, delta in batch.items():
            cols = self.engine.tables[name].sql_columns
            dels = [r for r, n in delta.items() if n < 0]
            if dels:
                self.duck.execute(f"CREATE OR REPLACE TEMP TABLE __del AS SELECT * FROM __p_{name} LIMIT 0")
                self._insert(name, dels, "__del")
                keys = " AND ".join(f"__p_{name}.{c} IS NOT DISTINCT FROM __del.{c}" for c in cols)
                self.duck.execute(f"DELETE FROM __p_{name} USING __del WHERE {keys}")
            self._insert(name, [r for r, n in delta.items() for _ in range(max(n, 0))])

    def duck_capture(self) -> int:
        sketch = 0
        for q in self.capture_queries:
            for row in self.duck.execute(q).fetchall():
                for v in row:
                    if v is not None and v >= 0:
                        sketch |= 1 << int(v)
        return sketch

    def full_duckdb(self, batch: Mapping[str, Mapping[tuple[Any, ...], int]]) -> tuple[float, float]:
        """(seconds of the recapture, seconds spent moving the batch into DuckDB). Only the recapture
        counts as the baseline's time: the updates reach the database whatever keeps the sketch, and
        the Python baseline's time does not include its store update either."""
        apply_s = timed(lambda: self.duck_apply(batch))
        return timed(self.duck_capture), apply_s

    def check(self) -> None:
        want = P.capture_sketch(self.engine.compiled.root, self.engine.view(None))
        if self.engine.sketch() != want or self.duck_capture() != want:
            raise AssertionError("IMP, Python capture and DuckDB capture disagree on the sketch")
        if self.probe is not None and self.probe.sketch() != want:
            raise AssertionError("IMP with probe joins disagrees with the capture")


def _duck_type(t: str) -> str:
    return {"int": "BIGINT", "exact": "DECIMAL(18,4)", "decimal": "DECIMAL(18,4)", "str": "VARCHAR"}.get(
        t, "DOUBLE"
    )


def _insert(con: Any, table: str, cols: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
    if not rows:
        return
    import pandas as pd  # type: ignore[import-untyped]

    df = pd.DataFrame(
        [[float(v) if type(v).__name__ == "Decimal" else v for v in r] for r in rows], columns=cols
    )
    con.register("__rows", df)
    con.execute(f"INSERT INTO {table} SELECT * FROM __rows")
    con.unregister("__rows")


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


# --- synthetic data --------------------------------------------------------------------------------------


def synthetic(n: int, groups: int, seed: int) -> dict[str, dict[tuple[Any, ...], int]]:
    rng = random.Random(seed)
    rows: dict[tuple[Any, ...], int] = {}
    for i in range(n):
        a = rng.randint(1, groups)
        rows[(i, a, *(s * a + int(rng.gauss(0, 30)) for s in SLOPES.values()))] = 1
    return {"t": rows}


def fresh_id(row: tuple[Any, ...], new: int) -> tuple[Any, ...]:
    return (new, *row[1:])


def q_groups(groups: int) -> str:
    return f"SELECT a, AVG(b) FROM t GROUP BY a HAVING AVG(c) < {3 * groups // 2}"


def q_having(aggs: int, groups: int) -> str:
    conds = [f"AVG(c) < {3 * groups // 2}", f"AVG(d) < {4 * groups}", "AVG(e) > 0"][:aggs]
    return f"SELECT a, AVG(b) FROM t GROUP BY a HAVING {' AND '.join(conds)}"


def by_a(groups: int, ranges: int = 500) -> dict[str, Any]:
    return {"t": {"column": "a", "ranges": ranges, "domain": [1, groups + 1]}}


def delta_runs(
    b: Bench, deltas: Sequence[int], repeats: int, table: str = "t", make: Callable = fresh_id
) -> list:
    out = []
    full_py = median([b.full_python() for _ in range(max(1, repeats // 2))])
    for d in deltas:
        imp, duck, moved, probe = [], [], [], []
        for _ in range(repeats):
            batch = b.batch(table, d, make)
            imp.append(b.imp(batch))
            if b.probe is not None:
                probe.append(b.imp_probe(batch))
            capture_s, apply_s = b.full_duckdb(batch)
            duck.append(capture_s)
            moved.append(apply_s)
        b.check()
        rec = {
            "delta": d,
            "imp_s": median(imp),
            "full_python_s": full_py,
            "full_duckdb_s": median(duck),
            "duckdb_apply_batch_s": median(moved),
        }
        if probe:
            rec["imp_probe_s"] = median(probe)
        rec["speedup_python"] = rec["full_python_s"] / rec["imp_s"]
        rec["speedup_duckdb"] = rec["full_duckdb_s"] / rec["imp_s"]
        progress(
            f"  Δ={d}: imp {rec['imp_s'] * 1e3:.2f} ms, full py {full_py:.3f} s, "
            f"duckdb {rec['full_duckdb_s']:.3f} s"
        )
        out.append(rec)
    return out


def exp_groups(n: int, group_sizes: Sequence[int], deltas: Sequence[int], repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {"groups": [], "having": []}
    for g in group_sizes:
        progress(f"Q_groups G={g} N={n}")
        b = Bench(options(q_groups(g), SYNTH, by_a(g)), synthetic(n, g, seed=g), seed=g)
        out["groups"].append(
            {"groups": g, "rows": n, "bootstrap_s": b.bootstrap_s, "runs": delta_runs(b, deltas, repeats)}
        )
        del b
        gc.collect()
    g = max(group_sizes)
    data = synthetic(n, g, seed=g)
    for aggs in (1, 2, 3):
        progress(f"Q_having aggs={aggs} G={g}")
        b = Bench(options(q_having(aggs, g), SYNTH, by_a(g)), data, seed=aggs)
        out["having"].append(
            {"aggregates": aggs, "groups": g, "rows": n, "runs": delta_runs(b, deltas, repeats)}
        )
        del b
        gc.collect()
    return out


def exp_breakeven(n: int, fractions: Sequence[float], repeats: int) -> dict[str, Any]:
    g = 1000
    progress(f"break-even G={g} N={n}")
    b = Bench(options(q_groups(g), SYNTH, by_a(g)), synthetic(n, g, seed=11), seed=11)
    runs = delta_runs(b, [max(2, int(n * f)) for f in fractions], repeats)
    for r in runs:
        r["fraction"] = r["delta"] / n
    return {"rows": n, "groups": g, "runs": runs, **_crossings(runs)}


def _crossings(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Where IMP's time meets each baseline's, interpolated (log-log) between the measured Δ."""
    out: dict[str, Any] = {}
    for base in ("full_python_s", "full_duckdb_s"):
        cross = None
        for lo, hi in itertools.pairwise(runs):
            r_lo, r_hi = lo["imp_s"] / lo[base], hi["imp_s"] / hi[base]
            if r_lo < 1 <= r_hi:
                import math

                t = -math.log(r_lo) / (math.log(r_hi) - math.log(r_lo))
                cross = math.exp(math.log(lo["delta"]) + t * (math.log(hi["delta"]) - math.log(lo["delta"])))
                break
        key = "breakeven_" + base.removeprefix("full_").removesuffix("_s")
        out[key] = cross
        out[key + "_note"] = (
            None
            if cross
            else (
                "IMP faster at every measured Δ"
                if runs[-1]["imp_s"] < runs[-1][base]
                else "IMP slower at every measured Δ"
            )
        )
    return out


def exp_frag(n: int, frags: Sequence[int], repeats: int) -> list[dict[str, Any]]:
    g = 5000
    data = synthetic(n, g, seed=5)
    out = []
    for partition, label in (("a", "narrow (a, S2)"), ("id", "wide (id, maintained only)")):
        for f in frags:
            progress(f"#frag={f} partition {partition}")
            if partition == "a":
                part = by_a(g, f)
                opts = options(q_groups(g), SYNTH, part)
            else:
                part = {"t": {"column": "id", "ranges": f, "domain": [0, n]}}
                opts = options(q_groups(g), SYNTH, part, allow_unsafe=True)
            b = Bench(opts, data, seed=f)
            (run,) = delta_runs(b, [1000], repeats)
            out.append({"partition": label, "fragments": f, "rows": n, **run})
            del b
            gc.collect()
    return out


# --- TPC-H -----------------------------------------------------------------------------------------------

TPCH_QUERIES: dict[str, tuple[str, dict[str, Any]]] = {
    "Q1": (
        "SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty, "
        "SUM(l_extendedprice) AS sum_base_price, "
        "SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price, "
        "SUM(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, AVG(l_quantity) AS avg_qty, "
        "AVG(l_extendedprice) AS avg_price, AVG(l_discount) AS avg_disc, COUNT(*) AS count_order "
        "FROM lineitem WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus "
        "ORDER BY l_returnflag, l_linestatus",
        {},
    ),
    "Q3": (
        "SELECT l_orderkey, SUM(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate, o_shippriority "
        "FROM customer, orders, lineitem WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey "
        "AND l_orderkey = o_orderkey AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15' "
        "GROUP BY l_orderkey, o_orderdate, o_shippriority ORDER BY revenue DESC, o_orderdate LIMIT 10",
        {},
    ),
    "Q5": (
        "SELECT n_name, SUM(l_extendedprice * (1 - l_discount)) AS revenue "
        "FROM customer, orders, lineitem, supplier, nation, region WHERE c_custkey = o_custkey "
        "AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey AND c_nationkey = s_nationkey "
        "AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'ASIA' "
        "AND o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1995-01-01' "
        "GROUP BY n_name ORDER BY revenue DESC",
        {},
    ),
    "Q6": (
        "SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem "
        "WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
        "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
        {},
    ),
    "Q10": (
        "SELECT c_custkey, c_name, SUM(l_extendedprice * (1 - l_discount)) AS revenue, c_acctbal, n_name, "
        "c_address, c_phone, c_comment FROM customer, orders, lineitem, nation WHERE c_custkey = o_custkey "
        "AND l_orderkey = o_orderkey AND o_orderdate >= DATE '1993-10-01' "
        "AND o_orderdate < DATE '1994-01-01' "
        "AND l_returnflag = 'R' AND c_nationkey = n_nationkey "
        "GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment "
        "ORDER BY revenue DESC LIMIT 20",
        {"monotone_aggregates": True},  # S4: partial customers only have smaller revenue (DESC)
    ),
    "Q14": (
        "SELECT 100.00 * SUM(CASE WHEN p_type LIKE 'PROMO%' "
        "THEN l_extendedprice * (1 - l_discount) ELSE 0 END) "
        "/ SUM(l_extendedprice * (1 - l_discount)) AS promo_revenue FROM lineitem, part "
        "WHERE l_partkey = p_partkey AND l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'",
        {},
    ),
}


def tpch_data(sf: float) -> dict[str, dict[tuple[Any, ...], int]]:
    folder = Path(tempfile.gettempdir()) / f"ivmstream-tpch-sf{sf}"
    if not (folder / "lineitem.tbl").exists():
        progress(f"generating TPC-H SF {sf} with tpchgen-cli into {folder}")
        exe = Path(sys.executable).with_name("tpchgen-cli")
        subprocess.run([str(exe), "-s", str(sf), "--output-dir", str(folder)], check=True)
    out: dict[str, dict[tuple[Any, ...], int]] = {}
    for table, cols in TPCH_TABLES.items():
        rows: dict[tuple[Any, ...], int] = {}
        for line in (folder / f"{table}.tbl").read_text().splitlines():
            if line.strip():
                r = parse_tpch_line(table, line, decimals=True)
                key = tuple(exact(r[c]) for c, _ in cols)
                rows[key] = rows.get(key, 0) + 1
        out[table] = rows
    return out


def new_linenumber(row: tuple[Any, ...], new: int) -> tuple[Any, ...]:
    """A copy of a lineitem under a fresh key: same order (it still joins), a new line number."""
    return (row[0], row[1], row[2], 100 + new % 10**6, *row[4:])


def exp_tpch(sf: float, deltas: Sequence[int], repeats: int, names: Sequence[str]) -> list[dict[str, Any]]:
    data = tpch_data(sf)
    top = max(r[0] for r in data["lineitem"]) + 1
    part = {"lineitem": {"column": "l_orderkey", "ranges": 1000, "domain": [1, top]}}
    out = []
    for name in names:
        sql, flags = TPCH_QUERIES[name]
        progress(f"TPC-H {name} SF {sf}")
        joins = len({t.name for t in sqlglot.parse_one(sql).find_all(sqlglot.exp.Table)}) > 1
        b = Bench(options(sql, "tpch", part, **flags), data, seed=7, probe=joins)
        runs = delta_runs(b, deltas, repeats, table="lineitem", make=new_linenumber)
        out.append(
            {
                "query": name,
                "sf": sf,
                "safety": b.engine.compiled.safety,
                "lineitem_rows": sum(data["lineitem"].values()),
                "bootstrap_s": b.bootstrap_s,
                "sketch_fragments": bin(b.engine.sketch()).count("1"),
                "runs": runs,
            }
        )
        del b
        gc.collect()
    return out


# --- mixed workload --------------------------------------------------------------------------------------


def exp_mixed(n: int, ops: int, deltas: Sequence[int]) -> list[dict[str, Any]]:
    g = 6000
    q = f"SELECT a, AVG(c) FROM t GROUP BY a HAVING AVG(c) > {3 * g // 4} AND AVG(c) < {3 * g // 4 + 600}"
    data = synthetic(n, g, seed=21)
    out = []
    for ratio, (u, qn) in {"1U1Q": (1, 1), "1U5Q": (1, 5), "5U1Q": (5, 1)}.items():
        for d in deltas:
            rec: dict[str, Any] = {"ratio": ratio, "delta": d, "rows": n, "operations": ops}
            answers = {}
            for strategy in ("imp", "full", "nosketch"):
                engine = SketchEngine(options(q, SYNTH, by_a(g, 1000), strategy=strategy))
                engine.maintain({"t": dict(data["t"])})
                if strategy == "imp":
                    engine.sketch()  # bootstrap outside the timed loop, as the others' initial load
                feeder = Updates(list(data["t"]), seed=d)
                total, answer = _mixed_run(engine, feeder, u, qn, d, ops, strategy != "nosketch")
                answers[strategy] = answer
                rec[f"{strategy}_s"] = total
            if not answers["imp"] == answers["full"] == answers["nosketch"]:
                raise AssertionError("mixed workload: strategies answer differently")
            progress(
                f"mixed {ratio} Δ={d}: "
                + ", ".join(f"{s} {rec[s + '_s']:.2f}s" for s in ("imp", "full", "nosketch"))
            )
            out.append(rec)
    return out


def _mixed_run(
    engine: SketchEngine, feeder: Updates, updates: int, queries: int, delta: int, ops: int, skip: bool
) -> tuple[float, Any]:
    """Seconds spent on ``ops`` operations: ``updates`` batches then ``queries`` answers, repeated."""
    total, done, answer = 0.0, 0, None
    while done < ops:
        for _ in range(updates):
            batch = {"t": feeder.batch(delta, fresh_id)}
            t0 = time.perf_counter()
            engine.maintain(batch)
            total += time.perf_counter() - t0
            done += 1
        for _ in range(queries):
            t0 = time.perf_counter()
            answer = engine.answer(engine.sketch() if skip else None)
            total += time.perf_counter() - t0
            done += 1
    return total, answer


# --- one point through the real worker -------------------------------------------------------------------


def exp_worker() -> dict[str, Any]:
    """The demo workload produced to the embedded broker and consumed by one real worker until caught up."""
    import shutil
    import uuid

    from confluent_kafka import Producer

    from bench.lib.broker import produce_all
    from ivmstream.config import build_config
    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.runtime.kafka import producer_settings
    from ivmstream.service import load_service
    from ivmstream.services.sketches.service import DATA, DEMO_CONFIG
    from ivmstream.state import open_store

    service = load_service("sketches")
    lines = (DATA / "tpch_demo.jsonl").read_bytes().splitlines()
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-sketches-bench-"))
    try:
        with BrokerProcess() as broker:
            topic = f"sketches-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, 1)
            config = build_config(
                service,
                {
                    **DEMO_CONFIG,
                    "input_topic": topic,
                    "output_topic": f"{topic}.out",
                    "dlq_topic": f"{topic}.dlq",
                },
            )
            producer = Producer(producer_settings(broker.bootstrap, {"compression.type": "lz4"}))
            produce_all(producer, topic, ((None, v, 0) for v in lines))
            store = open_store("rocksdb", f"sketches.{topic}", state_dir=tmp)
            run = _worker_run(service, config, broker.bootstrap, store, f"{topic}-g", len(lines))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "events": len(lines),
        "seconds": run["seconds"],
        "events_per_second": len(lines) / run["seconds"],
        "checkpoints": run["checkpoints"],
    }


def _worker_run(
    service: Any, config: Any, bootstrap: str, store: Any, group: str, end: int
) -> dict[str, Any]:
    """One worker from the start of the topic until caught up (its final checkpoint included)."""
    from ivmstream.metrics import RuntimeMetrics
    from ivmstream.runtime import Worker

    metrics = RuntimeMetrics(service.name)
    worker = Worker(service, config, bootstrap, store, group=group, metrics=metrics)
    seconds, _ = run_until_caught_up(worker, {0: end}, timeout=600)
    checkpoints = 0.0
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "ivmstream_checkpoint_seconds_count":
                checkpoints = sample.value
    return {"seconds": seconds, "checkpoints": checkpoints}


# --- plots and markdown ----------------------------------------------------------------------------------


def plot(report: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for rec in report["groups"]["groups"]:
        ds = [r["delta"] for r in rec["runs"]]
        ax.plot(ds, [r["imp_s"] for r in rec["runs"]], "o-", label=f"IMP G={rec['groups']}")
        ax.plot(
            ds, [r["full_python_s"] for r in rec["runs"]], "x--", label=f"full (Python) G={rec['groups']}"
        )
        ax.plot(ds, [r["full_duckdb_s"] for r in rec["runs"]], "s:", label=f"full (DuckDB) G={rec['groups']}")
    ax.set(xscale="log", yscale="log", xlabel="Δ (tuples)", ylabel="seconds per batch", title="Q_groups")
    ax.legend(fontsize=6)
    ax = axes[1]
    be = report["breakeven"]
    fr = [r["fraction"] * 100 for r in be["runs"]]
    for key, label in (
        ("imp_s", "IMP"),
        ("full_python_s", "full (Python)"),
        ("full_duckdb_s", "full (DuckDB)"),
    ):
        ax.plot(fr, [r[key] for r in be["runs"]], "o-", label=label)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="Δ (% of table)",
        ylabel="seconds",
        title="break-even (Q_groups, G=1000)",
    )
    ax.legend(fontsize=7)
    ax = axes[2]
    for label in sorted({r["partition"] for r in report["frag"]}):
        rows = [r for r in report["frag"] if r["partition"] == label]
        ax.plot([r["fragments"] for r in rows], [r["imp_s"] for r in rows], "o-", label=f"IMP {label}")
        ax.plot(
            [r["fragments"] for r in rows], [r["full_python_s"] for r in rows], "x--", label=f"full {label}"
        )
    ax.set(xscale="log", yscale="log", xlabel="#fragments", ylabel="seconds (Δ=1000)", title="#frag")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _load(values: Sequence[float] | None) -> str:
    return "?" if values is None else " / ".join(f"{v:.1f}" for v in values)


def _ms(s: float) -> str:
    return f"{s * 1e3:.2f}"


def _row(*cells: Any) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _times(r: Mapping[str, Any]) -> list[str]:
    return [_ms(r["imp_s"]), _ms(r["full_python_s"]), _ms(r["full_duckdb_s"])]


def _speedups(r: Mapping[str, Any]) -> list[str]:
    return [f"{r['speedup_python']:.0f}", f"{r['speedup_duckdb']:.1f}"]


def markdown(report: Mapping[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"Run: `{report['command']}` on {m['cpu_model']} ({m['cpu_count']} cores, load average "
        f"{_load(report.get('loadavg_start'))} at the start, {_load(m['loadavg_1_5_15'])} at the end), "
        f"{report['seconds']:.0f} s in total.",
        "",
        "### Q_groups and Q_having (seconds per batch as ms, median)",
        "",
        _row("query", "G", "rows", "Δ", "IMP ms", "full Python ms", "full DuckDB ms", "x Python", "x DuckDB"),
        _row(*["---"] * 9),
    ]
    for rec in report["groups"]["groups"]:
        for r in rec["runs"]:
            lines.append(
                _row("Q_groups", rec["groups"], f"{rec['rows']:,}", r["delta"], *_times(r), *_speedups(r))
            )
    for rec in report["groups"]["having"]:
        for r in rec["runs"]:
            name = f"Q_having ({rec['aggregates']} agg)"
            lines.append(_row(name, rec["groups"], f"{rec['rows']:,}", r["delta"], *_times(r), *_speedups(r)))
    be = report["breakeven"]
    lines += [
        "",
        f"### Break-even (Q_groups, G = {be['groups']}, {be['rows']:,} rows)",
        "",
        _row("Δ", "% of table", "IMP s", "full Python s", "full DuckDB s"),
        _row(*["---"] * 5),
    ]
    for r in be["runs"]:
        cells = [f"{r[k]:.3f}" for k in ("imp_s", "full_python_s", "full_duckdb_s")]
        lines.append(_row(f"{r['delta']:,}", f"{r['fraction'] * 100:.1f}", *cells))
    for k in ("python", "duckdb"):
        cross = be[f"breakeven_{k}"]
        if cross:
            text = f"{cross:,.0f} tuples ({cross / be['rows'] * 100:.2f} % of the table)"
        else:
            text = be[f"breakeven_{k}_note"]
        lines.append(f"\nBreak-even against `full` ({k}): {text}.")
    lines += [
        "",
        "### #fragments (Δ = 1,000)",
        "",
        _row("partition", "#frag", "IMP ms", "full Python ms", "full DuckDB ms"),
        _row(*["---"] * 5),
    ]
    for r in report["frag"]:
        lines.append(_row(r["partition"], r["fragments"], *_times(r)))
    lines += [
        "",
        "### TPC-H (lineitem batches, partition l_orderkey, 1,000 ranges)",
        "",
        _row(
            "query",
            "SF",
            "safety",
            "Δ",
            "IMP ms",
            "full Python ms",
            "full DuckDB ms",
            "x Python",
            "x DuckDB",
            "IMP probe ms",
        ),
        _row(*["---"] * 10),
    ]
    for rec in report["tpch"]:
        for r in rec["runs"]:
            probe = _ms(r["imp_probe_s"]) if "imp_probe_s" in r else "—"
            lines.append(
                _row(rec["query"], rec["sf"], rec["safety"], r["delta"], *_times(r), *_speedups(r), probe)
            )
    lines += [
        "",
        "### Mixed workload (total seconds)",
        "",
        _row("ratio", "Δ", "rows", "ops", "imp", "full", "nosketch"),
        _row(*["---"] * 7),
    ]
    for r in report["mixed"]:
        totals = [f"{r[k]:.2f}" for k in ("imp_s", "full_s", "nosketch_s")]
        lines.append(_row(r["ratio"], r["delta"], f"{r['rows']:,}", r["operations"], *totals))
    w = report.get("worker")
    if w:
        lines += [
            "",
            f"Real worker (demo workload, embedded broker, RocksDB state): {w['events']} events in "
            f"{w['seconds']:.2f} s = {w['events_per_second']:,.0f} events/s, "
            f"{w['checkpoints']:.0f} checkpoints.",
        ]
    return "\n".join(lines)


# --- main ------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    load_start = os.getloadavg()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--markdown", action="store_true", help="print the tables from the recorded JSON")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-worker", action="store_true")
    args = ap.parse_args(argv)
    out = args.out or RESULTS / ("sketches_quick.json" if args.quick else "sketches.json")
    out = out if out.suffix == ".json" else out.with_name(out.name + ".json")
    if args.markdown:
        print(markdown(json.loads(out.read_text())))
        return 0
    t0 = time.perf_counter()
    if args.quick:
        n, deltas, reps, fr, frags, mixed_n, ops, sf, names = (
            5000,
            [10, 100],
            3,
            [0.01, 0.05],
            [10, 100],
            2000,
            12,
            0.01,
            ["Q3", "Q6"],
        )
        groups = [50, 500]
    else:
        n, deltas, reps, fr, frags, mixed_n, ops, sf, names = (
            1_000_000,
            [10, 100, 1000],
            5,
            [0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4],
            [10, 100, 1000, 5000],
            50_000,
            100,
            0.01,
            list(TPCH_QUERIES),
        )
        groups = [50, 1000, 5000]
    report: dict[str, Any] = {
        "command": command_line("bench/sketches.py", argv),
        "loadavg_start": [round(v, 2) for v in load_start],
    }
    report["groups"] = exp_groups(n, groups, deltas, reps)
    report["breakeven"] = exp_breakeven(n, fr, max(2, reps // 2))
    report["frag"] = exp_frag(n // 5, frags, reps)
    report["tpch"] = exp_tpch(sf, deltas, reps, names)
    if not args.quick:  # one scale factor up: fewer repeats keep the run near ten minutes
        report["tpch"] += exp_tpch(0.1, deltas, 3, names)
    report["mixed"] = exp_mixed(mixed_n, ops, [20, 200])
    if not args.no_worker:
        progress("worker")
        report["worker"] = exp_worker()
    report["seconds"] = time.perf_counter() - t0
    report["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
    report["machine"] = machine_info(duckdb=duckdb.__version__)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    plot(report, out.with_suffix(".png"))
    progress(f"wrote {out} and {out.with_suffix('.png')} in {report['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
