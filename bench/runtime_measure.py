"""The runtime benchmark's measurements: a raw confluent-kafka consumer loop and the ``Worker`` on the
same topic, each timed from its first batch to caught up. (The Worker's timing wraps its methods; see
bench/README.md.)
"""

from __future__ import annotations

import contextlib
import cProfile
import gc
import os
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from bench.lib.progress import progress
from bench.lib.worker_runs import mark_run
from bench.runtime_workload import BATCH, KEY_FIELD, MEASURE_TIMEOUT, POLL_TIMEOUT, SESSION_TIMEOUT_MS
from ivmstream.config import build_config, schema_of
from ivmstream.events import EventCodec
from ivmstream.metrics import RuntimeMetrics
from ivmstream.redis_client import connect
from ivmstream.runtime import Worker
from ivmstream.runtime.clients import KafkaClients
from ivmstream.runtime.gc_policy import worker_gc
from ivmstream.runtime.kafka import consumer_settings
from ivmstream.runtime.progress import group_progress
from ivmstream.service import ServiceDefinition
from ivmstream.state import StateStore


@dataclass
class Measurement:
    case: str
    repeat: int
    topic: str
    group: str
    records: int
    seconds: float  # assignment -> end (see module docstring)
    seconds_from_first_batch: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    def as_json(self) -> dict[str, Any]:
        return {
            "repeat": self.repeat,
            "topic": self.topic,
            "group": self.group,
            "records": self.records,
            "seconds": round(self.seconds, 6),
            "records_per_s": round(self.rate, 1),
            "seconds_from_first_batch": round(self.seconds_from_first_batch, 6),
            "records_per_s_from_first_batch": round(self.records / self.seconds_from_first_batch, 1),
            **self.extra,
        }


class GcWatch:
    """Collections of the cyclic GC per generation, and their total time, between start() and stop().

    A full (generation 2) collection walks every tracked object of the process, ~0.1 s here, a sizeable
    share of one measurement: the counts tell whether a run was hit by one."""

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.seconds = 0.0
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections[info["generation"]] += 1

    def start(self) -> None:
        gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def as_json(self) -> dict[str, Any]:
        return {"gc_collections": list(self.collections), "gc_seconds": round(self.seconds, 6)}


def measure_raw(
    case: str,
    bootstrap: str,
    topic: str,
    group: str,
    ends: dict[int, int],
    repeat: int,
    overrides: dict[str, Any] | None = None,
) -> Measurement:
    total = sum(ends.values())
    consumer = Consumer(consumer_settings(bootstrap, group, SESSION_TIMEOUT_MS, overrides))
    marks: dict[str, float] = {}

    def on_assign(c: Consumer, tps: list[TopicPartition]) -> None:
        marks.setdefault("assigned", time.perf_counter())
        for tp in tps:  # as the worker does for a partition without a checkpoint
            tp.offset = OFFSET_BEGINNING
        c.assign(tps)

    gc_watch = GcWatch()
    frozen = contextlib.ExitStack()
    try:
        consumer.subscribe([topic], on_assign=on_assign)
        frozen.enter_context(worker_gc())  # the process policy the worker cases run under
        gc_watch.start()
        n = nbytes = 0
        deadline = time.monotonic() + MEASURE_TIMEOUT
        eof = KafkaError._PARTITION_EOF
        while n < total:
            msgs = consumer.consume(BATCH, POLL_TIMEOUT)
            if msgs and "first_batch" not in marks:
                marks["first_batch"] = time.perf_counter()
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == eof:
                        continue
                    raise KafkaException(err)
                nbytes += len(m.value())
                n += 1
            if time.monotonic() > deadline:
                raise TimeoutError(f"raw consumer read {n} of {total} records in {MEASURE_TIMEOUT:g}s")
        done = time.perf_counter()
        gc_watch.stop()
        positions = {
            tp.partition: tp.offset for tp in consumer.position([TopicPartition(topic, p) for p in ends])
        }
    finally:
        gc_watch.stop()
        frozen.close()
        consumer.close()
    if positions != ends:
        raise RuntimeError(f"raw consumer ended at {positions}, expected {ends}")
    return Measurement(
        case,
        repeat,
        topic,
        group,
        n,
        done - marks["assigned"],
        done - marks["first_batch"],
        {"value_bytes": nbytes, **gc_watch.as_json()},
    )


def steal_seconds() -> float:
    """CPU time the hypervisor has taken from this machine so far, summed over CPUs (0 if unknown)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")  # cpu user nice system idle iowait irq softirq steal
    except (OSError, IndexError, ValueError):
        return 0.0


def _sample(metrics: RuntimeMetrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name, {"service": metrics.service})
    return float(value) if value is not None else 0.0


def measure_worker(
    case: str,
    service: ServiceDefinition,
    bootstrap: str,
    topic: str,
    group: str,
    ends: dict[int, int],
    repeat: int,
    store: StateStore,
    *,
    redis_url: str | None = None,
    checkpoint_interval: float = 1.0,
    consumer_overrides: dict[str, Any] | None = None,
    profiler: cProfile.Profile | None = None,
    gc_policy: bool = True,
    compiled_decoder: bool = True,
) -> Measurement:
    total = sum(ends.values())
    raw_config: dict[str, Any] = {
        "key_field": KEY_FIELD,
        "input_topic": topic,
        "output_topic": f"{topic}.out",
        "dlq_topic": f"{topic}.dlq",
        "batch_size": BATCH,
        "checkpoint_interval": checkpoint_interval,
        "session_timeout_ms": SESSION_TIMEOUT_MS,
    }
    if consumer_overrides:
        raw_config["kafka"] = {"consumer": dict(consumer_overrides)}
    config = build_config(service, raw_config)
    redis_client = connect(redis_url) if redis_url else None
    metrics = RuntimeMetrics(service.name)
    codec = EventCodec(schema_of(service, config), compiled=compiled_decoder)
    worker = Worker(
        service,
        config,
        KafkaClients(bootstrap),
        store,
        group=group,
        redis_client=redis_client,
        metrics=metrics,
        codec=codec,
    )
    marks: dict[str, float] = {}  # assigned, first_batch, caught_up, checkpointed (the final one), closed
    mark_run(worker, marks)
    timed_out = False

    targets = {p: end for p, end in ends.items() if end > 0}
    deadline = time.monotonic() + MEASURE_TIMEOUT

    def caught_up(w: Worker) -> bool:
        nonlocal timed_out
        positions = w.positions()
        if all(positions.get(p) == end for p, end in targets.items()):
            marks["caught_up"] = time.perf_counter()
            return True
        if time.monotonic() > deadline:
            timed_out = True
            return True
        return False

    gc_watch = GcWatch()
    try:
        if profiler is not None:
            profiler.enable()
        with worker_gc() if gc_policy else contextlib.nullcontext():
            gc_watch.start()  # after the policy's own collection, which precedes the run (and its clock)
            try:
                worker.run(until=caught_up)
                marks["closed"] = time.perf_counter()  # run() ends by leaving the group
            finally:
                gc_watch.stop()
                if profiler is not None:
                    profiler.disable()
    finally:
        if redis_client is not None:
            redis_client.close()
    if timed_out:
        raise TimeoutError(
            f"{case}: worker did not reach {ends} in {MEASURE_TIMEOUT:g}s: {worker.positions()}"
        )

    events_in = int(_sample(metrics, "ivmstream_events_in_total"))
    lag = {p.partition: p.lag for p in group_progress(bootstrap, group, topic)}
    if events_in != total:
        raise RuntimeError(f"{case}: worker consumed {events_in} records, expected {total}")
    checkpoints = int(_sample(metrics, "ivmstream_checkpoints_total"))
    cp_count = _sample(metrics, "ivmstream_checkpoint_seconds_count")
    cp_sum = _sample(metrics, "ivmstream_checkpoint_seconds_sum")
    batch_count = _sample(metrics, "ivmstream_batch_seconds_count")
    batch_sum = _sample(metrics, "ivmstream_batch_seconds_sum")
    seconds = marks["checkpointed"] - marks["assigned"]
    extra = {
        "caught_up_to_checkpointed_s": round(marks["checkpointed"] - marks["caught_up"], 6),
        "close_s": round(marks["closed"] - marks["checkpointed"], 6),
        "results_published": int(_sample(metrics, "ivmstream_results_out_total")),
        "checkpoints": checkpoints,
        "checkpoint_mean_ms": round(1000 * cp_sum / cp_count, 3) if cp_count else None,
        "checkpoint_total_s": round(cp_sum, 6),
        "checkpoint_bytes": int(_sample(metrics, "ivmstream_checkpoint_bytes_sum")),
        "batches": int(batch_count),
        "process_total_s": round(batch_sum, 6),  # time applying batches (decode, apply, publish)
        "process_share": round(batch_sum / seconds, 4),
        "process_us_per_record": round(1e6 * batch_sum / total, 3),
        "group_committed_at_end": all(v == 0 for v in lag.values()),
        **gc_watch.as_json(),
    }
    if not extra["group_committed_at_end"]:
        progress(f"  warning: {case} group {group} still shows lag {lag} after close")
    return Measurement(
        case, repeat, topic, group, total, seconds, marks["checkpointed"] - marks["first_batch"], extra
    )
