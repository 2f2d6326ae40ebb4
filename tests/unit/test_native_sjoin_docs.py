"""docs/performance.md's SJoin-against-C++ table is what ``bench/native_sjoin.py --markdown`` prints from
the stored run, so a re-run can never leave the page contradicting it."""

from __future__ import annotations

from helpers import REPO, assert_doc_block_is_printed


def test_doc_table_equals_what_markdown_prints_from_the_stored_run():
    stored = REPO / "bench" / "results" / "native_sjoin.json"
    assert_doc_block_is_printed(REPO / "docs" / "performance.md", "native_sjoin.py", str(stored))
