"""The sketches benchmark's experiments: synthetic group-by and HAVING queries (delta size, break-even,
fragment count), TPC-H queries, and a mixed query/update workload.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import sqlglot

from bench.lib.progress import progress
from bench.sketches_db import CPU, SLOPES, SYNTH, Bench, Updates, median, options
from bench.sketches_report_paper import crossings
from ivmstream.events.tpch import TPCH_TABLES, parse_tpch_line
from ivmstream.services.sketches.engine import SketchEngine
from ivmstream.services.sketches.values import exact


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
    """Per Δ: IMP and the DuckDB recapture interleaved batch by batch (wall and CPU seconds); the Python
    recapture timed before, its CPU ratio beside the wall one."""
    out = []
    py_wall, py_cpu = [], []
    for _ in range(max(1, repeats // 2)):
        py_wall.append(b.full_python())
        py_cpu.append(CPU[0])
    full_py = median(py_wall)
    for d in deltas:
        rec = b.series(table, d, repeats, make)
        b.check()
        rec["full_python_s"] = full_py
        rec["speedup_python"] = full_py / rec["imp_s"]
        rec["full_python_cpu_s"] = median(py_cpu)
        rec["speedup_python_cpu"] = rec["full_python_cpu_s"] / max(rec["imp_cpu_s"], 1e-9)
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
    return {"rows": n, "groups": g, "runs": runs, **crossings(runs)}


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


TPCH_QUERIES["Q7"] = (  # the nested FROM flattened, as the artifact's join-syntax form
    "SELECT n1.n_name AS supp_nation, n2.n_name AS cust_nation, EXTRACT(YEAR FROM l_shipdate) AS l_year, "
    "SUM(l_extendedprice * (1 - l_discount)) AS revenue "
    "FROM supplier, lineitem, orders, customer, nation n1, nation n2 "
    "WHERE s_suppkey = l_suppkey AND o_orderkey = l_orderkey AND c_custkey = o_custkey "
    "AND s_nationkey = n1.n_nationkey AND c_nationkey = n2.n_nationkey "
    "AND ((n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY') "
    "OR (n1.n_name = 'GERMANY' AND n2.n_name = 'FRANCE')) "
    "AND l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31' "
    "GROUP BY n1.n_name, n2.n_name, EXTRACT(YEAR FROM l_shipdate) ORDER BY supp_nation, cust_nation, l_year",
    {},
)
TPCH_QUERIES["Q9"] = (
    "SELECT n_name AS nation, EXTRACT(YEAR FROM o_orderdate) AS o_year, "
    "SUM(l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity) AS sum_profit "
    "FROM part, supplier, lineitem, partsupp, orders, nation "
    "WHERE s_suppkey = l_suppkey AND ps_suppkey = l_suppkey AND ps_partkey = l_partkey "
    "AND p_partkey = l_partkey AND o_orderkey = l_orderkey AND s_nationkey = n_nationkey "
    "AND p_name LIKE '%green%' GROUP BY n_name, EXTRACT(YEAR FROM o_orderdate) ORDER BY nation, o_year DESC",
    {},
)


def tpch_folder(sf: float) -> Path:
    """The ``.tbl`` files of scale factor ``sf`` in the temporary directory, generated once with
    ``tpchgen-cli`` (dbgen's output, from PyPI)."""
    folder = Path(tempfile.gettempdir()) / f"ivmstream-tpch-sf{sf}"
    if not (folder / "lineitem.tbl").exists():
        progress(f"generating TPC-H SF {sf} with tpchgen-cli into {folder}")
        exe = Path(sys.executable).with_name("tpchgen-cli")
        # Generated beside it and renamed into place, so a run at the same time (another test process)
        # never reads a half-written table: whichever finishes second keeps the first one's folder.
        with tempfile.TemporaryDirectory(
            dir=folder.parent, prefix=f".{folder.name}.", ignore_cleanup_errors=True
        ) as tmp:
            subprocess.run([str(exe), "-s", str(sf), "--output-dir", tmp], check=True)
            with contextlib.suppress(OSError):  # a complete folder made meanwhile stays
                os.rename(tmp, folder)
        if not (folder / "lineitem.tbl").exists():  # a folder an interrupted run left half-written
            subprocess.run([str(exe), "-s", str(sf), "--output-dir", str(folder)], check=True)
    return folder


INTERN_LIMIT = 100_000  # a column with more distinct values than this is not interned


def tpch_data(sf: float, tables: Collection[str] | None = None) -> dict[str, dict[tuple[Any, ...], int]]:
    """Every table (or only ``tables``) as rows -> multiplicity. Equal values of a column share one object
    (dates, flags, decimals repeat millions of times at SF 1), which keeps lineitem's rows in about half
    the memory."""
    folder = tpch_folder(sf)
    out: dict[str, dict[tuple[Any, ...], int]] = {}
    for table, cols in TPCH_TABLES.items():
        if tables is not None and table not in tables:
            continue
        rows: dict[tuple[Any, ...], int] = {}
        shared: list[dict[Any, Any] | None] = [{} for _ in cols]
        with (folder / f"{table}.tbl").open() as lines:
            for line in lines:
                if not line.strip():
                    continue
                r = parse_tpch_line(table, line, decimals=True)
                values = []
                for i, (c, _) in enumerate(cols):
                    v = exact(r[c])
                    seen = shared[i]
                    if seen is not None:
                        v = seen.setdefault(v, v)
                        if len(seen) > INTERN_LIMIT:
                            shared[i] = None
                    values.append(v)
                key = tuple(values)
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
                total, cpu, answer = _mixed_run(engine, feeder, u, qn, d, ops, strategy != "nosketch")
                answers[strategy] = answer
                rec[f"{strategy}_s"], rec[f"{strategy}_cpu_s"] = total, cpu
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
) -> tuple[float, float, Any]:
    """Wall and CPU seconds spent on ``ops`` operations: ``updates`` batches then ``queries`` answers,
    repeated."""
    total, cpu, done, answer = 0.0, 0.0, 0, None
    while done < ops:
        for _ in range(updates):
            batch = {"t": feeder.batch(delta, fresh_id)}
            t0, c0 = time.perf_counter(), time.process_time()
            engine.maintain(batch)
            total += time.perf_counter() - t0
            cpu += time.process_time() - c0
            done += 1
        for _ in range(queries):
            t0, c0 = time.perf_counter(), time.process_time()
            answer = engine.answer(engine.sketch() if skip else None)
            total += time.perf_counter() - t0
            cpu += time.process_time() - c0
            done += 1
    return total, cpu, answer
