"""A tiny run of the vwap benchmark, so it cannot rot; no timing is asserted."""

from __future__ import annotations

import pytest
from helpers import run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out

QUERIES = ("vwap", "vwap-paper", "mst", "psp", "nq1", "sq1", "sq2", "nq2")


def test_vwap_bench_smoke(tmp_path):
    data = run_bench("vwap.py", tmp_path / "vw.json", timeout=600)
    assert data["problems"] == []
    for suffix in ("scaling", "speedup"):
        assert (tmp_path / f"vw_{suffix}.png").stat().st_size > 0
    sizes = data["meta"]["sizes"]
    for query in QUERIES:
        rpai = data["finance"][query]["rpai"]
        assert [c["events"] for c in rpai] == sizes
        for case in rpai:
            assert case["window"] > 0 and case["updates_per_s"] > 0
            assert case["D"]["bids"] > 0
        assert data["speedup"][query]["dbtoaster"], query
    for row in data["whole_prefix"]["vwap"]:
        assert row["ratio"] > 0 and row["rpai"]["seconds"] > 0
    for label in ("uniform", "skewed"):
        assert data["q17"][label] and data["q17"][label][0]["events"] > 0
