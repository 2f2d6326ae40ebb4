"""docs/vwap/benchmark.md shows the tables ``bench/vwap.py --markdown`` prints from the stored result
file, so a re-run of the benchmark cannot leave the doc contradicting ``bench/results/vwap.json``."""

from __future__ import annotations

import json
from pathlib import Path

from bench.vwap import markdown

ROOT = Path(__file__).resolve().parents[3]
BEGIN = "<!-- tables: printed by `bench/vwap.py --markdown` from bench/results/vwap.json -->"
END = "<!-- end of tables -->"


def test_the_docs_tables_are_the_ones_printed_from_the_stored_results():
    doc = (ROOT / "docs" / "vwap" / "benchmark.md").read_text()
    assert doc.count(BEGIN) == 1 and doc.count(END) == 1
    shown = doc.split(BEGIN)[1].split(END)[0].strip("\n") + "\n"
    stored = json.loads((ROOT / "bench" / "results" / "vwap.json").read_text())
    assert shown == markdown(stored)
