"""The F-IVM benchmark's service point: the fivm service through a real ``Worker`` on the embedded broker,
against the engine alone on the same events in the same batches.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.fivm_data import housing, housing_config
from bench.fivm_runs import REL_TOL, events, rel_diff
from bench.lib.worker_runs import run_until_caught_up
from ivmstream.services.fivm.engine import FivmEngine


def service_point(scale: int, postcodes: int, features: Sequence[str], repeats: int = 2) -> dict[str, Any]:
    """The fivm service through the real ``Worker`` on the embedded broker (batch size and checkpoint
    interval at their defaults) against ``FivmEngine`` alone on the same events in the same batches;
    the best of ``repeats`` worker runs (one topic, fresh groups and stores) and of ``repeats + 1``
    engine runs, since a shared machine's noise is of the order of the difference measured."""
    from bench.lib.broker import produce_checked
    from ivmstream.config import build_config
    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.events import encode_event
    from ivmstream.service import load_service
    from ivmstream.state import open_store

    query = housing_config("covariance", features)
    flat = [ev for batch in events(housing(scale, postcodes, seed=scale)) for ev in batch]
    service = load_service("fivm")
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-fivm-bench-"))
    try:
        with BrokerProcess() as broker:
            topic = f"fivm-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, 1)
            config = build_config(
                service,
                {**query, "input_topic": topic, "output_topic": f"{topic}.out", "dlq_topic": f"{topic}.dlq"},
            )
            batch = config.batch_size
            end = produce_checked(broker.bootstrap, topic, [encode_event(ev) for ev in flat])
            worker_runs = [
                _worker_run(
                    service,
                    config,
                    broker.bootstrap,
                    open_store("rocksdb", f"fivm.{topic}.{i}", state_dir=tmp),
                    f"{topic}-g{i}",
                    end,
                )
                for i in range(repeats)
            ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    engine_times = []
    for _ in range(repeats + 1):
        engine = FivmEngine(query)
        t0 = time.perf_counter()
        for i in range(0, len(flat), batch):
            rejected = engine.apply(flat[i : i + batch])
            assert not rejected, rejected[:3]
        engine_times.append(time.perf_counter() - t0)
    want = engine.result()["value"]
    diff = 0.0
    for run in worker_runs:
        result = run.pop("result")
        diff = max(diff, rel_diff({k: result[k] for k in want}, want))
    if diff > REL_TOL:
        raise AssertionError(f"the worker's result differs from the engine's: {diff}")
    worker_s = min(r["seconds"] for r in worker_runs)
    engine_s = min(engine_times)
    return {
        "query": f"covariance over {len(features)} features, Housing s={scale}, {postcodes:,} postcodes",
        "events": len(flat),
        "batch_size": batch,
        "checkpoint_interval_s": config.checkpoint_interval,
        "repeats": {"worker": repeats, "engine": repeats + 1},
        "worker_runs": worker_runs,
        "engine_seconds_all": engine_times,
        "worker_seconds": worker_s,  # the best run
        "worker_events_per_second": len(flat) / worker_s,
        "engine_seconds": engine_s,  # the best run
        "engine_events_per_second": len(flat) / engine_s,
        "worker_share_of_engine": engine_s / worker_s,
        "max_rel_diff_worker_vs_engine": diff,
    }


def _worker_run(
    service: Any, config: Any, bootstrap: str, store: Any, group: str, end: int
) -> dict[str, Any]:
    """One worker from the start of the topic to caught up (final checkpoint included): seconds from its
    first batch, its checkpoints, its in-memory result at the end."""
    from ivmstream.metrics import RuntimeMetrics
    from ivmstream.runtime import Worker

    # Where the worker's time goes: the engine's own calls, timed inside the worker (the checkpoint's
    # total comes from the runtime's metric; encoding the changed state is fivm's share of it). The
    # worker builds its engines through the declaration, so a declaration whose factory wraps them times
    # them without touching the Worker or the engine class.
    spent = {"apply": 0.0, "encode": 0.0, "result": 0.0}
    timed_service = dataclasses.replace(
        service, engine=lambda options: _TimedEngine(service.engine(options), spent)
    )
    metrics = RuntimeMetrics(service.name)
    worker = Worker(timed_service, config, bootstrap, store, group=group, metrics=metrics)
    seconds, results = run_until_caught_up(worker, {0: end}, timeout=900)
    checkpoints = {"count": 0.0, "sum": 0.0}
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "ivmstream_checkpoint_seconds_count":
                checkpoints["count"] = sample.value
            elif sample.name == "ivmstream_checkpoint_seconds_sum":
                checkpoints["sum"] = sample.value
    (result,) = results.values()
    return {
        "seconds": seconds,
        "checkpoints": checkpoints["count"],
        "checkpoint_seconds": checkpoints["sum"],
        "engine_apply_seconds": spent["apply"],
        "engine_encode_seconds": spent["encode"],  # changed_entries, inside the checkpoints
        "engine_result_seconds": spent["result"],
        # the runtime's own share: polling, decoding, publishing, the store's write and closing
        "runtime_seconds": seconds - spent["apply"] - spent["result"] - checkpoints["sum"],
        "result": result,
    }


_ENGINE_CALLS = {"apply": "apply", "encode": "changed_entries", "result": "result"}
_TIMED = {method: name for name, method in _ENGINE_CALLS.items()}


class _TimedEngine:
    """An engine whose calls named in ``_ENGINE_CALLS`` add their seconds to ``spent``; every other
    attribute is the engine's own, so the worker sees the same protocols (incremental, store-backed)."""

    def __init__(self, inner: Any, spent: dict[str, float]) -> None:
        self._inner = inner
        self._spent = spent

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        name = _TIMED.get(attr)
        if name is None or not callable(value):
            return value
        spent = self._spent

        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t0

        return call
