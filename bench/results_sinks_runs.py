"""The results-sinks benchmark's workloads and its timed worker runs: one real ``Worker`` per run over
input produced before the clock starts, publishing to the results topic only, to Redis as well, or to
Redis and PostgreSQL (the sink ``ivmstream run --postgres`` builds).
"""

from __future__ import annotations

import random
import time
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psycopg
import redis
from confluent_kafka import Producer

from bench.lib.broker import produce_all
from bench.lib.worker_runs import run_until_caught_up
from ivmstream.config import ServiceConfig, build_config
from ivmstream.partitioner import partition_for
from ivmstream.runtime import Worker
from ivmstream.runtime.clients import KafkaClients
from ivmstream.runtime.gc_policy import worker_gc
from ivmstream.runtime.kafka import producer_settings
from ivmstream.runtime.postgres import HISTORY_TABLE, RESULTS_TABLE, PostgresSink, ensure_schema, sink_for
from ivmstream.service import load_service
from ivmstream.state import open_store

SINKS = ("none", "redis", "redis+postgres")


@dataclass
class Workload:
    """``records`` as (key, value) pairs of native events over ``partitions`` partitions."""

    name: str
    service: str
    config: dict[str, Any]
    partitions: int
    records: list[tuple[bytes, bytes]]
    keys: int

    @property
    def ends(self) -> dict[int, int]:
        """Each partition's end offset once every record is produced (keys place the records)."""
        ends = dict.fromkeys(range(self.partitions), 0)
        for key, _ in self.records:
            ends[partition_for(key, self.partitions)] += 1
        return ends


def reference(count: int, keys: int) -> Workload:
    """The reference demo's rows repeated to ``count`` events, keyed by store: the demo's 5 stores, or
    each store split into ``keys / 5`` by row (``keys`` > 5), so that a batch changes many keys."""
    service = load_service("reference")
    assert service.demo is not None
    sample = [orjson.loads(line) for line in Path(service.demo.input).read_bytes().splitlines()]
    split = max(1, keys // 5)
    records = []
    for i in range(count):
        event = sample[i % len(sample)]
        row = event["row"]
        if split > 1:  # by the row's content: a deletion goes to the key its insertion went to
            row = {**row, "store": f"{row['store']}-{zlib.crc32(orjson.dumps(row)) % split}"}
        records.append((row["store"].encode(), orjson.dumps({**event, "row": row})))
    distinct = len({k for k, _ in records})
    name = "reference" if split == 1 else f"reference, {distinct:,} keys"
    return Workload(name, "reference", {"key_field": "store"}, 3, records, distinct)


def triangles(count: int, graphs: int, vertices: int = 60, seed: int = 7) -> Workload:
    """``count`` distinct random edge inserts spread over ``graphs`` graphs (graph mode, IVM^eps): one
    key per graph, each result the graph's triangle count and the engine's counters."""
    rng = random.Random(seed)
    seen: set[tuple[int, int, int]] = set()
    records = []
    while len(records) < count:
        g, a, b = rng.randrange(graphs), rng.randrange(vertices), rng.randrange(vertices)
        if a == b or (g, min(a, b), max(a, b)) in seen:
            continue
        seen.add((g, min(a, b), max(a, b)))
        row = {"src": a, "dst": b, "graph": f"g{g}"}
        records.append((row["graph"].encode(), orjson.dumps({"relation": "edges", "row": row, "delta": 1})))
    config = {"mode": "graph", "strategy": "ivm-eps", "epsilon": "1/2", "key_field": "graph"}
    return Workload(
        f"triangles, {graphs:,} graphs", "triangles", config, 2, records, len({g for g, _, _ in seen})
    )


def produce(bootstrap: str, topic: str, workload: Workload) -> None:
    producer = Producer(producer_settings(bootstrap, {"compression.type": "lz4", "linger.ms": 20}))
    n = workload.partitions
    produce_all(producer, topic, ((k, v, partition_for(k, n)) for k, v in workload.records))


def configure(workload: Workload, topic: str, out: str) -> ServiceConfig:
    return build_config(
        load_service(workload.service),
        {**workload.config, "input_topic": topic, "output_topic": out, "dlq_topic": f"{out}.dlq"},
    )


def clear_postgres(dsn: str) -> None:
    """Empty tables before a run, so every run upserts into the same (empty) tables."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        ensure_schema(conn)
        conn.execute(f"TRUNCATE {RESULTS_TABLE}, {HISTORY_TABLE}")


def postgres_rows(dsn: str, view: str) -> tuple[int, int]:
    """Rows of ``view`` in the results table and in the history."""
    with psycopg.connect(dsn) as conn:
        results = conn.execute(f"SELECT count(*) FROM {RESULTS_TABLE} WHERE service = %s", (view,)).fetchone()
        history = conn.execute(f"SELECT count(*) FROM {HISTORY_TABLE} WHERE service = %s", (view,)).fetchone()
    return int(results[0] if results else 0), int(history[0] if history else 0)


def worker_run(
    bootstrap: str, topic: str, workload: Workload, sink: str, redis_url: str, dsn: str, tmp: Path
) -> dict[str, Any]:
    """One worker from the start of ``topic`` to a checkpoint covering its end, publishing to ``sink``;
    timed from its first batch (``bench/lib/worker_runs``)."""
    run = uuid.uuid4().hex[:8]
    out = f"{topic}.{run}.results"
    config = configure(workload, topic, out)
    client = redis.Redis.from_url(redis_url) if sink != "none" else None
    postgres: PostgresSink | None = None
    if sink == "redis+postgres":
        clear_postgres(dsn)
        postgres = sink_for(dsn, config)
    store = open_store("rocksdb", f"sinks.{run}", state_dir=tmp)
    worker = Worker(
        load_service(workload.service),
        config,
        KafkaClients(bootstrap),
        store,
        group=f"{out}-g",
        redis_client=client,
        postgres=postgres,
    )
    published: list[int] = []
    worker.hooks.checkpoint_written.append(lambda _w: published.append(0))
    cpu = time.process_time()
    with worker_gc():
        seconds, results = run_until_caught_up(worker, workload.ends, timeout=900)
    row: dict[str, Any] = {
        "sink": sink,
        "seconds": seconds,
        "events_per_s": len(workload.records) / seconds,
        "cpu_s": time.process_time() - cpu,
        "keys": len(results),
        "checkpoints": len(published),
    }
    if postgres is not None:
        row["postgres_rows_written"] = postgres.rows_written
        row["postgres_results"], row["postgres_history"] = postgres_rows(dsn, postgres.view)
        if row["postgres_results"] != len(results):
            raise RuntimeError(f"{row['postgres_results']} rows in PostgreSQL, {len(results)} keys")
    if client is not None:
        client.close()
    return row
