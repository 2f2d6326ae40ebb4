"""The ``topics`` case of bench/sql.py: a view over Debezium topics compiled from SQL (its intake inside
the worker, ``ivmstream.sql.topics.FeedEngine``) against the same view configured by hand over the same
topics (the runtime's ``inputs``).

The tables are orders (id, cust, amount, status) and customers (cust, city), as Debezium creates on one
topic each (4 partitions, keyed by primary key); the view is revenue per city:
``SELECT c.city, SUM(o.amount) FROM orders o, customers c WHERE o.cust = c.cust GROUP BY c.city``. By
hand it is fivm's covariance ring over ``amount`` grouped by ``city``, the tables declared with every
column. Both sides read the same records, produced once, each run with a fresh group and store.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Producer

from bench.lib.broker import produce_all
from bench.lib.worker_runs import run_until_caught_up
from ivmstream.config import build_config
from ivmstream.partitioner import partition_for
from ivmstream.runtime import Worker
from ivmstream.runtime.clients import KafkaClients
from ivmstream.runtime.gc_policy import worker_gc
from ivmstream.runtime.kafka import producer_settings
from ivmstream.service import load_service
from ivmstream.sql import load_script
from ivmstream.sql.routing import plan_script
from ivmstream.sql.streaming import stream_units
from ivmstream.sql.topics import topic_inputs
from ivmstream.state import MemoryStore

PARTITIONS = 4
CITIES = ("Lyon", "Oslo", "Pune", "Lima", "Kobe")
SQL = """
CREATE TABLE orders (id INT, cust INT, amount DOUBLE, status VARCHAR(8), PRIMARY KEY (id))
  WITH (topic = '{orders}', format = 'debezium-json');
CREATE TABLE customers (cust INT, city VARCHAR(8), PRIMARY KEY (cust))
  WITH (topic = '{customers}', format = 'debezium-json');
CREATE VIEW revenue AS
SELECT c.city, SUM(o.amount) AS total FROM orders o, customers c WHERE o.cust = c.cust GROUP BY c.city;
"""


def _create(table: str, row: dict[str, Any], ts: int) -> bytes:
    return orjson.dumps({"before": None, "after": row, "op": "c", "source": {"table": table}, "ts_ms": ts})


def records(orders: int) -> dict[str, list[tuple[bytes, bytes]]]:
    rng = random.Random(17)
    customers = [{"cust": c, "city": CITIES[c % len(CITIES)]} for c in range(200)]
    rows = [
        {"id": i, "cust": rng.randrange(200), "amount": rng.randrange(100, 99999) / 100, "status": "open"}
        for i in range(orders)
    ]
    key = lambda name, value: orjson.dumps({name: value})  # noqa: E731
    return {
        "customers": [(key("cust", r["cust"]), _create("customers", r, 0)) for r in customers],
        "orders": [(key("id", r["id"]), _create("orders", r, i)) for i, r in enumerate(rows)],
    }


def _hand_config(topics: dict[str, str]) -> dict[str, Any]:
    return {
        "relations": {
            "orders": {"id": "int", "cust": "int", "amount": "float", "status": "str"},
            "customers": {"cust": "int", "city": "str"},
        },
        "ring": "covariance",
        "features": ["amount"],
        "free": ["city"],
        "inputs": [
            {
                "topic": topics["orders"],
                "format": "debezium-json",
                "relation": "orders",
                "primary_key": ["id"],
            },
            {
                "topic": topics["customers"],
                "format": "debezium-json",
                "relation": "customers",
                "primary_key": ["cust"],
            },
        ],
    }


def _run(broker: Any, service: Any, raw: dict[str, Any], total: int) -> float:
    name = f"sqlbench-{uuid.uuid4().hex[:10]}"
    config = build_config(service, {**raw, "output_topic": f"{name}.out", "dlq_topic": f"{name}.dlq"})
    worker = Worker(service, config, KafkaClients(broker.bootstrap), MemoryStore(), group=f"{name}-g")
    with worker_gc():
        seconds, _results = run_until_caught_up(worker, {0: total})
    return seconds


def topics_case(broker: Any, repeats: int, orders: int, tmp: Path) -> dict[str, Any]:
    """Paired runs of the compiled and the hand view over the same Debezium topics."""
    from bench.lib.progress import progress

    stem = f"sqlbench-{uuid.uuid4().hex[:8]}"
    topics = {"orders": f"{stem}.orders", "customers": f"{stem}.customers"}
    data = records(orders)
    producer = Producer(producer_settings(broker.bootstrap, {"linger.ms": 20}))
    for table, recs in data.items():
        broker.create_topic(topics[table], PARTITIONS)
        produce_all(producer, topics[table], ((k, v, partition_for(k, PARTITIONS)) for k, v in recs))
    total = sum(len(r) for r in data.values())
    path = tmp / "revenue.sql"
    path.write_text(SQL.format(**topics))
    script = load_script(path)
    (unit,) = stream_units(plan_script(script), None, script.tables)
    compiled_raw = {**unit.unit.options, "inputs": topic_inputs(unit.tables)}
    hand = load_service("fivm")
    runs: dict[str, list[float]] = {"sql": [], "hand": []}
    for r in range(repeats):
        for side in ("sql", "hand") if r % 2 == 0 else ("hand", "sql"):
            if side == "sql":
                runs["sql"].append(_run(broker, unit.service, compiled_raw, total))
            else:
                runs["hand"].append(_run(broker, hand, _hand_config(topics), total))
        progress(f"topics repeat {r + 1}/{repeats}: sql {runs['sql'][-1]:.3f}s, hand {runs['hand'][-1]:.3f}s")
    return {"view": "revenue", "service": "fivm", "input_rows": total, "records": total, "seconds": runs}
