"""A reservoir query through the real ``Worker`` on the embedded broker at the service's batch size and
checkpoint interval, beside the engine alone on the same batches; the worker must publish the engine's
own sample (the benchmark aborts otherwise)."""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ivmstream.events import UpdateEvent


def worker_point(
    broker: Any, name: str, raw: dict[str, Any], events: Sequence[UpdateEvent]
) -> dict[str, Any]:
    from bench.fivm_service import _worker_run
    from bench.lib.broker import produce_checked
    from ivmstream.config import build_config
    from ivmstream.events import encode_event
    from ivmstream.service import load_service
    from ivmstream.services.reservoir.engine import ReservoirEngine
    from ivmstream.state import open_store

    service = load_service("reservoir")
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-reservoir-bench-"))
    topic = f"reservoir-{uuid.uuid4().hex[:8]}"
    try:
        broker.create_topic(topic, 1)
        config = build_config(
            service,
            {**raw, "input_topic": topic, "output_topic": f"{topic}.out", "dlq_topic": f"{topic}.dlq"},
        )
        end = produce_checked(broker.bootstrap, topic, [encode_event(ev) for ev in events])
        run = _worker_run(
            service,
            config,
            broker.bootstrap,
            open_store("rocksdb", f"res.{topic}", state_dir=tmp),
            f"{topic}-g",
            end,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    engine = ReservoirEngine(config.options)
    batch = config.batch_size
    t0 = time.perf_counter()
    for i in range(0, len(events), batch):
        engine.apply(events[i : i + batch])
    engine_s = time.perf_counter() - t0
    published = run.pop("result")
    if published["sample"] != engine.result()["sample"]:
        raise AssertionError(f"{name}: the worker's sample differs from the engine's on the same events")
    return {
        "query": name,
        "events": len(events),
        "deletes": sum(1 for ev in events if ev.delta == -1),
        "k": raw["k"],
        "batch_size": batch,
        "checkpoint_interval_s": config.checkpoint_interval,
        "worker_seconds": run["seconds"],
        "worker_events_per_second": len(events) / run["seconds"],
        "engine_seconds": engine_s,
        "engine_events_per_second": len(events) / engine_s,
        "worker_share_of_engine": engine_s / run["seconds"],
        "checkpoints": run["checkpoints"],
        "same_sample_as_engine": True,
    }
