"""A tiny run of the RSJoin comparison with the authors' C++ (bench/native_rsjoin.py), so it cannot rot:
without the binary the C++ columns are skipped, and the compiled and Python steps still have to draw the
same sample. No timing is asserted."""

from __future__ import annotations

import pytest
from helpers import bench_markdown, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_native_rsjoin_bench_smoke(tmp_path, monkeypatch):
    monkeypatch.delenv("RSJOIN_BIN", raising=False)
    data = run_bench("native_rsjoin.py", tmp_path / "n.json", timeout=300)
    assert data["config"]["cpp"] is False
    (case,) = data["cases"]
    assert case["samples_agree"] and case["tuples"] == 3 * case["edges"]
    assert {r["variant"] for r in case["runs"]} == {"compiled", "python"}
    assert {r["kernels"] for r in case["runs"]} == {"compiled", "python"}
    assert all(r["sample_size"] == case["k"] for r in case["runs"])
    assert (tmp_path / "n.png").stat().st_size > 0
    md = bench_markdown("native_rsjoin.py", str(tmp_path / "n.json"))
    assert "| edges | k | ivmstream compiled |" in md and "C++ binary was not given" in md
