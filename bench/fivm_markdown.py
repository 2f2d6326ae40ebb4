"""docs/fivm/benchmark.md's section, printed from a stored report alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from bench.fivm_experiments import (
    E1_STRATEGIES,
    E6_ONE,
    E8_STRATEGIES,
    FIVM_FACTORIZED,
    FIVM_PER_TUPLE,
    FIVM_PER_TUPLE_DENSE,
)
from bench.fivm_markdown_paper import provenance, ratio, sections, verdict
from bench.fivm_runs import BATCH
from bench.fivm_summary import summarize

E1_WHY = "the paper's figure is at s = 20, where the fan-out is 18; the gap grows with it"
E3_WHY = "the paper's gap grows with n, 16x at n = 256 to 236x at n = 16,384"


def _octave(n: int, got: float | None) -> str:
    """The paper's Octave gap is given at n = 256 (16x) and n = 16,384 (236x) only; between, its curve."""
    if n == 256 or got is None:
        return verdict(got, 16.0, E3_WHY)
    if 16.0 <= got <= 236.0:
        return f"yes ({_x(got)}, between the paper's 16x at n = 256 and 236x at n = 16,384)"
    return verdict(got, 16.0 if got < 16 else 236.0, E3_WHY)


HASH_WHY = "the paper's 28x is at n = 256; the gap grows with n"
E4_WHY = "dbt-ring's trigger computes more ring products, see below"
E6_WHY = "1-IVM's per-update cost grows with N; the paper's N is 1M edges per relation"
E8_WHY = "the listing grows with the cube of the fan-out; the paper's figure is at s = 20"


def _tail_rate(rec: Mapping[str, Any]) -> float | None:
    """The rate over the last stretch of a run's series (its last two samples)."""
    pts = rec["series"]
    if len(pts) < 2 or pts[-1][1] <= pts[-2][1]:
        return None
    return float((pts[-1][0] - pts[-2][0]) / (pts[-1][1] - pts[-2][1]))


def _decline(rec: Mapping[str, Any]) -> float | None:
    """How much slower a run's last stretch is than its first sample (0.4: 40% slower)."""
    end = _tail_rate(rec)
    first = rec["series"][0]
    return None if end is None else 1 - end / (first[0] / first[1])


def _e6_against_paper(rows: list[dict[str, Any]]) -> list[str]:
    """The paper's Figure 11 statements against the largest N: F-IVM above DBT-RING, which keeps 2.3x
    F-IVM's peak memory, 1-IVM declining 42% over the trace, F-IVM declining sharply."""
    r = rows[-1]
    runs = r["runs"]
    fv, dr, first = runs["fivm"], runs["dbt-ring"], runs["1-ivm"]
    mem = dr["stored_bytes"] / fv["stored_bytes"]
    above = ratio(runs, "fivm", "dbt-ring")
    mem_why = (
        "dbt-ring timed out, so this is the memory of the prefix it processed" if dr["timed_out"] else ""
    )
    out = [
        f"Against the paper's Figure 11 at N = {r['edges_per_relation']:,}:",
        "",
        "| the paper | measured |",
        "|---|---|",
        f"| F-IVM above DBT-RING (no number given) | fivm / dbt-ring {_x(above)}: "
        + ("direction reproduced |" if above and above > 1 else "not reproduced |"),
        f"| DBT-RING keeps 2.3x F-IVM's peak memory | stored bytes: {verdict(mem, 2.3, mem_why)} |",
    ]
    for label, rec, paper in (
        ("1-IVM", first, "declines 42% over the trace"),
        ("F-IVM", fv, "declines sharply"),
    ):
        d = _decline(rec)
        cell = "not measured"
        if d is not None:
            cell = f"{d:.0%} slower at the end of its run than at its start" + (
                " (a prefix: it timed out)" if rec["timed_out"] else ""
            )
            cell += ": direction reproduced" if d > 0 else ": not reproduced"
        out.append(f"| {label}'s throughput {paper} | {cell} |")
    return out


def _fmt_rate(rec: Mapping[str, Any] | None) -> str:
    if rec is None:
        return "-"
    r = rec["tuples_per_second"]
    cell = f"{r:,.0f}"
    if rec["timed_out"]:
        cell += f" (timed out at {rec['processed'] / rec['tuples']:.0%})"
    return cell


def _x(v: float | None) -> str:
    return "-" if v is None else (f"{v:,.1f}x" if v < 100 else f"{v:,.0f}x")


def _ms(rec: Mapping[str, Any], digits: int = 2) -> str:
    return f"{rec['min_seconds'] * 1e3:,.{digits}f} ms"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _met(flag: bool) -> str:
    return "**met**" if flag else "**not met**"


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    # The ratios and goals are derived from the stored runs here, so a section replaced by --update and
    # the summary can never disagree.
    s = orjson.loads(orjson.dumps(summarize(report), option=orjson.OPT_NON_STR_KEYS))
    o = report["options"]
    noisy = (
        "; the machine was shared, so absolute rates are noisy and the ratios, measured back to back, "
        "are what to read"
        if m["loadavg_1_5_15"][0] > 1
        else ""
    )
    lines = [
        "## F-IVM against its baselines (`bench/fivm.py`)",
        "",
        f"Command: `.venv/bin/python bench/fivm.py` (the strategies of docs/fivm/baselines.md in "
        f"`FivmEngine`, round-robin streams in batches of {BATCH:,} tuples, a {o['budget']:g} s budget per "
        "strategy and case after which the throughput over the processed prefix is reported as *timed out*; "
        f"runs shorter than {o['repeats']['below_seconds']:g} s are repeated, best of up to "
        f"{o['repeats']['runs']:g}). "
        "Results: `bench/results/fivm.json`, `bench/results/fivm.png`. Each section names the run it comes "
        "from; the full run is "
        f"`{report['run_id']}` ({m['cpu_count']} CPUs, {m['cpu_model']}, Python {m['python']}, "
        f"{report['seconds'] / 60:.1f} min, load average {m['loadavg_1_5_15'][0]} at the end{noisy}). "
        + (
            "Each experiment, and each E8 scale, ran in a fresh process, and each timed run starts on a "
            "collected, frozen heap, so no case inherits what an earlier one left in memory."
            if "--in-process" not in report["command"]
            else "All cases ran in one process (`--in-process`)."
        ),
        "",
        "Every strategy of a case gives the same result (counts exactly, floats within a relative 1e-9; a "
        "timed-out run is compared with the reference strategy on the same prefix), and the reference is "
        "checked against a closed form (Housing: Σ p² · fan-out³, join size postcodes · fan-out³) or a "
        "brute-force triangle count. Throughput is tuples over total time (all relations counted); "
        "stored entries and bytes are the engine's state entries as it encodes them, a deterministic memory "
        f"measure. Housing uses {o['postcodes']:,} postcodes (E1), {o['e4_postcodes']:,} (E4) and "
        f"{o['e8_postcodes']:,} (E8) instead of 25,000, to fit the run in minutes; at scale s three "
        "relations hold max(1, ⌊0.9·s + 0.5⌋) rows per postcode (`bench/fivm_data.py`).",
    ]
    if report.get("e1"):
        lines += [
            "",
            "### E1: SUM(postcode²) over the Housing join",
            "",
            provenance(report, "e1"),
            "",
            "| s | tuples | " + " | ".join(E1_STRATEGIES) + " | fivm / 1-ivm | fivm / dbt | fivm / f-re "
            "| fivm / 1-ivm against the paper's 9.5x at s = 20 |",
            "|---|---|" + "---|" * (len(E1_STRATEGIES) + 4),
        ]
        for r in report["e1"]:
            sc = r["scale"]
            lines.append(
                f"| {sc} | {r['tuples']:,} | "
                + " | ".join(_fmt_rate(r["runs"].get(st)) for st in E1_STRATEGIES)
                + f" | {_x(s['e1_fivm_over_1ivm'][str(sc)])} | {_x(s['e1_fivm_over_dbt'][str(sc)])} "
                f"| {_x(s['e1_fivm_over_fre'][str(sc)])} "
                f"| {verdict(s['e1_fivm_over_1ivm'][str(sc)], 9.51, E1_WHY)} |"
            )
    if report.get("e1_shuffled"):
        lines += [
            "",
            "The same query with every relation's rows shuffled (the generator lists a postcode's rows "
            "together, as the F-IVM authors' published scale-1 Housing files do, and the stream keeps "
            "each relation's order; so a batch of the stream above holds about 1,000 / fan-out "
            "postcodes, and `1-ivm`, which evaluates each other relation once per distinct postcode in a "
            "batch, shares that work among them):",
            "",
            "| s | fivm | dbt | 1-ivm | fivm / 1-ivm | fivm / dbt |",
            "|---|---|---|---|---|---|",
        ]
        for r in report["e1_shuffled"]:
            sc = str(r["scale"])
            lines.append(
                f"| {sc} | "
                + " | ".join(_fmt_rate(r["runs"].get(st)) for st in ("fivm", "dbt", "1-ivm"))
                + f" | {_x(s['e1_shuffled_fivm_over_1ivm'][sc])} | {_x(s['e1_shuffled_fivm_over_dbt'][sc])} |"
            )
    for key in ("goal_e1", "goal_e1_shuffled"):
        if key in s:
            g = s[key]
            lines += [
                "",
                f"Goal: {g['text']}: {_met(g['met'])} ({_x(g['value'])}; larger than at the smallest s: "
                f"{_yes(g['growing'])}; growing at every step: {_yes(g['monotonic'])}).",
            ]
    e3 = report.get("e3") or {}
    if e3.get("rows"):
        lines += [
            "",
            "### E3: matrix chain A = A1·A2·A3, updates to A2",
            "",
            "Dense numpy variant (single-threaded OpenBLAS), per-update time (the fastest of "
            f"{e3['rows'][0]['fivm']['updates']} updates; the JSON has the medians too): re-evaluation "
            "`A1·A2·A3`, first-order IVM "
            "`A += A1·δA2·A3` with δA2 as a full matrix, F-IVM `A += (A1·u)(vᵀ·A3)`. Final results equal a "
            "fresh product within 1e-9.",
            "",
            provenance(report, "e3"),
            "",
            "| n | reeval | 1-ivm | fivm | fivm / 1-ivm | fivm / reeval "
            "| fivm / 1-ivm against the paper's Octave |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in e3["rows"]:
            got = s["e3_row_fivm_over_1ivm"][str(r["n"])]
            lines.append(
                f"| {r['n']:,} | {_ms(r['reeval'])} | {_ms(r['1-ivm'])} | {_ms(r['fivm'], 3)} "
                f"| {_x(got)} "
                f"| {_x(s['e3_row_fivm_over_reeval'][str(r['n'])])} "
                f"| {_octave(r['n'], got)} |"
            )
        if e3.get("ranks"):
            lines += [
                "",
                f"Rank-r updates `δA2 = U·Vᵀ` at n = {e3['ranks'][0]['n']:,}:",
                "",
                "| r | reeval | 1-ivm | fivm |",
                "|---|---|---|---|",
            ]
            for r in e3["ranks"]:
                lines.append(
                    f"| {r['rank']} | {_ms(r['reeval'])} | {_ms(r['1-ivm'])} | {_ms(r['fivm'], 3)} |"
                )
            fit = s["e3_rank_fit"]
            if fit:
                lines += [
                    "",
                    f"F-IVM's time fits {fit['intercept_seconds'] * 1e3:.3f} ms "
                    f"+ r · {fit['slope_seconds_per_rank'] * 1e3:.3f} ms "
                    f"(R² = {fit['r2']:.3f}); "
                    + (
                        f"it is slower than 1-IVM from r = {s['e3_rank_fivm_slower_than_1ivm_from']}."
                        if s["e3_rank_fivm_slower_than_1ivm_from"]
                        else "it stays faster than 1-IVM at every measured r."
                    ),
                ]
        if e3.get("hashmap"):
            lines += [
                "",
                "Hash-map variant through the engine (`ring: matrix`, integer entries as multiplicities, "
                "A1 and A3 static), time per one-row update of A2: as n tuple events (every strategy), and "
                "as one factorized event `A2:factorized` with the factors e_i ⊗ v "
                "(docs/fivm/algorithm.md §2.13), which F-IVM propagates without expanding "
                f"(`{FIVM_FACTORIZED}`; the same final result):",
                "",
                f"| n | fivm | 1-ivm-ring | reeval | {FIVM_FACTORIZED} | {FIVM_FACTORIZED} / 1-ivm-ring "
                "| against the paper's hash maps |",
                "|---|---|---|---|---|---|---|",
            ]
            for r in e3["hashmap"]:
                runs = r["runs"]
                cells = [
                    f"{runs[k]['seconds_per_row_update'] * 1e3:,.1f} ms" if k in runs else "-"
                    for k in ("fivm", "1-ivm-ring", "reeval", FIVM_FACTORIZED)
                ]
                fac = runs.get(FIVM_FACTORIZED)
                gain = (
                    runs["1-ivm-ring"]["seconds_per_row_update"] / fac["seconds_per_row_update"]
                    if fac
                    else None
                )
                lines.append(
                    f"| {r['n']} | "
                    + " | ".join(cells)
                    + f" | {_x(gain)} | {verdict(gain, 28.0, HASH_WHY)} |"
                )
            lines += [
                "",
                "`reeval` is fastest here because the engine's `reeval` strategy multiplies dense numpy "
                "matrices while `fivm` and `1-ivm-ring` join hash maps entry by entry in Python; the paper's "
                "hash-map runtime is C++ for all three.",
            ]
        g = s["goal_e3"]
        lines += [
            "",
            f"Goal: {g['text']}: {_met(g['met'])} ({_x(g['value'])} at the largest n; rank fit R² "
            f"{g['rank_fit_r2']:.3f}).",
        ]
    if report.get("e4"):
        labels = ["fivm", FIVM_PER_TUPLE, FIVM_PER_TUPLE_DENSE, "sql-opt", "dbt-ring", "dbt", "1-ivm"]
        lines += [
            "",
            "### E4: covariance (cofactor ring) over the Housing join",
            "",
            "Throughput (tuples/s), then views and stored entries / bytes per strategy. `dbt` and `1-ivm` "
            "run one query per aggregate (1 + m + m(m+1)/2 of them). Execution and payloads: `fivm` runs "
            "relation deltas in columns (docs/fivm/algorithm.md §2.14), the service's default, with block "
            "payloads (each view stores its own variables' block, docs/fivm/rings.md §2); `fivm per-tuple` "
            "is the same strategy per tuple with block payloads; `fivm per-tuple dense` per tuple with the "
            "dense payloads (count, m sums, the full m-by-m matrix) that `dbt-ring` keeps. Every baseline "
            "runs per tuple: no baseline has a column execution, so the like-for-like comparison is per "
            "tuple on both sides, and `fivm per-tuple dense / dbt-ring` is the one with the same payloads "
            "too. On Housing the paper's F-IVM and DBT-RING use the same 7-view strategy, so that ratio "
            "should be near 1x.",
            "",
            provenance(report, "e4"),
            "",
            "| s | m | "
            + " | ".join(labels)
            + " | fivm / dbt | fivm / dbt-ring (columns, block / per tuple, dense) "
            "| per tuple, both dense: fivm / dbt-ring | fivm / sql-opt |",
            "|---|---|" + "---|" * (len(labels) + 4),
        ]
        for r in report["e4"]:
            k = f"s={r['scale']},m={r['m']}"
            fair = ratio(r["runs"], FIVM_PER_TUPLE_DENSE, "dbt-ring")
            lines.append(
                f"| {r['scale']} | {r['m']} | "
                + " | ".join(_fmt_rate(r["runs"].get(st)) for st in labels)
                + f" | {_x(s['e4_fivm_over_dbt'].get(k))} | {_x(s['e4_fivm_over_dbtring'].get(k))} "
                f"| {_x(fair)}: {verdict(fair, 1.0, E4_WHY)} "
                f"| {_x(s['e4_fivm_over_sqlopt'].get(k))} |"
            )
        lines += ["", "| s | m | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
        for r in report["e4"]:
            cells = []
            for st in labels:
                rec = r["runs"].get(st)
                cells.append(
                    "-"
                    if rec is None
                    else f"{rec['views']} views, {rec['stored_entries']:,} / "
                    f"{rec['stored_bytes'] / 1e6:,.1f} MB"
                )
            lines.append(f"| {r['scale']} | {r['m']} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "Why `fivm per-tuple dense` still beats `dbt-ring` with the same payloads, per tuple, on the "
            "same 7 views: dbt-ring's trigger computes 3.7x the ring products of fivm's (123,000 against "
            "33,000 for the 18,000 tuples at s = 1, m = 6, counted by wrapping the dense ring's product). "
            "The `fivm / dbt-ring` column adds to that the payload representation (block against dense, "
            "5x to 18x fewer stored bytes) and column execution; it is not the algorithm's gap alone.",
        ]
        g = s["goal_e4"]
        lines += ["", f"Goal: {g['text']}: {_met(g['met'])} (smallest ratio {_x(g['value'])})."]
        per_tuple = [v for k, v in s.get("e4_per_tuple_over_dbt", {}).items() if k.endswith("m=10") and v]
        gain = [v for v in s.get("e4_columns_over_per_tuple", {}).values() if v]
        if per_tuple and gain:
            lines[-1] += (
                f" Per tuple, fivm is {_x(min(per_tuple))} to {_x(max(per_tuple))} faster than scalar dbt "
                f"at m = 10; column execution is {_x(min(gain))} to {_x(max(gain))} faster than per tuple."
            )
        at27 = [v for k, v in s["e4_fivm_over_dbt"].items() if k.endswith("m=27") and v]
        if at27:
            lines[-1] += (
                f" At m = 27 (406 aggregates) F-IVM is {_x(min(at27))} to {_x(max(at27))} faster than "
                "scalar dbt."
            )
        small = [v for k, v in s["e4_fivm_over_sqlopt"].items() if not k.endswith("m=27") and v]
        if small and min(small) < 1:
            lines[-1] += (
                " At m = 6 and 10 `sql-opt` (the same views, payloads as dicts of monomials) is faster than "
                "F-IVM's numpy cofactor blocks, likely because at these widths a numpy call's fixed cost "
                "outweighs the few scalar operations it replaces (not measured separately)."
            )
    if report.get("e6"):
        labels = list(report["e6"][0]["runs"])
        lines += [
            "",
            "### E6: triangle with the degree-3 cofactor",
            "",
            "R(A,B) ⋈ S(B,C) ⋈ T(C,A), each relation N distinct edges of a Chung-Lu power-law graph on N/3 "
            "vertices, in the paper's variable order A → B → C. First every relation streams round-robin "
            "(tuples/s, then stored entries and bytes). " + provenance(report, "e6"),
            "",
            "| N | triangles | " + " | ".join(labels) + " |",
            "|---|---|" + "---|" * len(labels),
        ]
        for r in report["e6"]:
            lines.append(
                f"| {r['edges_per_relation']:,} | {r['triangles']:,} | "
                + " | ".join(_fmt_rate(r["runs"][k]) for k in labels)
                + " |"
            )
        for r in report["e6"]:
            lines.append(
                f"| {r['edges_per_relation']:,} (stored) | | "
                + " | ".join(
                    f"{r['runs'][k]['stored_entries']:,} / {r['runs'][k]['stored_bytes'] / 1e6:,.1f} MB"
                    for k in labels
                )
                + " |"
            )
        lines += ["", *_e6_against_paper(report["e6"])]
        if all("one" in r for r in report["e6"]):
            lines += [
                "",
                "The paper's ONE set-up: only R is updatable; S and T load first (not timed), where "
                "F-IVM-ONE precomputes V@C[A,B] = Σ_C S(B,C)·T(C,A) and then stores only it and the root, "
                "so an update to R is one lookup; the first-order baselines store R, S and T and evaluate "
                "each delta against S and T. Rates over R's N updates (per update), stored bytes, and "
                "F-IVM-ONE against 1-IVM (the paper: about 100x the throughput at 23x the memory):",
                "",
                "| N | "
                + " | ".join(E6_ONE)
                + " | fivm-one / 1-ivm per update | against the paper | fivm-one / 1-ivm-ring "
                "| fivm-one / round-robin 1-ivm | memory: fivm-one / 1-ivm (paper 23x), / fivm |",
                "|---|" + "---|" * (len(E6_ONE) + 5),
            ]
            for r in report["e6"]:
                one = r["one"]
                per = ratio(one, "fivm-one", "1-ivm")
                mem = one["fivm-one"]["stored_bytes"]
                over_1ivm = mem / one["1-ivm"]["stored_bytes"]
                over_fivm = mem / r["runs"]["fivm"]["stored_bytes"]
                lines.append(
                    f"| {r['edges_per_relation']:,} | "
                    + " | ".join(
                        f"{_fmt_rate(one[k])} ({one[k]['stored_bytes'] / 1e6:,.1f} MB)" for k in E6_ONE
                    )
                    + f" | {_x(per)} | {verdict(per, 100.0, E6_WHY)} "
                    f"| {_x(ratio(one, 'fivm-one', '1-ivm-ring'))} "
                    f"| {_x(ratio({'a': one['fivm-one'], 'b': r['runs']['1-ivm']}, 'a', 'b'))} "
                    f"| {over_1ivm:.1f}x, {over_fivm:.2f}x |"
                )
            g = s.get("goal_e6")
            if g:
                lines += [
                    "",
                    f"Goal: {g['text']}: {_met(g['met'])} ({_x(g['value'])} per update at "
                    f"{g['memory_over_1ivm']:.1f}x 1-IVM's memory and {g['memory_over_fivm']:.2f}x F-IVM's).",
                ]
    if report.get("e8"):
        lines += [
            "",
            "### E8: the Housing join listed: factorized against listing payloads and listing keys",
            "",
            "| s | join rows | "
            + " | ".join(E8_STRATEGIES)
            + " | stored MB ("
            + " / ".join(E8_STRATEGIES)
            + ") |",
            "|---|---|" + "---|" * (len(E8_STRATEGIES) + 1) + "---|",
        ]
        lines[-2] = lines[-2] + " fact-payloads / list-payloads against the paper's 481x at s = 20 |"
        lines.insert(-2, provenance(report, "e8"))
        lines.insert(-2, "")
        for r in report["e8"]:
            got = ratio(r["runs"], "fact-payloads", "list-payloads")
            lines.append(
                f"| {r['scale']} | {r['join_rows']:,} | "
                + " | ".join(_fmt_rate(r["runs"][k]) for k in E8_STRATEGIES)
                + " | "
                + " / ".join(f"{r['runs'][k]['stored_bytes'] / 1e6:,.1f}" for k in E8_STRATEGIES)
                + f" | {verdict(got, 481.0, E8_WHY)} |"
            )
        g = s["goal_e8"]
        speed = ", ".join(f"{_x(v)} over {k}" for k, v in g["speed"].items())
        size = ", ".join(f"{_x(v)} over {k}" for k, v in g["size"].items())
        lines += [
            "",
            f"Goal: {g['text']}: faster {_met(g['faster_met'])} ({speed}), "
            f"smaller {_met(g['smaller_met'])} ({size}).",
        ]
        by_scale = s["e8_speedup_by_scale"]
        growth = ", ".join(
            f"s = {sc}: {_x(v['list-payloads'])} / {_x(v['list-keys'])}" for sc, v in by_scale.items()
        )
        first_10x = s["e8_first_scale_10x_faster"]
        lines[-1] += (
            f" Speed ratio over list-payloads / list-keys by scale: {growth}"
            + (f"; 10x over both from s = {first_10x}" if first_10x is not None else "; 10x not reached")
            + ". The listing holds fan-out³ rows per postcode and an update adds fan-out² of them; the"
            " factorized views grow linearly and an update costs O(1) views."
        )
    lines += sections(report, s)
    svc = report.get("service")
    if svc:
        best = min(svc["worker_runs"], key=lambda r: r["seconds"])
        lines += [
            "",
            "### The fivm service through the worker",
            "",
            f"{svc['query']}, {svc['events']:,} events through the real `Worker` on the embedded broker "
            f"(batch size {svc['batch_size']:,}, checkpoints every {svc['checkpoint_interval_s']:g} s), and "
            "`FivmEngine` alone on the same events in the same batches, same run: the worker runs at "
            f"{svc['worker_events_per_second']:,.0f} events/s, the engine alone at "
            f"{svc['engine_events_per_second']:,.0f}; the engine's share of the worker's time is "
            f"{svc['worker_share_of_engine']:.2f} (best of {svc['repeats']['worker']} worker and "
            f"{svc['repeats']['engine']} engine runs; in the best worker run {best['checkpoints']:.0f} "
            f"checkpoint{'' if best['checkpoints'] == 1 else 's'} took {best['checkpoint_seconds']:.2f} s "
            f"of {best['seconds']:.2f} s). "
            + (
                f"Of that run's {best['seconds']:.2f} s, the engine's `apply` took "
                f"{best['engine_apply_seconds']:.2f} s and its results "
                f"{best['engine_result_seconds']:.2f} s, "
                f"the checkpoint {best['checkpoint_seconds']:.2f} s (of which fivm encoding the changed "
                f"state entries {best['engine_encode_seconds']:.2f} s, the store's write the rest), and the "
                f"runtime's polling, decoding, publishing and closing {best['runtime_seconds']:.2f} s. "
                if "engine_apply_seconds" in best
                else ""
            )
            + "Results equal.",
        ]
    lines += [
        "",
        "The section above is printed by "
        "`.venv/bin/python bench/fivm.py --markdown bench/results/fivm.json`.",
    ]
    return "\n".join(lines) + "\n"
