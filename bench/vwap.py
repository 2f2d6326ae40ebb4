"""Nested-aggregate benchmark: the RPAI plans against DBToaster-style maintenance and recomputation.

One run measures, on DBToaster's public finance trace (``bench/data/finance-big.csv``, 46,166 bid events
with ``book=bids``, 100,485 with both books) through the order-book adaptor of docs/algorithms/vwap.md §1.6:

1. per query (vwap, vwap-paper, mst, psp, nq1, sq1, sq2, nq2) and strategy (rpai, dbtoaster, recompute,
   and crosscheck for the VWAP forms), at the prefixes ``--sizes`` (default 1k, 2k, 5k, 10k, 20k and the
   full trace): the cost of one update *with the result refreshed after it*, as in the paper. The state
   after the first n - w events is built with updates only, then the next w events are timed one by
   one (update + result). w shrinks to fit ``--budget`` seconds per case (never below 3 updates); a case
   whose single update already exceeds the budget is reported as skipped with its measured cost.
   D = live price levels at the prefix, the quantity every ratio depends on.
2. whole-prefix runs (result after every event, the paper's total execution time) for prefixes up to
   ``--full-max`` events, rpai and dbtoaster.
3. TPC-H Q17 on generated data (``bench/tpch_gen.py``), uniform and skewed (Zipf on partkey, 2-decimal
   quantities), at ``--tpch-sfs``: lineitem and part interleaved, update + result per event. The
   DBToaster-style baseline runs from the start for up to ``--tpch-budget`` seconds; rpai runs the same
   prefix (the ratio) and the whole trace.
4. plots: per-update cost against trace prefix (log-log) per query, and the rpai speed-up.

All strategies are pure Python on the same exact integer types, so interpreter overhead cancels in the
ratios (docs/algorithms/vwap.md §8.3). Ratios come from the same run, with the strategies of one
prefix measured back to back. Every case's final result is checked against the other strategies at the
same prefix.

Usage (from the repo root)::

    .venv/bin/python bench/vwap.py            # the full run (~10 minutes on 2 cores)
    .venv/bin/python bench/vwap.py --quick    # smoke sizes, seconds

Writes ``bench/results/vwap.json`` and ``vwap_{scaling,speedup}.png`` (``vwap_quick*`` with ``--quick``;
``--out X.json`` puts the plots beside X as ``X_scaling.png`` and ``X_speedup.png``).
Exits 1 if strategies disagree.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.vwap.catalog import QUERIES  # noqa: E402
from services.vwap.exact import exact_context  # noqa: E402
from services.vwap.plans import make_plan  # noqa: E402
from shared.events.orderbook import OrderBookAdaptor  # noqa: E402

TRACE = ROOT / "bench" / "data" / "finance-big.csv"
RESULTS = ROOT / "bench" / "results"
FINANCE_QUERIES = ("vwap", "vwap-paper", "mst", "psp", "nq1", "sq1", "sq2", "nq2")
Event = tuple[str, dict[str, Any], int]


def load_trace(path: Path, book: str) -> list[Event]:
    adaptor = OrderBookAdaptor(book=book)
    out: list[Event] = []
    with open(path) as fh:
        for line in fh:
            for ev in adaptor.feed_line(line):
                out.append((ev["relation"], ev["row"], ev["delta"]))
    return out


def live_levels(events: Sequence[Event], n: int) -> dict[str, int]:
    """D: distinct live prices per book side after the first n events."""
    live: dict[tuple[str, Any], int] = {}
    for rel, row, m in events[:n]:
        k = (rel, row["price"])
        live[k] = live.get(k, 0) + m
    out = {"bids": 0, "asks": 0}
    for (rel, _p), c in live.items():
        if c:
            out[rel] += 1
    return out


def plan_for(query: str, strategy: str) -> Any:
    params = dict(QUERIES[query].defaults)
    return make_plan(query, strategy, params)


def answer(result: dict[str, Any]) -> Any:
    return {k: v for k, v in result.items() if k != "stats"}


def windowed(query: str, strategy: str, events: Sequence[Event], n: int, window: int, budget: float) -> dict:
    """Per-update cost (update + result) at prefix n, over up to ``window`` updates ending at event n."""
    plan = plan_for(query, strategy)
    gc.collect()
    with exact_context():
        first = max(0, n - window)
        for rel, row, m in events[:first]:
            plan.update(rel, row, m)
        lat: list[float] = []
        spent = 0.0
        for rel, row, m in events[first:n]:
            t0 = time.perf_counter()
            plan.update(rel, row, m)
            plan.result()
            dt = time.perf_counter() - t0
            lat.append(dt)
            spent += dt
            if len(lat) >= 3 and spent > budget:
                break
        final = answer(plan.result()) if len(lat) == n - first else None
    lat_us = sorted(x * 1e6 for x in lat)
    return {
        "events": n,
        "window": len(lat),
        "per_update_us": statistics.fmean(lat_us),
        "p50_us": lat_us[len(lat_us) // 2],
        "p99_us": lat_us[min(len(lat_us) - 1, int(0.99 * len(lat_us)))],
        "max_us": lat_us[-1],
        "updates_per_s": len(lat) / sum(lat),
        "final": final,
    }


def probe(query: str, strategy: str, events: Sequence[Event], n: int) -> float:
    """Seconds of one update + result at prefix n (state built without results)."""
    plan = plan_for(query, strategy)
    with exact_context():
        for rel, row, m in events[: n - 1]:
            plan.update(rel, row, m)
        t0 = time.perf_counter()
        rel, row, m = events[n - 1]
        plan.update(rel, row, m)
        plan.result()
        return time.perf_counter() - t0


def whole_prefix(query: str, strategy: str, events: Sequence[Event], n: int) -> dict[str, Any]:
    plan = plan_for(query, strategy)
    gc.collect()
    with exact_context():
        t0 = time.perf_counter()
        for rel, row, m in events[:n]:
            plan.update(rel, row, m)
            plan.result()
        dt = time.perf_counter() - t0
        final = answer(plan.result())
    return {"events": n, "seconds": dt, "updates_per_s": n / dt, "final": final}


def timed_prefix(query: str, strategy: str, events: Sequence[Event], budget: float) -> dict[str, Any]:
    """Update + result per event from the start, until the events or ``budget`` seconds run out."""
    plan = plan_for(query, strategy)
    gc.collect()
    n = 0
    with exact_context():
        t0 = time.perf_counter()
        deadline = t0 + budget
        for rel, row, m in events:
            plan.update(rel, row, m)
            plan.result()
            n += 1
            if not n % 1000 and time.perf_counter() > deadline:
                break
        dt = time.perf_counter() - t0
        final = answer(plan.result())
    return {"events": n, "seconds": dt, "updates_per_s": n / dt, "final": final}


def strategies_of(query: str) -> list[str]:
    return [s for s in ("rpai", "crosscheck", "dbtoaster", "recompute") if s in QUERIES[query].strategies]


def finance_suite(args: argparse.Namespace, traces: dict[str, list[Event]]) -> tuple[dict, list[str]]:
    out: dict[str, Any] = {}
    problems: list[str] = []
    for query in args.queries:
        book = "both" if query in ("mst", "psp") else "bids"
        events = traces[book]
        sizes = sorted({min(s, len(events)) for s in args.sizes})
        per_strategy: dict[str, list[dict]] = {s: [] for s in strategies_of(query)}
        gave_up: dict[str, float] = {}
        for n in sizes:
            levels = live_levels(events, n)
            finals: dict[str, Any] = {}
            for strategy in per_strategy:
                if strategy == "recompute" and n > args.recompute_max:
                    per_strategy[strategy].append(
                        {"events": n, "skipped": f"recompute only up to {args.recompute_max}"}
                    )
                    continue
                if strategy in gave_up:
                    per_strategy[strategy].append(
                        {
                            "events": n,
                            "skipped": f"one update cost {gave_up[strategy]:.1f} s at a smaller prefix",
                        }
                    )
                    continue
                one = probe(query, strategy, events, n)
                if one > args.budget:
                    gave_up[strategy] = one
                    per_strategy[strategy].append({"events": n, "skipped": f"one update costs {one:.1f} s"})
                    continue
                window = max(3, min(args.window, int(args.budget / max(one, 1e-7))))
                case = windowed(query, strategy, events, n, window, args.budget)
                case["D"] = levels
                per_strategy[strategy].append(case)
                if case["final"] is not None:
                    finals[strategy] = case["final"]
                print(
                    f"  {query:<10} {strategy:<10} n={n:>6} D={levels['bids']:>4}/{levels['asks']:<4} "
                    f"{case['per_update_us']:>12.1f} us/update (w={case['window']})",
                    flush=True,
                )
            if len({json.dumps(v, sort_keys=True) for v in finals.values()}) > 1:
                problems.append(f"{query} at {n}: strategies disagree: {finals}")
        out[query] = per_strategy
    return out, problems


def ratios(finance: dict[str, Any]) -> dict[str, Any]:
    """rpai speed-up over each baseline at every prefix where both were measured."""
    out: dict[str, Any] = {}
    for query, per in finance.items():
        rp = {c["events"]: c for c in per.get("rpai", []) if "per_update_us" in c}
        out[query] = {}
        for base in ("dbtoaster", "recompute"):
            rows = []
            for c in per.get(base, []):
                if "per_update_us" in c and c["events"] in rp:
                    r = rp[c["events"]]
                    rows.append(
                        {"events": c["events"], "D": r["D"], "ratio": c["per_update_us"] / r["per_update_us"]}
                    )
            out[query][base] = rows
    return out


def whole_suite(args: argparse.Namespace, traces: dict[str, list[Event]]) -> tuple[dict, list[str]]:
    out: dict[str, Any] = {}
    problems = []
    for query in ("vwap", "mst"):
        events = traces["both" if query == "mst" else "bids"]
        out[query] = []
        for n in [s for s in args.sizes if s <= args.full_max]:
            row: dict[str, Any] = {"events": n}
            finals = {}
            for strategy in ("rpai", "dbtoaster"):
                r = whole_prefix(query, strategy, events, n)
                row[strategy] = {"seconds": r["seconds"], "updates_per_s": r["updates_per_s"]}
                finals[strategy] = r["final"]
            row["ratio"] = row["dbtoaster"]["seconds"] / row["rpai"]["seconds"]
            if finals["rpai"] != finals["dbtoaster"]:
                problems.append(f"whole {query} at {n}: {finals}")
            print(
                f"  whole {query:<6} n={n:>6} rpai {row['rpai']['seconds']:.2f}s  "
                f"dbtoaster {row['dbtoaster']['seconds']:.2f}s  ratio {row['ratio']:.1f}",
                flush=True,
            )
            out[query].append(row)
    return out, problems


def tpch_suite(args: argparse.Namespace) -> tuple[dict, list[str]]:
    """Q17 over generated TPC-H data: lineitem and part interleaved in proportion, inserts only."""
    sys.path.insert(0, str(ROOT / "bench"))
    import tempfile

    import tpch_gen  # type: ignore[import-not-found]

    from shared.events import EventCodec, Schema
    from shared.events.tpch import interleave_tpch

    codec = EventCodec(Schema.of(*QUERIES["q17"].relations))

    out: dict[str, Any] = {}
    problems: list[str] = []
    for skew in (False, True):
        label = "skewed" if skew else "uniform"
        out[label] = []
        for sf in args.tpch_sfs:
            with tempfile.TemporaryDirectory() as tmp:
                tpch_gen.generate(Path(tmp), sf=sf, skew="skewed" if skew else "uniform", seed=7)
                events = []
                for _rel, rec in interleave_tpch([Path(tmp) / "part.tbl", Path(tmp) / "lineitem.tbl"]):
                    ev = codec.decode(rec.value)
                    events.append((ev.relation, ev.row, ev.delta))
            row: dict[str, Any] = {"sf": sf, "events": len(events)}
            # The baseline first, within the budget; rpai then runs exactly the prefix the baseline reached
            # (and the whole trace), so the ratio compares equal work.
            base = timed_prefix("q17", "dbtoaster", events, args.tpch_budget)
            n = base["events"]
            fast = timed_prefix("q17", "rpai", events[:n], float("inf"))
            whole = fast if n == len(events) else timed_prefix("q17", "rpai", events, float("inf"))
            row["measured_events"] = n
            row["dbtoaster"] = {"seconds": base["seconds"], "updates_per_s": base["updates_per_s"]}
            row["rpai"] = {"seconds": fast["seconds"], "updates_per_s": fast["updates_per_s"]}
            row["rpai_whole_trace"] = {"seconds": whole["seconds"], "updates_per_s": whole["updates_per_s"]}
            row["ratio"] = base["seconds"] / fast["seconds"]
            if base["final"] != fast["final"]:
                problems.append(f"q17 {label} sf={sf} at {n}: {base['final']} != {fast['final']}")
            rp, db = fast["updates_per_s"], base["updates_per_s"]
            print(
                f"  q17 {label:<8} sf={sf:<5} events={n:>7}/{len(events):<7} rpai {rp:,.0f}/s "
                f"dbtoaster {db:,.0f}/s ratio {row['ratio']:.2f}",
                flush=True,
            )
            out[label].append(row)
    return out, problems


def plot(finance: dict[str, Any], speedups: dict[str, Any], base: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    queries = list(finance)
    cols = 4
    rows = (len(queries) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.4 * rows), squeeze=False)
    for ax, query in zip(axes.flat, queries, strict=False):
        for strategy, cases in finance[query].items():
            pts = [(c["events"], c["per_update_us"]) for c in cases if "per_update_us" in c]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", label=strategy)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(query)
        ax.set_xlabel("trace prefix (events)")
        ax.set_ylabel("µs per update + result")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(queries) :]:
        ax.axis("off")
    fig.tight_layout()
    path = base.with_name(base.name + "_scaling.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(_shown(path))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for query, per in speedups.items():
        pts = [(r["events"], r["ratio"]) for r in per.get("dbtoaster", [])]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=query)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("trace prefix (events)")
    ax.set_ylabel("dbtoaster / rpai time per update")
    ax.set_title("RPAI speed-up over DBToaster-style maintenance (finance big trace)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = base.with_name(base.name + "_speedup.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(_shown(path))
    return paths


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke sizes and budgets (seconds)")
    p.add_argument("--sizes", default=None, help="comma-separated trace prefixes; 'full' = whole trace")
    p.add_argument("--queries", default=",".join(FINANCE_QUERIES))
    p.add_argument("--window", type=int, default=None, help="max timed updates per case (default 300)")
    p.add_argument("--budget", type=float, default=None, help="seconds per case (default 6)")
    p.add_argument("--recompute-max", type=int, default=None, help="largest prefix for recompute (2000)")
    p.add_argument("--full-max", type=int, default=None, help="largest whole-prefix run (5000)")
    p.add_argument("--tpch-sfs", default=None, help="Q17 scale factors (default 0.01,0.05,0.1)")
    p.add_argument("--tpch-budget", type=float, default=None, help="seconds per Q17 baseline run (60)")
    p.add_argument("--trace", type=Path, default=TRACE)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    q = args.quick
    sizes = args.sizes or ("300,1000" if q else "1000,2000,5000,10000,20000,full")
    args.sizes = [10**9 if s.strip() == "full" else int(s) for s in sizes.split(",")]
    args.queries = [x for x in args.queries.split(",") if x]
    unknown = [x for x in args.queries if x not in FINANCE_QUERIES]
    if unknown:
        p.error(f"unknown queries {unknown}; choose from {', '.join(FINANCE_QUERIES)}")
    args.window = args.window or (30 if q else 300)
    args.budget = args.budget or (0.5 if q else 6.0)
    args.recompute_max = args.recompute_max or (300 if q else 2000)
    args.full_max = args.full_max or (300 if q else 5000)
    args.tpch_budget = args.tpch_budget or (5.0 if q else 60.0)
    args.tpch_sfs = [float(x) for x in (args.tpch_sfs or ("0.001" if q else "0.01,0.05,0.1")).split(",")]
    if not args.trace.is_file():
        p.error(f"trace not found: {args.trace}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    prefix = "vwap_quick" if args.quick else "vwap"
    started = time.time()
    print(f"loading {args.trace.name} through the order-book adaptor", flush=True)
    traces = {book: load_trace(args.trace, book) for book in ("bids", "both")}
    print(f"  bids: {len(traces['bids'])} events, both books: {len(traces['both'])} events", flush=True)
    print("per-update cost at trace prefixes", flush=True)
    finance, problems = finance_suite(args, traces)
    speedups = ratios(finance)
    print("whole-prefix runs", flush=True)
    whole, p2 = whole_suite(args, traces)
    print("TPC-H Q17", flush=True)
    tpch, p3 = tpch_suite(args)
    problems += p2 + p3
    out = args.out or RESULTS / f"{prefix}.json"
    plots = plot(finance, speedups, out.with_suffix(""))
    for cases in finance.values():
        for per in cases.values():
            for c in per:
                c.pop("final", None)
    report = {
        "meta": {
            "trace": args.trace.name,
            "events": {k: len(v) for k, v in traces.items()},
            "sizes": args.sizes,
            "budget_s": args.budget,
            "window": args.window,
            "python": sys.version.split()[0],
            "machine": platform.machine(),
            "cpus": __import__("os").cpu_count(),
            "seconds": time.time() - started,
            "quick": args.quick,
        },
        "finance": finance,
        "speedup": speedups,
        "whole_prefix": whole,
        "q17": tpch,
        "plots": plots,
        "problems": problems,
    }
    out.write_text(json.dumps(report, indent=1, default=str))
    print(f"wrote {_shown(out)} and {', '.join(plots)}")
    for line in problems:
        print("PROBLEM:", line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
