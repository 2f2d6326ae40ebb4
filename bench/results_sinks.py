"""What publishing results costs the worker, and how fast subscribers hear of a change.

One run starts its own embedded broker, ``redis-server`` and PostgreSQL (fsync on). For each workload
the input is produced before any clock starts, then a real ``Worker`` (RocksDB state, default batch
size and checkpoint interval) reads it from the start to a final checkpoint covering it, once per sink:

* ``none``: the results topic only;
* ``redis``: the topic and Redis (``ivmstream run --redis``);
* ``redis+postgres``: the topic, Redis and the PostgreSQL sink (``--postgres``), whose final
  checkpoint waits until PostgreSQL holds every result.

Workloads (``bench/results_sinks_runs``): ``reference``, the reference service's demo rows repeated
(5 keys, the issue's reference workload); the same rows over about 2,000 keys, so almost every event
changes a key of its own (the sink's worst case); triangles in graph mode over 500 graphs. The sinks
alternate over ``--repeats`` (order rotating); reported are the median events/s per sink and the median
of the per-repeat ratios ``redis+postgres`` / ``redis`` (the goal: at most 10% slower).

Then the subscriber latency (``bench/results_sinks_latency``): the reference workload produced at a
steady rate while the worker runs, events of five keys followed through ``ivmstream serve`` from Redis
and from PostgreSQL; p50, p99 and the share within one checkpoint interval (the goal: p99 within it).

Usage (from the repo root)::

    .venv/bin/python bench/results_sinks.py            # 200,000 events, 5 repeats, 20 s live (~8 min)
    .venv/bin/python bench/results_sinks.py --quick    # 4,000 events, 1 repeat, 2 s live

Writes ``bench/results/results_sinks.json`` and ``results_sinks.png`` (``results_sinks_quick.*`` with
``--quick``); ``--markdown FILE.json`` prints the tables of docs/results.md from a stored report.
"""

from __future__ import annotations

import argparse
import json
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

from bench.lib.machine import load_average, machine_info  # noqa: E402
from bench.lib.plots import plt  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from bench.lib.report import RESULTS, command_line, shown  # noqa: E402
from bench.results_sinks_latency import latency_run  # noqa: E402
from bench.results_sinks_runs import SINKS, Workload, produce, reference, triangles, worker_run  # noqa: E402


def workloads(count: int) -> list[Workload]:
    return [reference(count, 5), reference(count, 2000), triangles(count // 2, 500)]


def throughput(broker: Any, redis_url: str, dsn: str, workload: Workload, repeats: int) -> dict[str, Any]:
    """Every sink over the same pre-produced input, ``repeats`` times, the order rotating."""
    topic = f"sinks-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, workload.partitions)
    produce(broker.bootstrap, topic, workload)
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SINKS}
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-sinks-"))
    try:
        for r in range(repeats):
            for sink in SINKS[r % len(SINKS) :] + SINKS[: r % len(SINKS)]:
                run = worker_run(broker.bootstrap, topic, workload, sink, redis_url, dsn, tmp)
                run["loadavg_1"] = load_average()[0]
                runs[sink].append(run)
                progress(f"  {workload.name} {r + 1}/{repeats} {sink}: {run['events_per_s']:,.0f} events/s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def ratio(sink: str, base: str) -> float:
        return statistics.median(runs[base][i]["seconds"] / runs[sink][i]["seconds"] for i in range(repeats))

    return {
        "workload": workload.name,
        "service": workload.service,
        "events": len(workload.records),
        "keys": workload.keys,
        "partitions": workload.partitions,
        "median_events_per_s": {s: statistics.median(x["events_per_s"] for x in runs[s]) for s in SINKS},
        "postgres_vs_redis": ratio("redis+postgres", "redis"),
        "postgres_vs_none": ratio("redis+postgres", "none"),
        "redis_vs_none": ratio("redis", "none"),
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="4,000 events, 1 repeat, 2 s live")
    p.add_argument("--events", type=int, help="events per throughput workload (default 200,000)")
    p.add_argument("--repeats", type=int, help="runs per sink (default 5)")
    p.add_argument("--rate", type=float, default=5000.0, help="events/s of the live latency run")
    p.add_argument("--live-seconds", type=float, help="length of the live latency run (default 20)")
    p.add_argument("--out", type=Path)
    p.add_argument("--markdown", type=Path, metavar="FILE.json", help="print the docs tables of a report")
    args = p.parse_args(argv)
    if args.markdown is not None:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    count = args.events or (4000 if args.quick else 200_000)
    repeats = args.repeats or (1 if args.quick else 5)
    live = args.live_seconds or (2.0 if args.quick else 20.0)
    out = (
        args.out or RESULTS / ("results_sinks_quick.json" if args.quick else "results_sinks.json")
    ).with_suffix(".json")

    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.dev.postgres_server import PostgresServer
    from ivmstream.dev.redis_server import RedisServer

    started = time.time()
    report: dict[str, Any] = {
        "benchmark": "results_sinks",
        "run_id": uuid.uuid4().hex[:8],
        "started": started,
    }
    report["machine_at_start"] = machine_info()
    with BrokerProcess() as broker, RedisServer() as redis_server, PostgresServer(fsync=True) as pg:
        report["throughput"] = [
            throughput(broker, redis_server.url, pg.dsn, w, repeats) for w in workloads(count)
        ]
        live_workload = reference(int(args.rate * live), 5)
        watched = sorted({k.decode() for k, _ in live_workload.records})[:5]
        report["latency"] = latency_run(broker, live_workload, args.rate, watched, redis_server.url, pg.dsn)
        for source, s in report["latency"]["sources"].items():
            progress(f"  latency {source}: p50 {s.get('p50_s', 0):.3f}s p99 {s.get('p99_s', 0):.3f}s")
    report.update(
        command=command_line("bench/results_sinks.py", argv),
        quick=args.quick,
        repeats=repeats,
        seconds=time.time() - started,
        machine=machine_info(postgres_fsync=True),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, out.with_suffix(".png"))
    print(
        json.dumps(
            {"out": shown(out), **{t["workload"]: t["postgres_vs_redis"] for t in report["throughput"]}}
        )
    )
    return 0


def plot(report: dict[str, Any], path: Path) -> None:
    """Median events/s per workload and sink; the latency percentiles per source."""
    rows = report["throughput"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [2, 1]})
    width = 0.27
    for i, sink in enumerate(SINKS):
        left.bar(
            [x + (i - 1) * width for x in range(len(rows))],
            [r["median_events_per_s"][sink] for r in rows],
            width,
            label=sink,
        )
    left.set_xticks(range(len(rows)), [r["workload"] for r in rows])
    left.set(ylabel="events/s through the worker (median)", title="what the sinks cost the worker")
    left.legend()
    sources = report["latency"]["sources"]
    names = list(sources)
    for i, q in enumerate(("p50_s", "p99_s")):
        right.bar(
            [x + (i - 0.5) * 0.4 for x in range(len(names))],
            [sources[n].get(q, 0) * 1000 for n in names],
            0.4,
            label=q.removesuffix("_s"),
        )
    right.axhline(
        report["latency"]["checkpoint_interval_s"] * 1000, color="grey", ls="--", label="checkpoint"
    )
    right.set_xticks(range(len(names)), [f"SSE from {n}" for n in names])
    right.set(
        ylabel="publish to event (ms)", title=f"subscribers at {report['latency']['rate']:,.0f} events/s"
    )
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown(report: dict[str, Any]) -> str:
    """The docs tables of a stored report."""
    lines = [
        "| workload | keys | none: events/s | Redis: events/s | Redis + PostgreSQL: events/s "
        "| Redis + PostgreSQL / Redis |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for t in report["throughput"]:
        m = t["median_events_per_s"]
        lines.append(
            f"| {t['workload']} | {t['keys']:,} | {m['none']:,.0f} | {m['redis']:,.0f} "
            f"| {m['redis+postgres']:,.0f} | {t['postgres_vs_redis']:.2f} |"
        )
    lat = report["latency"]
    first = report["throughput"][0]["events"]
    load = report["machine_at_start"]["loadavg_1_5_15"][0], report["machine"]["loadavg_1_5_15"][0]
    lines += [
        "",
        f"{first:,} events per run (triangles half), {report['repeats']} repeats, the last column the "
        "median of the per-repeat throughput ratios; load average at the start "
        f"{load[0]}, at the end {load[1]} (`{report['command']}`).",
        "",
        "| events from | events | p50 | p99 | max | within one checkpoint interval |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for source, s in lat["sources"].items():
        lines.append(
            f"| {source} | {s['events']:,} | {s['p50_s'] * 1000:.0f} ms | {s['p99_s'] * 1000:.0f} ms "
            f"| {s['max_s'] * 1000:.0f} ms | {s['within_interval']:.1%} |"
        )
    lines += [
        "",
        f"The reference workload live at {lat['rate']:,.0f} events/s for "
        f"{lat['events'] / lat['rate']:.0f} s, subscribers on its {len(lat['watched_keys'])} keys; "
        f"checkpoint interval {lat['checkpoint_interval_s']:g} s, "
        f"`postgres_flush_interval` {lat['postgres_flush_interval_s']:g} s.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
