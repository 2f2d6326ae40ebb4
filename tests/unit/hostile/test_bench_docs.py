"""docs/security.md's flood table is what ``bench/hostile.py --markdown`` prints from the stored report,
so a re-run of the benchmark cannot leave the page contradicting it."""

from __future__ import annotations

import json
from pathlib import Path

from bench.hostile import markdown

REPO = Path(__file__).resolve().parents[3]


def test_flood_table_equals_what_markdown_prints_from_the_stored_report() -> None:
    report = json.loads((REPO / "bench" / "results" / "hostile.json").read_text())
    printed = markdown(report)
    assert printed.count("\n|---") == 1 and len(report["services"]) >= 2
    assert printed in (REPO / "docs" / "security.md").read_text(), (
        "docs/security.md is out of date: paste "
        "`.venv/bin/python bench/hostile.py --markdown bench/results/hostile.json`"
    )
