"""A tiny run of the VWAP comparison with DBToaster's generated C++ (bench/native_vwap.py), so it cannot
rot: without the binary the C++ columns are skipped, and the compiled and Python ledger loops still have
to give the same answer after every batch. No timing is asserted."""

from __future__ import annotations

import pytest
from helpers import bench_markdown, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_native_vwap_bench_smoke(tmp_path, monkeypatch):
    monkeypatch.delenv("DBTOASTER_VWAP_BIN", raising=False)
    data = run_bench("native_vwap.py", tmp_path / "n.json", "--events", "600", timeout=300)
    assert data["config"]["cpp"] is False
    assert [c["batch"] for c in data["cases"]] == [500, 1]
    for case in data["cases"]:
        assert case["answers_agree"] and case["events"] == 600
        assert {r["variant"] for r in case["runs"]} == {"compiled", "python"}
        assert len({(r["vwap"], r["checksum"]) for r in case["runs"]}) == 1
    assert (tmp_path / "n.png").stat().st_size > 0
    md = bench_markdown("native_vwap.py", str(tmp_path / "n.json"))
    assert "| batch | plan run | ivmstream compiled (ms) |" in md and "C++ binary was not given" in md
