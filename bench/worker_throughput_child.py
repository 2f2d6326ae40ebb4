"""One measurement of the worker throughput benchmark, in its own process: one service's records through
a real ``Worker`` over the in-process ``InMemoryCluster`` (RocksDB checkpoints, the worker's GC policy),
from the first batch to the final checkpoint. Prints one JSON object.

It imports nothing but ``ivmstream``'s public runtime (``Worker``, ``InMemoryCluster``, ``build_config``,
``load_service``, ``open_store``, ``worker_gc``), so the same script measures whichever ``ivmstream``
is first on the path: the parent sets ``PYTHONPATH`` to compare two checkouts.

    python bench/worker_throughput_child.py INPUT.pickle
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import sys
import tempfile
import time
from typing import Any

import orjson


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    import ivmstream
    from ivmstream.config import build_config
    from ivmstream.runtime import Worker
    from ivmstream.runtime.gc_policy import worker_gc
    from ivmstream.runtime.harness import InMemoryCluster, run_to_end
    from ivmstream.service import load_service
    from ivmstream.state import open_store

    topic = "in"
    cluster = InMemoryCluster()
    cluster.create_topic(topic, 1)
    for key, value in zip(spec["keys"], spec["values"], strict=True):
        cluster.produce(topic, value, key=key, partition=0)
    service = load_service(spec["service"])
    config = build_config(
        service, {**spec["config"], "input_topic": topic, "output_topic": "out", "dlq_topic": "dlq"}
    )
    state_dir = tempfile.mkdtemp(prefix="ivmstream-worker-throughput-")
    try:
        store = open_store("rocksdb", f"wt.{spec['service']}", state_dir=state_dir)
        worker = Worker(service, config, cluster, store, group="wt")
        first: dict[str, float] = {}
        batches: list[int] = []

        def received(records: Any) -> None:
            if not first:
                first["wall"], first["cpu"] = time.perf_counter(), time.process_time()
            batches.append(len(records) if hasattr(records, "__len__") else int(records))

        worker.hooks.batch_received.append(received)
        with worker_gc():
            run_to_end(worker)
            wall, cpu = time.perf_counter() - first["wall"], time.process_time() - first["cpu"]
        published = cluster.values("out") if "out" in cluster.logs else []
        latest = {m.key(): m.value() for m in cluster.messages("out")} if published else {}
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    results = {k or b"": orjson.loads(v)["result"] for k, v in latest.items() if v is not None}
    digest = hashlib.sha1(
        orjson.dumps({k.decode(): r for k, r in results.items()}, option=orjson.OPT_SORT_KEYS)
    ).hexdigest()
    events = len(spec["values"])
    return {
        "ivmstream": os.path.dirname(ivmstream.__file__),
        "events": events,
        "batch_size": config.batch_size,
        "checkpoint_interval_s": config.checkpoint_interval,
        "batches": len(batches),
        "seconds": wall,
        "cpu_seconds": cpu,
        "events_per_second": events / wall,
        "events_per_cpu_second": events / cpu if cpu > 0 else None,
        "dead_letters": len(cluster.values("dlq")) if "dlq" in cluster.logs else 0,
        "published": len(published),
        "results_sha1": digest,  # of each key's last published result
    }


def measure_passes(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec["passes"]`` runs (a fresh cluster, worker and store each) of a workload too short to time
    once: the events and seconds summed over them."""
    runs = [measure(spec) for _ in range(spec.get("passes", 1))]
    out = dict(runs[-1])
    for field in ("events", "batches", "seconds", "cpu_seconds", "dead_letters", "published"):
        out[field] = sum(r[field] for r in runs)
    out["passes"] = len(runs)
    out["events_per_second"] = out["events"] / out["seconds"]
    out["events_per_cpu_second"] = out["events"] / out["cpu_seconds"] if out["cpu_seconds"] > 0 else None
    if len({r["results_sha1"] for r in runs}) > 1:
        out["results_sha1"] = "differs between passes"
    return out


def main(argv: list[str]) -> int:
    with open(argv[1], "rb") as fh:
        spec = pickle.load(fh)
    print(orjson.dumps(measure_passes(spec)).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
