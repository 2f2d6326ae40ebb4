"""TPC-H at the largest scale factor that fits (docs/sketches/benchmark.md): every query of the benchmark
(Q1, Q3, Q5, Q6, Q7, Q9, Q10, Q14) at Δ ≤ 100 against the DuckDB and Python recaptures.

The tables are read once; DuckDB holds them once (``__b_<table>``, lineitem with its fragment column) and
each query's Bench copies them inside DuckDB into its own ``__p_<table>`` (a cursor of that database),
so no query pays a Python row loop to load the baseline.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import sqlglot

from bench.lib.progress import progress
from bench.sketches_db import Bench, duck_type, options
from bench.sketches_experiments import TPCH_QUERIES, new_linenumber, tpch_data, tpch_folder
from bench.sketches_paper import rss_gb
from ivmstream.events.tpch import TPCH_TABLES

PREFIX = {t: "ps" if t == "partsupp" else t[0] for t in TPCH_TABLES}  # SQL names: l_orderkey, ps_partkey


def _base(con: Any, folder: Path, boundaries: list[int], tables: Collection[str]) -> None:
    """Each of ``tables`` read by DuckDB from its ``.tbl`` file (no Python row loop), lineitem with the
    fragment of its orderkey (the count of boundaries at or below it, as ``bisect_right``)."""
    for table, cols in TPCH_TABLES.items():
        if table not in tables:
            continue
        names = {f"{PREFIX[table]}_{c}": duck_type(t) for c, t in cols}
        spec = ", ".join(f"'{n}': '{t}'" for n, t in {**names, "__end": "VARCHAR"}.items())
        source = f"read_csv('{folder / f'{table}.tbl'}', delim = '|', header = false, columns = {{{spec}}})"
        picked = ", ".join(names)
        if table != "lineitem":
            con.execute(f"CREATE TABLE __b_{table} AS SELECT {picked}, -1::BIGINT AS __frag FROM {source}")
            continue
        bounds = pd.DataFrame({"bound": [-(2**62), *boundaries], "idx": range(len(boundaries) + 1)})
        con.register("__bounds", bounds)
        qualified = ", ".join(f"l.{n}" for n in names)
        con.execute(
            f"CREATE TABLE __b_{table} AS SELECT {qualified}, b.idx::BIGINT AS __frag "
            f"FROM {source} l ASOF JOIN __bounds b ON l.l_orderkey >= b.bound"
        )
        con.unregister("__bounds")


def _copy(con: Any, bench: Bench) -> None:
    for name in bench.engine.tables:
        con.execute(f"CREATE OR REPLACE TABLE __p_{name} AS SELECT * FROM __b_{name}")


def tables_of(names: Collection[str]) -> set[str]:
    """The TPC-H tables the queries read: only these are loaded, in Python and in DuckDB."""
    return {t.name for n in names for t in sqlglot.parse_one(TPCH_QUERIES[n][0]).find_all(sqlglot.exp.Table)}


def available_gb() -> float:
    """MemAvailable: what the machine can still give this process (other jobs share it)."""
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1e6
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def wait_for_memory(need_gb: float, limit_s: float, poll_s: float = 30.0) -> tuple[float, float]:
    """Wait (at most ``limit_s``) until ``need_gb`` is available, so a query's bootstrap does not start
    while another job holds the memory it needs; returns the GB available and the seconds waited."""
    t0 = time.monotonic()
    while (free := available_gb()) < need_gb and time.monotonic() - t0 < limit_s:
        progress(f"  {free:.1f} GB available, waiting for {need_gb:.1f} GB")
        time.sleep(poll_s)
    return free, time.monotonic() - t0


def exp_tpch_big(
    sf: float,
    names: list[str],
    deltas: list[int],
    repeats: int,
    keep: Callable[[Any], None] | None = None,
    python: bool = True,
    need_gb: float = 0.0,
    wait_limit_s: float = 1800.0,
) -> dict[str, Any]:
    """Per query: IMP (materialised joins) and the DuckDB recapture on the same lineitem batches, the
    Python recapture once (the final check's; ``python=False``: none, IMP checked against DuckDB's
    capture alone). ``keep`` receives the section after each query, so a long run that is stopped keeps
    the queries it finished. Each query starts once ``need_gb`` of memory is available (or after
    ``wait_limit_s``), and its entry records what was available."""
    import duckdb

    tables = tables_of(names)
    progress(f"TPC-H SF {sf}: reading {', '.join(sorted(tables))}")
    data = tpch_data(sf, tables)
    top = max(r[0] for r in data["lineitem"]) + 1
    part = {"lineitem": {"column": "l_orderkey", "ranges": 1000, "domain": [1, top]}}
    probe = Bench(options(TPCH_QUERIES["Q6"][0], "tpch", part), {"lineitem": {}}, seed=0)
    boundaries = list(probe.engine.specs["lineitem"].boundaries)
    del probe
    con = duckdb.connect()
    con.execute("SET threads TO 2")
    _base(con, tpch_folder(sf), boundaries, tables)
    progress(f"  DuckDB loaded, rss {rss_gb():.1f} GB")
    out: dict[str, Any] = {"sf": sf, "lineitem_rows": sum(data["lineitem"].values()), "queries": []}
    for name in names:
        sql, flags = TPCH_QUERIES[name]
        free, waited = wait_for_memory(need_gb, wait_limit_s)
        progress(f"TPC-H {name} SF {sf} ({free:.1f} GB available)")
        b = Bench(options(sql, "tpch", part, **flags), data, seed=7, duck_load=_copy, duck=con.cursor())
        runs = []
        for d in deltas:
            r = b.series("lineitem", d, repeats, new_linenumber)
            progress(f"  Δ={d}: imp {r['imp_s'] * 1e3:.2f} ms, duckdb {r['full_duckdb_s'] * 1e3:.1f} ms")
            runs.append(r)
        b.check(python)  # its Python capture over the final tables is the Python recapture's time
        for r in runs:
            if python:
                r["full_python_s"] = b.check_python_s
                r["speedup_python"] = b.check_python_s / r["imp_s"]
        joins = len({t.name for t in sqlglot.parse_one(sql).find_all(sqlglot.exp.Table)}) > 1
        out["queries"].append(
            {
                "query": name,
                "safety": b.engine.compiled.safety,
                "joins": joins,
                "bootstrap_s": b.bootstrap_s,
                "sketch_fragments": bin(b.engine.sketch()).count("1"),
                "runs": runs,
                "available_gb_at_start": round(free, 1),
                "waited_for_memory_s": round(waited, 1),
            }
        )
        del b
        gc.collect()
        if keep is not None:
            keep({**out, "rss_gb": rss_gb()})
    out["rss_gb"] = rss_gb()
    con.close()
    return out
