"""docs/performance.md's table of generated delta plans against the expression closures is what
``bench/firstorder_plans.py --markdown`` prints from the stored firstorder run, so a re-run can never
leave the page contradicting it."""

from __future__ import annotations

from helpers import REPO, assert_doc_block_is_printed


def test_doc_table_equals_what_markdown_prints_from_the_stored_run():
    stored = REPO / "bench" / "results" / "firstorder.json"
    assert_doc_block_is_printed(REPO / "docs" / "performance.md", "firstorder_plans.py", str(stored))
