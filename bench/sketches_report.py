"""The sketches benchmark's plot and the tables of docs/sketches/benchmark.md, printed from a stored
report alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.lib.plots import plt
from bench.sketches_report_paper import breakeven_sentence, paper_markdown


def plot(report: Mapping[str, Any], path: Path) -> None:
    if not all(k in report for k in ("groups", "breakeven", "frag")):
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for rec in report["groups"]["groups"]:
        ds = [r["delta"] for r in rec["runs"]]
        ax.plot(ds, [r["imp_s"] for r in rec["runs"]], "o-", label=f"IMP G={rec['groups']}")
        ax.plot(
            ds, [r["full_python_s"] for r in rec["runs"]], "x--", label=f"full (Python) G={rec['groups']}"
        )
        ax.plot(ds, [r["full_duckdb_s"] for r in rec["runs"]], "s:", label=f"full (DuckDB) G={rec['groups']}")
    ax.set(xscale="log", yscale="log", xlabel="Δ (tuples)", ylabel="seconds per batch", title="Q_groups")
    ax.legend(fontsize=6)
    ax = axes[1]
    be = report["breakeven"]
    fr = [r["fraction"] * 100 for r in be["runs"]]
    for key, label in (
        ("imp_s", "IMP"),
        ("full_python_s", "full (Python)"),
        ("full_duckdb_s", "full (DuckDB)"),
    ):
        ax.plot(fr, [r[key] for r in be["runs"]], "o-", label=label)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="Δ (% of table)",
        ylabel="seconds",
        title="break-even (Q_groups, G=1000)",
    )
    ax.legend(fontsize=7)
    ax = axes[2]
    for label in sorted({r["partition"] for r in report["frag"]}):
        rows = [r for r in report["frag"] if r["partition"] == label]
        ax.plot([r["fragments"] for r in rows], [r["imp_s"] for r in rows], "o-", label=f"IMP {label}")
        ax.plot(
            [r["fragments"] for r in rows], [r["full_python_s"] for r in rows], "x--", label=f"full {label}"
        )
    ax.set(xscale="log", yscale="log", xlabel="#fragments", ylabel="seconds (Δ=1000)", title="#frag")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _load(values: Sequence[float] | None) -> str:
    return "?" if values is None else " / ".join(f"{v:.1f}" for v in values)


def _ms(s: float) -> str:
    return f"{s * 1e3:.2f}"


def _row(*cells: Any) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _times(r: Mapping[str, Any]) -> list[str]:
    return [_ms(r["imp_s"]), _ms(r["full_python_s"]), _ms(r["full_duckdb_s"])]


def _speedups(r: Mapping[str, Any]) -> list[str]:
    return [f"{r['speedup_python']:.0f}", f"{r['speedup_duckdb']:.1f}"]


def markdown(report: Mapping[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"Run: `{report['command']}` on {m['cpu_model']} ({m['cpu_count']} cores, load average "
        f"{_load(report.get('loadavg_start'))} at the start, {_load(m['loadavg_1_5_15'])} at the end), "
        f"{report['seconds']:.0f} s in total.",
        "",
        "### Q_groups and Q_having (seconds per batch as ms, median)",
        "",
        _row("query", "G", "rows", "Δ", "IMP ms", "full Python ms", "full DuckDB ms", "x Python", "x DuckDB"),
        _row(*["---"] * 9),
    ]
    for rec in report["groups"]["groups"]:
        for r in rec["runs"]:
            lines.append(
                _row("Q_groups", rec["groups"], f"{rec['rows']:,}", r["delta"], *_times(r), *_speedups(r))
            )
    for rec in report["groups"]["having"]:
        for r in rec["runs"]:
            name = f"Q_having ({rec['aggregates']} agg)"
            lines.append(_row(name, rec["groups"], f"{rec['rows']:,}", r["delta"], *_times(r), *_speedups(r)))
    be = report["breakeven"]
    lines += [
        "",
        f"### Break-even (Q_groups, G = {be['groups']}, {be['rows']:,} rows)",
        "",
        _row("Δ", "% of table", "IMP s", "full Python s", "full DuckDB s"),
        _row(*["---"] * 5),
    ]
    for r in be["runs"]:
        cells = [f"{r[k]:.3f}" for k in ("imp_s", "full_python_s", "full_duckdb_s")]
        lines.append(_row(f"{r['delta']:,}", f"{r['fraction'] * 100:.1f}", *cells))
    for k in ("python", "duckdb"):
        cross = be[f"breakeven_{k}"]
        if cross:
            text = f"{cross:,.0f} tuples ({cross / be['rows'] * 100:.2f} % of the table)"
        else:
            text = be[f"breakeven_{k}_note"]
        lines.append(f"\nBreak-even against `full` ({k}): {text}.")
    lines.append("\n" + breakeven_sentence(be))
    lines += [
        "",
        "### #fragments (Δ = 1,000)",
        "",
        _row("partition", "#frag", "IMP ms", "full Python ms", "full DuckDB ms"),
        _row(*["---"] * 5),
    ]
    for r in report["frag"]:
        lines.append(_row(r["partition"], r["fragments"], *_times(r)))
    lines += [
        "",
        "### TPC-H (lineitem batches, partition l_orderkey, 1,000 ranges)",
        "",
        _row(
            "query",
            "SF",
            "safety",
            "Δ",
            "IMP ms",
            "full Python ms",
            "full DuckDB ms",
            "x Python",
            "x DuckDB",
            "IMP probe ms",
        ),
        _row(*["---"] * 10),
    ]
    for rec in report["tpch"]:
        for r in rec["runs"]:
            probe = _ms(r["imp_probe_s"]) if "imp_probe_s" in r else "—"
            lines.append(
                _row(rec["query"], rec["sf"], rec["safety"], r["delta"], *_times(r), *_speedups(r), probe)
            )
    lines += [
        "",
        "### Mixed workload (total seconds)",
        "",
        _row("ratio", "Δ", "rows", "ops", "imp", "full", "nosketch"),
        _row(*["---"] * 7),
    ]
    for r in report["mixed"]:
        totals = [f"{r[k]:.2f}" for k in ("imp_s", "full_s", "nosketch_s")]
        lines.append(_row(r["ratio"], r["delta"], f"{r['rows']:,}", r["operations"], *totals))
    w = report.get("worker")
    if w:
        lines += [
            "",
            f"Real worker (demo workload, embedded broker, RocksDB state): {w['events']} events in "
            f"{w['seconds']:.2f} s = {w['events_per_second']:,.0f} events/s, "
            f"{w['checkpoints']:.0f} checkpoints.",
        ]
    paper = paper_markdown(report)
    if paper:
        lines += ["", "## The paper's experiments", paper]
    return "\n".join(lines)
