"""docs/reservoir/benchmark.md's tables are what ``bench/reservoir.py --markdown`` prints from the stored
report, so a re-run of the benchmark can never leave the page contradicting it."""

from __future__ import annotations

from helpers import REPO, assert_doc_block_is_printed


def test_doc_tables_equal_what_markdown_prints_from_the_stored_report():
    results = REPO / "bench" / "results" / "reservoir.json"
    assert_doc_block_is_printed(REPO / "docs" / "reservoir" / "benchmark.md", "reservoir.py", str(results))
