"""The triangle benchmark's plots, the docs tables (printed from a stored report alone) and the summary
printed after a run.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

from bench.lib.plots import plt
from bench.triangles_analysis import HEADLINE, LABELS, _groups, default_vs_best, ivm_over_baselines, series
from bench.triangles_cases import DEFAULT, EPS_SWEEP, HALF, eps_label


def plot_scaling(report: dict[str, Any], path: Path) -> None:
    cases, slopes = report["cases"], report["analysis"]["slopes"]
    ivm, fo = eps_label("ivm-eps", HALF), "first-order"
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    styles = {ivm: ("#1f77b4", "o"), fo: ("#d62728", "s")}
    for ax, key, ylabel in (
        (axes[0], "work_per_update", "work units per update"),
        (axes[1], "us_per_update", "wall time per update (us)"),
    ):
        for workload, ls in (("W-mix", "-"), ("W-hub", ":")):
            for label in (ivm, fo):
                s = series(cases, workload, label)
                if not s:
                    continue
                xs = [c["size"] for c in s]
                ys = [c[key] for c in s]
                slope_key = (
                    "work_per_update_vs_size" if key == "work_per_update" else "seconds_per_update_vs_size"
                )
                sl = slopes[workload][label][slope_key]
                color, marker = styles[label]
                ax.plot(
                    xs,
                    ys,
                    ls,
                    color=color,
                    marker=marker,
                    alpha=1.0 if workload == "W-mix" else 0.55,
                    label=f"{workload} {label}: slope {sl:.2f}" if sl is not None else f"{workload} {label}",
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("|D| (tuples)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        "Triangle count, toggles of R(a*,b*) after BUILD: IVM^eps(1/2) vs first-order (smaller row)\n"
        "expected slopes: W-mix 0.5 vs 1, W-hub 0 vs 1 (log-log least squares)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_speedup(report: dict[str, Any], path: Path) -> None:
    sp = report["analysis"]["speedups"]
    fig, ax = plt.subplots(figsize=(10.5, 5))
    for workload, color in (("W-mix", "#1f77b4"), ("W-hub", "#ff7f0e"), ("W-grow", "#2ca02c")):
        rows = sp.get(workload) or []
        if not rows:
            continue
        xs = [r["size"] for r in rows]
        ax.plot(xs, [r["speedup"] for r in rows], "-o", color=color, label=f"{workload}: wall-clock speed-up")
        ax.plot(
            xs,
            [r["work_ratio"] for r in rows],
            "--",
            color=color,
            alpha=0.6,
            label=f"{workload}: work-unit ratio",
        )
        for r in rows:
            ax.annotate(
                f"{r['speedup']:.0f}x" if r["speedup"] >= 10 else f"{r['speedup']:.2f}x",
                (r["size"], r["speedup"]),
                xytext=(4, -12),
                textcoords="offset points",
                fontsize=8,
            )
    ax.axhline(100, color="black", linestyle=":", linewidth=1, label="goal: 100x on W-mix at |D| = 256K")
    ax.axhline(1, color="grey", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("|D| (tuples)")
    ax.set_ylabel("IVM^eps(1/2) / first-order")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title("Speed-up of IVM^eps(1/2) over first-order IVM (same run)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_strategies(report: dict[str, Any], path: Path) -> None:
    """Per-update time of every strategy against |D|, one panel per headline workload."""
    groups = _groups(report["cases"])
    workloads = [w for w in HEADLINE if any(k[0] == w and k[2] == 1 for k in groups)]
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.2 * len(workloads), 4.5), squeeze=False)
    for ax, wk in zip(axes[0], workloads, strict=True):
        for label in LABELS:
            pts = sorted(
                (n, by[label]["us_per_update"])
                for (w, n, b), by in groups.items()
                if w == wk and b == 1 and by.get(label, {}).get("status") == "ok"
            )
            if pts:
                style = "-o" if label == DEFAULT else "--."
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(wk, fontsize=10)
        ax.set_xlabel("|D| (tuples)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("us per update (toggles: median block; others: total time / updates)")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle("Triangle count: every strategy, per-update wall time (lower is better)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_eps(report: dict[str, Any], path: Path) -> None:
    cases = report["cases"]
    n = report["config"]["eps_size"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    for ax, key, ylabel in (
        (axes[0], "work_per_update", "work units per update"),
        (axes[1], "us_per_update", "wall time per update (us)"),
    ):
        adv_half = cases.get(f"W-adv-eps|{n}|{eps_label('ivm-eps', HALF)}")
        if adv_half and adv_half["status"] == "ok":
            xs = [i / 40 for i in range(41)]
            ax.plot(
                xs,
                [adv_half[key] * (2 * n + 1) ** (max(x, 1 - x) - 0.5) for x in xs],
                ":",
                color="grey",
                label="shape N^max(eps, 1-eps), scaled to the worst case at 1/2",
            )
        for prefix, color, label in (
            ("W-mix-eps", "#1f77b4", "fixed W-mix instance (built for eps = 1/2)"),
            ("W-adv-eps", "#d62728", "worst case per eps (W-mix at eps <= 1/2, long light row above)"),
        ):
            pts = sorted(
                (Fraction(c["epsilon"]), c[key])
                for c in cases.values()
                if c["id"].startswith(prefix + "|") and c["strategy"] == "ivm-eps" and c["status"] == "ok"
            )
            if pts:
                ax.plot([float(e) for e, _ in pts], [v for _, v in pts], "-o", color=color, label=label)
        fo = [
            c for c in cases.values() if c["id"].startswith("W-mix-eps|") and c["strategy"] == "first-order"
        ]
        if fo and fo[0]["status"] == "ok":
            ax.axhline(fo[0][key], color="grey", linestyle="--", label="first-order on the fixed W-mix")
        ax.set_yscale("log")
        ax.set_xticks([float(e) for e in EPS_SWEEP], [str(e) for e in EPS_SWEEP])
        ax.set_xlabel("epsilon")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center")
    fig.suptitle(f"IVM^eps epsilon sweep at |D| = {report['config']['eps_size']:,}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------- markdown (docs tables)


def _us(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.1f}" if v >= 10 else f"{v:.2f}"


def _cell(c: dict[str, Any] | None) -> str:
    if c is None:
        return "-"
    if c.get("status") != "ok":
        reason = c.get("reason", "")
        if reason.startswith("views"):
            return "skipped (views > 20M entries)"
        est = c.get("estimate") or {}
        secs = est.get("seconds_for_min_toggles", est.get("seconds"))
        return f"skipped (est. {secs:,.0f} s)" if isinstance(secs, int | float) else "skipped"
    cell = _us(c["us_per_update"])
    if c.get("stopped_by_budget"):
        cell += f" ({c['updates']:,} of {c['updates_offered']:,})"
    if not c.get("count_ok", True):
        cell += " COUNT MISMATCH"
    return cell


def markdown(report: dict[str, Any]) -> str:
    """The tables of docs/triangles/benchmark.md, from a stored report (a test checks the doc)."""
    cases = report["cases"]
    out: list[str] = []
    cfg = report["config"]
    out.append(
        f"Run `{report['run_id']}` ({report['created']}, {report['wall_seconds']:,.0f} s): "
        f"`{report['command']}`; load average at start {report['machine'].get('loadavg_1_5_15')}."
    )
    out.append("")
    titles = {
        "W-mix": "W-mix: toggles of R(a*, b*) after BUILD (only R is updated)",
        "W-all": "W-all: toggles of R(a*, b*), S(b*, c*), T(c*, a*) in turn after BUILD (all relations)",
        "W-hub": "W-hub: toggles of R(a*, b*) after BUILD",
        "W-grow": "W-grow: R-MAT tuples inserted from empty, then deleted (total time / updates)",
        "G-churn": "G-churn: graph mode, R-MAT churn after BUILD, one event per apply (median of 5 blocks)",
    }
    groups = _groups(cases)
    header = "| \\|D\\| | " + " | ".join(LABELS) + " | auto's plan |"
    sep = "|---:|" + "---:|" * len(LABELS) + "---|"
    for wk in HEADLINE:
        rows = sorted((n, by) for (w, n, b), by in groups.items() if w == wk and b == 1)
        if not rows:
            continue
        out += [f"**{titles[wk]}**: microseconds per update", "", header, sep]
        for n, by in rows:
            plan = (by.get(DEFAULT) or {}).get("plan") or "-"
            out.append(f"| {n:,} | " + " | ".join(_cell(by.get(lb)) for lb in LABELS) + f" | {plan} |")
        out.append("")
    out += [
        "**auto against the fastest other strategy**: per update (toggle workloads after auto's "
        "warm-up) and over the whole run (BUILD, warm-up and updates, every strategy charged for the "
        "same number of updates; W-grow: its total time). Within 1.5x needs both ratios. The CPU "
        "column is the per-update ratio again from the thread's CPU time per block (against the "
        "fastest other strategy by that measure), which leaves out the time spent waiting for a core.",
        "",
        "| workload | \\|D\\| | batch | auto µs/update | fastest other | its µs/update | ratio | "
        "ratio, CPU time | updates in the whole run | auto whole run s | fastest other, whole run | "
        "its s | ratio | within 1.5x |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for r in default_vs_best(cases):
        if "ratio_whole_run" in r:
            whole = (
                f"{r['whole_run_updates']:,} | {r['default_whole_run_seconds']:.4f} | "
                f"{r['best_whole_run']} | {r['best_whole_run_seconds']:.4f} | {r['ratio_whole_run']:.2f}"
            )
        else:
            whole = "- | - | - | - | -"
        cpu = f"{r['ratio_cpu']:.2f}" if "ratio_cpu" in r else "-"
        out.append(
            f"| {r['workload']} | {r['size']:,} | {r['batch_size']} | {_us(r['default_us_per_update'])} | "
            f"{r['best']} | {_us(r['best_us_per_update'])} | {r['ratio']:.2f} | {cpu} | {whole} | "
        )
        out[-1] += "yes |" if r["within_1_5x"] else "**no** |"
    out.append("")
    warm = [c for c in cases.values() if c.get("warmup") and c["strategy"] == DEFAULT and c["status"] == "ok"]
    if warm:
        out += [
            "**auto's warm-up on the toggle workloads** (untimed in the per-update figures above)",
            "",
            "| case | warm-up updates | µs/update in warm-up | switches | reason |",
            "|---|---:|---:|---:|---|",
        ]
        for c in sorted(warm, key=lambda c: (c["workload"], c["size"])):
            w = c["warmup"]
            out.append(
                f"| {c['workload']} {c['size']:,} | {w['updates']:,} | {_us(w['us_per_update'])} | "
                f"{w['plan_switches']} | {w['plan_reason']} |"
            )
        out.append("")
    bs = sorted(
        (n, b, by) for (w, n, b), by in groups.items() if w == "G-churn" and n == cfg.get("batch_size_at")
    )
    if bs:
        out += [
            f"**Batch sizes** (G-churn at \\|D\\| = {cfg['batch_size_at']:,}, `engine.apply` per batch "
            "and the result read after each): microseconds per event, median of 5 blocks",
            "",
            "| batch | " + " | ".join(LABELS) + " |",
            "|---:|" + "---:|" * len(LABELS),
        ]
        for _n, b, by in bs:
            out.append(f"| {b:,} | " + " | ".join(_cell(by.get(lb)) for lb in LABELS) + " |")
        out.append("")
    wall = ivm_over_baselines(cases, "W-all")
    if wall:
        out += [
            f"**IVM^ε(1/2) on W-all at \\|D\\| = {wall['size']:,}**: {_us(wall['ivm_us_per_update'])} µs "
            "per update; speed-up over each baseline (per update):",
            "",
        ]
        for label, v in wall["baselines"].items():
            if "speedup" in v:
                out.append(f"- {label}: {v['speedup']:,.1f}x ({_us(v['us_per_update'])} µs/update)")
            else:
                out.append(f"- {label}: not run ({v['skipped']})")
        out.append("")
    e2e = sorted((c for c in cases.values() if c["id"].startswith("e2e|")), key=lambda c: c["id"])
    if e2e:
        out += [
            "**Through the real Worker** (embedded broker, graph mode, 1 partition, RocksDB, default batch "
            "size and checkpoint interval; total time from assignment to the final checkpoint / events)",
            "",
            "| stream | strategy | events | batch | events/s | µs/event | engine alone, same batches, "
            "events/s | auto's plan | counts agree |",
            "|---|---|---:|---:|---:|---:|---:|---|---|",
        ]
        for c in e2e:
            out.append(
                f"| {c['workload']} | {c['strategy']} | {c['events']:,} | {c['batch_size']:,} | "
                f"{c['updates_per_s']:,.0f} | {_us(1e6 / c['updates_per_s'])} | "
                f"{c['engine_only_updates_per_s']:,.0f} | {c.get('plan') or '-'} | "
                f"{'yes' if c['count_ok'] else 'NO'} |"
            )
        out.append("")
    eps_size = cfg["eps_size"]
    eps_rows = []
    for eps in EPS_SWEEP:
        a = cases.get(f"W-mix-eps|{eps_size}|{eps_label('ivm-eps', eps)}", {})
        b = cases.get(f"W-adv-eps|{eps_size}|{eps_label('ivm-eps', eps)}", {})
        if a or b:
            eps_rows.append(
                f"| {eps} | {a.get('work_per_update', '-')} | {_us(a.get('us_per_update'))} | "
                f"{b.get('work_per_update', '-')} | {_us(b.get('us_per_update'))} |"
            )
    if eps_rows:
        out += [
            f"**ε sweep at \\|D\\| = {eps_size:,}** (ivm-eps; fixed W-mix built for ε = 1/2, and the worst "
            "case for each ε)",
            "",
            "| ε | fixed W-mix work/update | µs/update | worst case work/update | µs/update |",
            "|---:|---:|---:|---:|---:|",
            *eps_rows,
            "",
        ]
    goals = report["goals"]
    out.append(
        f"All count checks passed: {'yes' if report['checks']['all_counts_ok'] else 'NO'} "
        f"({report['checks']['cases_checked']} cases). Default within 1.5x of the fastest other strategy "
        f"on every row: {'yes' if goals['default_within_1_5x_everywhere'] else 'no'}."
    )
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- report


def print_summary(report: dict[str, Any]) -> None:
    cases, an = report["cases"], report["analysis"]

    def fmt(v: Any, spec: str = ",.1f") -> str:
        return "-" if v is None else format(v, spec)

    for workload in ("W-mix", "W-all", "W-hub", "W-grow", "G-churn"):
        if not any(c["id"].startswith(f"{workload}|") for c in cases.values()):
            continue
        print(f"\n{workload}")
        header = (
            f"{'|D|':>8} {'strategy':<18} {'upd/s':>12} {'us/upd':>10} {'p99 us':>9} {'max us':>10} "
            f"{'work/upd':>10} {'+rebal':>10} {'entries':>10} {'count ok':>8}"
        )
        print(header)
        print("-" * len(header))
        for c in sorted(
            (c for c in cases.values() if c["id"].startswith(f"{workload}|")),
            key=lambda c: (c["size"], c["id"]),
        ):
            if c["status"] != "ok":
                print(f"{c['size']:>8} {c['label']:<18} skipped: {c['reason']}")
                continue
            if "batch_size" in c:
                print(
                    f"{c['size']:>8} {c['label'] + ' b' + str(c['batch_size']):<18} "
                    f"{fmt(c['updates_per_s']):>12} {fmt(c['us_per_update']):>10} "
                    f"{'yes' if c['count_ok'] else 'NO':>8}"
                )
                continue
            lat = c.get("latency") or {
                "p99_us": max(p["latency"]["p99_us"] for p in c["phases"].values()),
                "max_us": max(p["latency"]["max_us"] for p in c["phases"].values()),
            }
            entries = c.get("state_entries", c.get("peak_state_entries"))
            print(
                f"{c['size']:>8} {c['label']:<18} {fmt(c['updates_per_s']):>12} "
                f"{fmt(c['us_per_update']):>10} "
                f"{fmt(lat['p99_us']):>9} {fmt(lat['max_us']):>10} {fmt(c['work_per_update']):>10} "
                f"{fmt(c['work_per_update_incl_rebalancing']):>10} {fmt(entries, ','):>10} "
                f"{'yes' if c['count_ok'] else 'NO':>8}"
            )
        rows = an["speedups"].get(workload) or []
        if rows and workload in an["slopes"]:
            print(
                "  speed-up IVM^eps(1/2) / first-order: "
                + ", ".join(
                    f"|D|={r['size']}: {r['speedup']:,.2f}x (work {fmt(r['work_ratio'], ',.1f')}x)"
                    for r in rows
                )
            )
        sl = an["slopes"].get(workload)
        if not sl:
            continue
        print(
            "  log-log slopes of work/update: "
            + ", ".join(
                f"{k} {fmt(v['work_per_update_vs_size'], '.3f')}"
                for k, v in sl.items()
                if isinstance(v, dict)
            )
            + "; of time/update: "
            + ", ".join(
                f"{k} {fmt(v['seconds_per_update_vs_size'], '.3f')}"
                for k, v in sl.items()
                if isinstance(v, dict)
            )
        )
    eps_cases = [c for c in cases.values() if c["id"].startswith(("W-mix-eps|", "W-adv-eps|"))]
    if eps_cases:
        print(f"\nepsilon sweep at |D| = {report['config']['eps_size']:,} (ivm-eps)")
        print(
            f"{'eps':>5} {'fixed W-mix work/upd':>21} {'upd/s':>12} {'worst case work/upd':>20} {'upd/s':>12}"
        )
        for eps in EPS_SWEEP:
            a = cases.get(f"W-mix-eps|{report['config']['eps_size']}|{eps_label('ivm-eps', eps)}", {})
            b = cases.get(f"W-adv-eps|{report['config']['eps_size']}|{eps_label('ivm-eps', eps)}", {})
            print(
                f"{eps!s:>5} {fmt(a.get('work_per_update')):>21} {fmt(a.get('updates_per_s')):>12} "
                f"{fmt(b.get('work_per_update')):>20} {fmt(b.get('updates_per_s')):>12}"
            )
        fo = cases.get(f"W-mix-eps|{report['config']['eps_size']}|first-order")
        if fo and fo["status"] == "ok":
            print(
                f"first-order on the fixed W-mix: {fo['work_per_update']:,.1f} work/upd, "
                f"{fo['updates_per_s']:,.1f} upd/s"
            )
    e2e = [c for c in cases.values() if c["id"].startswith("e2e|")]
    if e2e:
        print("\nend to end (graph mode, ivm-eps 1/2, 1 partition, 1 key, RocksDB, default checkpoints)")
        for c in e2e:
            print(
                f"{c['workload']:<12} {c['events']:>7} events  {c['updates_per_s']:>9,.0f} events/s "
                f"(goal >= 3,000: {'met' if c['goal_met'] else 'NOT met'}), engine alone "
                f"{c['engine_only_updates_per_s']:,.0f}/s, {c['checkpoints']} checkpoints, "
                f"counts {'agree' if c['count_ok'] else 'DISAGREE'} (triangles {c['triangles']:,})"
            )
    print(f"\nall count checks passed: {report['checks']['all_counts_ok']}")
