"""bench/memory.py's plot, docs tables and merge of separate runs: what a stored report shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

NONE = "-"
GOAL = 2.0  # bytes per retained tuple at most this many times the dict-of-tuples floor

# Why a service's state cannot come within GOAL x the floor (the floor holds each tuple once, in one
# tuple of its values): printed under the table for each service measured above it.
ABOVE_GOAL = {
    "reservoir": "each edge is held by both aliases of the self-join (with its arrival number), by both "
    "nodes of the join index and in the directed structures' counts and positions: five places where the "
    "floor has one, each a dict slot and a reference at least",
}


def _fmt(v: Any) -> str:
    return NONE if v is None else f"{v:,.0f}"


def _ratio(value: Any, floor: Any) -> float | None:
    return value / floor if floor and value is not None else None


def _sizes(entry: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return sorted(entry["runs"].items(), key=lambda kv: int(kv[0]))


def log_share(log: dict[str, Any], nolog: dict[str, Any]) -> dict[str, Any]:
    """What n pending changes cost beyond the same state without a log: per event and per entry."""
    if "error" in log or "error" in nolog:
        return {}
    extra = log["pending"] - nolog["state"]
    return {
        "log_bytes": extra,
        "log_per_event": round(extra / max(1, log["retained"]), 1),
        "log_per_entry": round(extra / max(1, log["entries"]), 1),
        "entries_per_event": round(log["entries"] / max(1, log["retained"]), 2),
    }


def markdown(report: dict[str, Any]) -> str:
    """The docs tables: per service and size, bytes of RSS per retained tuple through replay and the
    worker beside the floor, whether that is within GOAL x the floor (or why not), the sizes not run
    and why, and the change log per pending entry."""
    lines = [
        "| service (workload) | tuples | floor (dict of tuples) | replay peak | replay steady "
        "| worker peak | worker between checkpoints | worker after a checkpoint (store excluded) "
        "| replay steady / floor | worker after (store excluded) / floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    above: dict[str, float] = {}
    for service, entry in report["services"].items():
        for n, row in _sizes(entry):
            floor = row.get("floor", {}).get("steady_per_tuple")
            replay, worker = row.get("replay", {}), row.get("worker", {})
            ratios = [
                _ratio(replay.get("steady_per_tuple"), floor),
                _ratio(worker.get("engine_after_per_tuple"), floor),
            ]
            if int(n) >= 100_000:  # below, fixed costs (interpreter arenas, RocksDB) weigh on per tuple
                worst = max((r for r in ratios if r is not None), default=0.0)
                if worst > GOAL:
                    above[service] = max(above.get(service, 0.0), worst)
            cells = [
                f"{service} ({entry['workload']})",
                f"{int(n):,}",
                _fmt(floor),
                _fmt(replay.get("peak_per_tuple")),
                _fmt(replay.get("steady_per_tuple")),
                _fmt(worker.get("peak_per_tuple")),
                _fmt(worker.get("between_per_tuple")),
                f"{_fmt(worker.get('after_per_tuple'))} ({_fmt(worker.get('engine_after_per_tuple'))})",
                *(NONE if r is None else f"{r:.1f}" for r in ratios),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Above {GOAL:g}x the floor at 100,000 tuples or more:", ""]
    if not above:
        lines.append("- none")
    for service, worst in above.items():
        why = ABOVE_GOAL.get(service, "NO REASON RECORDED (bench/lib/memory_report.py ABOVE_GOAL)")
        lines.append(f"- {service}, up to {worst:.1f}x: {why}.")
    skipped = [(s, n, why) for s, e in report["services"].items() for n, why in e.get("skipped", {}).items()]
    lines += ["", "Sizes not run:", ""]
    lines += [f"- {s}, {int(n):,} tuples: {why}." for s, n, why in skipped] or ["- none"]
    failed = [
        (service, n, kind, r["error"])
        for service, entry in report["services"].items()
        for n, row in _sizes(entry)
        for kind, r in row.items()
        if isinstance(r, dict) and "error" in r
    ]
    lines += ["", "Children that gave no figure:", ""]
    lines += [f"- {s}, {int(n):,} tuples, {kind}: {why}." for s, n, kind, why in failed] or ["- none"]
    lines += [
        "",
        "| service | tuples checkpointed, then as many pending | entries per event "
        "| log per pending event | log per pending entry |",
        "|---|---:|---:|---:|---:|",
    ]
    for service, entry in report["services"].items():
        for n, row in _sizes(entry):
            log = row.get("log")
            if not log or "error" in log:
                continue
            cells = [
                service,
                f"{int(n):,}",
                str(log.get("entries_per_event", NONE)),
                _fmt(log.get("log_per_event")),
                _fmt(log.get("log_per_entry")),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    from lib.plots import plt

    services = list(report["services"])
    fig, axes = plt.subplots(1, len(services), figsize=(3.2 * len(services), 3.4), squeeze=False)
    for ax, service in zip(axes[0], services, strict=True):
        runs = report["services"][service]["runs"]
        ns = sorted(int(n) for n in runs)
        for label, kind, field in (
            ("replay peak", "replay", "peak_per_tuple"),
            ("replay steady", "replay", "steady_per_tuple"),
            ("worker peak", "worker", "peak_per_tuple"),
            ("worker between", "worker", "between_per_tuple"),
            ("worker after", "worker", "after_per_tuple"),
            ("worker after, store excluded", "worker", "engine_after_per_tuple"),
            ("dict of tuples (floor)", "floor", "steady_per_tuple"),
        ):
            pts = [(n, runs[str(n)].get(kind, {}).get(field)) for n in ns]
            pts = [(n, v) for n, v in pts if v is not None]
            if pts:
                ax.plot(
                    *zip(*pts, strict=True),
                    marker="o",
                    label=label,
                    linestyle="--" if kind == "floor" else "-",
                )
        ax.set_xscale("log")
        ax.set_title(service, fontsize=9)
        ax.set_xlabel("retained tuples")
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel("RSS bytes per retained tuple")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def merge(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One report of several runs (sizes run on their own): each run's command and machine kept, the
    services' runs combined (a later report's size replaces an earlier one's)."""
    out: dict[str, Any] = {"runs": [], "sizes": [], "services": {}}
    for rep in reports:
        runs = rep.get("runs") or [{"command": rep.get("command"), "machine": rep.get("machine")}]
        out["runs"].extend(runs)
        earlier = [
            *rep.get("earlier_merges", []),
            *([rep["merge_command"]] if "merge_command" in rep else []),
        ]
        if earlier:  # a stored merge merged again: how its parts were put together stays on record
            out.setdefault("earlier_merges", []).extend(earlier)
        out["sizes"] = sorted(set(out["sizes"]) | set(rep.get("sizes", [])))
        for service, entry in rep["services"].items():
            mine = out["services"].setdefault(service, {"workload": entry["workload"], "runs": {}})
            for n, row in entry["runs"].items():
                kept = mine["runs"].setdefault(n, {})
                for kind, figures in row.items():  # a figure replaces an earlier one, never by a failure
                    if "error" not in figures or "error" in kept.get(kind, {"error": ""}):
                        kept[kind] = figures
                if "log" in kept and "nolog" in kept:
                    kept["log"].update(log_share(kept["log"], kept["nolog"]))
            skipped = {**mine.get("skipped", {}), **entry.get("skipped", {})}
            skipped = {n: why for n, why in skipped.items() if n not in mine["runs"]}
            if skipped:
                mine["skipped"] = skipped
            else:
                mine.pop("skipped", None)
    return out
