"""The triangle benchmark's growing cases (W-grow: inserts from empty, then deletes) and the graph churn
at the runtime's batch sizes (G-churn), engine level.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from bench import triangles_workloads as wl
from bench.lib.progress import progress
from bench.triangles_cases import (
    BATCH_SIZES,
    BLOCKS,
    DEFAULT,
    HALF,
    MAX_VIEW_ENTRIES,
    SEC_PER_UPDATE,
    SEC_PER_WORK,
    STRATEGIES,
    cpu_figures,
    eps_label,
    make_engine,
    percentiles,
    plan_of,
    rebalancing,
    settle_gc,
    skip_case,
    state_entries,
)
from ivmstream.events import UpdateEvent


def estimate_grow(costs: dict[str, int], n: int, strategy: str) -> dict[str, Any]:
    updates = 2 * n
    if strategy == "recompute":
        work = updates * costs["recount"] / 2  # every update recounts the current database
    elif strategy in ("recursive", "factorized"):
        work = costs["maint_sum"]  # each tuple walks its two full rows once in, once out (≈ half size)
    elif strategy in ("first-order", DEFAULT):
        work = costs["fo_sum"]
    else:
        work = 0
    views = 0
    if strategy == "recursive":
        views = costs["wedges_RS"] + costs["wedges_ST"] + costs["wedges_TR"]
    elif strategy == "factorized":
        views = costs["wedges_ST"]
    return {
        "work_total": int(work),
        "seconds": round(work * SEC_PER_WORK + updates * SEC_PER_UPDATE, 2),
        "view_entries_upper_bound": views,
    }


def grow_suite(sizes: Sequence[int], args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    cases: dict[str, dict[str, Any]] = {}
    for n in sizes:
        progress(f"W-grow |D|={n}")
        stream = wl.w_grow(n, args.seed)
        mid = wl.relations_of(stream.updates[:n])
        truth_mid = wl.brute_force_count(mid)
        costs = wl.join_costs(mid)
        runs: list[GrowRun] = []
        for strategy in STRATEGIES:
            eps = HALF if strategy == "ivm-eps" else None
            cid = f"W-grow|{n}|{eps_label(strategy, eps)}"
            case: dict[str, Any] = {
                "id": cid,
                "workload": stream.name,
                "size": n,
                "strategy": strategy,
                "epsilon": str(eps) if eps is not None else None,
                "label": eps_label(strategy, eps),
                "workload_meta": {**stream.meta, "join_costs_at_full_size": costs},
            }
            est = estimate_grow(costs, n, strategy)
            case["estimate"] = est
            if est["seconds"] > args.max_case_seconds:
                cases[cid] = skip_case(
                    case, f"estimated {est['seconds']:.0f}s > --max-case-seconds {args.max_case_seconds:g}"
                )
                continue
            if est["view_entries_upper_bound"] > MAX_VIEW_ENTRIES:
                cases[cid] = skip_case(case, f"views up to {est['view_entries_upper_bound']:,} entries")
                continue
            runs.append(GrowRun(stream, strategy, eps, case))
        cases.update(run_grow_interleaved(runs, stream, truth_mid))
        del stream, mid, runs
        gc.collect()
    return cases


class GrowRun:
    """One W-grow case. The cases of one size advance chunk by chunk in turn (``run_grow_interleaved``),
    so every strategy's total time is taken under the same load from other processes."""

    def __init__(self, stream: wl.Stream, strategy: str, eps: Fraction | None, case: dict[str, Any]):
        self.stream, self.strategy, self.case = stream, strategy, case
        self.engine = make_engine(strategy, eps)
        self.lat = [0] * len(stream.updates)
        self.cpu_ns = 0  # thread CPU time of the updates (the time this process ran, not waited)
        self.peak_entries = 0
        self.phases: dict[str, Any] = {}
        self.before: dict[str, Any] = {}

    def chunk(self, lo: int, hi: int) -> None:
        apply = self.engine.apply_tuple
        lat = self.lat
        pc = time.perf_counter_ns
        j = lo
        c0 = time.thread_time_ns()
        prev = pc()
        for rel, x, y, m in self.stream.updates[lo:hi]:
            apply(rel, x, y, m)
            now = pc()
            lat[j] = now - prev
            prev = now
            j += 1
        self.cpu_ns += time.thread_time_ns() - c0
        self.peak_entries = max(
            self.peak_entries, state_entries(self.strategy, self.engine.result()["stats"])
        )

    def phase_start(self) -> None:
        self.before = self.engine.result()["stats"]

    def phase_end(self, phase: str, lo: int, hi: int) -> None:
        after = self.engine.result()["stats"]
        work = after["work_total"] - self.before["work_total"]
        reb = rebalancing(self.before, after)
        reb_work = reb["major_work_total"] + reb["minor_work_total"]
        seconds = sum(self.lat[lo:hi]) / 1e9
        updates = hi - lo
        self.phases[phase] = {
            "updates": updates,
            "seconds": round(seconds, 6),
            "updates_per_s": round(updates / seconds, 1),
            "latency": percentiles(self.lat[lo:hi]),
            "work_per_update": round(work / updates, 3),
            "work_per_update_incl_rebalancing": round((work + reb_work) / updates, 3),
            "rebalancing": reb,
            "count_at_end": self.engine.q,
            "size_at_end": after["size"],
        }

    def finish(self, truth_mid: int) -> dict[str, Any]:
        engine, case, phases = self.engine, self.case, self.phases
        updates = len(self.stream.updates)
        total_s = sum(self.lat) / 1e9
        total_work = sum(p["work_per_update"] * p["updates"] for p in phases.values())
        total_reb = sum(
            p["rebalancing"]["major_work_total"] + p["rebalancing"]["minor_work_total"]
            for p in phases.values()
        )
        stats = engine.result()["stats"]
        mid_ok = phases["grow"]["count_at_end"] == truth_mid
        end_ok = engine.q == 0 and engine.size == 0
        case.update(
            status="ok",
            updates=updates,
            seconds=round(total_s, 6),
            updates_per_s=round(updates / total_s, 1),
            us_per_update=round(1e6 * total_s / updates, 3),
            us_per_update_cpu=round(1e6 * self.cpu_ns / 1e9 / updates, 3),
            work_per_update=round(total_work / updates, 3),
            work_per_update_incl_rebalancing=round((total_work + total_reb) / updates, 3),
            rebalancing_work_total=total_reb,
            phases=phases,
            peak_state_entries=self.peak_entries,
            count=phases["grow"]["count_at_end"],
            brute_force=truth_mid,
            count_checked_at="end of the insert phase (and 0 with |D| = 0 after the deletes)",
            final_N=stats.get("N"),
            plan=plan_of(stats),
            plan_switches=stats.get("plan_switches"),
            count_ok=mid_ok and end_ok,
        )
        progress(
            f"  {case['id']}: {case['updates_per_s']:>10,.1f} upd/s  "
            f"{case['work_per_update']:>8,.1f} work/upd "
            f"(+rebalancing {case['work_per_update_incl_rebalancing']:,.1f}), "
            f"count {'ok' if case['count_ok'] else 'MISMATCH'}"
        )
        self.engine = None
        return case


def run_grow_interleaved(runs: Sequence[GrowRun], stream: wl.Stream, truth_mid: int) -> dict[str, Any]:
    gc.collect()
    for phase, (lo, hi) in stream.phases.items():
        for r in runs:
            r.phase_start()
        for c0 in range(lo, hi, 1024):
            for r in runs:
                r.chunk(c0, min(hi, c0 + 1024))
        for r in runs:
            r.phase_end(phase, lo, hi)
    return {r.case["id"]: r.finish(truth_mid) for r in runs}


# --------------------------------------------------------------------------- graph churn, batch sizes


def churn_suite(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Graph mode, R-MAT churn (``graph_churn_events``) after a BUILD of the warm edges, through
    ``engine.apply`` in batches with the result read after each batch, as the worker does; every
    strategy at every size, and the batch sizes ``BATCH_SIZES`` at ``--batch-size-at``."""
    cases: dict[str, dict[str, Any]] = {}
    for n in args.churn_sizes:
        warm_edges = n // 2  # |D| counts both directions of an edge
        triples, meta = wl.graph_churn_events(warm=warm_edges, churn=args.churn_steps, seed=args.seed)
        warm = sorted({(min(u, v), max(u, v)) for u, v, _ in triples[:warm_edges]})
        churn = [UpdateEvent("edges", {"src": u, "dst": v}, m) for u, v, m in triples[warm_edges:]]
        truths: dict[int, int] = {}

        def truth(done: int, triples=triples, warm_edges=warm_edges, truths=truths) -> int:
            if done not in truths:
                truths[done] = wl.graph_brute_force(wl.final_edges(triples[: warm_edges + done]))
            return truths[done]

        for batch in BATCH_SIZES if n == args.batch_size_at else (1,):
            progress(f"G-churn |D|={n} batch {batch}")
            runs = []
            for strategy in STRATEGIES:
                eps = HALF if strategy == "ivm-eps" else None
                cid = f"G-churn|{n}|b{batch}|{eps_label(strategy, eps)}"
                runs.append(ChurnRun(cid, n, batch, strategy, eps, warm, churn, meta))
            gc.collect()
            block = -(-len(churn) // BLOCKS)
            for b in range(BLOCKS):  # the strategies take turns, one block of events each
                for r in runs:
                    r.run_block(b * block, min(len(churn), (b + 1) * block), args.budget)
            for r in runs:
                cases[r.case["id"]] = r.finish(truth)
            del runs
            gc.unfreeze()
            gc.collect()
    return cases


class ChurnRun:
    """One G-churn case: BUILD of the warm edges, then blocks of churn events through ``engine.apply``
    in batches, the result read after each batch; it stops once its timed calls exceed the budget."""

    def __init__(
        self,
        cid: str,
        n: int,
        batch: int,
        strategy: str,
        eps: Fraction | None,
        warm: list[tuple[int, int]],
        churn: list[UpdateEvent],
        meta: dict[str, Any],
    ) -> None:
        self.engine = make_engine(strategy, eps, "graph")
        settle_gc()
        t0 = time.perf_counter()
        self.engine.load(warm)
        self.churn, self.batch = churn, batch
        self.done = 0
        self.spent = 0
        self.lat: list[int] = []
        self.blocks: list[tuple[int, int]] = []  # (events, ns) per block run
        self.cpu_blocks: list[tuple[int, int]] = []  # (events, thread CPU ns) per block run
        self.case: dict[str, Any] = {
            "id": cid,
            "workload": "G-churn",
            "size": n,
            "batch_size": batch,
            "strategy": strategy,
            "epsilon": str(eps) if eps is not None else None,
            "label": eps_label(strategy, eps),
            "workload_meta": meta,
            "status": "ok",
            "build_seconds": round(time.perf_counter() - t0, 4),
        }

    def run_block(self, lo: int, hi: int, budget_s: float) -> None:
        if self.done != lo or self.spent > budget_s * 1e9:
            return  # stopped by the budget in an earlier block
        engine, pc = self.engine, time.perf_counter_ns
        events = 0
        ns = 0
        c0 = time.thread_time_ns()  # the block's CPU time includes this loop's own bookkeeping
        while self.done < hi and self.spent <= budget_s * 1e9:
            chunk = self.churn[self.done : min(hi, self.done + self.batch)]
            t = pc()
            rejected = engine.apply(chunk)
            engine.result()
            dt = pc() - t
            if rejected:
                raise RuntimeError(f"{self.case['id']}: churn event refused: {rejected[:2]}")
            self.lat.append(dt)
            self.spent += dt
            self.done += len(chunk)
            events += len(chunk)
            ns += dt
        if events:
            self.blocks.append((events, ns))
            self.cpu_blocks.append((events, time.thread_time_ns() - c0))

    def finish(self, truth: Callable[[int], int]) -> dict[str, Any]:
        engine, case, done = self.engine, self.case, self.done
        seconds = self.spent / 1e9
        stats = engine.result()["stats"]
        # The median of the blocks' rates, as for the toggles; the total-time figure is kept beside it.
        rates = [e / (ns / 1e9) for e, ns in self.blocks]
        rate = statistics.median(rates)
        case.update(
            updates=done,
            updates_offered=len(self.churn),
            stopped_by_budget=done < len(self.churn),
            seconds=round(seconds, 6),
            updates_per_s=round(rate, 1),
            us_per_update=round(1e6 / rate, 3),
            updates_per_s_blocks=[round(r, 1) for r in rates],
            **cpu_figures(self.cpu_blocks),
            updates_per_s_total_time=round(done / seconds, 1),
            us_per_update_total_time=round(1e6 * seconds / done, 3),
            batch_latency=percentiles(self.lat),
            work_per_update=round(stats["work_total"] / max(1, stats["events"]), 3),
            plan=plan_of(stats),
            plan_switches=stats.get("plan_switches"),
            count=engine.q,
            brute_force=truth(done),
        )
        case["count_ok"] = case["count"] == case["brute_force"]
        progress(
            f"  {case['id']}: {case['updates_per_s']:>10,.1f} upd/s ({done} events"
            f"{', budget hit' if case['stopped_by_budget'] else ''}), "
            f"count {'ok' if case['count_ok'] else 'MISMATCH'}"
        )
        self.engine = None
        return case
