"""The vwap benchmark's headline (µs per event per query, prefix, batch size and strategy) and the
whole-prefix runs, with the time limits that keep a cubic baseline from running for hours: an engine's
window runs in a forked child that is killed when one answer or batch takes too long, the DuckDB
peer's query is interrupted through DuckDB's own cancellation.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.lib.limits import Silent, in_child
from bench.vwap_engines import (
    ORDER,
    VWAP_FORMS,
    DuckDBPeer,
    Event,
    answer,
    feed,
    live_levels,
    runner,
    strategies_of,
)
from ivmstream.events import UpdateEvent
from ivmstream.services.vwap.catalog import QUERIES
from ivmstream.services.vwap.engine import VwapEngine


def batched_cases(
    query: str,
    strategies: Sequence[str],
    events: Sequence[Event],
    n: int,
    batch: int,
    window: int,
    budget: float,
    repeats: int = 5,
) -> dict[str, dict[str, Any]]:
    """Per strategy: µs per event over up to ``window`` events ending at prefix n, in batches of
    ``batch`` with one result per batch.

    Every strategy is brought to the state before the window first; then the windows are timed in
    rounds, each strategy once per round, so that a burst of load on the shared machine falls on all
    of them rather than on whichever ran during it. An engine's window is timed up to ``repeats`` times
    (each in a forked child, on its own copy of the state) while its budget lasts, and the fastest
    counts; the DuckDB peer holds a connection and is timed once, here, after the engines."""
    first = max(0, n - window)
    out: dict[str, dict[str, Any]] = {}
    targets: dict[str, Any] = {}
    for strategy in strategies:
        target = _warmed(query, strategy, events, first, batch, budget)
        if isinstance(target, dict):
            out[strategy] = {"events": n, "batch": batch, **target}
        else:
            targets[strategy] = target
    ups = [
        [UpdateEvent(rel, row, m, None) for rel, row, m in events[i : min(i + batch, n)]]
        for i in range(first, n, batch)
    ]
    raw = [events[i : min(i + batch, n)] for i in range(first, n, batch)]
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in targets}
    while True:
        due = [s for s in targets if s not in out and _wants_another(runs[s], s, n - first, budget, repeats)]
        if due != ["duckdb"] and "duckdb" in due:
            due.remove("duckdb")  # its threads and allocations are not left to the engines' rounds
        if not due:
            break
        for strategy in due:
            target = targets[strategy]
            if isinstance(target, DuckDBPeer):
                run = _peer_window(target, raw, budget)
            else:
                run = _engine_window(target, ups, budget)
            if run["skipped"] is not None:
                out[strategy] = {
                    "events": n,
                    "batch": batch,
                    "skipped": run["skipped"],
                    "one_batch_s": run["one"],
                }
            else:
                runs[strategy].append(run)
    for strategy, rs in runs.items():
        if strategy in out:
            continue
        best = min(rs, key=lambda r: r["spent"] / r["done"])
        case: dict[str, Any] = {
            "events": n,
            "batch": batch,
            "window": best["done"],
            "batches": best["batches"],
            "repeats": len(rs),
            "us_per_event": best["spent"] / best["done"] * 1e6,
            "seconds": best["spent"],
            "slowest_batch_s": best["one"],
            "final": answer(best["final"]) if best["done"] == n - first else None,
        }
        if strategy == "auto":
            case["auto_running"] = best["running"]
        out[strategy] = case
    return {s: out[s] for s in strategies}


def _wants_another(runs: list[dict[str, Any]], strategy: str, full: int, budget: float, repeats: int) -> bool:
    if not runs:
        return True
    if strategy == "duckdb" or len(runs) >= repeats or runs[-1]["done"] < full:
        return False
    return sum(r["spent"] for r in runs) <= budget


def _warmed(query: str, strategy: str, events: Sequence[Event], first: int, batch: int, budget: float) -> Any:
    """The strategy's runner holding the state before the window, or why it cannot run the case.

    The state is built in batches of 2,000, then the last 64 batches before the window run at the
    measured size (no results read), so ``auto`` has seen the batch size it is measured at, as a
    service fed steadily would have. The first result is read before the clock starts: the peer's
    here, an engine's in each window's child (on its copy)."""
    target = runner(query, strategy)
    warm = max(0, first - 64 * batch)
    for i in range(0, warm, 2000):
        feed(target, events[i : min(i + 2000, warm)])
    for i in range(warm, first, batch):
        feed(target, events[i : min(i + batch, first)])
    if isinstance(target, DuckDBPeer) and target.answer_within(STOP_AFTER * budget) is None:
        stop = STOP_AFTER * budget
        return {"skipped": f"one answer stopped after {stop:.1f} s", "one_batch_s": stop}
    return target


STOP_AFTER = 4  # a single batch is stopped after this many budgets (a cubic baseline can run hours)
BEAT = 0.05  # an engine's child reports progress at most this often (seconds)


def _engine_window(engine: Any, ups: list, budget: float) -> dict[str, Any]:
    """One timed window of an engine, in a forked child that is killed when its first answer or one
    batch takes longer than ``STOP_AFTER`` budgets. The child times a deep copy (fresh pages, so the
    timed run pays no copy-on-write faults) on a collected, frozen heap, so the state the other
    strategies left is not scanned by the collector while this one runs."""
    stop = STOP_AFTER * budget
    answered = False
    run: dict[str, Any] = {}

    def work(send: Callable[[Any], None]) -> None:
        target = copy.deepcopy(engine)
        send("copied")
        target.result()  # the first answer, untimed
        send("answered")
        gc.collect()
        gc.freeze()
        send(_window(target, ups, budget, send))

    try:
        for msg in in_child(work, quiet_for=stop, first_within=COPY_TIMEOUT):
            if msg == "answered":
                answered = True
            elif isinstance(msg, dict):
                run = msg
    except Silent:
        what = "one batch" if answered else "one answer"
        return {"skipped": f"{what} stopped after {stop:.1f} s", "one": stop}
    return run


COPY_TIMEOUT = 600.0  # seconds a child may take to copy an engine's state (not a measurement)


def _window(target: Any, ups: list, budget: float, send: Callable[[Any], None]) -> dict[str, Any]:
    spent = 0.0
    done = batches = 0
    one = 0.0
    final: Any = None
    beat = time.perf_counter()
    for up in ups:
        t0 = time.perf_counter()
        target.apply(up)
        final = target.result()
        t1 = time.perf_counter()
        dt = t1 - t0
        one = max(one, dt)
        spent += dt
        done += len(up)
        batches += 1
        if batches == 1 and dt > budget:
            return {"skipped": f"one batch took {dt:.1f} s", "one": dt}
        if batches >= 3 and spent > budget:
            break
        if t1 - beat > BEAT:  # the parent's sign of life, outside the timed span
            send("batch")
            beat = t1
    return {
        "skipped": None,
        "spent": spent,
        "done": done,
        "batches": batches,
        "one": one,
        "final": final,
        "running": getattr(target, "running", None),  # auto's plan
    }


def _peer_window(peer: DuckDBPeer, raw: list, budget: float) -> dict[str, Any]:
    """The DuckDB peer's one timed window, here (a DuckDB connection does not survive a fork); a batch
    whose query runs past ``STOP_AFTER`` budgets is interrupted through DuckDB's own cancellation."""
    gc.collect()
    gc.freeze()
    try:
        spent = 0.0
        done = batches = 0
        one = 0.0
        final: Any = None
        for rw in raw:
            t0 = time.perf_counter()
            peer.apply(rw)
            final = peer.answer_within(STOP_AFTER * budget)
            dt = time.perf_counter() - t0
            if final is None:
                return {
                    "skipped": f"one batch stopped after {STOP_AFTER * budget:.1f} s",
                    "one": STOP_AFTER * budget,
                }
            one = max(one, dt)
            spent += dt
            done += len(rw)
            batches += 1
            if batches == 1 and dt > budget:
                return {"skipped": f"one batch took {dt:.1f} s", "one": dt}
            if batches >= 3 and spent > budget:
                break
        return {
            "skipped": None,
            "spent": spent,
            "done": done,
            "batches": batches,
            "one": one,
            "final": final,
            "running": None,
        }
    finally:
        gc.unfreeze()


def batch_suite(args: argparse.Namespace, traces: dict[str, list[Event]]) -> tuple[dict, list[str]]:
    out: dict[str, Any] = {}
    problems: list[str] = []
    for query in args.queries:
        events = traces["both" if query in ("mst", "psp") else "bids"]
        sizes = args.sizes if query in VWAP_FORMS else args.other_sizes
        sizes = sorted({min(s, len(events)) for s in sizes})
        cases: list[dict[str, Any]] = []
        # (strategy, batch) -> seconds of one batch at a smaller prefix, where it exceeded the budget
        over: dict[tuple[str, int], float] = {}
        for n in sizes:
            levels = live_levels(events, n)
            for batch in args.batches:
                window = min(n, max(args.window, 2 * batch))
                finals: dict[str, Any] = {}
                strategies = strategies_of(query)
                if args.quick:
                    # Each window's child collects the heap it forked with before its clock starts; on
                    # smoke sizes that collection is most of the run. The peer's window unfreezes it
                    # again. A full run leaves the heap as it is.
                    gc.freeze()
                measured = batched_cases(
                    query,
                    [s for s in strategies if (s, batch) not in over],
                    events,
                    n,
                    batch,
                    window,
                    args.budget,
                    args.repeats,
                )
                for strategy in strategies:
                    if (strategy, batch) in over:
                        case = {
                            "events": n,
                            "batch": batch,
                            "skipped": f"one batch took {over[strategy, batch]:.1f} s at a smaller prefix",
                        }
                    else:
                        case = measured[strategy]
                        if "skipped" in case:
                            over[strategy, batch] = case["one_batch_s"]
                    case["query"], case["strategy"], case["D"] = query, strategy, levels
                    final = case.pop("final", None)
                    if final is not None:
                        finals[strategy] = final
                    cases.append(case)
                    shown = (
                        f"{case['us_per_event']:>11.2f} us/event"
                        if "us_per_event" in case
                        else case["skipped"]
                    )
                    print(
                        f"  {query:<10} n={n:>6} batch={batch:>5} {strategy:<10} {shown}"
                        + (f" ({case['auto_running']})" if "auto_running" in case else ""),
                        flush=True,
                    )
                if len({json.dumps(v, sort_keys=True) for v in finals.values()}) > 1:
                    problems.append(f"{query} at {n}, batch {batch}: strategies disagree: {finals}")
        out[query] = cases
    return out, problems


def goals(batches: dict[str, Any], default: str) -> dict[str, Any]:
    """The figures the service is held to: the default strategy against the best at every measured
    (query, prefix, batch), and against dbtoaster at batch 1 and 10,000 events."""
    rows = []
    for query, cases in batches.items():
        by: dict[tuple[int, int], dict[str, float]] = {}
        for c in cases:
            if "us_per_event" in c and c["strategy"] != "duckdb":
                by.setdefault((c["events"], c["batch"]), {})[c["strategy"]] = c["us_per_event"]
        for (n, batch), costs in sorted(by.items()):
            if default not in costs:
                continue
            best = min(costs, key=lambda s: costs[s])
            row = {"query": query, "events": n, "batch": batch, "best": best}
            row["default_over_best"] = costs[default] / costs[best]
            if "dbtoaster" in costs:
                row["dbtoaster_over_default"] = costs["dbtoaster"] / costs[default]
            rows.append(row)
    return {"default": default, "rows": rows}


def run_whole(query: str, strategy: str, events: Sequence[Event], n: int) -> dict[str, Any]:
    """Total seconds for the first n events, one event per batch, the result after every one."""
    engine = VwapEngine(query, strategy)
    ups = [UpdateEvent(rel, row, m, None) for rel, row, m in events[:n]]
    gc.collect()
    t0 = time.perf_counter()
    for ev in ups:
        engine.apply([ev])
        engine.result()
    dt = time.perf_counter() - t0
    return {"seconds": dt, "final": answer(engine.result())}


def whole_suite(args: argparse.Namespace, traces: dict[str, list[Event]]) -> tuple[dict, list[str]]:
    out: dict[str, Any] = {}
    problems = []
    for query in ("vwap", "mst"):
        events = traces["both" if query == "mst" else "bids"]
        out[query] = []
        for n in [s for s in args.sizes if s <= args.full_max]:
            row: dict[str, Any] = {"events": n}
            finals = {}
            for strategy in [s for s in ORDER if s in QUERIES[query].strategies and s != "recompute"]:
                r = run_whole(query, strategy, events, n)
                row[strategy] = r["seconds"]
                finals[strategy] = r["final"]
            if len({json.dumps(v, sort_keys=True) for v in finals.values()}) > 1:
                problems.append(f"whole {query} at {n}: {finals}")
            print(
                f"  whole {query:<6} n={n:>6} " + " ".join(f"{s} {row[s]:.2f}s" for s in finals), flush=True
            )
            out[query].append(row)
    return out, problems
