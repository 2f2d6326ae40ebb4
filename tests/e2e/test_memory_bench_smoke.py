"""A tiny run of the memory benchmark, so it cannot rot: every service measured in every mode, the plot
written and the docs table printed from the stored report; no figure is asserted (the guards are
tests/unit/test_memory_guards.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import REPO, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_memory_bench_smoke(tmp_path):
    data = run_bench("memory.py", tmp_path / "mem", timeout=900)
    assert (tmp_path / "mem.png").stat().st_size > 0
    assert set(data["services"]) == {
        "reference",
        "reservoir",
        "sketches",
        "triangles",
        "vwap",
        "fivm",
        "firstorder",
    }
    for service, entry in data["services"].items():
        row = entry["runs"]["2000"]
        for kind in ("floor", "replay", "worker", "log", "nolog"):
            assert "error" not in row[kind], (service, kind, row[kind])
        assert row["replay"]["rejected"] == 0
    table = subprocess.run(
        [sys.executable, "bench/memory.py", "--markdown", "--from", str(tmp_path / "mem.json")],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    assert table.count("| 2,000 |") == 14 and "log per pending entry" in table
