"""TPC-H at the largest scale factor that fits (docs/sketches/benchmark.md): every query of the benchmark
(Q1, Q3, Q5, Q6, Q7, Q9, Q10, Q14) at Δ ≤ 100 against the DuckDB and Python recaptures.

The tables are read once; DuckDB holds them once (``__b_<table>``, lineitem with its fragment column) and
each query's Bench copies them inside DuckDB into its own ``__p_<table>`` (a cursor of that database),
so no query pays a Python row loop to load the baseline.
"""

from __future__ import annotations

import gc
from bisect import bisect_right
from decimal import Decimal
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import sqlglot

from bench.lib.progress import progress
from bench.sketches_db import CPU, Bench, duck_type, median, options
from bench.sketches_experiments import TPCH_QUERIES, new_linenumber, tpch_data
from bench.sketches_paper import cpu_ratio, rss_gb
from ivmstream.events.tpch import TPCH_TABLES

PREFIX = {t: "ps" if t == "partsupp" else t[0] for t in TPCH_TABLES}  # SQL names: l_orderkey, ps_partkey


def _base(con: Any, data: dict[str, dict[tuple[Any, ...], int]], boundaries: list[int]) -> None:
    for table, cols in TPCH_TABLES.items():
        rows = [r for r, n in data[table].items() for _ in range(n)]
        names = [f"{PREFIX[table]}_{c}" for c, _ in cols]
        frame: dict[str, Any] = {}
        for i, (c, t) in enumerate(cols):
            column = [r[i] for r in rows]
            if t in ("exact", "decimal"):
                column = [float(v) if isinstance(v, Decimal) else v for v in column]
            frame[c] = column
        frag = [bisect_right(boundaries, r[0]) for r in rows] if table == "lineitem" else [-1] * len(rows)
        df = pd.DataFrame({**frame, "__frag": frag})
        con.register("__frame", df)
        typed = ", ".join(
            f"CAST({c} AS {duck_type(t)}) AS {n}" for (c, t), n in zip(cols, names, strict=True)
        )
        con.execute(f"CREATE TABLE __b_{table} AS SELECT {typed}, __frag FROM __frame")
        con.unregister("__frame")


def _copy(con: Any, bench: Bench) -> None:
    for name in bench.engine.tables:
        con.execute(f"CREATE OR REPLACE TABLE __p_{name} AS SELECT * FROM __b_{name}")


def exp_tpch_big(sf: float, names: list[str], deltas: list[int], repeats: int) -> dict[str, Any]:
    """Per query: IMP (materialised joins) and the DuckDB recapture on the same lineitem batches, the
    Python recapture once."""
    import duckdb

    progress(f"TPC-H SF {sf}: reading the tables")
    data = tpch_data(sf)
    top = max(r[0] for r in data["lineitem"]) + 1
    part = {"lineitem": {"column": "l_orderkey", "ranges": 1000, "domain": [1, top]}}
    probe = Bench(options(TPCH_QUERIES["Q6"][0], "tpch", part), {"lineitem": {}}, seed=0)
    boundaries = list(probe.engine.specs["lineitem"].boundaries)
    del probe
    con = duckdb.connect()
    con.execute("SET threads TO 2")
    _base(con, data, boundaries)
    progress(f"  DuckDB loaded, rss {rss_gb():.1f} GB")
    out: dict[str, Any] = {"sf": sf, "lineitem_rows": sum(data["lineitem"].values()), "queries": []}
    for name in names:
        sql, flags = TPCH_QUERIES[name]
        progress(f"TPC-H {name} SF {sf}")
        b = Bench(options(sql, "tpch", part, **flags), data, seed=7, duck_load=_copy, duck=con.cursor())
        full_py = b.full_python()
        runs = []
        for d in deltas:
            imp, duck, imp_cpu, duck_cpu = [], [], [], []
            for _ in range(repeats):
                batch = b.batch("lineitem", d, new_linenumber)
                imp.append(b.imp(batch))
                imp_cpu.append(CPU[0])
                duck.append(b.full_duckdb(batch)[0])
                duck_cpu.append(CPU[0])
            r = {"delta": d, "imp_s": median(imp), "full_duckdb_s": median(duck), "full_python_s": full_py}
            r["speedup_duckdb"] = r["full_duckdb_s"] / r["imp_s"]
            r.update(cpu_ratio(imp_cpu, duck_cpu))
            r["speedup_python"] = full_py / r["imp_s"]
            progress(f"  Δ={d}: imp {r['imp_s'] * 1e3:.2f} ms, duckdb {r['full_duckdb_s'] * 1e3:.1f} ms")
            runs.append(r)
        b.check()
        joins = len({t.name for t in sqlglot.parse_one(sql).find_all(sqlglot.exp.Table)}) > 1
        out["queries"].append(
            {
                "query": name,
                "safety": b.engine.compiled.safety,
                "joins": joins,
                "bootstrap_s": b.bootstrap_s,
                "sketch_fragments": bin(b.engine.sketch()).count("1"),
                "runs": runs,
            }
        )
        del b
        gc.collect()
    out["rss_gb"] = rss_gb()
    con.close()
    return out
