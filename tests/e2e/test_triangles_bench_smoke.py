"""A tiny run of the triangle benchmark, so it cannot rot; no timing is asserted."""

from __future__ import annotations

import pytest
from helpers import bench_markdown, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out

STRATEGIES = ("auto", "ivm-eps(1/2)", "first-order", "factorized", "recursive", "recompute")
EPS = ("0", "1/4", "1/3", "1/2", "2/3", "3/4", "1")


def test_triangles_bench_smoke(tmp_path):
    data = run_bench("triangles.py", tmp_path / "tri", "--with-hub", timeout=400)
    for suffix in ("scaling", "speedup", "eps", "strategies"):
        assert (tmp_path / f"tri_{suffix}.png").stat().st_size > 0
    cases = data["cases"]
    sizes = data["config"]["sizes"]
    assert len(sizes) >= 2

    for workload in ("W-mix", "W-all", "W-hub", "W-grow", "G-churn"):
        for n in sizes:
            for strategy in STRATEGIES:
                cid = f"G-churn|{n}|b1|{strategy}" if workload == "G-churn" else f"{workload}|{n}|{strategy}"
                case = cases[cid]
                assert case["status"] in ("ok", "skipped")
                if case["status"] == "skipped":
                    assert strategy not in ("auto", "ivm-eps(1/2)", "first-order")
                    assert case["reason"] and case["estimate"]
                    continue
                assert case["updates"] > 0 and case["updates_per_s"] > 0
                assert case["work_per_update"] >= 0
                assert case["count_ok"] and case["count"] == case["brute_force"]
        if workload in ("W-mix", "W-hub", "W-grow"):
            rows = data["analysis"]["speedups"][workload]
            assert [r["size"] for r in rows] == sizes
            assert all(r["speedup"] > 0 for r in rows)
    at = data["config"]["batch_size_at"]
    for batch in (1, 100, 2000):  # the batch sizes, through engine.apply
        for strategy in STRATEGIES:
            case = cases[f"G-churn|{at}|b{batch}|{strategy}"]
            assert case["count_ok"] and case["batch_size"] == batch
    rows = data["analysis"]["default_vs_best"]
    assert {r["workload"] for r in rows} == {"W-mix", "W-all", "W-hub", "W-grow", "G-churn"}
    assert all(r["ratio"] > 0 for r in rows)
    assert all(r["ratio_whole_run"] > 0 and r["whole_run_updates"] > 0 for r in rows)  # BUILD counted
    assert all(r["ratio_cpu"] > 0 and r["default_us_per_update_cpu"] > 0 for r in rows)  # CPU time too

    for n in sizes:  # toggles: IVM^eps(1/2) needs O(sqrt N) work on W-mix and O(1) on W-hub
        mix = cases[f"W-mix|{n}|ivm-eps(1/2)"]
        assert mix["work_per_update"] == mix["workload_meta"]["ivm_work"]
        assert cases[f"W-hub|{n}|ivm-eps(1/2)"]["work_per_update"] == 1
        assert cases[f"W-mix|{n}|first-order"]["work_per_update"] == mix["workload_meta"]["s_row"]
    slopes = data["analysis"]["slopes"]["W-mix"]
    assert slopes["ivm-eps(1/2)"]["work_per_update_vs_size"] is not None
    assert slopes["first-order"]["work_per_update_vs_size"] is not None

    n = data["config"]["eps_size"]
    for eps in EPS:
        for prefix in ("W-mix-eps", "W-adv-eps"):
            case = cases[f"{prefix}|{n}|ivm-eps({eps})"]
            assert case["status"] == "ok" and case["count_ok"]
    grow = cases[f"W-grow|{sizes[-1]}|ivm-eps(1/2)"]
    assert grow["phases"]["grow"]["rebalancing"]["major_up"] > 0
    assert grow["phases"]["shrink"]["rebalancing"]["major_down"] > 0
    assert grow["phases"]["shrink"]["size_at_end"] == 0

    for name in ("graph-mix", "graph-churn"):
        for strategy in ("auto", "ivm-eps"):
            e2e = cases[f"e2e|{name}|{strategy}"]
            assert e2e["count_ok"], e2e["counts"]
            assert e2e["updates_per_s"] > 0 and e2e["applied"] == e2e["events"]
            assert len(set(e2e["counts"].values())) == 1 and e2e["triangles"] > 0
    assert data["checks"]["all_counts_ok"]
    markdown = bench_markdown("triangles.py", "--from", str(tmp_path / "tri.json"))
    assert "W-all" in markdown and "G-churn" in markdown
