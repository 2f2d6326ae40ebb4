"""The tables of the IMP paper's experiments in docs/sketches/benchmark.md, printed from a stored report
alone; every row states whether the paper's direction and rough magnitude are reproduced, and why not
where not. A section absent from the report prints nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import pairwise
from typing import Any

PAPER_BREAKEVEN = (3.5, 5.5)  # % of the table, Q_groups (Fig. 9b)
WHY_PYTHON = "per-tuple Python against a vectorised C++ recapture (the paper: C against PostgreSQL)"


def _row(*cells: Any) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


Record = Mapping[str, Any]
Column = tuple[str, Callable[[Record], Any]]  # header, and the cell of a record


def table(columns: Sequence[Column], records: Iterable[Record]) -> list[str]:
    """A markdown table: the header, the separator, one row per record."""
    return [
        _row(*(head for head, _ in columns)),
        _row(*["---"] * len(columns)),
        *(_row(*(cell(r) for _, cell in columns)) for r in records),
    ]


def runs_of(parents: Iterable[Record], key: str = "runs") -> Iterator[Record]:
    """Each run with its parent's fields (query, partition, ...) beside its own."""
    for p in parents:
        for r in p[key]:
            yield {**p, **r}


def _ms(s: float) -> str:
    return f"{s * 1e3:.2f}"


def _load(values: Sequence[float] | None) -> str:
    return "?" if not values else " / ".join(f"{v:.1f}" for v in values)


def _run_line(report: Mapping[str, Any], name: str) -> str:
    """The section's run; a section merged from several runs (TPC-H by query) names each with its queries."""
    run = report.get("sections", {}).get(name)
    if not run:
        return ""
    if "runs" in run:
        return " ".join(f"Run for {', '.join(r['queries'])}: {_one_run(r)}" for r in run["runs"])
    return f"Run: {_one_run(run)}"


def _one_run(run: Mapping[str, Any]) -> str:
    return (
        f"`{run['command']}`, load average {_load(run['loadavg_start'])} at the start and "
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


def _delta(r: Record) -> str:
    return f"{r['delta']:,}"


def python_s(digits: int) -> Column:
    return ("full Python s", lambda r: f"{r['full_python_s']:.{digits}f}")


DELTA: Column = ("Δ", _delta)
IMP_MS: Column = ("IMP ms", lambda r: _ms(r["imp_s"]))
DUCKDB_MS: Column = ("full DuckDB ms", lambda r: _ms(r["full_duckdb_s"]))
X_DUCKDB: Column = ("x DuckDB", lambda r: f"{r['speedup_duckdb']:.1f}")
X_DUCKDB_CPU: Column = ("x DuckDB (CPU)", _cpu)
X_PYTHON: Column = ("x Python", lambda r: f"{r['speedup_python']:.0f}")


CPU_NOTE = (
    "x DuckDB (CPU): DuckDB's CPU seconds divided by its 2 threads (its wall time if perfectly parallel) "
    "over IMP's CPU seconds; unlike the wall-clock ratio it does not move with the machine's load, and it "
    "is the ratio the verdict uses where recorded."
)


def crossings(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Where IMP's time meets each baseline's, interpolated (log-log) between the measured Δ."""
    out: dict[str, Any] = {}
    for base in ("full_python_s", "full_duckdb_s"):
        cross = None
        for lo, hi in pairwise(runs):
            r_lo, r_hi = lo["imp_s"] / lo[base], hi["imp_s"] / hi[base]
            if r_lo < 1 <= r_hi:
                t = -math.log(r_lo) / (math.log(r_hi) - math.log(r_lo))
                cross = math.exp(math.log(lo["delta"]) + t * (math.log(hi["delta"]) - math.log(lo["delta"])))
                break
        key = "breakeven_" + base.removeprefix("full_").removesuffix("_s")
        out[key] = cross
        out[key + "_note"] = (
            None
            if cross
            else (
                "IMP faster at every measured Δ"
                if runs[-1]["imp_s"] < runs[-1][base]
                else "IMP slower at every measured Δ"
            )
        )
    return out


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


def _having_big(h: Any) -> tuple[str, list[str]]:
    title = f"### Q_having at {h['rows']:,} rows (G = {h['groups']:,}, {h['aggregates']} aggregates)"
    lines = [
        f"Bootstrap {h['bootstrap_s']:.0f} s; peak resident memory {h['rss_gb']:.1f} GB.",
        "",
        *table(
            [
                DELTA,
                IMP_MS,
                DUCKDB_MS,
                python_s(1),
                X_DUCKDB,
                X_DUCKDB_CPU,
                X_PYTHON,
                ("paper ≈100x: reproduced?", lambda r: _verdict(_best_measure(r), 100)),
            ],
            h["runs"],
        ),
    ]
    return title, lines


def _having_note(report: Mapping[str, Any]) -> list[str]:
    return [CPU_NOTE] if report.get("having_big") else []


def _imp_at(delta: int) -> Callable[[Record], str]:
    return lambda c: next(_ms(r["imp_s"]) for r in c["runs"] if r["delta"] == delta)


def _duckdb_at(delta: int) -> Callable[[Record], str]:
    def cell(c: Record) -> str:
        duck = next((r["full_duckdb_s"] for r in c["runs"] if r["delta"] == delta), None)
        return _ms(duck) if duck is not None else "—"

    return cell


def _slope(s: Any) -> tuple[str, list[str]]:
    cfgs = s["configs"]
    deltas = [r["delta"] for r in cfgs[0]["runs"]]
    title = f"### Cost against the number of aggregates (Q_having, {s['rows']:,} rows, G = {s['groups']:,})"
    lines = [
        f"Engines timed round-robin, {s['rounds']} rounds; slope = least-squares fit of IMP's per-batch "
        "time on Δ.",
        "",
        *table(
            [
                ("aggregates", lambda c: c["aggregates"]),
                *[(f"IMP ms Δ={d}", _imp_at(d)) for d in deltas],
                ("slope µs/tuple", lambda c: f"{c['slope_us_per_tuple']:.1f}"),
                ("full Python s", lambda c: f"{c['full_python_s']:.2f}"),
                ("DuckDB ms Δ=1000", _duckdb_at(max(deltas))),
            ],
            cfgs,
        ),
    ]
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
    return title, [
        *lines,
        "",
        f"Paper (Fig. 8a): IMP linear in Δ with a slope that grows with #aggregates — {verdict}.",
    ]


NO_PYTHON = (
    "No Python recapture at this size (its captures take longer than the run's budget); each IMP sketch "
    "is checked against the DuckDB capture after the query's batches."
)


def _tpch_big(t: Any) -> tuple[str, list[str]]:
    title = f"### TPC-H at SF {t['sf']} ({t['lineitem_rows']:,} lineitems, Δ ≤ 100)"
    python = all("full_python_s" in r for r in runs_of(t["queries"]))
    lines = [
        f"Peak resident memory {t['rss_gb']:.1f} GB." + ("" if python else f" {NO_PYTHON}"),
        "",
        *table(
            [
                ("query", lambda r: r["query"]),
                ("safety", lambda r: r["safety"]),
                DELTA,
                IMP_MS,
                DUCKDB_MS,
                *([python_s(1)] if python else []),
                X_DUCKDB,
                X_DUCKDB_CPU,
                ("paper ≥ 3.9x: reproduced?", lambda r: _verdict(_best_measure(r), 3.9, 3.9)),
            ],
            runs_of(t["queries"]),
        ),
    ]
    worst = min(_best_measure(r) for q in t["queries"] for r in q["runs"])
    return title, [
        *lines,
        "",
        CPU_NOTE,
        f"Smallest speed-up over the DuckDB recapture: {worst:.1f}x (the paper's floor 3.9x).",
    ]


def _crimes(c: Any) -> tuple[str, list[str]]:
    title = f"### Crimes-shaped workload ({c['rows']:,} rows, CQ2 threshold {c['threshold']:,})"
    lines = [
        "",
        *table(
            [
                ("query", lambda r: r["query"]),
                ("partition", lambda r: r["partition"]),
                DELTA,
                IMP_MS,
                DUCKDB_MS,
                python_s(2),
                X_DUCKDB,
                X_PYTHON,
                ("paper ≥ 100x: reproduced?", lambda r: _verdict(r["speedup_duckdb"], 100, 100)),
            ],
            runs_of(c["queries"]),
        ),
        "",
        "#### Range partitions of `beat` (CQ2, 100 ranges asked)",
        "",
        *table(
            [
                ("partition", lambda p: p["partition"]),
                ("fragments", lambda p: p["fragments"]),
                ("sketch fragments", lambda p: p["sketch_fragments"]),
                ("rows scanned", lambda p: f"{p['rows_scanned']:,}"),
                ("% of table", lambda p: f"{p['rows_scanned'] / p['rows_total'] * 100:.1f}"),
                (
                    f"IMP ms Δ={c['partitions'][0]['runs'][-1]['delta']:,}",
                    lambda p: _ms(p["runs"][-1]["imp_s"]),
                ),
            ],
            c["partitions"],
        ),
    ]
    return title, lines


def _join_name(r: Record) -> str:
    return f"1-{r['n']:,}" if r["m"] is None else f"{r['m']}-{r['n']:,}"


def _joins(j: Any) -> tuple[str, list[str]]:
    title = f"### Q_join 1-n and m-n ({j['rows']:,} fact rows)"
    lines = [
        "",
        *table(
            [
                ("join", _join_name),
                ("G", lambda r: f"{r['groups']:,}"),
                DELTA,
                IMP_MS,
                DUCKDB_MS,
                python_s(2),
                X_DUCKDB,
            ],
            runs_of([*({**rec, "m": None} for rec in j["one_n"]), *j["m_n"]]),
        ),
    ]

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
    return title, [
        *lines,
        "",
        f"Paper (Fig. 8c): the 1-n join with the most groups (1-20) is the slowest — {v1}. "
        f"Paper (Fig. 8d): 50-2K slower than 20-2K (more join partners per delta tuple) — {v2}.",
    ]


BLOOM_COLUMNS = (
    ("mat+Bloom ms", "mat_bloom_s"),
    ("probe ms", "probe_s"),
    ("probe+Bloom ms", "probe_bloom_s"),
)
BLOOM_PAIRS = (("imp_s", "mat_bloom_s"), ("probe_s", "probe_bloom_s"))


def _ms_of(key: str) -> Callable[[Record], str]:
    return lambda r: _ms(r[key])


def _paper(claim: str, ok: bool, otherwise: str) -> list[str]:
    """The paper's claim (figure and statement) and whether the run reproduces it."""
    return ["", f"Paper ({claim} — {'reproduced' if ok else otherwise}."]


def _joinsel(rows: Any) -> tuple[str, list[str]]:
    title = (
        f"### Join selectivity and Bloom filters (Q_join 1-n, {rows[0]['rows']:,} fact rows, "
        f"G = {rows[0]['groups']:,})"
    )
    lines = [
        "Materialised (mat) and probe joins, Bloom filters off and on, fed the same batches; lookups and "
        "Bloom-filtered keys counted over the timed batches.",
        "",
        *table(
            [
                ("selectivity", lambda r: f"{r['selectivity'] * 100:g} %"),
                DELTA,
                ("mat ms", lambda r: _ms(r["imp_s"])),
                *[(head, _ms_of(key)) for head, key in BLOOM_COLUMNS],
                DUCKDB_MS,
            ],
            runs_of(rows),
        ),
    ]
    pairs = [(r[plain], r[bloom]) for r in runs_of(rows) for plain, bloom in BLOOM_PAIRS]
    wins, total = sum(b < p for p, b in pairs), len(pairs)
    stats = rows[0]["stats"].get("probe_bloom", {})
    filtered = stats.get("bloom_filtered", 0.0)
    probes = stats.get("bloom_probes", 0.0)
    why = (
        f"partly: Bloom filters were faster in {wins} of {total} pairs; they skip {filtered:,.0f} of "
        f"{probes:,.0f} probes at {rows[0]['selectivity'] * 100:g} % selectivity, but a skipped lookup here "
        "is a Python dict probe, about what a Bloom probe costs, not the paper's database round trip"
    )
    return title, [
        *lines,
        *_paper("Fig. 10b/d): Bloom filters effective for every selectivity and Δ", wins == total, why),
    ]


def _selpd(rows: Any) -> tuple[str, list[str]]:
    title = f"### Selection push-down (Q_join 1-n, Δ = {rows[0]['delta']:,})"
    lines = [
        "",
        *table(
            [
                ("delta tuples passing WHERE", lambda r: f"{r['fraction'] * 100:g} %"),
                ("push-down on ms", _ms_of("pushdown_on_s")),
                ("push-down off ms", _ms_of("pushdown_off_s")),
                ("off / on", lambda r: f"{r['pushdown_off_s'] / r['pushdown_on_s']:.2f}"),
            ],
            rows,
        ),
    ]
    wins = sum(r["pushdown_on_s"] <= r["pushdown_off_s"] for r in rows)
    why = (
        f"partly: push-down was faster at {wins} of {len(rows)} selectivities; here both variants "
        "evaluate the predicate once per delta tuple (push-down moves it below the join, where the paper's "
        "saves fetching rejected tuples from the database)"
    )
    claim = "Fig. 10c): push-down always pays off, its cost linear in selectivity"
    return title, [*lines, *_paper(claim, wins == len(rows), why)]


def _topm(rows: Any) -> tuple[str, list[str]]:
    title = (
        f"### Top-m memory (TPC-H Q10, {rows[0]['batches']} delete-only batches of {rows[0]['delta']} "
        "lineitems)"
    )
    lines = [
        "",
        *table(
            [
                ("m", lambda r: r["m"] or "all"),
                ("top-k state entries", lambda r: f"{r['topk_entries']:,.0f}"),
                ("checkpointed bytes", lambda r: f"{r['topk_state_bytes']:,}"),
                ("refills", lambda r: f"{r['refills']:.0f}"),
                ("IMP ms per batch", _ms_of("imp_s")),
            ],
            rows,
        ),
    ]
    bounded = sorted((r for r in rows if r["m"]), key=lambda r: r["m"])
    full = next((r for r in rows if not r["m"]), None)
    sizes = [r["topk_entries"] for r in bounded] + ([full["topk_entries"]] if full else [])
    shrinks = all(a <= b for a, b in pairwise(sizes))
    return title, [*lines, *_paper("Fig. 10e/f): the top-k state shrinks with m", shrinks, "not reproduced")]


def _seconds_of(key: str) -> Callable[[Record], str]:
    return lambda r: f"{r[key]:.2f}"


def _mixed_verdict(r: Record, largest: int) -> str:
    """The paper's exception: 5U1Q at the largest Δ, where IMP is not fastest."""
    exception = r["ratio"] == "5U1Q" and r["delta"] == largest
    expect = "not imp" if exception else "imp"
    ok = (r["fastest"] != "imp") if exception else (r["fastest"] == "imp")
    return f"yes ({expect} fastest)" if ok else f"no: {r['fastest']} fastest where the paper has {expect}"


def _mixed(rows: Any) -> tuple[str, list[str]]:
    r0 = rows[0]
    largest = max(x["delta"] for x in rows)
    title = (
        f"### Mixed workload with {r0['instances']} query instances ({r0['rows']:,} rows, {r0['operations']} "
        "operations, total seconds)"
    )
    lines = [
        "",
        *table(
            [
                ("ratio", lambda r: r["ratio"]),
                DELTA,
                *[(k, _seconds_of(f"{k}_s")) for k in ("imp", "full", "nosketch")],
                ("fastest", lambda r: r["fastest"]),
                ("paper: reproduced?", lambda r: _mixed_verdict(r, largest)),
            ],
            rows,
        ),
    ]
    return title, [
        *lines,
        "",
        "Paper (Fig. 7): IMP fastest end to end except 5U1Q at Δ = 2,000, where five batches change the "
        "table between two queries.",
    ]


def _worker(w: Any) -> tuple[str, list[str]]:
    title = (
        f"### Through the worker (Q_having, {w['rows']:,} rows loaded then {w['updates']:,} updates, "
        f"batch size {w['batch_size']:,})"
    )
    return title, [
        "",
        *table(
            [
                ("strategy", lambda s: s["strategy"]),
                ("seconds to caught up", _seconds_of("seconds")),
                ("events/s", lambda s: f"{s['events_per_second']:,.0f}"),
                ("checkpoints", lambda s: f"{s['checkpoints']:.0f}"),
            ],
            [{**w[s], "strategy": s} for s in ("imp", "full")],
        ),
        "",
        f"imp is {w['speedup']:.2f}x full through the worker: every batch also answers the query over the "
        "sketch for the output record, which both strategies pay.",
    ]


def _goals(report: Mapping[str, Any]) -> list[str]:
    """The issue's two goals, read off the stored run."""
    h = report.get("having_big")
    tpch = [report[k] for k in TPCH_SECTIONS if report.get(k)]
    if not h and not tpch:
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
    every = [q["query"] for t in tpch for q in t["queries"]]
    for t in tpch:
        done = [q["query"] for q in t["queries"]]
        missing = [q for q in dict.fromkeys(every) if q not in done]
        worst = min((_best_measure(r), r["query"], r["delta"]) for r in runs_of(t["queries"]))
        below = sorted({r["query"] for r in runs_of(t["queries"]) if _best_measure(r) < 3.9})
        met = f"not met for {', '.join(below)}" if below else "met on every query run"
        if not below and not missing:
            met = f"met on every one of the {len(done)} queries"
        unrun = f" Not finished in the run: {', '.join(missing)}." if missing else ""
        count = f"{len(done)} quer{'y' if len(done) == 1 else 'ies'}"
        lines.append(
            f"* TPC-H at SF {t['sf']}, Δ ≤ 100 ({count}): the smallest speed-up over the DuckDB "
            f"recapture is {worst[0]:.1f}x ({worst[1]}, Δ = {worst[2]}). Goal ≥ 3.9x: {met}.{unrun}"
        )
    return lines


TPCH_SECTIONS = ("tpch_big", "tpch_sf1")


SECTIONS = {  # report key -> its section, in the page's order
    "having_big": _having_big,
    "slope": _slope,
    "tpch_big": _tpch_big,
    "tpch_sf1": _tpch_big,
    "crimes": _crimes,
    "joins": _joins,
    "joinsel": _joinsel,
    "selpd": _selpd,
    "topm": _topm,
    "mixed_instances": _mixed,
    "worker_compare": _worker,
}


def _section(report: Mapping[str, Any], name: str) -> list[str]:
    """A stored section's title, the line of its run, and its body; nothing for an absent section."""
    if not report.get(name):
        return []
    title, body = SECTIONS[name](report[name])
    return [title, "", _run_line(report, name), *body]


def paper_markdown(report: Mapping[str, Any]) -> str:
    chunks = [_goals(report)]
    for name in SECTIONS:
        chunks.append(_section(report, name))
        if name == "having_big":
            chunks.append(_having_note(report))
    lines: list[str] = []
    for chunk in chunks:
        if chunk:
            lines += ["", *[x for x in chunk if x is not None]]
    return "\n".join(lines)
