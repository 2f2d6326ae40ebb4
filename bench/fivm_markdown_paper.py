"""docs/fivm/benchmark.md's sections for the experiments run as the paper runs them (``fivm_paper``,
E6's ONE set-up), and what every section shares: the run a section came from and a row's verdict
against the paper."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.fivm_experiments import FIVM_PER_TUPLE
from bench.fivm_paper import E1_GROWTH_STRATEGIES, E2_STRATEGIES, E5_STRATEGIES

GROWTH_WHY = {
    "runs": "F-IVM, like 1-IVM, consolidates a batch by postcode before propagating it, so as generated "
    "both share a postcode's work among its fan-out rows",
    "shuffled": "every tuple costs both strategies the same fixed intake and base or leaf update, see below",
}
GROWTH_SHORT = (
    "What bounds the ratio: 1-IVM is the paper's (base relations stored with their non-join variables; "
    "per update each other relation aggregated by postcode through an index and the partial aggregates "
    "multiplied: time linear in the fan-out) and F-IVM's trigger is a point lookup per sibling view, but "
    "every tuple also costs both strategies the same fixed Python work (consolidating its event into a "
    "tuple multiplicity, adding it to its base relation or leaf view), so the ratio grows more slowly "
    "than the fan-out. On the stream as generated both strategies consolidate a batch by postcode: a batch "
    "holds about 1,000 / fan-out postcodes, each evaluated by 1-IVM in time linear in the fan-out, so its "
    "cost per tuple, and the ratio, hardly change with s there; the growth shows on the shuffled stream, "
    "where 1-IVM evaluates once per tuple. A run that timed out is rated over "
    "its prefix, where 1-IVM's relations are smaller and its updates cheaper: its ratio is a lower bound."
)
RE_WHY = "a re-evaluation costs the database's size, here about a thousandth of the paper's"
SQLOPT_WHY = "the paper plots it without a number; 2x stands in for 'above'"


def rate(rec: Mapping[str, Any] | None) -> str:
    if rec is None:
        return "-"
    cell = f"{rec['tuples_per_second']:,.0f}"
    if rec["timed_out"]:
        cell += f" (timed out at {rec['processed'] / rec['tuples']:.0%})"
    return cell


def x(v: float | None) -> str:
    return "-" if v is None else (f"{v:,.1f}x" if v < 100 else f"{v:,.0f}x")


def ratio(runs: Mapping[str, Any], a: str, b: str) -> float | None:
    ra, rb = runs.get(a), runs.get(b)
    if not ra or not rb or not ra["tuples_per_second"] or not rb["tuples_per_second"]:
        return None
    return float(ra["tuples_per_second"] / rb["tuples_per_second"])


def verdict(got: float | None, paper: float, why: str = "") -> str:
    """Whether a measured ratio reproduces the paper's: direction (same side of 1) and rough magnitude
    (within a factor of 3); ``why`` explains a miss."""
    if got is None:
        return "not measured"
    if abs(paper - 1) < 0.3:  # the paper finds the two about equal
        if abs(got - 1) < 0.3:
            return f"yes ({x(got)}, about equal like the paper's {x(paper)})"
        return f"no: {x(got)} where the paper's are about equal ({x(paper)})" + (f" ({why})" if why else "")
    same_side = (got > 1) == (paper > 1)
    if not same_side:
        return f"no: {x(got)} vs the paper's {x(paper)}" + (f" ({why})" if why else "")
    if paper / 3 <= got <= paper * 3:
        return f"yes ({x(got)} vs {x(paper)})"
    return f"direction only: {x(got)} vs {x(paper)}" + (f" ({why})" if why else "")


def provenance(report: Mapping[str, Any], key: str) -> str:
    """The run a section came from: its command, size of machine and load at start and end."""
    sec = (report.get("sections") or {}).get(key)
    if sec is None:
        m = report["machine"]
        return (
            f"From run `{report['run_id']}` (`{report['command']}`, load average "
            f"{m['loadavg_1_5_15'][0]} at the end)."
        )
    m = sec["machine"]
    return (
        f"From run `{sec['run_id']}`: `{sec['command']}` ({m['cpu_count']} CPUs, {sec['minutes']:.1f} min, "
        f"load average {sec['load_at_start'][0]} at the start and {m['loadavg_1_5_15'][0]} at the end"
        + (
            "; the machine was shared, so the rates are noisy and the same-run ratios are what to read)."
            if max(sec["load_at_start"][0], m["loadavg_1_5_15"][0]) > 1.5
            else ")."
        )
    )


def sections(report: Mapping[str, Any], summary: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    if report.get("e1_growth"):
        rows = report["e1_growth"]
        lines += [
            "",
            "### E1 at the paper's postcodes: growth with the scale factor",
            "",
            f"SUM(postcode²) over Housing with {rows[0]['postcodes']:,} postcodes (the paper's) at growing "
            "s, as generated (a postcode's rows together, so a batch of 1,000 holds about 1,000 / fan-out "
            "postcodes and 1-IVM evaluates each other relation once per postcode of a batch) and with every "
            "relation's rows shuffled (then once per tuple; the rows allocated in stream order, as a "
            "consumer deserializing its events has them). The re-evaluations are left out (they time out "
            "from s = 3 in E1). The paper's Figure 8 gives F-IVM/1-IVM = 9.5x and F-IVM/DBT = 1.3x at "
            "s = 20. " + provenance(report, "e1_growth"),
            "",
            "| s | tuples | order | " + " | ".join(E1_GROWTH_STRATEGIES) + " | fivm / 1-ivm | fivm / dbt "
            "| fivm / 1-ivm against the paper's 9.5x at s = 20 |",
            "|---|---|---|" + "---|" * (len(E1_GROWTH_STRATEGIES) + 3),
        ]
        for r in rows:
            for key, order in (("runs", "as generated"), ("shuffled", "shuffled")):
                if key not in r:
                    continue
                runs = r[key]
                f1, fd = ratio(runs, "fivm", "1-ivm"), ratio(runs, "fivm", "dbt")
                why = GROWTH_WHY[key] if r["scale"] == 20 else "the paper's figure is at s = 20"
                lines.append(
                    f"| {r['scale']} | {r['tuples']:,} | {order} | "
                    + " | ".join(rate(runs.get(st)) for st in E1_GROWTH_STRATEGIES)
                    + f" | {x(f1)} | {x(fd)} | {verdict(f1, 9.51, why)} |"
                )
        for key in ("goal_e1_growth", "goal_e1_growth_shuffled"):
            g = summary.get(key)
            if g:
                lines += [
                    "",
                    f"Goal: {g['text']}: {'**met**' if g['met'] else '**not met**'} ({x(g['value'])} at "
                    f"s = {rows[-1]['scale']}, {x(g.get('first'))} at s = {rows[0]['scale']}; growing at "
                    f"every step: {'yes' if g['monotonic'] else 'no'}).",
                ]
        lines += ["", GROWTH_SHORT]
    ret = report.get("retailer")
    if ret:
        sizes = ", ".join(f"{k} {v:,}" for k, v in ret["sizes"].items())
        sk = ret["skew"]
        lines += [
            "",
            "### Retailer (E2, E5 and ONE)",
            "",
            "The paper's snowflake Inventory ⋈ Location ⋈ Census ⋈ Item ⋈ Weather with its variable order "
            "locn { dateid { ksn }, zip }: the real Location, Census and Item tables, Weather and Inventory "
            "generated over them (`bench/fivm_retailer.py`) with the published ratios (one Weather row per "
            "location and date, 72.5 Inventory rows per Weather row) and Zipf(1.1) item skew (the most "
            f"common item holds {sk['top_item_share']:.1%} of Inventory, the top 1% of items "
            f"{sk['top_1pct_items_share']:.0%}). Scale: {ret['dates']} date(s) per location, i.e. {sizes} "
            f"({ret['tuples']:,} tuples; the paper's Inventory has 84,055,817). "
            + provenance(report, "retailer"),
            "",
            "E2, SUM(inventoryunits), all relations updatable (paper, Figure 8: F-IVM/DBT 2.4x, F-IVM/1-IVM "
            "1.0x, F-IVM/F-RE 781x, F-IVM/DBT-RE 846x):",
            "",
            "| " + " | ".join(E2_STRATEGIES) + " | fivm / dbt | fivm / 1-ivm | fivm / f-re | fivm / dbt-re |",
            "|" + "---|" * (len(E2_STRATEGIES) + 4),
        ]
        e2 = ret["e2"]
        lines.append(
            "| "
            + " | ".join(rate(e2.get(st)) for st in E2_STRATEGIES)
            + f" | {x(ratio(e2, 'fivm', 'dbt'))} | {x(ratio(e2, 'fivm', '1-ivm'))} "
            f"| {x(ratio(e2, 'fivm', 'f-re'))} | {x(ratio(e2, 'fivm', 'dbt-re'))} |"
        )
        lines += [
            "",
            "| ratio | measured against the paper |",
            "|---|---|",
            f"| fivm / dbt | {verdict(ratio(e2, 'fivm', 'dbt'), 2.36, _views_why(e2))} |",
            f"| fivm / 1-ivm | {verdict(ratio(e2, 'fivm', '1-ivm'), 1.01, 'not analysed')} |",
            f"| fivm / f-re | {verdict(ratio(e2, 'fivm', 'f-re'), 781, RE_WHY)} |",
            f"| fivm / dbt-re | {verdict(ratio(e2, 'fivm', 'dbt-re'), 846, RE_WHY)} |",
        ]
        e5, one = ret["e5"], ret["e5_one"]
        one_gain = ratio({"a": one.get("fivm-one"), "b": e5.get("fivm")}, "a", "b")
        sql_gain = ratio({"a": one.get("sql-opt"), "b": e5.get("sql-opt")}, "a", "b")
        lines += [
            "",
            "E5, the degree-43 cofactor matrix over all 43 variables (paper, Figure 10: DBT-RING 8.7x below "
            "F-IVM, F-IVM above SQL-OPT; ONE raises F-IVM's throughput 3.2x and SQL-OPT's 1.3x). `fivm` runs "
            "relation deltas in columns (block payloads), `fivm per-tuple` per tuple (block payloads), "
            "`dbt-ring` per tuple with dense 43x43 payloads; ONE: only Inventory updatable, the other four "
            "relations loaded first (not timed), its rate over Inventory's updates:",
            "",
            "| " + " | ".join(E5_STRATEGIES) + " | fivm-one | sql-opt ONE |",
            "|" + "---|" * (len(E5_STRATEGIES) + 2),
            "| "
            + " | ".join(rate(e5.get(st)) for st in E5_STRATEGIES)
            + f" | {rate(one.get('fivm-one'))} | {rate(one.get('sql-opt'))} |",
            "| "
            + " | ".join(_mem(e5.get(st)) for st in E5_STRATEGIES)
            + f" | {_mem(one.get('fivm-one'))} | {_mem(one.get('sql-opt'))} |",
            "",
            "| ratio | measured against the paper |",
            "|---|---|",
            f"| fivm / dbt-ring | {verdict(ratio(e5, 'fivm', 'dbt-ring'), 8.7)} |",
            f"| {FIVM_PER_TUPLE} / dbt-ring | {verdict(ratio(e5, FIVM_PER_TUPLE, 'dbt-ring'), 8.7)} |",
            f"| fivm / sql-opt | {verdict(ratio(e5, 'fivm', 'sql-opt'), 2.0, SQLOPT_WHY)} |",
            f"| fivm-one / fivm | {verdict(one_gain, 3.2, _one_why(e5, one))} |",
            f"| sql-opt ONE / sql-opt | {verdict(sql_gain, 1.3, _prefix_why(e5.get('sql-opt')))} |",
        ]
        model = ret.get("model")
        if model:
            gd = model["gradient-descent"]
            lines += [
                "",
                f"A model of {model['label']} on all {model['features']} other variables from this root is "
                "ill-posed: the closed form reports the system "
                f"{model['closed-form']['status']} and gradient descent ends {gd['status']} after "
                f"{gd['iterations']:,} iterations "
                f"({gd['seconds'] * 1e3:,.1f} ms), because in the real Census table males + females = "
                "population and occupiedhouseunits = households (and with one date, dateid is constant). "
                "The model section below fits the well-posed set.",
            ]
    if report.get("e7"):
        rows = report["e7"]
        lines += [
            "",
            "### E7: batch size",
            "",
            "The cofactor matrix under batches of 100 to 100,000 tuples, all relations updatable (paper, "
            "Figure 12: best at 1,000 to 10,000; Retailer in 1,000-tuple chunks up to 2.45x faster than all "
            "at once). Housing s = 1 (m = 27), Retailer (m = 43, one date, a prefix of Inventory), the "
            "triangle (m = 3); batch 100,000 holds each relation whole. " + provenance(report, "e7"),
            "",
            "| dataset | batch | tuples | strategies (tuples/s) |",
            "|---|---|---|---|",
        ]
        for r in rows:
            cells = ", ".join(f"{k} {rate(v)}" for k, v in r["runs"].items())
            lines.append(f"| {r['dataset']} | {r['batch']:,} | {r['tuples']:,} | {cells} |")
        lines += ["", _e7_verdict(rows)]  # the paper's curves are plotted only
    if report.get("model"):
        lines += [
            "",
            "### The regression model: closed form and batch gradient descent",
            "",
            provenance(report, "model"),
        ]
        fits = report["model"]
        for key, where in (
            ("housing", "the Housing cofactor root (s = 1, m = 27)"),
            ("retailer", "the Retailer cofactor root (m = 43; left out: {left})"),
        ):
            if key in fits:
                left = ", ".join(fits[key].get("left_out", []))
                lines += ["", _model_line(fits[key], where.format(left=left))]
    return lines


def _mem(rec: Mapping[str, Any] | None) -> str:
    return "-" if rec is None else f"{rec['views']} views, {rec['stored_bytes'] / 1e6:,.1f} MB"


def _views_why(runs: Mapping[str, Any]) -> str:
    dbt = runs.get("dbt")
    return f"dbt keeps {dbt['views']} views here" if dbt else ""


def _prefix_why(rec: Mapping[str, Any] | None) -> str:
    if not rec or not rec["timed_out"]:
        return ""
    return (
        f"the all-updatable run timed out at {rec['processed'] / rec['tuples']:.0%}, so its rate covers a "
        "prefix that holds all of the small relations' tuples"
    )


def _one_why(e5: Mapping[str, Any], one: Mapping[str, Any]) -> str:
    a, b = e5.get("fivm"), one.get("fivm-one")
    if not a or not b:
        return ""
    return (
        f"{b['views']} stored views instead of {a['views']}; the paper's C++ pays for every stored view "
        "per update, here column execution already makes Inventory's all-updatable path cheap"
    )


def _model_line(m: Mapping[str, Any], where: str) -> str:
    cf, gd = m["closed-form"], m["gradient-descent"]
    diff = m.get("max_coefficient_diff")
    return (
        f"Model of {m['label']} on {m['features']} features (ridge {m['ridge']:g}) from {where}: the closed "
        f"form takes {cf['seconds'] * 1e3:.3f} ms ({cf['status']}), batch gradient descent "
        f"{gd['seconds'] * 1e3:.3f} ms ({gd['status']}, {gd['iterations']} iterations to a relative "
        f"gradient of {gd['tolerance']:g})"
        + (
            f"; their coefficients differ by at most {diff:.1e} of the largest (condition number "
            f"{m['condition']:,.0f} after scaling)"
            if diff is not None
            else ""
        )
        + ". Either costs microseconds to milliseconds against the seconds of maintaining the root, as the "
        "paper says of the convergence step; the closed form is faster at these widths."
    )


def _e7_verdict(rows: list[Mapping[str, Any]]) -> str:
    """Per dataset, fivm's fastest batch against the paper's (1,000 to 10,000, chunks of 1,000 up to
    2.45x faster than all at once on Retailer)."""
    out = [
        "| dataset | fivm fastest at batch | fastest / batch 100 | fastest / all at once "
        "| against the paper |",
        "|---|---|---|---|---|",
    ]
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        pts = [
            (r["batch"], r["runs"]["fivm"]["tuples_per_second"])
            for r in rows
            if r["dataset"] == ds and "fivm" in r["runs"]
        ]
        if not pts:
            continue
        top = max(pts, key=lambda p: p[1])
        first, whole = pts[0], pts[-1]
        if 1_000 <= top[0] <= 10_000:
            said = "yes: fastest within the paper's 1,000 to 10,000"
        elif top[0] > 10_000:
            said = (
                "direction only: faster up to all at once; the paper's fall past 10,000 comes from CPU cache "
                "misses in its C++ views, which Python's per-tuple costs hide"
            )
        else:
            said = "no: fastest at the smallest batch and slower as batches grow (not analysed)"
        out.append(f"| {ds} | {top[0]:,} | {top[1] / first[1]:.2f}x | {top[1] / whole[1]:.2f}x | {said} |")
    return "\n".join(out)
