"""One timed run of a service's worker on one runtime, in a process of its own (``bench/faust.py``
starts it as ``python -m bench.faust_runs``, so that ``bench/faust.py`` cannot shadow the ``faust``
package and each run starts from a fresh interpreter, as ``ivmstream run`` does).

Both runtimes run the code ``ivmstream run`` runs: the default runtime's ``Worker.run``, and on Faust
``ivmstream.faust.runtime.faust_worker`` under ``execute`` (a Faust worker), each with a RocksDB store,
no Redis, under the worker GC policy. The marks come from the worker's hooks (``bench/lib/worker_runs``):
the clock starts at the first batch and stops when the checkpoint covering the whole input is written.
On the default runtime that is the one ``Worker.run`` writes when ``until`` says caught up; on Faust,
the batch that reaches the end checkpoints (what the agent does when Faust rebalances or stops) and
the worker is then stopped with SIGTERM, as an operator stops it.

``--profile FILE`` writes a cProfile of the measured window (the worker's thread), from which
``bench/faust_profile`` tells where the time goes; every run records the CPU time of the worker's
thread and of the process's other threads over the window.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.lib.worker_runs import mark_run
from ivmstream.config import build_config
from ivmstream.metrics import RuntimeMetrics
from ivmstream.runtime.gc_policy import worker_gc
from ivmstream.runtime.hooks import BatchApplied, CheckpointWritten
from ivmstream.service import load_service
from ivmstream.state import open_store

TIMEOUT = 600.0


def caught_up(positions: Mapping[int, int | None], ends: Mapping[int, int]) -> bool:
    return all((positions.get(p) or 0) >= end for p, end in ends.items() if end > 0)


def _thread_cpu() -> dict[int, float]:
    """CPU seconds of each thread of this process (Linux), by native thread id."""
    out: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def _window(hooks: Any, marks: dict[str, float], profile: Path | None) -> dict[str, Any]:
    """Process and per-thread CPU at the clock's two ends (taken before the first batch's mark and after
    the final checkpoint's), and a cProfile of this thread in between when ``profile`` is given."""
    window: dict[str, Any] = {}
    profiler = cProfile.Profile() if profile is not None else None

    def first(_n: int) -> None:
        if "cpu" not in window:
            window["cpu"], window["threads"] = time.process_time(), _thread_cpu()
            if profiler is not None:
                profiler.enable()

    def written(_w: CheckpointWritten) -> None:
        if "caught_up" in marks and "cpu_end" not in window:
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(str(profile))
            window["cpu_end"], window["threads_end"] = time.process_time(), _thread_cpu()

    hooks.batch_received.insert(0, first)
    hooks.checkpoint_written.append(written)
    return window


def run_default(
    service: Any,
    config: Any,
    bootstrap: str,
    group: str,
    store: Any,
    ends: dict[int, int],
    profile: Path | None,
) -> Any:
    from ivmstream.runtime import Worker
    from ivmstream.runtime.clients import KafkaClients

    metrics = RuntimeMetrics(service.name)
    worker = Worker(service, config, KafkaClients(bootstrap), store, group=group, metrics=metrics)
    marks: dict[str, float] = {}
    mark_run(worker, marks)
    window = _window(worker.hooks, marks, profile)
    deadline = time.monotonic() + TIMEOUT

    def until(w: Any) -> bool:
        if caught_up(w.positions(), ends):
            marks["caught_up"] = time.perf_counter()
            return True
        if time.monotonic() > deadline:
            raise TimeoutError(f"did not reach {ends}: {w.positions()}")
        return False

    with worker_gc():
        worker.run(until=until)
    return marks, window, metrics


def run_faust(
    service: Any,
    config: Any,
    bootstrap: str,
    group: str,
    store: Any,
    ends: dict[int, int],
    profile: Path | None,
) -> Any:
    from ivmstream.faust.runtime import execute, faust_worker

    metrics = RuntimeMetrics(service.name, runtime="faust")
    view = faust_worker(service, config, bootstrap, store, group=group, metrics=metrics)
    marks: dict[str, float] = {}
    mark_run(view, marks)
    window = _window(view.hooks, marks, profile)
    deadline = time.monotonic() + TIMEOUT

    def applied(_batch: BatchApplied) -> None:
        if "caught_up" in marks:
            return
        positions = {p: s.next_offset for p, s in view.partitions.items()}
        if caught_up(positions, ends):
            marks["caught_up"] = time.perf_counter()
            view.checkpoint()
            os.kill(os.getpid(), signal.SIGTERM)
        elif time.monotonic() > deadline:
            raise TimeoutError(f"did not reach {ends}: {positions}")

    view.hooks.batch_applied.append(applied)
    with worker_gc():
        execute(view)
    return marks, window, metrics


def counted(metrics: RuntimeMetrics, name: str) -> int:
    return int(sum(s.value for f in metrics.registry.collect() for s in f.samples if s.name == name))


def measure(args: argparse.Namespace) -> dict[str, Any]:
    service = load_service(args.service)
    config = build_config(service, json.loads(args.config))
    ends = {int(p): end for p, end in json.loads(args.ends).items()}
    store = open_store("rocksdb", f"{service.name}.{args.group}", state_dir=args.state_dir)
    run = run_faust if args.runtime == "faust" else run_default
    marks, window, metrics = run(service, config, args.bootstrap, args.group, store, ends, args.profile)
    records = sum(ends.values())
    seconds = marks["checkpointed"] - marks["first_batch"]
    main_thread = threading.get_native_id()
    before, after = window["threads"], window["threads_end"]
    others = sum(cpu - before.get(tid, 0.0) for tid, cpu in after.items() if tid != main_thread)
    return {
        "runtime": args.runtime,
        "records": records,
        "batch_size": config.batch_size,
        "seconds": seconds,
        "records_per_s": records / seconds,
        "start_seconds": marks["first_batch"] - marks["assigned"],
        "final_checkpoint_seconds": marks["checkpointed"] - marks["caught_up"],
        "cpu_seconds": window["cpu_end"] - window["cpu"],
        "main_thread_cpu_seconds": after.get(main_thread, 0.0) - before.get(main_thread, 0.0),
        "other_threads_cpu_seconds": others,
        "consumed": counted(metrics, "ivmstream_events_in_total"),
        "rejected": counted(metrics, "ivmstream_events_rejected_total"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("runtime", "service", "bootstrap", "group", "config", "ends", "state-dir", "result"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--profile", type=Path, help="a cProfile of the measured window to this file")
    args = parser.parse_args()
    Path(args.result).write_text(json.dumps(measure(args)))


if __name__ == "__main__":
    main()
