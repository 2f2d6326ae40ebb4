"""The triangle benchmark's constants and its engine-level toggle cases (W-mix, W-all, W-hub, the ε sweep).

Each case is an engine fed directly (no Kafka), timed in blocks interleaved with the other strategies
of the same size, and checked against a brute-force recount.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from bench import triangles_workloads as wl
from bench.lib.progress import progress
from bench.lib.report import REPO
from ivmstream.services.triangles.engine import create_engine

RESULTS = REPO / "bench" / "results"
HALF = Fraction(1, 2)
EPS_SWEEP = (Fraction(0), Fraction(1, 4), Fraction(1, 3), HALF, Fraction(2, 3), Fraction(3, 4), Fraction(1))
BASELINES = ("factorized", "recursive", "recompute")
DEFAULT = "auto"  # the service's default strategy: the goal is within 1.5x of the best
STRATEGIES = (DEFAULT, "ivm-eps", "first-order", *BASELINES)
BATCH_SIZES = (1, 100, 2000)
AUTO_WARMUP_MAX = 4096  # auto: warm-up toggles until its plan stops changing, at most this many
SEC_PER_WORK = 0.2e-6  # conservative wall cost of one work unit, for skip decisions only
SEC_PER_UPDATE = 5e-6  # fixed per-update cost, same use
MAX_VIEW_ENTRIES = 20_000_000  # skip a view-keeping baseline whose views would exceed this
WARMUP_TOGGLES = 10
BLOCKS = 5  # toggle cases: timed in this many blocks, interleaved across the strategies of one size
KEY_FIELD = "graph"
KEY = "bench"
E2E_TIMEOUT = 900.0
MEMORY_METHOD = (
    "build_traced_*: tracemalloc around BUILD only (current = bytes the engine retains after BUILD, "
    "peak = high-water mark during BUILD); state_entries: exact count of stored dict entries "
    "(relation indexes + heavy second-variable indexes + view entries), taken after the run "
    "(W-grow: maximum over samples every 1024 updates). Timed phases run without tracemalloc."
)


def eps_label(strategy: str, eps: Fraction | None) -> str:
    return f"{strategy}({eps})" if strategy == "ivm-eps" else strategy


def make_engine(strategy: str, eps: Fraction | None, mode: str = "relations"):
    return create_engine(mode, strategy, str(eps) if strategy == "ivm-eps" else None)


def plan_of(stats: dict[str, Any]) -> str | None:
    """auto's current plan, from its 0/1 ``plan_<name>`` gauges."""
    return next(
        (k[5:] for k, v in stats.items() if k.startswith("plan_") and v == 1 and k != "plan_switches"), None
    )


def state_entries(strategy: str, stats: dict[str, int]) -> int:
    """Stored dict entries: relation indexes, heavy-part second-variable indexes, views."""
    views = stats.get("view_entries", 0)
    if strategy == "ivm-eps":
        heavy = sum(v for k, v in stats.items() if k.startswith("part_") and k.endswith("_h"))
        return stats["size"] + heavy + views
    return 2 * stats["size"] + views  # by first and by second variable, plus any full views


def percentiles(ns: Sequence[int]) -> dict[str, float]:
    if not ns:
        return {"p50_us": None, "p99_us": None, "max_us": None}
    s = sorted(ns)

    def at(q: float) -> float:
        return round(s[min(len(s) - 1, int(q * len(s)))] / 1000, 3)

    return {"p50_us": at(0.5), "p99_us": at(0.99), "max_us": round(s[-1] / 1000, 3)}


def block_rates(lat_ns: Sequence[int], blocks: int = BLOCKS) -> list[float]:
    """Updates/s of each of ``blocks`` consecutive equal blocks; their median is the reported rate, so a
    burst of CPU contention from another process moves one block, not the figure."""
    size = max(1, len(lat_ns) // blocks)
    return [size / (sum(lat_ns[i : i + size]) / 1e9) for i in range(0, size * blocks, size)]


def cpu_figures(blocks: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Per-update time from the thread's CPU time per block, (updates, ns) each, median block rate:
    the time this process ran, without the time it waited while other processes had the cores. On a
    loaded machine a block of a microsecond-per-update strategy lasts a few scheduler slices, so its
    wall time may double by one preemption; its CPU time does not (it still feels the caches)."""
    if not blocks:
        return {}
    rate = statistics.median(n / (ns / 1e9) for n, ns in blocks)
    return {"us_per_update_cpu": round(1e6 / rate, 3)}


def rebalancing(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    keys = ("major_up", "major_down", "major_work_total", "minor_up", "minor_down", "minor_tuples_moved")
    out = {k: after.get(k, 0) - before.get(k, 0) for k in (*keys, "minor_work_total")}
    out["N_final"] = after.get("N")
    return out


# --------------------------------------------------------------------------- engine-level cases


def skip_case(case: dict[str, Any], reason: str) -> dict[str, Any]:
    case.update(status="skipped", reason=reason)
    progress(f"  skip {case['id']}: {reason}")
    return case


def settle_gc() -> None:
    """Collect, then freeze what is alive (the other strategies' engines of the same size): a cyclic
    collection during one strategy's timing then walks only its own new objects, not the state of
    every engine alive beside it, which a single engine in a worker would not have."""
    gc.collect()
    gc.freeze()


def estimate_toggle(wk: wl.Toggle, strategy: str, min_toggles: int) -> dict[str, Any]:
    work = wk.expected_work("ivm-eps" if strategy == DEFAULT else strategy)
    est: dict[str, Any] = {
        "work_per_update": work,
        "seconds_for_min_toggles": round(min_toggles * (work * SEC_PER_WORK + SEC_PER_UPDATE), 3),
    }
    if strategy in ("factorized", "recursive"):
        costs = wl.join_costs(wk.data)
        names = ("wedges_ST",) if strategy == "factorized" else ("wedges_RS", "wedges_ST", "wedges_TR")
        est["view_entries_upper_bound"] = sum(costs[n] for n in names)
    return est


class ToggleRun:
    """One toggle case: BUILD(D₀), a warm-up, then an even number of toggles (D ends as D₀) timed in
    ``BLOCKS`` blocks. The blocks of the cases of one size are interleaved (``run_interleaved``), so
    IVM^ε and its baselines share whatever CPU contention the machine has while they run."""

    def __init__(
        self,
        wk: wl.Toggle,
        strategy: str,
        eps: Fraction | None,
        args: argparse.Namespace,
        truth: int,
        case_id: str,
        skip_reason: str | None = None,
    ) -> None:
        self.truth = truth
        self.engine: Any = None
        self.case: dict[str, Any] = {
            "id": case_id,
            "workload": wk.name,
            "size": wk.n,
            "strategy": strategy,
            "epsilon": str(eps) if eps is not None else None,
            "label": eps_label(strategy, eps),
            "workload_meta": wk.meta,
        }
        est = estimate_toggle(wk, strategy, args.min_toggles)
        self.case["estimate"] = est
        if skip_reason is None and est["seconds_for_min_toggles"] > args.max_case_seconds:
            skip_reason = (
                f"estimated {est['seconds_for_min_toggles']:.0f}s for {args.min_toggles} toggles "
                f"> --max-case-seconds {args.max_case_seconds:g}"
            )
        if skip_reason is None and est.get("view_entries_upper_bound", 0) > MAX_VIEW_ENTRIES:
            skip_reason = f"views would hold up to {est['view_entries_upper_bound']:,} entries"
        if skip_reason is not None:
            skip_case(self.case, skip_reason)
            return
        self.strategy = strategy
        traced = make_engine(strategy, eps)  # memory: a BUILD under tracemalloc, then discarded ...
        gc.collect()
        tracemalloc.start()
        t0 = time.perf_counter()
        traced.load(wk.data)
        traced_s = time.perf_counter() - t0
        traced_current, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del traced
        settle_gc()
        engine = make_engine(strategy, eps)  # ... time: the BUILD the run continues from, untraced
        t0 = time.perf_counter()
        engine.load(wk.data)
        build_s = time.perf_counter() - t0
        s0 = engine.result()["stats"]
        self.case["build"] = {
            "seconds": round(build_s, 6),
            "seconds_under_tracemalloc": round(traced_s, 4),
            "work": s0.get("build_work"),
            "traced_current_bytes": traced_current,
            "traced_peak_bytes": traced_peak,
            "state_entries": state_entries(strategy, s0),
        }
        if strategy == "ivm-eps":
            self.case["partition_after_build"] = {
                k: s0[k]
                for k in ("N", "theta_strict_R", "heavy_values_R", "heavy_values_S", "heavy_values_T")
                if k in s0
            }
        self.toggles = wk.toggles
        self.period = 2 * len(self.toggles)  # D is D₀ again after each period
        self.i = 0
        self.engine = engine
        warm = WARMUP_TOGGLES + (-WARMUP_TOGGLES) % self.period
        t0 = time.perf_counter_ns()
        self._toggles(warm, [0] * warm, 0)
        per_toggle = (time.perf_counter_ns() - t0) / 1e9 / warm
        if strategy == DEFAULT:
            # Warm up until the plan has settled: no switch in the last chunk and no regret growing
            # towards one. Its switches and their cost are reported (``warmup``), not timed per update.
            chunk = self.period * max(1, 64 // self.period)
            while warm < AUTO_WARMUP_MAX:
                before = engine.result()["stats"]["plan_switches"]
                share = engine.max_regret_share()
                t1 = time.perf_counter_ns()
                self._toggles(chunk, [0] * chunk, 0)
                per_toggle = (time.perf_counter_ns() - t1) / 1e9 / chunk
                warm += chunk
                switched = engine.result()["stats"]["plan_switches"] != before
                if not switched and engine.max_regret_share() <= share:
                    break
        warm_s = (time.perf_counter_ns() - t0) / 1e9
        s_warm = engine.result()["stats"]
        self.case["warmup"] = {
            "updates": warm,
            "seconds": round(warm_s, 6),
            "us_per_update": round(1e6 * warm_s / warm, 3),
            "plan_switches": s_warm.get("plan_switches"),
            "plan_reason": engine.result()["stats"].get("plan_reason"),
        }
        self.warm = warm
        count = int(min(args.toggles, max(args.min_toggles, args.budget / max(per_toggle, 1e-9))))
        self.block = max(self.period, count // BLOCKS)
        self.block -= self.block % self.period
        self.lat = [0] * (self.block * BLOCKS)
        self.cpu: list[int] = []  # thread CPU ns per block (the time this process ran, not waited)
        self.s1 = engine.result()["stats"]

    def _toggles(self, n: int, lat: list[int], at: int) -> None:
        """The next n toggles: each tuple of the cycle in turn, deleted in one round, re-inserted in
        the next (so D is D₀ after every even number of rounds)."""
        toggles = self.toggles
        period = len(toggles)
        apply = self.engine.apply_tuple
        pc = time.perf_counter_ns
        j = self.i
        prev = pc()
        for i in range(at, at + n):
            rel, x, y = toggles[j % period]
            apply(rel, x, y, -1 if (j // period) % 2 == 0 else 1)
            j += 1
            now = pc()
            lat[i] = now - prev
            prev = now
        self.i = j

    def run_block(self, b: int) -> None:
        if self.engine is not None:
            c0 = time.thread_time_ns()
            self._toggles(self.block, self.lat, b * self.block)
            self.cpu.append(time.thread_time_ns() - c0)

    def finish(self) -> dict[str, Any]:
        if self.engine is None:
            return self.case
        engine, lat, count = self.engine, self.lat, len(self.lat)
        s2 = engine.result()["stats"]
        work = s2["work_total"] - self.s1["work_total"]
        reb = rebalancing(self.s1, s2)
        rebalance_work = reb["major_work_total"] + reb["minor_work_total"]
        seconds = sum(lat) / 1e9
        rates = block_rates(lat)
        rate = statistics.median(rates)
        self.case.update(
            status="ok",
            updates=count,
            warmup_updates=self.warm,
            seconds=round(seconds, 6),
            total_seconds_incl_warmup=round(seconds + self.case["warmup"]["seconds"], 6),
            us_per_update_incl_warmup=round(
                1e6 * (seconds + self.case["warmup"]["seconds"]) / (count + self.warm), 3
            ),
            whole_run_seconds=round(
                self.case["build"]["seconds"] + self.case["warmup"]["seconds"] + seconds, 6
            ),
            plan=plan_of(s2),
            updates_per_s=round(rate, 2),
            updates_per_s_mean=round(count / seconds, 2),
            updates_per_s_blocks=[round(r, 2) for r in rates],
            us_per_update=round(1e6 / rate, 3),
            **cpu_figures([(self.block, ns) for ns in self.cpu]),
            latency=percentiles(lat),
            work_per_update=round(work / count, 3),
            work_per_update_incl_rebalancing=round((work + rebalance_work) / count, 3),
            rebalancing=reb,
            state_entries=state_entries(self.strategy, s2),
            count=engine.q,
            brute_force=self.truth,
            count_ok=engine.q == self.truth,
        )
        self.engine = None
        c = self.case
        progress(
            f"  {c['id']}: {c['updates_per_s']:>12,.1f} upd/s  {c['work_per_update']:>10,.1f} work/upd  "
            f"({count} toggles, count {'ok' if c['count_ok'] else 'MISMATCH'})"
        )
        return c


def run_interleaved(runs: Sequence[ToggleRun]) -> dict[str, dict[str, Any]]:
    gc.collect()
    for b in range(BLOCKS):
        for r in runs:
            r.run_block(b)
    return {r.case["id"]: r.finish() for r in runs}


def toggle_suite(
    name: str, gen: Callable[[int], wl.Toggle], sizes: Sequence[int], args: argparse.Namespace
) -> dict[str, dict[str, Any]]:
    cases: dict[str, dict[str, Any]] = {}
    for n in sizes:
        progress(f"{name} |D|={n}")
        wk = gen(n)
        truth = wl.brute_force_count(wk.data)  # D ends as D₀: an even number of toggles
        runs = []
        for strategy in STRATEGIES:
            eps = HALF if strategy == "ivm-eps" else None
            cid = f"{name}|{n}|{eps_label(strategy, eps)}"
            runs.append(ToggleRun(wk, strategy, eps, args, truth, cid))
        cases.update(run_interleaved(runs))
        del wk, runs
        gc.unfreeze()
        gc.collect()
    return cases


def eps_suite(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """One case at a time (no interleaving): the sweep compares shapes, not a paired ratio."""
    n = args.eps_size
    cases: dict[str, dict[str, Any]] = {}
    progress(f"epsilon sweep at |D|={n}: fixed W-mix (built for eps=1/2), then the worst case per eps")
    fixed = wl.w_mix(n, HALF)
    truth = wl.brute_force_count(fixed.data)
    for eps in EPS_SWEEP:
        cid = f"W-mix-eps|{n}|{eps_label('ivm-eps', eps)}"
        cases.update(run_interleaved([ToggleRun(fixed, "ivm-eps", eps, args, truth, cid)]))
    cid = f"W-mix-eps|{n}|first-order"
    cases.update(run_interleaved([ToggleRun(fixed, "first-order", None, args, truth, cid)]))
    for eps in EPS_SWEEP:
        wk = wl.w_adversarial(n, eps)
        cid = f"W-adv-eps|{n}|{eps_label('ivm-eps', eps)}"
        cases.update(
            run_interleaved([ToggleRun(wk, "ivm-eps", eps, args, wl.brute_force_count(wk.data), cid)])
        )
        cases[cid]["workload"] = f"W-adv ({wk.name})"
    return cases
