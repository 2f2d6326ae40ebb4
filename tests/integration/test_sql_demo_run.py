"""``ivmstream demo --sql docs/examples/sql/demo.sql``: the demo's five views on their services' workers
over the embedded broker equal ``sql replay`` of the same files (Spark's reconciliation in the slow run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ivmstream.sql.demo import run_sql_demo

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "docs" / "examples" / "sql" / "demo.sql"


def test_the_demo_runs_from_one_sql_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_sql_demo(DEMO, spark=False, base=REPO) == 0
    out = capsys.readouterr().out
    for view in ("social_triangles", "housing_regression", "walks", "vwap", "demo_1"):
        (line,) = [x for x in out.splitlines() if x.startswith(f"  {view} (")]
        assert line.endswith(": MATCH"), line
