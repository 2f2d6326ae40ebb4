"""ivmstream views inside Faust apps (ivmstream.faust) on the embedded broker: the documented example
app, results over Faust's web server, and ivmstream's exactly-once under Faust's at-least-once."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import (
    headers,
    ivm_produce,
    offline_results,
    published_results,
    read_topic,
    start_worker,
    stop_worker,
    stream_config,
    worker_args,
)
from prometheus_client.parser import text_string_to_metric_families

from ivmstream.config import build_config
from ivmstream.replay import replay_all
from ivmstream.runtime.produce import produce_records
from ivmstream.runtime.progress import group_progress
from ivmstream.testing import conformance_cases
from ivmstream.testing._cases import child_environment
from ivmstream.testing._stream_checks import StreamRun, check_kill9_restart, check_stream_equals_replay

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "faust_triangles.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, orjson.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, orjson.loads(exc.read())


def wait_caught_up_or_exit(
    worker: subprocess.Popen[bytes], log: Path, bootstrap: str, group: str, topic: str, timeout: float = 120
) -> None:
    """Until ``group`` has committed every offset of ``topic``; fails at once if the worker exits."""
    deadline = time.monotonic() + timeout
    while not all(p.lag == 0 for p in group_progress(bootstrap, group, topic)):
        assert worker.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"{group} behind on {topic}:\n{log.read_text()[-3000:]}"
        time.sleep(0.3)


def test_example_app_counts_triangles_and_serves_them(broker: Any, unique: str, tmp_path: Path) -> None:
    """The example app of docs/faust.md, run as a Faust worker, answers every graph's count over its
    web server as ivmstream.replay computes it, and Faust's group commits every input offset only
    once checkpoints cover it."""
    (case,) = [c for c in conformance_cases(["triangles"]) if c.workload.name == "demo"]
    topic = f"{unique}.edges"
    broker.create_topic(topic, case.workload.partitions)
    produce_records(broker.bootstrap, topic, case.records)
    port = free_port()
    env = child_environment(
        {"APP_ID": unique, "KAFKA_URL": f"kafka://{broker.bootstrap}", "EDGES_TOPIC": topic}
    )
    log = tmp_path / "faust.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [sys.executable, str(EXAMPLE), "worker", "--web-port", str(port), "-l", "warn"],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_caught_up_or_exit(worker, log, broker.bootstrap, unique, topic)
        config = build_config(case.service, {"mode": "graph", "key_field": "graph"})  # the example's
        want = orjson.loads(orjson.dumps(replay_all(case.service, config, case.records).result()))
        status, listing = get_json(f"http://127.0.0.1:{port}/ivmstream/triangles")
        assert status == 200 and listing["keys"] == sorted(want)
        for key, result in want.items():
            status, record = get_json(f"http://127.0.0.1:{port}/ivmstream/triangles/{key}")
            assert status == 200 and record["result"] == result, key
        assert get_json(f"http://127.0.0.1:{port}/ivmstream/triangles/nope")[0] == 404
    finally:
        worker.terminate()
        code = worker.wait(60)
    assert code == 0, log.read_text()[-3000:]
    ends = {p.partition: p.high for p in group_progress(broker.bootstrap, unique, topic)}
    assert sum(ends.values()) == len(case.records)
    state = tmp_path / "state"
    assert any(state.iterdir()), "the checkpoints are in ivmstream's RocksDB store"


FAUST = ("--runtime", "faust")
DEMOS = [c for c in conformance_cases() if c.workload.name == "demo"]
# The kill -9 runs cost ~15 s each. The Faust runtime restores and checkpoints every service through the
# same PartitionState and Checkpointer as the default runtime, whose kill -9 runs cover each service's
# state (tests/conformance); here a keyed service over three partitions and the keyless one (a single
# partition, the order-book format) hold the Faust runtime's own acknowledgement order to it.
KILL9_DEMOS = [c for c in DEMOS if c.name in ("reference", "vwap")]


@pytest.mark.parametrize("case", DEMOS, ids=str)
def test_run_on_faust_equals_replay(
    case: Any, broker: Any, redis_server: Any, unique: str, tmp_path: Path
) -> None:
    """``ivmstream run SERVICE --runtime faust`` over each service's demo publishes what replay computes."""
    check_stream_equals_replay(case, broker, redis_server.url, tmp_path, unique, extra=FAUST)


@pytest.mark.slow
@pytest.mark.parametrize("case", KILL9_DEMOS, ids=str)
def test_faust_kill9_restart_equals_replay(
    case: Any, broker: Any, redis_server: Any, unique: str, tmp_path: Path
) -> None:
    """SIGKILL the Faust runtime twice mid-stream: the published results still equal the replay (events
    below the stored offset skipped, none acknowledged before its checkpoint)."""
    check_kill9_restart(case, broker, redis_server.url, tmp_path, unique, extra=FAUST)


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


@pytest.mark.parametrize("runtime", ["confluent-kafka", "faust"])
def test_bad_records_dead_lettered_with_metrics_and_health(
    runtime: str, broker: Any, redis_server: Any, unique: str, tmp_path: Path
) -> None:
    """Both runtimes dead-letter bad records with their reason, count them, say which runtime they are
    (``ivmstream_runtime_info``) and answer the health probes; the good records around them apply."""
    topic, dlq = f"{unique}.updates", f"{unique}.dlq"
    broker.create_topic(topic, 1)
    good = {"relation": "items", "row": {"item": "fig", "qty": 2, "price": "1.50"}, "delta": 1}
    bad = {
        "malformed-json": b'{"relation": "items", "row": {',
        "unknown-relation": orjson.dumps({"relation": "nope", "row": {"x": 1}, "delta": 1}),
        "zero-delta": orjson.dumps({**good, "delta": 0}),
    }
    data = tmp_path / "mixed.jsonl"
    data.write_bytes(b"\n".join([orjson.dumps(good), *bad.values(), orjson.dumps(good)]) + b"\n")
    config = stream_config(tmp_path / "c.json", unique, checkpoint_interval=0.2)
    ivm_produce(broker.bootstrap, topic, data)
    port = free_port()
    args = worker_args(
        "reference",
        broker,
        redis_server,
        unique,
        tmp_path,
        config,
        extra=["--metrics-port", str(port), "--runtime", runtime],
    )
    log = tmp_path / "w.log"
    worker = start_worker(*args, log=log)
    try:
        wait_caught_up_or_exit(worker, log, broker.bootstrap, f"{unique}-g", topic)
        samples = scrape(port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            assert response.status == 200
    finally:
        assert stop_worker(worker, timeout=60) == 0, log.read_text()[-3000:]
    assert samples[("ivmstream_runtime_info", (("runtime", runtime), ("service", "reference")))] == 1
    for reason in bad:
        assert (
            samples[("ivmstream_events_rejected_total", (("reason", reason), ("service", "reference")))] == 1
        )
    dead = {headers(m)["ivmstream.reason"]: m.value() for m in read_topic(broker.bootstrap, dlq, expect=3)}
    assert dead == bad
    assert published_results(redis_server.url, f"{unique}.results") == {"": offline_results(config, data)}


REAL_KAFKA = os.environ.get("IVMSTREAM_REAL_KAFKA_BOOTSTRAP")


class RealKafka:
    """A real cluster (the embedded one cannot run two aiokafka members in one group)."""

    bootstrap = REAL_KAFKA or ""

    def create_topic(self, name: str, partitions: int, *, exist_ok: bool = False) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        futures = AdminClient({"bootstrap.servers": self.bootstrap}).create_topics(
            [NewTopic(name, partitions)]
        )
        for future in futures.values():
            future.result(30)


@pytest.mark.real_kafka
@pytest.mark.skipif(REAL_KAFKA is None, reason="no real Kafka: set IVMSTREAM_REAL_KAFKA_BOOTSTRAP")
def test_two_faust_workers_share_partitions_on_real_kafka(
    redis_server: Any, unique: str, tmp_path: Path
) -> None:
    """Two Faust workers in one group split the partitions, rebalance as the second joins, and publish
    what replay computes."""
    (case,) = [c for c in DEMOS if c.name == "triangles"]
    run = StreamRun(case, RealKafka(), redis_server.url, tmp_path, unique, extra=FAUST)
    run.prepare(checkpoint_interval=0.5)
    run.produce(case.records[: len(case.records) // 2])
    first = run.start_worker()
    try:
        run.wait_for(first, "a checkpoint", lambda: sum(p.committed for p in run.progress()) > 0)
        second = run.start_worker()
        try:
            run.produce(case.records[len(case.records) // 2 :])
            run.wait_for(second, "catch-up", run.caught_up, timeout=180)
        finally:
            run.stop(second)
    finally:
        run.stop(first)
    run.assert_published_equals_replay()
