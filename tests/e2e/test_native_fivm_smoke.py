"""A tiny run of the F-IVM comparison with the authors' C++ (bench/native_fivm.py), so it cannot rot:
without the binary the C++ column is skipped, saying so, and the compiled kernels and the numpy loops
still have to give the same covariance. No timing is asserted."""

from __future__ import annotations

import pytest
from helpers import bench_markdown, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_native_fivm_bench_smoke(tmp_path, monkeypatch):
    monkeypatch.delenv("IVMSTREAM_FIVM_CPP", raising=False)
    data = run_bench("native_fivm.py", tmp_path / "f.json", timeout=300)
    assert data["variants"] == ["compiled", "python"] and "no binary given" in data["cpp_skipped"]
    assert data["results_agree"] and data["result_count"] == data["config"]["postcodes"]  # the join's size
    assert {r["kernels"] for r in data["runs"]} == {"compiled", "python"}
    assert all(r["tuples"] == data["config"]["tuples"] for r in data["runs"])
    assert (tmp_path / "f.png").stat().st_size > 0
    md = bench_markdown("native_fivm.py", str(tmp_path / "f.json"))
    assert "The C++ column is skipped: no binary given" in md and "| numpy loops / compiled kernels |" in md
