"""The runtime benchmark's report: the machine, paired ratios with their confidence intervals, the plot
and the summary printed after a run.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import statistics
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lib import machine
from bench.lib.machine import dist_version
from bench.lib.plots import matplotlib, plt
from bench.runtime_measure import Measurement
from bench.runtime_workload import CASES, LABELS


def machine_info() -> dict[str, Any]:
    redis_server = None
    exe = shutil.which("redis-server")
    if exe:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            redis_server = subprocess.run(
                [exe, "--version"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
    return machine.machine_info(
        redis_py=dist_version("redis"),
        prometheus_client=dist_version("prometheus-client"),
        redis_server=redis_server,
    )


def summarize(measurements: list[Measurement]) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    for case in CASES:
        runs = [m for m in measurements if m.case == case]
        if not runs:
            continue
        rates = [m.rate for m in runs]
        entry: dict[str, Any] = {
            "label": LABELS[case],
            "records_per_s_median": round(statistics.median(rates), 1),
            "records_per_s_min": round(min(rates), 1),
            "records_per_s_max": round(max(rates), 1),
            "records_per_s_from_first_batch_median": round(
                statistics.median(m.records / m.seconds_from_first_batch for m in runs), 1
            ),
            "runs": [m.as_json() for m in runs],
        }
        if not case.startswith("raw"):
            for name in ("checkpoints", "checkpoint_mean_ms", "process_us_per_record", "process_share"):
                values = [m.extra[name] for m in runs if m.extra.get(name) is not None]
                entry[f"{name}_median"] = statistics.median(values) if values else None
        cases[case] = entry
    return cases


def paired_ratios(cases: dict[str, Any], a: str, b: str) -> list[float]:
    """Per repeat, case ``a``'s rate over case ``b``'s (runs of one repeat are seconds apart)."""
    if a not in cases or b not in cases:
        return []
    rate_b = {run["repeat"]: run["records_per_s"] for run in cases[b]["runs"]}
    runs_a = [run for run in cases[a]["runs"] if run["repeat"] in rate_b]
    return [run["records_per_s"] / rate_b[run["repeat"]] for run in runs_a]


def median_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """Distribution-free confidence interval for the median: order statistics from the binomial(n, 1/2).

    The interval [x_(k), x_(n-k+1)] covers the true median with probability 1 - 2 P(Bin(n, 1/2) < k);
    k is the largest index keeping that at least ``level``. None when n is too small for the level
    (n < 6 at 95%), since then even the full range covers the median with lower probability."""
    xs = sorted(values)
    n = len(xs)
    pmf = [math.comb(n, i) / 2**n for i in range(n + 1)]
    best = None
    for k in range(1, n // 2 + 1):
        if 1 - 2 * sum(pmf[:k]) >= level:
            best = k
    return None if best is None else (xs[best - 1], xs[n - best])


def ratios(cases: dict[str, Any]) -> dict[str, Any]:
    def r(a: str, b: str) -> float | None:
        if a not in cases or b not in cases:
            return None
        return round(cases[a]["records_per_s_median"] / cases[b]["records_per_s_median"], 4)

    def paired(a: str, b: str) -> float | None:
        """Median over repeats of the ratio of the two cases' rates within one repeat."""
        per_repeat = paired_ratios(cases, a, b)
        return round(statistics.median(per_repeat), 4) if per_repeat else None

    ci = median_ci(paired_ratios(cases, "runtime-noop", "raw"))
    return {
        "noop_vs_raw": r("runtime-noop", "raw"),
        "noop_vs_raw_paired": paired("runtime-noop", "raw"),
        "noop_vs_raw_paired_ci95": None if ci is None else [round(ci[0], 4), round(ci[1], 4)],
        "gc_default_noop_vs_raw_paired": paired("runtime-noop-gc-default", "raw"),
        "rocksdb_vs_noop": r("runtime-rocksdb", "runtime-noop"),
        "redis_vs_noop": r("runtime-redis", "runtime-noop"),
        "rocksdb_vs_raw": r("runtime-rocksdb", "raw"),
        "redis_vs_raw": r("runtime-redis", "raw"),
        "gc_default_noop_vs_raw": r("runtime-noop-gc-default", "raw"),
        "gc_policy_speedup": r("runtime-noop", "runtime-noop-gc-default"),
        "python_decoder_noop_vs_raw": r("runtime-noop-python", "raw"),
        "python_decoder_noop_vs_raw_paired": paired("runtime-noop-python", "raw"),
        "compiled_decoder_speedup": r("runtime-noop", "runtime-noop-python"),
        "compiled_decoder_speedup_paired": paired("runtime-noop", "runtime-noop-python"),
        "fastfetch_noop_vs_raw": r("runtime-noop-fastfetch", "raw-fastfetch"),
        "fastfetch_raw_vs_raw": r("raw-fastfetch", "raw"),
    }


def noop_note(rat: dict[str, Any]) -> str:
    """Three decimals, since the goal's line is at 0.5, and the paired median's interval."""
    if rat.get("noop_vs_raw") is None:
        return ""
    ci = rat.get("noop_vs_raw_paired_ci95")
    paired = f"\npaired {rat['noop_vs_raw_paired']:.3f}" if rat.get("noop_vs_raw_paired") is not None else ""
    return f"{rat['noop_vs_raw']:.3f}x raw{paired}" + (f"\n95% CI {ci[0]:.3f}-{ci[1]:.3f}" if ci else "")


def plot(report: dict[str, Any], path: Path) -> None:
    cases = report["cases"]
    names = [c for c in CASES if c in cases]
    medians = [cases[c]["records_per_s_median"] for c in names]
    lower = [cases[c]["records_per_s_median"] - cases[c]["records_per_s_min"] for c in names]
    upper = [cases[c]["records_per_s_max"] - cases[c]["records_per_s_median"] for c in names]
    rat = report["ratios"]

    def note(key: str, what: str) -> str:
        return f"{rat[key]:.2f}x {what}" if rat.get(key) is not None else ""

    notes = {
        "raw": "baseline",
        "runtime-noop": noop_note(rat),
        "runtime-rocksdb": note("rocksdb_vs_noop", "no-op"),
        "runtime-redis": note("redis_vs_noop", "no-op"),
        "runtime-noop-gc-default": note("gc_default_noop_vs_raw", "raw"),
        "runtime-noop-python": note("python_decoder_noop_vs_raw", "raw"),
        "raw-fastfetch": note("fastfetch_raw_vs_raw", "raw"),
        "runtime-noop-fastfetch": note("fastfetch_noop_vs_raw", "raw fast"),
    }
    colors = {
        "raw": "#7f7f7f",
        "runtime-noop": "#1f77b4",
        "runtime-rocksdb": "#2ca02c",
        "runtime-redis": "#d62728",
        "runtime-noop-gc-default": "#9ecae1",
        "runtime-noop-python": "#c6dbef",
        "raw-fastfetch": "#c7c7c7",
        "runtime-noop-fastfetch": "#aec7e8",
    }
    fig, ax = plt.subplots(figsize=(3 + 1.9 * len(names), 5.6))
    bars = ax.bar(
        [LABELS[c].replace(", ", ",\n").replace(" (", "\n(") for c in names],
        medians,
        yerr=[lower, upper],
        capsize=5,
        color=[colors[c] for c in names],
    )
    top = max(m + u for m, u in zip(medians, upper, strict=True))
    for bar, c, m, u in zip(bars, names, medians, upper, strict=True):
        ax.annotate(
            f"{m:,.0f}/s\n{notes[c]}",
            (bar.get_x() + bar.get_width() / 2, m + u),  # above the error bar
            xytext=(0, 6),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=9,
        )
    if "raw" in cases:
        goal = 0.5 * cases["raw"]["records_per_s_median"]
        ax.axhline(
            goal, color="black", linestyle="--", linewidth=1, label="goal: no-op runtime >= 50% of raw"
        )
    if "raw-fastfetch" in cases:
        goal_fast = 0.5 * cases["raw-fastfetch"]["records_per_s_median"]
        ax.axhline(goal_fast, color="#888888", linestyle=":", linewidth=1, label="50% of raw, fast fetch")
    if "raw" in cases or "raw-fastfetch" in cases:
        ax.legend(loc="upper left", fontsize=8)
    ax.set_ylim(0, top * 1.25)
    ax.set_ylabel("records/s (median; bars: min-max)")
    cfg, mach = report["config"], report["machine"]
    ax.set_title(
        f"ivmstream runtime vs raw confluent-kafka: {cfg['events']:,} events, "
        f"{cfg['partitions']} partitions, {cfg['keys']} keys, {cfg['repeats']} repeat(s)\n"
        f"{mach['cpu_count']} CPUs, Python {mach['python']}, confluent-kafka {mach['confluent_kafka']}, "
        f"librdkafka {mach['librdkafka']}, embedded broker",
        fontsize=9,
    )
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_summary(report: dict[str, Any]) -> None:
    cases, rat = report["cases"], report["ratios"]
    raw = cases.get("raw", {}).get("records_per_s_median")
    noop = cases.get("runtime-noop", {}).get("records_per_s_median")
    header = (
        f"{'case':<38} {'records/s':>11} {'min':>10} {'max':>10} {'vs raw':>7} {'vs no-op':>8} "
        f"{'ckpts':>6} {'ckpt ms':>8} {'us/rec in _process':>19}"
    )
    print(header)
    print("-" * len(header))
    for c in CASES:
        if c not in cases:
            continue
        e = cases[c]
        med = e["records_per_s_median"]
        vs_raw = f"{med / raw:.2f}" if raw else "-"
        vs_noop = f"{med / noop:.2f}" if noop and c.startswith("runtime") else "-"
        if c == "runtime-noop-fastfetch" and "raw-fastfetch" in cases:
            vs_raw = f"{med / cases['raw-fastfetch']['records_per_s_median']:.2f}*"  # vs the fast raw
        ck = e.get("checkpoints_median")
        ck_ms = e.get("checkpoint_mean_ms_median")
        us = e.get("process_us_per_record_median")
        print(
            f"{e['label']:<38} {med:>11,.0f} "
            f"{e['records_per_s_min']:>10,.0f} {e['records_per_s_max']:>10,.0f} "
            f"{vs_raw:>7} {vs_noop:>8} {'-' if ck is None else f'{ck:g}':>6} "
            f"{'-' if ck_ms is None else f'{ck_ms:.2f}':>8} {'-' if us is None else f'{us:.2f}':>19}"
        )
    if "runtime-noop-fastfetch" in cases and "raw-fastfetch" in cases:
        print("* compared with 'raw, fast fetch', not with 'raw'")
    if rat["noop_vs_raw"] is not None:
        verdict = "met" if rat["noop_vs_raw"] >= 0.5 else "NOT met"
        print(f"\nruntime(no-op)/raw = {rat['noop_vs_raw']:.3f} (ratio of medians; goal >= 0.5: {verdict})")
        ci = rat["noop_vs_raw_paired_ci95"]
        ci_text = f", 95% CI of the median {ci[0]:.3f}-{ci[1]:.3f}" if ci else ""
        print(f"runtime(no-op)/raw = {rat['noop_vs_raw_paired']:.3f} (median of per-repeat ratios{ci_text})")
    if rat["rocksdb_vs_noop"] is not None:
        print(f"rocksdb/no-op      = {rat['rocksdb_vs_noop']:.3f}")
    if rat["redis_vs_noop"] is not None:
        print(f"redis/no-op        = {rat['redis_vs_noop']:.3f}")
    if rat["gc_policy_speedup"] is not None:
        print(
            f"without the GC policy: runtime(no-op)/raw = {rat['gc_default_noop_vs_raw']:.3f} "
            f"(paired {rat['gc_default_noop_vs_raw_paired']:.3f}); "
            f"the policy makes the no-op worker {rat['gc_policy_speedup']:.2f}x as fast"
        )
    if rat["compiled_decoder_speedup"] is not None:
        print(
            f"with the pure-Python decoder: runtime(no-op)/raw = {rat['python_decoder_noop_vs_raw']:.3f} "
            f"(paired {rat['python_decoder_noop_vs_raw_paired']:.3f}); the compiled decoder makes the "
            f"no-op worker {rat['compiled_decoder_speedup']:.2f}x as fast "
            f"(paired {rat['compiled_decoder_speedup_paired']:.2f}x)"
        )
    if rat["fastfetch_noop_vs_raw"] is not None:
        print(
            f"diagnostic, fetch.queue.backoff.ms={report['config']['fastfetch_backoff_ms']} on both sides: "
            f"runtime(no-op)/raw = {rat['fastfetch_noop_vs_raw']:.3f}"
        )
