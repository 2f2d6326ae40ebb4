"""firstorder: first-order delta queries against the recompute baseline, on DBToaster's axfinder and
brokerspread over the order-book trace the vwap service bundles (DBToaster's finance `standard`).

Each query is compiled from its SQL file as `ivmstream sql` compiles it (the service's options and the
view's intake), the trace becomes the service's update events, and both strategies' engines take them
one per `apply` call, the result read every R events (R = 1 is a view read after every update, as a
worker publishing per event; larger R are the worker's batches). first-order pays per update (the delta
query, `visited` tuples), recompute per read (the whole join). Strategies alternate within each repeat;
times are the median over repeats; the ratio is recompute's time to first-order's per repeat, median.

The worker point (``firstorder_worker.py``) runs axfinder over the whole trace through a real ``Worker``
on the embedded broker in batches of ``--worker-batch`` events (default 100: a result published every
100 updates, the first table's R = 100), beside the engine alone on the same batches.

The plans point (``firstorder_plans.py``) runs the first-order engine alone over the whole trace in
batches of ``--plans-batch`` events (default 2,000, the worker benchmark's batch), its delta plans
generated as Python against the same plans walked by the expression closures, in CPU time.

Writes ``bench/results/firstorder.json`` and ``.png`` (``firstorder_quick`` with ``--quick``);
``--markdown FILE.json`` prints docs/firstorder/benchmark.md's table from a report.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.firstorder_plans import markdown as plans_markdown  # noqa: E402
from bench.firstorder_plans import plans_point  # noqa: E402
from bench.firstorder_worker import markdown as worker_markdown  # noqa: E402
from bench.firstorder_worker import worker_point  # noqa: E402
from bench.lib.machine import load_average, machine_info  # noqa: E402
from bench.lib.plots import plt  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from bench.lib.report import RESULTS, command_line, shown  # noqa: E402
from ivmstream.config import build_config  # noqa: E402
from ivmstream.events import UpdateEvent  # noqa: E402
from ivmstream.service import load_service  # noqa: E402
from ivmstream.sql import load_script  # noqa: E402
from ivmstream.sql.inputs import InputChoice, read_events  # noqa: E402
from ivmstream.sql.routing import plan_script  # noqa: E402

QUERIES = REPO / "tests" / "data" / "sql" / "dbtoaster" / "finance"
TRACE = REPO / "services" / "vwap" / "data" / "finance-standard.csv"
STRATEGIES = ("first-order", "recompute")


def workload(query: str, trace: Path, limit: int | None) -> tuple[dict[str, Any], list[UpdateEvent]]:
    """The view's firstorder options and the service events its intake makes of the trace."""
    script = load_script(QUERIES / f"{query}.sql")
    (plan,) = plan_script(script)
    (unit,) = plan.units
    tables = {f.table for f in unit.feeds}
    choice = InputChoice({t: str(trace) for t in tables})
    events = []
    for table, row, delta in read_events(script, tables, choice):
        for feed in unit.feeds:
            ev = feed.event(row, delta) if feed.table == table else None
            if ev is not None:
                events.append(UpdateEvent(ev["relation"], ev["row"], ev["delta"]))
        if limit is not None and len(events) >= limit:
            break
    options = build_config(load_service("firstorder"), unit.options).options
    return options, events


def run_once(
    options: dict[str, Any], strategy: str, events: list[UpdateEvent], every: int
) -> tuple[float, int, Any]:
    """Seconds to apply every event and read the result every ``every`` events; visited tuples; result."""
    engine = load_service("firstorder").engine({**options, "strategy": strategy})
    start = time.perf_counter()
    for i, ev in enumerate(events, 1):
        engine.apply([ev])
        if i % every == 0:
            engine.result()
    result = engine.result()
    seconds = time.perf_counter() - start
    return seconds, int(engine.stats()["visited"]), result


def bench(queries: list[str], reads: list[int], repeats: int, limit: int | None) -> dict[str, Any]:
    cases = []
    for query in queries:
        options, events = workload(query, TRACE, limit)
        for every in reads:
            seconds: dict[str, list[float]] = {s: [] for s in STRATEGIES}
            visited: dict[str, int] = {}
            results = []
            for rep in range(repeats):
                order = STRATEGIES if rep % 2 == 0 else STRATEGIES[::-1]
                for strategy in order:
                    progress(f"{query} read every {every}: {strategy} (repeat {rep + 1}/{repeats})")
                    t, v, result = run_once(options, strategy, events, every)
                    seconds[strategy].append(t)
                    visited[strategy] = v
                    results.append(result)
            assert all(r == results[0] for r in results), f"{query}: the strategies disagree"
            ratios = [r / f for f, r in zip(seconds["first-order"], seconds["recompute"], strict=True)]
            cases.append(
                {
                    "query": query,
                    "read_every": every,
                    "events": len(events),
                    "seconds": seconds,
                    "us_per_update": {
                        s: statistics.median(v) / len(events) * 1e6 for s, v in seconds.items()
                    },
                    "visited": visited,
                    "ratio": statistics.median(ratios),
                }
            )
    return {"repeats": repeats, "cases": cases, "load_average": load_average()}


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| query | update events | result read every | first-order (µs per update) "
        "| recompute (µs per update) | recompute / first-order | tuples visited, first-order | "
        "tuples visited, recompute |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in report["cases"]:
        us, v = c["us_per_update"], c["visited"]
        lines.append(
            f"| `{c['query']}` | {c['events']:,} | {c['read_every']:,} | {us['first-order']:,.1f} | "
            f"{us['recompute']:,.1f} | {c['ratio']:.2f} | {v['first-order']:,} | {v['recompute']:,} |"
        )
    start, end = report.get("load_start", ["?"]), report.get("load_average", ["?"])
    lines += [
        "",
        f"Total time per update event (the reads included), median of {report['repeats']} repeats with "
        "the strategies alternating; the ratio is the median of the per-repeat ratios; load average "
        f"{start[0]} at the start, {end[0]} at the end (`{report.get('command', 'bench/firstorder.py')}`).",
    ]
    if "worker" in report:
        lines += ["", *worker_markdown(report["worker"])]
    if "plans" in report:
        lines += ["", *plans_markdown(report["plans"])]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    fig, axes = plt.subplots(1, len({c["query"] for c in report["cases"]}), figsize=(10, 4), squeeze=False)
    for ax, query in zip(axes[0], dict.fromkeys(c["query"] for c in report["cases"]), strict=True):
        cases = [c for c in report["cases"] if c["query"] == query]
        reads = [c["read_every"] for c in cases]
        for strategy in STRATEGIES:
            ax.plot(reads, [c["us_per_update"][strategy] for c in cases], marker="o", label=strategy)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("result read every R update events")
        ax.set_ylabel("µs per update event (total, reads included)")
        ax.set_title(query)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="300 events, reads every 1 and 100, 1 repeat",
    )
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--events", type=int, help="at most this many update events per query (default 1000)")
    parser.add_argument(
        "--worker-events",
        type=int,
        help="update events of the worker point (axfinder; default the whole trace, 300 with --quick)",
    )
    parser.add_argument(
        "--worker-batch",
        type=int,
        default=100,
        help="the worker point's batch size: it publishes the result after every batch (default 100)",
    )
    parser.add_argument(
        "--plans-batch",
        type=int,
        default=2000,
        help="the plans point's batch size (generated plans against the closures; default 2,000)",
    )
    parser.add_argument("--out", type=Path, help="the report (a .png beside it)")
    parser.add_argument("--markdown", type=Path, metavar="FILE.json", help="print the docs table of a report")
    args = parser.parse_args()
    if args.markdown is not None:
        print(markdown(json.loads(args.markdown.read_text())))
        return
    repeats = args.repeats or (1 if args.quick else 3)
    limit = args.events or (300 if args.quick else 1000)
    reads = [1, 100] if args.quick else [1, 10, 100, 1000]
    out = (args.out or RESULTS / ("firstorder_quick.json" if args.quick else "firstorder.json")).with_suffix(
        ".json"
    )
    load_start = load_average()
    report = bench(["axfinder", "brokerspread"], reads, repeats, limit)
    report["load_start"] = load_start
    options, events = workload("axfinder", TRACE, args.worker_events or (300 if args.quick else None))
    report["worker"] = worker_point("axfinder", options, events, repeats, args.worker_batch)
    whole = {q: workload(q, TRACE, 300 if args.quick else None) for q in ("axfinder", "brokerspread")}
    report["plans"] = plans_point(whole, repeats, args.plans_batch)
    report["command"] = command_line("bench/firstorder.py", None)
    report["machine"] = machine_info()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, out.with_suffix(".png"))
    ratios = {f"{c['query']}@{c['read_every']}": round(c["ratio"], 2) for c in report["cases"]}
    print(json.dumps({"ratios": ratios, "out": shown(out)}, indent=2))


if __name__ == "__main__":
    main()
