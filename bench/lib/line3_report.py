"""What the line-3 comparisons against the authors' C++ (``native_rsjoin``, ``native_sjoin``) share: the
engine's timed pass over the stream, the variants' interleaved repeats and their ratios, the run over
every (edges, k) case stored as one report, and its bar plot of tuples per CPU second."""

from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.lib.machine import load_average, machine_info
from bench.lib.report import run_header, store_report

NAMES = {"compiled": "ivmstream, compiled", "python": "ivmstream, Python", "cpp": "authors' C++"}


def timed_apply(engine: Any, batches: Sequence[Sequence[Any]]) -> dict[str, float]:
    """``engine.apply`` over the batches: the thread's CPU seconds, the wall seconds, and the CPU seconds
    the garbage collector took in them (``gc.callbacks``)."""
    gc_cpu = [0.0, 0.0]  # CPU time in collections, the start of the current one

    def in_gc(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            gc_cpu[1] = time.thread_time()
        else:
            gc_cpu[0] += time.thread_time() - gc_cpu[1]

    gc.collect()
    gc.callbacks.append(in_gc)
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    for batch in batches:
        engine.apply(batch)
    cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
    gc.callbacks.remove(in_gc)
    return {"cpu_s": cpu, "wall_s": wall, "gc_cpu_s": gc_cpu[0]}


def sample_digest(engine: Any) -> tuple[int, str]:
    """The engine's sample size and a digest of the sample with its generator's state (equal digests:
    the same sample drawn the same way)."""
    sample = sorted(engine.sampler.rows())
    return len(sample), hashlib.sha256(repr((sample, engine.rng.getstate())).encode()).hexdigest()


def interleaved_runs(
    repeats: int, variants: Sequence[str], case: str, run: Callable[[str], dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every variant once per repeat, the order rotating from one repeat to the next; each run's result
    with its repeat, variant and the load average after it."""
    runs: list[dict[str, Any]] = []
    for rep in range(repeats):
        order = [*variants[rep % len(variants) :], *variants[: rep % len(variants)]]
        for variant in order:
            print(f"{case}: {variant} (repeat {rep + 1})", flush=True)
            got = run(variant)
            runs.append({"repeat": rep, "variant": variant, "load": load_average()[0], **got})
    return runs


def add_ratios(case: dict[str, Any], by: dict[str, list[dict[str, Any]]]) -> None:
    """The compiled runs' GC share, the compiled / Python speed-ups and, with the C++ runs, C++ over each
    of them: per repeat and their medians."""
    case["gc_share_compiled_median"] = statistics.median(r["gc_cpu_s"] / r["cpu_s"] for r in by["compiled"])
    pairs = zip(by["compiled"], by["python"], strict=True)
    case["kernel_speedups"] = [round(c["tuples_per_s"] / p["tuples_per_s"], 3) for c, p in pairs]
    case["kernel_speedup_median"] = statistics.median(case["kernel_speedups"])
    if "cpp" in by:
        for v in ("compiled", "python"):
            ratios = [c["tuples_per_s"] / e["tuples_per_s"] for c, e in zip(by["cpp"], by[v], strict=True)]
            case[f"cpp_over_{v}"] = [round(x, 3) for x in ratios]
            case[f"cpp_over_{v}_median"] = statistics.median(ratios)


def run_and_store(
    a: argparse.Namespace,
    argv: Sequence[str] | None,
    *,
    script: str,
    out: Path,
    config: dict[str, Any],
    measure_case: Callable[[argparse.Namespace, int, int, Path], dict[str, Any]],
    markdown: Callable[[dict[str, Any]], str],
    plot: Callable[[dict[str, Any], Path], None],
) -> None:
    """Every case measured in a scratch directory, the report written as JSON + PNG and printed."""
    started = time.time()
    load_start = load_average()
    with tempfile.TemporaryDirectory(prefix=f"ivmstream-{Path(script).stem}-") as tmp:
        cases = [measure_case(a, edges, k, Path(tmp)) for edges in a.edges for k in a.k]
    report = {
        **run_header(script, list(argv) if argv is not None else None, started),
        "config": {
            "edges": a.edges,
            "k": a.k,
            "repeats": a.repeats,
            **config,
            "quick": a.quick,
            "cpp": a.cpp is not None,
        },
        "load_start": load_start,
        "load_end": load_average(),
        "machine": machine_info(),
        "cases": cases,
    }
    store_report(report, out, plot, markdown)


def plot_cases(
    report: dict[str, Any], path: Path, *, variants: Sequence[str], title: str, width: float
) -> None:
    """One group of bars per case, one bar per variant the report holds, on a log scale."""
    from bench.lib.plots import plt

    cases = report["cases"]
    labels = [f"{c['edges'] // 1000}K edges\nk={c['k']:,}" for c in cases]
    shown_variants = [v for v in variants if f"{v}_tuples_per_s_median" in cases[0]]
    fig, ax = plt.subplots(figsize=(width, 3.8))
    bar = 0.8 / len(shown_variants)
    for j, v in enumerate(shown_variants):
        xs = [i + (j - (len(shown_variants) - 1) / 2) * bar for i in range(len(cases))]
        ax.bar(xs, [c[f"{v}_tuples_per_s_median"] for c in cases], bar, label=NAMES[v])
    ax.set_xticks(range(len(cases)), labels)
    ax.set_ylabel("tuples per second of CPU time")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
