"""The vwap benchmark's plot and the tables of docs/vwap/benchmark.md, printed from a stored report alone."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lib.report import shown
from bench.vwap_engines import NONE, ORDER, TIMES


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
    """The tables of docs/vwap/benchmark.md, from a stored result file only."""
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
