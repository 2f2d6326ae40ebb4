"""A view compiled from SQL runs on the services' own workers: ``sql produce``'s events through a real
``Worker`` over the in-memory cluster give the rows ``sql replay`` gives."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.sql import load_script
from ivmstream.sql.inputs import InputChoice, read_events
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from ivmstream.sql.streaming import produce_events, stream_units, tables_of, view_rows
from ivmstream.state.memory import MemoryStore
from tests.unit.sql.oracle import DATA, ROOT, dbtoaster_cwd

CASES = [("tpch/query14.sql", "tiny_del"), ("tpch/query17.sql", "tiny"), ("finance/missedtrades.sql", "tiny")]


@pytest.mark.parametrize(("query", "dataset"), CASES)
def test_workers_fed_by_sql_produce_equal_replay(tmp_path: Path, query: str, dataset: str) -> None:
    with dbtoaster_cwd(tmp_path, DATA):
        script = load_script(ROOT / query)
        plans = plan_script(script)
        choice = InputChoice({}, dataset)
        (expected,) = replay_script(script, plans, choice)
        units = stream_units(plans)
        cluster = InMemoryCluster()
        for u in units:
            cluster.create_topic(u.config.input_topic)
        produce_events(
            units, read_events(script, tables_of(units), choice), lambda t, v: cluster.produce(t, v)
        )
    results = []
    for u in units:
        worker = Worker(u.service, u.config, cluster, MemoryStore())
        run_to_end(worker)
        last = orjson.loads(cluster.values(u.config.output_topic)[-1])
        results.append(last["result"])
    assert view_rows(units, results)["rows"] == expected["rows"]
