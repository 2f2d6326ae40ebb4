"""Subscriber latency: from a result's publication (``published_at``, set when the worker builds the
record) to its server-sent event arriving at a client of ``ivmstream serve``, over a live run.

The worker (Redis and PostgreSQL sinks) reads input produced at a steady rate while it runs; two
``ivmstream serve`` processes answer subscriptions, one from Redis pub/sub and one from PostgreSQL's
notifications; one subscriber process per server holds ``/v1/<view>/subscribe?key=K`` open for each
watched key and records every event's latency. Run as ``python bench/results_sinks_latency.py
subscribe URL VIEW KEY...`` that is the subscriber (it prints its latencies as JSON when terminated).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SOURCES = ("redis", "postgres")


# --- the subscriber process ---------------------------------------------------------------------------


async def _follow(url: str, latencies: list[float]) -> None:
    """One subscription, opened as soon as the view exists (404 until its first result)."""
    import httpx

    async with httpx.AsyncClient(timeout=None) as client:
        while True:
            async with client.stream("GET", url) as response:
                if response.status_code != 200:
                    await asyncio.sleep(0.05)
                    continue
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        now = time.time()
                        record = json.loads(line[5:])
                        if "published_at" in record:
                            latencies.append(now - float(record["published_at"]))


async def _subscribe(base: str, view: str, keys: list[str]) -> list[list[float]]:
    latencies: list[list[float]] = [[] for _ in keys]
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    tasks = [
        asyncio.create_task(_follow(f"{base}/v1/{view}/subscribe?key={key}", out))
        for key, out in zip(keys, latencies, strict=True)
    ]
    print("ready", flush=True)
    await stop.wait()
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(BaseException):
            await task
    return latencies


def subscriber_main(argv: list[str]) -> int:
    base, view, *keys = argv
    latencies = asyncio.run(_subscribe(base, view, keys))
    print(json.dumps(dict(zip(keys, latencies, strict=True))), flush=True)
    return 0


# --- the measurement ----------------------------------------------------------------------------------


def _serve(args: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """``ivmstream serve`` on a free port, once it answers ``/healthz``."""
    from ivmstream.dev.redis_server import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ivmstream.cli", "serve", *args, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=1):
                return proc, base
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"ivmstream serve {' '.join(args)} did not start") from None
            time.sleep(0.1)


def _paced(bootstrap: str, topic: str, workload: Any, rate: float, stop: threading.Event) -> None:
    """Produce ``workload`` at ``rate`` events/s, in slices every 20 ms."""
    from confluent_kafka import Producer

    from ivmstream.partitioner import partition_for
    from ivmstream.runtime.kafka import producer_settings

    producer = Producer(producer_settings(bootstrap, {"linger.ms": 5}))
    n, step = workload.partitions, max(1, int(rate * 0.02))
    started = time.monotonic()
    for i in range(0, len(workload.records), step):
        if stop.is_set():
            break
        for key, value in workload.records[i : i + step]:
            producer.produce(topic, value, key, partition=partition_for(key, n))
        producer.poll(0)
        wait = started + (i + step) / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    producer.flush(60)


def summary(latencies: list[float], interval: float) -> dict[str, Any]:
    """Percentiles (seconds) of one source's latencies, and the share within ``interval``."""
    if not latencies:
        return {"events": 0}
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "events": len(ordered),
        "p50_s": pct(0.50),
        "p90_s": pct(0.90),
        "p99_s": pct(0.99),
        "max_s": ordered[-1],
        "mean_s": statistics.fmean(ordered),
        "within_interval": sum(v <= interval for v in ordered) / len(ordered),
    }


def latency_run(
    broker: Any, workload: Any, rate: float, watched: list[str], redis_url: str, dsn: str
) -> dict[str, Any]:
    """One live run at ``rate`` events/s with subscribers on ``watched`` keys through both sources."""
    import redis

    from bench.lib.worker_runs import run_until_caught_up
    from bench.results_sinks_runs import clear_postgres, configure
    from ivmstream.runtime import Worker
    from ivmstream.runtime.clients import KafkaClients
    from ivmstream.runtime.postgres import sink_for, view_name
    from ivmstream.service import load_service
    from ivmstream.state import open_store

    run = uuid.uuid4().hex[:8]
    topic = f"latency-{run}"
    bootstrap = broker.bootstrap
    broker.create_topic(topic, workload.partitions)
    out = f"{topic}.results"
    config = configure(workload, topic, out)
    view = view_name(out)
    clear_postgres(dsn)
    servers = {"redis": _serve(["--redis", redis_url]), "postgres": _serve(["--postgres", dsn])}
    subscribers = {
        source: subprocess.Popen(
            [sys.executable, __file__, "subscribe", base, view, *watched],
            stdout=subprocess.PIPE,
            text=True,
        )
        for source, (_proc, base) in servers.items()
    }
    stop = threading.Event()
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-latency-"))
    try:
        for proc in subscribers.values():
            assert proc.stdout is not None
            proc.stdout.readline()  # "ready"
        client = redis.Redis.from_url(redis_url)
        worker = Worker(
            load_service(workload.service),
            config,
            KafkaClients(bootstrap),
            open_store("rocksdb", f"latency.{run}", state_dir=tmp),
            group=f"{out}-g",
            redis_client=client,
            postgres=sink_for(dsn, config),
        )
        producer = threading.Thread(target=_paced, args=(bootstrap, topic, workload, rate, stop), daemon=True)
        producer.start()
        seconds, _results = run_until_caught_up(worker, workload.ends, timeout=600)
        producer.join()
        time.sleep(1.0)  # the last events in flight
        latencies: dict[str, list[float]] = {}
        for source, proc in subscribers.items():
            proc.send_signal(signal.SIGTERM)
            stdout, _ = proc.communicate(30)
            per_key = json.loads(stdout.strip().splitlines()[-1])
            latencies[source] = [v for values in per_key.values() for v in values]
        client.close()
    finally:
        stop.set()
        for proc in subscribers.values():
            if proc.poll() is None:
                proc.kill()
        for proc, _base in servers.values():
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    interval = config.checkpoint_interval
    return {
        "workload": workload.name,
        "rate": rate,
        "events": len(workload.records),
        "seconds": seconds,
        "watched_keys": watched,
        "checkpoint_interval_s": interval,
        "postgres_flush_interval_s": config.postgres_flush_interval,
        "sources": {source: summary(latencies[source], interval) for source in SOURCES},
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["subscribe"]:
        raise SystemExit(subscriber_main(sys.argv[2:]))
    raise SystemExit("usage: results_sinks_latency.py subscribe URL VIEW KEY...")
