"""Nested-aggregate benchmark: every vwap strategy at batch sizes 1, 100 and 2,000, with DuckDB as an
independent peer, as the service runs them.

One run measures, on DBToaster's public finance trace (``bench/data/finance-big.csv``, 46,166 bid events
with ``book=bids``, 100,485 with both books) through the order-book adaptor of docs/algorithms/vwap.md §1.6:

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

``--markdown [FILE]`` prints the tables of ``docs/vwap-benchmark.md`` from a stored result file
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
import copy
import gc
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.limits import Silent, Watchdog, in_child  # noqa: E402
from bench.lib.report import command_line, shown  # noqa: E402
from ivmstream.events import UpdateEvent  # noqa: E402
from ivmstream.events.orderbook import OrderBookAdaptor  # noqa: E402
from ivmstream.services.vwap.catalog import QUERIES  # noqa: E402
from ivmstream.services.vwap.engine import VwapEngine  # noqa: E402
from ivmstream.services.vwap.exact import exact_context  # noqa: E402
from ivmstream.services.vwap.plans import make_plan  # noqa: E402

TRACE = ROOT / "bench" / "data" / "finance-big.csv"
RESULTS = ROOT / "bench" / "results"
FINANCE_QUERIES = ("vwap", "vwap-paper", "mst", "psp", "nq1", "sq1", "sq2", "nq2")
VWAP_FORMS = ("vwap", "vwap-paper")
NONE = "\u2013"  # an en dash: no figure
TIMES = "\u00d7"
ORDER = ("rpai", "crosscheck", "dbtoaster", "recompute", "duckdb", "auto")
BOOK_COLUMNS = ("t", "id", "broker_id", "volume", "price")
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


def answer(result: dict[str, Any]) -> Any:
    return {k: v for k, v in result.items() if k != "stats"}


def strategies_of(query: str) -> list[str]:
    return [s for s in ORDER if s == "duckdb" or s in QUERIES[query].strategies]


def default_strategy() -> str:
    from ivmstream.services.vwap.options import OPTIONS

    return str(OPTIONS["strategy"].default)


# --- the peer: DuckDB over the live book ----------------------------------------------------------


class DuckDBPeer:
    """The live book as a bag, and the query's SQL evaluated by DuckDB over it once per batch: an
    implementation that shares nothing with the engine's plans (docs/algorithms/vwap.md §5.4)."""

    def __init__(self, query: str) -> None:
        import duckdb

        from ivmstream.services.vwap import sql

        self.query = query
        self.live: Counter = Counter()
        self.con = duckdb.connect()
        for rel in ("bids", "asks"):
            self.con.execute(
                f"CREATE TABLE {rel} (__key VARCHAR, t BIGINT, id BIGINT, broker_id BIGINT, "
                "volume HUGEINT, price HUGEINT)"  # the trace's integers; MST's sums overflow 64 bits
            )
        self.text = sql.render(query, sql.query_params(query, {"query": query}), keyed=True, dialect="duckdb")
        self.reads = QUERIES[query].reads

    def apply(self, batch: Sequence[Event]) -> None:
        live = self.live
        for rel, row, m in batch:
            live[(rel, tuple(row[c] for c in BOOK_COLUMNS))] += m

    def result(self) -> dict[str, Any]:
        import pandas as pd  # type: ignore[import-untyped]

        from ivmstream.services.vwap.batch_recompute import empty, shape

        for rel in self.reads:
            rows = [("k", *vals) for (r, vals), m in self.live.items() if r == rel for _ in range(m)]
            frame = pd.DataFrame(rows, columns=["__key", *BOOK_COLUMNS])  # noqa: F841 (read by DuckDB)
            self.con.execute(f"DELETE FROM {rel}")
            if rows:
                self.con.execute(f"INSERT INTO {rel} SELECT * FROM frame")
        got = shape(self.query, self.con.execute(self.text).fetchall())
        return got.get("k", empty({"query": self.query}))

    def answer_within(self, seconds: float) -> dict[str, Any] | None:
        """The result, or None when it took longer than ``seconds`` (DuckDB is asked to interrupt its
        query then; whatever it was doing at that moment, the answer counts as stopped)."""
        import duckdb

        with _WATCHDOG.limit(seconds, self.con.interrupt) as fired:
            try:
                got = self.result()
            except duckdb.InterruptException:
                return None
        return None if fired() else got


_WATCHDOG = Watchdog()  # interrupts the peer's query when one batch runs too long


def runner(query: str, strategy: str) -> Any:
    return DuckDBPeer(query) if strategy == "duckdb" else VwapEngine(query, strategy)


def feed(target: Any, batch: Sequence[Event]) -> None:
    if isinstance(target, DuckDBPeer):
        target.apply(batch)
    else:
        rejected = target.apply([UpdateEvent(rel, row, m, None) for rel, row, m in batch])
        assert not rejected, rejected[:3]


# --- 1. batches through the engine ---------------------------------------------------------------


def batched_cases(
    query: str,
    strategies: Sequence[str],
    events: Sequence[Event],
    n: int,
    batch: int,
    window: int,
    budget: float,
) -> dict[str, dict[str, Any]]:
    """Per strategy: µs per event over up to ``window`` events ending at prefix n, in batches of
    ``batch`` with one result per batch.

    Every strategy is brought to the state before the window first; then the windows are timed in
    rounds, each strategy once per round, so that a burst of load on the shared machine falls on all
    of them rather than on whichever ran during it. An engine's window is timed up to ``REPEATS`` times
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
        due = [s for s in targets if s not in out and _wants_another(runs[s], s, n - first, budget)]
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


def _wants_another(runs: list[dict[str, Any]], strategy: str, full: int, budget: float) -> bool:
    if not runs:
        return True
    if strategy == "duckdb" or len(runs) == REPEATS or runs[-1]["done"] < full:
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


REPEATS = 5  # an engine's window is timed at most this many times, while its budget lasts
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
                measured = batched_cases(
                    query,
                    [s for s in strategies if (s, batch) not in over],
                    events,
                    n,
                    batch,
                    window,
                    args.budget,
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


# --- 3. the worker -------------------------------------------------------------------------------


def worker_suite(args: argparse.Namespace, traces: dict[str, list[Event]]) -> dict[str, Any]:
    """The vwap service through the real ``Worker`` on the embedded broker against ``VwapEngine``
    alone on the same events in the same batches (the best of two worker runs and of three engine
    runs: a shared machine's noise is of the order of the differences)."""
    from bench.lib.broker import produce_checked
    from ivmstream.config import build_config
    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.events import encode_event
    from ivmstream.service import load_service
    from ivmstream.state import open_store

    n = min(args.worker_events, len(traces["bids"]))
    flat = [UpdateEvent(rel, row, m, None) for rel, row, m in traces["bids"][:n]]
    service = load_service("vwap")
    out: dict[str, Any] = {"events": n, "strategies": {}}
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-vwap-bench-"))
    try:
        with BrokerProcess() as broker:
            topic = f"vwap-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, 1)
            end = produce_checked(broker.bootstrap, topic, [encode_event(ev) for ev in flat])
            for strategy in args.worker_strategies:
                config = build_config(
                    service,
                    {
                        "query": "vwap",
                        "strategy": strategy,
                        "input_topic": topic,
                        "output_topic": f"{topic}.{strategy}.out",
                        "dlq_topic": f"{topic}.{strategy}.dlq",
                    },
                )
                runs = [
                    _worker_run(
                        service,
                        config,
                        broker.bootstrap,
                        open_store("rocksdb", f"vwap.{topic}.{strategy}.{i}", state_dir=tmp),
                        f"{topic}-{strategy}-g{i}",
                        end,
                    )
                    for i in range(2)
                ]
                batch = config.batch_size
                engine_s = []
                for _ in range(3):
                    engine = VwapEngine("vwap", strategy)
                    t0 = time.perf_counter()
                    for i in range(0, n, batch):
                        assert not engine.apply(flat[i : i + batch])
                        engine.result()
                    engine_s.append(time.perf_counter() - t0)
                want = answer(engine.result())
                best = min(runs, key=lambda r: r["seconds"])
                agree = all(answer(r["result"]) == want for r in runs)
                out["batch"] = batch
                out["strategies"][strategy] = {
                    "worker_seconds": best["seconds"],
                    "worker_events_per_s": n / best["seconds"],
                    "engine_seconds": min(engine_s),
                    "engine_events_per_s": n / min(engine_s),
                    "agree": agree,
                }
                print(
                    f"  worker vwap {strategy:<10} {n} events, batch {batch}: worker {best['seconds']:.2f}s, "
                    f"engine {min(engine_s):.2f}s, results agree: {agree}",
                    flush=True,
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _worker_run(
    service: Any, config: Any, bootstrap: str, store: Any, group: str, end: int
) -> dict[str, Any]:
    """One worker from the start of the topic until caught up (final checkpoint included): seconds
    from its first batch, and its in-memory result at the end."""
    from bench.lib.worker_patches import run_until_caught_up
    from ivmstream.runtime import Worker

    seconds, results = run_until_caught_up(Worker(service, config, bootstrap, store, group=group), {0: end})
    (result,) = results.values()
    return {"seconds": seconds, "result": result}


# --- 4. TPC-H Q17 -------------------------------------------------------------------------------


def plan_for(query: str, strategy: str) -> Any:
    return make_plan(query, strategy, dict(QUERIES[query].defaults))


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


def tpch_suite(args: argparse.Namespace) -> tuple[dict, list[str]]:
    """Q17 over generated TPC-H data: lineitem and part interleaved in proportion, inserts only."""
    from bench import tpch_gen
    from ivmstream.events import EventCodec, Schema
    from ivmstream.events.tpch import interleave_tpch

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


# --- 5. plots and the doc's tables ----------------------------------------------------------------


def plot(batches: dict[str, Any], path: Path, batch_sizes: Sequence[int]) -> str:
    from bench.lib.plots import plt

    queries = list(batches)
    fig, axes = plt.subplots(
        len(queries), len(batch_sizes), figsize=(4 * len(batch_sizes), 3 * len(queries)), squeeze=False
    )
    for row, query in zip(axes, queries, strict=True):
        for ax, batch in zip(row, batch_sizes, strict=True):
            for strategy in ORDER:
                pts = [
                    (c["events"], c["us_per_event"])
                    for c in batches[query]
                    if c["strategy"] == strategy and c["batch"] == batch and "us_per_event" in c
                ]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", label=strategy)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{query}, batch {batch:,}", fontsize=9)
            ax.set_xlabel("trace prefix (events)", fontsize=8)
            ax.set_ylabel("µs per event (total / events)", fontsize=8)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return shown(path)


def _us(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def _ratio(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def _load(meta: dict[str, Any]) -> str:
    if "load" not in meta:
        return ""
    start, end = meta["load"]
    return f", load average {start:.1f} at the start and {end:.1f} at the end"


def markdown(report: dict[str, Any]) -> str:
    """The tables of docs/vwap-benchmark.md, from a stored result file only."""
    meta = report["meta"]
    default = report["goals"]["default"]
    lines = [
        f"Run: `{meta['command']}`, {meta['seconds']:.0f} s on {meta['machine']} with {meta['cpus']} CPUs, "
        f"Python {meta['python']}{_load(meta)}; default strategy `{default}`; problems: "
        f"{len(report['problems'])}.",
        "",
    ]
    for query, cases in report["batches"].items():
        present = [s for s in ORDER if any(c["strategy"] == s for c in cases)]
        lines += [
            f"**{query}**: µs per event (total time of the window / its events, one result per batch)",
            "",
            "| events | D | batch | "
            + " | ".join(present)
            + f" | {default} / best | dbtoaster / {default} |",
            "|---|---|---|" + "---|" * len(present) + "---|---|",
        ]
        by: dict[tuple[int, int], dict[str, Any]] = {}
        for c in cases:
            by.setdefault((c["events"], c["batch"]), {})[c["strategy"]] = c
        goal = {(r["events"], r["batch"]): r for r in report["goals"]["rows"] if r["query"] == query}
        for (n, batch), row in sorted(by.items()):
            d = next(iter(row.values()))["D"]
            dd = f"{d['bids']:,}" if query not in ("mst", "psp") else f"{d['bids']:,}/{d['asks']:,}"
            cells = []
            for s in present:
                c = row.get(s)
                cells.append(
                    NONE if c is None else _us(c["us_per_event"]) if "us_per_event" in c else "skipped"
                )
            g = goal.get((n, batch), {})
            over = _ratio(g["default_over_best"]) + f" ({g['best']})" if g else NONE
            dbt = _ratio(g["dbtoaster_over_default"]) if "dbtoaster_over_default" in g else NONE
            lines.append(f"| {n:,} | {dd} | {batch:,} | " + " | ".join(cells) + f" | {over} | {dbt} |")
        lines.append("")
    skipped = sorted(
        {
            f"{c['query']} {c['strategy']} at batch {c['batch']:,}: {c['skipped']} ({c['events']:,} events)"
            for cases in report["batches"].values()
            for c in cases
            if "skipped" in c and "smaller prefix" not in c["skipped"]
        }
    )
    if skipped:
        lines += ["Skipped (one batch over the budget, and at every larger prefix):", ""]
        lines += [f"- {s}" for s in skipped] + [""]
    whole = report["whole_prefix"]
    if whole:
        lines += [
            "**Whole prefix**: total seconds for the first n events, one event per batch, the result "
            "after every event",
            "",
        ]
        strategies = [s for s in ORDER if any(s in r for rows in whole.values() for r in rows)]
        lines += [
            "| query | events | " + " | ".join(strategies) + f" | dbtoaster / {default} |",
            "|---|---|" + "---|" * len(strategies) + "---|",
        ]
        for query, rows in whole.items():
            for r in rows:
                cells = [f"{r[s]:.2f}" if s in r else NONE for s in strategies]
                ratio = _ratio(r["dbtoaster"] / r[default]) if default in r and "dbtoaster" in r else NONE
                lines.append(f"| {query} | {r['events']:,} | " + " | ".join(cells) + f" | {ratio} |")
        lines.append("")
    worker = report.get("worker")
    if worker:
        lines += [
            f"**Worker**: vwap, the first {worker['events']:,} bid events, batch {worker['batch']:,}, "
            "total seconds (best of two worker runs, three engine runs)",
            "",
            "| strategy | worker s | worker events/s | engine alone s | engine events/s | results agree |",
            "|---|---|---|---|---|---|",
        ]
        for s, w in worker["strategies"].items():
            lines.append(
                f"| {s} | {w['worker_seconds']:.2f} | {w['worker_events_per_s']:,.0f} | "
                f"{w['engine_seconds']:.2f} | {w['engine_events_per_s']:,.0f} | "
                f"{'yes' if w['agree'] else 'NO'} |"
            )
        lines.append("")
    q17 = report.get("q17") or {}
    if q17:
        lines += [
            "**TPC-H Q17**: update + result per event, total time over the events measured",
            "",
            "| data | SF | events measured | rpai updates/s | dbtoaster updates/s | dbtoaster / rpai time |",
            "|---|---|---|---|---|---|",
        ]
        for label, rows in q17.items():
            for r in rows:
                measured = (
                    f"{r['measured_events']:,}"
                    if r["measured_events"] == r["events"]
                    else f"{r['measured_events']:,} of {r['events']:,}"
                )
                lines.append(
                    f"| {label} | {r['sf']} | {measured} | {r['rpai']['updates_per_s']:,.0f} | "
                    f"{r['dbtoaster']['updates_per_s']:,.0f} | {_ratio(r['ratio'])} |"
                )
        lines.append("")
    lines += ["Goal figures (ratios of µs per event within this run):", ""]
    for g in (report["goals"], report["goals_rpai"]):
        lines += _goal_lines(g)
    return "\n".join(lines) + "\n"


def _goal_lines(g: dict[str, Any]) -> list[str]:
    name = g["default"]
    worst: dict[int, tuple[float, str]] = {}
    for r in g["rows"]:
        if r["default_over_best"] > worst.get(r["batch"], (0.0, ""))[0]:
            where = f"{r['query']} at {r['events']:,} events"
            worst[r["batch"]] = (r["default_over_best"], where)
    out = [
        f"- `{name}` against the best strategy at every measured query and prefix: worst "
        + ", ".join(f"{w:.2f}{TIMES} at batch {b:,} ({where})" for b, (w, where) in sorted(worst.items()))
        + "."
    ]
    at10k = [r for r in g["rows"] if r["query"] == "vwap" and r["batch"] == 1 and r["events"] == 10000]
    if at10k and "dbtoaster_over_default" in at10k[0]:
        ratio = _ratio(at10k[0]["dbtoaster_over_default"])
        out.append(f"- vwap at batch 1 and 10,000 events: dbtoaster / `{name}` = {ratio}{TIMES} per event.")
    return out


# --- command line ----------------------------------------------------------------------------------


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
    load_start = os.getloadavg()
    print(f"loading {args.trace.name} through the order-book adaptor", flush=True)
    traces = {book: load_trace(args.trace, book) for book in ("bids", "both")}
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
            "window": args.window,
            "python": sys.version.split()[0],
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "seconds": time.time() - started,
            # the machine is shared: the 1-minute load average when the run started and when it ended
            "load": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
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
