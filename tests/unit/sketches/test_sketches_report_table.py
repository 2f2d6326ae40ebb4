"""The sketches benchmark's report helpers: the one table printer every section uses, the TPC-H section
without a Python recapture, the goal line of a run stopped before its last query, and the merge of one
section into a stored report that another run is updating."""

from __future__ import annotations

import json

import pytest

from bench.sketches import merge_section
from bench.sketches_report_paper import NO_PYTHON, paper_markdown, runs_of, table


def test_table_prints_header_separator_and_one_row_per_record() -> None:
    lines = table([("a", lambda r: r["a"]), ("twice b", lambda r: 2 * r["b"])], [{"a": "x", "b": 1}])
    assert lines == ["| a | twice b |", "| --- | --- |", "| x | 2 |"]


def test_runs_carry_their_parents_fields() -> None:
    parents = [{"query": "Q1", "runs": [{"delta": 10}, {"delta": 100}]}, {"query": "Q3", "runs": []}]
    assert [(r["query"], r["delta"]) for r in runs_of(parents)] == [("Q1", 10), ("Q1", 100)]


def _tpch(sf: float, queries: list[str], python: bool) -> dict:
    run = {"delta": 10, "imp_s": 0.001, "full_duckdb_s": 0.1, "speedup_duckdb": 100.0}
    run["speedup_duckdb_cpu"] = 2.0 if sf == 1.0 else 50.0
    if python:
        run |= {"full_python_s": 5.0, "speedup_python": 5000.0}
    return {
        "sf": sf,
        "lineitem_rows": 6_001_215,
        "rss_gb": 9.0,
        "queries": [{"query": q, "safety": "S1", "runs": [run]} for q in queries],
    }


def test_tpch_without_python_recapture_and_a_stopped_run() -> None:
    meta = {"command": "c", "loadavg_start": [1.0], "loadavg_end": [2.0], "seconds": 3.0}
    report = {
        "tpch_big": _tpch(0.1, ["Q1", "Q3", "Q9"], python=True),
        "tpch_sf1": _tpch(1.0, ["Q3"], python=False),
        "sections": {"tpch_big": meta, "tpch_sf1": meta},
    }
    printed = paper_markdown(report)
    sf1 = printed[printed.index("### TPC-H at SF 1.0") :]
    assert NO_PYTHON in sf1 and "full Python s" not in sf1.splitlines()[4]
    assert "| Q3 | S1 | 10 | 1.00 | 100.00 | 100.0 | 2.0 | direction only (2.0x" in sf1
    goal = next(x for x in printed.splitlines() if x.startswith("* TPC-H at SF 1.0"))
    assert "(1 query)" in goal and "not met for Q3" in goal and "Not finished in the run: Q1, Q9." in goal


def test_merge_keeps_the_sections_another_run_wrote(tmp_path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"a": 1, "sections": {"a": {"seconds": 1}}}))
    merge_section(path, "b", [2], {"seconds": 2})
    stored = json.loads(path.read_text())
    assert stored["a"] == 1 and stored["b"] == [2] and set(stored["sections"]) == {"a", "b"}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no partial file left behind


def test_a_tpch_run_of_some_queries_merges_into_the_stored_section_by_query(tmp_path) -> None:
    path = tmp_path / "report.json"
    first = {"command": "first", "loadavg_start": [1.0], "loadavg_end": [2.0], "seconds": 3.0}
    stored = _tpch(1.0, ["Q14", "Q3", "Q7"], python=False)
    path.write_text(json.dumps({"tpch_sf1": stored, "sections": {"tpch_sf1": first}}))
    second = {"command": "second", "loadavg_start": [4.0], "loadavg_end": [5.0], "seconds": 6.0}
    rerun = _tpch(1.0, ["Q7", "Q1"], python=False) | {"rss_gb": 12.0}
    rerun["queries"][0]["bootstrap_s"] = 99.0
    merge_section(path, "tpch_sf1", rerun, second, by_query=True)
    report = json.loads(path.read_text())
    merged = report["tpch_sf1"]
    assert [q["query"] for q in merged["queries"]] == ["Q14", "Q3", "Q7", "Q1"]
    assert merged["queries"][2]["bootstrap_s"] == 99.0 and merged["rss_gb"] == 12.0
    runs = report["sections"]["tpch_sf1"]["runs"]
    assert [(r["command"], r["queries"]) for r in runs] == [
        ("first", ["Q14", "Q3"]),
        ("second", ["Q7", "Q1"]),
    ]
    line = next(x for x in paper_markdown(report).splitlines() if x.startswith("Run for"))
    assert line.startswith("Run for Q14, Q3: `first`, load average 1.0 at the start")
    assert "Run for Q7, Q1: `second`, load average 4.0 at the start and 5.0 at the end, 6 s." in line
    goal = next(x for x in paper_markdown(report).splitlines() if x.startswith("* TPC-H at SF 1.0"))
    assert "(4 queries)" in goal and "Not finished" not in goal and "not met for" in goal


def test_queries_at_another_scale_factor_are_not_merged(tmp_path) -> None:
    path = tmp_path / "report.json"
    meta = {"command": "c", "loadavg_start": [1.0], "loadavg_end": [2.0], "seconds": 3.0}
    path.write_text(
        json.dumps({"tpch_sf1": _tpch(1.0, ["Q3"], python=False), "sections": {"tpch_sf1": meta}})
    )
    with pytest.raises(ValueError, match=r"SF 0\.1 queries"):
        merge_section(path, "tpch_sf1", _tpch(0.1, ["Q1"], python=False), meta, by_query=True)
    assert [q["query"] for q in json.loads(path.read_text())["tpch_sf1"]["queries"]] == ["Q3"]


def test_goal_line_says_when_every_query_meets_the_floor() -> None:
    meta = {"command": "c", "loadavg_start": [1.0], "loadavg_end": [2.0], "seconds": 3.0}
    report = {"tpch_big": _tpch(0.1, ["Q1", "Q3"], python=True), "sections": {"tpch_big": meta}}
    goal = next(x for x in paper_markdown(report).splitlines() if x.startswith("* TPC-H at SF 0.1"))
    assert goal.endswith("Goal ≥ 3.9x: met on every one of the 2 queries.")
