"""docs/triangles/benchmark.md's tables are what ``bench/triangles.py --markdown`` prints from the
stored results, so a re-run of the benchmark can never leave the page contradicting them."""

from __future__ import annotations

from helpers import REPO, bench_markdown, generated_block

DOC = REPO / "docs" / "triangles" / "benchmark.md"
RESULTS = REPO / "bench" / "results" / "triangles.json"


def test_doc_tables_equal_what_markdown_prints_from_the_stored_results():
    printed = bench_markdown("triangles.py", "--from", str(RESULTS))
    assert generated_block(DOC, "triangles.py").strip("\n") == printed.strip("\n"), (
        "docs/triangles/benchmark.md is out of date: replace the block between the markers with "
        "`.venv/bin/python bench/triangles.py --markdown`"
    )
