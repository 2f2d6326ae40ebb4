"""Result modes through the real worker: ``emit: batch`` against ``emit: every-event``.

For every service with a demo workload (``ivmstream.testing.conformance_cases``) the workload is produced
once to a fresh topic of the embedded broker, and the real ``Worker`` (in this process, RocksDB state,
default batch size and checkpoint interval, no Redis) consumes it from the start until its final
checkpoint covers every record, once per mode and ``--repeats`` times, the modes interleaved. Timed from
the worker's first batch to the end of its final checkpoint. Reported per service and mode: the best
run's events/s, the records published on the output topic and their bytes, and the ratio every-event
over batch (time and records). The modes publish different things: one record per touched key per
batch, against one JSON Patch per accepted event (docs/architecture.md, "Result modes").

Writes ``bench/results/emit.json`` and ``emit.png`` (``emit_quick.*`` with ``--quick``). Run:
``.venv/bin/python bench/emit.py`` (about 2 minutes); ``--markdown FILE.json`` prints the docs section.
"""

from __future__ import annotations

import argparse
import shutil
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

from bench.lib.broker import produce_all  # noqa: E402
from bench.lib.machine import machine_info  # noqa: E402
from bench.lib.plots import plt  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from bench.lib.report import command_line  # noqa: E402
from bench.lib.worker_runs import run_until_caught_up  # noqa: E402

RESULTS = REPO / "bench" / "results"
MODES = ("batch", "every-event")


def output_size(bootstrap: str, topic: str) -> tuple[int, int]:
    """Records and value bytes on every partition of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"size-{uuid.uuid4().hex}"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or not meta.partitions:
            return 0, 0
        tps = [TopicPartition(topic, p, 0) for p in meta.partitions]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        consumer.assign(tps)
        count = size = 0
        deadline = time.monotonic() + 60
        while count < sum(ends.values()) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    count += 1
                    size += len(m.value() or b"")
        return count, size
    finally:
        consumer.close()


def run_worker(case: Any, broker: Any, topic: str, mode: str, tmp: Path) -> dict[str, Any]:
    """One worker over ``topic`` from the start to a checkpoint covering its end."""
    from ivmstream.config import build_config
    from ivmstream.metrics import RuntimeMetrics
    from ivmstream.runtime import Worker
    from ivmstream.runtime.progress import group_progress
    from ivmstream.state import open_store

    run = uuid.uuid4().hex[:8]
    out = f"{topic}.{mode}.{run}"
    config = build_config(
        case.service,
        {
            **case.workload.config,
            "input_topic": topic,
            "output_topic": out,
            "dlq_topic": f"{out}.dlq",
            "emit": mode,
        },
    )
    group = f"{out}-g"
    store = open_store("rocksdb", f"emit.{run}", state_dir=tmp)
    worker = Worker(case.service, config, broker.bootstrap, store, group=group, metrics=RuntimeMetrics("b"))
    ends = {p.partition: p.high for p in group_progress(broker.bootstrap, group, topic)}
    seconds, _results = run_until_caught_up(worker, ends, timeout=300)
    records, size = output_size(broker.bootstrap, out)
    return {"seconds": seconds, "output_records": records, "output_bytes": size}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--services", default="", help="comma-separated (default: every service with a demo)")
    p.add_argument("--out", default=None)
    p.add_argument("--markdown", metavar="FILE.json")
    p.add_argument("--quick", action="store_true", help="one repeat")
    args = p.parse_args(argv)
    if args.markdown:
        print(markdown(orjson.loads(Path(args.markdown).read_bytes())))
        return 0
    if args.quick:
        args.repeats = 1
    out = (
        Path(args.out).with_suffix(".json")
        if args.out
        else RESULTS / ("emit_quick.json" if args.quick else "emit.json")
    )

    from confluent_kafka import Producer

    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.runtime.kafka import producer_settings
    from ivmstream.testing import conformance_cases

    wanted = [s for s in args.services.split(",") if s]
    cases = [c for c in conformance_cases(wanted or None) if c.workload.name == "demo"]
    started = time.time()
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-emit-"))
    rows = []
    try:
        with BrokerProcess() as broker:
            for case in cases:
                topic = f"emit-{case.name}-{uuid.uuid4().hex[:6]}"
                broker.create_topic(topic, case.workload.partitions)
                producer = Producer(producer_settings(broker.bootstrap, {"compression.type": "lz4"}))
                records = case.records
                produce_all(
                    producer, topic, ((r.key, r.value, -1 if r.key is not None else 0) for r in records)
                )
                runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
                for i in range(args.repeats):
                    for mode in MODES if i % 2 == 0 else MODES[::-1]:
                        runs[mode].append(run_worker(case, broker, topic, mode, tmp))
                best = {m: min(runs[m], key=lambda r: r["seconds"]) for m in MODES}
                row = {
                    "service": case.name,
                    "events": len(records),
                    "partitions": case.workload.partitions,
                    "runs": runs,
                    "best": {
                        m: {**best[m], "events_per_second": len(records) / best[m]["seconds"]} for m in MODES
                    },
                }
                row["every_event_over_batch_time"] = best["every-event"]["seconds"] / best["batch"]["seconds"]
                row["every_event_over_batch_records"] = best["every-event"]["output_records"] / max(
                    1, best["batch"]["output_records"]
                )
                rates = {m: row["best"][m]["events_per_second"] for m in MODES}
                progress(
                    f"  {case.name}: {len(records):,} events; batch {rates['batch']:,.0f}/s, "
                    f"every-event {rates['every-event']:,.0f}/s"
                )
                rows.append(row)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report = {
        "benchmark": "emit",
        "run_id": uuid.uuid4().hex[:8],
        "started": started,
        "command": command_line("bench/emit.py", argv),
        "quick": args.quick,
        "repeats": args.repeats,
        "services": rows,
        "seconds": time.time() - started,
        "machine": machine_info(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    plot(report, out.with_suffix(".png"))
    print(markdown(report))
    return 0


def plot(report: dict[str, Any], path: Path) -> None:
    rows = report["services"]
    fig, ax = plt.subplots(figsize=(8, 4))
    xs = range(len(rows))
    width = 0.4
    for i, mode in enumerate(MODES):
        ax.bar(
            [x + (i - 0.5) * width for x in xs],
            [r["best"][mode]["events_per_second"] for r in rows],
            width,
            label=f"emit: {mode}",
        )
    ax.set_xticks(list(xs), [r["service"] for r in rows])
    ax.set(ylabel="events/s through the worker (best run)", title="result modes")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "## Result modes through the worker (`bench/emit.py`)",
        "",
        f"Run `{report['run_id']}`: each service's demo workload through the real `Worker` (RocksDB state, "
        f"default batch size and checkpoint interval), best of {report['repeats']} run(s) per mode, the "
        "modes interleaved. Total time from the first batch to the final checkpoint; output records are "
        "what the worker published on its output topic.",
        "",
        "| service | events | batch: events/s | every-event: events/s | every-event / batch time | "
        "records (batch / every-event) | bytes (batch / every-event) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["services"]:
        b, e = r["best"]["batch"], r["best"]["every-event"]
        lines.append(
            f"| {r['service']} | {r['events']:,} | {b['events_per_second']:,.0f} "
            f"| {e['events_per_second']:,.0f} "
            f"| {r['every_event_over_batch_time']:.2f}x | {b['output_records']:,} / {e['output_records']:,} "
            f"| {b['output_bytes']:,} / {e['output_bytes']:,} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
