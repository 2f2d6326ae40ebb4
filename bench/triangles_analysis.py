"""The triangle benchmark's analysis: fitted slopes, speed-ups, the default strategy against the best,
all computed from the cases of one run.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from bench.triangles_cases import BASELINES, DEFAULT, HALF, eps_label


def fit_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return round(sum((p[0] - mx) * (p[1] - my) for p in pts) / den, 4) if den else None


def series(cases: dict[str, dict[str, Any]], workload: str, label: str) -> list[dict[str, Any]]:
    return sorted(
        (
            c
            for c in cases.values()
            if c["id"].startswith(f"{workload}|") and c["label"] == label and c["status"] == "ok"
        ),
        key=lambda c: c["size"],
    )


def analyse(cases: dict[str, dict[str, Any]], sizes: Sequence[int]) -> dict[str, Any]:
    ivm, fo = eps_label("ivm-eps", HALF), "first-order"
    speedups: dict[str, list[dict[str, Any]]] = {}
    slopes: dict[str, dict[str, Any]] = {}
    for workload in ("W-mix", "W-hub", "W-grow"):
        rows = []
        for n in sizes:
            a, b = cases.get(f"{workload}|{n}|{ivm}"), cases.get(f"{workload}|{n}|{fo}")
            if a and b and a["status"] == b["status"] == "ok":
                rows.append(
                    {
                        "size": n,
                        "ivm_updates_per_s": a["updates_per_s"],
                        "first_order_updates_per_s": b["updates_per_s"],
                        "speedup": round(a["updates_per_s"] / b["updates_per_s"], 3),
                        "speedup_blockwise_median": round(
                            statistics.median(
                                x / y
                                for x, y in zip(
                                    a.get("updates_per_s_blocks") or [a["updates_per_s"]],
                                    b.get("updates_per_s_blocks") or [b["updates_per_s"]],
                                    strict=True,
                                )
                            ),
                            3,
                        ),
                        "ivm_work_per_update": a["work_per_update"],
                        "first_order_work_per_update": b["work_per_update"],
                        "work_ratio": round(b["work_per_update"] / a["work_per_update"], 3)
                        if a["work_per_update"]
                        else None,
                    }
                )
        speedups[workload] = rows
        slopes[workload] = {}
        for label in (ivm, fo):
            s = series(cases, workload, label)
            slopes[workload][label] = {
                "work_per_update_vs_size": fit_slope(
                    [c["size"] for c in s], [c["work_per_update"] for c in s]
                ),
                "seconds_per_update_vs_size": fit_slope(
                    [c["size"] for c in s], [1 / c["updates_per_s"] for c in s]
                ),
                "sizes": [c["size"] for c in s],
            }
        slopes[workload]["speedup_vs_size"] = fit_slope(
            [r["size"] for r in rows], [r["speedup"] for r in rows]
        )
    return {"speedups": speedups, "slopes": slopes}


def _groups(cases: dict[str, dict[str, Any]]) -> dict[tuple[str, int, int], dict[str, dict[str, Any]]]:
    """Cases by (workload, |D|, batch size), then by strategy label: one row of the headline tables."""
    out: dict[tuple[str, int, int], dict[str, dict[str, Any]]] = {}
    for c in cases.values():
        wk = c["id"].split("|")[0]
        if wk not in HEADLINE:
            continue
        out.setdefault((wk, c["size"], c.get("batch_size", 1)), {})[c["label"]] = c
    return out


HEADLINE = ("W-mix", "W-all", "W-hub", "W-grow", "G-churn")
LABELS = (DEFAULT, eps_label("ivm-eps", HALF), "first-order", *BASELINES)


def whole_run_seconds(c: dict[str, Any], updates: int) -> float | None:
    """A case's whole run over its first ``updates`` updates: BUILD (untimed runs have none) plus the
    updates, the timed warm-up as measured and the rest at the case's per-update time (the strategies
    of one row ran different numbers of updates: each is charged its own rate for the same count).
    W-grow starts from empty and is timed whole, so its total time is already the whole run. G-churn
    has no warm-up apart: its events are charged at the median block rate, or at the total time when
    the strategy switched plans (a switch must not hide in one slow block)."""
    if c["id"].startswith("W-grow"):
        return updates * c["us_per_update"] / 1e6
    if c["workload"] == "G-churn":
        per = c["us_per_update_total_time"] if c.get("plan_switches") else c["us_per_update"]
        return c["build_seconds"] + updates * per / 1e6
    if "build" not in c or "seconds" not in c["build"]:
        return None
    warm = c["warmup"]
    rest = max(0, updates - warm["updates"])
    return c["build"]["seconds"] + warm["seconds"] + rest * c["us_per_update"] / 1e6


def _run_updates(c: dict[str, Any]) -> int:
    """The updates of the default's whole run: warm-up and timed ones (G-churn: every event offered)."""
    if c["workload"] == "G-churn":
        return c["updates_offered"]
    return c["updates"] + c.get("warmup_updates", 0)


def default_vs_best(cases: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per workload, size and batch size: the default strategy against the fastest other strategy that
    ran, per update (after auto's warm-up) and over the whole run (BUILD, warm-up and updates, all
    strategies charged for the same updates). The goal, within 1.5x, needs both."""
    rows = []
    for (wk, n, batch), by in sorted(_groups(cases).items()):
        d = by.get(DEFAULT)
        others = [c for label, c in by.items() if label != DEFAULT and c.get("status") == "ok"]
        if not d or d.get("status") != "ok" or not others:
            continue
        best = min(others, key=lambda c: c["us_per_update"])
        row = {
            "workload": wk,
            "size": n,
            "batch_size": batch,
            "default_us_per_update": d["us_per_update"],
            "best": best["label"],
            "best_us_per_update": best["us_per_update"],
            "ratio": round(d["us_per_update"] / best["us_per_update"], 3),
            "plan": d.get("plan"),
        }
        cpu = [c for c in others if c.get("us_per_update_cpu")]
        if d.get("us_per_update_cpu") and cpu:  # the same per-update figure by CPU time (cpu_figures)
            best_cpu = min(cpu, key=lambda c: c["us_per_update_cpu"])
            row["default_us_per_update_cpu"] = d["us_per_update_cpu"]
            row["best_cpu"] = best_cpu["label"]
            row["best_us_per_update_cpu"] = best_cpu["us_per_update_cpu"]
            row["ratio_cpu"] = round(d["us_per_update_cpu"] / best_cpu["us_per_update_cpu"], 3)
        updates = _run_updates(d)
        mine = whole_run_seconds(d, updates)
        theirs = [(t, c["label"]) for c in others if (t := whole_run_seconds(c, updates)) is not None]
        if mine is not None and theirs:
            best_whole, best_whole_label = min(theirs)
            row["whole_run_updates"] = updates
            row["default_whole_run_seconds"] = round(mine, 6)
            row["best_whole_run"] = best_whole_label
            row["best_whole_run_seconds"] = round(best_whole, 6)
            row["ratio_whole_run"] = round(mine / best_whole, 3)
        row["within_1_5x"] = row["ratio"] <= 1.5 and row.get("ratio_whole_run", 0) <= 1.5
        rows.append(row)
    return rows


def ivm_over_baselines(cases: dict[str, dict[str, Any]], workload: str) -> dict[str, Any]:
    """IVM^ε(½) against each baseline at the largest size where IVM^ε ran (the goal: >= 10x)."""
    groups = {key: by for key, by in _groups(cases).items() if key[0] == workload}
    ivm = eps_label("ivm-eps", HALF)
    sizes = sorted(n for (_, n, _), by in groups.items() if by.get(ivm, {}).get("status") == "ok")
    if not sizes:
        return {}
    n = sizes[-1]
    by = groups[(workload, n, 1)]
    out: dict[str, Any] = {"size": n, "ivm_us_per_update": by[ivm]["us_per_update"], "baselines": {}}
    for label in ("first-order", *BASELINES):
        c = by.get(label)
        if c is None:
            continue
        if c["status"] == "ok":
            out["baselines"][label] = {
                "us_per_update": c["us_per_update"],
                "speedup": round(c["us_per_update"] / by[ivm]["us_per_update"], 2),
            }
        else:
            out["baselines"][label] = {"skipped": c["reason"], "estimate": c.get("estimate")}
    measured = [v["speedup"] for v in out["baselines"].values() if "speedup" in v]
    out["min_measured_speedup"] = min(measured) if measured else None
    out["goal_10x_met_by_measured"] = bool(measured) and min(measured) >= 10
    return out
