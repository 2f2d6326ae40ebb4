"""docs/performance.md's RSJoin-against-C++ table is what ``bench/native_rsjoin.py --markdown`` prints
from the stored run, so a re-run can never leave the page contradicting it."""

from __future__ import annotations

from helpers import REPO, assert_doc_block_is_printed


def test_doc_table_equals_what_markdown_prints_from_the_stored_run():
    stored = REPO / "bench" / "results" / "native_rsjoin.json"
    assert_doc_block_is_printed(REPO / "docs" / "performance.md", "native_rsjoin.py", str(stored))
