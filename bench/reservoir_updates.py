"""The reservoir benchmark's ``updates`` experiment: per event, an update stream (each update a delete of a
present edge and an insert of a new one, what change-data capture delivers) against an insert stream,
on line-3 over a Chung-Lu graph (docs/reservoir/algorithm.md §5).

Both streams start from the same state: the engine after the first ``--edges`` edges of the graph (the
load, by fan-out of each base edge to G1, G2, G3). The insert stream then inserts the next ``--tail``
edges; the update stream makes ``--tail``/2 updates, each deleting a uniformly random present edge and
inserting the next new edge, so both have ``--tail`` events and end at about the same size.

* engine: each repeat restores the loaded engine from its snapshot (untimed) for each stream, in
  alternating order (interleaved, so load drifts hit both), and times ``apply`` over the stream in the
  service's batches. The ratio is the median over repeats of update µs/event over insert µs/event of
  the same repeat; the work counters (places, propagation-loop iterations, retrieves, refilled slots)
  are per event.
* worker: one point per stream through the real ``Worker`` on the embedded broker (RocksDB store, the
  service's batch size and checkpoint interval): the topic holds the load then the stream, and the
  stream's time is from the first moment the worker's position passes the load to caught up, per event
  past that position. The worker's published sample must equal the engine's on the same events.

Writes ``bench/results/reservoir_updates.json`` and ``.png`` with the command and the machine's load.
Run: ``.venv/bin/python bench/reservoir_updates.py`` (``--quick``: a smoke run writing
``reservoir_updates_quick.*``); ``bench/reservoir.py --experiments updates`` runs the same.
``--markdown FILE.json`` prints the docs/reservoir/benchmark.md rows from a stored run.
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from bench.lib.machine import load_average, machine_info  # noqa: E402
from bench.lib.report import command_line  # noqa: E402
from bench.reservoir_data import chung_lu, line3_size  # noqa: E402
from ivmstream.events import UpdateEvent  # noqa: E402

RESULTS = REPO / "bench" / "results"
EPINIONS_NODES_PER_EDGE = 75_879 / 508_837  # the node count the graph keeps in proportion
COUNTERS = ("places", "propagations", "retrieves", "refills", "stops_real", "stops_dummy")


def line3(k: int, strategy: str = "rsjoin") -> dict[str, Any]:
    """line-3 over one edge relation E(src, dst), read by the aliases G1, G2, G3."""
    rels = {"G1": ["a", "b"], "G2": ["b", "c"], "G3": ["c", "d"]}
    return {
        "relations": rels,
        "aliases": dict.fromkeys(rels, "E"),
        "base_columns": {"E": ["src", "dst"]},
        "k": k,
        "strategy": strategy,
    }


def _edge(e: tuple[int, int], delta: int = 1) -> UpdateEvent:
    return UpdateEvent("E", {"src": e[0], "dst": e[1]}, delta)


def streams(edges_n: int, tail: int, seed: int = 1) -> dict[str, Any]:
    """The load, the insert stream and the update stream (both ``tail`` events), and the graph's sizes."""
    edges = chung_lu(max(10, round((edges_n + tail) * EPINIONS_NODES_PER_EDGE)), edges_n + tail, seed=seed)
    load, fresh = edges[:edges_n], edges[edges_n:]
    rng = random.Random(seed)
    present = list(load)
    updates: list[UpdateEvent] = []
    for e in fresh[: tail // 2]:
        i = rng.randrange(len(present))
        updates += [_edge(present[i], -1), _edge(e)]
        present[i] = e
    return {
        "load": [_edge(e) for e in load],
        "inserts": [_edge(e) for e in fresh],
        "updates": updates,
        "line3_size_after_load": line3_size(load),
        "nodes": max(10, round((edges_n + tail) * EPINIONS_NODES_PER_EDGE)),
    }


def _apply(engine: Any, events: Sequence[UpdateEvent], batch: int) -> tuple[float, float]:
    """Wall and CPU seconds of ``apply`` over the events in batches (CPU time: this process's, which a
    loaded machine's waiting for a core does not inflate)."""
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(0, len(events), batch):
        rejected = engine.apply(events[i : i + batch])
        if rejected:
            raise AssertionError(f"refused events in a benchmark stream: {rejected[:3]}")
    return time.perf_counter() - t0, time.process_time() - c0


def _counters(engine: Any) -> dict[str, int]:
    stats = engine.stats()
    return {c: int(stats[c]) for c in COUNTERS}


def _check_sample(engine: Any, present: set[tuple[int, int]]) -> None:
    """Every sampled walk a, b, c, d uses three present edges, and the sample is full (|Q| >> k)."""
    rows = engine.rows()
    if len(rows) != engine.k or len(set(rows)) != len(rows):
        raise AssertionError("the sample is not k distinct results")
    for a, b, c, d in rows:
        if not {(a, b), (b, c), (c, d)} <= present:
            raise AssertionError(f"a sampled walk uses a deleted edge: {(a, b, c, d)}")


def engine_point(data: dict[str, Any], k: int, repeats: int, batch: int) -> dict[str, Any]:
    from ivmstream.options import parse_options
    from ivmstream.services.reservoir.engine import ReservoirEngine
    from ivmstream.services.reservoir.options import OPTIONS

    options = parse_options(OPTIONS, line3(k), owner="bench")
    loaded = ReservoirEngine(options)
    load_s, _ = _apply(loaded, data["load"], batch)
    snapshot = loaded.snapshot()
    base = _counters(loaded)
    present_after = {
        "inserts": {(ev.row["src"], ev.row["dst"]) for ev in [*data["load"], *data["inserts"]]},
        "updates": set(),
    }
    edges: set[tuple[int, int]] = {(ev.row["src"], ev.row["dst"]) for ev in data["load"]}
    for ev in data["updates"]:
        (edges.discard if ev.delta == -1 else edges.add)((ev.row["src"], ev.row["dst"]))
    present_after["updates"] = edges
    runs: dict[str, list[dict[str, Any]]] = {"inserts": [], "updates": []}
    for r in range(repeats):
        for name in ("inserts", "updates") if r % 2 == 0 else ("updates", "inserts"):
            engine = ReservoirEngine(options)
            engine.restore(snapshot)
            seconds, cpu = _apply(engine, data[name], batch)
            _check_sample(engine, present_after[name])
            after = _counters(engine)
            n = len(data[name])
            runs[name].append(
                {
                    "seconds": seconds,
                    "us_per_event": 1e6 * seconds / n,
                    "cpu_us_per_event": 1e6 * cpu / n,
                    **{f"{c}_per_event": (after[c] - base[c]) / n for c in COUNTERS},
                }
            )
    ratios = [
        u["us_per_event"] / i["us_per_event"] for u, i in zip(runs["updates"], runs["inserts"], strict=True)
    ]
    cpu_ratios = [
        u["cpu_us_per_event"] / i["cpu_us_per_event"]
        for u, i in zip(runs["updates"], runs["inserts"], strict=True)
    ]
    median = {name: statistics.median(x["us_per_event"] for x in rs) for name, rs in runs.items()}
    cpu_median = {name: statistics.median(x["cpu_us_per_event"] for x in rs) for name, rs in runs.items()}
    return {
        "strategy": "rsjoin",
        "k": k,
        "batch_size": batch,
        "repeats": repeats,
        "load_events": len(data["load"]),
        "load_us_per_insert": 1e6 * load_s / len(data["load"]),
        "runs": runs,
        "inserts_us_per_event": median["inserts"],
        "updates_us_per_event": median["updates"],
        "ratio_updates_over_inserts": statistics.median(ratios),
        "ratios": ratios,
        "inserts_cpu_us_per_event": cpu_median["inserts"],
        "updates_cpu_us_per_event": cpu_median["updates"],
        "cpu_ratio_updates_over_inserts": statistics.median(cpu_ratios),
        "cpu_ratios": cpu_ratios,
        "counters_per_event": {
            name: {c: rs[0][f"{c}_per_event"] for c in COUNTERS} for name, rs in runs.items()
        },
    }


def _worker_tail(
    service: Any, config: Any, bootstrap: str, store: Any, group: str, load_end: int, end: int
) -> dict[str, Any]:
    """One Worker from offset 0 to ``end``: the seconds from its position first passing ``load_end`` to
    caught up, the events past that position, and its result."""
    from ivmstream.runtime import Worker

    worker = Worker(service, config, bootstrap, store, group=group)
    marks: dict[str, Any] = {}
    deadline = time.monotonic() + 1800

    def caught_up(w: Any) -> bool:
        pos = w.positions().get(0) or 0
        if "at" not in marks and pos >= load_end:
            marks["at"], marks["cpu_at"], marks["from"] = time.perf_counter(), time.process_time(), pos
        if pos >= end:
            marks["end"], marks["cpu_end"] = time.perf_counter(), time.process_time()
            marks["result"] = next(iter(w.results().values()))
            return True
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker did not catch up: {pos} of {end}")
        return False

    worker.run(until=caught_up)
    events = end - marks["from"]
    seconds, cpu = marks["end"] - marks["at"], marks["cpu_end"] - marks["cpu_at"]
    return {
        "tail_events": events,
        "tail_seconds": seconds,
        "us_per_event": 1e6 * seconds / events if events else None,
        "cpu_us_per_event": 1e6 * cpu / events if events else None,
        "result": marks["result"],
    }


def worker_point(data: dict[str, Any], k: int, batch: int | None = None) -> dict[str, Any]:
    from bench.lib.broker import produce_checked
    from ivmstream.config import build_config
    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.events import encode_event
    from ivmstream.service import load_service
    from ivmstream.services.reservoir.engine import ReservoirEngine
    from ivmstream.state import open_store

    service = load_service("reservoir")
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-reservoir-updates-"))
    out: dict[str, Any] = {}
    try:
        with BrokerProcess() as broker:
            for name in ("inserts", "updates"):
                topic = f"reservoir-{name}-{uuid.uuid4().hex[:8]}"
                broker.create_topic(topic, 1)
                raw = {
                    **line3(k),
                    "input_topic": topic,
                    "output_topic": f"{topic}.out",
                    "dlq_topic": f"{topic}.dlq",
                }
                if batch is not None:  # smoke runs only: the service's batch size otherwise
                    raw["batch_size"] = batch
                config = build_config(service, raw)
                events = [*data["load"], *data[name]]
                end = produce_checked(broker.bootstrap, topic, [encode_event(ev) for ev in events])
                store = open_store("rocksdb", f"res.{topic}", state_dir=tmp)
                run = _worker_tail(
                    service, config, broker.bootstrap, store, f"{topic}-g", len(data["load"]), end
                )
                engine = ReservoirEngine(config.options)
                engine.apply(events)
                if run.pop("result")["sample"] != engine.result()["sample"]:
                    raise AssertionError(
                        f"{name}: the worker's sample differs from the engine's on the same events"
                    )
                out[name] = {
                    **run,
                    "batch_size": config.batch_size,
                    "checkpoint_interval_s": config.checkpoint_interval,
                    "same_sample_as_engine": True,
                }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for what in ("", "cpu_"):
        ins, upd = out["inserts"][f"{what}us_per_event"], out["updates"][f"{what}us_per_event"]
        out[f"{what}ratio_updates_over_inserts"] = upd / ins if ins and upd else None
    return out


def experiment(
    edges_n: int, tail: int, k: int, repeats: int, worker: bool, worker_batch: int | None = None
) -> dict[str, Any]:
    from ivmstream.config import build_config
    from ivmstream.service import load_service

    batch = build_config(load_service("reservoir"), line3(k)).batch_size
    data = streams(edges_n, tail)
    report: dict[str, Any] = {
        "query": "line-3 (G1 ⋈ G2 ⋈ G3 over one edge relation, by fan-out)",
        "graph": f"Chung-Lu, gamma 1.9, {data['nodes']:,} nodes",
        "edges": edges_n,
        "tail_events": tail,
        "k": k,
        "line3_size_after_load": data["line3_size_after_load"],
        "load_before": load_average(),
        "engine": engine_point(data, k, repeats, batch),
    }
    report["load_after_engine"] = load_average()
    if worker:
        report["worker"] = worker_point(data, k, worker_batch)
        report["load_after_worker"] = load_average()
    return report


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def _ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def markdown(report: dict[str, Any]) -> str:
    """The rows of docs/reservoir/benchmark.md's updates table, from a stored run."""
    e = report["engine"]
    lines = [
        "| path | insert stream µs/event | update stream µs/event | updates / inserts | goal |",
        "|---|---:|---:|---:|---|",
        f"| engine (median of {e['repeats']} interleaved repeats, batches of {e['batch_size']}) | "
        f"{e['inserts_us_per_event']:,.0f} | {e['updates_us_per_event']:,.0f} | "
        f"{e['ratio_updates_over_inserts']:.2f}x | <= 3x |",
        f"| engine, CPU time of the same runs | {e['inserts_cpu_us_per_event']:,.0f} | "
        f"{e['updates_cpu_us_per_event']:,.0f} | {e['cpu_ratio_updates_over_inserts']:.2f}x | <= 3x |",
    ]
    w = report.get("worker")
    if w:
        lines += [
            f"| worker (embedded broker, RocksDB, batches of {w['inserts']['batch_size']}; one run each) | "
            f"{_num(w['inserts']['us_per_event'])} | {_num(w['updates']['us_per_event'])} | "
            f"{_ratio(w['ratio_updates_over_inserts'])} | <= 3x |",
            f"| worker, CPU time of its process | {_num(w['inserts']['cpu_us_per_event'])} | "
            f"{_num(w['updates']['cpu_us_per_event'])} | "
            f"{_ratio(w['cpu_ratio_updates_over_inserts'])} | <= 3x |",
        ]
    ins, upd = e["counters_per_event"]["inserts"], e["counters_per_event"]["updates"]
    loads = (
        f"{report['load_before'][0]:.1f} before, {report['load_after_engine'][0]:.1f} after the engine runs"
    )
    if w:
        loads += f", {report['load_after_worker'][0]:.1f} after the worker runs"
    lines += [
        "",
        f"line-3 over a {report['edges']:,}-edge {report['graph']} "
        f"(|Q| = {report['line3_size_after_load']:,} after the load), k = {report['k']:,}, "
        f"{report['tail_events']:,} events per stream; building the state cost "
        f"{e['load_us_per_insert']:,.0f} µs per insert. Per event, inserts vs updates: propagation-loop "
        f"iterations {ins['propagations']:.2f} vs {upd['propagations']:.2f}, places {ins['places']:.1f} vs "
        f"{upd['places']:.1f}; {upd['refills']:.3f} refilled slots per update-stream event. Engine ratio per "
        f"repeat {min(e['ratios']):.2f}x to {max(e['ratios']):.2f}x (CPU time {min(e['cpu_ratios']):.2f}x to "
        f"{max(e['cpu_ratios']):.2f}x). Load average "
        f"(1 min) {loads}.",
    ]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    e = report["engine"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    labels, values = ["engine"], [(e["inserts_us_per_event"], e["updates_us_per_event"])]
    if "worker" in report:
        w = report["worker"]
        labels.append("worker")
        values.append((w["inserts"]["us_per_event"] or 0.0, w["updates"]["us_per_event"] or 0.0))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], [v[0] for v in values], width=0.4, label="insert stream")
    ax.bar([x + 0.2 for x in xs], [v[1] for v in values], width=0.4, label="update stream (delete + insert)")
    ax.set_xticks(list(xs), labels)
    ax.set_ylabel("µs per event")
    ax.set_title(f"line-3, {report['edges']:,} edges, k = {report['k']:,}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--edges", type=int, default=20_000, help="the graph's edges loaded before the streams")
    p.add_argument("--tail", type=int, default=6_000, help="events of each stream (3 worker batches)")
    p.add_argument("--k", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--no-worker", action="store_true", help="the engine only")
    p.add_argument("--out", default=str(RESULTS / "reservoir_updates.json"))
    p.add_argument("--markdown", metavar="FILE.json", help="print the docs rows of a stored run")
    p.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes")
    a = p.parse_args(argv)
    if a.markdown:
        print(markdown(orjson.loads(Path(a.markdown).read_bytes())))
        return 0
    if a.quick:
        a.edges, a.tail, a.k, a.repeats = 300, 40, 20, 2
        if a.out == str(RESULTS / "reservoir_updates.json"):
            a.out = str(RESULTS / "reservoir_updates_quick.json")
    started = time.perf_counter()
    report = {
        "command": command_line("bench/reservoir_updates.py", argv),
        **experiment(a.edges, a.tail, a.k, a.repeats, not a.no_worker, 10 if a.quick else None),
    }
    report["seconds"] = time.perf_counter() - started
    report["machine"] = machine_info()
    out = Path(a.out).with_suffix(".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    plot(report, out.with_suffix(".png"))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
