"""Results where users look, through crashes: a worker upserting into PostgreSQL is killed with kill -9
twice mid-stream and restarted; ``ivmstream_results`` then equals the offline replay for every key,
and ``ivmstream serve`` answers each key with that row's record."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from helpers import (
    REPO,
    cli_env,
    kill9_mid_stream_then_catch_up,
    offline_results,
    run_args,
    triangles_graph_config,
)

from ivmstream.dev.redis_server import free_port

SAMPLE = REPO / "services" / "triangles" / "data" / "sample.jsonl"


def _answer(results: dict) -> dict:
    return {k: {f: v for f, v in r.items() if f != "stats"} for k, r in results.items()}


@pytest.mark.slow
def test_kill9_leaves_postgresql_equal_to_the_replay_and_serve_answers_it(
    broker, redis_server, postgres_server, unique, tmp_path: Path
):
    broker.create_topic(f"{unique}.updates", 2)
    cfg = triangles_graph_config(
        tmp_path,
        unique,
        checkpoint_interval=0.2,
        batch_size=50,
        postgres_flush_interval=0.1,
        session_timeout_ms=3000,  # a restarted worker waits for the group to drop the killed one
    )
    args = run_args(
        "triangles",
        broker.bootstrap,
        cfg,
        group=f"{unique}-g",
        state_dir=tmp_path / "s",
        redis=redis_server.url,
        extra=["--postgres", postgres_server.dsn],
    )
    kill9_mid_stream_then_catch_up(args, broker, unique, tmp_path, feed=(SAMPLE, "triangles", 3.0))
    with psycopg.connect(postgres_server.dsn) as conn:
        rows = conn.execute(
            "SELECT key, result, offsets FROM ivmstream_results WHERE service = %s", (unique,)
        ).fetchall()
    stored = {key: result for key, result, _ in rows}
    assert _answer(stored) == _answer(offline_results(cfg, SAMPLE, service="triangles"))

    port = free_port()
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ivmstream.cli",
            "serve",
            "--postgres",
            postgres_server.dsn,
            "--port",
            str(port),
        ],
        env=cli_env(),
        cwd=REPO,
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/healthz")
                break
            except httpx.TransportError:
                assert serve.poll() is None and time.monotonic() < deadline, serve.stderr
                time.sleep(0.1)
        for key, result, offsets in rows:
            record = httpx.get(f"{base}/v1/{unique}/results/{key}").json()
            assert (record["result"], record["offsets"]) == (result, offsets)
    finally:
        serve.terminate()
        serve.wait(10)
