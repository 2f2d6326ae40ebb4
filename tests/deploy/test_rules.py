"""charts/ivmstream/rules: promtool accepts them, `promtool test rules` shows every alert firing and staying
silent, each alert carries its runbook, and every series they read is one the workers export."""

from __future__ import annotations

import shutil

import yaml
from deploy_tools import REPO, run_tool, tool, unknown_names

RULES = REPO / "charts" / "ivmstream" / "rules"
UNIT_TESTS = REPO / "tests" / "deploy" / "rules_test.yaml"


def _rules(kind: str) -> list[dict]:
    return [
        rule
        for path in sorted(RULES.glob("*.yaml"))
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if kind in rule
    ]


def test_promtool_check_rules():
    proc = run_tool(tool("promtool"), "check", "rules", *map(str, sorted(RULES.glob("*.yaml"))))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_unit_tests_pass():
    proc = run_tool(tool("promtool"), "test", "rules", str(UNIT_TESTS))
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout, proc.stdout + proc.stderr


def test_every_alert_fires_and_stays_silent_in_the_unit_tests():
    cases = [c for t in yaml.safe_load(UNIT_TESTS.read_text())["tests"] for c in t.get("alert_rule_test", [])]
    for alert in _rules("alert"):
        mine = [c for c in cases if c["alertname"] == alert["alert"]]
        assert any(c["exp_alerts"] for c in mine), f"{alert['alert']} never fires in {UNIT_TESTS.name}"
        assert any(not c["exp_alerts"] for c in mine), f"{alert['alert']} is never shown silent"


def test_every_alert_has_a_severity_summary_and_runbook():
    for alert in _rules("alert"):
        assert alert["labels"]["severity"] in ("warning", "critical"), alert["alert"]
        assert alert["annotations"]["summary"] and len(alert["annotations"]["runbook"]) > 80, alert["alert"]


def test_rules_read_only_series_the_workers_export():
    for rule in _rules("alert") + _rules("record"):
        # `up` is Prometheus' own series for every scrape target
        assert unknown_names(rule["expr"]) - {"up", "job", "instance"} == set(), rule


def test_the_unit_tests_catch_a_changed_threshold(tmp_path):
    """The same cases against an alert whose threshold moved: promtool must report the difference."""
    shutil.copy(RULES / "recording.yaml", tmp_path / "recording.yaml")
    text = (RULES / "alerts.yaml").read_text()
    changed = text.replace(
        "rate(ivmstream_events_rejected_total[5m])) > 1", "rate(ivmstream_events_rejected_total[5m])) > 3"
    )
    assert changed != text
    (tmp_path / "alerts.yaml").write_text(changed)
    tests = UNIT_TESTS.read_text().replace("../../charts/ivmstream/rules/", "")
    (tmp_path / "rules_test.yaml").write_text(tests)
    proc = run_tool(tool("promtool"), "test", "rules", "rules_test.yaml", cwd=tmp_path)
    assert proc.returncode != 0 and "IvmstreamDeadLettersHigh" in proc.stdout + proc.stderr
