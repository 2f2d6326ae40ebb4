"""The sketches benchmark's worker point: the sketches service through a real ``Worker`` on the embedded
broker.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.lib.worker_runs import run_until_caught_up


def exp_worker() -> dict[str, Any]:
    """The demo workload produced to the embedded broker and consumed by one real worker until caught up."""
    import shutil
    import uuid

    from bench.lib.broker import produce_checked
    from ivmstream.config import build_config
    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.service import load_service
    from ivmstream.services.sketches.service import DATA, DEMO_CONFIG
    from ivmstream.state import open_store

    service = load_service("sketches")
    lines = (DATA / "tpch_demo.jsonl").read_bytes().splitlines()
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-sketches-bench-"))
    try:
        with BrokerProcess() as broker:
            topic = f"sketches-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, 1)
            config = build_config(
                service,
                {
                    **DEMO_CONFIG,
                    "input_topic": topic,
                    "output_topic": f"{topic}.out",
                    "dlq_topic": f"{topic}.dlq",
                },
            )
            end = produce_checked(broker.bootstrap, topic, lines)
            store = open_store("rocksdb", f"sketches.{topic}", state_dir=tmp)
            run = _worker_run(service, config, broker.bootstrap, store, f"{topic}-g", end)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "events": len(lines),
        "seconds": run["seconds"],
        "events_per_second": len(lines) / run["seconds"],
        "checkpoints": run["checkpoints"],
    }


def _worker_run(
    service: Any, config: Any, bootstrap: str, store: Any, group: str, end: int
) -> dict[str, Any]:
    """One worker from the start of the topic until caught up (its final checkpoint included)."""
    from ivmstream.metrics import RuntimeMetrics
    from ivmstream.runtime import Worker

    metrics = RuntimeMetrics(service.name)
    worker = Worker(service, config, bootstrap, store, group=group, metrics=metrics)
    seconds, _ = run_until_caught_up(worker, {0: end}, timeout=600)
    checkpoints = 0.0
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "ivmstream_checkpoint_seconds_count":
                checkpoints = sample.value
    return {"seconds": seconds, "checkpoints": checkpoints}
