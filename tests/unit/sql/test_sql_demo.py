"""The demo from one SQL file: docs/examples/sql/demo.sql routes each demo workload's query to the
service whose demo it is, and ``sql replay`` over the demo's own data files runs every view."""

from __future__ import annotations

from pathlib import Path

from ivmstream.sql import load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "docs" / "examples" / "sql" / "demo.sql"
ROUTES = {
    "social_triangles": ("triangles", "ivm-eps"),
    "housing_regression": ("fivm", "fivm"),
    "walks": ("reservoir", "rsjoin"),
    "vwap": ("vwap", "rpai"),
    "demo_1": ("sketches", "imp"),
}


def test_explain_routes_each_demo_query_to_its_service() -> None:
    plans = plan_script(load_script(DEMO, base=REPO))
    assert {p.view.name: (p.service, p.strategy) for p in plans} == ROUTES
    demo_inputs = {  # each view reads the file its service's demo produces
        "social_triangles": "services/triangles/data/sample.jsonl",
        "housing_regression": "services/fivm/data/housing.jsonl",
        "walks": "services/reservoir/data/graph.jsonl",
        "vwap": "services/vwap/data/finance-standard.csv",
        "demo_1": "services/sketches/data/tpch_demo.jsonl",
    }
    script = load_script(DEMO, base=REPO)
    for p in plans:
        files = {script.tables[f.table].source.path for u in p.units for f in u.feeds}  # type: ignore[union-attr]
        assert files == {demo_inputs[p.view.name]}


def test_replay_runs_every_demo_view() -> None:
    script = load_script(DEMO, base=REPO)
    results = {r["view"]: r for r in replay_script(script, plan_script(script), InputChoice({}, None, REPO))}
    assert results["social_triangles"]["rows"][0][0] > 0
    assert results["housing_regression"]["rows"][0][0]["count"] > 0
    assert len(results["walks"]["rows"]) == 25
    assert results["vwap"]["rows"][0][0] > 0
    assert results["demo_1"]["rows"] and results["demo_1"]["sketch"]
