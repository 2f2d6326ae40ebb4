"""A tiny run of the Faust runtime benchmark, so it cannot rot; no timing is asserted.

The benchmark itself checks that every run consumed the whole input and refused nothing; here, that
the report, its plot and its docs tables are whole, and that docs/faust.md shows the stored run."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import REPO, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out

RUNTIMES = ["confluent-kafka", "faust"]


def markdown(report: str) -> str:
    return subprocess.run(
        [sys.executable, "bench/faust.py", "--markdown", report],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_faust_bench_smoke(tmp_path):
    out = tmp_path / "faust.json"
    data = run_bench("faust.py", out, "--services", "reference", "--profile", timeout=600)
    assert (tmp_path / "faust.png").stat().st_size > 0
    (service,) = data["services"].values()
    assert data["repeats"] == 1 and service["records"] == 2000
    for runtime in RUNTIMES:
        (run,) = service["runs"][runtime]
        assert run["consumed"] == 2000 and run["rejected"] == 0, runtime
        assert run["records_per_s"] > 0 and run["loadavg_1"] >= 0
    assert service["faust_vs_default_paired_median"] > 0
    for runtime in RUNTIMES:
        parts = data["profile"][runtime]["parts"]
        assert abs(sum(p["share"] for p in parts.values()) - 1) < 1e-6
    assert "faust" in data["profile"]["faust"]["parts"]
    table = markdown(str(out))
    assert "| `reference` | 2,000 |" in table and "profiled thread, in all" in table


def test_the_docs_tables_are_the_stored_reports():
    table = markdown(str(REPO / "bench" / "results" / "faust.json"))
    assert table in (REPO / "docs" / "faust.md").read_text()
