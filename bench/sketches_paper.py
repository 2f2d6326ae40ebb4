"""The IMP paper's synthetic and Crimes experiments at the largest sizes that fit
(docs/sketches/benchmark.md): Q_having at 10M rows against DuckDB recapture, the cost slope over 1..10
aggregates, the Crimes-shaped workload (CQ1, CQ2) and explicit, equal-width and equi-depth range
partitions.

Big tables are generated with numpy and loaded into DuckDB from arrays, so no Python row loop is timed
or waited for on the baseline's side; the IMP engine receives the same rows as Python tuples.
"""

from __future__ import annotations

import gc
import resource
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]

from bench.lib.progress import progress
from bench.sketches_db import Bench, median, options
from bench.sketches_experiments import by_a, fresh_id

# b..k = c_i * a + noise, the artifact generator's slopes (b..j) and k = 3a (syncGen)
WIDE_SLOPES = {"b": 2, "c": 3, "d": 4, "e": 3, "f": 2, "g": 5, "h": 6, "i": 7, "j": 8, "k": 3}


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def synthetic_arrays(n: int, groups: int, seed: int, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """``id`` 0..n-1, ``a`` uniform in [1, G], each value column ``slope * a + N(0, 30)`` as int."""
    rng = np.random.default_rng(seed)
    out = {"id": np.arange(n, dtype=np.int64), "a": rng.integers(1, groups + 1, n, dtype=np.int64)}
    for c in columns:
        out[c] = WIDE_SLOPES[c] * out["a"] + np.rint(rng.normal(0, 30, n)).astype(np.int64)
    return out


def rows_of(arrays: dict[str, np.ndarray]) -> dict[tuple[Any, ...], int]:
    return dict.fromkeys(zip(*(a.tolist() for a in arrays.values()), strict=True), 1)


def frame_loader(arrays: dict[str, np.ndarray], table: str = "t") -> Any:
    """A Bench ``duck_load``: the table from the arrays, its fragment ids by the engine's own boundaries."""

    def load(con: Any, bench: Bench) -> None:
        spec = bench.engine.specs[table]
        frag = np.searchsorted(np.asarray(spec.boundaries), arrays[spec.column], side="right") + spec.offset
        df = pd.DataFrame({**arrays, "__frag": frag.astype(np.int64)})
        con.register("__frame", df)
        con.execute(f"CREATE TABLE __p_{table} AS SELECT * FROM __frame")
        con.unregister("__frame")

    return load


def relation(columns: Sequence[str]) -> dict[str, dict[str, str]]:
    return {"t": {c: "int" for c in ("id", "a", *columns)}}


def q_aggs(aggs: int, groups: int) -> str:
    """Q_having with ``aggs`` aggregation functions: AVG(b) then HAVING AVG(c) < 1.5 G (about half the
    groups), AVG(d) < 4 G and AVG(x) > 0 for the next columns (true: they only make work)."""
    conds = [f"AVG(c) < {3 * groups // 2}", f"AVG(d) < {4 * groups}"]
    conds += [f"AVG({c}) > 0" for c in "efghijk"]
    having = conds[: aggs - 1]
    return "SELECT a, AVG(b) FROM t GROUP BY a" + (f" HAVING {' AND '.join(having)}" if having else "")


def _runs(
    b: Bench, deltas: Sequence[int], repeats: int, python_repeats: int, make: Any = fresh_id
) -> list[dict[str, Any]]:
    """Per Δ: IMP and DuckDB recapture interleaved batch by batch; the Python recapture timed apart."""
    full_py = median([b.full_python() for _ in range(python_repeats)]) if python_repeats else None
    out = []
    for d in deltas:
        rec = b.series("t", d, repeats, make)
        if full_py is not None:
            rec["full_python_s"] = full_py
            rec["speedup_python"] = full_py / rec["imp_s"]
        progress(f"  Δ={d}: imp {rec['imp_s'] * 1e3:.2f} ms, duckdb {rec['full_duckdb_s'] * 1e3:.1f} ms")
        out.append(rec)
    b.check()
    return out


def exp_having_big(n: int, deltas: Sequence[int], repeats: int, aggs: int = 3) -> dict[str, Any]:
    """Q_having (G = 5,000) at the largest size that fits: the goal experiment against DuckDB."""
    g = 5000
    progress(f"Q_having aggs={aggs} G={g} N={n:,} (generating)")
    arrays = synthetic_arrays(n, g, seed=3, columns="bcde")
    data = {"t": rows_of(arrays)}
    opts = options(q_aggs(aggs, g), relation("bcde"), by_a(g))
    b = Bench(opts, data, seed=3, duck_load=frame_loader(arrays))
    del data
    progress(f"  bootstrap {b.bootstrap_s:.0f} s, rss {rss_gb():.1f} GB")
    runs = _runs(b, deltas, repeats, python_repeats=1)
    out = {"rows": n, "groups": g, "aggregates": aggs, "bootstrap_s": b.bootstrap_s, "rss_gb": rss_gb()}
    del b, arrays
    gc.collect()
    return {**out, "runs": runs}


def exp_slope(n: int, aggs_list: Sequence[int], deltas: Sequence[int], rounds: int) -> dict[str, Any]:
    """IMP's cost against Δ for 1..10 aggregates, all engines built first and timed round-robin so load
    changes hit every configuration alike; the slope is a least-squares fit of per-batch time on Δ."""
    g = 5000
    progress(f"slope: N={n:,}, aggregates {list(aggs_list)}")
    arrays = synthetic_arrays(n, g, seed=9, columns=list(WIDE_SLOPES))
    data = {"t": rows_of(arrays)}
    benches = {
        k: Bench(
            options(q_aggs(k, g), relation(list(WIDE_SLOPES)), by_a(g)),
            data,
            seed=k,
            duck_load=frame_loader(arrays),
        )
        for k in aggs_list
    }
    del data
    times: dict[tuple[int, int], list[float]] = {}
    duck: dict[tuple[int, int], list[float]] = {}
    python: dict[int, list[float]] = {k: [] for k in aggs_list}
    for r in range(rounds):
        progress(f"  round {r + 1}/{rounds}")
        for k, b in benches.items():
            if r < 2:
                python[k].append(b.full_python())
            for d in deltas:
                batch = b.batch("t", d, fresh_id)
                times.setdefault((k, d), []).append(b.imp(batch))
                duck.setdefault((k, d), []).append(b.full_duckdb(batch)[0])
    out = []
    for k, b in benches.items():
        b.check()
        xs = np.array(deltas, dtype=float)
        ys = np.array([median(times[(k, d)]) for d in deltas])
        slope, intercept = np.polyfit(xs, ys, 1)
        out.append(
            {
                "aggregates": k,
                "slope_us_per_tuple": slope * 1e6,
                "intercept_ms": intercept * 1e3,
                "full_python_s": median(python[k]),
                "runs": [
                    {"delta": d, "imp_s": median(times[(k, d)]), "full_duckdb_s": median(duck[(k, d)])}
                    for d in deltas
                ],
            }
        )
        progress(
            f"  {k} aggregates: {slope * 1e6:.1f} µs per tuple, Python recapture {median(python[k]):.2f} s"
        )
    del benches, arrays
    gc.collect()
    return {"rows": n, "groups": g, "rounds": rounds, "configs": out}


# --- Crimes ------------------------------------------------------------------------------------------

# The IMP artifact's beat partition of the Chicago crimes table (queries/Crimes/q01, equi-depth over the
# real data): 101 bounds b_0 = min .. b_100 = max + 1 of 100 ranges; the inner 99 are our boundaries.
CRIMES_BEAT_BOUNDS = (
    1,
    113,
    124,
    131,
    134,
    212,
    214,
    222,
    223,
    231,
    233,
    235,
    314,
    334,
    433,
    531,
    614,
    622,
    714,
    715,
    724,
    726,
    732,
    811,
    812,
    821,
    913,
    914,
    921,
    922,
    924,
    931,
    933,
    934,
    1012,
    1013,
    1023,
    1033,
    1114,
    1115,
    1125,
    1211,
    1212,
    1214,
    1222,
    1224,
    1231,
    1233,
    1311,
    1323,
    1331,
    1411,
    1413,
    1421,
    1423,
    1432,
    1434,
    1511,
    1513,
    1612,
    1621,
    1623,
    1624,
    1632,
    1634,
    1652,
    1712,
    1722,
    1724,
    1732,
    1733,
    1812,
    1822,
    1823,
    1911,
    1913,
    1921,
    1923,
    1932,
    1933,
    2011,
    2022,
    2024,
    2033,
    2122,
    2131,
    2211,
    2221,
    2222,
    2311,
    2324,
    2333,
    2412,
    2424,
    2432,
    2433,
    2513,
    2522,
    2523,
    2525,
    2550,
)
CRIMES_COLUMNS = {
    "id": "int", "case_number": "str", "date": "str", "block": "str", "iucr": "str", "primary_type": "str",
    "description": "str", "location_description": "str", "arrest": "str", "domestic": "str", "beat": "int",
    "district": "int", "ward": "int", "community_area": "int", "fbi_code": "str", "x_coordinate": "int",
    "y_coordinate": "int", "year": "int", "updated_on": "str", "latitude": "float", "longitude": "float",
    "location": "str",
}  # fmt: skip
# Shares of the most frequent primary types in the public data (2001-2024, rounded), the rest pooled.
PRIMARY_TYPES = {
    "THEFT": 0.21, "BATTERY": 0.18, "CRIMINAL DAMAGE": 0.11, "NARCOTICS": 0.09, "ASSAULT": 0.065,
    "OTHER OFFENSE": 0.062, "BURGLARY": 0.053, "MOTOR VEHICLE THEFT": 0.048, "DECEPTIVE PRACTICE": 0.043,
    "ROBBERY": 0.037, "CRIMINAL TRESPASS": 0.028, "WEAPONS VIOLATION": 0.014, "OTHER": 0.059,
}  # fmt: skip
CQ1 = "SELECT beat, year, COUNT(id) AS crime_count FROM crimes GROUP BY beat, year"
CQ2 = (
    "SELECT district, community_area, ward, beat, COUNT(beat) FROM crimes "
    "GROUP BY district, community_area, ward, beat HAVING COUNT(id) > {threshold}"
)


def crimes_arrays(n: int, seed: int) -> dict[str, np.ndarray]:
    """A Crimes-shaped table: the published schema; beats the 4-digit codes district·100 + sector·10 +
    beat, each of the artifact's 100 equi-depth ranges holding ~1 % of the rows with Zipf-like weights
    inside it; district = beat // 100; each beat a home ward (1..50) and community area (1..77) with 10 %
    noise; years 2001-2024 falling linearly to half; about 25 % arrests and 15 % domestic."""
    rng = np.random.default_rng(seed)
    districts = [d for d in range(1, 26) if d not in (13, 21, 23)]
    codes = np.array(
        sorted(d * 100 + s * 10 + b for d in districts for s in range(1, 6) for b in range(1, 6))
    )
    beats = []
    for lo, hi in pairwise(CRIMES_BEAT_BOUNDS):
        inside = codes[(codes >= lo) & (codes < hi)]
        if not len(inside):
            inside = np.array([lo])
        w = 1.0 / np.arange(1, len(inside) + 1)
        beats.append(rng.choice(inside, size=n // 100 + 1, p=w / w.sum()))
    beat = rng.permutation(np.concatenate(beats))[:n]
    home_ward = {int(c): int(rng.integers(1, 51)) for c in np.unique(beat)}
    home_area = {int(c): int(rng.integers(1, 78)) for c in np.unique(beat)}
    noisy = rng.random(n) < 0.1
    ward = np.where(noisy, rng.integers(1, 51, n), np.vectorize(home_ward.get)(beat))
    area = np.where(noisy, rng.integers(1, 78, n), np.vectorize(home_area.get)(beat))
    years = np.arange(2001, 2025)
    yw = np.linspace(2.0, 1.0, len(years))
    year = rng.choice(years, size=n, p=yw / yw.sum())
    types = list(PRIMARY_TYPES)
    tw = np.array(list(PRIMARY_TYPES.values()))
    ptype = np.array(types)[rng.choice(len(types), size=n, p=tw / tw.sum())]
    month, day = rng.integers(1, 13, n), rng.integers(1, 29, n)
    date = np.char.add(np.char.add(year.astype(str), "-"), np.char.zfill(month.astype(str), 2))
    date = np.char.add(np.char.add(date, "-"), np.char.zfill(day.astype(str), 2))
    lat, lon = 41.64 + 0.38 * rng.random(n), -87.94 + 0.42 * rng.random(n)
    return {
        "id": np.arange(10_000_000, 10_000_000 + n, dtype=np.int64),
        "case_number": np.char.add("J", rng.integers(100000, 999999, n).astype(str)),
        "date": date,
        "block": np.char.add(rng.integers(0, 130, n).astype(str), "XX S STATE ST"),
        "iucr": rng.integers(110, 5200, n).astype(str),
        "primary_type": ptype,
        "description": np.where(rng.random(n) < 0.5, "SIMPLE", "OVER $500"),
        "location_description": np.where(rng.random(n) < 0.3, "STREET", "RESIDENCE"),
        "arrest": np.where(rng.random(n) < 0.25, "true", "false"),
        "domestic": np.where(rng.random(n) < 0.15, "true", "false"),
        "beat": beat.astype(np.int64),
        "district": (beat // 100).astype(np.int64),
        "ward": ward.astype(np.int64),
        "community_area": area.astype(np.int64),
        "fbi_code": rng.integers(1, 27, n).astype(str),
        "x_coordinate": rng.integers(1_100_000, 1_205_000, n),
        "y_coordinate": rng.integers(1_813_000, 1_952_000, n),
        "year": year.astype(np.int64),
        "updated_on": np.char.add(year.astype(str), "-12-31"),
        "latitude": lat,
        "longitude": lon,
        "location": np.char.add(np.char.add("(", lat.round(6).astype(str)), ")"),
    }


def _plain(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: (v.astype(object) if v.dtype.kind == "U" else v) for k, v in arrays.items()}


def crimes_partitions(arrays: dict[str, np.ndarray], sample_share: float, seed: int) -> dict[str, dict]:
    """The three partitions of ``beat`` with 100 ranges: the artifact's explicit bounds, equal width over
    the code domain, and equi-depth from a sample of the table (the engine computes the cut points)."""
    rng = np.random.default_rng(seed)
    beat = arrays["beat"]
    sample = rng.choice(beat, size=max(100, int(len(beat) * sample_share)), replace=False).tolist()
    return {
        "explicit (artifact)": {"column": "beat", "boundaries": list(CRIMES_BEAT_BOUNDS[1:-1])},
        "equal width": {"column": "beat", "ranges": 100, "domain": [int(beat.min()), int(beat.max()) + 1]},
        f"equi-depth ({sample_share:.0%} sample)": {"column": "beat", "ranges": 100, "sample": sample},
    }


def exp_crimes(n: int, deltas: Sequence[int], repeats: int) -> dict[str, Any]:
    """CQ1 and CQ2 (S2: beat is a GROUP BY column), partition beat with the artifact's bounds, then CQ2
    under equal-width and equi-depth partitions: time, sketch size and the rows a use of it scans.

    CQ2's threshold is the median size of the groups with more than 10 rows, so about half the beats'
    home groups pass (the paper's 1,000 over 7.3M rows would keep every home group of a smaller table)."""
    progress(f"Crimes N={n:,}")
    arrays = crimes_arrays(n, seed=17)
    keys = ["district", "community_area", "ward", "beat"]
    sizes = pd.DataFrame({k: arrays[k] for k in keys}).groupby(keys).size()
    threshold = int(sizes[sizes > 10].median())
    data = {"crimes": dict.fromkeys(zip(*(a.tolist() for a in arrays.values()), strict=True), 1)}
    rel = {"crimes": CRIMES_COLUMNS}
    parts = crimes_partitions(arrays, 0.01, seed=17)
    frame = _plain(arrays)
    out: dict[str, Any] = {"rows": n, "threshold": threshold, "queries": [], "partitions": []}
    for name, sql in (("CQ1", CQ1), ("CQ2", CQ2.format(threshold=threshold))):
        for label, part in parts.items():
            if name == "CQ1" and not label.startswith("explicit"):
                continue
            progress(f"{name}, partition {label}")
            b = Bench(
                options(sql, rel, {"crimes": part}), data, seed=5, duck_load=frame_loader(frame, "crimes")
            )
            runs = _runs_crimes(b, deltas, repeats)
            sketch = b.engine.skipping_sketch()
            rec = {
                "query": name,
                "partition": label,
                "fragments": b.engine.specs["crimes"].fragments,
                "sketch_fragments": bin(b.engine.sketch()).count("1"),
                "rows_scanned": b.engine.rows_scanned(sketch),
                "rows_total": sum(b.engine.rows.values()),
                "bootstrap_s": b.bootstrap_s,
                "runs": runs,
            }
            out["partitions" if name == "CQ2" else "queries"].append(rec)
            if name == "CQ2" and label.startswith("explicit"):
                out["queries"].append(rec)
            del b
            gc.collect()
    return out


def _crime_copy(row: tuple[Any, ...], new: int) -> tuple[Any, ...]:
    return (new, *row[1:])


def _runs_crimes(b: Bench, deltas: Sequence[int], repeats: int) -> list[dict[str, Any]]:
    full_py = b.full_python()
    out = []
    for d in deltas:
        imp, duck = [], []
        for _ in range(repeats):
            batch = b.batch("crimes", d, _crime_copy)
            imp.append(b.imp(batch))
            duck.append(b.full_duckdb(batch)[0])
        rec = {"delta": d, "imp_s": median(imp), "full_duckdb_s": median(duck), "full_python_s": full_py}
        rec["speedup_duckdb"] = rec["full_duckdb_s"] / rec["imp_s"]
        rec["speedup_python"] = full_py / rec["imp_s"]
        progress(f"  Δ={d}: imp {rec['imp_s'] * 1e3:.2f} ms, duckdb {rec['full_duckdb_s'] * 1e3:.1f} ms")
        out.append(rec)
    b.check()
    return out
