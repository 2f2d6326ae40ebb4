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


def synthetic_events(n: int, groups: int, updates: int, seed: int) -> list[bytes]:
    """``n`` inserts of Q_having's table, then ``updates`` events: deletes of stored rows and inserts of
    copies under fresh ids, alternating."""
    import random

    import orjson

    from bench.sketches_db import SLOPES

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a = rng.randint(1, groups)
        rows.append({"id": i, "a": a, **{c: s * a + int(rng.gauss(0, 30)) for c, s in SLOPES.items()}})
    out = [orjson.dumps({"relation": "t", "row": r, "delta": 1}) for r in rows]
    for k in range(updates):
        if k % 2 == 0:
            r = rows.pop(rng.randrange(len(rows)))
            out.append(orjson.dumps({"relation": "t", "row": r, "delta": -1}))
        else:
            r = {**rows[rng.randrange(len(rows))], "id": n + k}
            rows.append(r)
            out.append(orjson.dumps({"relation": "t", "row": r, "delta": 1}))
    return out


def exp_worker_compare(n: int, groups: int, updates: int, batch_size: int) -> dict[str, Any]:
    """Q_having's table loaded and updated through one real worker per strategy (imp, full: recapture
    when stale) on the embedded broker, at the worker's batch size ``batch_size``: the seconds from the
    first batch to caught up, for the load and for the updates after it."""
    import shutil
    import uuid

    from bench.lib.broker import produce_checked
    from bench.sketches_db import SYNTH
    from bench.sketches_experiments import by_a, q_having
    from ivmstream.config import build_config
    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.service import load_service
    from ivmstream.state import open_store

    service = load_service("sketches")
    lines = synthetic_events(n, groups, updates, seed=8)
    out: dict[str, Any] = {"rows": n, "groups": groups, "updates": updates, "batch_size": batch_size}
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-sketches-worker-"))
    try:
        with BrokerProcess() as broker:
            topic = f"sketches-w-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, 1)
            end = produce_checked(broker.bootstrap, topic, lines)
            for strategy in ("imp", "full"):
                config = build_config(
                    service,
                    {
                        "query": q_having(3, groups),
                        "relations": SYNTH,
                        "partition": by_a(groups),
                        "strategy": strategy,
                        "input_topic": topic,
                        "output_topic": f"{topic}.{strategy}.out",
                        "dlq_topic": f"{topic}.{strategy}.dlq",
                        "batch_size": batch_size,
                    },
                )
                store = open_store("rocksdb", f"sketches.{topic}.{strategy}", state_dir=tmp / strategy)
                run = _worker_run(service, config, broker.bootstrap, store, f"{topic}-{strategy}", end)
                out[strategy] = {**run, "events_per_second": len(lines) / run["seconds"]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out["events"] = len(lines)
    out["speedup"] = out["full"]["seconds"] / out["imp"]["seconds"]
    return out


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
