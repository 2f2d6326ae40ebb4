"""Redis going away mid-run, with Redis for the published results only and as the state backend
(docs/architecture.md, "Redis outages"). A Redis that comes back with its data is waited for; one that
comes back empty is healed (results) or refused in one line (state), never written over or silently
rebuilt from the earliest offset.

Half the input is checkpointed before Redis goes down, and the other half arrives while it is down, so
the worker meets the outage with work to publish and checkpoint. ``make chaos``
(``IVMSTREAM_CHAOS=long``) keeps Redis down longer."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from helpers import (
    ivm,
    offline_results,
    published_results,
    run_args,
    running_worker,
    start_worker,
    triangles_graph_config,
)

from ivmstream.dev.redis_server import RedisServer
from ivmstream.events import read_source
from ivmstream.runtime.produce import produce_records
from ivmstream.runtime.progress import group_progress, wait_caught_up

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out

SAMPLE = Path(__file__).resolve().parents[2] / "services" / "triangles" / "data" / "sample.jsonl"
DOWN_FOR = 5.0 if os.environ.get("IVMSTREAM_CHAOS") == "long" else 1.0  # seconds Redis stays away


def answer(results: dict) -> dict:
    return {k: {f: v for f, v in r.items() if f != "stats"} for k, r in results.items()}


def config(tmp_path: Path, unique: str) -> Path:
    return triangles_graph_config(
        tmp_path,
        unique,
        checkpoint_interval=0.2,
        batch_size=50,
        session_timeout_ms=2000,  # a worker that stopped on an error frees its partitions sooner
    )


def wait_checkpointed(bootstrap: str, group: str, topic: str, timeout: float = 60.0) -> None:
    """Until the group has mirrored some checkpoint's offsets (the worker has stored state)."""
    deadline = time.monotonic() + timeout
    while sum(max(p.committed, 0) for p in group_progress(bootstrap, group, topic)) == 0:
        assert time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.1)


def worker_args(broker, unique: str, cfg: Path, redis: RedisServer, state: str) -> list[str]:
    """``ivmstream run triangles`` with results in ``redis`` and state in ``state`` (rocksdb or redis)."""
    extra = ["--state-backend", "redis"] if state == "redis" else []
    state_dir = cfg.parent / "s" if state == "rocksdb" else None
    return run_args(
        "triangles",
        broker.bootstrap,
        cfg,
        group=f"{unique}-g",
        state_dir=state_dir,
        redis=redis.url,
        extra=extra,
    )


def feed(broker, unique: str, half: int) -> None:
    """The first (``half`` 0) or second (1) half of the sample, produced to the input topic."""
    records = list(read_source(SAMPLE, key_field="graph"))
    part = records[: len(records) // 2] if half == 0 else records[len(records) // 2 :]
    report = produce_records(broker.bootstrap, f"{unique}.updates", part)
    assert report.sent == len(part) and not report.failures, report.failures


def outage(redis: RedisServer, broker, unique: str) -> None:
    """Stop redis-server, produce the second half while it is down, then start it again on the same
    port (and data directory, if it has one)."""
    redis.stop()
    feed(broker, unique, 1)
    time.sleep(DOWN_FOR)
    redis.start()


def ride_out(broker, unique: str, cfg: Path, redis: RedisServer, state: str, linger: float = 0.0) -> str:
    """A worker through the first half, the outage with the second half, and the catch-up, then
    ``linger`` seconds more; its log."""
    log = cfg.parent / "w.log"
    with running_worker(worker_args(broker, unique, cfg, redis, state), log):
        feed(broker, unique, 0)
        wait_checkpointed(broker.bootstrap, f"{unique}-g", f"{unique}.updates")
        outage(redis, broker, unique)
        wait_caught_up(broker.bootstrap, f"{unique}-g", f"{unique}.updates", timeout=120)
        time.sleep(linger)
    text = log.read_text()
    assert "retrying in" in text, text  # the outage met the worker
    return text


def test_results_in_a_redis_that_restarts_empty_are_published_again(broker, unique, tmp_path):
    """RocksDB state, results to Redis: while Redis is down the worker waits; when it is back empty,
    the worker notices its writers field is gone and publishes every key's current result again."""
    broker.create_topic(f"{unique}.updates", 2)
    cfg = config(tmp_path, unique)
    redis = RedisServer().start()
    try:
        # lingering, a checkpoint after the last batch checks Redis again
        text = ride_out(broker, unique, cfg, redis, "rocksdb", linger=1.0)
        assert "Redis lost the published results of triangles" in text, text
        published = published_results(redis.url, f"{unique}.results", service="triangles")
        assert answer(published) == answer(offline_results(cfg, SAMPLE, service="triangles"))
    finally:
        redis.stop()


def test_redis_state_that_comes_back_with_its_data_resumes(broker, unique, tmp_path):
    """Redis state with an append-only file: down for a while mid-run, back with its data; the worker
    waits (retries with backoff) and ends exactly where an uninterrupted run ends."""
    broker.create_topic(f"{unique}.updates", 2)
    cfg = config(tmp_path, unique)
    data = tmp_path / "redis-data"
    data.mkdir()
    redis = RedisServer(data_dir=str(data)).start()
    try:
        ride_out(broker, unique, cfg, redis, "redis")
        published = published_results(redis.url, f"{unique}.results", service="triangles")
        assert answer(published) == answer(offline_results(cfg, SAMPLE, service="triangles"))
    finally:
        redis.stop()


def test_redis_state_that_comes_back_empty_stops_the_worker_and_a_restart_refuses(broker, unique, tmp_path):
    """Redis state without persistence restarted mid-run: the next checkpoint finds no stored offset
    where it wrote one and stops the worker in one line without writing; a restarted worker finds the
    state empty while the group committed offsets, and refuses to rebuild it from the earliest offset."""
    broker.create_topic(f"{unique}.updates", 1)
    cfg = config(tmp_path, unique)
    redis = RedisServer().start()
    try:
        args = worker_args(broker, unique, cfg, redis, "redis")
        log = tmp_path / "w.log"
        worker = start_worker(*args, log=log)
        try:
            feed(broker, unique, 0)
            wait_checkpointed(broker.bootstrap, f"{unique}-g", f"{unique}.updates")
            outage(redis, broker, unique)
            code = worker.wait(60)
        finally:
            if worker.poll() is None:
                worker.kill()
        lines = [ln for ln in log.read_text().splitlines() if ln.startswith("ivmstream: error: ")]
        assert code != 0 and len(lines) == 1, log.read_text()
        assert "lost its data" in lines[0] and "stopping without writing" in lines[0]
        assert "Traceback" not in log.read_text()

        again = ivm("run", *args, check=False, timeout=60)
        errors = again.stderr.strip().splitlines()
        assert again.returncode != 0 and len(errors) == 1, again.stderr
        assert "is empty, but group" in errors[0] and "refusing to rebuild it silently" in errors[0]
    finally:
        redis.stop()
