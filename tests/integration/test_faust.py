"""ivmstream views inside Faust apps (ivmstream.faust) on the embedded broker: the documented example
app, results over Faust's web server, and ivmstream's exactly-once under Faust's at-least-once."""

from __future__ import annotations

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

from ivmstream.config import build_config
from ivmstream.replay import replay_all
from ivmstream.runtime.produce import produce_records
from ivmstream.runtime.progress import group_progress
from ivmstream.testing import conformance_cases
from ivmstream.testing._cases import child_environment

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
