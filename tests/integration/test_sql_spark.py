"""``sql reconcile`` and ``sql bootstrap``: views compiled from SQL run on real workers over the
embedded broker, and their published rows are checked against the views' own SQL evaluated by Spark SQL
(MATCH, then MISMATCH once a result is tampered with); the services' Spark jobs bootstrap each unit's
state from the tables' files, equal to replay's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from ivmstream.runtime import Worker
from ivmstream.runtime.clients import KafkaClients
from ivmstream.sql import load_script
from ivmstream.sql.batch import bootstrap_views, reconcile_views
from ivmstream.sql.inputs import InputChoice, read_events
from ivmstream.sql.recompute import row_differences
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from ivmstream.sql.streaming import StreamUnit, group_of, produce_events, stream_units, tables_of
from ivmstream.state import MemoryStore, open_store
from tests.unit.sql.oracle import DATA, ROOT, dbtoaster_cwd
from tests.unit.sql.test_sql_topics import SHOP, _cluster, workload

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("one_shuffle_partition")]
EXAMPLES = ROOT.parent / "examples"


def _renamed(units: list[StreamUnit], prefix: str, script: Any) -> list[StreamUnit]:
    """The units again, on topics under a fresh prefix (tests share the broker)."""
    for u in units:
        u.plan.view.name = f"{prefix}_{u.plan.view.name}"
    return stream_units([u.plan for u in units if u.unit is u.plan.units[0]], None, script.tables)


def _run(u: StreamUnit, bootstrap: str, total: int) -> None:
    worker = Worker(u.service, u.config, KafkaClients(bootstrap), MemoryStore(), group=group_of(u))
    worker.run(until=lambda w: sum(v or 0 for v in w.positions().values()) >= total)  # type: ignore[misc]
    worker.close()


def _produce(bootstrap: str, broker: Any, units: list[StreamUnit], events: Any) -> dict[str, int]:
    for u in units:
        broker.create_topic(u.config.input_topic, 1, exist_ok=True)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    counts = produce_events(units, events, lambda t, v: producer.produce(t, v, partition=0))
    producer.flush(30)
    return counts


CASES = [
    ("tpch/query3.sql", "tiny", "fivm"),
    ("tpch/query1.sql", "tiny_del", "fivm"),
    ("tpch/query17.sql", "tiny", "vwap"),
    ("finance/vwap.sql", "tiny", "vwap"),
]


@pytest.mark.parametrize(("query", "dataset", "service"), CASES)
def test_reconcile_matches_then_catches_a_tampered_result(
    spark: Any, broker: Any, unique: str, tmp_path: Path, query: str, dataset: str, service: str
) -> None:
    with dbtoaster_cwd(tmp_path, DATA):
        script = load_script(ROOT / query)
        units = _renamed(stream_units(plan_script(script), None, script.tables), unique, script)
        choice = InputChoice({}, dataset)
        counts = _produce(broker.bootstrap, broker, units, read_events(script, tables_of(units), choice))
        for u in units:
            _run(u, broker.bootstrap, counts[u.config.input_topic])
        (report,) = reconcile_views(spark, script, units, choice, broker.bootstrap)
        assert (report["service"], report["verdict"]) == (service, "match"), report
        u = units[0]
        msg = _read_last(broker.bootstrap, u.config.output_topic)
        last = orjson.loads(msg.value())
        last["result"] = _tampered(u.plan, last["result"])
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(u.config.output_topic, orjson.dumps(last), msg.key(), partition=msg.partition())
        producer.flush(10)
        (report,) = reconcile_views(spark, script, units, choice, broker.bootstrap)
    assert report["verdict"] == "mismatch" and report["differences"], report


def _read_last(bootstrap: str, topic: str) -> Any:
    from ivmstream.runtime.dlq import read_to_end

    return list(read_to_end(bootstrap, topic))[-1]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Any:
    if isinstance(value, dict):
        for k, v in value.items():
            if k != "stats":
                yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    elif isinstance(value, int | float | str) and not isinstance(value, bool):
        yield path


def _tampered(plan: Any, result: Any) -> Any:
    """The result with the first number the view's rows read changed."""
    for path in _leaves(result):
        copy = orjson.loads(orjson.dumps(result))
        node = copy
        for step in path[:-1]:
            node = node[step]
        old = node[path[-1]]
        try:
            node[path[-1]] = (float(old) + 1000) if isinstance(old, str) else old + 1000
        except ValueError:
            continue
        if plan.assemble([copy]) != plan.assemble([result]):
            return copy
    raise AssertionError("no number of the result reaches the view's rows")


def test_reconcile_views_over_change_topics_and_a_sample(
    spark: Any, broker: Any, unique: str, tmp_path: Path
) -> None:
    log = workload(seed=5)
    sql = SHOP
    for topic in ("db.orders", "db.customers", "db.refunds", "graph.edges"):
        sql = sql.replace(f"'{topic}'", f"'{unique}.{topic}'")
    path = tmp_path / "shop.sql"
    path.write_text(sql)
    script = load_script(path)
    units = _renamed(stream_units(plan_script(script), None, script.tables), unique, script)
    cluster = _cluster(log)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for topic in log.records:
        broker.create_topic(f"{unique}.{topic}", 3, exist_ok=True)
        for msg in cluster.messages(topic):
            producer.produce(f"{unique}.{topic}", msg.value(), msg.key(), partition=msg.partition())
    producer.flush(30)
    for u in units:
        _run(
            u,
            broker.bootstrap,
            sum(len(log.records[i.topic.removeprefix(f"{unique}.")]) for i in u.config.inputs),
        )
    reports = reconcile_views(spark, script, units, InputChoice({}), broker.bootstrap)
    assert [(r["service"], r["verdict"]) for r in reports] == [
        ("fivm", "match"),
        ("fivm", "match"),
        ("triangles", "match"),
    ], reports

    sql = (EXAMPLES / "sample.sql").read_text().replace("1000000 ROWS", "7 ROWS")
    (tmp_path / "sample.sql").write_text(sql)
    sample = load_script(tmp_path / "sample.sql")
    choice = InputChoice({}, base=EXAMPLES)
    units = _renamed(stream_units(plan_script(sample), None, sample.tables), unique, sample)
    counts = _produce(broker.bootstrap, broker, units, read_events(sample, tables_of(units), choice))
    _run(units[0], broker.bootstrap, counts[units[0].config.input_topic])
    (report,) = reconcile_views(spark, sample, units, choice, broker.bootstrap)
    assert (report["service"], report["verdict"], report["rows"]) == ("reservoir", "match", 7), report


@pytest.mark.parametrize(
    ("query", "dataset"),
    [("tpch/query3.sql", "tiny"), ("tpch/query18.sql", "tiny_del"), ("finance/axfinder.sql", "tiny")],
)
def test_bootstrap_builds_each_units_state_as_replay_does(
    spark: Any, unique: str, tmp_path: Path, query: str, dataset: str
) -> None:
    with dbtoaster_cwd(tmp_path, DATA):
        script = load_script(ROOT / query)
        plans = plan_script(script)
        (expected,) = replay_script(script, plans, InputChoice({}, dataset))
        units = _renamed(stream_units(plans, None, script.tables), unique, script)
        state = tmp_path / "state"
        reports = bootstrap_views(
            spark,
            script,
            units,
            InputChoice({}, dataset),
            lambda u: open_store("rocksdb", group_of(u), state_dir=state),
        )
    assert [r["resume"] for r in reports] == [{f"{u.config.input_topic}:0": 0} for u in units]
    results = []
    for u in units:
        store = open_store("rocksdb", group_of(u), state_dir=state)
        cp = store.load(u.config.input_topic, 0)
        engine = u.service.engine(u.config.options)
        if cp.entries:
            (entries,) = cp.entries.values()
            engine.restore_entries(entries)
        else:
            (snap,) = cp.snapshots.values()
            engine.restore(snap)
        store.close()
        results.append(engine.result())
    assert row_differences(units[0].plan.assemble(results), expected["rows"], rel=1e-9) == []
