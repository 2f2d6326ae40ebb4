"""One fivm query over two workers and a coordinator (two-phase aggregation), exactly once.

A Retailer-like snowflake sharded by its root variable ``locn``: Inventory and Location go to the input
partition their locn hashes to, Census and Item (no locn) to the one-partition broadcast topic. The
coordinator's global result equals one unsharded worker's and one ``FivmEngine`` fed every event, also
after a worker and the coordinator are killed with SIGKILL mid-stream and restarted.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer
from helpers import (
    ivm,
    running_worker,
    running_workers,
    start_worker,
    stop_worker,
    stream_config,
    worker_args,
)
from prometheus_client.parser import text_string_to_metric_families

from ivmstream.config import load_config, schema_of
from ivmstream.dev.redis_server import free_port
from ivmstream.events import EventCodec, read_source
from ivmstream.redis_client import connect
from ivmstream.runtime.dlq import read_dead_letters
from ivmstream.runtime.kafka import partition_count
from ivmstream.runtime.output import result_key
from ivmstream.runtime.produce import produce_records
from ivmstream.runtime.progress import group_progress, wait_caught_up
from ivmstream.runtime.routing import routing_of, shard_of
from ivmstream.services.fivm.engine import make_engine
from ivmstream.services.fivm.service import SERVICE

RELATIONS = {
    "Inventory": [{"locn": "int"}, {"ksn": "int"}, {"units": "int"}],
    "Location": [{"locn": "int"}, {"zip": "int"}],
    "Census": [{"zip": "int"}, {"pop": "int"}],
    "Item": [{"ksn": "int"}, {"price": "int"}],
}
QUERY = {
    "relations": RELATIONS,
    "variable_order": {"locn": {"zip": {"pop": {}}, "ksn": {"units": {}, "price": {}}}},
    "ring": "sum",
    "sum": ["units", "price"],  # int columns: the int ring is exact
}
DOMAINS = {"locn": 12, "ksn": 6, "units": 5, "zip": 4, "pop": 4, "price": 5}


def write_events(path: Path, n: int, seed: int) -> Path:
    """Inserts with repeats and deletes of present and absent tuples (fivm relations are Z-relations)."""
    rng = random.Random(seed)
    inserted: list[dict[str, Any]] = []
    lines = []
    for _ in range(n):
        if inserted and rng.random() < 0.25:
            ev = {**rng.choice(inserted), "delta": -1}
        else:
            rel = rng.choice(sorted(RELATIONS))
            row = {c: rng.randrange(DOMAINS[c]) for col in RELATIONS[rel] for c in col}
            ev = {"relation": rel, "row": row, "delta": rng.choice([1, 1, 2, -1])}
            inserted.append({k: v for k, v in ev.items() if k != "delta"})
        lines.append(orjson.dumps(ev))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def engine_result(config: Path, events: Path) -> dict[str, Any]:
    """One FivmEngine fed every event in file order."""
    cfg = load_config(SERVICE, config)
    codec = EventCodec(schema_of(SERVICE, cfg))
    engine = make_engine(cfg.options)
    engine.apply([codec.decode(r.value) for r in read_source(events)])
    return orjson.loads(orjson.dumps(engine.result()))


def without_stats(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "stats"}


class Sharded:
    """The topics and config of one sharded run: 2 input partitions, the broadcast topic, partials, global."""

    def __init__(self, broker: Any, unique: str, tmp_path: Path, **runtime: Any) -> None:
        self.broker, self.unique = broker, unique
        self.topic, self.broadcast = f"{unique}.updates", f"{unique}.updates.broadcast"
        self.partials, self.global_topic = f"{unique}.results", f"{unique}.results.global"
        for name, partitions in (
            (self.topic, 2),
            (self.broadcast, 1),
            (self.partials, 1),
            (self.global_topic, 1),
        ):
            broker.create_topic(name, partitions)
        self.config = stream_config(tmp_path / "sharded.json", unique, **QUERY, shard_by="locn", **runtime)

    def ends(self) -> dict[str, dict[str, int]]:
        """The offsets vector the global result reflects once everything is applied."""
        highs = {p.partition: p.high for p in group_progress(self.broker.bootstrap, "probe", self.topic)}
        [b] = group_progress(self.broker.bootstrap, "probe", self.broadcast)
        return {
            f"{self.topic}:{p}": {f"{self.topic}:{p}": h, f"{self.broadcast}:0": b.high}
            for p, h in highs.items()
        }

    def global_record(self, redis_url: str) -> dict[str, Any] | None:
        client = connect(redis_url)
        try:
            raw = client.get(result_key(self.global_topic, ""))
        finally:
            client.close()
        return orjson.loads(raw) if raw is not None else None

    def wait_global_complete(
        self, redis_url: str, procs: list[subprocess.Popen[bytes]], timeout: float = 180.0
    ) -> dict:
        deadline = time.monotonic() + timeout
        want = self.ends()
        while True:
            record = self.global_record(redis_url)
            if record is not None and record.get("reflects") == want:
                return record
            assert all(p.poll() is None for p in procs), "a worker exited"
            assert time.monotonic() < deadline, f"global result never reflected {want}: {record}"
            time.sleep(0.2)


def test_two_workers_and_coordinator_equal_one_worker_and_the_engine(broker, redis_server, unique, tmp_path):
    run = Sharded(broker, unique, tmp_path, checkpoint_interval=0.3, batch_size=100)
    events = write_events(tmp_path / "events.jsonl", 800, seed=7)
    out = ivm(
        "produce",
        "--bootstrap",
        broker.bootstrap,
        "--service",
        "fivm",
        "--config",
        str(run.config),
        "--input",
        str(events),
    )
    assert f"to {run.broadcast}" in out.stdout and f"to {run.topic}" in out.stdout
    # misrouted records: a broadcast relation's event on an input partition, a sharded relation's event
    # on the broadcast topic, and an event on the partition its locn does not hash to
    census = {"relation": "Census", "row": {"zip": 1, "pop": 1}, "delta": 5}
    inventory = {"relation": "Inventory", "row": {"locn": 3, "ksn": 1, "units": 2}, "delta": 5}
    home = shard_of(3, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for topic, partition, event in (
        (run.topic, 0, census),
        (run.broadcast, 0, inventory),
        (run.topic, 1 - home, inventory),
    ):
        producer.produce(topic, orjson.dumps(event), partition=partition)
    assert producer.flush(10) == 0

    workers = [worker_args("fivm", broker, redis_server, unique, tmp_path, run.config, "g")] * 2
    coordinator = worker_args(
        "fivm", broker, redis_server, unique, tmp_path, run.config, "c", ["--role", "coordinator"]
    )
    logs = [tmp_path / f"{name}.log" for name in ("w0", "w1", "coord")]
    with running_workers([*workers, coordinator], logs) as procs:
        record = run.wait_global_complete(redis_server.url, procs)
    sharded = record["result"]
    assert sharded["stats"]["shards"] == 2
    # each refused once, although both input partitions apply the broadcast partition
    dead = read_dead_letters(broker.bootstrap, f"{unique}.dlq")
    assert sorted((d.topic, d.partition, d.reason) for d in dead) == sorted(
        [(run.topic, 0, "misrouted"), (run.broadcast, 0, "misrouted"), (run.topic, 1 - home, "misrouted")]
    )

    # the same events, unsharded, through one worker on a one-partition topic
    broker.create_topic(f"{unique}.solo", 1)
    solo = stream_config(
        tmp_path / "solo.json",
        unique,
        **QUERY,
        input_topic=f"{unique}.solo",
        output_topic=f"{unique}.solo-out",
        checkpoint_interval=0.3,
    )
    ivm(
        "produce",
        "--bootstrap",
        broker.bootstrap,
        "--service",
        "fivm",
        "--config",
        str(solo),
        "--input",
        str(events),
    )
    with running_worker(
        worker_args("fivm", broker, redis_server, unique, tmp_path, solo, "solo"), tmp_path / "solo.log"
    ):
        wait_caught_up(broker.bootstrap, f"{unique}-solo", f"{unique}.solo")
    client = connect(redis_server.url)
    raw = client.get(result_key(f"{unique}.solo-out", ""))
    assert isinstance(raw, bytes)
    one_worker = orjson.loads(raw)["result"]
    client.close()

    expected = engine_result(run.config, events)
    assert expected["value"] != 0  # the join is not empty, so the comparison says something
    assert without_stats(sharded) == without_stats(one_worker) == without_stats(expected)


def scrape_assigned(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "ivmstream_assigned_partitions":
                return s.value
    return 0.0


def published_beyond_checkpoint(run: Sharded, redis_url: str) -> dict[int, tuple[int, int]]:
    """Per input partition, (checkpointed, published) input offsets, the published partial read first."""
    client = connect(redis_url)
    try:
        reached = {}
        for p in (0, 1):
            raw = client.get(result_key(run.partials, f"{run.topic}:{p}"))
            reached[p] = orjson.loads(raw)["offsets"][f"{run.topic}:{p}"] if raw is not None else 0
    finally:
        client.close()
    progress = group_progress(run.broker.bootstrap, f"{run.unique}-g", run.topic)
    return {p.partition: (p.committed, reached[p.partition]) for p in progress}


def coordinator_checkpointed(run: Sharded) -> int:
    [p] = group_progress(run.broker.bootstrap, f"{run.unique}-c", run.partials)
    return p.committed


def wait(what: str, done: Any, procs: list[subprocess.Popen[bytes]], timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (seen := done()):
        assert all(p.poll() is None for p in procs), f"a process exited waiting for {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        time.sleep(0.05)
    return seen


def test_kill9_of_a_worker_and_the_coordinator_mid_stream_keeps_the_global_result_exact(
    broker, redis_server, unique, tmp_path
):
    # checkpoints a second apart leave published, uncheckpointed work to kill; short sessions let the
    # group hand the killed worker's partition to the survivor quickly
    run = Sharded(broker, unique, tmp_path, checkpoint_interval=1.0, batch_size=20, session_timeout_ms=3000)
    events = write_events(tmp_path / "events.jsonl", 2000, seed=11)
    cfg = load_config(SERVICE, run.config)
    shards = partition_count(broker.bootstrap, run.topic) or 0
    routing = routing_of(schema_of(SERVICE, cfg).relations.values(), cfg, shards)
    records = list(read_source(events))

    def feed() -> None:
        for i in range(0, len(records), 40):
            report = produce_records(broker.bootstrap, run.topic, records[i : i + 40], routing=routing)
            assert not report.failures
            time.sleep(0.02)

    ports = [free_port(), free_port()]
    args = [
        worker_args(
            "fivm", broker, redis_server, unique, tmp_path, run.config, "g", ["--metrics-port", str(p)]
        )
        for p in ports
    ]
    coord_args = worker_args(
        "fivm", broker, redis_server, unique, tmp_path, run.config, "c", ["--role", "coordinator"]
    )
    logs = {name: tmp_path / f"{name}.log" for name in ("w0", "w1", "coord", "w0b", "coordb")}
    procs = {
        "w0": start_worker(*args[0], log=logs["w0"]),
        "w1": start_worker(*args[1], log=logs["w1"]),
        "coord": start_worker(*coord_args, log=logs["coord"]),
    }
    feeder = threading.Thread(target=feed)
    try:
        first = list(procs.values())
        wait("the two workers splitting the partitions", lambda: all(_assigned(p) == 1 for p in ports), first)
        feeder.start()

        def mid_stream() -> dict[int, tuple[int, int]] | None:
            """Both partitions checkpointed some input and published more; the coordinator checkpointed."""
            seen = published_beyond_checkpoint(run, redis_server.url)
            ok = all(0 < done < published for done, published in seen.values()) and coordinator_checkpointed(
                run
            )
            return seen if ok else None

        seen = wait("checkpointed and uncheckpointed work on both partitions", mid_stream, first)
        assert feeder.is_alive(), "the kill must land before the end of the input"
        os.kill(procs["w0"].pid, signal.SIGKILL)
        os.kill(procs["coord"].pid, signal.SIGKILL)
        assert procs["w0"].wait(10) == -signal.SIGKILL and procs["coord"].wait(10) == -signal.SIGKILL
        procs["coordb"] = start_worker(*coord_args, log=logs["coordb"])
        # the survivor takes the killed worker's partition over (from its last checkpoint) ...
        wait(
            "the survivor owning both partitions", lambda: _assigned(ports[1]) == 2, [procs["w1"]], timeout=60
        )
        # ... and hands it back (checkpointing it first) when the killed worker's replacement joins
        procs["w0b"] = start_worker(*args[0], log=logs["w0b"])
        feeder.join()
        record = run.wait_global_complete(redis_server.url, [procs[n] for n in ("w1", "w0b", "coordb")])
    finally:
        if feeder.is_alive():
            feeder.join()
        codes = {n: stop_worker(p) for n, p in procs.items() if n not in ("w0", "coord")}
        for n in ("w0", "coord"):
            if procs[n].poll() is None:
                procs[n].kill()
                procs[n].wait()
    assert codes == dict.fromkeys(codes, 0), "\n".join(logs[n].read_text()[-2000:] for n in codes)
    assert all(0 < done < published < len(records) for done, published in seen.values())
    assert read_dead_letters(broker.bootstrap, f"{unique}.dlq") == []
    assert without_stats(record["result"]) == without_stats(engine_result(run.config, events))


def _assigned(port: int) -> float:
    try:
        return scrape_assigned(port)
    except OSError:
        return -1.0


def test_sharded_commands_refuse_missing_topics_and_unsharded_coordinators(broker, unique, tmp_path):
    events = write_events(tmp_path / "events.jsonl", 5, seed=1)
    sharded = stream_config(tmp_path / "sharded.json", unique, **QUERY, shard_by="locn")
    produce = ("produce", "--bootstrap", broker.bootstrap, "--service", "fivm", "--config", str(sharded))
    out = ivm(*produce, "--input", str(events), check=False)
    assert (
        out.returncode == 1
        and f"the input topic {unique}.updates of a sharded query must exist" in out.stderr
    )
    broker.create_topic(f"{unique}.updates", 2)
    out = ivm(*produce, "--input", str(events), check=False)
    assert out.returncode == 1 and f"the broadcast topic {unique}.updates.broadcast must exist" in out.stderr
    plain = stream_config(tmp_path / "plain.json", unique, **QUERY)
    out = ivm(
        "run",
        "fivm",
        "--bootstrap",
        broker.bootstrap,
        "--config",
        str(plain),
        "--role",
        "coordinator",
        check=False,
    )
    assert out.returncode == 1 and "the coordinator role needs a sharded config" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["bootstrap", "reconcile"])
def test_spark_jobs_refuse_a_sharded_query_in_one_line(tmp_path, unique, command):
    """Bootstrap and reconcile place and read key_field instances, not a sharded layout: they say so
    before starting Spark instead of writing state the workers would misread."""
    sharded = stream_config(tmp_path / "sharded.json", unique, **QUERY, shard_by="locn")
    extra = (
        ["--snapshot", str(tmp_path), "--state-dir", str(tmp_path / "state")]
        if command == "bootstrap"
        else ["--bootstrap", "127.0.0.1:9"]
    )
    out = ivm(command, "fivm", "--config", str(sharded), *extra, check=False)
    lines = out.stderr.strip().splitlines()
    assert out.returncode != 0 and len(lines) == 1 and "Traceback" not in out.stderr
    assert "do not support a sharded query (shard_by 'locn')" in lines[0]
    assert not (tmp_path / "state").exists()
