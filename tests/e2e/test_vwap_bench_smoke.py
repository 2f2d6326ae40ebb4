"""A tiny run of the vwap benchmark, so it cannot rot; no timing is asserted."""

from __future__ import annotations

import pytest
from helpers import bench_markdown, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out

QUERIES = ("vwap", "vwap-paper", "mst", "psp", "nq1", "sq1", "sq2", "nq2")


# Small fixed sizes: one 100-event prefix per query (the cubic re-evaluations grow fast past it), a
# 10-event window at batch 1 and one 100-event batch at batch 100 (a larger batch size would time that
# same single batch again), one timing each, 300 events through the worker, a 1 s Q17 baseline on a
# tiny TPC-H, and a budget no case of that size reaches on a loaded machine: every query, strategy,
# batch size and suite runs, and none is cut for time.
SMOKE = (
    *("--sizes", "100", "--other-sizes", "100", "--window", "10", "--batches", "1,100", "--repeats", "1"),
    *("--budget", "60", "--worker-events", "300", "--tpch-budget", "1", "--tpch-sfs", "0.0003"),
)


def test_vwap_bench_smoke(tmp_path):
    data = run_bench("vwap.py", tmp_path / "vw.json", *SMOKE, timeout=1200)
    assert data["problems"] == []
    assert (tmp_path / "vw.png").stat().st_size > 0
    batches = data["meta"]["batches"]
    assert batches == [1, 100]
    for query in QUERIES:
        cases = data["batches"][query]
        sizes = data["meta"]["sizes"] if query.startswith("vwap") else data["meta"]["other_sizes"]
        for strategy in ("rpai", "dbtoaster", "duckdb", "auto"):
            measured = [c for c in cases if c["strategy"] == strategy and "us_per_event" in c]
            # every (prefix, batch size) is measured: nothing of this size is cut for time
            assert len(measured) == len(sizes) * len(batches), (query, strategy)
            assert all(c["window"] > 0 and c["us_per_event"] > 0 for c in measured), (query, strategy)
        assert any(c["strategy"] == "auto" and "auto_running" in c for c in cases)
    assert {r["query"] for r in data["goals"]["rows"]} == set(QUERIES)
    for row in data["whole_prefix"]["vwap"]:
        assert row["rpai"] > 0 and row["dbtoaster"] > 0
    assert all(w["agree"] for w in data["worker"]["strategies"].values())
    for label in ("uniform", "skewed"):
        assert data["q17"][label] and data["q17"][label][0]["events"] > 0
    # the doc's tables are printed from a stored file alone
    md = bench_markdown("vwap.py", str(tmp_path / "vw.json"))
    assert "| events | D | batch |" in md and "Goal figures" in md
