"""A tiny run of the SJoin comparison with the authors' C++ (bench/native_sjoin.py), so it cannot rot:
without the driver the C++ columns are skipped, the compiled and Python steps still have to draw the same
sample, and both must count the graph's line-3 size. No timing is asserted."""

from __future__ import annotations

import pytest
from helpers import bench_markdown, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_native_sjoin_bench_smoke(tmp_path, monkeypatch):
    monkeypatch.delenv("SJOIN_BIN", raising=False)
    data = run_bench("native_sjoin.py", tmp_path / "n.json", timeout=300)
    assert data["config"]["cpp"] is False
    (case,) = data["cases"]
    assert case["samples_agree"] and case["join_sizes_agree"] and case["tuples"] == 3 * case["edges"]
    assert {r["variant"] for r in case["runs"]} == {"compiled", "python"}
    assert {r["kernels"] for r in case["runs"]} == {"compiled", "python"}
    assert all(r["sample_size"] == case["k"] and r["join_size"] == case["line3_size"] for r in case["runs"])
    assert case["line3_size"] > case["k"]  # the sample was drawn from more results than it holds
    assert (tmp_path / "n.png").stat().st_size > 0
    md = bench_markdown("native_sjoin.py", str(tmp_path / "n.json"))
    assert "| edges | k | line-3 results |" in md and "C++ driver was not given" in md
