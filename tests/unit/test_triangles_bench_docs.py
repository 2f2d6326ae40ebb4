"""docs/triangles/benchmark.md's tables are what ``bench/triangles.py --markdown`` prints from the
stored results, so a re-run of the benchmark can never leave the page contradicting them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "triangles" / "benchmark.md"
RESULTS = REPO / "bench" / "results" / "triangles.json"
BEGIN = "<!-- tables: bench/triangles.py --markdown (begin) -->"
END = "<!-- tables: bench/triangles.py --markdown (end) -->"


def test_doc_tables_equal_what_markdown_prints_from_the_stored_results():
    printed = subprocess.run(
        [sys.executable, "bench/triangles.py", "--markdown", "--from", str(RESULTS)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    text = DOC.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "the generated block's markers"
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert block.strip("\n") == printed.strip("\n"), (
        "docs/triangles/benchmark.md is out of date: replace the block between the markers with "
        "`.venv/bin/python bench/triangles.py --markdown`"
    )
