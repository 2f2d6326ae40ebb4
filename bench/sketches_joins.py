"""The IMP paper's join microbenchmarks and ablations (docs/sketches/benchmark.md): Q_join 1-n and m-n, join
selectivity with and without Bloom filters (materialised and probe joins), selection push-down, top-m
memory on TPC-H Q10, and the mixed workload with several query instances answered over one sketch.

Q_join: ``SELECT a, AVG(b) FROM t, h WHERE a = ttid AND b < β GROUP BY a HAVING AVG(c) < β`` with the fact
table ``t`` (G groups, n = rows / G rows per join value) and a helper ``h`` whose ``ttid`` values each
occur m times (1-n: m = 1); β = G / 5 keeps a tenth of the groups, as the paper's constants do. Only the
fact table is updated, with delta tuples drawn from the rows satisfying the WHERE clause (as the
paper's deltas are); partition ``t.a`` (S2).
"""

from __future__ import annotations

import gc
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bench.lib.progress import progress
from bench.sketches_db import Bench, Updates, median, options, timed
from bench.sketches_experiments import by_a, fresh_id
from bench.sketches_paper import frame_loader, rows_of, synthetic_arrays
from ivmstream.services.sketches.engine import SketchEngine

JOIN_REL = {
    "t": {"id": "int", "a": "int", "b": "int", "c": "int", "d": "int", "e": "int"},
    "h": {"ttid": "int", "k": "int"},
}


def maintain_s(engine: SketchEngine, batch: Mapping[str, Mapping[tuple[Any, ...], int]]) -> float:
    return timed(lambda: engine.maintain(batch))


def q_join(groups: int) -> str:
    beta = max(2, groups // 5)
    return f"SELECT a, AVG(b) FROM t, h WHERE a = ttid AND b < {beta} GROUP BY a HAVING AVG(c) < {beta}"


def _helper(rows: int, partners: int, every: int = 1) -> dict[str, np.ndarray]:
    """``ttid`` values 1.. each ``partners`` times (``rows`` rows); with ``every`` > 1 only the values
    divisible by it (join selectivity 1 / every)."""
    values = np.arange(1, rows // partners + 1, dtype=np.int64)
    values = values[values % every == 0]
    return {
        "ttid": np.repeat(values, partners),
        "k": np.tile(np.arange(partners, dtype=np.int64), len(values)),
    }


def _tables_loader(frames: Mapping[str, dict[str, np.ndarray]]) -> Any:
    loaders = {t: frame_loader(f, t) for t, f in frames.items()}

    def load(con: Any, bench: Bench) -> None:
        for t, f in frames.items():
            if t in bench.engine.specs:
                loaders[t](con, bench)
            else:
                con.register("__frame", _with_frag(f))
                con.execute(f"CREATE TABLE __p_{t} AS SELECT * FROM __frame")
                con.unregister("__frame")

    return load


def _with_frag(f: dict[str, np.ndarray]) -> Any:
    import pandas as pd  # type: ignore[import-untyped]

    n = len(next(iter(f.values())))
    return pd.DataFrame({**f, "__frag": np.full(n, -1, dtype=np.int64)})


def _join_bench(
    n: int, groups: int, partners: int, every: int, help_rows: int, **flags: Any
) -> tuple[Bench, dict[str, dict[tuple[Any, ...], int]]]:
    fact = synthetic_arrays(n, groups, seed=groups, columns="bcde")
    helper = _helper(help_rows, partners, every)
    data = {"t": rows_of(fact), "h": rows_of(helper)}
    beta = max(2, groups // 5)
    pool = [r for r in data["t"] if r[2] < beta]
    opts = options(q_join(groups), JOIN_REL, by_a(groups), **flags)
    loader = _tables_loader({"t": fact, "h": helper})
    return Bench(opts, data, seed=groups, duck_load=loader, pools={"t": pool}), data


def _series(b: Bench, deltas: Sequence[int], repeats: int, variants: Mapping[str, SketchEngine]) -> list:
    """IMP (and each variant engine, on the same batches) against the DuckDB recapture per Δ."""
    full_py = b.full_python()
    out = []
    for d in deltas:
        imp, duck = [], []
        var: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(repeats):
            batch = b.batch("t", d, fresh_id)
            imp.append(b.imp(batch))
            for k, e in variants.items():
                var[k].append(maintain_s(e, batch))
            duck.append(b.full_duckdb(batch)[0])
        rec: dict[str, Any] = {
            "delta": d,
            "imp_s": median(imp),
            "full_duckdb_s": median(duck),
            "full_python_s": full_py,
            **{f"{k}_s": median(v) for k, v in var.items()},
        }
        rec["speedup_duckdb"] = rec["full_duckdb_s"] / rec["imp_s"]
        progress(f"  Δ={d}: imp {rec['imp_s'] * 1e3:.2f} ms, duckdb {rec['full_duckdb_s'] * 1e3:.1f} ms")
        out.append(rec)
    b.check()
    want = b.engine.sketch()
    for k, e in variants.items():
        if e.sketch() != want:
            raise AssertionError(f"variant {k} disagrees with IMP on the sketch")
    return out


def exp_joins(
    n: int, groups: Sequence[int], partners: Sequence[int], deltas: Sequence[int], repeats: int
) -> dict:
    """Q_join 1-n for each G (n = rows / G), then m-n (m partners per join value) at the middle G."""
    out: dict[str, Any] = {"rows": n, "one_n": [], "m_n": []}
    for g in groups:
        progress(f"Q_join 1-{n // g} (G={g})")
        b, _ = _join_bench(n, g, 1, 1, n)
        out["one_n"].append(
            {"groups": g, "n": n // g, "bootstrap_s": b.bootstrap_s, "runs": _series(b, deltas, repeats, {})}
        )
        del b
        gc.collect()
    g = sorted(groups)[len(groups) // 2]
    for m in partners:
        progress(f"Q_join {m}-{n // g} (G={g})")
        b, _ = _join_bench(n, g, m, 1, max(n, g * m))
        out["m_n"].append(
            {
                "groups": g,
                "m": m,
                "n": n // g,
                "bootstrap_s": b.bootstrap_s,
                "runs": _series(b, deltas, repeats, {}),
            }
        )
        del b
        gc.collect()
    return out


def exp_joinsel(n: int, groups: int, everies: Sequence[int], deltas: Sequence[int], repeats: int) -> list:
    """Join selectivity 1/every of the fact's join values with a partner; each with materialised and
    probe joins, Bloom filters off and on, fed the same batches (ablation of §2.6.2)."""
    out = []
    for every in everies:
        progress(f"Q_joinsel {100 / every:.0f} % (G={groups})")
        b, data = _join_bench(n, groups, 1, every, n)
        variants = {}
        for join, bloom in (("mat", True), ("probe", False), ("probe", True)):
            e = SketchEngine(options(q_join(groups), JOIN_REL, by_a(groups), join=join, bloom=bloom))
            e.maintain({t: dict(rows) for t, rows in data.items()})
            variants[f"{join}_bloom" if bloom else join] = e
        runs = _series(b, deltas, repeats, variants)
        stats = {
            k: {s: v for s, v in e.stats().items() if "bloom" in s or "lookups" in s}
            for k, e in variants.items()
        }
        out.append({"selectivity": 1 / every, "groups": groups, "rows": n, "runs": runs, "stats": stats})
        del b, variants, data
        gc.collect()
    return out


def exp_selpd(n: int, groups: int, fractions: Sequence[float], share: float, repeats: int) -> list:
    """Selection push-down on and off (§2.6.1) on Q_join 1-n, Δ = ``share`` of the fact table, a
    fraction of whose tuples satisfy the WHERE clause."""
    fact = synthetic_arrays(n, groups, seed=31, columns="bcde")
    helper = _helper(n, 1)
    data = {"t": rows_of(fact), "h": rows_of(helper)}
    beta = max(2, groups // 5)
    sat = [r for r in data["t"] if r[2] < beta]
    unsat = [r for r in data["t"] if r[2] >= beta]
    engines = {}
    for push in (True, False):
        e = SketchEngine(options(q_join(groups), JOIN_REL, by_a(groups), selection_pushdown=push))
        e.maintain({t: dict(rows) for t, rows in data.items()})
        engines["on" if push else "off"] = e
    del data
    feeds = (Updates(sat, 1), Updates(unsat, 2))
    delta = int(n * share)
    out = []
    for f in fractions:
        times: dict[str, list[float]] = {k: [] for k in engines}
        for _ in range(repeats):
            k = int(delta * f)
            batch = {**feeds[0].batch(k, fresh_id), **feeds[1].batch(delta - k, fresh_id)}
            for name, e in engines.items():
                times[name].append(maintain_s(e, {"t": batch}))
        rec = {"fraction": f, "delta": delta, **{f"pushdown_{k}_s": median(v) for k, v in times.items()}}
        on, off = rec["pushdown_on_s"] * 1e3, rec["pushdown_off_s"] * 1e3
        progress(f"  selpd {f:.0%}: on {on:.1f} ms, off {off:.1f} ms")
        out.append(rec)
    if engines["on"].sketch() != engines["off"].sketch():
        raise AssertionError("selection push-down changed the sketch")
    return out


def exp_topm(sf: float, ms: Sequence[int], delta: int, batches: int) -> list:
    """TPC-H Q10 (top-20 customers by revenue, S4) with the top-k state bounded to m units (§2.6.3): the
    state kept, its checkpointed size, refills, and maintenance time over delete-only batches."""
    from bench.sketches_experiments import TPCH_QUERIES, tpch_data

    data = tpch_data(sf)
    sql, flags = TPCH_QUERIES["Q10"]
    top = max(r[0] for r in data["lineitem"]) + 1
    part = {"lineitem": {"column": "l_orderkey", "ranges": 1000, "domain": [1, top]}}
    live = list(data["lineitem"])
    rng = random.Random(4)
    plan = [rng.sample(range(len(live)), delta) for _ in range(batches)]
    out, sketches = [], set()
    for m in ms:
        progress(f"top-m Q10 SF {sf} m={m or 'all'}")
        e = SketchEngine(options(sql, "tpch", part, top_m=m, **flags))
        e.maintain({t: dict(r) for t, r in data.items() if t in e.tables})
        topk = [n for n in e.nodes if type(n).__name__ == "TopK"]
        entries_before = sum(n.stats()["topk_entries"] for n in topk)
        bytes_before = sum(len(json.dumps(list(n.entries(False)), default=str)) for n in topk)
        gone: set[int] = set()
        times = []
        for idx in plan:
            rows = {live[i]: -1 for i in idx if i not in gone}
            gone.update(idx)
            times.append(maintain_s(e, {"lineitem": rows}))
        sketches.add(e.sketch())
        stats = e.stats()
        out.append(
            {
                "m": m,
                "topk_entries": entries_before,
                "topk_state_bytes": bytes_before,
                "topk_entries_after": sum(n.stats()["topk_entries"] for n in topk),
                "refills": stats.get("topm_refills", 0.0),
                "imp_s": median(times),
                "delta": delta,
                "batches": batches,
            }
        )
        progress(f"  entries {entries_before:.0f}, {bytes_before:,} B, refills {out[-1]['refills']:.0f}")
        del e
        gc.collect()
    if len(sketches) != 1:
        raise AssertionError("top-m changed the sketch")
    return out
