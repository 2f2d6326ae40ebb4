"""Triangle-count benchmark: IVM^ε against first-order IVM and the other baselines, plus one end-to-end run.

One run measures (workloads in ``bench/triangles_workloads.py``, explained in docs/triangles/algorithm.md §7;
results in docs/triangles/benchmark.md):

1. engine level, relations mode R(a,b)·S(b,c)·T(c,a), |D| in ``--sizes`` (default 2^12, 2^14, 2^16, 2^18):
   - ``W-mix`` and ``W-hub``: D₀ through BUILD (``load``), then toggles of R(a*, b*);
   - ``W-grow``: n R-MAT tuples inserted from empty, then all deleted (every doubling and halving of N);
   - an ε sweep at one size (``--eps-size``), ε in {0, 1/4, 1/3, 1/2, 2/3, 3/4, 1}, on the fixed W-mix
     instance and on the worst case for each ε (``W-adv``: W-mix built at that ε's threshold for ε ≤ ½,
     its mirror with one long light row for ε > ½);
   strategies ivm-eps (ε = 1/2) and first-order (smaller row) everywhere; factorized, recursive and
   recompute up to ``--baseline-max-size`` and only when their estimated cost fits (else a ``skipped``
   case with the estimate and the reason). Per case: updates/s (wall), p50/p99/max latency, work units
   per update (the engine's counters), memory (tracemalloc around BUILD and exact state-entry counts),
   and the final count against an independent brute-force recount.
2. plots: work/update against |D| on W-mix (log-log, fitted slopes), the IVM^½ / first-order speed-up
   against |D|, and the ε sweep.
3. end to end on the embedded broker: graph mode, ivm-eps ε = 1/2, one key on a 1-partition topic, a
   ``Worker`` with RocksDB state and the default checkpoint interval; a W-mix-like edge stream and an
   R-MAT churn stream. Timed from group assignment to the final checkpoint; the published count, the
   checkpointed state, an offline ``create_engine`` replay and a brute-force count must all agree.

Toggle counts: up to ``--toggles`` per case, fewer when a 10-toggle warm-up predicts more than
``--budget`` seconds (never fewer than ``--min-toggles``); figures are per update, never totals. The
toggles of a case run in 5 blocks, interleaved with the blocks of the other strategies at the same size,
and updates/s is the median block rate: the machine may be shared, and a paired, interleaved measurement
keeps contention from favouring one side of a ratio.

Usage (from the repo root)::

    .venv/bin/python bench/triangles.py            # the full run (~2-3 minutes on 2 cores)
    .venv/bin/python bench/triangles.py --quick    # smoke size, well under a minute

Writes ``bench/results/triangles.json`` and ``triangles_{scaling,speedup,eps}.png``
(``triangles_quick*`` with ``--quick``). Exits 1 if any count check fails.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))


from bench import triangles_workloads as wl  # noqa: E402
from bench.lib.machine import machine_info  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from bench.triangles_analysis import analyse, default_vs_best, ivm_over_baselines  # noqa: E402
from bench.triangles_cases import (  # noqa: E402
    BATCH_SIZES,
    BLOCKS,
    DEFAULT,
    EPS_SWEEP,
    MEMORY_METHOD,
    RESULTS,
    STRATEGIES,
    WARMUP_TOGGLES,
    eps_suite,
    toggle_suite,
)
from bench.triangles_e2e import e2e_suite  # noqa: E402
from bench.triangles_growth import churn_suite, grow_suite  # noqa: E402
from bench.triangles_report import (  # noqa: E402
    markdown,
    plot_eps,
    plot_scaling,
    plot_speedup,
    plot_strategies,
    print_summary,
)


def _sizes(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if part:
            out.append(2 ** int(part[2:]) if part.startswith("2^") else int(part))
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke size: |D| in 2^10, 2^12, small budgets")
    p.add_argument(
        "--sizes", default=None, help="comma-separated |D| (ints or 2^k); default 2^12,2^14,2^16,2^18"
    )
    p.add_argument("--grow-sizes", default=None, help="W-grow sizes (default: --sizes)")
    p.add_argument(
        "--eps-size", default=None, help="|D| of the epsilon sweep (default 2^16; 2^12 with --quick)"
    )
    p.add_argument(
        "--toggles", type=int, default=None, help="max toggles per case (default 20000, 200 quick)"
    )
    p.add_argument(
        "--min-toggles", type=int, default=None, help="min toggles per case (default 50; 20 quick)"
    )
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="target seconds of toggles (or churn) per case (default 3; 0.3 quick)",
    )
    p.add_argument(
        "--max-case-seconds",
        type=float,
        default=None,
        help="skip a case whose estimated minimum cost exceeds this (default 60; 5 quick)",
    )
    p.add_argument("--churn-sizes", default=None, help="G-churn |D| (default: --sizes)")
    p.add_argument(
        "--churn-steps",
        type=int,
        default=None,
        help="churn events per G-churn case (default 20000; 1000 quick)",
    )
    p.add_argument(
        "--batch-size-at", default=None, help="G-churn |D| run at every batch size (default 2^16; 2^12 quick)"
    )
    p.add_argument("--with-hub", action="store_true", help="also run W-hub")
    p.add_argument(
        "--markdown",
        action="store_true",
        help="print the docs/triangles/benchmark.md tables from a stored report (--from) and exit",
    )
    p.add_argument(
        "--from", dest="source", default=None, help="report for --markdown (default: the --out JSON)"
    )
    p.add_argument(
        "--e2e-events",
        type=int,
        default=None,
        help="events per end-to-end stream (default 40000; 3000 quick)",
    )
    p.add_argument("--no-e2e", action="store_true", help="skip the end-to-end part")
    p.add_argument("--seed", type=int, default=7, help="seed of the R-MAT streams (default 7)")
    p.add_argument(
        "--out",
        default=None,
        help="output prefix, or an existing directory (default bench/results/triangles, "
        "bench/results/triangles_quick with --quick)",
    )
    args = p.parse_args(argv)
    q = args.quick
    args.sizes = _sizes(args.sizes) if args.sizes else ([2**10, 2**12] if q else [2**12, 2**14, 2**16, 2**18])
    args.grow_sizes = _sizes(args.grow_sizes) if args.grow_sizes else list(args.sizes)
    args.eps_size = _sizes(args.eps_size)[0] if args.eps_size else (2**12 if q else 2**16)
    args.toggles = args.toggles or (200 if q else 20000)
    args.min_toggles = args.min_toggles or (20 if q else 50)
    args.budget = args.budget or (0.3 if q else 3.0)
    args.max_case_seconds = args.max_case_seconds or (5.0 if q else 60.0)
    args.churn_sizes = _sizes(args.churn_sizes) if args.churn_sizes else list(args.sizes)
    args.churn_steps = args.churn_steps or (1000 if q else 20000)
    args.batch_size_at = _sizes(args.batch_size_at)[0] if args.batch_size_at else (2**12 if q else 2**16)
    args.e2e_events = args.e2e_events or (3000 if q else 40000)
    if min(args.sizes + args.grow_sizes + [args.eps_size]) < 2**8:
        p.error("sizes must be at least 256")
    if args.min_toggles < 2 or args.toggles < args.min_toggles or args.e2e_events < 100:
        p.error("need --toggles >= --min-toggles >= 2 and --e2e-events >= 100")
    default_out = RESULTS / ("triangles_quick" if q else "triangles")
    out = Path(args.out) if args.out else default_out
    args.out = out / default_out.name if out.is_dir() else out
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown:
        source = Path(args.source) if args.source else args.out.with_suffix(".json")
        sys.stdout.write(markdown(json.loads(source.read_text())))
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    run_id = uuid.uuid4().hex[:8]
    started = time.perf_counter()
    progress(
        f"run {run_id}: sizes {args.sizes}, W-grow {args.grow_sizes}, eps sweep at {args.eps_size}, "
        f"toggles <= {args.toggles} (budget {args.budget:g}s/case), "
        f"e2e {0 if args.no_e2e else args.e2e_events} events"
    )
    machine = machine_info()  # load average at the start: other processes share the cores
    cases: dict[str, dict[str, Any]] = {}
    cases.update(toggle_suite("W-mix", wl.w_mix, args.sizes, args))
    cases.update(toggle_suite("W-all", wl.w_all, args.sizes, args))
    if args.with_hub:
        cases.update(toggle_suite("W-hub", wl.w_hub, args.sizes, args))
    cases.update(eps_suite(args))
    cases.update(grow_suite(args.grow_sizes, args))
    cases.update(churn_suite(args))
    if not args.no_e2e:
        cases.update(e2e_suite(args, run_id))

    ran = [c for c in cases.values() if c.get("status", "ok") == "ok"]
    failed = sorted(c["id"] for c in ran if not c["count_ok"])
    analysis = analyse(cases, args.sizes)
    analysis["default_vs_best"] = default_vs_best(cases)
    analysis["w_all_ivm_over_baselines"] = ivm_over_baselines(cases, "W-all")
    wmix = {r["size"]: r for r in analysis["speedups"]["W-mix"]}
    largest = max(args.sizes)
    goal_row = wmix.get(largest)
    report: dict[str, Any] = {
        "benchmark": "triangles",
        "run_id": run_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(
            [".venv/bin/python", "bench/triangles.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "wall_seconds": None,
        "config": {
            "sizes": args.sizes,
            "grow_sizes": args.grow_sizes,
            "eps_size": args.eps_size,
            "eps_sweep": [str(e) for e in EPS_SWEEP],
            "toggles_max": args.toggles,
            "toggles_min": args.min_toggles,
            "warmup_toggles": WARMUP_TOGGLES,
            "budget_s_per_case": args.budget,
            "max_case_seconds": args.max_case_seconds,
            "churn_sizes": args.churn_sizes,
            "churn_steps": args.churn_steps,
            "batch_sizes": list(BATCH_SIZES),
            "batch_size_at": args.batch_size_at,
            "strategies": list(STRATEGIES),
            "default_strategy": DEFAULT,
            "e2e_events": 0 if args.no_e2e else args.e2e_events,
            "seed": args.seed,
            "mode": "relations (engine level), graph (end to end)",
            "api": "engine.apply_tuple per update (W-*), engine.apply per batch with the result read "
            "after each (G-churn); Worker over Kafka (end to end)",
            "timing": "perf_counter_ns around each update. Toggle cases: timed in "
            f"{BLOCKS} equal blocks, the blocks of all strategies of one size interleaved; updates_per_s "
            "= median block rate (updates_per_s_mean = all updates / all time; speedup = ratio of the "
            "medians, speedup_blockwise_median = median of the per-block ratios). W-grow and end to end: "
            "updates / total time. us_per_update_cpu (toggle, W-grow and G-churn cases): the same from "
            "the thread's CPU time (time.thread_time_ns) around each block (W-grow: each chunk), median "
            "block rate; the analysis rows' ratio_cpu compare it",
            "work_units": "the engine's work counter: delta/view loop iterations and view probes; "
            "rebalancing work is reported separately (work_per_update_incl_rebalancing adds it)",
            "memory_method": MEMORY_METHOD,
        },
        "machine": {**machine, "loadavg_at_end": machine_info()["loadavg_1_5_15"]},
        "cases": cases,
        "analysis": analysis,
        "goals": {
            "default_within_1_5x_everywhere": all(r["within_1_5x"] for r in analysis["default_vs_best"]),
            "default_rows_not_within_1_5x": [
                f"{r['workload']}|{r['size']}|b{r['batch_size']}: {r['ratio']}x of {r['best']} per update, "
                f"{r.get('ratio_whole_run', '-')}x of {r.get('best_whole_run', '-')} over the whole run"
                for r in analysis["default_vs_best"]
                if not r["within_1_5x"]
            ],
            "default_per_update_cpu_within_1_5x_everywhere": all(
                r.get("ratio_cpu", 0) <= 1.5 for r in analysis["default_vs_best"]
            ),
            "w_all_ivm_min_measured_speedup": analysis["w_all_ivm_over_baselines"].get(
                "min_measured_speedup"
            ),
            "w_all_ivm_size": analysis["w_all_ivm_over_baselines"].get("size"),
            "w_all_ivm_goal_10x_met": analysis["w_all_ivm_over_baselines"].get("goal_10x_met_by_measured"),
            "w_mix_speedup_at_largest_size": goal_row["speedup"] if goal_row else None,
            "w_mix_largest_size": largest,
            "w_mix_speedup_goal": 100,
            "w_mix_speedup_goal_met": (goal_row["speedup"] >= 100) if goal_row and largest >= 2**18 else None,
            "w_mix_speedup_growing": all(
                a["speedup"] < b["speedup"]
                for a, b in zip(
                    analysis["speedups"]["W-mix"], analysis["speedups"]["W-mix"][1:], strict=False
                )
            ),
            "e2e_goal_updates_per_s": 3000,
            "e2e_goal_met": {
                c["workload"]: c["goal_met"] for c in cases.values() if c["id"].startswith("e2e|")
            },
        },
        "checks": {"all_counts_ok": not failed, "failed": failed, "cases_checked": len(ran)},
    }
    report["wall_seconds"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    json_path = args.out.with_suffix(".json")
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    pngs = []
    for suffix, fn in (
        ("scaling", plot_scaling),
        ("speedup", plot_speedup),
        ("eps", plot_eps),
        ("strategies", plot_strategies),
    ):
        png = args.out.parent / f"{args.out.name}_{suffix}.png"
        fn(report, png)
        pngs.append(png)
    progress(f"wrote {json_path} and {', '.join(str(p) for p in pngs)} in {report['wall_seconds']:.0f}s")
    print_summary(report)
    if failed:
        progress(f"COUNT MISMATCH in {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
