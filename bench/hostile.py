"""Good-record throughput under a flood of hostile records, against a clean run of the same good records.

One run starts its own embedded broker and measures, for each service (default: ``reference``, whose
engine does almost nothing per event, so the worst case for the ratio, and ``triangles``, a real view),
with its demo sample and demo config, a memory state store and no Redis (so the difference is decoding
and dead-lettering alone):

* ``clean``: N good update events (the service's demo sample, repeated);
* ``hostile``: the same N good events with one hostile record after each (half the stream), every kind
  of fuzz/hostile_records.py in turn (oversized, too deep, integers beyond 64 bits, NaN/Infinity, text
  that is not UTF-8, wrong types, nulls, malformed JSON), each dead-lettered with its reason.

The clock starts at the worker's first batch and stops when its positions reach the end of the topic;
good-record throughput is N over that time in both cases. The worker's batch size is the largest
divisor of N up to the default (2000), so that no run ends on a partial batch: the worker holds one for
its consume timeout (0.2 s) waiting for more records, which would be idle time, not throughput. Cases
alternate over ``--repeats`` (order rotating), each on a fresh topic and group; reported are the
medians, the ratio of medians and the median of the per-repeat ratios (clean rate over hostile rate:
the goal is at most 2), and the CPU time of the worker's thread, of its other threads (the Kafka
clients') and of the broker process (in 10 ms clock ticks). The record size limit is set to 1 KiB
(IVMSTREAM_MAX_RECORD_BYTES) so that oversized records fit the embedded broker's 5 MiB per partition.

Usage (from the repo root)::

    .venv/bin/python bench/hostile.py            # 24000 / 3800 good records, 7 repeats (~2 min)
    .venv/bin/python bench/hostile.py --quick    # 3000 good records, 1 repeat

Writes ``bench/results/hostile.json`` and ``hostile.png`` (``hostile_quick.*`` with ``--quick``);
``--markdown FILE.json`` prints the table of docs/security.md ("Throughput under a flood") from a stored
report.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Producer, TopicPartition

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.lib.broker import produce_all  # noqa: E402
from bench.lib.machine import machine_info  # noqa: E402
from bench.lib.plots import plt  # noqa: E402
from fuzz.hostile_records import KINDS, interleave  # noqa: E402
from ivmstream.config import RUNTIME_OPTIONS, build_config, schema_of  # noqa: E402
from ivmstream.dev.broker import BrokerProcess  # noqa: E402
from ivmstream.events import EventCodec  # noqa: E402
from ivmstream.metrics import RuntimeMetrics  # noqa: E402
from ivmstream.runtime import Worker  # noqa: E402
from ivmstream.runtime.clients import KafkaClients  # noqa: E402
from ivmstream.runtime.gc_policy import worker_gc  # noqa: E402
from ivmstream.service import load_service  # noqa: E402
from ivmstream.state import MemoryStore  # noqa: E402

RESULTS = REPO / "bench" / "results"
# Good records per run: the embedded broker keeps at most 5 MiB per partition, and the triangles demo
# puts every record under one key (one partition) and refuses an edge inserted twice, so it runs over
# its sample once.
SERVICES = {"reference": 24000, "triangles": 3800}
PARTITIONS = 3
LIMIT = 1024
TIMEOUT = 600.0

Stream = list[tuple[bytes, bytes]]


def demo_config(name: str) -> dict[str, Any]:
    service = load_service(name)
    if service.demo is None:
        raise SystemExit(f"{name} has no demo workload to measure with")
    return dict(service.demo.config)


def workload(name: str, good_count: int, seed: int) -> tuple[Stream, Stream]:
    """(clean, hostile) streams of (key, value): the good records, and the same with a bad one after each."""
    service = load_service(name)
    config = demo_config(name)
    key_field = config["key_field"]
    assert service.demo is not None
    lines = Path(service.demo.input).read_bytes().splitlines()
    good = []
    for i in range(good_count):
        line = lines[i % len(lines)]
        good.append((str(orjson.loads(line)["row"][key_field]).encode(), line))
    schema = schema_of(service, build_config(service, config))
    mixed = interleave(good, lambda ev: schema.relations[ev["relation"]], seed, LIMIT)
    return good, [(k or b"", v) for k, v, _ in mixed]


def aligned_batch_size(good_count: int, default: int) -> int:
    """The largest batch size up to ``default`` that divides ``good_count`` (and so twice it): no run ends
    on a partial batch, which the worker would hold for its consume timeout (0.2 s) waiting for more,
    an idle wait that is not throughput."""
    return max(d for d in range(1, default + 1) if good_count % d == 0)


def measure(broker: BrokerProcess, name: str, records: Stream, good_count: int) -> dict[str, Any]:
    service = load_service(name)
    topic = f"hostile-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 20})
    produce_all(producer, topic, ((k, v, -1) for k, v in records))
    topics = {"input_topic": topic, "output_topic": f"{topic}.out", "dlq_topic": f"{topic}.dlq"}
    batch = aligned_batch_size(good_count, RUNTIME_OPTIONS["batch_size"].default)
    config = build_config(service, {**demo_config(name), **topics, "batch_size": batch})
    metrics = RuntimeMetrics(service.name)
    codec = EventCodec(schema_of(service, config), max_record_bytes=LIMIT)
    worker = Worker(
        service,
        config,
        KafkaClients(broker.bootstrap),
        MemoryStore(),
        group=f"{topic}-g",
        metrics=metrics,
        codec=codec,
    )
    ends = _ends(worker, topic)
    marks: dict[str, float] = {}

    def first_batch(_records: int) -> None:
        if "first_batch" not in marks:  # the slow CPU readings first, so the clock does not count them
            marks["first_batch_process"], marks["first_batch_broker"] = time.process_time(), broker_cpu()
            marks["first_batch_cpu"], marks["first_batch"] = time.thread_time(), time.perf_counter()

    worker.hooks.batch_received.append(first_batch)
    deadline = time.monotonic() + TIMEOUT
    stat = Path(f"/proc/{broker.process.pid}/stat")

    def broker_cpu() -> float:
        """CPU seconds the embedded broker's process has used (Linux; NaN elsewhere)."""
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def caught_up(w: Worker) -> bool:
        if all(w.positions().get(p) == end for p, end in ends.items() if end > 0):
            marks["caught_up"], marks["caught_up_cpu"] = time.perf_counter(), time.thread_time()
            marks["caught_up_process"], marks["caught_up_broker"] = time.process_time(), broker_cpu()
            return True
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker did not reach {ends}: {w.positions()}")
        return False

    with worker_gc():
        worker.run(until=caught_up)
    seconds = marks["caught_up"] - marks["first_batch"]
    rejected = {
        s.labels["reason"]: int(s.value)
        for fam in metrics.registry.collect()
        for s in fam.samples
        if s.name == "ivmstream_events_rejected_total"
    }
    return {
        "records": len(records),
        "batch_size": batch,
        "seconds": seconds,
        "good_per_s": good_count / seconds,
        # the worker's own thread: the rest of the wall time it waited for the client's and broker's threads
        "worker_thread_cpu_seconds": marks["caught_up_cpu"] - marks["first_batch_cpu"],
        # every thread of the worker's process (the Kafka clients' included), and the embedded broker's
        "process_cpu_seconds": marks["caught_up_process"] - marks["first_batch_process"],
        "broker_cpu_seconds": marks["caught_up_broker"] - marks["first_batch_broker"],
        "rejected": rejected,
    }


def _ends(worker: Worker, topic: str) -> dict[int, int]:
    consumer = worker.consumer
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions
    }


def bench_service(
    broker: BrokerProcess, name: str, good_count: int, repeats: int, seed: int
) -> dict[str, Any]:
    clean, hostile = workload(name, good_count, seed)
    runs: dict[str, list[dict[str, Any]]] = {"clean": [], "hostile": []}
    for r in range(repeats):
        for case in ("clean", "hostile") if r % 2 == 0 else ("hostile", "clean"):
            run = measure(broker, name, clean if case == "clean" else hostile, good_count)
            runs[case].append(run)
            rate = run["good_per_s"]
            print(f"{name} repeat {r + 1}/{repeats} {case}: {rate:,.0f} good records/s", file=sys.stderr)
    bad_count = len(hostile) - good_count
    for run in runs["hostile"]:
        if sum(run["rejected"].values()) != bad_count or set(run["rejected"]) != set(KINDS):
            raise RuntimeError(f"{name}: hostile run rejected {run['rejected']}, expected {bad_count}")
    for run in runs["clean"]:
        if run["rejected"]:
            raise RuntimeError(f"{name}: clean run rejected {run['rejected']}")
    clean_rate = statistics.median(r["good_per_s"] for r in runs["clean"])
    hostile_rate = statistics.median(r["good_per_s"] for r in runs["hostile"])
    paired = statistics.median(
        c["good_per_s"] / h["good_per_s"] for c, h in zip(runs["clean"], runs["hostile"], strict=True)
    )
    return {
        "good_records": good_count,
        "hostile_records": bad_count,
        "clean_good_per_s_median": clean_rate,
        "hostile_good_per_s_median": hostile_rate,
        "slowdown_ratio_of_medians": clean_rate / hostile_rate,
        "slowdown_paired_median": paired,
        "within_2x": paired <= 2.0,
        "runs": runs,
    }


def plot(report: dict[str, Any], path: Path) -> None:
    """Good records per second, clean and with half the stream hostile, per service (medians)."""
    names = sorted(report["services"])
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.4
    for i, (case, label) in enumerate((("clean", "clean"), ("hostile", "half the stream hostile"))):
        rates = [report["services"][n][f"{case}_good_per_s_median"] for n in names]
        ax.bar([x + (i - 0.5) * width for x in range(len(names))], rates, width, label=label)
    for x, n in enumerate(names):
        s = report["services"][n]
        top = s["clean_good_per_s_median"]
        ax.annotate(f"{s['slowdown_paired_median']:.2f}x slower", (x, top), ha="center", va="bottom")
    ax.set_xticks(range(len(names)), names)
    ax.set(
        ylabel="good records/s through the worker (median)", title="throughput under a flood of bad records"
    )
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


LABELS = {"triangles": "`triangles` (a real view)", "reference": "`reference` (near no-op engine)"}


def markdown(report: dict[str, Any]) -> str:
    """The docs table of a stored report, with the load the machine was under."""
    load = report.get("machine", {}).get("loadavg_1_5_15") or ["?"]
    lines = [
        f"`{report['command']}`, {report['repeats']} interleaved repeats, load average {load[0]} at the end "
        "of the run:",
        "",
        "| Service | Good records | Clean, good/s | Half hostile, good/s | Slowdown (paired median) |",
        "|---|---|---|---|---|",
    ]
    for name, s in sorted(report["services"].items(), key=lambda kv: kv[1]["slowdown_paired_median"]):
        lines.append(
            f"| {LABELS.get(name, f'`{name}`')} | {s['good_records']:,} | "
            f"{s['clean_good_per_s_median']:,.0f} | {s['hostile_good_per_s_median']:,.0f} | "
            f"{s['slowdown_paired_median']:.2f}x |"
        )
    lines += ["", *cost_lines(report)]
    return "\n".join(lines)


def cost_lines(report: dict[str, Any]) -> list[str]:
    """Per service, what a good and a refused record cost end to end (from the medians), and the CPU of
    the worker's own thread, of its other threads (the Kafka clients') and of the broker."""
    out = []
    for name, s in sorted(report["services"].items()):
        good = 1e6 / s["clean_good_per_s_median"]
        refused = 1e6 / s["hostile_good_per_s_median"] - good
        line = f"* `{name}`: a good record costs {good:.2f} µs, a refused one adds {refused:.2f} µs"
        runs = s["runs"]
        if all("process_cpu_seconds" in r for case in runs.values() for r in case):
            cpu = {
                case: [
                    statistics.median(1000 * r[k] for r in runs[case])
                    for k in (
                        "seconds",
                        "worker_thread_cpu_seconds",
                        "process_cpu_seconds",
                        "broker_cpu_seconds",
                    )
                ]
                for case in ("clean", "hostile")
            }
            parts = [
                f"{label} {wall:.1f} ms, the worker's thread {own:.1f} ms of CPU, its other threads "
                f"{process - own:.1f} ms, the broker {broker:.0f} ms (10 ms ticks)"
                for label, (wall, own, process, broker) in (
                    ("clean", cpu["clean"]),
                    ("half hostile", cpu["hostile"]),
                )
            ]
            line += " (medians: " + "; ".join(parts) + ")"
        out.append(line + ".")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="3000 good records, 1 repeat")
    parser.add_argument("--good", type=int, help="good records per run (default: per service, SERVICES)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--service", action="append", choices=SERVICES, help="default: all of them")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--markdown", metavar="FILE.json", help="print the docs table of a stored report")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    repeats = 1 if args.quick else args.repeats
    out = args.out or RESULTS / ("hostile_quick.json" if args.quick else "hostile.json")
    services: dict[str, Any] = {}
    with BrokerProcess() as broker:
        for name in args.service or SERVICES:
            good_count = 3000 if args.quick else (args.good or SERVICES[name])
            services[name] = bench_service(broker, name, good_count, repeats, args.seed)
    summary = {
        "benchmark": "hostile",
        "hostile_kinds": list(KINDS),
        "max_record_bytes": LIMIT,
        "partitions": PARTITIONS,
        "repeats": repeats,
        "services": services,
        "machine": machine_info(),
        "command": "python bench/hostile.py" + (" --quick" if args.quick else ""),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    plot(summary, out.with_suffix(".png"))
    for name, result in services.items():
        print(
            f"{name}: clean {result['clean_good_per_s_median']:,.0f}/s, hostile "
            f"{result['hostile_good_per_s_median']:,.0f}/s good records: slowdown "
            f"{result['slowdown_paired_median']:.2f}x (paired median)",
            file=sys.stderr,
        )
    print(f"-> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
