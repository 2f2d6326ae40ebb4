"""docs/performance.md's F-IVM table against the authors' C++ is what ``bench/native_fivm.py
--markdown`` prints from the stored run, so a re-run can never leave the page contradicting it."""

from __future__ import annotations

import json

from helpers import REPO, assert_doc_block_is_printed

STORED = REPO / "bench" / "results" / "native_fivm.json"


def test_doc_table_equals_what_markdown_prints_from_the_stored_run():
    assert_doc_block_is_printed(REPO / "docs" / "performance.md", "native_fivm.py", str(STORED))


def test_the_stored_run_measured_the_cpp_on_the_full_stream_and_the_engines_agreed():
    report = json.loads(STORED.read_text())
    assert report["variants"] == ["cpp", "compiled", "python"] and report["results_agree"]
    assert report["config"]["tuples"] == 150_000 and report["config"]["batch"] == 1_000
    assert report["result_count"] == report["config"]["postcodes"]
