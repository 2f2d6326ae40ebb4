"""A tiny run of the SQL benchmark (compiled views against the same views configured by hand), so it
cannot rot; no timing is asserted."""

from __future__ import annotations

import pytest
from helpers import REPO, bench_markdown, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out

CASES = ["triangles", "vwap", "fivm", "reservoir", "topics"]


def test_sql_bench_smoke(tmp_path):
    out = tmp_path / "sql.json"
    data = run_bench("sql.py", out, timeout=900)
    assert data["repeats"] == 1 and list(data["cases"]) == CASES
    for case in data["cases"].values():
        assert len(case["seconds"]["sql"]) == len(case["seconds"]["hand"]) == 1
        assert case["ratio"] > 0 and case["ratio_best"] > 0 and case["input_rows"] > 0
    table = bench_markdown("sql.py", str(out))
    assert all(f"`{data['cases'][c]['view']}`" in table for c in CASES)


def test_the_docs_table_is_the_stored_reports():
    stored = REPO / "bench" / "results" / "sql.json"
    table = bench_markdown("sql.py", str(stored)).strip()
    assert table in (REPO / "docs" / "sql.md").read_text()
