"""Benchmark of the sketches service (docs/sketches/benchmark.md): IMP against recapture, at Python scale.

Experiments (docs/sketches/algorithm.md §9):

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

The paper's evaluation as it runs it (``bench/sketches_paper.py``, ``sketches_joins.py``,
``sketches_mixed.py``, ``sketches_tpch.py``, ``sketches_worker.py``):

* ``having_big``: Q_having (3 aggregates, G = 5,000) over the most rows that fit (``HAVING_BIG_ROWS``; the
  paper: 10M) against the DuckDB recapture.
* ``slope``: IMP's per-tuple cost for 1, 2, 3, 5 and 10 aggregates, engines timed round-robin.
* ``tpch_big``: Q1, Q3, Q5, Q6, Q7, Q9, Q10, Q14 at SF 0.1, Δ ≤ 100, with the Python recapture.
* ``tpch_sf1``: the same queries at SF 1 (the paper's smaller size) against the DuckDB recapture, which
  reads the ``.tbl`` files itself; each finished query is stored as it ends, once the memory its
  bootstrap needs is available; ``--queries`` runs some and keeps the stored others.
* ``crimes``: a Crimes-shaped table (the published schema, the artifact's beat partition), CQ1 and CQ2;
  CQ2 under explicit, equal-width and equi-depth partitions.
* ``joins``, ``joinsel``, ``selpd``: Q_join 1-n and m-n; join selectivity with materialised and probe
  joins, Bloom filters off and on; selection push-down on and off.
* ``topm``: TPC-H Q10's top-k state against m.
* ``mixed_instances``: the mixed workload with several query instances over one sketch (1,000 ops in
  the paper; 200 here), including 5U1Q at Δ = 2,000.
* ``worker_compare``: Q_having's table loaded and updated through one real worker per strategy.

Baselines for a batch: ``imp`` = ``SketchEngine.maintain``; Python ``full`` = the same engine's capture
over the whole store (what strategy ``full`` does when the sketch is stale); DuckDB ``full`` = the capture
rewritten to SQL (``capture_sql``) run by DuckDB, a vectorised engine, over a copy to which the batch was
applied (moving the batch into DuckDB is recorded as ``duckdb_apply_batch_s`` but not counted, as the
Python baseline's store update is not). Every IMP sketch is checked against both captures.

    python -m bench.sketches              # about an hour on a loaded 2-core VM; JSON + PNG in bench/results/
    python -m bench.sketches --only slope,crimes --update   # re-run sections into the stored report
    python -m bench.sketches --only tpch_sf1 --queries Q7,Q1 --update   # merged by query into the stored
    python -m bench.sketches --quick      # smoke test (small sizes)
    python -m bench.sketches --markdown   # print the tables of docs/sketches/benchmark.md from the JSON
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

import duckdb  # noqa: E402

from bench.lib.machine import load_average, machine_info  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from bench.lib.report import command_line  # noqa: E402
from bench.sketches_db import RESULTS  # noqa: E402
from bench.sketches_experiments import (  # noqa: E402
    TPCH_QUERIES,
    exp_breakeven,
    exp_frag,
    exp_groups,
    exp_mixed,
    exp_tpch,
)
from bench.sketches_joins import exp_joins, exp_joinsel, exp_selpd, exp_topm  # noqa: E402
from bench.sketches_mixed import exp_mixed_instances  # noqa: E402
from bench.sketches_paper import exp_crimes, exp_having_big, exp_slope  # noqa: E402
from bench.sketches_report import markdown, plot  # noqa: E402
from bench.sketches_tpch import exp_tpch_big  # noqa: E402
from bench.sketches_worker import exp_worker, exp_worker_compare  # noqa: E402


def sections(
    quick: bool, keep: Callable[[str, Any], None] | None = None, queries: list[str] | None = None
) -> dict[str, Callable[[], Any]]:
    """Every experiment by name, at the full or the smoke-test sizes; ``keep(name, part)`` stores a long
    section's finished part; ``queries`` restricts the TPC-H sections to those queries."""

    def keeping(name: str) -> Callable[[Any], None] | None:
        return None if keep is None else (lambda part: keep(name, part))

    if quick:
        # Smoke sizes: every section and code path at the smallest inputs that still have its shape
        # (each group and fragment populated, every TPC-H table non-empty at SF 0.002).
        n, deltas, reps, groups, sf = 1000, [10, 100], 2, [50, 500], 0.002
        return {
            "groups": lambda: exp_groups(n, groups, deltas, reps),
            "breakeven": lambda: exp_breakeven(n, [0.01, 0.05], 2),
            "frag": lambda: exp_frag(1000, [10, 100], reps),  # a batch of 1,000 replaces 500 rows
            "tpch": lambda: exp_tpch(sf, deltas, reps, ["Q3", "Q6"]),
            "mixed": lambda: exp_mixed(2000, 12, [20, 200]),
            "worker": exp_worker,
            "having_big": lambda: exp_having_big(3000, [10, 100], 2),
            "slope": lambda: exp_slope(3000, [1, 3], [10, 100], 2),
            "tpch_big": lambda: exp_tpch_big(sf, queries or ["Q3", "Q7"], [10], 2, keeping("tpch_big")),
            "tpch_sf1": lambda: exp_tpch_big(
                sf, queries or ["Q14"], [10], 2, keeping("tpch_sf1"), python=False, need_gb=0.5
            ),
            "crimes": lambda: exp_crimes(5000, [10], 2),
            "joins": lambda: exp_joins(4000, [50, 400], [5], [10], 2),
            "joinsel": lambda: exp_joinsel(4000, 400, [10, 1], [10], 2),
            "selpd": lambda: exp_selpd(4000, 200, [0.1, 1.0], 0.025, 2),
            "topm": lambda: exp_topm(sf, [20, 0], 20, 3),
            "mixed_instances": lambda: exp_mixed_instances(2000, 200, 12, [20, 200], ["1U1Q", "5U1Q"], 3),
            "worker_compare": lambda: exp_worker_compare(2000, 200, 400, 200),
        }
    n, deltas, reps = 1_000_000, [10, 100, 1000], 5
    return {
        "groups": lambda: exp_groups(n, [50, 1000, 5000], deltas, reps),
        "breakeven": lambda: exp_breakeven(n, [0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4], 2),
        "frag": lambda: exp_frag(n // 5, [10, 100, 1000, 5000], reps),
        "tpch": lambda: (
            exp_tpch(0.01, deltas, reps, list(TPCH_QUERIES)) + exp_tpch(0.1, deltas, 3, list(TPCH_QUERIES))
        ),
        "mixed": lambda: exp_mixed(50_000, 100, [20, 200]),
        "worker": exp_worker,
        "having_big": lambda: exp_having_big(HAVING_BIG_ROWS, deltas, 7),
        "slope": lambda: exp_slope(200_000, [1, 2, 3, 5, 10], [10, 100, 500, 1000], 3),
        "tpch_big": lambda: exp_tpch_big(
            TPCH_BIG_SF, queries or list(TPCH_QUERIES), [10, 100], 5, keeping("tpch_big")
        ),
        "tpch_sf1": lambda: exp_tpch_big(
            1.0, queries or SF1_ORDER, [10, 100], 3, keeping("tpch_sf1"), python=False, need_gb=SF1_NEED_GB
        ),
        "crimes": lambda: exp_crimes(200_000, deltas, reps),
        "joins": lambda: exp_joins(200_000, [50, 2000, 20_000], [5, 20], deltas, 3),
        "joinsel": lambda: exp_joinsel(100_000, 2000, [100, 20, 10, 1], deltas, 3),
        "selpd": lambda: exp_selpd(100_000, 1000, [0.02, 0.1, 0.25, 0.5, 1.0], 0.025, 3),
        "topm": lambda: exp_topm(0.01, [20, 50, 100, 0], 20, 10),
        "mixed_instances": lambda: exp_mixed_instances(
            20_000, 2000, 100, [20, 200, 2000], ["1U1Q", "1U5Q", "5U1Q"], 10
        ),
        "worker_compare": lambda: exp_worker_compare(20_000, 2000, 4000, 2000),
    }


# The largest sizes whose runs fit the time budget on the shared 2-core machine (docs/sketches/benchmark.md
# says what memory would allow): Q_having's table and TPC-H's scale factor.
HAVING_BIG_ROWS = 10_000_000
TPCH_BIG_SF = 0.1
# SF 1 without the Python recapture (its captures and bootstraps take hours of Python), the queries in
# the order of their bootstrap cost at SF 0.1, so a run stopped early holds the most queries.
SF1_ORDER = ["Q14", "Q10", "Q3", "Q6", "Q9", "Q5", "Q7", "Q1"]
# Memory a query at SF 1 waits for before it starts: Q7's bootstrap reached 13.5 GB resident with every
# table loaded, about 9 GB above the loaded tables.
SF1_NEED_GB = 10.0
TPCH_SECTIONS = ("tpch_big", "tpch_sf1")
WORKER_SECTIONS = ("worker", "worker_compare")


def merge_section(
    path: Path, name: str, part: Any, meta: dict[str, Any], by_query: bool = False
) -> dict[str, Any]:
    """The stored report with one section (and its run) replaced, written back and returned; read just
    before, so another run updating other sections of the same file keeps its own. ``by_query``: a
    TPC-H section's queries replace the stored ones of the same name and keep the others."""
    stored = json.loads(path.read_text()) if path.exists() else {}
    runs = stored.setdefault("sections", {})
    if by_query and stored.get(name):
        part, meta = merge_queries(stored[name], runs.get(name, {}), part, meta)
    stored[name] = part
    runs[name] = meta
    write_atomically(path, stored)
    return stored


def merge_queries(
    old: dict[str, Any], old_meta: dict[str, Any], new: dict[str, Any], new_meta: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A TPC-H section holding the new run's queries and the stored queries it did not re-run (in the
    stored order, new ones after), with every run's command and load under ``runs``, each naming its
    queries. Both must be at the same scale factor."""
    if old["sf"] != new["sf"]:
        raise ValueError(f"cannot merge SF {new['sf']} queries into a section at SF {old['sf']}")
    fresh = {q["query"]: q for q in new["queries"]}
    kept = [q for q in old["queries"] if q["query"] not in fresh]
    order = [q["query"] for q in old["queries"]] + [
        n for n in fresh if n not in {q["query"] for q in old["queries"]}
    ]
    every = {q["query"]: q for q in kept} | fresh
    queries = [every[n] for n in order]
    previous = old_meta.get("runs") or [{**old_meta, "queries": [q["query"] for q in old["queries"]]}]
    runs = [{**r, "queries": [n for n in r["queries"] if n not in fresh]} for r in previous]
    runs = [r for r in runs if r["queries"]] + [{**new_meta, "queries": list(fresh)}]
    rss = max(old.get("rss_gb", 0.0), new.get("rss_gb", 0.0))
    return {**old, **new, "queries": queries, "rss_gb": rss}, {**new_meta, "runs": runs}


def write_atomically(path: Path, report: dict[str, Any]) -> None:
    """A reader (or another run merging its sections) never sees a half-written file."""
    part = path.with_name(f".{path.name}.{os.getpid()}")
    part.write_text(json.dumps(report, indent=1))
    part.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--markdown", action="store_true", help="print the tables from the recorded JSON")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-worker", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated sections to run (default: all)")
    ap.add_argument(
        "--update", action="store_true", help="replace only the sections run in the stored report"
    )
    ap.add_argument(
        "--queries",
        default="",
        help="comma-separated TPC-H queries for tpch_big/tpch_sf1; with --update merged into the stored ones",
    )
    args = ap.parse_args(argv)
    out = args.out or RESULTS / ("sketches_quick.json" if args.quick else "sketches.json")
    out = out if out.suffix == ".json" else out.with_name(out.name + ".json")
    if args.markdown:
        print(markdown(json.loads(out.read_text())))
        return 0
    report: dict[str, Any] = json.loads(out.read_text()) if args.update and out.exists() else {}
    command = command_line("bench/sketches.py", argv)
    started: dict[str, tuple[list[float], float]] = {}  # section -> (load, clock) at its start

    def record(name: str, part: Any) -> None:
        """The section's result with its command, load and seconds so far. With --update it is merged
        into the stored report at once (re-read first, so runs of other sections at the same time keep
        theirs), and each finished section, or finished part of a long one, survives whatever follows."""
        start, s0 = started[name]
        meta = {
            "command": command,
            "loadavg_start": start,
            "loadavg_end": load_average(),
            "seconds": time.perf_counter() - s0,
        }
        report[name] = part
        report.setdefault("sections", {})[name] = meta
        if args.update:
            report.update(
                merge_section(out, name, part, meta, by_query=bool(queries) and name in TPCH_SECTIONS)
            )

    queries = [q for q in args.queries.split(",") if q]
    unknown_queries = sorted(set(queries) - set(TPCH_QUERIES))
    if unknown_queries:
        print(f"unknown queries {unknown_queries}; known: {', '.join(TPCH_QUERIES)}", file=sys.stderr)
        return 2
    every = sections(args.quick, record, queries or None)
    chosen = [s for s in args.only.split(",") if s] or list(every)
    unknown = sorted(set(chosen) - set(every))
    if unknown:
        print(f"unknown sections {unknown}; known: {', '.join(every)}", file=sys.stderr)
        return 2
    if args.no_worker:
        chosen = [s for s in chosen if s not in WORKER_SECTIONS]
    if args.quick:
        # Every timed call starts with a full collection; on a smoke run's tiny inputs, collecting what
        # the imports left (DuckDB, sqlglot, matplotlib) is most of the run. A full run leaves the heap
        # as it is.
        gc.freeze()
    t0 = time.perf_counter()
    if not args.update:
        report = {"command": command, "loadavg_start": load_average()}
    for name in chosen:
        progress(f"== {name}")
        started[name] = (load_average(), time.perf_counter())
        record(name, every[name]())
    if not args.update:
        report["seconds"] = time.perf_counter() - t0
        report["loadavg_end"] = load_average()
        report["machine"] = machine_info(duckdb=duckdb.__version__)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not args.update:
        write_atomically(out, report)
    plot(report, out.with_suffix(".png"))
    progress(f"wrote {out} and {out.with_suffix('.png')} in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
