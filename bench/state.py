"""Checkpoint cost against state size: whole snapshots vs incremental entries, in one run.

One partition key holds a triangles graph (IVM^ε, ε = 1/2) that grows from 10K to 1M edges. At each
size the script:

1. **checkpoint cost** (engine + RocksDB store, no broker): applies one checkpoint interval's worth of
   edge churn (``--churn`` updates: deletes of present edges and inserts of new ones, so the size
   stays put), then times one checkpoint of each layout over the same changes: ``snapshot()`` plus a
   RocksDB commit of the blob, and ``changed_entries()`` plus a RocksDB commit of the entries. Bytes
   and entries written are recorded. Repeated ``--repeats`` times; medians reported.
2. **worker throughput** (the real ``Worker`` on the embedded broker, batch size and checkpoint
   interval at their defaults): the state is written straight into the worker's RocksDB store (the
   broker's ~5 MiB per-partition retention cannot hold the history), ``--stream`` churn updates are
   produced, and the worker restores and consumes them; events/s is measured from its first batch to
   caught up, the final checkpoint included. Restore time is reported separately. Both layouts run.

Writes ``bench/results/state.json`` and ``state.png``. Run: ``.venv/bin/python bench/state.py``
(``--quick`` for a smoke run, writing ``state_quick.*``). ``--markdown FILE.json`` prints the section
of docs/benchmarks.md from a report.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from bench.lib.broker import produce_all  # noqa: E402
from bench.lib.machine import machine_info  # noqa: E402
from bench.lib.plots import plt  # noqa: E402
from bench.lib.worker_runs import mark_run  # noqa: E402
from ivmstream.config import RUNTIME_OPTIONS, build_config  # noqa: E402
from ivmstream.dev.broker import BrokerProcess  # noqa: E402
from ivmstream.events import UpdateEvent  # noqa: E402
from ivmstream.metrics import RuntimeMetrics  # noqa: E402
from ivmstream.runtime import Worker  # noqa: E402
from ivmstream.runtime.clients import KafkaClients  # noqa: E402
from ivmstream.runtime.gc_policy import worker_gc  # noqa: E402
from ivmstream.runtime.kafka import producer_settings  # noqa: E402
from ivmstream.service import load_service  # noqa: E402
from ivmstream.services.triangles.engine import create_engine  # noqa: E402
from ivmstream.state import StateChanges, envelope_for, open_store  # noqa: E402

RESULTS = REPO / "bench" / "results"
KEY = ""  # the service runs without key_field: one key, one ordered partition
OPTIONS = {"mode": "graph", "strategy": "ivm-eps", "epsilon": "1/2", "id_type": "int"}
BATCH = RUNTIME_OPTIONS["batch_size"].default  # the batches the worker applies


class Graph:
    """A random graph with average degree ~16 and an edge churn that keeps its size."""

    def __init__(self, edges: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.vertices = max(64, edges // 8)
        self.present: set[tuple[int, int]] = set()
        self.order: list[tuple[int, int]] = []
        while len(self.present) < edges:
            self._insert()

    def _insert(self) -> tuple[int, int]:
        rng, n = self.rng, self.vertices
        while True:
            u, v = rng.randrange(n), rng.randrange(n)
            e = (min(u, v), max(u, v))
            if u != v and e not in self.present:
                self.present.add(e)
                self.order.append(e)
                return e

    def churn(self, count: int) -> list[tuple[int, int, int]]:
        """``count`` updates alternating a delete of a random present edge and an insert of a new one."""
        out = []
        for i in range(count):
            if i % 2 == 0:
                j = self.rng.randrange(len(self.order))
                self.order[j], self.order[-1] = self.order[-1], self.order[j]
                e = self.order.pop()
                self.present.discard(e)
                out.append((e[0], e[1], -1))
            else:
                u, v = self._insert()
                out.append((u, v, 1))
        return out


def events_of(updates: list[tuple[int, int, int]]) -> list[UpdateEvent]:
    return [UpdateEvent("edges", {"src": u, "dst": v}, d) for u, v, d in updates]


def checkpoint_costs(engine: Any, graph: Graph, churn: int, repeats: int, tmp: Path) -> dict[str, Any]:
    store = open_store("rocksdb", f"cost-{uuid.uuid4().hex[:8]}", state_dir=tmp)
    envelope = b"{}"
    store.commit("t", 0, 0, StateChanges(entries={KEY: list(engine.all_entries())}), envelope)
    full_s, inc_s, full_b, inc_b, inc_n, inc_engine = [], [], [], [], [], []
    for r in range(repeats):
        errors = engine.apply(events_of(graph.churn(churn)))
        assert not errors, errors[:3]
        t0 = time.perf_counter()
        snap = engine.snapshot()
        stats = store.commit("s", 0, r + 1, StateChanges(snapshots={KEY: snap}), envelope)
        full_s.append(time.perf_counter() - t0)
        full_b.append(stats.bytes)
        t0 = time.perf_counter()
        changes = engine.changed_entries()
        t1 = time.perf_counter()
        stats = store.commit("t", 0, r + 1, StateChanges(entries={KEY: changes}), envelope)
        inc_s.append(time.perf_counter() - t0)
        inc_engine.append(t1 - t0)
        inc_b.append(stats.bytes)
        inc_n.append(stats.entries)
    stored = store.size_bytes("t", 0)
    store.close()
    return {
        "snapshot_seconds": statistics.median(full_s),
        "snapshot_bytes": statistics.median(full_b),
        "incremental_seconds": statistics.median(inc_s),
        "incremental_engine_seconds": statistics.median(inc_engine),  # changed_entries() alone
        "incremental_bytes": statistics.median(inc_b),
        "incremental_entries": statistics.median(inc_n),
        "stored_bytes_estimate": stored,
        "snapshot_seconds_all": full_s,
        "incremental_seconds_all": inc_s,
    }


def engine_run(engine: Any, graph: Graph, stream: int, batch: int) -> dict[str, Any]:
    """The engine alone on the same kind of stream, in the worker's batches: no broker, no decoding,
    no checkpoints. The worker's throughput over this is the share the runtime leaves to the engine."""
    events = events_of(graph.churn(stream))
    work0 = engine.stats()["work_total"]
    t0 = time.perf_counter()
    for i in range(0, len(events), batch):
        errors = engine.apply(events[i : i + batch])
        assert not errors, errors[:3]
    seconds = time.perf_counter() - t0
    work = engine.stats()["work_total"] - work0
    engine.changed_entries()  # not part of this measurement
    return {
        "events": stream,
        "batch": batch,
        "seconds": seconds,
        "events_per_second": stream / seconds,
        "work_per_update": work / stream,  # the engine's machine-independent work counter
    }


def worker_run(
    engine: Any, graph: Graph, stream: int, layout: str, broker: BrokerProcess, tmp: Path
) -> dict[str, Any]:
    """Prepare the worker's store with the current state, produce ``stream`` updates, run the worker."""
    service = load_service("triangles")
    topic = f"state-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 1)
    group = f"{topic}-g"
    config = build_config(
        service,
        {
            **OPTIONS,
            "input_topic": topic,
            "output_topic": f"{topic}.out",
            "dlq_topic": f"{topic}.dlq",
            "state_layout": layout,
        },
    )
    store = open_store("rocksdb", f"triangles.{group}", state_dir=tmp)
    changes = (
        StateChanges(entries={KEY: list(engine.all_entries())})
        if layout == "incremental"
        else StateChanges(snapshots={KEY: engine.snapshot()})
    )
    engine.changed_entries()  # the store now holds everything: the engine's change log starts empty
    envelope = envelope_for(service, config.options, layout).to_bytes()
    store.commit(topic, 0, 0, changes, envelope)
    updates = graph.churn(stream)
    engine.apply(events_of(updates))  # keep the driver's engine in step with the stream
    engine.changed_entries()
    records = (
        (None, orjson.dumps({"relation": "edges", "row": {"src": u, "dst": v}, "delta": d}), 0)
        for u, v, d in updates
    )
    produce_all(Producer(producer_settings(broker.bootstrap, {})), topic, records)
    end = _end_offset(broker.bootstrap, topic)
    if end != stream:
        raise RuntimeError(f"topic {topic} holds {end} records, expected {stream} (broker retention?)")

    metrics = RuntimeMetrics(service.name)
    worker = Worker(service, config, KafkaClients(broker.bootstrap), store, group=group, metrics=metrics)
    marks: dict[str, float] = {}  # assigned, restored, first_batch
    mark_run(worker, marks)
    deadline = time.monotonic() + 1800

    def caught_up(w: Worker) -> bool:
        if w.positions().get(0) == end:
            return True
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker did not catch up: {w.positions()}")
        return False

    with worker_gc():  # the GC policy `ivmstream run` uses by default
        worker.run(until=caught_up)  # run() writes the final checkpoint before returning
    done = time.perf_counter()
    checkpoints = _histogram(metrics, "ivmstream_checkpoint_seconds")
    check = open_store("rocksdb", f"triangles.{group}", state_dir=tmp)
    cp = check.load(topic, 0)
    check.close()
    return {
        "layout": layout,
        "events": stream,
        "restore_seconds": marks["restored"] - marks["assigned"],
        "process_seconds": done - marks["first_batch"],
        "events_per_second": stream / (done - marks["first_batch"]),
        "checkpoints": checkpoints["count"],
        "checkpoint_seconds_total": checkpoints["sum"],
        "stored_offset": cp.offset,
    }


def _histogram(metrics: RuntimeMetrics, name: str) -> dict[str, float]:
    out = {"count": 0.0, "sum": 0.0}
    for family in metrics.registry.collect():
        for s in family.samples:
            if s.name == f"{name}_count":
                out["count"] = s.value
            elif s.name == f"{name}_sum":
                out["sum"] = s.value
    return out


def _end_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def plot(results: dict[str, Any], path: Path) -> None:
    rows = results["sizes"]
    edges = [r["edges"] for r in rows]
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(15, 4.5))
    a.loglog(edges, [r["cost"]["snapshot_seconds"] for r in rows], "o-", label="whole snapshot")
    a.loglog(edges, [r["cost"]["incremental_seconds"] for r in rows], "s-", label="incremental entries")
    a.set(
        xlabel="edges in the key's state",
        ylabel="seconds per checkpoint",
        title=f"checkpoint time ({results['churn']} updates since the last)",
    )
    b.loglog(edges, [r["cost"]["snapshot_bytes"] for r in rows], "o-", label="whole snapshot")
    b.loglog(edges, [r["cost"]["incremental_bytes"] for r in rows], "s-", label="incremental entries")
    b.set(xlabel="edges in the key's state", ylabel="bytes per checkpoint", title="bytes written")
    alone = [(r["edges"], r["engine"]["events_per_second"]) for r in rows if "engine" in r]
    if alone:
        c.semilogx(*zip(*alone, strict=True), "^--", label="engine alone (no runtime)")
    for layout, marker in (("snapshot", "o-"), ("incremental", "s-")):
        pts = [(r["edges"], r["worker"][layout]["events_per_second"]) for r in rows if layout in r["worker"]]
        if pts:
            c.semilogx(*zip(*pts, strict=True), marker, label=f"worker, {layout}")
    c.set(xlabel="edges in the key's state", ylabel="events/s through the worker", title="worker throughput")
    for ax in (a, b, c):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(results: dict[str, Any]) -> str:
    """The docs/benchmarks.md section, from a report."""
    m = results["machine"]
    noisy = ": the machine was shared, so worker rates are noisy" if m["loadavg_1_5_15"][0] > 1 else ""
    opts = results["options"]
    lines = [
        "## Checkpoint cost against state size (`bench/state.py`)",
        "",
        f"Command: `.venv/bin/python bench/state.py` (one key, triangles {opts['mode']} mode, "
        f"{opts['strategy']} with ε = {opts['epsilon']}, {results['churn']:,} edge-churn updates between two "
        f"timed checkpoints, {results['repeats']} repeats; {results['stream']:,} updates through the real "
        "`Worker` per layout, default batch size and checkpoint interval, and the same number through the "
        "engine alone). Results: `bench/results/state.json`, `bench/results/state.png`. Recorded run "
        f"`{results['run_id']}` ({m['cpu_count']} CPUs, Python {m['python']}, load average "
        f"{m['loadavg_1_5_15'][0]} at the end{noisy}).",
        "",
        "Checkpoint: one checkpoint of the same changes in each layout, engine plus a RocksDB commit "
        "(median); total time per checkpoint, not per update.",
        "",
        "| edges | whole snapshot | incremental | of which `changed_entries()` | snapshot bytes "
        "| incremental bytes | incremental entries |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["sizes"]:
        c = r["cost"]
        lines.append(
            f"| {r['edges']:,} | {c['snapshot_seconds'] * 1e3:,.1f} ms "
            f"| {c['incremental_seconds'] * 1e3:,.1f} ms "
            f"| {c['incremental_engine_seconds'] * 1e3:,.1f} ms | {c['snapshot_bytes']:,.0f} "
            f"| {c['incremental_bytes']:,.0f} | {c['incremental_entries']:,.0f} |"
        )
    lines += [
        "",
        "Throughput (events/s): the engine alone on the same kind of stream in the worker's batches, and the "
        "worker from its first batch to caught up (final checkpoint included) with the time its "
        "checkpoints took.",
        "",
        "| edges | engine alone | worker, incremental | its checkpoints | worker, snapshot | its checkpoints "
        "| restore (incremental / snapshot) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["sizes"]:
        w = r["worker"]
        inc, full = w.get("incremental"), w.get("snapshot")
        cells = [f"{r['edges']:,}", f"{r['engine']['events_per_second']:,.0f}"]
        for x in (inc, full):
            if x is None:
                cells += ["-", "-"]
            else:
                cells += [
                    f"{x['events_per_second']:,.0f} ({x['share_of_engine_alone']:.2f} of the engine)",
                    f"{x['checkpoint_seconds_total']:.2f} s of {x['process_seconds']:.2f} s",
                ]
        restore = " / ".join(f"{x['restore_seconds']:.1f} s" if x else "-" for x in (inc, full))
        lines.append("| " + " | ".join([*cells, restore]) + " |")
    s = results["summary"]
    first, last = results["sizes"][0]["edges"], results["sizes"][-1]["edges"]
    lines += [
        "",
        f"From {first:,} to {last:,} edges the incremental checkpoint grows "
        f"{s['incremental_checkpoint_growth']:.2f}x and the whole snapshot "
        f"{s['snapshot_checkpoint_growth']:,.0f}x. "
        f"The engine alone runs at {s['engine_alone_throughput_ratio_largest_vs_smallest']:.2f} of its "
        "smallest-state rate at the largest state although its work counter per update goes from "
        f"{results['sizes'][0]['engine']['work_per_update']:.1f} to "
        f"{results['sizes'][-1]['engine']['work_per_update']:.1f}: the extra time is in the lookups of "
        "larger dictionaries, not in more work. The worker with incremental checkpoints runs at "
        f"{s['worker_incremental_throughput_ratio_largest_vs_smallest']:.2f}, keeping "
        f"{s['worker_incremental_share_of_engine_alone_largest']:.2f} of the engine's rate at the largest "
        f"size ({s['worker_incremental_share_of_engine_alone_smallest']:.2f} at the smallest).",
    ]
    if "worker_snapshot_share_of_engine_alone_largest" in s:
        lines[-1] += (
            " With whole snapshots the worker keeps "
            f"{s['worker_snapshot_share_of_engine_alone_largest']:.2f} of the engine's rate at the largest "
            "size."
        )
    lines += [
        "",
        "The section above is printed by `.venv/bin/python bench/state.py --markdown "
        "bench/results/state.json`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10000,30000,100000,300000,1000000")
    p.add_argument("--churn", type=int, default=2000, help="updates between two timed checkpoints")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--stream", type=int, default=60000, help="updates the worker consumes per run")
    p.add_argument("--worker-layouts", default="incremental,snapshot")
    p.add_argument("--out", default=str(RESULTS / "state.json"))
    p.add_argument("--markdown", metavar="FILE.json", help="print the docs section of a stored report")
    p.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, one repeat")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats, args.stream, args.churn = "2000,6000", 1, 3000, 500
        if args.out == str(RESULTS / "state.json"):
            args.out = str(RESULTS / "state_quick.json")
    if args.markdown:
        print(markdown(orjson.loads(Path(args.markdown).read_bytes())), end="")
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    layouts = [s for s in args.worker_layouts.split(",") if s]
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-state-bench-"))
    rows: list[dict[str, Any]] = []
    started = time.time()
    try:
        with BrokerProcess() as broker:
            for n in sizes:
                t0 = time.perf_counter()
                graph = Graph(n, seed=n)
                engine = create_engine("graph", "ivm-eps", "1/2", False)
                engine.load(list(graph.present))
                engine.changed_entries()
                build = time.perf_counter() - t0
                print(f"[{n:,} edges] built in {build:.1f}s", file=sys.stderr, flush=True)
                cost = checkpoint_costs(engine, graph, args.churn, args.repeats, tmp)
                print(
                    f"[{n:,} edges] checkpoint: snapshot {cost['snapshot_seconds'] * 1e3:.1f} ms "
                    f"{cost['snapshot_bytes']:,} B; incremental {cost['incremental_seconds'] * 1e3:.2f} ms "
                    f"{cost['incremental_bytes']:,} B",
                    file=sys.stderr,
                    flush=True,
                )
                alone = engine_run(engine, graph, args.stream, BATCH)
                print(
                    f"[{n:,} edges] engine alone: {alone['events_per_second']:,.0f} events/s",
                    file=sys.stderr,
                    flush=True,
                )
                worker = {}
                for layout in layouts:
                    worker[layout] = worker_run(engine, graph, args.stream, layout, broker, tmp)
                    w = worker[layout]
                    w["share_of_engine_alone"] = w["events_per_second"] / alone["events_per_second"]
                    print(
                        f"[{n:,} edges] worker {layout}: {w['events_per_second']:,.0f} events/s, "
                        f"{w['checkpoints']:.0f} checkpoints ({w['checkpoint_seconds_total']:.2f}s), "
                        f"restore {w['restore_seconds']:.1f}s",
                        file=sys.stderr,
                        flush=True,
                    )
                rows.append(
                    {"edges": n, "build_seconds": build, "cost": cost, "engine": alone, "worker": worker}
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    first, last = rows[0], rows[-1]
    summary: dict[str, Any] = {
        "incremental_checkpoint_growth": last["cost"]["incremental_seconds"]
        / first["cost"]["incremental_seconds"],
        "snapshot_checkpoint_growth": last["cost"]["snapshot_seconds"] / first["cost"]["snapshot_seconds"],
    }
    summary["engine_alone_throughput_ratio_largest_vs_smallest"] = (
        last["engine"]["events_per_second"] / first["engine"]["events_per_second"]
    )
    for layout in layouts:
        summary[f"worker_{layout}_throughput_ratio_largest_vs_smallest"] = (
            last["worker"][layout]["events_per_second"] / first["worker"][layout]["events_per_second"]
        )
        summary[f"worker_{layout}_share_of_engine_alone_smallest"] = first["worker"][layout][
            "share_of_engine_alone"
        ]
        summary[f"worker_{layout}_share_of_engine_alone_largest"] = last["worker"][layout][
            "share_of_engine_alone"
        ]
    results = {
        "benchmark": "state",
        "run_id": uuid.uuid4().hex[:8],
        "started": started,
        "seconds": time.time() - started,
        "options": OPTIONS,
        "churn": args.churn,
        "repeats": args.repeats,
        "stream": args.stream,
        "quick": args.quick,
        "machine": machine_info(),
        "summary": summary,
        "sizes": rows,
    }
    out = Path(args.out).with_suffix(".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    plot(results, out.with_suffix(".png"))
    print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
