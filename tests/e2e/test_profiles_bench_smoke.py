"""Tiny runs of the profiling script and of the triangle kernels' comparison, so they cannot rot; no
timing is asserted."""

from __future__ import annotations

import pytest
from helpers import bench_markdown, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_profiles_bench_smoke(tmp_path):
    data = run_bench("profiles.py", tmp_path / "p.json", timeout=600)
    engines = {c["engine"] for c in data["cases"]}
    assert engines == {"reservoir", "fivm", "vwap", "triangles"}
    for case in data["cases"]:
        assert case["tuples"] > 0 and case["us_per_tuple"] > 0 and case["cpu_us_per_tuple"] > 0, case["case"]
        assert case["functions"] and case["files"], case["case"]
        # each file's share is rounded to 4 places, so the sum may exceed 1 by half a unit per file
        slack = 0.00005 * len(case["files"])
        assert 0 < sum(f["self_share"] for f in case["files"]) <= 1 + slack, case["case"]
        # a compiled kernel's time is credited to its C source: those files hold at most the compiled share
        in_c = sum(f["self_share"] for f in case["files"] if f["file"].endswith(".c"))
        assert case["kernels"] in {"compiled", "python"}, case["case"]
        assert in_c <= case["compiled_share"] + slack, case["case"]
    rsjoin = next(c for c in data["cases"] if c["case"] == "reservoir-rsjoin")
    if rsjoin["kernels"] == "compiled":  # its index steps run in C
        assert rsjoin["compiled_share"] > 0
        compiled = {f["file"] for f in rsjoin["files"] if f["file"].endswith(".c")}
        assert compiled and all(f.startswith("ivmstream/services/reservoir/_") for f in compiled), compiled
    md = bench_markdown("profiles.py", str(tmp_path / "p.json"))
    assert "| case | engine | workload |" in md and "reservoir-rsjoin" in md


def test_triangle_kernels_bench_smoke(tmp_path):
    # engine only (the worker path is the triangle benchmark's own end-to-end run): both variants ran
    # the kernels they were asked for, and their counts agree
    data = run_bench("triangles_kernels.py", tmp_path / "tk.json", "--no-worker", timeout=600)
    assert set(data["cases"]) == {
        f"engine, {clock} time|{strategy}"
        for clock in ("thread CPU", "wall")
        for strategy in ("auto", "ivm-eps")
    }
    for case in data["cases"].values():
        assert case["results_agree"]
        assert {r["kernels"] for r in case["runs"]} == {"compiled", "python"}
    assert (tmp_path / "tk.png").stat().st_size > 0
    assert "| engine, thread CPU time | ivm-eps |" in bench_markdown(
        "triangles_kernels.py", str(tmp_path / "tk.json")
    )
