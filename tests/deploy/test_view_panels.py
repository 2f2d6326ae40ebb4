"""The dashboards' panels of the views: every SQL query runs against a real PostgreSQL holding a demo run's
rows (each deployed service's demo workload through a real Worker and the PostgreSQL sink) and returns
rows of the shape its panel needs; the datasource the panels use is provisioned where Grafana runs."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import psycopg
import pytest
import yaml
from deploy_tools import REPO

from deploy.services import deployable_services
from deploy.views import POSTGRES_TYPE, POSTGRES_UID
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.runtime.postgres import PostgresSink
from ivmstream.state import MemoryStore
from ivmstream.testing import conformance_cases

DASHBOARDS = REPO / "charts" / "ivmstream" / "dashboards"
SERVICES = [d.name for d in deployable_services()]


@pytest.fixture(scope="module")
def demo_rows(postgres_server) -> str:
    """Each service's demo workload run by a Worker whose results go to PostgreSQL under its own name."""
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS ivmstream_results, ivmstream_result_history")
    for name in SERVICES:
        case = conformance_cases([name])[0]
        cluster = InMemoryCluster()
        cluster.create_topic("in", case.workload.partitions)
        for record in case.records:
            cluster.produce("in", record.value, record.key)
        config = dataclasses.replace(
            case.config,
            input_topic="in",
            output_topic=f"{name}.results",
            dlq_topic="dlq",
            batch_size=max(1, len(case.records) // 8),
            checkpoint_interval=0.0,
        )
        sink = PostgresSink(postgres_server.dsn, name, flush_interval=0.01)
        run_to_end(Worker(case.service, config, cluster, MemoryStore(), group="g", postgres=sink))
    return postgres_server.dsn


def _panels(board: str) -> list[tuple[str, dict[str, Any]]]:
    model = json.loads((DASHBOARDS / f"{board}.json").read_text())
    return [
        (panel["title"], target)
        for panel in model["panels"]
        for target in panel.get("targets", [])
        if "rawSql" in target
    ]


def _runnable(sql: str, view: str) -> str:
    """The query as Grafana sends it: its macros and the view variable substituted."""
    sql = re.sub(
        r"\$__timeFilter\((\w+)\)",
        r"\1 BETWEEN now() - interval '1 hour' AND now() + interval '1 minute'",
        sql,
    )
    return sql.replace("$view", view)


@pytest.mark.parametrize("board", ["views", *SERVICES])
def test_every_results_query_returns_rows_of_its_panels_shape(demo_rows, board):
    panels = _panels(board)
    assert panels, f"{board}: no panel of the results"
    views = SERVICES if board == "views" else [board]
    with psycopg.connect(demo_rows) as conn:
        for title, target in panels:
            assert target["datasource"] == {"type": POSTGRES_TYPE, "uid": "${results}"}, title
            sql = target["rawSql"]
            view = next((v for v in views if f"'{v}'" in sql), board)
            cur = conn.execute(_runnable(sql, view))
            rows = cur.fetchall()
            columns = [c.name for c in cur.description or []]
            assert rows, f"{board} / {title}: no rows for {view}:\n{sql}"
            if target["format"] == "time_series":
                assert columns == ["time", "metric", "value"], (title, columns)
                times = [row[0] for row in rows]
                assert times == sorted(times), title


def test_each_service_dashboard_has_the_results_of_its_kind():
    titles = {name: {title for title, _ in _panels(name)} for name in SERVICES}
    wanted = {
        "vwap": "Query results over time",
        "triangles": "Triangles per graph",
        "fivm": "Aggregates over time",
        "reservoir": "Sample",
        "sketches": "Answer sizes",
    }
    for name, title in wanted.items():
        if name in titles:
            assert title in titles[name], (name, titles[name])
    assert all("Latest result per key" in t for t in titles.values())


def test_grafana_is_provisioned_with_the_results_datasource():
    provisioned = yaml.safe_load((REPO / "docker/grafana/provisioning/datasources/results.yaml").read_text())
    [source] = provisioned["datasources"]
    assert (source["type"], source["uid"]) == (POSTGRES_TYPE, POSTGRES_UID)
