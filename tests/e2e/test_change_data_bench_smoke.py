"""A tiny run of the change-data benchmark, so it cannot rot; no timing is asserted.

The benchmark itself checks that no case refused a record; here, that the report, its ratios, its plot
and its docs table are whole."""

from __future__ import annotations

import pytest
from helpers import REPO, bench_markdown, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out

CASES = ["native", "c-plain", "c-wrapped", "u-plain", "u-wrapped"]


def test_change_data_bench_smoke(tmp_path):
    out = tmp_path / "change_data.json"
    data = run_bench("change_data.py", out, "--records", "400", timeout=600)
    assert (tmp_path / "change_data.png").stat().st_size > 0
    assert data["records_per_case"] == 400 and data["repeats"] == 1
    assert sorted(data["runs"]) == sorted(CASES)
    for case, (run,) in data["runs"].items():
        assert run["records"] == 400 and run["rejected"] == 0, case
    assert set(data["ratios"]) >= {"c_plain_vs_native", "u_plain_vs_c_plain", "u_wrapped_vs_c_wrapped"}
    assert all(v > 0 for v in data["ratios"].values())
    table = bench_markdown("change_data.py", str(out))
    assert all(f"`{case}`" in table for case in CASES)


def test_the_docs_table_is_the_stored_reports():
    stored = REPO / "bench" / "results" / "change_data.json"
    table = bench_markdown("change_data.py", str(stored)).strip()
    assert table in (REPO / "docs" / "change-data.md").read_text()
