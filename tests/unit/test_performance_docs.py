"""docs/performance.md's tables are what ``bench/profiles.py --markdown`` and
``bench/triangles_kernels.py --markdown`` print from the stored runs, so a re-run can never leave the
page contradicting them."""

from __future__ import annotations

import pytest
from helpers import REPO, bench_markdown, generated_block

DOC = REPO / "docs" / "performance.md"
STORED = {
    "profiles.py": REPO / "bench" / "results" / "profiles" / "summary.json",
    "triangles_kernels.py": REPO / "bench" / "results" / "triangles_kernels.json",
}


@pytest.mark.parametrize("script", sorted(STORED))
def test_doc_tables_equal_what_markdown_prints_from_the_stored_run(script):
    printed = bench_markdown(script, str(STORED[script]))
    assert generated_block(DOC, script).strip("\n") == printed.strip("\n"), (
        f"docs/performance.md is out of date: replace the block between the markers with "
        f"`.venv/bin/python bench/{script} --markdown`"
    )


def test_every_flame_graph_the_summary_names_is_stored():
    import json

    summary = json.loads(STORED["profiles.py"].read_text())
    for case in summary["cases"]:
        if case["flamegraph"]:
            text = (REPO / case["flamegraph"]).read_text()
            assert "<svg" in text and str(REPO) not in text, case["case"]  # no path of this machine
