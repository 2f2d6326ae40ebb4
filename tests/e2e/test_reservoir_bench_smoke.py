"""A tiny run of the reservoir benchmark, so it cannot rot; no timing is asserted.

What is asserted follows from the algorithms, not from the run: every finished run holds a sample of
min(k, |Q|) results (|Q| counted by the benchmark's own walk counter, independently of the engines),
RS evaluates θ on every item while RSWP evaluates it at most that often, exact indexes have no dummy
stops, and the worker published the engine's own sample (the benchmark aborts otherwise)."""

from __future__ import annotations

import pytest
from helpers import run_bench

pytestmark = pytest.mark.slow


def test_reservoir_bench_smoke(tmp_path):
    data = run_bench("reservoir.py", tmp_path / "rs", timeout=600)
    assert (tmp_path / "rs.png").stat().st_size > 0
    k = data["options"]["k"]
    for rows in data["e1"]["queries"].values():
        for row in rows:
            for strategy in ("rsjoin", "sjoin"):
                run = row.get(strategy)
                if run and not run["timed_out"]:
                    assert run["sample_size"] == min(k, row["join_size"])
                    assert run["join_size_bound"] >= row["join_size"]
            if "sjoin" in row:
                assert row["sjoin"]["stops_dummy"] == 0
    for row in data["e4"]["rows"]:
        assert row["rs_evals"] == data["e4"]["items"]
        assert 0 < row["rswp_evals"] <= row["rs_evals"]
    assert data["service"]["same_sample_as_engine"]
    assert set(data["summary"]) >= {"line4_mean_update_ratio", "rswp_evaluation_ratio_at_density_1"}
