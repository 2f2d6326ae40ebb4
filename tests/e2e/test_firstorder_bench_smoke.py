"""A tiny run of the firstorder benchmark (first-order against recompute on axfinder and brokerspread,
the engines alone and through the worker; generated plans against the closures), so it cannot rot; no
timing is asserted. The docs tables are the stored report's."""

from __future__ import annotations

import pytest
from helpers import REPO, bench_markdown, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_firstorder_bench_smoke(tmp_path):
    data = run_bench("firstorder.py", tmp_path / "firstorder.json", timeout=600)
    assert data["repeats"] == 1
    assert [(c["query"], c["read_every"]) for c in data["cases"]] == [
        ("axfinder", 1),
        ("axfinder", 100),
        ("brokerspread", 1),
        ("brokerspread", 100),
    ]
    for case in data["cases"]:
        assert case["events"] == 300 and case["ratio"] > 0
        assert case["visited"]["first-order"] > 0 and case["visited"]["recompute"] > 0
    assert (tmp_path / "firstorder.png").is_file()
    worker = data["worker"]  # axfinder through a real Worker on the embedded broker, beside the engine
    assert (worker["query"], worker["events"], worker["batch_size"]) == ("axfinder", 300, 100)
    for times in (worker["worker_seconds"], worker["engine_seconds"]):
        assert sorted(times) == ["first-order", "recompute"] and all(len(t) == 1 for t in times.values())
    assert all(sum(n) >= 3 for n in worker["worker_batches"].values())  # batches of at most 100
    assert worker["worker_ratio"] > 0 and len(worker["load_start"]) == len(worker["load_end"]) == 3
    plans = data["plans"]  # the engine alone: generated delta plans against the closures, same snapshots
    assert [(c["query"], c["events"]) for c in plans["cases"]] == [("axfinder", 300), ("brokerspread", 300)]
    for case in plans["cases"]:
        assert sorted(case["cpu_seconds"]) == ["closures", "generated"] and case["ratio"] > 0


def test_the_docs_table_is_the_stored_report():
    table = bench_markdown("firstorder.py", str(REPO / "bench" / "results" / "firstorder.json")).strip()
    assert table in (REPO / "docs" / "firstorder" / "benchmark.md").read_text()
