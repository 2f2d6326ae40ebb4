"""Debezium topics for tests: two tables changed at random (snapshot, creates, updates, deletes with
tombstones), keyed and partitioned by primary key, half the records schema-wrapped, a few bad records;
and the final tables they leave, as native insert events for ``replay``. With ``key_field`` every row
also has that column (a tenant, which updates may change): a keyed view's partition key that is not the
topics' partitioning."""

from __future__ import annotations

import base64
import contextlib
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from ivmstream.events import SourceRecord
from ivmstream.partitioner import partition_for
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import run_to_end
from ivmstream.runtime.hooks import BatchApplied, Hooks
from ivmstream.runtime.rekey import RekeyStep

RELATIONS = {
    "orders": {"id": "int", "customer": "str", "amount": "decimal"},
    "customers": {"id": "int", "name": "str", "city": "str"},
}
_CONNECT = {"int": "int64", "str": "string"}


@dataclass
class Record:
    topic: str
    partition: int
    key: bytes
    value: bytes | None


@dataclass
class Workload:
    records: list[Record] = field(default_factory=list)
    tables: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    bad: dict[str, int] = field(default_factory=dict)  # reason -> records

    def final_events(self) -> list[SourceRecord]:
        """The final tables as native inserts (what the view must equal)."""
        out = []
        for relation, rows in sorted(self.tables.items()):
            for _id, row in sorted(rows.items()):
                value = orjson.dumps({"relation": relation, "row": row, "delta": 1})
                out.append(SourceRecord(len(out) + 1, value))
        return out


TENANTS = ("t1", "t2", "t3", "t4", "t5")


def produce_paced(bootstrap: str, w: Workload, hold: threading.Event | None = None) -> None:
    """The workload's records produced over about 3 s (a flush and a pause every 100), so that a kill
    lands while records still arrive; with ``hold``, the second half only once it is set (a kill then
    lands mid-stream however slowly the processes start)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    half = len(w.records) // 2
    for i, r in enumerate(w.records):
        if hold is not None and i == half:
            producer.flush(30)
            hold.wait(300)
        producer.produce(r.topic, r.value, r.key, partition=r.partition)
        if i % 100 == 99:
            producer.flush(30)
            time.sleep(0.08)
    producer.flush(30)


def _schema(relation: str, key_field: str | None = None) -> dict[str, Any]:
    cols: list[dict[str, Any]] = []
    for col, typ in {**RELATIONS[relation], **({key_field: "str"} if key_field else {})}.items():
        if typ == "decimal":
            decimal = "org.apache.kafka.connect.data.Decimal"
            cols.append({"field": col, "type": "bytes", "name": decimal, "parameters": {"scale": "2"}})
        else:
            cols.append({"field": col, "type": _CONNECT[typ]})
    sides = [{"field": s, "type": "struct", "optional": True, "fields": cols} for s in ("before", "after")]
    return {"type": "struct", "fields": sides}


def _encode(row: dict[str, Any] | None, wrapped: bool) -> dict[str, Any] | None:
    """A row as the JSON converter with schemas writes it: decimals as base64 of the unscaled integer."""
    if row is None or not wrapped or "amount" not in row:
        return row
    cents = int(row["amount"].replace(".", ""))
    return {**row, "amount": base64.b64encode(cents.to_bytes(8, "big", signed=True)).decode()}


def workload(
    seed: int,
    changes: int,
    partitions: int = 4,
    topics: tuple[str, str] = ("db.orders", "db.customers"),
    key_field: str | None = None,
) -> Workload:
    rng = random.Random(seed)
    w = Workload(tables={"orders": {}, "customers": {}})
    topic_of = dict(zip(("orders", "customers"), topics, strict=True))

    def row(relation: str, ident: int) -> dict[str, Any]:
        if relation == "orders":
            out: dict[str, Any] = {
                "id": ident,
                "customer": rng.choice("abcde"),
                "amount": f"{rng.randint(1, 9999) / 100:.2f}",
            }
        else:
            out = {
                "id": ident,
                "name": rng.choice(["ada", "bob", "cy"]),
                "city": rng.choice(["Paris", "Lyon"]),
            }
        if key_field is not None:
            out[key_field] = rng.choice(TENANTS)
        return out

    def put(relation: str, ident: int, value: bytes | None) -> None:
        key = orjson.dumps({"id": ident})
        w.records.append(Record(topic_of[relation], partition_for(key, partitions), key, value))

    def emit(relation: str, ident: int, op: str, before: Any, after: Any) -> None:
        wrapped = rng.random() < 0.5
        payload = {
            "before": _encode(before, wrapped),
            "after": _encode(after, wrapped),
            "op": op,
            "source": {"table": relation, "db": "shop"},
            "ts_ms": len(w.records),
        }
        put(
            relation,
            ident,
            orjson.dumps(
                {"schema": _schema(relation, key_field), "payload": payload} if wrapped else payload
            ),
        )

    next_id = {"orders": 1, "customers": 1}
    for relation in ("orders", "customers"):  # the snapshot
        for _ in range(5):
            ident = next_id[relation]
            next_id[relation] += 1
            w.tables[relation][ident] = r = row(relation, ident)
            emit(relation, ident, "r", None, r)
    for _ in range(changes):
        relation = rng.choice(("orders", "customers"))
        table = w.tables[relation]
        roll = rng.random()
        if roll < 0.4 or not table:
            ident = next_id[relation]
            next_id[relation] += 1
            table[ident] = r = row(relation, ident)
            emit(relation, ident, "c", None, r)
        elif roll < 0.75:
            ident = rng.choice(sorted(table))
            new = {**row(relation, ident), "id": ident}
            emit(relation, ident, "u", table[ident], new)
            table[ident] = new
        elif roll < 0.95:
            ident = rng.choice(sorted(table))
            emit(relation, ident, "d", table.pop(ident), None)
            put(relation, ident, None)  # the tombstone
        else:
            orphan = {"op": "u", "before": None, "after": row(relation, 999), "source": {"table": relation}}
            value, reason = rng.choice(
                [
                    (b"{not json", "malformed-json"),
                    (orjson.dumps({"op": "x", "before": None, "after": None}), "unknown-op"),
                    (orjson.dumps(orphan), "missing-before"),
                ]
            )
            put(relation, 999, value)
            w.bad[reason] = w.bad.get(reason, 0) + 1
    return w


def offline_keyed(w: Workload, service: Any, key_field: str, topics: tuple[str, str]) -> Any:
    """The change records replayed offline into a view keyed by ``key_field``: each topic's records
    decoded in their order (as ``replay --format debezium-json`` does), the events applied per key; as
    JSON."""
    from ivmstream.config import build_config, schema_of
    from ivmstream.events.change_formats import ChangeCodec
    from ivmstream.events.changes import ChangeSpec
    from ivmstream.events.codec import EventError, encode_event
    from ivmstream.replay import replay_all

    config = build_config(service, {"relations": RELATIONS, "key_field": key_field})
    schema = schema_of(service, config)
    codecs = {t: ChangeCodec(ChangeSpec("debezium-json"), schema) for t in topics}
    records: list[SourceRecord] = []
    for r in w.records:
        out = codecs[r.topic].decode(r.key, r.value)
        if not isinstance(out, EventError):
            records += [SourceRecord(len(records) + 1, encode_event(e, key_field)) for e in out]
    return orjson.loads(orjson.dumps(replay_all(service, config, records).result()))


class Crash(Exception):
    """A stop between an applied batch and its checkpoint."""


def stop_step_and_worker_once(
    service: Any,
    config: Any,
    cluster: Any,
    stores: tuple[Any, Any],
    rng: random.Random,
    step_batches: tuple[int, int],
    worker_batches: tuple[int, int],
    **worker_options: Any,
) -> None:
    """One round of the re-keying step and the worker over ``cluster``, each stopped after work it has
    not checkpointed: the step runs ``rng.randint(*step_batches)`` batches (a checkpoint after some, at
    random) and one more it writes but never checkpoints, so its successor writes those records again;
    the worker stops after its ``rng.randint(*worker_batches)``-th applied batch, before checkpointing it.
    ``stores`` are the step's and the worker's state stores, kept across rounds."""
    step_store, worker_store = stores
    step = RekeyStep(service, config, cluster, step_store)
    step.start()
    for _batch in range(rng.randint(*step_batches)):
        msgs = step.consumer.consume(config.batch_size, 0)
        if msgs:
            step.process(msgs)
        if rng.random() < 0.4:
            step.checkpoint()
    msgs = step.consumer.consume(config.batch_size, 0)
    if msgs:
        step.process(msgs)
    step.output.flush()  # written, never checkpointed: the next step writes them again
    batches = [0]
    stop_at = rng.randint(*worker_batches)

    def crash(_b: BatchApplied) -> None:
        batches[0] += 1
        if batches[0] == stop_at:
            raise Crash

    worker = Worker(
        service, config, cluster, worker_store, hooks=Hooks(batch_applied=[crash]), **worker_options
    )
    with contextlib.suppress(Crash):
        run_to_end(worker)
