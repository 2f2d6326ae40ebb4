"""The F-IVM benchmark's summary: the ratios and goals of one run, computed from its cases."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bench.fivm_experiments import E8_GOAL_SCALE, FIVM_PER_TUPLE


def _rate(runs: Mapping[str, Any], label: str) -> float | None:
    rec = runs.get(label)
    return rec["tuples_per_second"] if rec else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    s: dict[str, Any] = {}
    e1 = report.get("e1") or []
    if e1:
        s["e1_fivm_over_1ivm"] = {
            r["scale"]: _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "1-ivm")) for r in e1
        }
        s["e1_fivm_over_dbt"] = {
            r["scale"]: _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "dbt")) for r in e1
        }
        s["e1_fivm_over_fre"] = {
            r["scale"]: _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "f-re")) for r in e1
        }
        s["e1_fivm_over_dbtre"] = {
            r["scale"]: _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "dbt-re")) for r in e1
        }
        ratios = [s["e1_fivm_over_1ivm"][r["scale"]] for r in e1]
        last = ratios[-1]
        s["goal_e1"] = {
            "text": f"F-IVM/1-IVM >= 3x at s = {e1[-1]['scale']} and growing with s (as generated)",
            "value": last,
            "growing": bool(last and ratios[0] and last > ratios[0]),
            "monotonic": all(a and b and b >= a for a, b in itertools.pairwise(ratios)),
            "met": bool(last and ratios[0] and last >= 3 and last > ratios[0]),
        }
    e1s = report.get("e1_shuffled") or []
    if e1s:
        s["e1_shuffled_fivm_over_1ivm"] = {
            r["scale"]: _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "1-ivm")) for r in e1s
        }
        s["e1_shuffled_fivm_over_dbt"] = {
            r["scale"]: _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "dbt")) for r in e1s
        }
        ratios = [s["e1_shuffled_fivm_over_1ivm"][r["scale"]] for r in e1s]
        s["goal_e1_shuffled"] = {
            "text": f"the same on the shuffled stream, s = {e1s[-1]['scale']}",
            "value": ratios[-1],
            "growing": bool(ratios[-1] and ratios[0] and ratios[-1] > ratios[0]),
            "monotonic": all(a and b and b >= a for a, b in itertools.pairwise(ratios)),
            "met": bool(ratios[-1] and ratios[0] and ratios[-1] >= 3 and ratios[-1] > ratios[0]),
        }
    e3 = report.get("e3") or {}
    if e3.get("rows"):
        rows = e3["rows"]
        s["e3_row_fivm_over_1ivm"] = {
            r["n"]: r["1-ivm"]["min_seconds"] / r["fivm"]["min_seconds"] for r in rows
        }
        s["e3_row_fivm_over_reeval"] = {
            r["n"]: r["reeval"]["min_seconds"] / r["fivm"]["min_seconds"] for r in rows
        }
        biggest = rows[-1]["n"]
        ranks = e3.get("ranks") or []
        fit = _linear_fit([r["rank"] for r in ranks], [r["fivm"]["min_seconds"] for r in ranks])
        s["e3_rank_fit"] = fit
        crossing = [r["rank"] for r in ranks if r["fivm"]["min_seconds"] >= r["1-ivm"]["min_seconds"]]
        s["e3_rank_fivm_slower_than_1ivm_from"] = crossing[0] if crossing else None
        s["goal_e3"] = {
            "text": f"F-IVM >= 10x over 1-IVM at n = {biggest} for row updates; F-IVM time linear in r",
            "value": s["e3_row_fivm_over_1ivm"][biggest],
            "rank_fit_r2": fit["r2"] if fit else None,
            "met": s["e3_row_fivm_over_1ivm"][biggest] >= 10 and bool(fit and fit["r2"] >= 0.95),
        }
    e4 = report.get("e4") or []
    if e4:
        s["e4_fivm_over_dbt"] = {
            f"s={r['scale']},m={r['m']}": _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "dbt"))
            for r in e4
            if "dbt" in r["runs"]
        }
        s["e4_fivm_over_sqlopt"] = {
            f"s={r['scale']},m={r['m']}": _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "sql-opt"))
            for r in e4
        }
        s["e4_fivm_over_dbtring"] = {
            f"s={r['scale']},m={r['m']}": _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], "dbt-ring"))
            for r in e4
        }
        s["e4_columns_over_per_tuple"] = {
            f"s={r['scale']},m={r['m']}": _ratio(_rate(r["runs"], "fivm"), _rate(r["runs"], FIVM_PER_TUPLE))
            for r in e4
            if FIVM_PER_TUPLE in r["runs"]
        }
        s["e4_per_tuple_over_dbt"] = {
            f"s={r['scale']},m={r['m']}": _ratio(_rate(r["runs"], FIVM_PER_TUPLE), _rate(r["runs"], "dbt"))
            for r in e4
            if FIVM_PER_TUPLE in r["runs"] and "dbt" in r["runs"]
        }
        at10 = [v for k, v in s["e4_fivm_over_dbt"].items() if k.endswith("m=10") and v]
        s["goal_e4"] = {
            "text": "cofactor F-IVM >= 10x over scalar-payload DBT at m = 10 (every scale)",
            "value": min(at10) if at10 else None,
            "met": bool(at10) and min(at10) >= 10,
        }
    e6 = report.get("e6") or []
    if e6:
        s["e6_rates"] = {
            r["edges_per_relation"]: {label: rec["tuples_per_second"] for label, rec in r["runs"].items()}
            for r in e6
        }
        if all("one" in r for r in e6):
            last = e6[-1]
            one, runs = last["one"], last["runs"]
            per_update = _ratio(_rate(one, "fivm-one"), _rate(one, "1-ivm"))
            memory = one["fivm-one"]["stored_bytes"] / one["1-ivm"]["stored_bytes"]
            s["goal_e6"] = {
                "text": f"F-IVM-ONE >= 10x 1-IVM per update to R at N = {last['edges_per_relation']:,}, "
                "its memory against F-IVM's and 1-IVM's",
                "value": per_update,
                "over_1ivm_ring": _ratio(_rate(one, "fivm-one"), _rate(one, "1-ivm-ring")),
                "over_round_robin_1ivm": _ratio(_rate(one, "fivm-one"), _rate(runs, "1-ivm")),
                "memory_over_1ivm": memory,
                "memory_over_fivm": one["fivm-one"]["stored_bytes"] / runs["fivm"]["stored_bytes"],
                "met": bool(per_update and per_update >= 10),
            }
    growth = report.get("e1_growth") or []
    if growth:
        for key, order in (("runs", "as generated"), ("shuffled", "rows shuffled")):
            if not all(key in r for r in growth):
                continue
            ratios = [_ratio(_rate(r[key], "fivm"), _rate(r[key], "1-ivm")) for r in growth]
            s["goal_e1_growth" + ("" if key == "runs" else "_shuffled")] = {
                "text": f"F-IVM/1-IVM ({order}) grows with s and reaches >= 8x at s = {growth[-1]['scale']}",
                "value": ratios[-1],
                "by_scale": {str(r["scale"]): v for r, v in zip(growth, ratios, strict=True)},
                "first": ratios[0],
                "monotonic": all(a and b and b >= a for a, b in itertools.pairwise(ratios)),
                # grown: at least a tenth above the smallest scale's ratio, beyond run-to-run noise
                "met": bool(ratios[-1] and ratios[0] and ratios[-1] >= 8 and ratios[-1] > 1.1 * ratios[0]),
            }
    e8 = report.get("e8") or []
    if e8:

        def speedups(runs: Mapping[str, Any]) -> dict[str, float | None]:
            fact = _rate(runs, "fact-payloads")
            return {k: _ratio(fact, _rate(runs, k)) for k in ("list-payloads", "list-keys")}

        # The goal is stated at s = 4; larger scales show where the gap keeps growing to.
        at = next((r for r in e8 if r["scale"] == E8_GOAL_SCALE), e8[-1])
        last = at["runs"]
        speed = speedups(last)
        size = {
            k: last[k]["stored_bytes"] / last["fact-payloads"]["stored_bytes"]
            for k in ("list-payloads", "list-keys")
        }
        s["e8_speedup_by_scale"] = {str(r["scale"]): speedups(r["runs"]) for r in e8}
        s["e8_first_scale_10x_faster"] = next(
            (r["scale"] for r in e8 if all(v is not None and v >= 10 for v in speedups(r["runs"]).values())),
            None,
        )
        s["e8_speedup_at_goal_scale"] = speed
        s["e8_size_ratio_at_goal_scale"] = size
        s["goal_e8"] = {
            "text": f"factorized >= 10x faster and smaller than listing at s = {at['scale']}",
            "speed": speed,
            "size": size,
            "faster_met": all(v is not None and v >= 10 for v in speed.values()),
            "smaller_met": all(v >= 10 for v in size.values()),
        }
        s["goal_e8"]["met"] = s["goal_e8"]["faster_met"] and s["goal_e8"]["smaller_met"]
    if report.get("service"):
        s["service_worker_share_of_engine"] = report["service"]["worker_share_of_engine"]
    return s


def _linear_fit(xs: Sequence[float], ys: Sequence[float]) -> dict[str, float] | None:
    if len(xs) < 3:
        return None
    slope, intercept = (float(v) for v in np.polyfit(xs, ys, 1))
    pred = [intercept + slope * x for x in xs]
    mean = sum(ys) / len(ys)
    ss_tot = sum((y - mean) ** 2 for y in ys)
    ss_res = sum((y - p) ** 2 for y, p in zip(ys, pred, strict=True))
    return {
        "slope_seconds_per_rank": float(slope),
        "intercept_seconds": float(intercept),
        "r2": float(1 - ss_res / ss_tot),
    }
