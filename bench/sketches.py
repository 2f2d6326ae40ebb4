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

Baselines for a batch: ``imp`` = ``SketchEngine.maintain``; Python ``full`` = the same engine's capture
over the whole store (what strategy ``full`` does when the sketch is stale); DuckDB ``full`` = the capture
rewritten to SQL (``capture_sql``) run by DuckDB, a vectorised engine, over a copy to which the batch was
applied (moving the batch into DuckDB is recorded as ``duckdb_apply_batch_s`` but not counted, as the
Python baseline's store update is not). Every IMP sketch is checked against both captures.

    python -m bench.sketches              # ~20 min on a loaded 2-core VM; JSON + PNG in bench/results/
    python -m bench.sketches --quick      # smoke test (small sizes)
    python -m bench.sketches --markdown   # print the tables of docs/sketches/benchmark.md from the JSON
"""

from __future__ import annotations

import argparse
import json
import sys
import time
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
from bench.sketches_experiments import TPCH_QUERIES, exp_breakeven, exp_frag, exp_groups, exp_mixed, exp_tpch  # noqa: E402
from bench.sketches_report import markdown, plot  # noqa: E402
from bench.sketches_worker import exp_worker  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    load_start = load_average()
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
        "loadavg_start": load_start,
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
    report["loadavg_end"] = load_average()
    report["machine"] = machine_info(duckdb=duckdb.__version__)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    plot(report, out.with_suffix(".png"))
    progress(f"wrote {out} and {out.with_suffix('.png')} in {report['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
