"""A tiny run of the sketches benchmark, so it cannot rot; no timing is asserted.

The benchmark itself aborts unless, after every measured series, the IMP sketch equals the Python
capture and the DuckDB capture, and unless imp, full and nosketch give the same answers in the mixed
workload. Here: every experiment is present with the sizes the quick run asks for, and the markdown
tables print from the JSON.
"""

from __future__ import annotations

import pytest
from helpers import bench_markdown, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_sketches_bench_smoke(tmp_path):
    data = run_bench("sketches.py", tmp_path / "sk", "--no-worker", timeout=600)
    assert (tmp_path / "sk.png").stat().st_size > 0
    assert [r["groups"] for r in data["groups"]["groups"]] == [50, 500]
    assert [r["aggregates"] for r in data["groups"]["having"]] == [1, 2, 3]
    for rec in data["groups"]["groups"] + data["groups"]["having"]:
        assert [r["delta"] for r in rec["runs"]] == [10, 100]
        for r in rec["runs"]:
            assert r["imp_s"] > 0 and r["full_python_s"] > 0 and r["full_duckdb_s"] > 0
            assert r["imp_cpu_s"] > 0 and r["duckdb_cpu_s"] > 0  # CPU beside wall time
    assert {r["query"] for r in data["tpch"]} == {"Q3", "Q6"}
    assert {r["safety"] for r in data["tpch"]} == {"S2", "S1"}  # Q3 groups by the order key; Q6 is monotone
    for rec in data["tpch"]:  # the join query also times probe joins on the same batches
        assert all(("imp_probe_s" in r) == (rec["query"] == "Q3") for r in rec["runs"])
    assert {(r["ratio"], r["delta"]) for r in data["mixed"]} == {
        (q, d) for q in ("1U1Q", "1U5Q", "5U1Q") for d in (20, 200)
    }
    # the paper's experiments: each section ran at its quick size and recorded its run
    assert set(data["sections"]) >= {"having_big", "slope", "tpch_big", "crimes", "joins", "joinsel", "selpd"}
    assert [c["aggregates"] for c in data["slope"]["configs"]] == [1, 3]
    assert {q["query"] for q in data["tpch_big"]["queries"]} == {"Q3", "Q7"}
    # the SF 1 section's quick size: one query, checked against DuckDB's capture only, no Python recapture
    assert [q["query"] for q in data["tpch_sf1"]["queries"]] == ["Q14"]
    assert not any("full_python_s" in r for q in data["tpch_sf1"]["queries"] for r in q["runs"])
    assert {p["partition"].split(" ")[0] for p in data["crimes"]["partitions"]} == {
        "explicit",
        "equal",
        "equi-depth",
    }
    assert all(
        {"mat_bloom_s", "probe_s", "probe_bloom_s"} <= set(r) for x in data["joinsel"] for r in x["runs"]
    )
    assert [r["m"] for r in data["topm"]] == [20, 0]
    assert {(r["ratio"], r["delta"]) for r in data["mixed_instances"]} == {
        (q, d) for q in ("1U1Q", "5U1Q") for d in (20, 200)
    }
    printed = bench_markdown("sketches.py", "--out", str(tmp_path / "sk.json"))
    assert "### TPC-H" in printed and "Break-even" in printed
    for title in ("### Q_having at", "### Cost against the number", "### Crimes-shaped", "### Top-m memory"):
        assert title in printed
