"""A tiny run of the F-IVM benchmark, so it cannot rot; no timing is asserted.

What is asserted follows from the queries, not from the run: Housing's view tree has one leaf per
relation keyed by postcode plus the root (docs/fivm/algorithm.md §2.4), first-order IVM with scalar
payloads stores the base relations and one result per aggregate (docs/fivm/baselines.md
§3), indicator projections bound the triangle's inner view by |R| (docs/fivm/algorithm.md §2.9), and
every strategy of a case agreed with the reference (the benchmark aborts otherwise).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO, run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out

REL_TOL = 1e-9
# The real Retailer dimension tables beside the checkout; the Retailer cases run only where they are.
DIMS = Path(REPO).parent / "shared" / "data" / "fivm" / "retailer-dims"


def housing_tuples(postcodes: int, fanout: int) -> int:
    return postcodes * (3 + 3 * fanout)  # three relations with one row per postcode, three with fanout


def check_runs(runs: dict, tuples: int) -> None:
    for label, rec in runs.items():
        assert rec["label"] == label
        assert rec["tuples"] == tuples
        assert 0 < rec["processed"] <= tuples
        if not rec["timed_out"]:
            assert rec["processed"] == tuples
        assert rec["max_rel_diff_vs_reference"] <= REL_TOL
        assert rec["views"] == len(rec["view_sizes"])
        assert rec["view_entries"] == sum(rec["view_sizes"].values())
        assert rec["stored_entries"] >= rec["view_entries"] and rec["stored_bytes"] > 0


def test_fivm_bench_smoke(tmp_path):
    experiments = "e1,e3,e4,e6,e8,e1_growth,model,service" + (",retailer,e7" if DIMS.is_dir() else "")
    dims = ["--retailer-dims", str(DIMS)] if DIMS.is_dir() else []
    data = run_bench("fivm.py", tmp_path / "fv", "--experiments", experiments, *dims, timeout=900)
    assert (tmp_path / "fv.png").stat().st_size > 0
    opts = data["options"]

    e1 = data["e1"]
    assert [r["scale"] for r in e1] == [1, 3]
    for r in e1:
        check_runs(r["runs"], housing_tuples(opts["postcodes"], r["fanout"]))
        assert set(r["runs"]) == {"fivm", "dbt", "1-ivm", "f-re", "dbt-re"}
        fivm = r["runs"]["fivm"]
        assert fivm["views"] == 7 and fivm["view_entries"] == 6 * opts["postcodes"] + 1
        assert r["runs"]["dbt"]["views"] == 7  # Housing: DBToaster's hierarchy is F-IVM's views
        assert r["runs"]["1-ivm"]["views"] == 6 + 1

    e4 = data["e4"]
    assert {(r["scale"], r["m"]) for r in e4} == {(1, 6), (1, 27), (2, 6), (2, 27)}
    for r in e4:
        fan = 1 if r["scale"] == 1 else 2
        check_runs(r["runs"], housing_tuples(opts["e4_postcodes"], fan))
        m = r["m"]
        assert len(r["features"]) == m
        for st in ("fivm", "fivm per-tuple", "fivm per-tuple dense", "sql-opt", "dbt-ring"):
            assert r["runs"][st]["views"] == 7
        assert r["runs"]["dbt"]["views"] > r["runs"]["dbt-ring"]["views"]
        if m <= 10:
            aggregates = 1 + m + m * (m + 1) // 2
            assert r["runs"]["1-ivm"]["views"] == 6 + aggregates
        else:
            assert "1-ivm" not in r["runs"]

    for r in data["e6"]:
        n = r["edges_per_relation"]
        runs = r["runs"]
        assert set(runs) == {"fivm+indicators", "fivm", "dbt-ring", "1-ivm-ring", "1-ivm"}
        check_runs(runs, 3 * n)
        one = r["one"]
        assert set(one) == {"fivm-one", "1-ivm", "1-ivm-ring"}
        check_runs(one, n)  # only R's updates are timed
        assert all(rec["load_seconds"] is not None for rec in one.values())
        assert set(one["fivm-one"]["view_sizes"]) == {"V@A", "V@C"}  # the root and V@C = S ⋈ T
        ind = runs["fivm+indicators"]["view_sizes"]
        assert any(name.startswith("I@") for name in ind)
        assert all(size <= n for size in ind.values())
        plain = runs["fivm"]["view_sizes"]
        inner = [name for name in plain if name.startswith("V@") and plain[name] > 1]
        assert all(plain[name] >= ind[name] for name in inner)

    e8 = data["e8"]
    assert [r["scale"] for r in e8] == [1, 2]
    for r in e8:
        check_runs(r["runs"], housing_tuples(opts["e8_postcodes"], r["fanout"]))
        assert r["join_rows"] == opts["e8_postcodes"] * r["fanout"] ** 3
    last = e8[-1]["runs"]
    assert last["fact-payloads"]["stored_bytes"] < last["list-payloads"]["stored_bytes"]

    e3 = data["e3"]
    for row in e3["rows"] + e3["ranks"]:
        for name in ("reeval", "1-ivm", "fivm"):
            assert row[f"{name}_error"] <= REL_TOL and row[name]["updates"] == 3
    assert [r["rank"] for r in e3["ranks"]] == [1, 2, 4]
    for row in e3["hashmap"]:
        assert set(row["runs"]) == {"fivm", "1-ivm-ring", "reeval", "fivm factorized"}
        for rec in row["runs"].values():
            assert rec["max_rel_diff_vs_reference"] == 0.0 and rec["batches"] == row["row_updates"]

    growth = data["e1_growth"]
    assert [r["scale"] for r in growth] == [1, 4]
    for r in growth:
        check_runs(r["runs"], housing_tuples(r["postcodes"], r["fanout"]))
    for key in ("housing", "retailer") if DIMS.is_dir() else ("housing",):
        model = data["model"][key]
        assert model["closed-form"]["status"] == "ok" and model["gradient-descent"]["status"] == "ok"
        assert model["max_coefficient_diff"] <= 1e-6
    if DIMS.is_dir():
        ret = data["retailer"]
        # the first rows of the real Location and Item, the Census rows those locations reference
        rows = opts["retailer_dim_rows"]
        assert ret["sizes"]["Location"] == ret["sizes"]["Item"] == rows
        assert 0 < ret["sizes"]["Census"] <= rows and ret["sizes"]["Weather"] == rows
        assert ret["e5"]["fivm"]["views"] == 9 and ret["e5_one"]["fivm-one"]["views"] == 4
        for key in ("e2", "e5"):
            check_runs(ret[key], ret["tuples"])
        check_runs(ret["e5_one"], ret["sizes"]["Inventory"])
        assert {r["dataset"] for r in data["e7"]} == {"Housing", "Retailer", "Triangle"}

    svc = data["service"]
    assert svc["events"] == housing_tuples(opts["service_postcodes"], 1)
    assert svc["max_rel_diff_worker_vs_engine"] <= REL_TOL
    assert len(svc["worker_runs"]) == svc["repeats"]["worker"]

    summary = data["summary"]
    for goal in ("goal_e1", "goal_e3", "goal_e4", "goal_e6", "goal_e8", "goal_e1_growth"):
        assert isinstance(summary[goal]["met"], bool)
