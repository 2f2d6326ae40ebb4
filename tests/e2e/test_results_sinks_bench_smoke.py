"""A tiny run of the results-sinks benchmark, so it cannot rot; no timing is asserted.

The benchmark itself checks that PostgreSQL ends with a row per key; here, that every workload ran
with every sink, the subscribers heard from both sources, and the report, plot and docs tables are
whole."""

from __future__ import annotations

import pytest
from helpers import REPO, bench_markdown, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out

SINKS = ["none", "redis", "redis+postgres"]


def test_results_sinks_bench_smoke(tmp_path):
    out = tmp_path / "results_sinks.json"
    data = run_bench("results_sinks.py", out, "--events", "2000", "--live-seconds", "2", timeout=900)
    assert (tmp_path / "results_sinks.png").stat().st_size > 0
    assert [t["service"] for t in data["throughput"]] == ["reference", "reference", "triangles"]
    for t in data["throughput"]:
        assert sorted(t["runs"]) == sorted(SINKS)
        for sink, (run,) in t["runs"].items():
            assert run["keys"] == t["keys"] and run["events_per_s"] > 0, (t["workload"], sink)
        assert t["runs"]["redis+postgres"][0]["postgres_results"] == t["keys"]
        assert t["postgres_vs_redis"] > 0
    for source in ("redis", "postgres"):
        summary = data["latency"]["sources"][source]
        assert summary["events"] > 0 and 0 <= summary["p50_s"] <= summary["p99_s"] <= summary["max_s"]
    table = bench_markdown("results_sinks.py", str(out))
    assert "Redis + PostgreSQL / Redis" in table and "| postgres |" in table


def test_the_docs_tables_are_the_stored_reports():
    stored = REPO / "bench" / "results" / "results_sinks.json"
    table = bench_markdown("results_sinks.py", str(stored)).strip()
    assert table in (REPO / "docs" / "results.md").read_text()
