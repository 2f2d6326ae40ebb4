"""docs/reservoir/benchmark.md's tables are what ``bench/reservoir.py --markdown`` prints from the stored
report, so a re-run of the benchmark can never leave the page contradicting it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "reservoir" / "benchmark.md"
RESULTS = REPO / "bench" / "results" / "reservoir.json"
BEGIN = "<!-- tables: bench/reservoir.py --markdown (begin) -->"
END = "<!-- tables: bench/reservoir.py --markdown (end) -->"


def test_doc_tables_equal_what_markdown_prints_from_the_stored_report():
    printed = subprocess.run(
        [sys.executable, "bench/reservoir.py", "--markdown", str(RESULTS)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    text = DOC.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "the generated block's markers"
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert block.strip("\n") == printed.strip("\n"), (
        "docs/reservoir/benchmark.md is out of date: replace the block between the markers with "
        "`.venv/bin/python bench/reservoir.py --markdown bench/results/reservoir.json`"
    )
