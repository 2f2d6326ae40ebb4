"""What the line-3 comparisons against the authors' C++ (``native_rsjoin``, ``native_sjoin``) share: the
run over every (edges, k) case stored as one report, and its bar plot of tuples per CPU second."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.lib.machine import load_average, machine_info
from bench.lib.report import command_line, shown

NAMES = {"compiled": "ivmstream, compiled", "python": "ivmstream, Python", "cpp": "authors' C++"}


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
        "command": command_line(script, list(argv) if argv is not None else None),
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
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
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    plot(report, out.with_suffix(".png"))
    print(markdown(report))
    print(f"wrote {shown(out)}")


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
