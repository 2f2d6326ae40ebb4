"""``ivmstream serve`` as a real HTTP server over a real Redis and PostgreSQL: lookups give what a Worker
published (the same record from either source), unknown services and keys are JSON 404s, a bearer
token guards /v1, the history comes from PostgreSQL, and a subscriber receives each change of its key
as a server-sent event, soon after the write."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from ivmstream.redis_client import connect
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.runtime.output import Output, build_record
from ivmstream.runtime.postgres import PostgresSink
from ivmstream.serve import Server
from ivmstream.serve.server import build
from ivmstream.state import MemoryStore
from ivmstream.testing import conformance_cases

CASE = next(c for c in conformance_cases() if c.keyed and len(c.records) >= 20)


@pytest.fixture
def published(redis_server, postgres_server, unique) -> dict[str, Any]:
    """A real Worker's results, published to Redis and PostgreSQL under the view ``unique``."""
    cluster = InMemoryCluster()
    cluster.create_topic("in", CASE.workload.partitions)
    for record in CASE.records:
        cluster.produce("in", record.value, record.key)
    config = dataclasses.replace(
        CASE.config, input_topic="in", output_topic=f"{unique}.results", dlq_topic="dlq"
    )
    sink = PostgresSink(postgres_server.dsn, unique, flush_interval=0.01)
    worker = Worker(
        CASE.service,
        config,
        cluster,
        MemoryStore(),
        group="g",
        redis_client=connect(redis_server.url),
        postgres=sink,
    )
    results: dict[str, Any] = {}
    run_to_end(worker, until=lambda w: bool(results.update(w.results())))
    return results


def _server(redis_url: str | None, dsn: str | None, token: str | None = None) -> Iterator[Server]:
    server = Server(build(redis_url, dsn, token), port=0).start()
    try:
        yield server
    finally:
        server.stop()


serving = contextlib.contextmanager(_server)


@pytest.fixture
def api(redis_server, postgres_server) -> Iterator[Server]:
    yield from _server(redis_server.url, postgres_server.dsn)


def test_lookups_give_the_published_results(api, published, unique):
    with httpx.Client(base_url=api.url, timeout=10) as http:
        reply = http.get("/v1/services")
        assert unique in reply.json()["services"], reply.text
        listing = http.get(f"/v1/{unique}/results")
        assert listing.status_code == 200
        assert listing.json() == {"service": unique, "keys": sorted(published)}
        for key, want in published.items():
            record = http.get(f"/v1/{unique}/results/{key}").json()
            assert record["result"] == want and record["key"] == key
            assert set(record["offsets"]) and all(n > 0 for n in record["offsets"].values())


def test_postgresql_alone_serves_the_same_records(redis_server, postgres_server, published, unique):
    with serving(None, postgres_server.dsn) as pg_api, serving(redis_server.url, None) as r_api:
        for key in published:
            from_pg = httpx.get(f"{pg_api.url}/v1/{unique}/results/{key}").json()
            from_redis = httpx.get(f"{r_api.url}/v1/{unique}/results/{key}").json()
            assert {k: from_pg[k] for k in ("service", "key", "result", "offsets")} == {
                k: from_redis[k] for k in ("service", "key", "result", "offsets")
            }
            assert from_pg["published_at"] == pytest.approx(from_redis["published_at"], abs=1e-3)


def test_unknown_services_and_keys_are_json_404s(api, published, unique):
    with httpx.Client(base_url=api.url, timeout=10) as http:
        for path in (
            "/v1/nope/results",
            "/v1/nope/results/k",
            f"/v1/{unique}/results/nope",
            "/v1/nope/subscribe",
        ):
            reply = http.get(path)
            assert reply.status_code == 404, path
            assert set(reply.json()) == {"error"}, path


def test_the_openapi_document_describes_the_api(api):
    doc = httpx.get(f"{api.url}/openapi.json").json()
    assert {
        "/v1/services",
        "/v1/{service}/results",
        "/v1/{service}/results/{key}",
        "/v1/{service}/history/{key}",
        "/v1/{service}/subscribe",
    } <= set(doc["paths"])
    assert (
        "text/event-stream" in doc["paths"]["/v1/{service}/subscribe"]["get"]["responses"]["200"]["content"]
    )


def test_a_bearer_token_guards_the_api(redis_server, published, unique):
    with serving(redis_server.url, None, "s3cret-token") as server:
        assert httpx.get(f"{server.url}/v1/{unique}/results").status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert httpx.get(f"{server.url}/v1/{unique}/results", headers=wrong).json() == {
            "error": "a valid bearer token is required"
        }
        right = {"Authorization": "Bearer s3cret-token"}
        assert httpx.get(f"{server.url}/v1/{unique}/results", headers=right).status_code == 200
        assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_history_comes_from_postgresql(api, published, unique):
    key = next(iter(published))
    reply = httpx.get(f"{api.url}/v1/{unique}/history/{key}")
    assert reply.status_code == 200
    points = reply.json()["points"]
    assert points == sorted(points, key=lambda p: p["at"])
    assert all(set(p) == {"at", "path", "value", "offsets"} for p in points)


@pytest.mark.parametrize("source", ["redis", "postgres"])
def test_a_subscriber_receives_each_change_of_its_key(redis_server, postgres_server, unique, source):
    view = f"{unique}{source}"
    client = connect(redis_server.url)
    sink = PostgresSink(postgres_server.dsn, view, flush_interval=0.01)
    output = Output("svc", InMemoryCluster().producer(), f"{view}.results", "dlq", client, postgres=sink)
    output.publish(
        [
            ("k", build_record("svc", "k", 0, "in", 0, 1)),
            ("other", build_record("svc", "other", 0, "in", 0, 1)),
        ]
    )
    output.flush()
    urls = (redis_server.url, None) if source == "redis" else (None, postgres_server.dsn)
    received: list[tuple[float, dict[str, Any]]] = []
    with serving(*urls) as server:
        listening = threading.Event()

        def listen() -> None:
            with httpx.stream(
                "GET", f"{server.url}/v1/{view}/subscribe", params={"key": "k"}, timeout=30
            ) as reply:
                assert reply.status_code == 200
                assert reply.headers["content-type"].startswith("text/event-stream")
                listening.set()
                for line in reply.iter_lines():
                    if line.startswith("data:"):
                        received.append((time.monotonic(), orjson.loads(line[5:])))
                        if len(received) == 3:
                            return

        thread = threading.Thread(target=listen, daemon=True)
        thread.start()
        assert listening.wait(10)
        time.sleep(0.2)
        sent: list[float] = []
        for n in range(1, 4):
            sent.append(time.monotonic())
            output.publish(
                [
                    ("k", build_record("svc", "k", n, "in", 0, 1 + n)),
                    ("other", build_record("svc", "other", n, "in", 0, 1 + n)),
                ]
            )
            output.flush()
            time.sleep(0.1)
        thread.join(15)
    sink.close()
    assert [record["result"] for _, record in received] == [1, 2, 3]
    assert all(record["key"] == "k" for _, record in received)
    assert max(got - at for (got, _), at in zip(received, sent, strict=True)) < 2.0
