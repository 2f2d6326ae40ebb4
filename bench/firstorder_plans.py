"""The firstorder benchmark's plans point: the first-order engine with its delta plans generated as
Python (``services/firstorder/codegen.py``) against the same engine walking them with the expression
closures, on each query over the whole trace in the worker's batches (a result read after each batch).
The variants alternate within each repeat; the measure is the process's CPU time (single-threaded, so
steadier than wall time on a shared machine); both variants must leave byte-identical snapshots.

``bench/firstorder.py`` runs it and stores it in its report; ``--markdown FILE.json`` here prints its
table alone from such a report (docs/performance.md holds it)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.lib.machine import load_average  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from ivmstream.events import UpdateEvent  # noqa: E402

VARIANTS = ("generated", "closures")


def _run(options: dict[str, Any], variant: str, events: list[UpdateEvent], batch: int) -> tuple[float, bytes]:
    from ivmstream.services.firstorder.engine import FirstOrderEngine, query_of

    engine = FirstOrderEngine(query_of(options), generated=variant == "generated")
    start = time.process_time()
    for i in range(0, len(events), batch):
        engine.apply(events[i : i + batch])
        engine.result()
    return time.process_time() - start, engine.snapshot()


def plans_point(
    workloads: dict[str, tuple[dict[str, Any], list[UpdateEvent]]], repeats: int, batch: int
) -> dict[str, Any]:
    """Per query: CPU seconds per variant (every repeat), µs per update (medians) and the median of the
    per-repeat closures/generated ratios."""
    load_start = load_average()
    cases = []
    for query, (options, events) in workloads.items():
        seconds: dict[str, list[float]] = {v: [] for v in VARIANTS}
        snapshots = set()
        for rep in range(repeats):
            for variant in VARIANTS if rep % 2 == 0 else VARIANTS[::-1]:
                progress(f"{query} plans: {variant} (repeat {rep + 1}/{repeats})")
                cpu, snapshot = _run(options, variant, events, batch)
                seconds[variant].append(cpu)
                snapshots.add(snapshot)
        assert len(snapshots) == 1, f"{query}: generated and interpreted plans disagree"
        per_update = 1e6 / len(events)
        ratios = [c / g for g, c in zip(seconds["generated"], seconds["closures"], strict=True)]
        cases.append(
            {
                "query": query,
                "events": len(events),
                "cpu_seconds": seconds,
                "cpu_us_per_update": {v: statistics.median(t) * per_update for v, t in seconds.items()},
                "ratio": statistics.median(ratios),
            }
        )
    return {
        "batch_size": batch,
        "repeats": repeats,
        "cases": cases,
        "load_start": load_start,
        "load_end": load_average(),
    }


def markdown(point: dict[str, Any]) -> list[str]:
    lines = [
        "| query | update events | batch size | generated plans, CPU (µs per update) "
        "| closures, CPU (µs per update) | closures / generated |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in point["cases"]:
        us = c["cpu_us_per_update"]
        lines.append(
            f"| `{c['query']}` | {c['events']:,} | {point['batch_size']:,} | {us['generated']:,.1f} "
            f"| {us['closures']:,.1f} | {c['ratio']:.2f} |"
        )
    lines += [
        "",
        f"The first-order engine alone (the plans point of `bench/firstorder.py`), CPU time per update "
        "event (a result read after every batch), "
        f"median of {point['repeats']} repeats with the variants alternating; the ratio is the median of "
        "the per-repeat ratios; both variants left byte-identical snapshots; load average "
        f"{point['load_start'][0]} before, {point['load_end'][0]} after.",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--markdown", type=Path, required=True, metavar="FILE.json", help="print the plans table of a report"
    )
    args = parser.parse_args()
    print("\n".join(markdown(json.loads(args.markdown.read_text())["plans"])))


if __name__ == "__main__":
    main()
