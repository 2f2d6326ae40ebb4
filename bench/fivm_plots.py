"""The F-IVM benchmark's plot (one PNG, a panel per experiment)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.fivm_experiments import E8_STRATEGIES
from bench.lib.plots import plt

COLORS = {
    "fivm": "tab:blue",
    "fivm+indicators": "tab:cyan",
    "fivm-one": "tab:purple",
    "fact-payloads": "tab:blue",
    "dbt": "tab:orange",
    "dbt-ring": "tab:brown",
    "list-payloads": "tab:orange",
    "1-ivm": "tab:green",
    "1-ivm-ring": "tab:olive",
    "list-keys": "tab:green",
    "sql-opt": "tab:pink",
    "f-re": "tab:red",
    "dbt-re": "tab:gray",
    "reeval": "tab:red",
}


def plot(report: dict[str, Any], path: Path) -> None:
    fig, axes = plt.subplots(2, 4, figsize=(22, 10))
    a = axes.flat
    rate_label = "tuples/s over the total time (x: timed out)"

    def rates(ax: Any, rows: list[dict[str, Any]], xkey: str, title: str, xlabel: str) -> None:
        for label in dict.fromkeys(label for r in rows for label in r["runs"]):
            pts = [(r[xkey], r["runs"][label]) for r in rows if label in r["runs"]]
            xs = [p[0] for p in pts]
            color = COLORS.get(label)
            ax.semilogy(xs, [p[1]["tuples_per_second"] for p in pts], "o-", color=color, label=label)
            for x, (_, rec) in zip(xs, pts, strict=True):
                if rec["timed_out"]:
                    ax.plot([x], [rec["tuples_per_second"]], "x", color=color, ms=12, mew=2)
        ax.set(title=title, xlabel=xlabel, ylabel=rate_label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)

    if report.get("e1"):
        rates(a[0], report["e1"], "scale", "E1 SUM(postcode²), Housing (- - rows shuffled)", "scale s")
        for label in ("fivm", "dbt", "1-ivm"):
            pts = [
                (r["scale"], r["runs"][label]["tuples_per_second"]) for r in report.get("e1_shuffled") or []
            ]
            if pts:
                a[0].semilogy(*zip(*pts, strict=True), "s--", color=COLORS[label], alpha=0.6, mfc="none")
        last = report["e1"][-1]
        for label, rec in last["runs"].items():
            pts = rec["series"]
            fr = [p[0] / rec["tuples"] for p in pts]
            tp = [p[0] / p[1] for p in pts]
            a[1].semilogy(fr, tp, ".-", color=COLORS.get(label), label=label)
        a[1].set(
            title=f"E1 along the stream, s={last['scale']}",
            xlabel="fraction of the stream processed",
            ylabel="tuples/s so far (cumulative)",
        )
        a[1].grid(True, which="both", alpha=0.3)
        a[1].legend(fontsize=8)
    e3 = report.get("e3") or {}
    if e3.get("rows"):
        ax = a[2]
        for name in ("reeval", "1-ivm", "fivm"):
            ax.loglog(
                [r["n"] for r in e3["rows"]],
                [r[name]["min_seconds"] for r in e3["rows"]],
                "o-",
                color=COLORS[name],
                label=f"{name} (dense numpy)",
            )
        hashmap = e3.get("hashmap") or []
        for name, key in (("reeval", "reeval"), ("1-ivm-ring", "1-ivm"), ("fivm", "fivm")):
            pts = [(r["n"], r["runs"][name]["seconds_per_row_update"]) for r in hashmap if name in r["runs"]]
            if pts:
                ax.loglog(
                    *zip(*pts, strict=True), "s:", color=COLORS[key], mfc="none", label=f"{name} (hash-map)"
                )
        ax.set(
            title="E3 matrix chain, one-row updates",
            xlabel="n",
            ylabel="seconds per update (best of the updates)",
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        ax = a[3]
        rk = e3.get("ranks") or []
        for name in ("reeval", "1-ivm", "fivm"):
            ax.plot(
                [r["rank"] for r in rk],
                [r[name]["min_seconds"] for r in rk],
                "o-",
                color=COLORS[name],
                label=name,
            )
        n = rk[0]["n"] if rk else ""
        ax.set(
            title=f"E3 rank-r updates, n={n} (dense numpy)",
            xlabel="rank r",
            ylabel="seconds per update (best of the updates)",
        )
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    if report.get("e4"):
        ax = a[4]
        rows = report["e4"]
        styles = {6: ":", 10: "--", 27: "-"}
        for m in sorted({r["m"] for r in rows}):
            sub = [r for r in rows if r["m"] == m]
            for label in dict.fromkeys(lbl for r in sub for lbl in r["runs"]):
                pts = [(r["scale"], r["runs"][label]) for r in sub if label in r["runs"]]
                xs = [p[0] for p in pts]
                color = COLORS.get(label)
                ax.semilogy(
                    xs,
                    [p[1]["tuples_per_second"] for p in pts],
                    "o" + styles.get(m, "-"),
                    color=color,
                    label=label if m == 27 else None,
                )
                for x, (_, rec) in zip(xs, pts, strict=True):
                    if rec["timed_out"]:
                        ax.plot([x], [rec["tuples_per_second"]], "x", color=color, ms=12, mew=2)
        ax.set(
            title="E4 covariance, Housing (m = 6 dotted, 10 dashed, 27 solid)",
            xlabel="scale s",
            ylabel=rate_label,
        )
        ax.grid(True, which="both", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        for label in ("1-ivm",):
            if label not in labels and any(label in r["runs"] for r in rows):
                handles.append(plt.Line2D([], [], color=COLORS[label], marker="o"))
                labels.append(label)
        ax.legend(handles, labels, fontsize=8)
    if report.get("e6"):
        rates(
            a[5],
            report["e6"],
            "edges_per_relation",
            "E6 triangle cofactor (fivm-one: R's updates only, S and T loaded)",
            "edges per relation",
        )
        pts = [
            (r["edges_per_relation"], r["one"]["fivm-one"]["tuples_per_second"])
            for r in report["e6"]
            if "one" in r
        ]
        if pts:
            a[5].semilogy(*zip(*pts, strict=True), "D--", color=COLORS["fivm-one"], label="fivm-one (R only)")
            a[5].legend(fontsize=8)
        a[5].set_xticks([r["edges_per_relation"] for r in report["e6"]])
        a[5].set_xticklabels([f"{r['edges_per_relation']:,}" for r in report["e6"]])
    if report.get("e8"):
        ax = a[6]
        rates(
            ax,
            report["e8"],
            "scale",
            "E8 Housing join listed: throughput (o-), stored bytes (s--)",
            "scale s",
        )
        tw = ax.twinx()
        for label in E8_STRATEGIES:
            pts = [(r["scale"], r["runs"][label]["stored_bytes"]) for r in report["e8"] if label in r["runs"]]
            tw.semilogy(*zip(*pts, strict=True), "s--", color=COLORS[label], alpha=0.5, mfc="none")
        tw.set_ylabel("stored bytes (state entries)")
    svc = report.get("service")
    ax = a[7]
    if svc:
        ax.bar(
            ["engine alone", "worker"],
            [svc["engine_events_per_second"], svc["worker_events_per_second"]],
            color=["tab:blue", "tab:gray"],
        )
        ax.set(
            title=f"fivm service, {svc['events']:,} events, batch {svc['batch_size']:,}",
            ylabel="events/s over the total time (best run)",
        )
    else:
        ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
