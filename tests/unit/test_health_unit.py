"""The probe logic of shared/health.py against a hand-driven clock, and its HTTP answers (no worker)."""

from __future__ import annotations

import urllib.error
import urllib.request

import orjson
import pytest
from prometheus_client import CollectorRegistry, Counter

from ivmstream.dev.redis_server import free_port
from ivmstream.health import Health, serve


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_lifecycle_alive_and_ready():
    clock = Clock()
    h = Health(stall_after=30.0, clock=clock)
    assert (h.status()["alive"], h.status()["ready"]) == (True, False)  # starting: joining the group
    h.restoring()
    clock.now += 600  # a long restore inside the rebalance callback is not a stall
    assert (h.status()["alive"], h.status()["ready"]) == (True, False)
    h.consuming(3)
    assert h.status()["ready"] is False  # restored, but the loop has not polled the partitions yet
    clock.now += 1
    h.last_beat = clock()
    assert h.status() | {"seconds_since_loop": 0} == {
        "alive": True,
        "ready": True,
        "phase": "consuming",
        "partitions": 3,
        "seconds_since_loop": 0,
        "stall_after": 30.0,
    }
    h.rebalancing()
    assert (h.status()["alive"], h.status()["ready"]) == (True, False)
    h.consuming(0)  # more workers than partitions: an idle member is still a ready one
    h.last_beat = clock.now = clock.now + 1
    assert h.status()["ready"] is True
    h.stopping()
    assert (h.status()["alive"], h.status()["ready"]) == (True, False)
    h.failed()
    assert (h.status()["alive"], h.status()["ready"]) == (False, False)


@pytest.mark.parametrize("gap", [29.0, 30.0, 30.5, 1e6])
def test_a_consuming_loop_silent_past_stall_after_is_dead(gap):
    clock = Clock()
    h = Health(stall_after=30.0, clock=clock)
    h.consuming(1)
    h.last_beat = clock()
    clock.now += gap
    status = h.status()
    assert status["alive"] is (gap <= 30.0)
    assert status["ready"] is (gap <= 30.0)
    assert status["seconds_since_loop"] == gap


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_http_probes_and_metrics_share_the_port():
    registry = CollectorRegistry()
    Counter("probe_test_total", "a counter", registry=registry).inc(7)
    health = Health()
    port = free_port()
    server = serve(registry, health, port, "127.0.0.1")
    try:
        base = f"http://127.0.0.1:{port}"
        code, body = _get(base + "/readyz")
        assert code == 503 and orjson.loads(body)["phase"] == "starting"
        assert _get(base + "/healthz")[0] == 200
        health.consuming(2)
        health.last_beat += 1  # the loop came around after the assignment
        code, body = _get(base + "/readyz")
        assert code == 200 and orjson.loads(body)["partitions"] == 2
        health.failed()
        assert _get(base + "/healthz")[0] == 503
        code, body = _get(base + "/metrics")
        assert code == 200 and b"probe_test_total 7.0" in body
    finally:
        server.shutdown()
        server.server_close()
