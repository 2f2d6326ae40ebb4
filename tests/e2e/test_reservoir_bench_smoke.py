"""A tiny run of the reservoir benchmark, so it cannot rot; no timing is asserted.

What is asserted follows from the algorithms, not from the run: every finished run holds a sample of
min(k, |Q|) results (|Q| counted independently of the sampling engines: by the benchmark's own walk
counter on line joins, and by symhj's enumeration and SJoin's exact counts, which must agree, on every
other query), RS evaluates θ on every item while RSWP evaluates it at most that often, exact indexes have
no dummy stops, every optimisation of Figure 9 samples the same join, and the worker published the
engine's own sample (the benchmark aborts otherwise)."""

from __future__ import annotations

import pytest
from helpers import run_bench

pytestmark = pytest.mark.slow


def _finished(run):
    return run is not None and not run["timed_out"]


def test_reservoir_bench_smoke(tmp_path):
    data = run_bench("reservoir.py", tmp_path / "rs", timeout=600)
    assert (tmp_path / "rs.png").stat().st_size > 0
    k = data["options"]["k"]
    for rows in data["e1"]["queries"].values():
        for row in rows:
            for strategy in ("rsjoin", "sjoin"):
                run = row.get(strategy)
                if _finished(run):
                    assert run["sample_size"] == min(k, row["join_size"])
                    assert run["join_size_bound"] >= row["join_size"]
            if "sjoin" in row:
                assert row["sjoin"]["stops_dummy"] == 0
    for row in data["e4"]["rows"]:
        assert row["rs_evals"] == data["e4"]["items"]
        assert 0 < row["rswp_evals"] <= row["rs_evals"]
    # Figure 5: symhj enumerates the join, sjoin counts it exactly; every strategy samples min(k, |Q|)
    sizes: dict[str, set[int]] = {}
    for row in data["queries"]["rows"]:
        run = row["inserts"]
        if _finished(run) and run["strategy"] in ("symhj", "sjoin", "sjoin-opt"):
            sizes.setdefault(row["query"], set()).add(run["exact_size"])
    assert sizes and all(len(s) == 1 for s in sizes.values()), sizes
    for row in data["queries"]["rows"]:
        run = row["inserts"]
        if _finished(run) and row["query"] in sizes:
            (size,) = sizes[row["query"]]
            assert run["sample_size"] == min(data["queries"]["k_graph"], size)
            assert run["join_size_bound"] >= size
        assert run["rejected"] == 0
    samples = {r["sample_size"] for r in data["optimisations"]["rows"] if _finished(r)}
    assert len(samples) == 1
    # line-3 on both graphs: SJoin's exact count is the graph's walk count (indeg(y)·outdeg(z) summed)
    g = data["graphs"]
    for r in g["rows"]:
        if r["strategy"] == "sjoin" and _finished(r):
            assert r["exact_size"] == g["shapes"][f"{r['graph']} at {g['edges']:,}"]["line3"]
    assert all(w["same_sample_as_engine"] for w in data["workers"]["rows"])
    assert set(data["summary"]) >= {"line4_mean_update_ratio", "rswp_evaluation_ratio_at_density_1"}
