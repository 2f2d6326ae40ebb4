"""Runtime overhead benchmark: raw confluent-kafka consumption vs. the ``Worker`` loop.

One run starts its own embedded Kafka-wire broker (``BrokerProcess``) and ``redis-server`` and measures,
on identical pre-produced input (JSON update events over 64 keys and 4 partitions):

1. ``raw``: a plain ``Consumer`` with the runtime's consumer settings and ``consume(2000)`` batches,
   touching every value (``len``): the ceiling any Python consumer loop on this machine can reach;
2. ``runtime-noop``: the ``Worker`` with an engine that does nothing, memory state store, no Redis;
3. ``runtime-rocksdb``: the ``Worker`` with a counting engine, RocksDB checkpoints;
4. ``runtime-redis``: the ``Worker`` with a counting engine, Redis checkpoints and Redis results;
5. ``runtime-noop-gc-default``: case 2 without the worker's GC policy, to show what the policy buys;
6. ``runtime-noop-python``: case 2 decoding with the pure-Python (msgspec) path instead of the compiled
   decoder (``shared/events/_fastjson.c``), to show what the compiled decoder buys.

Every case but the last runs its timed part under ``worker_gc()``, the GC policy ``ivmstream run``
applies to its worker process (``shared/runtime/gc_policy.py``: the start-up heap frozen, young
collections only past 50,000 live new containers rather than 700). The raw consumer runs under the same
policy, so both sides of the ratio are measured in the same kind of process.

plus, on request (``--cases``), a diagnostic pair ``raw-fastfetch`` and ``runtime-noop-fastfetch`` with
``fetch.queue.backoff.ms`` set by ``--fastfetch-backoff-ms``. librdkafka's default (1000 ms) stops
fetching for a whole second whenever its prefetch queue passes ``queued.min.messages``, which throttles
a consumer far below what it can read; the runtime's own settings use 10 ms, so the default cases
compare both sides unthrottled.

Every measurement uses a fresh topic (produced with an idempotent producer before timing) and a fresh
consumer group. The clock starts when the group assigns the partitions and stops when the last record
is consumed (raw) or, for the runtime, when the final checkpoint covering every record is written
(``Worker.run(until=...)`` with a predicate on ``worker.positions()``). Each case runs ``--repeats``
times; the cases are interleaved and their order rotates from one repeat to the next, so drift and a
case's position hit every case alike. Reported: each case's median rate, and for the ratios both the
ratio of medians and the median of the per-repeat ratios (runs of one repeat are seconds apart, so the
paired ratio cancels the machine's slower and faster spells; on a shared VM a CPU-bound loop's speed
varies by +-25% from minute to minute), with a distribution-free 95% confidence interval for the
no-op/raw paired median (``noop_vs_raw_paired_ci95``; 31 repeats by default, so the interval is the
10th to 22nd of the sorted ratios). Each run's JSON also records the cyclic GC's collections per
generation and their total time within the timed part (``gc_collections``, ``gc_seconds``), and the
CPU time the hypervisor took from this VM during it (``steal_s``, from ``/proc/stat``).

Usage (from the repo root)::

    .venv/bin/python bench/runtime.py                 # 200000 events, 31 repeats (~4 min)
    .venv/bin/python bench/runtime.py --quick         # smoke size: 20000 events, 1 repeat
    .venv/bin/python bench/runtime.py --profile       # + cProfile of one extra no-op worker run

Writes ``bench/results/runtime.json`` and ``runtime.png`` (``runtime_quick.*`` with ``--quick``, so a
smoke run never overwrites the real figures), and ``runtime.prof.txt`` with ``--profile``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import json
import logging
import math
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402
from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from bench.lib import machine  # noqa: E402
from bench.lib.broker import produce_all  # noqa: E402
from bench.lib.machine import dist_version  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from ivmstream.config import build_config  # noqa: E402
from ivmstream.dev.broker import BrokerProcess  # noqa: E402
from ivmstream.dev.redis_server import RedisServer  # noqa: E402
from ivmstream.engine import Rejection  # noqa: E402
from ivmstream.events import EventCodec, Relation, UpdateEvent  # noqa: E402
from ivmstream.metrics import RuntimeMetrics  # noqa: E402
from ivmstream.redis_client import connect  # noqa: E402
from ivmstream.runtime import Worker  # noqa: E402
from ivmstream.runtime.gc_policy import worker_gc  # noqa: E402
from ivmstream.runtime.kafka import consumer_settings, producer_settings  # noqa: E402
from ivmstream.runtime.progress import group_progress  # noqa: E402
from ivmstream.service import ServiceDefinition  # noqa: E402
from ivmstream.state import StateStore, open_store  # noqa: E402

RESULTS = REPO / "bench" / "results"
PARTITIONS = 4
KEYS = 64
KEY_FIELD = "k"
BATCH = 2000  # the runtime's default batch_size, and the raw consumer's num_messages
POLL_TIMEOUT = 0.2  # what Worker.run passes to consume()
SESSION_TIMEOUT_MS = 10000  # the runtime's default session_timeout_ms
PRODUCE_BATCH = 10000  # records per produced MessageSet (see produce())
MEASURE_TIMEOUT = 600.0  # seconds one measurement may take before the bench gives up

# The four requested cases use exactly the runtime's consumer settings. The two "fastfetch" cases are a
# diagnostic: librdkafka >= 2.3 stops fetching for fetch.queue.backoff.ms (default 1000 ms) whenever its
# prefetch queue exceeds queued.min.messages (100000), which caps a fast consumer far below what it
# could read; the diagnostic pair lowers that backoff for both sides to show the unthrottled ratio.
CASES = (
    "raw",
    "runtime-noop",
    "runtime-rocksdb",
    "runtime-redis",
    "runtime-noop-gc-default",
    "runtime-noop-python",
    "raw-fastfetch",
    "runtime-noop-fastfetch",
)
LABELS = {
    "raw": "raw confluent-kafka",
    "runtime-noop": "Worker, no-op engine, memory",
    "runtime-rocksdb": "Worker, counting, RocksDB",
    "runtime-redis": "Worker, counting, Redis",
    "runtime-noop-gc-default": "Worker, no-op, no GC policy (diagnostic)",
    "runtime-noop-python": "Worker, no-op, Python decoder (diagnostic)",
    "raw-fastfetch": "raw, fast fetch (diagnostic)",
    "runtime-noop-fastfetch": "Worker no-op, fast fetch (diagnostic)",
}


# --------------------------------------------------------------------------- bench services

_RELATIONS = (Relation("items", (("item", "str"), ("qty", "int"))),)
_CONSTANT_RESULT = {"ok": True}


class NoopEngine:
    """Does nothing: what is left of a run is the runtime's own cost."""

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        return []

    def result(self) -> Any:
        return _CONSTANT_RESULT

    def snapshot(self) -> bytes:
        return b""

    def restore(self, data: bytes) -> None:
        pass


class CountingEngine:
    """Sums the deltas; a snapshot of a few bytes, so every checkpoint writes something."""

    def __init__(self) -> None:
        self.count = 0

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        self.count += sum(ev.delta for ev in events)
        return []

    def result(self) -> Any:
        return {"count": self.count}

    def snapshot(self) -> bytes:
        return str(self.count).encode()

    def restore(self, data: bytes) -> None:
        self.count = int(data) if data else 0


NOOP_SERVICE = ServiceDefinition(
    name="bench_noop",
    summary="no-op engine (runtime benchmark)",
    options={},
    relations=lambda _options: _RELATIONS,
    engine=lambda _options: NoopEngine(),
    platform_only=True,
)
COUNT_SERVICE = ServiceDefinition(
    name="bench_count",
    summary="counting engine (runtime benchmark)",
    options={},
    relations=lambda _options: _RELATIONS,
    engine=lambda _options: CountingEngine(),
    platform_only=True,
)


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class Workload:
    """The input records, column by column.

    Three lists of untracked scalars (ints and bytes) rather than one object per record: the cyclic GC
    walks every tracked object of the process on a full collection, and 200,000 record objects held by
    the harness would put several times a real worker's heap under each measured run."""

    partitions: list[int]
    keys: list[bytes]
    values: list[bytes]

    def __len__(self) -> int:
        return len(self.values)


def make_records(n: int) -> Workload:
    """Valid update events over KEYS keys; key i lives on partition i % PARTITIONS."""
    partitions, keys, values = [], [], []
    for i in range(n):
        k = i % KEYS
        key = f"key{k}"
        values.append(
            orjson.dumps(
                {
                    "relation": "items",
                    "row": {"item": f"item{i % 997}", "qty": i % 50 + 1, KEY_FIELD: key},
                    "delta": 1,
                }
            )
        )
        keys.append(key.encode())
        partitions.append(k % PARTITIONS)
    return Workload(partitions, keys, values)


def produce(bootstrap: str, topic: str, records: Workload, batch_messages: int = 10000) -> None:
    """Idempotent producer; every MessageSet holds ``batch_messages`` records (the tail excepted).

    The batch size is pinned (a long linger, so only the count closes a batch) because librdkafka's mock
    broker answers a Fetch with at most ONE MessageSet per partition: with timing-dependent batches the
    consumer-side ceiling would swing by 4x from run to run. 10000 records of ~75 bytes is ~750 KB,
    close to what a real broker returns per partition fetch (max.partition.fetch.bytes = 1 MB).
    """
    producer = Producer(
        producer_settings(  # enable.idempotence=True
            bootstrap, {"linger.ms": 5000, "batch.num.messages": batch_messages, "batch.size": 16_000_000}
        )
    )
    produce_all(producer, topic, zip(records.keys, records.values, records.partitions, strict=True))


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's end offset; RuntimeError if a partition no longer starts at offset 0.

    librdkafka's mock broker keeps at most 5 MiB of message sets per partition and drops the oldest
    beyond that (``mpart->max_size`` in rdkafka_mock.c): a consumer started from the beginning then
    waits forever for records that are gone."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe", "enable.auto.commit": False})
    try:
        meta = probe.list_topics(topic, timeout=10).topics[topic]
        marks = {
            p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in meta.partitions
        }
    finally:
        probe.close()
    dropped = {p: low for p, (low, _high) in marks.items() if low > 0}
    if dropped:
        raise RuntimeError(
            f"the embedded broker dropped the oldest records of {topic} (partition: first offset kept "
            f"{dropped}): it keeps at most 5 MiB per partition, so use fewer --events"
        )
    return {p: marks[p][1] for p in sorted(marks)}


# --------------------------------------------------------------------------- measurements


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
    worker = Worker(
        service, config, bootstrap, store, group=group, redis_client=redis_client, metrics=metrics
    )
    if worker.codec.compiled != compiled_decoder:
        worker.codec = EventCodec(worker.codec.schema, compiled=compiled_decoder)
    marks: dict[str, float] = {}
    timed_out = False

    # Timing hooks on this instance only: run() looks these methods up on self.
    on_assign, process, close = worker._on_assign, worker._process, worker.close

    def timed_assign(c: Consumer, tps: list[TopicPartition]) -> None:
        marks.setdefault("assigned", time.perf_counter())
        on_assign(c, tps)

    def timed_process(msgs: list[Any]) -> None:
        marks.setdefault("first_batch", time.perf_counter())
        process(msgs)

    def timed_close() -> None:
        marks["checkpointed"] = time.perf_counter()  # run() has just written the final checkpoint
        close()
        marks["closed"] = time.perf_counter()

    worker._on_assign = timed_assign  # type: ignore[method-assign]
    worker._process = timed_process  # type: ignore[method-assign]
    worker.close = timed_close  # type: ignore[method-assign]

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
        "process_total_s": round(batch_sum, 6),  # time inside Worker._process (decode, apply, publish)
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


# --------------------------------------------------------------------------- machine and report


def machine_info() -> dict[str, Any]:
    redis_server = None
    exe = shutil.which("redis-server")
    if exe:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            redis_server = subprocess.run(
                [exe, "--version"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
    return machine.machine_info(
        redis_py=dist_version("redis"),
        prometheus_client=dist_version("prometheus-client"),
        redis_server=redis_server,
    )


def summarize(measurements: list[Measurement]) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    for case in CASES:
        runs = [m for m in measurements if m.case == case]
        if not runs:
            continue
        rates = [m.rate for m in runs]
        entry: dict[str, Any] = {
            "label": LABELS[case],
            "records_per_s_median": round(statistics.median(rates), 1),
            "records_per_s_min": round(min(rates), 1),
            "records_per_s_max": round(max(rates), 1),
            "records_per_s_from_first_batch_median": round(
                statistics.median(m.records / m.seconds_from_first_batch for m in runs), 1
            ),
            "runs": [m.as_json() for m in runs],
        }
        if not case.startswith("raw"):
            for name in ("checkpoints", "checkpoint_mean_ms", "process_us_per_record", "process_share"):
                values = [m.extra[name] for m in runs if m.extra.get(name) is not None]
                entry[f"{name}_median"] = statistics.median(values) if values else None
        cases[case] = entry
    return cases


def paired_ratios(cases: dict[str, Any], a: str, b: str) -> list[float]:
    """Per repeat, case ``a``'s rate over case ``b``'s (runs of one repeat are seconds apart)."""
    if a not in cases or b not in cases:
        return []
    rate_b = {run["repeat"]: run["records_per_s"] for run in cases[b]["runs"]}
    runs_a = [run for run in cases[a]["runs"] if run["repeat"] in rate_b]
    return [run["records_per_s"] / rate_b[run["repeat"]] for run in runs_a]


def median_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """Distribution-free confidence interval for the median: order statistics from the binomial(n, 1/2).

    The interval [x_(k), x_(n-k+1)] covers the true median with probability 1 - 2 P(Bin(n, 1/2) < k);
    k is the largest index keeping that at least ``level``. None when n is too small for the level
    (n < 6 at 95%), since then even the full range covers the median with lower probability."""
    xs = sorted(values)
    n = len(xs)
    pmf = [math.comb(n, i) / 2**n for i in range(n + 1)]
    best = None
    for k in range(1, n // 2 + 1):
        if 1 - 2 * sum(pmf[:k]) >= level:
            best = k
    return None if best is None else (xs[best - 1], xs[n - best])


def ratios(cases: dict[str, Any]) -> dict[str, Any]:
    def r(a: str, b: str) -> float | None:
        if a not in cases or b not in cases:
            return None
        return round(cases[a]["records_per_s_median"] / cases[b]["records_per_s_median"], 4)

    def paired(a: str, b: str) -> float | None:
        """Median over repeats of the ratio of the two cases' rates within one repeat."""
        per_repeat = paired_ratios(cases, a, b)
        return round(statistics.median(per_repeat), 4) if per_repeat else None

    ci = median_ci(paired_ratios(cases, "runtime-noop", "raw"))
    return {
        "noop_vs_raw": r("runtime-noop", "raw"),
        "noop_vs_raw_paired": paired("runtime-noop", "raw"),
        "noop_vs_raw_paired_ci95": None if ci is None else [round(ci[0], 4), round(ci[1], 4)],
        "gc_default_noop_vs_raw_paired": paired("runtime-noop-gc-default", "raw"),
        "rocksdb_vs_noop": r("runtime-rocksdb", "runtime-noop"),
        "redis_vs_noop": r("runtime-redis", "runtime-noop"),
        "rocksdb_vs_raw": r("runtime-rocksdb", "raw"),
        "redis_vs_raw": r("runtime-redis", "raw"),
        "gc_default_noop_vs_raw": r("runtime-noop-gc-default", "raw"),
        "gc_policy_speedup": r("runtime-noop", "runtime-noop-gc-default"),
        "python_decoder_noop_vs_raw": r("runtime-noop-python", "raw"),
        "python_decoder_noop_vs_raw_paired": paired("runtime-noop-python", "raw"),
        "compiled_decoder_speedup": r("runtime-noop", "runtime-noop-python"),
        "compiled_decoder_speedup_paired": paired("runtime-noop", "runtime-noop-python"),
        "fastfetch_noop_vs_raw": r("runtime-noop-fastfetch", "raw-fastfetch"),
        "fastfetch_raw_vs_raw": r("raw-fastfetch", "raw"),
    }


def noop_note(rat: dict[str, Any]) -> str:
    """Three decimals, since the goal's line is at 0.5, and the paired median's interval."""
    if rat.get("noop_vs_raw") is None:
        return ""
    ci = rat.get("noop_vs_raw_paired_ci95")
    paired = f"\npaired {rat['noop_vs_raw_paired']:.3f}" if rat.get("noop_vs_raw_paired") is not None else ""
    return f"{rat['noop_vs_raw']:.3f}x raw{paired}" + (f"\n95% CI {ci[0]:.3f}-{ci[1]:.3f}" if ci else "")


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = report["cases"]
    names = [c for c in CASES if c in cases]
    medians = [cases[c]["records_per_s_median"] for c in names]
    lower = [cases[c]["records_per_s_median"] - cases[c]["records_per_s_min"] for c in names]
    upper = [cases[c]["records_per_s_max"] - cases[c]["records_per_s_median"] for c in names]
    rat = report["ratios"]

    def note(key: str, what: str) -> str:
        return f"{rat[key]:.2f}x {what}" if rat.get(key) is not None else ""

    notes = {
        "raw": "baseline",
        "runtime-noop": noop_note(rat),
        "runtime-rocksdb": note("rocksdb_vs_noop", "no-op"),
        "runtime-redis": note("redis_vs_noop", "no-op"),
        "runtime-noop-gc-default": note("gc_default_noop_vs_raw", "raw"),
        "runtime-noop-python": note("python_decoder_noop_vs_raw", "raw"),
        "raw-fastfetch": note("fastfetch_raw_vs_raw", "raw"),
        "runtime-noop-fastfetch": note("fastfetch_noop_vs_raw", "raw fast"),
    }
    colors = {
        "raw": "#7f7f7f",
        "runtime-noop": "#1f77b4",
        "runtime-rocksdb": "#2ca02c",
        "runtime-redis": "#d62728",
        "runtime-noop-gc-default": "#9ecae1",
        "runtime-noop-python": "#c6dbef",
        "raw-fastfetch": "#c7c7c7",
        "runtime-noop-fastfetch": "#aec7e8",
    }
    fig, ax = plt.subplots(figsize=(3 + 1.9 * len(names), 5.6))
    bars = ax.bar(
        [LABELS[c].replace(", ", ",\n").replace(" (", "\n(") for c in names],
        medians,
        yerr=[lower, upper],
        capsize=5,
        color=[colors[c] for c in names],
    )
    top = max(m + u for m, u in zip(medians, upper, strict=True))
    for bar, c, m, u in zip(bars, names, medians, upper, strict=True):
        ax.annotate(
            f"{m:,.0f}/s\n{notes[c]}",
            (bar.get_x() + bar.get_width() / 2, m + u),  # above the error bar
            xytext=(0, 6),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=9,
        )
    if "raw" in cases:
        goal = 0.5 * cases["raw"]["records_per_s_median"]
        ax.axhline(
            goal, color="black", linestyle="--", linewidth=1, label="goal: no-op runtime >= 50% of raw"
        )
    if "raw-fastfetch" in cases:
        goal_fast = 0.5 * cases["raw-fastfetch"]["records_per_s_median"]
        ax.axhline(goal_fast, color="#888888", linestyle=":", linewidth=1, label="50% of raw, fast fetch")
    if "raw" in cases or "raw-fastfetch" in cases:
        ax.legend(loc="upper left", fontsize=8)
    ax.set_ylim(0, top * 1.25)
    ax.set_ylabel("records/s (median; bars: min-max)")
    cfg, mach = report["config"], report["machine"]
    ax.set_title(
        f"ivmstream runtime vs raw confluent-kafka: {cfg['events']:,} events, "
        f"{cfg['partitions']} partitions, {cfg['keys']} keys, {cfg['repeats']} repeat(s)\n"
        f"{mach['cpu_count']} CPUs, Python {mach['python']}, confluent-kafka {mach['confluent_kafka']}, "
        f"librdkafka {mach['librdkafka']}, embedded broker",
        fontsize=9,
    )
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_summary(report: dict[str, Any]) -> None:
    cases, rat = report["cases"], report["ratios"]
    raw = cases.get("raw", {}).get("records_per_s_median")
    noop = cases.get("runtime-noop", {}).get("records_per_s_median")
    header = (
        f"{'case':<38} {'records/s':>11} {'min':>10} {'max':>10} {'vs raw':>7} {'vs no-op':>8} "
        f"{'ckpts':>6} {'ckpt ms':>8} {'us/rec in _process':>19}"
    )
    print(header)
    print("-" * len(header))
    for c in CASES:
        if c not in cases:
            continue
        e = cases[c]
        med = e["records_per_s_median"]
        vs_raw = f"{med / raw:.2f}" if raw else "-"
        vs_noop = f"{med / noop:.2f}" if noop and c.startswith("runtime") else "-"
        if c == "runtime-noop-fastfetch" and "raw-fastfetch" in cases:
            vs_raw = f"{med / cases['raw-fastfetch']['records_per_s_median']:.2f}*"  # vs the fast raw
        ck = e.get("checkpoints_median")
        ck_ms = e.get("checkpoint_mean_ms_median")
        us = e.get("process_us_per_record_median")
        print(
            f"{e['label']:<38} {med:>11,.0f} "
            f"{e['records_per_s_min']:>10,.0f} {e['records_per_s_max']:>10,.0f} "
            f"{vs_raw:>7} {vs_noop:>8} {'-' if ck is None else f'{ck:g}':>6} "
            f"{'-' if ck_ms is None else f'{ck_ms:.2f}':>8} {'-' if us is None else f'{us:.2f}':>19}"
        )
    if "runtime-noop-fastfetch" in cases and "raw-fastfetch" in cases:
        print("* compared with 'raw, fast fetch', not with 'raw'")
    if rat["noop_vs_raw"] is not None:
        verdict = "met" if rat["noop_vs_raw"] >= 0.5 else "NOT met"
        print(f"\nruntime(no-op)/raw = {rat['noop_vs_raw']:.3f} (ratio of medians; goal >= 0.5: {verdict})")
        ci = rat["noop_vs_raw_paired_ci95"]
        ci_text = f", 95% CI of the median {ci[0]:.3f}-{ci[1]:.3f}" if ci else ""
        print(f"runtime(no-op)/raw = {rat['noop_vs_raw_paired']:.3f} (median of per-repeat ratios{ci_text})")
    if rat["rocksdb_vs_noop"] is not None:
        print(f"rocksdb/no-op      = {rat['rocksdb_vs_noop']:.3f}")
    if rat["redis_vs_noop"] is not None:
        print(f"redis/no-op        = {rat['redis_vs_noop']:.3f}")
    if rat["gc_policy_speedup"] is not None:
        print(
            f"without the GC policy: runtime(no-op)/raw = {rat['gc_default_noop_vs_raw']:.3f} "
            f"(paired {rat['gc_default_noop_vs_raw_paired']:.3f}); "
            f"the policy makes the no-op worker {rat['gc_policy_speedup']:.2f}x as fast"
        )
    if rat["compiled_decoder_speedup"] is not None:
        print(
            f"with the pure-Python decoder: runtime(no-op)/raw = {rat['python_decoder_noop_vs_raw']:.3f} "
            f"(paired {rat['python_decoder_noop_vs_raw_paired']:.3f}); the compiled decoder makes the "
            f"no-op worker {rat['compiled_decoder_speedup']:.2f}x as fast "
            f"(paired {rat['compiled_decoder_speedup_paired']:.2f}x)"
        )
    if rat["fastfetch_noop_vs_raw"] is not None:
        print(
            f"diagnostic, fetch.queue.backoff.ms={report['config']['fastfetch_backoff_ms']} on both sides: "
            f"runtime(no-op)/raw = {rat['fastfetch_noop_vs_raw']:.3f}"
        )


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--events", type=int, default=None, help="records per topic (default 200000; 20000 with --quick)"
    )
    p.add_argument(
        "--repeats", type=int, default=None, help="measurements per case (default 31; 1 with --quick)"
    )
    p.add_argument("--quick", action="store_true", help="smoke size: 20000 events, 1 repeat")
    p.add_argument(
        "--cases",
        default=",".join(CASES[:6]),
        help=f"comma-separated subset of {','.join(CASES)} (default: the first six)",
    )
    p.add_argument(
        "--checkpoint-interval",
        type=float,
        default=1.0,
        help="runtime checkpoint_interval in s (default 1.0)",
    )
    p.add_argument(
        "--fastfetch-backoff-ms",
        type=int,
        default=10,
        help="fetch.queue.backoff.ms of the diagnostic *-fastfetch cases (default 10; librdkafka: 1000)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="afterwards, cProfile one extra no-op runtime run (not counted) and write the top functions",
    )
    p.add_argument(
        "--out",
        default=None,
        help="output path prefix (default bench/results/runtime, bench/results/runtime_quick with --quick)",
    )
    args = p.parse_args(argv)
    args.events = args.events or (20000 if args.quick else 200000)
    args.repeats = args.repeats or (1 if args.quick else 31)
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        p.error(f"unknown case(s) {', '.join(unknown)} (known: {', '.join(CASES)})")
    if args.events < PARTITIONS or args.repeats < 1 or args.checkpoint_interval <= 0:
        p.error("--events must be >= 4, --repeats >= 1 and --checkpoint-interval > 0")
    args.out = Path(args.out) if args.out else RESULTS / ("runtime_quick" if args.quick else "runtime")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    run_id = uuid.uuid4().hex[:8]
    progress(f"run {run_id}: {args.events} events x {args.repeats} repeat(s), cases {', '.join(args.cases)}")
    records = make_records(args.events)
    broker = BrokerProcess()
    redis_server = RedisServer()
    state_dir = tempfile.mkdtemp(prefix="ivmstream-bench-")
    measurements: list[Measurement] = []
    profile_text: str | None = None
    try:
        broker.start()
        progress(f"embedded broker at {broker.bootstrap}")
        if "runtime-redis" in args.cases:
            redis_server.start()
            progress(f"redis-server at {redis_server.url}")

        def fresh_topic(case: str, repeat: int) -> tuple[str, str, dict[int, int]]:
            topic = f"bench.{run_id}.{case}.{repeat}"
            broker.create_topic(topic, PARTITIONS)
            broker.create_topic(f"{topic}.out", PARTITIONS)
            started = time.perf_counter()
            produce(broker.bootstrap, topic, records, PRODUCE_BATCH)
            ends = end_offsets(broker.bootstrap, topic)
            if sum(ends.values()) != len(records):
                raise RuntimeError(f"{topic} holds {sum(ends.values())} records, produced {len(records)}")
            progress(f"  produced {len(records)} records to {topic} in {time.perf_counter() - started:.2f}s")
            return topic, f"bench-{run_id}-{case}-{repeat}", ends

        fastfetch = {"fetch.queue.backoff.ms": args.fastfetch_backoff_ms}

        def run_case(case: str, repeat: int, profiler: cProfile.Profile | None = None) -> Measurement:
            topic, group, ends = fresh_topic(case, repeat)
            overrides = fastfetch if case.endswith("-fastfetch") else None
            try:
                if case.startswith("raw"):
                    return measure_raw(case, broker.bootstrap, topic, group, ends, repeat, overrides)
                namespace = f"bench.{run_id}.{case}.{repeat}"
                service, redis_url = COUNT_SERVICE, None
                if case == "runtime-rocksdb":
                    store = open_store("rocksdb", namespace, state_dir=state_dir)
                elif case == "runtime-redis":
                    redis_url = redis_server.url
                    store = open_store("redis", namespace, redis_url=redis_url)
                else:  # runtime-noop and its diagnostic variants
                    service, store = NOOP_SERVICE, open_store("memory", namespace)
                return measure_worker(
                    case,
                    service,
                    broker.bootstrap,
                    topic,
                    group,
                    ends,
                    repeat,
                    store,
                    redis_url=redis_url,
                    checkpoint_interval=args.checkpoint_interval,
                    consumer_overrides=overrides,
                    profiler=profiler,
                    gc_policy=case != "runtime-noop-gc-default",
                    compiled_decoder=case != "runtime-noop-python",
                )
            finally:
                gc.collect()  # the worker's consumer/producer sit in reference cycles: free them now

        for repeat in range(args.repeats):
            shift = repeat % len(args.cases)
            for case in args.cases[shift:] + args.cases[:shift]:  # interleaved, order rotating
                progress(f"{case} repeat {repeat + 1}/{args.repeats}")
                steal_before = steal_seconds()
                m = run_case(case, repeat)
                m.extra["steal_s"] = round(steal_seconds() - steal_before, 3)
                measurements.append(m)
                detail = ""
                if not case.startswith("raw"):
                    detail = (
                        f", {m.extra['checkpoints']} checkpoints (mean {m.extra['checkpoint_mean_ms']} ms), "
                        f"{m.extra['process_us_per_record']:.2f} us/record in _process"
                    )
                progress(f"  {case}: {m.rate:,.0f} records/s ({m.records} in {m.seconds:.3f}s{detail})")

        if args.profile:
            # fast fetch, so the profile shows the worker's own costs rather than fetch-backoff stalls
            progress("profiling one extra runtime-noop-fastfetch run under cProfile (not counted)")
            profiler = cProfile.Profile()
            m = run_case("runtime-noop-fastfetch", args.repeats, profiler)
            buf = io.StringIO()
            stats = pstats.Stats(profiler, stream=buf)
            buf.write(
                f"runtime-noop-fastfetch under cProfile (Worker.run, main thread): {m.rate:,.0f} records/s "
                f"(profiler overhead included), "
                f"{m.extra['process_us_per_record']:.2f} us/record in _process\n"
            )
            stats.sort_stats("tottime").print_stats(35)
            stats.sort_stats("cumulative").print_stats(35)
            profile_text = buf.getvalue()
    finally:
        gc.collect()  # destroy any client still connected before its broker goes away
        broker.stop()
        redis_server.stop()
        shutil.rmtree(state_dir, ignore_errors=True)

    cases = summarize(measurements)
    report = {
        "benchmark": "runtime",
        "run_id": run_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(
            [".venv/bin/python", "bench/runtime.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "config": {
            "events": args.events,
            "repeats": args.repeats,
            "partitions": PARTITIONS,
            "keys": KEYS,
            "batch_size": BATCH,
            "checkpoint_interval_s": args.checkpoint_interval,
            "consumer_settings": {
                k: v if isinstance(v, str | int | float | bool) else repr(v)
                for k, v in consumer_settings("<bootstrap>", "<group>", SESSION_TIMEOUT_MS).items()
            },
            "fastfetch_backoff_ms": args.fastfetch_backoff_ms,
            "producer_batch_messages": PRODUCE_BATCH,
            "statistic": "median over repeats",
            "timing": "group assignment -> last record consumed (raw) / final checkpoint written (runtime)",
            "sample_event": orjson.loads(records.values[min(17, len(records) - 1)]),
        },
        "machine": machine_info(),
        "cases": cases,
        "ratios": ratios(cases),
        "goal": {
            "noop_vs_raw_at_least": 0.5,
            "verdict_on": "noop_vs_raw (ratio of medians); noop_vs_raw_paired_ci95 says how sure it is",
        },
    }
    report["goal"]["met"] = (
        report["ratios"]["noop_vs_raw"] >= 0.5 if report["ratios"]["noop_vs_raw"] is not None else None
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    json_path, png_path = args.out.with_suffix(".json"), args.out.with_suffix(".png")
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, png_path)
    if profile_text is not None:
        prof_path = args.out.parent / f"{args.out.name}.prof.txt"
        prof_path.write_text(profile_text)
        progress(f"profile written to {prof_path}")
    progress(f"wrote {json_path} and {png_path}")
    print_summary(report)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, TimeoutError) as exc:  # a failed measurement: one line, not a traceback
        print(f"bench/runtime.py: {exc}", file=sys.stderr)
        sys.exit(1)
