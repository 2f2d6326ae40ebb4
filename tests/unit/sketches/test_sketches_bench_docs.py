"""docs/sketches/benchmark.md's tables are what ``bench/sketches.py --markdown`` prints from the stored
report, so a re-run of the benchmark cannot leave the page contradicting it."""

from __future__ import annotations

import json
from pathlib import Path

from bench.sketches import markdown

REPO = Path(__file__).resolve().parents[3]


def test_benchmark_page_equals_what_markdown_prints_from_the_stored_report() -> None:
    report = json.loads((REPO / "bench" / "results" / "sketches.json").read_text())
    printed = markdown(report)
    assert "### TPC-H" in printed and len(report["tpch"]) >= 6
    paper = (
        "having_big",
        "slope",
        "tpch_big",
        "crimes",
        "joins",
        "joinsel",
        "selpd",
        "topm",
        "mixed_instances",
    )
    assert set(paper) <= set(report["sections"])  # each of the paper's experiments has a stored, recorded run
    assert {q["query"] for q in report["tpch_big"]["queries"]} >= {"Q7", "Q9"}
    assert [c["aggregates"] for c in report["slope"]["configs"]][-1] == 10
    for title in ("### Goals", "### Crimes-shaped", "### Join selectivity", "### Mixed workload with"):
        assert title in printed
    page = (REPO / "docs" / "sketches" / "benchmark.md").read_text()
    assert "below the paper's 3.5 to 5.5 %" in printed and "Both are higher than the paper" not in page
    assert printed in (REPO / "docs" / "sketches" / "benchmark.md").read_text(), (
        "docs/sketches/benchmark.md is out of date: paste `.venv/bin/python -m bench.sketches --markdown`"
    )
