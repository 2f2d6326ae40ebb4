"""``sql bootstrap`` of a view over topic-backed tables (Debezium and upsert topics of three partitions)
and a static table from a file: the Spark jobs build its state from the first half of the topics and
the file, a worker resumes from it over the second half, and the rows it publishes equal DuckDB over
the final tables (an upsert after the bootstrap retracts the image the bootstrap kept). A view over
topics alone takes the same path without files (one Spark run is kept here: each costs a minute on a
loaded machine). A mixed view does not run before its bootstrap. A relation whose topics held no
records enters the jobs as an empty frame of its decoded columns."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from ivmstream.runtime import Worker
from ivmstream.runtime.clients import KafkaClients
from ivmstream.runtime.dlq import read_to_end
from ivmstream.sql import SqlError, load_script
from ivmstream.sql.batch import bootstrap_views
from ivmstream.sql.command import cmd_run
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.routing import plan_script
from ivmstream.sql.streaming import group_of, stream_units, view_rows
from ivmstream.state import open_store
from tests.unit.sql.oracle import coalesced, same_rows
from tests.unit.sql.test_sql_topics import _duck, workload

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("one_shuffle_partition")]

SQL = """
CREATE TABLE orders (id INT, customer INT, amount DECIMAL(10, 2), status VARCHAR(10), PRIMARY KEY (id))
  WITH (topic = '{u}.db.orders', format = 'debezium-json');
CREATE TABLE customers (id INT, city VARCHAR(20))
  WITH (topic = '{u}.db.customers', format = 'upsert-json', key = 'id');
CREATE TABLE cities (city VARCHAR(20), region VARCHAR(10))
  FROM FILE 'cities.csv' LINE DELIMITED CSV (delimiter := '|');
CREATE VIEW {u}_revenue AS
SELECT c.city, SUM(o.amount) AS total, COUNT(*) AS n
FROM orders o, customers c WHERE o.customer = c.id AND o.status <> 'void' GROUP BY c.city;
CREATE VIEW {u}_regional AS
SELECT k.region, SUM(o.amount) AS total FROM orders o, customers c, cities k
WHERE o.customer = c.id AND c.city = k.city GROUP BY k.region;
"""
CITIES = [("Lyon", "west"), ("Oslo", "north"), ("Pune", "east"), ("Kiev", "east")]
TOPICS = ("db.orders", "db.customers")


def test_bootstrap_from_topics_and_files_then_workers_resume(
    spark: Any, broker: Any, unique: str, tmp_path: Path
) -> None:
    (tmp_path / "cities.csv").write_text("".join(f"{c}|{r}\n" for c, r in CITIES))
    path = tmp_path / "shop.sql"
    path.write_text(SQL.format(u=unique))
    script = load_script(path)
    every = stream_units(plan_script(script), None, script.tables)
    assert [[t.name for t in u.files] for u in every] == [[], ["cities"]]
    assert [[t.name for t in u.tables] for u in every] == [["orders", "customers"]] * 2
    plans = plan_script(script, f"{unique}_regional")
    units = stream_units(plans, {"checkpoint_interval": 0.01}, script.tables)
    log = workload(seed=3)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})

    def produce(half: int) -> None:
        for topic in TOPICS:
            records = log.records[topic]
            part = records[: len(records) // 2] if half == 0 else records[len(records) // 2 :]
            for key, value, partition in part:
                producer.produce(f"{unique}.{topic}", value, key, partition=partition)
        producer.flush(30)

    for topic in TOPICS:
        broker.create_topic(f"{unique}.{topic}", 3, exist_ok=True)
    produce(0)
    state = tmp_path / "state"
    choice = InputChoice({}, base=tmp_path)

    def store(u: Any) -> Any:
        return open_store("rocksdb", group_of(u), state_dir=state)

    reports = bootstrap_views(spark, script, units, choice, store, bootstrap_servers=broker.bootstrap)
    half = {t: len(log.records[t]) // 2 for t in TOPICS}
    for r in reports:
        assert sum(r["resume"].values()) == sum(half.values()), r
    assert [r["files"] for r in reports] == [["cities"]]
    produce(1)
    con = _duck(log)
    con.execute("CREATE TABLE cities (city VARCHAR, region VARCHAR)")
    con.executemany("INSERT INTO cities VALUES (?, ?)", CITIES)
    total = sum(len(log.records[t]) for t in TOPICS)
    for u in units:
        worker = Worker(u.service, u.config, KafkaClients(broker.bootstrap), store(u), group=group_of(u))
        worker.run(until=lambda w: sum(v or 0 for v in w.positions().values()) >= total)  # type: ignore[misc]
        worker.close()
        last = orjson.loads(read_to_end(broker.bootstrap, u.config.output_topic)[-1].value())
        rows = view_rows([u], [last["result"]])["rows"]
        expected = [list(r) for r in con.execute(coalesced(u.plan.view.select)).fetchall()]
        assert rows and same_rows(rows, expected), (u.plan.view.name, rows, expected)


def test_a_mixed_view_does_not_run_before_its_bootstrap(tmp_path: Path, unique: str) -> None:
    (tmp_path / "cities.csv").write_text("Lyon|west\n")
    path = tmp_path / "shop.sql"
    path.write_text(SQL.format(u=unique))
    args = argparse.Namespace(
        file=str(path),
        view=f"{unique}_regional",
        bootstrap="127.0.0.1:1",
        state_backend="rocksdb",
        state_dir=str(tmp_path / "state"),
        redis=None,
        checkpoint_interval=None,
        input=None,
        dataset=None,
    )
    with pytest.raises(SqlError, match=r"reads static tables from files \(cities\).*sql bootstrap` first"):
        cmd_run(args)


def test_relations_of_empty_topics_are_empty_frames(spark: Any) -> None:
    """A relation whose topics held no records enters the jobs as an empty frame with the columns and
    types its decoded events have (schema only: no Spark job runs)."""
    from pyspark.sql.types import LongType, StringType

    from ivmstream.config import build_config, schema_of
    from ivmstream.service import load_service
    from ivmstream.spark.decode import DECIMAL, KEY, MULT
    from ivmstream.spark.inputs import require_every_relation

    service = load_service("reference")
    relations = {"bids": {"broker": "int", "price": "decimal", "note": "str"}, "asks": {"volume": "float"}}
    config = build_config(service, {"relations": relations})
    parts: dict[str, list[Any]] = {"bids": [], "asks": ["rows"]}
    require_every_relation(spark, parts, schema_of(service, config), topics_read=True)
    assert parts["asks"] == ["rows"]
    (frame,) = parts["bids"]
    assert [(f.name, f.dataType) for f in frame.schema.fields] == [
        (KEY, StringType()),
        ("broker", LongType()),
        ("price", DECIMAL),
        ("note", StringType()),
        (MULT, LongType()),
    ]
