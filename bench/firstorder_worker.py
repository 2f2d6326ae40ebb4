"""The firstorder benchmark's worker point: each strategy through a real ``Worker`` on the embedded broker
(batches of ``batch_size`` events, the result published after every batch, incremental checkpoints in
RocksDB), beside the engine alone on the same events in the same batches, the result read after each.
The engine takes exactly the batches the worker's consumer handed it (at most the batch size each).
Strategies alternate within each repeat; wall and process CPU seconds are both recorded (the broker
runs in its own process, so the CPU seconds are the worker's and the engine's own); the load average
is recorded before and after."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.lib.machine import load_average
from bench.lib.progress import progress
from bench.lib.worker_runs import run_until_caught_up
from ivmstream.events import UpdateEvent

STRATEGIES = ("first-order", "recompute")


def worker_point(
    query: str, options: dict[str, Any], events: list[UpdateEvent], repeats: int, batch_size: int
) -> dict[str, Any]:
    """Seconds through the worker (first batch to caught up, final checkpoint included) and through the
    engine alone, per strategy, median of ``repeats``; the per-repeat recompute/first-order ratios, of
    wall and of CPU time."""
    from bench.lib.broker import produce_checked
    from ivmstream.config import build_config
    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.events import encode_event
    from ivmstream.runtime import Worker
    from ivmstream.service import load_service
    from ivmstream.state import open_store

    service = load_service("firstorder")
    load_start = load_average()
    worker_s: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    engine_s: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    worker_cpu: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    engine_cpu: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    batches: dict[str, list[int]] = {s: [] for s in STRATEGIES}
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-firstorder-bench-"))
    try:
        with BrokerProcess() as broker:
            topic = f"firstorder-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, 1)
            end = produce_checked(broker.bootstrap, topic, [encode_event(ev) for ev in events])
            for rep in range(repeats):
                for strategy in STRATEGIES if rep % 2 == 0 else STRATEGIES[::-1]:
                    progress(f"{query} through the worker: {strategy} (repeat {rep + 1}/{repeats})")
                    raw = {
                        **options,
                        "strategy": strategy,
                        "input_topic": topic,
                        "output_topic": f"{topic}.{strategy}.{rep}.out",
                        "dlq_topic": f"{topic}.dlq",
                        "batch_size": batch_size,
                    }
                    config = build_config(service, raw)
                    store = open_store("rocksdb", f"firstorder.{topic}.{strategy}.{rep}", state_dir=tmp)
                    worker = Worker(
                        service, config, broker.bootstrap, store, group=f"{topic}-{strategy}-{rep}"
                    )
                    sizes: list[int] = []  # the batches the consumer handed the worker (up to batch_size)
                    worker.hooks.batch_received.append(sizes.append)
                    cpu = time.process_time()
                    seconds, results = run_until_caught_up(worker, {0: end}, timeout=900)
                    worker_cpu[strategy].append(time.process_time() - cpu)
                    worker_s[strategy].append(seconds)
                    batches[strategy].append(len(sizes))
                    cpu = time.process_time()
                    engine_seconds, result = _engine_run(service, config, events, sizes)
                    engine_cpu[strategy].append(time.process_time() - cpu)
                    engine_s[strategy].append(engine_seconds)
                    (published,) = results.values()
                    if published != result:
                        raise AssertionError(
                            f"{query} {strategy}: the worker's result differs from the engine's"
                        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n = len(events)
    return {
        "query": query,
        "events": n,
        "batch_size": config.batch_size,
        "checkpoint_interval_s": config.checkpoint_interval,
        "repeats": repeats,
        "worker_seconds": worker_s,
        "engine_seconds": engine_s,
        "worker_batches": batches,
        "worker_us_per_update": {s: statistics.median(v) / n * 1e6 for s, v in worker_s.items()},
        "engine_us_per_update": {s: statistics.median(v) / n * 1e6 for s, v in engine_s.items()},
        "worker_cpu_seconds": worker_cpu,
        "engine_cpu_seconds": engine_cpu,
        "worker_cpu_us_per_update": {s: statistics.median(v) / n * 1e6 for s, v in worker_cpu.items()},
        "worker_ratio": _median_ratio(worker_s),
        "worker_cpu_ratio": _median_ratio(worker_cpu),
        "engine_cpu_ratio": _median_ratio(engine_cpu),
        "load_start": load_start,
        "load_end": load_average(),
    }


def _median_ratio(seconds: dict[str, list[float]]) -> float:
    """recompute / first-order, per repeat (the two ran side by side), median."""
    return statistics.median(r / f for f, r in zip(seconds["first-order"], seconds["recompute"], strict=True))


def _engine_run(service: Any, config: Any, events: list[UpdateEvent], sizes: list[int]) -> tuple[float, Any]:
    """The engine alone on the batches the worker received (``sizes``), the result read after each, as
    the worker publishes it."""
    engine = service.engine(config.options)
    start = time.perf_counter()
    i = 0
    for size in sizes:
        refused = engine.apply(events[i : i + size])
        assert not refused, refused[:3]
        i += size
        result = engine.result()
    assert i == len(events), (i, len(events))
    return time.perf_counter() - start, result


def markdown(point: dict[str, Any]) -> list[str]:
    """The worker point's table and its note (docs/firstorder/benchmark.md)."""
    n = point["events"]
    w, e = point["worker_us_per_update"], point["engine_us_per_update"]
    w_cpu = point["worker_cpu_us_per_update"]
    e_cpu = {s: statistics.median(v) / n * 1e6 for s, v in point["engine_cpu_seconds"].items()}
    lines = [
        "| query | update events | batch size | strategy | batches received (results published) "
        "| through the worker, wall (µs per update) | through the worker, CPU (µs per update) "
        "| engine alone, same batches, wall (µs per update) | engine alone, CPU (µs per update) "
        "| engine / worker, CPU |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in STRATEGIES:
        received = "/".join(str(b) for b in point["worker_batches"][s])
        lines.append(
            f"| `{point['query']}` | {n:,} | {point['batch_size']:,} | {s} | {received} | {w[s]:,.1f} | "
            f"{w_cpu[s]:,.1f} | {e[s]:,.1f} | {e_cpu[s]:,.1f} | {e_cpu[s] / w_cpu[s]:.2f} |"
        )
    lines += [
        "",
        f"Time per update event, median of {point['repeats']} repeats with the strategies alternating "
        f"(the worker: from its first batch until caught up, its final checkpoint included, the result "
        f"published after every batch of at most {point['batch_size']:,} events; the engine: the batches "
        f"the worker received, the result read after each; the batches received are listed per repeat). "
        f"Wall is elapsed time, CPU the process's CPU time (the broker is another process): on a shared "
        f"machine CPU time is the steadier measure. recompute / first-order through the worker "
        f"{point['worker_ratio']:.2f} in wall time and {point['worker_cpu_ratio']:.2f} in CPU time, the "
        f"engine alone {point['engine_cpu_ratio']:.2f} in CPU time (medians of the per-repeat ratios); "
        f"load average {point['load_start'][0]} before, {point['load_end'][0]} after.",
    ]
    return lines
