"""What the benchmark scripts share: the machine description in every report, and bulk producing.

Each script writes the machine it ran on into its JSON, since figures from a shared 2-core VM mean
little without the CPU, the library versions and the load; and each pre-produces its input with the
runtime's producer settings, retrying when librdkafka's local queue is full.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, Producer


def dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _first(v: Any) -> Any:
    """confluent_kafka's version() is a (str, int) tuple in older releases and a plain str in newer ones."""
    return v[0] if isinstance(v, tuple) else v


def command_line(script: str, argv: list[str] | None) -> str:
    """The command a report records: the script and its options, without ``--out`` (where the report
    was written is a path of the machine that ran it, not part of what was measured)."""
    args = list(argv if argv is not None else sys.argv[1:])
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            kept.append(arg)
    return " ".join([script, *kept])


def run_until_caught_up(
    worker: Any, ends: Mapping[int, int], timeout: float = 600.0
) -> tuple[float, dict[str, Any]]:
    """Run a ``Worker`` until its position on every partition reaches ``ends`` (its final checkpoint is
    written when ``run`` returns): the seconds from its first batch, and every key's result then."""
    marks: dict[str, float] = {}
    process = worker._process
    results: dict[str, Any] = {}

    def timed_process(msgs: Any) -> None:
        marks.setdefault("first", time.perf_counter())
        process(msgs)

    worker._process = timed_process
    deadline = time.monotonic() + timeout

    def caught_up(w: Any) -> bool:
        positions = w.positions()
        if all((positions.get(p) or 0) >= end for p, end in ends.items()):
            results.update(w.results())
            return True
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker did not catch up: {positions}")
        return False

    worker.run(until=caught_up)
    return time.perf_counter() - marks["first"], results


def machine_info(**extra: Any) -> dict[str, Any]:
    """CPU, platform, Python, the Kafka and storage libraries, and the load average now; plus ``extra``."""
    cpu_model = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    return {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu_model,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "pythonhashseed": os.environ.get("PYTHONHASHSEED"),
        "loadavg_1_5_15": [round(v, 2) for v in os.getloadavg()],
        "confluent_kafka": _first(confluent_kafka.version()),
        "librdkafka": _first(confluent_kafka.libversion()),
        "orjson": dist_version("orjson"),
        "rocksdict": dist_version("rocksdict"),
        **extra,
    }


def produce_all(producer: Producer, topic: str, records: Iterable[tuple[bytes | None, bytes, int]]) -> None:
    """Produce ``(key, value, partition)`` records, waiting whenever the local queue is full, then flush;
    RuntimeError if any record is not acknowledged."""
    failures: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    for i, (key, value, partition) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    if remaining or failures:
        raise RuntimeError(
            f"producing to {topic}: {remaining} unacknowledged, {len(failures)} failed"
            + (f" ({failures[0]})" if failures else "")
        )
