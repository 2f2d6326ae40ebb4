"""The generated Grafana dashboards: current, one per service plus the overview, every PromQL expression
parsed by Prometheus' own parser (promtool), and every name in them a series or label the workers export
(directly or through a recording rule); a service's engine panels name only gauges its engine reports.
The panels of the views' results are SQL, checked in test_view_panels.py."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from deploy_tools import (
    REPO,
    promql_identifiers,
    recording_rules,
    run_tool,
    substitute_grafana,
    tool,
    unknown_names,
)

from deploy.dashboards import engine_stats
from deploy.services import deployable_services

DASHBOARDS = REPO / "charts" / "ivmstream" / "dashboards"


def _boards() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


def _exprs(board: dict) -> list[str]:
    found = [t["expr"] for p in board["panels"] for t in p.get("targets", []) if "expr" in t]
    found += [v["query"] for v in board["templating"]["list"] if v["type"] == "query"]
    return found


def test_generated_dashboards_are_current():
    from deploy.__main__ import stale_files

    stale = [p for p in stale_files() if p.startswith("charts/ivmstream/dashboards/")]
    assert stale == [], f"regenerate with `python -m deploy`: {stale}"


def test_an_overview_and_one_dashboard_per_service():
    boards = _boards()
    assert set(boards) == {"overview", "views"} | {d.name for d in deployable_services()}
    uids = [b["uid"] for b in boards.values()]
    assert len(set(uids)) == len(uids)
    for name, board in boards.items():
        sources = {v["name"]: v["query"] for v in board["templating"]["list"] if v["type"] == "datasource"}
        if name != "views":
            assert sources["datasource"] == "prometheus"
        if name != "overview":  # the views' own panels read the PostgreSQL results sink
            assert sources["results"] == "grafana-postgresql-datasource"
        ids = [p["id"] for p in board["panels"]]
        assert len(set(ids)) == len(ids)


def test_every_expression_parses_with_promtool(tmp_path):
    exprs = sorted(
        {substitute_grafana(e) for b in _boards().values() for e in _exprs(b) if "label_values" not in e}
    )
    rules = [{"record": f"dashboard:expr:{i}", "expr": e} for i, e in enumerate(exprs)]
    path = tmp_path / "dashboard_exprs.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    proc = run_tool(tool("promtool"), "check", "rules", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout


def test_the_parse_check_rejects_a_broken_expression(tmp_path):
    path = tmp_path / "broken.yaml"
    bad = {"record": "dashboard:expr:0", "expr": "sum by (service (rate(ivmstream_events_in_total[5m]))"}
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": [bad]}]}))
    assert run_tool(tool("promtool"), "check", "rules", str(path)).returncode != 0


@pytest.mark.parametrize("name", sorted(p.stem for p in DASHBOARDS.glob("*.json")))
def test_every_name_is_a_worker_metric_or_label(name):
    for expr in _exprs(_boards()[name]):
        assert unknown_names(substitute_grafana(expr)) == set(), expr


def test_overview_shows_what_operators_watch():
    used: set[str] = set()
    recorded = recording_rules()
    for expr in _exprs(_boards()["overview"]):
        for ident in promql_identifiers(substitute_grafana(expr)):
            used |= {ident} | promql_identifiers(recorded.get(ident, ""))
    wanted = {
        "ivmstream_events_in_total",
        "ivmstream_events_applied_total",
        "ivmstream_events_rejected_total",
        "ivmstream_consumer_lag",
        "ivmstream_batch_seconds_bucket",
        "ivmstream_checkpoint_seconds_bucket",
        "ivmstream_checkpoint_bytes_sum",
        "ivmstream_state_bytes",
        "ivmstream_reconcile_ok",
        "ivmstream_reconcile_mismatched_keys",
    }
    assert wanted <= used, wanted - used


def test_engine_panels_name_the_engines_own_gauges():
    boards = _boards()
    for d in deployable_services():
        stats = set(engine_stats(d))
        shown: set[str] = set()
        for expr in _exprs(boards[d.name]):
            for pattern in re.findall(r'stat=~"([^"]*)"', expr):
                shown |= {name.replace("\\\\", "\\") for name in pattern.split("|")}
        shown = {re.sub(r"\\(.)", r"\1", name) for name in shown}
        assert shown == stats, (d.name, shown ^ stats)


def test_the_name_check_catches_a_misspelt_metric_or_label():
    assert unknown_names('sum by (servcie) (rate(ivmstream_event_in_total{service="a"}[5m]))') == {
        "servcie",
        "ivmstream_event_in_total",
    }
