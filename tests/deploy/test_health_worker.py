"""/healthz and /readyz of a real ``ivmstream run`` worker on its metrics port, against the test broker."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import orjson
from helpers import SAMPLE, ivm_produce, running_worker, running_workers, stream_config, worker_args

from ivmstream.dev.redis_server import free_port
from ivmstream.runtime.progress import wait_caught_up


def _probe(url: str) -> tuple[int, dict | bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            body = resp.read()
            return resp.status, orjson.loads(body) if "/metrics" not in url else body
    except urllib.error.HTTPError as err:
        return err.code, orjson.loads(err.read())
    except OSError as err:  # not listening yet
        return 0, str(err).encode()


def _wait_for(url: str, code: int, timeout: float = 60.0) -> tuple[int, dict | bytes]:
    deadline = time.monotonic() + timeout
    while True:
        got = _probe(url)
        if got[0] == code or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_worker_is_alive_then_ready_with_its_partitions(broker, redis_server, unique, tmp_path):
    topic = f"{unique}.updates"
    broker.create_topic(topic, 3)
    config = stream_config(tmp_path / "ref.json", unique, key_field="store", checkpoint_interval=0.2)
    port = free_port()
    args = worker_args(
        "reference", broker, redis_server, unique, tmp_path, config, extra=["--metrics-port", str(port)]
    )
    base = f"http://127.0.0.1:{port}"
    with running_worker(args, tmp_path / "w.log"):
        code, status = _wait_for(base + "/readyz", 200)
        assert code == 200, (status, (tmp_path / "w.log").read_text())
        assert status["phase"] == "consuming" and status["partitions"] == 3
        assert _probe(base + "/healthz")[0] == 200

        ivm_produce(broker.bootstrap, topic, SAMPLE, key_field="store")
        wait_caught_up(broker.bootstrap, f"{unique}-g", topic, timeout=90)
        code, metrics = _wait_for(base + "/metrics", 200)
        assert code == 200 and b'ivmstream_events_in_total{service="reference"} 3000.0' in metrics
        code, status = _probe(base + "/readyz")
        assert code == 200 and status["alive"] is True


def test_two_workers_split_the_partitions_and_both_become_ready(broker, redis_server, unique, tmp_path):
    """A second member makes the group rebalance: each worker is ready again with its share."""
    topic = f"{unique}.updates"
    broker.create_topic(topic, 3)
    # a 3 s session: the first worker hears of the rebalance at its next heartbeat (a fifth of it)
    config = stream_config(
        tmp_path / "ref.json", unique, key_field="store", checkpoint_interval=0.2, session_timeout_ms=3000
    )
    ports = [free_port(), free_port()]
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    commands = [
        worker_args(
            "reference",
            broker,
            redis_server,
            unique,
            tmp_path / name,
            config,
            extra=["--metrics-port", str(p)],
        )
        for name, p in zip(("a", "b"), ports, strict=True)
    ]
    with running_workers(commands[:1], logs[:1]):
        code, status = _wait_for(f"http://127.0.0.1:{ports[0]}/readyz", 200)
        assert code == 200 and status["partitions"] == 3, status
        with running_workers(commands[1:], logs[1:]):
            deadline = time.monotonic() + 90
            while True:
                probes = [_probe(f"http://127.0.0.1:{p}/readyz") for p in ports]
                shares = sorted(s["partitions"] for c, s in probes if c == 200)
                if shares == [1, 2] or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert shares == [1, 2], (probes, [log.read_text() for log in logs])
