"""Kafka-native DDL: views over tables declared ``WITH (topic, format, key)`` run on real Workers that
read the tables' topics directly (Debezium, upsert, Maxwell and native records, several partitions),
equal DuckDB over the final tables, also across a restart from a checkpoint, and ``sql replay`` reads
the same records from files."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster
from ivmstream.sql import SqlError, load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from ivmstream.sql.streaming import StreamUnit, group_of, stream_units, view_rows
from ivmstream.state import MemoryStore
from tests.unit.sql.oracle import coalesced, same_rows

SHOP = """
CREATE TABLE orders (id INT, customer INT, amount DECIMAL(10, 2), status VARCHAR(10), PRIMARY KEY (id))
  WITH (topic = 'db.orders', format = 'debezium-json');
CREATE TABLE customers (id INT, city VARCHAR(20))
  WITH (topic = 'db.customers', format = 'upsert-json', key = 'id');
CREATE TABLE refunds (id INT, order_id INT, amount DOUBLE)
  WITH (topic = 'db.refunds', format = 'maxwell-json', key = 'id');
CREATE VIEW revenue AS
SELECT c.city, SUM(o.amount) AS total, COUNT(*) AS n
FROM orders o, customers c WHERE o.customer = c.id AND o.status <> 'void' GROUP BY c.city;
CREATE VIEW refunded AS
SELECT SUM(r.amount * o.amount) AS weighted FROM refunds r, orders o WHERE r.order_id = o.id;
CREATE TABLE edges (src INT, dst INT) WITH (topic = 'graph.edges', format = 'native');
CREATE VIEW triangles AS
SELECT COUNT(*) AS n FROM edges a, edges b, edges c WHERE a.dst = b.src AND b.dst = c.src AND c.dst = a.src;
"""
PARTITIONS = 3


class Log:
    """Records per topic (key, value, partition), and the tables they leave."""

    def __init__(self) -> None:
        self.records: dict[str, list[tuple[bytes | None, bytes | None, int]]] = {}
        self.tables: dict[str, dict[Any, tuple[Any, ...]]] = {"orders": {}, "customers": {}, "refunds": {}}
        self.edges: list[tuple[int, int]] = []

    def put(self, topic: str, ident: Any, value: Any, key: Any = None) -> None:
        raw = None if value is None else orjson.dumps(value)
        k = None if key is None else orjson.dumps(key)
        self.records.setdefault(topic, []).append((k, raw, hash(ident) % PARTITIONS))


def workload(seed: int = 7) -> Log:
    rng = random.Random(seed)
    log = Log()
    orders, customers, refunds = log.tables["orders"], log.tables["customers"], log.tables["refunds"]
    for step in range(400):
        kind = rng.random()
        if kind < 0.45:
            ident = rng.randrange(60)
            row = {
                "id": ident,
                "customer": rng.randrange(12),
                "amount": f"{rng.randrange(100, 9999) / 100:.2f}",
                "status": rng.choice(["open", "paid", "void"]),
            }
            before = orders.get(ident)
            if before is None:
                op, b = "c", None
            elif rng.random() < 0.3:
                op, b, row = "d", before, None  # type: ignore[assignment]
            else:
                op, b = "u", before
            old = None if b is None else dict(zip(("id", "customer", "amount", "status"), b, strict=True))
            log.put(
                "db.orders",
                ident,
                {"before": old, "after": row, "op": op, "source": {"table": "orders"}, "ts_ms": step},
            )
            if row is None:
                del orders[ident]
            else:
                orders[ident] = (row["id"], row["customer"], row["amount"], row["status"])
        elif kind < 0.65:
            ident = rng.randrange(12)
            if ident in customers and rng.random() < 0.2:
                log.put("db.customers", ident, None, {"id": ident})
                del customers[ident]
            else:
                city = rng.choice(["Lyon", "Oslo", "Pune"])
                log.put("db.customers", ident, {"id": ident, "city": city}, {"id": ident})
                customers[ident] = (ident, city)
        elif kind < 0.8:
            ident = rng.randrange(30)
            data = {"id": ident, "order_id": rng.randrange(60), "amount": float(rng.randrange(1, 50))}
            if ident in refunds:
                old = dict(zip(("id", "order_id", "amount"), refunds[ident], strict=True))
                value = {"table": "refunds", "type": "update", "data": data, "old": old}
            else:
                value = {"table": "refunds", "type": "insert", "data": data}
            log.put("db.refunds", ident, value)
            refunds[ident] = (data["id"], data["order_id"], data["amount"])
        else:
            edge = (rng.randrange(8), rng.randrange(8))
            delta = -1 if edge in log.edges and rng.random() < 0.3 else 1
            if delta < 0:
                log.edges.remove(edge)
            else:
                log.edges.append(edge)
            log.put(
                "graph.edges",
                edge,
                {"relation": "edges", "row": dict(zip(("src", "dst"), edge, strict=True)), "delta": delta},
            )
    return log


def _script(tmp: Path) -> Any:
    path = tmp / "shop.sql"
    path.write_text(SHOP)
    return load_script(path)


def _duck(log: Log) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE orders (id BIGINT, customer BIGINT, amount DOUBLE, status VARCHAR)")
    con.execute("CREATE TABLE customers (id BIGINT, city VARCHAR)")
    con.execute("CREATE TABLE refunds (id BIGINT, order_id BIGINT, amount DOUBLE)")
    con.execute("CREATE TABLE edges (src BIGINT, dst BIGINT)")
    for name, rows in log.tables.items():
        if rows:
            marks = ", ".join("?" * len(next(iter(rows.values()))))
            con.executemany(f"INSERT INTO {name} VALUES ({marks})", list(rows.values()))
    if log.edges:
        con.executemany("INSERT INTO edges VALUES (?, ?)", log.edges)
    return con


def _cluster(log: Log) -> InMemoryCluster:
    cluster = InMemoryCluster()
    for topic, records in log.records.items():
        cluster.create_topic(topic, PARTITIONS)
        for key, value, partition in records:
            cluster.produce(topic, value, key, partition=partition)
    return cluster


def _run(u: StreamUnit, cluster: InMemoryCluster, store: MemoryStore, until: Callable[[int], bool]) -> Worker:
    worker = Worker(u.service, u.config, cluster, store, group=group_of(u))
    worker.run(until=lambda w: until(sum(v or 0 for v in w.positions().values())))  # type: ignore[misc]
    worker.close()
    return worker


def _total(cluster: InMemoryCluster, u: StreamUnit) -> int:
    return sum(sum(cluster.end_offsets(i.topic).values()) for i in u.config.inputs)


def test_views_over_change_topics_equal_duckdb_over_the_final_tables(tmp_path: Path) -> None:
    script = _script(tmp_path)
    units = stream_units(plan_script(script), {"checkpoint_interval": 0.01}, script.tables)
    assert [u.plan.service for u in units] == ["fivm", "fivm", "triangles"]
    assert all(u.tables and not u.config.input_topic.endswith(".updates") for u in units)
    log = workload()
    cluster = _cluster(log)
    con = _duck(log)
    for u in units:
        store = MemoryStore()
        total = _total(cluster, u)
        _run(u, cluster, store, lambda n, t=total: n >= t // 2)  # a first worker stops half way
        _run(u, cluster, store, lambda n, t=total: n >= t)  # a second one resumes from its checkpoint
        last = orjson.loads(cluster.values(u.config.output_topic)[-1] or b"")
        rows = view_rows([u], [last["result"]])["rows"]
        expected = [list(r) for r in con.execute(coalesced(u.plan.view.select)).fetchall()]
        assert same_rows(rows, expected), (u.plan.view.name, rows, expected)
        assert any(v for row in rows for v in row)


def test_sql_replay_reads_the_topics_records_from_files(tmp_path: Path) -> None:
    script = _script(tmp_path)
    log = workload(seed=11)
    inputs = {}
    for topic, table in (("db.orders", "orders"), ("db.refunds", "refunds"), ("graph.edges", "edges")):
        path = tmp_path / f"{table}.jsonl"
        path.write_bytes(b"\n".join(value or b"" for _k, value, _p in log.records[topic]) + b"\n")
        inputs[table] = str(path)
    plans = plan_script(script, "triangles")
    (result,) = replay_script(script, plans, InputChoice(inputs))
    expected = _duck(log).execute(coalesced(plans[0].view.select)).fetchall()
    assert result["rows"] == [list(r) for r in expected]
    plans = plan_script(script, "refunded")
    (result,) = replay_script(script, plans, InputChoice(inputs))
    assert same_rows(result["rows"], _duck(log).execute(coalesced(plans[0].view.select)).fetchall())


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("WITH (topic = 't', format = 'avro')", "format 'avro': unknown (known: native, debezium-json"),
        ("WITH (topic = 't', format = 'native', mode = 'upsert')", "WITH mode"),
        ("WITH (topic = 't', format = 'debezium-json', key = 'b')", "differs from the PRIMARY KEY"),
    ],
)
def test_topic_clauses_are_checked_in_one_line(tmp_path: Path, ddl: str, message: str) -> None:
    path = tmp_path / "bad.sql"
    path.write_text(f"CREATE TABLE r (a INT, b INT, PRIMARY KEY (a)) {ddl};\n")
    with pytest.raises(SqlError) as info:
        load_script(path)
    assert message in str(info.value) and str(info.value).startswith(f"{path}:1:")


def test_a_view_over_topics_and_files_is_refused_before_anything_runs(tmp_path: Path) -> None:
    path = tmp_path / "mixed.sql"
    path.write_text(
        "CREATE TABLE r (a INT, b INT) WITH (topic = 'r', format = 'native');\n"
        "CREATE STREAM s (b INT, c INT) FROM FILE 's.csv' LINE DELIMITED CSV;\n"
        "CREATE VIEW v AS SELECT SUM(r.a * s.c) AS x FROM r, s WHERE r.b = s.b;\n"
    )
    script = load_script(path)
    with pytest.raises(SqlError, match=r"topic-backed tables .* and streams from files"):
        stream_units(plan_script(script), None, script.tables)


def test_a_base_event_the_service_refuses_in_part_is_undone_whole(tmp_path: Path) -> None:
    """Row 2 feeds a new tuple to one occurrence and a duplicate to the other (the reservoir keeps sets):
    the whole base event is refused once, and the accepted half undone."""
    from ivmstream.events import UpdateEvent

    path = tmp_path / "pairs.sql"
    path.write_text(
        "CREATE TABLE t (k INT, x INT, y INT) WITH (topic = 't', format = 'native');\n"
        "CREATE VIEW pairs AS SELECT a.k, a.x, b.y FROM t a, t b WHERE a.k = b.k "
        "USING SAMPLE reservoir(50 ROWS);\n"
    )
    script = load_script(path)
    (unit,) = stream_units(plan_script(script), None, script.tables)
    engine = unit.service.engine(unit.config.options)
    rows = [{"k": 1, "x": 1, "y": 1}, {"k": 1, "x": 2, "y": 1}, {"k": 1, "x": 3, "y": 2}]
    rejections = engine.apply([UpdateEvent("t", r, 1) for r in rows])
    assert [(r.index, r.code) for r in rejections] == [(1, "duplicate-tuple")]
    sample = {(s["k"], s["x"], s["y"]) for s in engine.result()["sample"]}
    assert sample == {(1, 1, 1), (1, 1, 2), (1, 3, 1), (1, 3, 2)}  # no x = 2: row 2 left no trace
