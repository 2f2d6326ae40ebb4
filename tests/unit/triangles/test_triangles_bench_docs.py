"""docs/triangles/benchmark.md's tables are what ``bench/triangles.py --markdown`` prints from the
stored results, so a re-run of the benchmark can never leave the page contradicting them."""

from __future__ import annotations

from helpers import REPO, assert_doc_block_is_printed


def test_doc_tables_equal_what_markdown_prints_from_the_stored_results():
    doc = REPO / "docs" / "triangles" / "benchmark.md"
    results = REPO / "bench" / "results" / "triangles.json"
    assert_doc_block_is_printed(doc, "triangles.py", "--from", str(results))
