"""The triangle benchmark end to end: a ``Worker`` with RocksDB state on the embedded broker, timed from
group assignment to the final checkpoint; the published count, the checkpointed state, an offline
replay and a brute-force count must agree. (The timing wraps Worker methods; see bench/README.md.)
"""

from __future__ import annotations

import argparse
import gc
import shutil
import tempfile
import time
import uuid
from typing import Any

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from bench import triangles_workloads as wl
from bench.lib.broker import check_holds, produce_lz4, watermarks
from bench.lib.progress import progress
from bench.lib.worker_runs import mark_run
from bench.triangles_cases import DEFAULT, E2E_TIMEOUT, KEY, KEY_FIELD
from ivmstream.config import build_config
from ivmstream.dev.broker import BrokerProcess
from ivmstream.events import UpdateEvent, encode_event
from ivmstream.metrics import RuntimeMetrics
from ivmstream.runtime import Worker
from ivmstream.runtime.clients import KafkaClients
from ivmstream.service import load_service
from ivmstream.state import open_store


def last_published(bootstrap: str, topic: str) -> dict[str, Any] | None:
    """The last result record on a 1-partition output topic."""
    end = watermarks(bootstrap, topic)[1]
    if end == 0:
        return None
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-read-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    last = None
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 60
        pos = 0
        while pos < end and time.monotonic() < deadline:
            for msg in c.consume(1000, 0.5):
                if msg.error() is None:
                    last = orjson.loads(msg.value())
                    pos = msg.offset() + 1
    finally:
        c.close()
    return last


def run_e2e(
    name: str,
    triples: list[tuple[int, int, int]],
    meta: dict[str, Any],
    broker: BrokerProcess,
    run_id: str,
    state_dir: str,
    strategy: str,
) -> dict[str, Any]:
    service = load_service("triangles")
    topic = f"tri.bench.{run_id}.{name}.{strategy}"
    out_topic, dlq_topic = f"{topic}.out", f"{topic}.dlq"
    for t in (topic, out_topic, dlq_topic):
        broker.create_topic(t, 1)
    events = [UpdateEvent("edges", {"src": u, "dst": v}, m, KEY) for u, v, m in triples]
    values = [encode_event(ev, KEY_FIELD) for ev in events]
    t0 = time.perf_counter()
    produce_lz4(broker.bootstrap, topic, values, KEY.encode())
    produce_s = time.perf_counter() - t0
    end = check_holds(broker.bootstrap, topic, len(values))
    progress(f"  produced {end} events to {topic} in {produce_s:.2f}s (lz4, {sum(map(len, values)):,} bytes)")

    raw_config = {
        "mode": "graph",
        "strategy": strategy,
        **({"epsilon": "1/2"} if strategy == "ivm-eps" else {}),
        "key_field": KEY_FIELD,
        "input_topic": topic,
        "output_topic": out_topic,
        "dlq_topic": dlq_topic,
    }  # batch_size and checkpoint_interval: the runtime defaults
    config = build_config(service, raw_config)
    namespace = f"tri.{run_id}.{name}.{strategy}"
    store = open_store("rocksdb", namespace, state_dir=state_dir)
    metrics = RuntimeMetrics(service.name)
    group = f"bench-{run_id}-{name}-{strategy}"
    worker = Worker(service, config, KafkaClients(broker.bootstrap), store, group=group, metrics=metrics)
    marks: dict[str, float] = {}  # assigned, caught_up, checkpointed (the final one)
    mark_run(worker, marks)
    in_memory: dict[str, Any] = {}
    deadline = time.monotonic() + E2E_TIMEOUT
    timed_out = False

    def caught_up(w: Worker) -> bool:
        nonlocal timed_out
        if w.positions().get(0) == end:
            in_memory.update(w.results())
            marks["caught_up"] = time.perf_counter()
            return True
        if time.monotonic() > deadline:
            timed_out = True
            return True
        return False

    worker.run(until=caught_up)
    if timed_out:
        raise TimeoutError(f"e2e {name}: worker did not reach offset {end} in {E2E_TIMEOUT:g}s")
    seconds = marks["checkpointed"] - marks["assigned"]

    def sample(metric: str) -> float:
        v = metrics.registry.get_sample_value(metric, {"service": metrics.service})
        return float(v) if v is not None else 0.0

    applied = int(sample("ivmstream_events_applied_total"))
    cp_n, cp_s = sample("ivmstream_checkpoint_seconds_count"), sample("ivmstream_checkpoint_seconds_sum")

    # Verification: published record, checkpointed state, offline replay, brute force.
    published = last_published(broker.bootstrap, out_topic)
    check_store = open_store("rocksdb", namespace, state_dir=state_dir)
    try:
        cp = check_store.load(topic, 0)
    finally:
        check_store.close()
    restored = service.engine(config.options)
    if KEY in cp.entries:  # incremental checkpoints (the default state layout)
        restored.restore_entries(cp.entries[KEY])
    else:
        restored.restore(cp.snapshots[KEY])
    offline = service.engine(config.options)
    t0 = time.perf_counter()
    rejected = []
    for i in range(0, len(events), config.batch_size):  # the worker's batches, result read after each
        rejected += offline.apply(events[i : i + config.batch_size])
        offline.result()
    offline_s = time.perf_counter() - t0
    oracle = wl.graph_brute_force(wl.final_edges(triples))
    counts = {
        "published": published["result"]["count"] if published else None,
        "checkpointed": restored.result()["count"],
        "in_memory_at_end": in_memory.get(KEY, {}).get("count"),
        "offline_replay": offline.result()["count"],
        "brute_force": oracle,
    }
    ok = (
        len(set(counts.values())) == 1
        and not rejected
        and applied == len(events)
        and cp.offset == end
        and published is not None
        and published["offsets"].get(f"{topic}:0") == end
    )
    stats = offline.result()["stats"]
    case = {
        "id": f"e2e|{name}|{strategy}",
        "workload": name,
        "workload_meta": meta,
        "mode": "graph",
        "strategy": strategy,
        "label": strategy,
        "epsilon": "1/2" if strategy == "ivm-eps" else None,
        "plan": offline.result()["stats"].get("plan"),
        "partitions": 1,
        "keys": 1,
        "input_value_bytes": sum(map(len, values)),
        "input_compression": "lz4",
        "input_log_start_offset": 0,  # check_holds: nothing was dropped
        "state": "rocksdb",
        "batch_size": config.batch_size,
        "checkpoint_interval_s": config.checkpoint_interval,
        "events": len(events),
        "directed_tuple_updates": stats["tuple_updates"],
        "seconds": round(seconds, 4),
        "updates_per_s": round(len(events) / seconds, 1),
        "produce_seconds": round(produce_s, 3),
        "checkpoints": int(sample("ivmstream_checkpoints_total")),
        "checkpoint_mean_ms": round(1000 * cp_s / cp_n, 3) if cp_n else None,
        "checkpoint_bytes_total": int(sample("ivmstream_checkpoint_bytes_sum")),
        "process_seconds": round(sample("ivmstream_batch_seconds_sum"), 4),
        "engine_only_updates_per_s": round(len(events) / offline_s, 1),
        "engine_work_per_event": round(stats["work_total"] / len(events), 3),
        "engine_final_stats": {
            k: stats[k]
            for k in (
                "size",
                "N",
                "major_rebalances",
                "minor_rebalances",
                "view_entries",
                "heavy_values_edges",
            )
            if k in stats
        },
        "applied": applied,
        "rejected_offline": len(rejected),
        "counts": counts,
        "triangles": counts["offline_replay"] // 6,
        "count_ok": ok,
        "goal_updates_per_s": 3000,
    }
    case["goal_met"] = case["updates_per_s"] >= 3000
    progress(
        f"  e2e {name} {strategy}: {case['updates_per_s']:,.0f} events/s end to end ({len(events)} events in "
        f"{seconds:.2f}s; engine alone {case['engine_only_updates_per_s']:,.0f}/s), "
        f"counts {'agree' if ok else 'DISAGREE: ' + str(counts)}"
    )
    return case


def e2e_suite(args: argparse.Namespace, run_id: str) -> dict[str, dict[str, Any]]:
    half = args.e2e_events // 2
    n_edges = args.e2e_events // 3  # built by inserts from empty, then the rest toggles edge (a*, b*)
    toggles = args.e2e_events - n_edges
    toggles -= 1 - toggles % 2  # odd: the stream ends with (a*, b*) present, so the count is not 0
    mix, mix_meta = wl.graph_mix_events(n_edges=n_edges, toggles=toggles)
    churn, churn_meta = wl.graph_churn_events(warm=half, churn=args.e2e_events - half, seed=args.seed)
    broker = BrokerProcess()
    state_dir = tempfile.mkdtemp(prefix="ivmstream-tri-bench-")
    cases: dict[str, dict[str, Any]] = {}
    try:
        broker.start()
        progress(f"end to end: embedded broker at {broker.bootstrap}")
        for name, triples, meta in (("graph-mix", mix, mix_meta), ("graph-churn", churn, churn_meta)):
            for strategy in (DEFAULT, "ivm-eps"):
                case = run_e2e(name, triples, meta, broker, run_id, state_dir, strategy)
                cases[case["id"]] = case
                gc.collect()  # the worker's clients sit in reference cycles: free them before the broker goes
    finally:
        gc.collect()
        broker.stop()
        shutil.rmtree(state_dir, ignore_errors=True)
    return cases
