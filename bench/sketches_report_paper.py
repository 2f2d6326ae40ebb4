"""The tables of the IMP paper's experiments in docs/sketches/benchmark.md, printed from a stored report
alone; every row states whether the paper's direction and rough magnitude are reproduced, and why not
where not. A section absent from the report prints nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

PAPER_BREAKEVEN = (3.5, 5.5)  # % of the table, Q_groups (Fig. 9b)
WHY_PYTHON = "per-tuple Python against a vectorised C++ recapture (the paper: C against PostgreSQL)"


def _row(*cells: Any) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _ms(s: float) -> str:
    return f"{s * 1e3:.2f}"


def _load(values: Sequence[float] | None) -> str:
    return "?" if not values else " / ".join(f"{v:.1f}" for v in values)


def _run_line(report: Mapping[str, Any], name: str) -> str:
    run = report.get("sections", {}).get(name)
    if not run:
        return ""
    return (
        f"Run: `{run['command']}`, load average {_load(run['loadavg_start'])} at the start and "
        f"{_load(run['loadavg_end'])} at the end, {run['seconds']:.0f} s."
    )


def _verdict(x: float, paper: float, floor: float | None = None) -> str:
    """Direction: IMP faster (x > 1). Magnitude: at least the paper's floor where it states one, else
    within a factor of 3 of the paper's figure."""
    if x <= 1:
        return f"no: IMP slower ({x:.2f}x)"
    if (x >= floor) if floor is not None else (x >= paper / 3):
        return "yes"
    if floor is not None:
        return f"direction only ({x:.1f}x, below the paper's floor {floor:g}x): {WHY_PYTHON}"
    return f"direction only ({x:.1f}x against the paper's {paper:g}x): {WHY_PYTHON}"


def _cpu(r: Mapping[str, Any]) -> str:
    x = r.get("speedup_duckdb_cpu")
    return "—" if x is None else f"{x:.1f}"


def _best_measure(r: Mapping[str, Any]) -> float:
    """The load-independent ratio where recorded (CPU, DuckDB credited with both threads), else wall."""
    return float(r.get("speedup_duckdb_cpu", r["speedup_duckdb"]))


CPU_NOTE = (
    "x DuckDB (CPU): DuckDB's CPU seconds divided by its 2 threads (its wall time if perfectly parallel) "
    "over IMP's CPU seconds; unlike the wall-clock ratio it does not move with the machine's load, and it "
    "is the ratio the verdict uses where recorded."
)


def breakeven_sentence(be: Mapping[str, Any]) -> str:
    lo, hi = PAPER_BREAKEVEN
    parts = []
    for key, label in (("duckdb", "the DuckDB recapture"), ("python", "the Python recapture")):
        cross = be.get(f"breakeven_{key}")
        if not cross:
            parts.append(f"against {label}: {be.get(f'breakeven_{key}_note')}")
            continue
        pct = cross / be["rows"] * 100
        side = "below" if pct < lo else "above" if pct > hi else "within"
        parts.append(f"against {label} at {pct:.2f} % of the table, {side} the paper's {lo:g} to {hi:g} %")
    return (
        "Break-even "
        + "; ".join(parts)
        + ". IMP's per-tuple cost is Python's whichever baseline it meets, so the vectorised recapture "
        "breaks even at a smaller batch and the per-row Python recapture at a larger one."
    )


def _having_big(report: Mapping[str, Any]) -> list[str]:
    h = report.get("having_big")
    if not h:
        return []
    lines = [
        f"### Q_having at {h['rows']:,} rows (G = {h['groups']:,}, {h['aggregates']} aggregates)",
        "",
        _run_line(report, "having_big"),
        f"Bootstrap {h['bootstrap_s']:.0f} s; peak resident memory {h['rss_gb']:.1f} GB.",
        "",
        _row(
            "Δ",
            "IMP ms",
            "full DuckDB ms",
            "full Python s",
            "x DuckDB",
            "x DuckDB (CPU)",
            "x Python",
            "paper ≈100x: reproduced?",
        ),
        _row(*["---"] * 8),
    ]
    for r in h["runs"]:
        lines.append(
            _row(
                f"{r['delta']:,}",
                _ms(r["imp_s"]),
                _ms(r["full_duckdb_s"]),
                f"{r['full_python_s']:.1f}",
                f"{r['speedup_duckdb']:.1f}",
                _cpu(r),
                f"{r['speedup_python']:.0f}",
                _verdict(_best_measure(r), 100),
            )
        )
    return lines


def _having_note(report: Mapping[str, Any]) -> list[str]:
    return [CPU_NOTE] if report.get("having_big") else []


def _slope(report: Mapping[str, Any]) -> list[str]:
    s = report.get("slope")
    if not s:
        return []
    cfgs = s["configs"]
    deltas = [r["delta"] for r in cfgs[0]["runs"]]
    lines = [
        f"### Cost against the number of aggregates (Q_having, {s['rows']:,} rows, G = {s['groups']:,})",
        "",
        _run_line(report, "slope"),
        f"Engines timed round-robin, {s['rounds']} rounds; slope = least-squares fit of IMP's per-batch "
        "time on Δ.",
        "",
        _row(
            "aggregates",
            *[f"IMP ms Δ={d}" for d in deltas],
            "slope µs/tuple",
            "full Python s",
            "DuckDB ms Δ=1000",
        ),
        _row(*["---"] * (len(deltas) + 4)),
    ]
    for c in cfgs:
        duck = next((r["full_duckdb_s"] for r in c["runs"] if r["delta"] == max(deltas)), None)
        lines.append(
            _row(
                c["aggregates"],
                *[_ms(r["imp_s"]) for r in c["runs"]],
                f"{c['slope_us_per_tuple']:.1f}",
                f"{c['full_python_s']:.2f}",
                _ms(duck) if duck is not None else "—",
            )
        )
    slopes = [c["slope_us_per_tuple"] for c in cfgs]
    rising = sum(b > a for a, b in pairwise(slopes))
    grows = slopes[-1] > slopes[0]
    verdict = (
        f"reproduced: the slope grows from {slopes[0]:.1f} to {slopes[-1]:.1f} µs per tuple "
        f"({cfgs[0]['aggregates']} to {cfgs[-1]['aggregates']} aggregates; {rising} of {len(slopes) - 1} "
        "steps up)"
        if grows
        else f"not reproduced: the slope does not grow ({slopes[0]:.1f} to {slopes[-1]:.1f} µs per tuple)"
    )
    return [
        *lines,
        "",
        f"Paper (Fig. 8a): IMP linear in Δ with a slope that grows with #aggregates — {verdict}.",
    ]


def _tpch_big(report: Mapping[str, Any]) -> list[str]:
    t = report.get("tpch_big")
    if not t:
        return []
    lines = [
        f"### TPC-H at SF {t['sf']} ({t['lineitem_rows']:,} lineitems, Δ ≤ 100)",
        "",
        _run_line(report, "tpch_big"),
        f"Peak resident memory {t['rss_gb']:.1f} GB.",
        "",
        _row(
            "query",
            "safety",
            "Δ",
            "IMP ms",
            "full DuckDB ms",
            "full Python s",
            "x DuckDB",
            "x DuckDB (CPU)",
            "paper ≥ 3.9x: reproduced?",
        ),
        _row(*["---"] * 9),
    ]
    for q in t["queries"]:
        for r in q["runs"]:
            lines.append(
                _row(
                    q["query"],
                    q["safety"],
                    r["delta"],
                    _ms(r["imp_s"]),
                    _ms(r["full_duckdb_s"]),
                    f"{r['full_python_s']:.1f}",
                    f"{r['speedup_duckdb']:.1f}",
                    _cpu(r),
                    _verdict(_best_measure(r), 3.9, 3.9),
                )
            )
    worst = min(_best_measure(r) for q in t["queries"] for r in q["runs"])
    return [
        *lines,
        "",
        CPU_NOTE,
        f"Smallest speed-up over the DuckDB recapture: {worst:.1f}x (the paper's floor 3.9x).",
    ]


def _crimes(report: Mapping[str, Any]) -> list[str]:
    c = report.get("crimes")
    if not c:
        return []
    lines = [
        f"### Crimes-shaped workload ({c['rows']:,} rows, CQ2 threshold {c['threshold']:,})",
        "",
        _run_line(report, "crimes"),
        "",
        _row(
            "query",
            "partition",
            "Δ",
            "IMP ms",
            "full DuckDB ms",
            "full Python s",
            "x DuckDB",
            "x Python",
            "paper ≥ 100x: reproduced?",
        ),
        _row(*["---"] * 9),
    ]
    for q in c["queries"]:
        for r in q["runs"]:
            lines.append(
                _row(
                    q["query"],
                    q["partition"],
                    f"{r['delta']:,}",
                    _ms(r["imp_s"]),
                    _ms(r["full_duckdb_s"]),
                    f"{r['full_python_s']:.2f}",
                    f"{r['speedup_duckdb']:.1f}",
                    f"{r['speedup_python']:.0f}",
                    _verdict(r["speedup_duckdb"], 100, 100),
                )
            )
    lines += [
        "",
        "#### Range partitions of `beat` (CQ2, 100 ranges asked)",
        "",
        _row(
            "partition",
            "fragments",
            "sketch fragments",
            "rows scanned",
            "% of table",
            f"IMP ms Δ={c['partitions'][0]['runs'][-1]['delta']:,}",
        ),
        _row(*["---"] * 6),
    ]
    for p in c["partitions"]:
        last = p["runs"][-1]
        lines.append(
            _row(
                p["partition"],
                p["fragments"],
                p["sketch_fragments"],
                f"{p['rows_scanned']:,}",
                f"{p['rows_scanned'] / p['rows_total'] * 100:.1f}",
                _ms(last["imp_s"]),
            )
        )
    return lines


def _joins(report: Mapping[str, Any]) -> list[str]:
    j = report.get("joins")
    if not j:
        return []
    lines = [
        f"### Q_join 1-n and m-n ({j['rows']:,} fact rows)",
        "",
        _run_line(report, "joins"),
        "",
        _row("join", "G", "Δ", "IMP ms", "full DuckDB ms", "full Python s", "x DuckDB"),
        _row(*["---"] * 7),
    ]
    for label, recs in (("1-n", j["one_n"]), ("m-n", j["m_n"])):
        for rec in recs:
            name = f"1-{rec['n']:,}" if label == "1-n" else f"{rec['m']}-{rec['n']:,}"
            for r in rec["runs"]:
                lines.append(
                    _row(
                        name,
                        f"{rec['groups']:,}",
                        f"{r['delta']:,}",
                        _ms(r["imp_s"]),
                        _ms(r["full_duckdb_s"]),
                        f"{r['full_python_s']:.2f}",
                        f"{r['speedup_duckdb']:.1f}",
                    )
                )

    def at_max(rec: Mapping[str, Any]) -> float:
        return float(rec["runs"][-1]["imp_s"])

    one = j["one_n"]
    slowest = max(one, key=at_max)
    fewest = min(one, key=lambda r: r["n"])
    v1 = "reproduced" if slowest is fewest else f"not reproduced: 1-{slowest['n']:,} is slowest here"
    mn = sorted(j["m_n"], key=lambda r: r["m"])
    v2 = (
        "reproduced"
        if len(mn) < 2 or at_max(mn[-1]) > at_max(mn[0])
        else "not reproduced: the larger m is not slower here"
    )
    return [
        *lines,
        "",
        f"Paper (Fig. 8c): the 1-n join with the most groups (1-20) is the slowest — {v1}. "
        f"Paper (Fig. 8d): 50-2K slower than 20-2K (more join partners per delta tuple) — {v2}.",
    ]


def _joinsel(report: Mapping[str, Any]) -> list[str]:
    rows = report.get("joinsel")
    if not rows:
        return []
    lines = [
        f"### Join selectivity and Bloom filters (Q_join 1-n, {rows[0]['rows']:,} fact rows, "
        f"G = {rows[0]['groups']:,})",
        "",
        _run_line(report, "joinsel"),
        "Materialised (mat) and probe joins, Bloom filters off and on, fed the same batches; lookups and "
        "Bloom-filtered keys counted over the timed batches.",
        "",
        _row("selectivity", "Δ", "mat ms", "mat+Bloom ms", "probe ms", "probe+Bloom ms", "full DuckDB ms"),
        _row(*["---"] * 7),
    ]
    wins, total = 0, 0
    for rec in rows:
        for r in rec["runs"]:
            lines.append(
                _row(
                    f"{rec['selectivity'] * 100:g} %",
                    f"{r['delta']:,}",
                    _ms(r["imp_s"]),
                    _ms(r["mat_bloom_s"]),
                    _ms(r["probe_s"]),
                    _ms(r["probe_bloom_s"]),
                    _ms(r["full_duckdb_s"]),
                )
            )
            for plain, bloom in (("imp_s", "mat_bloom_s"), ("probe_s", "probe_bloom_s")):
                total += 1
                wins += r[bloom] < r[plain]
    stats = rows[0]["stats"].get("probe_bloom", {})
    filtered = stats.get("bloom_filtered", 0.0)
    probes = stats.get("bloom_probes", 0.0)
    v = (
        "reproduced"
        if wins == total
        else f"partly: Bloom filters were faster in {wins} of {total} pairs; they skip "
        f"{filtered:,.0f} of {probes:,.0f} probes at {rows[0]['selectivity'] * 100:g} % selectivity, but a "
        "skipped lookup here is a Python dict probe, about what a Bloom probe costs, not the paper's "
        "database round trip"
    )
    return [*lines, "", f"Paper (Fig. 10b/d): Bloom filters effective for every selectivity and Δ — {v}."]


def _selpd(report: Mapping[str, Any]) -> list[str]:
    rows = report.get("selpd")
    if not rows:
        return []
    lines = [
        f"### Selection push-down (Q_join 1-n, Δ = {rows[0]['delta']:,})",
        "",
        _run_line(report, "selpd"),
        "",
        _row("delta tuples passing WHERE", "push-down on ms", "push-down off ms", "off / on"),
        _row(*["---"] * 4),
    ]
    for r in rows:
        on, off = r["pushdown_on_s"], r["pushdown_off_s"]
        lines.append(_row(f"{r['fraction'] * 100:g} %", _ms(on), _ms(off), f"{off / on:.2f}"))
    wins = sum(r["pushdown_on_s"] <= r["pushdown_off_s"] for r in rows)
    v = (
        "reproduced"
        if wins == len(rows)
        else f"partly: push-down was faster at {wins} of {len(rows)} selectivities; here both variants "
        "evaluate the predicate once per delta tuple (push-down moves it below the join, where the paper's "
        "saves fetching rejected tuples from the database)"
    )
    return [*lines, "", f"Paper (Fig. 10c): push-down always pays off, its cost linear in selectivity — {v}."]


def _topm(report: Mapping[str, Any]) -> list[str]:
    rows = report.get("topm")
    if not rows:
        return []
    lines = [
        f"### Top-m memory (TPC-H Q10, {rows[0]['batches']} delete-only batches of {rows[0]['delta']} "
        "lineitems)",
        "",
        _run_line(report, "topm"),
        "",
        _row("m", "top-k state entries", "checkpointed bytes", "refills", "IMP ms per batch"),
        _row(*["---"] * 5),
    ]
    for r in rows:
        lines.append(
            _row(
                r["m"] or "all",
                f"{r['topk_entries']:,.0f}",
                f"{r['topk_state_bytes']:,}",
                f"{r['refills']:.0f}",
                _ms(r["imp_s"]),
            )
        )
    bounded = sorted((r for r in rows if r["m"]), key=lambda r: r["m"])
    full = next((r for r in rows if not r["m"]), None)
    sizes = [r["topk_entries"] for r in bounded] + ([full["topk_entries"]] if full else [])
    v = "reproduced" if all(a <= b for a, b in pairwise(sizes)) else "not reproduced"
    return [*lines, "", f"Paper (Fig. 10e/f): the top-k state shrinks with m — {v}."]


def _mixed(report: Mapping[str, Any]) -> list[str]:
    rows = report.get("mixed_instances")
    if not rows:
        return []
    r0 = rows[0]
    lines = [
        f"### Mixed workload with {r0['instances']} query instances ({r0['rows']:,} rows, {r0['operations']} "
        "operations, total seconds)",
        "",
        _run_line(report, "mixed_instances"),
        "",
        _row("ratio", "Δ", "imp", "full", "nosketch", "fastest", "paper: reproduced?"),
        _row(*["---"] * 7),
    ]
    for r in rows:
        exception = r["ratio"] == "5U1Q" and r["delta"] == max(x["delta"] for x in rows)
        expect = "not imp" if exception else "imp"
        ok = (r["fastest"] != "imp") if exception else (r["fastest"] == "imp")
        v = f"yes ({expect} fastest)" if ok else f"no: {r['fastest']} fastest where the paper has {expect}"
        lines.append(
            _row(
                r["ratio"],
                f"{r['delta']:,}",
                f"{r['imp_s']:.2f}",
                f"{r['full_s']:.2f}",
                f"{r['nosketch_s']:.2f}",
                r["fastest"],
                v,
            )
        )
    return [
        *lines,
        "",
        "Paper (Fig. 7): IMP fastest end to end except 5U1Q at Δ = 2,000, where five batches change the "
        "table between two queries.",
    ]


def _worker(report: Mapping[str, Any]) -> list[str]:
    w = report.get("worker_compare")
    if not w:
        return []
    return [
        f"### Through the worker (Q_having, {w['rows']:,} rows loaded then {w['updates']:,} updates, "
        f"batch size {w['batch_size']:,})",
        "",
        _run_line(report, "worker_compare"),
        "",
        _row("strategy", "seconds to caught up", "events/s", "checkpoints"),
        _row(*["---"] * 4),
        *[
            _row(
                s, f"{w[s]['seconds']:.2f}", f"{w[s]['events_per_second']:,.0f}", f"{w[s]['checkpoints']:.0f}"
            )
            for s in ("imp", "full")
        ],
        "",
        f"imp is {w['speedup']:.2f}x full through the worker: every batch also answers the query over the "
        "sketch for the output record, which both strategies pay.",
    ]


def _goals(report: Mapping[str, Any]) -> list[str]:
    """The issue's two goals, read off the stored run."""
    h, t = report.get("having_big"), report.get("tpch_big")
    if not h and not t:
        return []
    lines = ["### Goals", ""]
    if h:
        r = next((x for x in h["runs"] if x["delta"] == 1000), h["runs"][-1])
        wall, cpu = r["speedup_duckdb"], r.get("speedup_duckdb_cpu")
        if cpu is None:
            met = "met" if wall >= 20 else "not met"
        elif wall >= 20 and cpu >= 20:
            met = "met by both ratios"
        elif wall >= 20:
            met = f"met by wall clock, not by the conservative CPU ratio ({cpu:.1f}x)"
        else:
            met = "not met"
        cpu_text = "" if cpu is None else f", {cpu:.1f}x by CPU"
        load = _load(report.get("sections", {}).get("having_big", {}).get("loadavg_start"))
        lines.append(
            f"* Q_having over {h['rows']:,} rows at Δ = {r['delta']:,}: IMP {wall:.1f}x the DuckDB recapture "
            f"by wall clock{cpu_text} (load {load} at the start). Goal ≥ 20x: {met}."
        )
    if t:
        worst = min((_best_measure(r), q["query"], r["delta"]) for q in t["queries"] for r in q["runs"])
        below = sorted({q["query"] for q in t["queries"] for r in q["runs"] if _best_measure(r) < 3.9})
        met = "met on every query" if not below else f"not met for {', '.join(below)}"
        lines.append(
            f"* TPC-H at SF {t['sf']}, Δ ≤ 100: the smallest speed-up over the DuckDB recapture is "
            f"{worst[0]:.1f}x ({worst[1]}, Δ = {worst[2]}). Goal ≥ 3.9x: {met}."
        )
    return lines


def paper_markdown(report: Mapping[str, Any]) -> str:
    parts = [
        _goals,
        _having_big,
        _having_note,
        _slope,
        _tpch_big,
        _crimes,
        _joins,
        _joinsel,
        _selpd,
        _topm,
        _mixed,
        _worker,
    ]
    lines: list[str] = []
    for part in parts:
        chunk = part(report)
        if chunk:
            lines += ["", *[x for x in chunk if x is not None]]
    return "\n".join(lines)
