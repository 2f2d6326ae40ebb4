"""Shared helpers for tests that drive the real CLI, broker and Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, TopicPartition

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "services" / "reference" / "sample.jsonl"


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("IVMSTREAM_LOG_LEVEL", "WARNING")
    return env


def ivm(*args: str, check: bool = True, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run ``ivmstream ARGS`` as a user would, in a child process."""
    proc = subprocess.run(
        [sys.executable, "-m", "shared.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(),
        cwd=REPO,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"ivmstream {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def start_worker(*args: str, log: Path | None = None) -> subprocess.Popen[bytes]:
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - owned by the child
    return subprocess.Popen(
        [sys.executable, "-m", "shared.cli", "run", *args],
        stdout=out,
        stderr=subprocess.STDOUT,
        env=cli_env(),
        cwd=REPO,
    )


def stop_worker(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
    return proc.returncode


def write_config(path: Path, **config: Any) -> Path:
    path.write_text(json.dumps(config))
    return path


def replay_result(config: Path, input_path: Path, service: str = "reference") -> dict[str, Any]:
    out = ivm("replay", service, "--config", str(config), "--input", str(input_path))
    return json.loads(out.stdout.strip().splitlines()[-1])


def published_results(redis_url: str, output_topic: str, service: str = "reference") -> dict[str, Any]:
    """Every key's latest published result, as ``{key: result}``."""
    out = json.loads(ivm("results", service, "--redis", redis_url, "--topic", output_topic).stdout)
    if "result" in out and "key" in out:  # a single key prints its record
        out = {out["key"]: out}
    return {k: rec["result"] for k, rec in out.items()}


def read_topic(bootstrap: str, topic: str, expect: int | None = None, timeout: float = 30.0) -> list[Any]:
    """All records of a topic (every partition, from the start) as confluent-kafka messages."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}", "enable.auto.commit": False}
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        tps = [TopicPartition(topic, p, 0) for p in meta.partitions]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        consumer.assign(tps)
        msgs: list[Any] = []
        deadline = time.monotonic() + timeout
        pos = {p: 0 for p in ends}
        while any(pos[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    msgs.append(m)
                    pos[m.partition()] = m.offset() + 1
        if expect is not None and len(msgs) < expect:
            raise AssertionError(f"read {len(msgs)} records from {topic}, expected {expect}")
        return msgs
    finally:
        consumer.close()


def headers(msg: Any) -> dict[str, str]:
    return {k: v.decode() for k, v in (msg.headers() or [])}


def loads(value: bytes) -> Any:
    return orjson.loads(value)


def trickle(bootstrap: str, topic: str, path: Path, key_field: str | None, seconds: float) -> None:
    """Produce a file's events spread over ``seconds``, so a worker is mid-stream for a while."""
    from shared.events import read_source
    from shared.runtime.produce import produce_records

    records = list(read_source(path, key_field=key_field))
    chunks = max(1, int(seconds / 0.05))
    step = max(1, len(records) // chunks)
    for i in range(0, len(records), step):
        report = produce_records(bootstrap, topic, records[i : i + step])
        assert report.sent == len(records[i : i + step]) and not report.failures
        time.sleep(0.05 if seconds else 0)


def offline_results(config_path: Path, input_path: Path, service: str = "reference") -> dict[str, Any]:
    """What replay computes for a file, in-process."""
    from shared.config import load_config
    from shared.events import read_source
    from shared.replay import replay_all
    from shared.service import load_service

    svc = load_service(service)
    cfg = load_config(svc, config_path)
    return replay_all(svc, cfg, read_source(input_path, key_field=cfg.key_field)).result()


def run_worker_to_end(
    service, config, bootstrap: str, store, group: str, redis_client=None
) -> dict[str, Any]:
    """Run an in-process Worker until it has consumed everything in its topic now; its engines' results."""
    from shared.runtime import Worker
    from shared.runtime.progress import group_progress

    ends = {p.partition: p.high for p in group_progress(bootstrap, group, config.input_topic)}
    worker = Worker(service, config, bootstrap, store, group=group, redis_client=redis_client)
    results: dict[str, Any] = {}

    def done(w: Worker) -> bool:
        if all((w.positions().get(p) or 0) == hi for p, hi in ends.items()):
            results.update(w.results())
            return True
        return False

    worker.run(until=done)
    return results
