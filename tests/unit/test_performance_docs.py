"""docs/performance.md's tables are what ``bench/profiles.py --markdown``,
``bench/triangles_kernels.py --markdown`` and ``bench/native_vwap.py --markdown`` print from the stored
runs, so a re-run can never leave the page contradicting them."""

from __future__ import annotations

import pytest
from helpers import REPO, assert_doc_block_is_printed

DOC = REPO / "docs" / "performance.md"
STORED = {
    "profiles.py": REPO / "bench" / "results" / "profiles" / "summary.json",
    "triangles_kernels.py": REPO / "bench" / "results" / "triangles_kernels.json",
    "native_vwap.py": REPO / "bench" / "results" / "native_vwap.json",
}


@pytest.mark.parametrize("script", sorted(STORED))
def test_doc_tables_equal_what_markdown_prints_from_the_stored_run(script):
    assert_doc_block_is_printed(DOC, script, str(STORED[script]))


def test_every_flame_graph_the_summary_names_is_stored():
    import json

    summary = json.loads(STORED["profiles.py"].read_text())
    for case in summary["cases"]:
        if case["flamegraph"]:
            text = (REPO / case["flamegraph"]).read_text()
            assert "<svg" in text and str(REPO) not in text, case["case"]  # no path of this machine
