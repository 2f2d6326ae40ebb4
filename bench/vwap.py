"""Nested-aggregate benchmark: every vwap strategy at batch sizes 1, 100 and 2,000, with DuckDB as an
independent peer, as the service runs them.

One run measures, on DBToaster's public finance trace (``bench/data/finance-big.csv``, 46,166 bid events
with ``book=bids``, 100,485 with both books) through the order-book adaptor of docs/vwap/algorithm.md §1.6:

1. **batches** (the headline): per query (vwap, vwap-paper, mst, psp, nq1, sq1, sq2, nq2), trace prefix
   (``--sizes`` for the two VWAP forms, ``--other-sizes`` for the rest), batch size (``--batches``,
   default 1, 100, 2,000) and strategy (rpai, crosscheck for the VWAP forms, dbtoaster, recompute,
   auto): the ``VwapEngine`` (ledger included) is brought to the state before a window of events
   ending at the prefix, then the window is applied in batches of that size with the result read once
   per batch, as the worker does. Reported: **µs per event = total time of the window / its events**
   (one result per batch is part of it). The peer ``duckdb`` keeps the live book and re-evaluates the
   query's SQL text (``services/vwap/sql.py``) over it once per batch. Nothing is capped by size: a
   case runs unless one batch alone exceeds ``--budget`` seconds (then it is reported as skipped, with
   that cost, at this and larger prefixes); a window stops after ``--budget`` seconds (never before 3
   batches). Every case's final answer is compared with every other strategy's at the same prefix
   and batch size.
2. **whole prefix** (the paper's total execution time): the result after every event from the start,
   through the engine, for vwap and mst up to ``--full-max`` events: **total seconds**.
3. **worker**: the vwap query through the real ``Worker`` on the embedded broker (batch size and
   checkpoint interval at their defaults), per strategy, against the engine alone on the same events
   in the same batches: **total seconds** and events per second.
4. TPC-H Q17 on generated data (``bench/tpch_gen.py``), uniform and skewed (Zipf on partkey, 2-decimal
   quantities), at ``--tpch-sfs``: update + result per event, total time; the DBToaster-style
   baseline runs from the start for up to ``--tpch-budget`` seconds and rpai runs the same prefix.
5. plots: µs per event against the prefix, one panel per query and batch size.

``--markdown [FILE]`` prints the tables of ``docs/vwap/benchmark.md`` from a stored result file
(default ``bench/results/vwap.json``) and measures nothing.

Usage (from the repo root)::

    .venv/bin/python bench/vwap.py            # the full run (~12 minutes on 2 cores)
    .venv/bin/python bench/vwap.py --quick    # smoke sizes, about a minute
    .venv/bin/python bench/vwap.py --markdown # the doc's tables from bench/results/vwap.json

Writes ``bench/results/vwap.json`` and ``vwap.png`` (``vwap_quick*`` with ``--quick``; ``--out X.json``
puts the plot beside X as ``X.png``). Exits 1 if any two strategies disagree.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from bench.lib.machine import load_average  # noqa: E402
from bench.lib.report import command_line, shown  # noqa: E402
from bench.vwap_batches import batch_suite, goals, whole_suite  # noqa: E402
from bench.vwap_engines import FINANCE_QUERIES, RESULTS, TRACE, default_strategy, load_trace  # noqa: E402
from bench.vwap_report import markdown, plot  # noqa: E402
from bench.vwap_tpch import tpch_suite  # noqa: E402
from bench.vwap_worker import worker_suite  # noqa: E402


def _ints(text: str) -> list[int]:
    return [10**9 if s.strip() == "full" else int(s) for s in text.split(",") if s.strip()]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke sizes and budgets (about a minute)")
    p.add_argument("--markdown", nargs="?", const=str(RESULTS / "vwap.json"), default=None, metavar="JSON")
    p.add_argument("--sizes", default=None, help="prefixes for vwap and vwap-paper ('full' = whole trace)")
    p.add_argument("--other-sizes", default=None, help="prefixes for the other queries")
    p.add_argument("--batches", default="1,100,2000")
    p.add_argument("--queries", default=",".join(FINANCE_QUERIES))
    p.add_argument("--window", type=int, default=None, help="events per case (at least 2 batches; 4000)")
    p.add_argument("--budget", type=float, default=None, help="seconds per case (default 1)")
    p.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="most timings of an engine window, within --budget (5)",
    )
    p.add_argument("--full-max", type=int, default=None, help="largest whole-prefix run (5000)")
    p.add_argument("--worker-events", type=int, default=None, help="events through the worker (10000)")
    p.add_argument("--worker-strategies", default="rpai,crosscheck,dbtoaster,auto")
    p.add_argument("--no-worker", action="store_true", help="leave out the worker point")
    p.add_argument("--tpch-sfs", default=None, help="Q17 scale factors (default 0.01)")
    p.add_argument("--tpch-budget", type=float, default=None, help="seconds per Q17 baseline run (20)")
    p.add_argument("--trace", type=Path, default=TRACE)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    q = args.quick
    args.sizes = _ints(args.sizes or ("300,1000" if q else "1000,2000,5000,10000,20000,full"))
    args.other_sizes = _ints(args.other_sizes or ("300" if q else "1000,10000,full"))
    args.batches = _ints(args.batches)
    args.queries = [x for x in args.queries.split(",") if x]
    unknown = [x for x in args.queries if x not in FINANCE_QUERIES]
    if unknown:
        p.error(f"unknown queries {unknown}; choose from {', '.join(FINANCE_QUERIES)}")
    args.window = args.window or (400 if q else 4000)
    args.budget = args.budget or (0.2 if q else 1.0)
    args.full_max = args.full_max or (300 if q else 5000)
    args.worker_events = args.worker_events or (1000 if q else 10000)
    args.worker_strategies = [s for s in args.worker_strategies.split(",") if s]
    args.tpch_budget = args.tpch_budget or (3.0 if q else 20.0)
    args.tpch_sfs = [float(x) for x in (args.tpch_sfs or ("0.001" if q else "0.01")).split(",")]
    if args.markdown is None and not args.trace.is_file():
        p.error(f"trace not found: {args.trace}")
    return args


def trace_limit(args: argparse.Namespace) -> int | None:
    """A quick run reads only the prefix of the trace its cases use: every forked window collects the
    parent's heap before its clock starts, and the whole trace held there is most of that heap."""
    if not args.quick:
        return None
    return max(*args.sizes, *args.other_sizes, args.full_max, 0 if args.no_worker else args.worker_events)


def _import_heavy() -> None:
    """pandas, DuckDB and the result shaping of the peer, and matplotlib (the plot), imported before
    any clock starts: an import is slow on a loaded machine and would count against the first case
    that needs it."""
    import duckdb  # noqa: F401
    import pandas  # type: ignore[import-untyped]  # noqa: F401

    import bench.lib.plots  # noqa: F401
    import ivmstream.services.vwap.batch_recompute  # noqa: F401  (the peer's result shaping)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown is not None:
        sys.stdout.write(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    RESULTS.mkdir(parents=True, exist_ok=True)
    prefix = "vwap_quick" if args.quick else "vwap"
    _import_heavy()
    started = time.time()
    load_start = load_average()
    print(f"loading {args.trace.name} through the order-book adaptor", flush=True)
    traces = {book: load_trace(args.trace, book, trace_limit(args)) for book in ("bids", "both")}
    print(f"  bids: {len(traces['bids'])} events, both books: {len(traces['both'])} events", flush=True)
    print("batches through the engine", flush=True)
    batches, problems = batch_suite(args, traces)
    print("whole-prefix runs", flush=True)
    whole, p2 = whole_suite(args, traces)
    worker = None
    if not args.no_worker:
        print("the worker", flush=True)
        worker = worker_suite(args, traces)
        problems += [f"worker {s}: results differ" for s, w in worker["strategies"].items() if not w["agree"]]
    print("TPC-H Q17", flush=True)
    tpch, p3 = tpch_suite(args)
    problems += p2 + p3
    out = args.out or RESULTS / f"{prefix}.json"
    png = plot(batches, out.with_suffix(".png"), args.batches)
    command = command_line("bench/vwap.py", None if argv is None else list(argv))
    report = {
        "meta": {
            "command": command,
            "trace": args.trace.name,
            "events": {k: len(v) for k, v in traces.items()},
            "sizes": args.sizes,
            "other_sizes": args.other_sizes,
            "batches": args.batches,
            "budget_s": args.budget,
            "repeats": args.repeats,
            "window": args.window,
            "python": sys.version.split()[0],
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "seconds": time.time() - started,
            # the machine is shared: the 1-minute load average when the run started and when it ended
            "load": [load_start[0], load_average()[0]],
            "quick": args.quick,
        },
        "batches": batches,
        "goals": goals(batches, default_strategy()),
        "goals_rpai": goals(batches, "rpai"),
        "whole_prefix": whole,
        "worker": worker,
        "q17": tpch,
        "plots": [png],
        "problems": problems,
    }
    out.write_text(json.dumps(report, indent=1, default=str))
    print(f"wrote {shown(out)} and {png}")
    sys.stdout.write(markdown(report))
    for line in problems:
        print("PROBLEM:", line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
