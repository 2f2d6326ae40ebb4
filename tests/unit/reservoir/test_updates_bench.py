"""The ``updates`` benchmark (bench/reservoir_updates.py): a smoke run of its engine half on a tiny
graph, and docs/reservoir/benchmark.md's updates rows equal to what its printer gives from the stored
run (so a re-run can never leave the page contradicting it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "reservoir" / "benchmark.md"
STORED = REPO / "bench" / "results" / "reservoir_updates.json"
BEGIN = "<!-- updates: bench/reservoir_updates.py --markdown (begin) -->"
END = "<!-- updates: bench/reservoir_updates.py --markdown (end) -->"


def _printed(stored: Path) -> str:
    return subprocess.run(
        [sys.executable, "bench/reservoir_updates.py", "--markdown", str(stored)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout


def test_the_doc_rows_equal_what_markdown_prints_from_the_stored_run():
    text = DOC.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "the generated block's markers"
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert block.strip("\n") == _printed(STORED).strip("\n"), (
        "docs/reservoir/benchmark.md is out of date: replace the updates block with "
        "`.venv/bin/python bench/reservoir_updates.py --markdown bench/results/reservoir_updates.json`"
    )


def test_a_quick_engine_run_writes_a_report_with_both_streams(tmp_path: Path):
    out = tmp_path / "updates.json"
    subprocess.run(
        [sys.executable, "bench/reservoir_updates.py", "--quick", "--no-worker", "--out", str(out)],
        capture_output=True,
        check=True,
        cwd=REPO,
    )
    report = orjson.loads(out.read_bytes())
    engine = report["engine"]
    assert len(engine["runs"]["inserts"]) == len(engine["runs"]["updates"]) == 2
    assert engine["counters_per_event"]["updates"]["refills"] >= 0
    assert report["command"].startswith("bench/reservoir_updates.py") and report["load_before"]
    assert out.with_suffix(".png").exists()
    assert "updates / inserts" in _printed(out)
