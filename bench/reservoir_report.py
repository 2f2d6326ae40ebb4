"""The reservoir benchmark's summary, plot and the tables of its docs section, printed from a stored
report alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lib.plots import plt
from bench.reservoir_paper_report import (
    graphs_tables,
    optimisations_table,
    paper_panels,
    paper_rows,
    queries_tables,
    scale_rows,
    scale_table,
    workers_table,
)


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "e1" in report:
        for name, rows in report["e1"]["queries"].items():
            finished = [r for r in rows if "sjoin" in r and not r["sjoin"]["timed_out"]]
            if finished:
                last = finished[-1]
                out[f"{name}_largest_sjoin_prefix"] = last["edges"]
                out[f"{name}_rsjoin_speedup_at_it"] = last["sjoin"]["seconds"] / last["rsjoin"]["seconds"]
                out[f"{name}_speedups"] = [r["sjoin"]["seconds"] / r["rsjoin"]["seconds"] for r in finished]
        if "line-3_rsjoin_speedup_at_it" in out:
            sp = out["line-3_speedups"]
            out["goal_line3_speedup_at_least_5x"] = out["line-3_rsjoin_speedup_at_it"] >= 5
            out["goal_line3_speedup_growing"] = all(b >= a for a, b in itertools.pairwise(sp))
    if "e2" in report:
        out["line4_mean_update_ratio"] = report["e2"]["mean_ratio_sjoin_over_rsjoin"]
        out["goal_line4_mean_ratio_at_least_20x"] = out["line4_mean_update_ratio"] >= 20
    if "e4" in report:
        at1 = [r for r in report["e4"]["rows"] if r["density"] == 1.0]
        if at1:
            out["rswp_evaluation_ratio_at_density_1"] = at1[0]["ratio"]
            out["goal_rswp_at_least_10x_fewer"] = at1[0]["ratio"] >= 10
    return out


def plot(report: dict[str, Any], path: Path) -> None:
    fig, axes = plt.subplots(3, 2, figsize=(12, 13))
    ax = axes[0][0]
    for name, rows in report.get("e1", {}).get("queries", {}).items():
        for strategy, style in (("rsjoin", "-o"), ("sjoin", "--s")):
            pts = [
                (r["edges"], r[strategy]["seconds"])
                for r in rows
                if strategy in r and not r[strategy]["timed_out"]
            ]
            if pts:
                ax.plot(*zip(*pts, strict=True), style, label=f"{name} {strategy}")
    ax.set(xscale="log", yscale="log", xlabel="edges N", ylabel="seconds", title="E1 time vs N")
    ax.legend(fontsize=8)
    ax = axes[0][1]
    e2_ = report.get("e2", {})
    for strategy in ("rsjoin", "sjoin"):
        if strategy in e2_:
            h = e2_[strategy]["histogram"]
            ax.step(
                [float(x) for x in h],
                list(h.values()),
                where="post",
                label=f"{strategy} mean {e2_[strategy]['mean_us']:.0f} µs",
            )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="µs per tuple",
        ylabel="tuples",
        title=f"E2 {e2_.get('query', '')} update time",
    )
    ax.legend(fontsize=8)
    ax = axes[1][0]
    rows = report.get("e3", {}).get("rows", [])
    if rows:
        ax.plot([r["k"] for r in rows], [r["seconds"] for r in rows], "-o", label="seconds")
        ax2 = ax.twinx()
        ax2.plot(
            [r["k"] for r in rows],
            [r["stops_real"] + r["stops_dummy"] for r in rows],
            "--",
            color="gray",
            label="stops",
        )
        ax2.set(yscale="log", ylabel="stops")
    ax.set(
        xscale="log",
        xlabel="k",
        ylabel="seconds",
        title=f"E3 line-3, {report.get('e3', {}).get('edges', 0):,} edges",
    )
    ax = axes[1][1]
    rows = report.get("e4", {}).get("rows", [])
    if rows:
        ax.plot([r["density"] for r in rows], [r["rs_evals"] for r in rows], "-o", label="RS")
        ax.plot([r["density"] for r in rows], [r["rswp_evals"] for r in rows], "-s", label="RSWP")
        ax.plot(
            [r["density"] for r in rows],
            [r["expected_rswp_evals"] for r in rows],
            ":",
            label="(k/φ)(1+ln(φN/k))",
        )
    ax.set(yscale="log", xlabel="density φ", ylabel="θ evaluations", title="E4 RSWP vs RS")
    ax.legend(fontsize=8)
    paper_panels(report, axes[2][0], axes[2][1])
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def table(title: str, names: Sequence[str], rows: Sequence[Sequence[str]], left: bool = False) -> list[str]:
    """A titled markdown table of right-aligned numbers (the first column left-aligned if ``left``)."""
    align = ["---" if left and i == 0 else "---:" for i in range(len(names))]
    return [
        title,
        "",
        "| " + " | ".join(names) + " |",
        "|" + "|".join(align) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
    ]


def _memory(r: dict[str, Any]) -> list[str]:
    return [f"{r['held_bytes'] / 1e6:.1f}", f"{r['bytes_per_edge']:.0f}"]


def _e1_row(name: str, r: dict[str, Any]) -> list[str]:
    rs, sj = r["rsjoin"], r.get("sjoin")
    if sj is None:
        sj_s, ratio, sj_p = "not run", "", ""
    elif sj["timed_out"]:
        sj_s = f"> {sj['seconds']:.1f} ({sj['processed']:,} of {sj['events']:,})"
        ratio, sj_p = "", f"{sj['propagations']:,}"
    else:
        sj_s, ratio = f"{sj['seconds']:.2f}", f"{sj['seconds'] / rs['seconds']:.1f}x"
        sj_p = f"{sj['propagations']:,}"
    return [
        name,
        f"{r['edges']:,}",
        f"{r['join_size']:.3g}",
        f"{rs['seconds']:.2f}",
        sj_s,
        ratio,
        f"{rs['propagations']:,}",
        sj_p,
        f"{rs['us_per_event']:.0f}",
    ]


_UNIT = {"copies": "a tuple is one alias relation's edge", "fanout": "a tuple is one edge into every alias"}


def markdown(report: dict[str, Any]) -> str:
    """The tables of docs/reservoir/benchmark.md, printed from a stored report."""
    lines: list[str] = []
    m = report["machine"]
    lines.append(
        f"Machine: {m['cpu_model']} ({m['cpu_affinity']} cores usable), Python {m['python']}, "
        f"load {report.get('load_at_start', '?')} at the start, {m['loadavg_1_5_15']} at the end."
    )
    lines.append(f"The whole run took {report['seconds']:.0f} s of wall time.")
    if "command" in report:
        lines.append(f"Command: `{report['command']}`.")
    for r in report.get("reruns", []):
        lines.append(
            f"Re-run in place: {', '.join(r['experiments'])}, `{r['command']}`, {r['seconds']:.0f} s, "
            f"load {r['load_at_start']} at the start, {r['load_at_end']} at the end."
        )
    lines.append("")
    if "queries" in report:
        lines += table(
            "### Scale: the paper's and this run's",
            ["experiment", "the paper", "this run"],
            scale_rows(report),
            left=True,
        )
    e1_ = report.get("e1")
    if e1_:
        lines += table(
            f"### E1: time vs N (k = {e1_['k']:,}, SJoin budget {e1_['budget_s']:g} s per prefix)",
            [
                "query",
                "edges N",
                "\\|Q\\|",
                "RSJoin s",
                "SJoin s",
                "SJoin/RSJoin",
                "RSJoin propagations",
                "SJoin propagations",
                "RSJoin µs/event",
            ],
            [_e1_row(name, r) for name, rows in e1_["queries"].items() for r in rows],
            left=True,
        )
    e2_ = report.get("e2")
    if e2_:
        e2_rows = []
        for s in ("rsjoin", "sjoin"):
            r = e2_[s]
            timed = f"{r['processed']:,}" + (" (budget)" if r["timed_out"] else "")
            e2_rows.append(
                [
                    s,
                    timed,
                    *(f"{r[c]:.1f}" for c in ("mean_us", "p50_us", "p90_us", "p99_us")),
                    f"{r['max_us']:.0f}",
                    f"{r['propagations']:,}",
                ]
            )
        lines += table(
            f"### E2: per-tuple update time, {e2_['query']}, {e2_['edges']:,} edges "
            f"({_UNIT[e2_.get('unit', 'fanout')]}), sampling off",
            ["index", "tuples timed", "mean µs", "p50", "p90", "p99", "max", "propagations"],
            e2_rows,
            left=True,
        )
        lines += [f"Mean ratio SJoin/RSJoin: {e2_['mean_ratio_sjoin_over_rsjoin']:.1f}x.", ""]
    e3_ = report.get("e3")
    if e3_:
        lines += table(
            f"### E3: k sweep, line-3, {e3_['edges']:,} edges (RSJoin)",
            ["k", "seconds", "real stops", "dummy stops", "retrieves", "sample"],
            [
                [f"{r['k']:,}", f"{r['seconds']:.2f}"]
                + [f"{r[c]:,}" for c in ("stops_real", "stops_dummy", "retrieves", "sample_size")]
                for r in e3_["rows"]
            ],
        )
    e4_ = report.get("e4")
    if e4_:
        lines += table(
            f"### E4: RSWP vs RS, {e4_['items']:,} strings of {e4_.get('length', 12):,} characters, θ: edit "
            f"distance <= {e4_.get('threshold', 3)}, k = {e4_['k']:,}",
            [
                "density",
                "real share",
                "RS θ evaluations",
                "RSWP θ evaluations",
                "ratio",
                "(k/φ)(1+ln(φN/k))",
                "RS s",
                "RSWP s",
            ],
            [
                [
                    f"{r['density']:.1f}",
                    f"{r.get('real_density', r['density']):.3f}",
                    f"{r['rs_evals']:,}",
                    f"{r['rswp_evals']:,}",
                    f"{r['ratio']:.1f}x",
                    f"{r['expected_rswp_evals']:,.0f}",
                    f"{r['rs_seconds']:.2f}",
                    f"{r['rswp_seconds']:.2f}",
                ]
                for r in e4_["rows"]
            ],
        )
        prog = e4_.get("progress_at_density_0.1")
        if prog:
            lines += table(
                "### E4 along the stream at density 0.1 (Figure 12)",
                ["items", "RS θ evaluations", "RSWP θ evaluations", "RS s", "RSWP s"],
                [
                    [
                        f"{p['items']:,}",
                        f"{p['rs_evals']:,}",
                        f"{p['rswp_evals']:,}",
                        f"{p['rs_seconds']:.2f}",
                        f"{p['rswp_seconds']:.2f}",
                    ]
                    for p in prog
                ],
            )
    e6_ = report.get("e6")
    if e6_:
        lines += table(
            "### E6: memory (tracemalloc, line-3, never checkpointed: no change log)",
            ["edges", "RSJoin MB held", "RSJoin bytes/edge", "SJoin MB held", "SJoin bytes/edge"],
            [
                [f"{r['edges']:,}"] + [f for m in ("rsjoin", "sjoin") for f in _memory(r[m])]
                for r in e6_["rows"]
            ],
        )
    if e6_ and "by_function" in e6_["rows"][-1]["rsjoin"]:
        last = e6_["rows"][-1]
        sites = list(dict.fromkeys([*last["rsjoin"]["by_function"], *last["sjoin"]["by_function"]]))
        lines += table(
            f"### E6: where line-3's memory is, {last['edges']:,} edges (MB held, by allocating function)",
            ["function", "RSJoin", "SJoin"],
            [
                [f"`{x}`"]
                + [
                    f"{last[m]['by_function'][x] / 1e6:.2f}" if x in last[m]["by_function"] else ""
                    for m in ("rsjoin", "sjoin")
                ]
                for x in sites
            ],
            left=True,
        )
    if e6_ and e6_.get("q10_rows"):
        lines += table(
            "### E6: memory (tracemalloc, Q10)",
            ["scale", "rows", "RSJoin-opt MB held", "bytes/row", "SJoin-opt MB held", "bytes/row"],
            [
                [f"{r['scale']:g}", f"{r['rsjoin-opt']['tuples']:,}"]
                + [f for m in ("rsjoin-opt", "sjoin-opt") for f in _memory(r[m])]
                for r in e6_["q10_rows"]
            ],
        )
    if "queries" in report:
        lines += queries_tables(report["queries"], table)
    if "optimisations" in report:
        lines += optimisations_table(report["optimisations"], table)
    if "scale" in report:
        lines += scale_table(report["scale"], table)
    if "graphs" in report:
        lines += graphs_tables(report["graphs"], table)
    if "workers" in report:
        lines += workers_table(report["workers"], table)
    rows = paper_rows(report)
    if rows:
        lines += table(
            "### The paper's §6, experiment by experiment",
            ["experiment", "the paper", "this run", "direction"],
            rows,
            left=True,
        )
    s = report["summary"]
    lines.append("### Goals")
    lines.append("")
    if "line-3_rsjoin_speedup_at_it" in s:
        lines.append(
            "- RSJoin/SJoin on line-3 at the largest prefix SJoin finished "
            f"({s['line-3_largest_sjoin_prefix']:,} edges): "
            f"{s['line-3_rsjoin_speedup_at_it']:.1f}x "
            f"(goal >= 5x: {'met' if s['goal_line3_speedup_at_least_5x'] else 'not met'}; "
            f"growing with N: {'yes' if s['goal_line3_speedup_growing'] else 'no'}, "
            f"{', '.join(f'{x:.1f}x' for x in s['line-3_speedups'])})."
        )
    if e1_:
        for name, rows in e1_["queries"].items():
            done = [r for r in rows if "sjoin" in r and not r["sjoin"]["timed_out"]]
            ratios = ", ".join(
                f"{r['sjoin']['propagations'] / max(1, r['rsjoin']['propagations']):.0f}x at {r['edges']:,}"
                for r in done
            )
            if ratios:
                lines.append(
                    f"- {name} propagation-loop iterations SJoin/RSJoin (machine-independent): {ratios}."
                )
    if "line4_mean_update_ratio" in s:
        lines.append(
            f"- line-4 mean per-update time SJoin/RSJoin: {s['line4_mean_update_ratio']:.1f}x "
            f"(goal >= 20x: {'met' if s['goal_line4_mean_ratio_at_least_20x'] else 'not met'})."
        )
    if "rswp_evaluation_ratio_at_density_1" in s:
        lines.append(
            f"- RS/RSWP θ evaluations at density 1: {s['rswp_evaluation_ratio_at_density_1']:.1f}x "
            f"(goal >= 10x: {'met' if s['goal_rswp_at_least_10x_fewer'] else 'not met'})."
        )
    return "\n".join(lines)
