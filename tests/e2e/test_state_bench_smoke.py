"""A tiny run of the checkpoint-cost benchmark, so it cannot rot; no timing is asserted."""

from __future__ import annotations

import pytest
from helpers import run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_state_bench_smoke(tmp_path):
    data = run_bench("state.py", tmp_path / "st", timeout=600)
    assert (tmp_path / "st.png").stat().st_size > 0
    sizes = data["sizes"]
    assert [r["edges"] for r in sizes] == [2000, 6000]
    for r in sizes:
        cost = r["cost"]
        # An incremental checkpoint writes the churn's edges (each changed edge once), a whole snapshot
        # the whole graph: the byte counts are what the layouts mean, whatever the machine's speed.
        assert 0 < cost["incremental_entries"] <= data["churn"] + 3
        assert cost["incremental_bytes"] < cost["snapshot_bytes"]
        assert r["engine"]["events_per_second"] > 0
        for layout in ("incremental", "snapshot"):
            w = r["worker"][layout]
            assert w["events"] == data["stream"] and w["stored_offset"] == data["stream"]
