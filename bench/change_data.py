"""Change records through the worker: Debezium ``c`` and ``u`` records (plain and schema-wrapped)
against native update events, on the reference workload.

One run starts its own embedded broker. Each case is N records on a topic of 4 partitions (keyed by row
id), read by a keyless view (``inputs: [{topic, format}]``, the reference service, a memory store, no
Redis) through a real ``Worker`` at the default batch size; the clock runs from its first batch to the
end of the topic (``bench/lib/worker_runs``), so the cases differ by decoding alone:

* ``native``: N native insert events (the reference demo's rows);
* ``c-plain`` / ``c-wrapped``: N Debezium creates of the same rows, plain, or wrapped in
  ``{"schema", "payload"}`` with the price a Connect decimal (base64, scale 2);
* ``u-plain`` / ``u-wrapped``: N/50 creates, then updates up to N records, each retracting its row's
  previous image and inserting a new one (two events per record).

N is a multiple of the batch size, so no run ends on a partial batch, which the worker would hold for
its consume timeout (0.2 s) waiting for more.

Cases alternate over ``--repeats`` (order rotating), each on a fresh topic and group. Reported are the
median records/s per case and the median per-repeat ratios of time per record: ``c`` against native
and ``u`` against ``c`` (the goals: at most 2 each), in wall time (first batch to caught up) and in CPU
time of the worker's thread over the same span (``time.thread_time``, as ``bench/hostile.py``), which
other processes on a loaded machine do not inflate. The load average is recorded before and after.

Usage (from the repo root)::

    .venv/bin/python bench/change_data.py            # 20000 records per case, 5 repeats (~2 min)
    .venv/bin/python bench/change_data.py --quick    # 2000 records, 1 repeat

Writes ``bench/results/change_data.json`` and ``change_data.png`` (``change_data_quick.*`` with
``--quick``); ``--markdown FILE.json`` prints the table of docs/change-data.md from a stored report.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Producer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.lib.broker import produce_all  # noqa: E402
from bench.lib.machine import machine_info  # noqa: E402
from bench.lib.plots import plt  # noqa: E402
from bench.lib.report import command_line, shown  # noqa: E402
from ivmstream.config import build_config  # noqa: E402
from ivmstream.dev.broker import BrokerProcess  # noqa: E402
from ivmstream.events import EventCodec, Relation, Schema  # noqa: E402
from ivmstream.events.change_formats import ChangeCodec  # noqa: E402
from ivmstream.events.changes import ChangeSpec  # noqa: E402
from ivmstream.events.debezium_fast import FastDebezium  # noqa: E402
from ivmstream.partitioner import partition_for  # noqa: E402
from ivmstream.runtime import Worker  # noqa: E402
from ivmstream.runtime.clients import KafkaClients  # noqa: E402
from ivmstream.runtime.gc_policy import worker_gc  # noqa: E402
from ivmstream.runtime.kafka import producer_settings  # noqa: E402
from ivmstream.service import load_service  # noqa: E402
from ivmstream.state import MemoryStore  # noqa: E402

RESULTS = REPO / "bench" / "results"
PARTITIONS = 4
RELATIONS = {"items": {"id": "int", "item": "str", "qty": "int", "price": "decimal", "store": "str"}}
CASES = ("native", "c-plain", "c-wrapped", "u-plain", "u-wrapped")
_SCHEMA_FIELDS = [
    {"field": "id", "type": "int64"},
    {"field": "item", "type": "string"},
    {"field": "qty", "type": "int32"},
    {
        "field": "price",
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2"},
    },
    {"field": "store", "type": "string"},
]
SCHEMA = {
    "type": "struct",
    "name": "shop.public.items.Envelope",
    "fields": [
        {"field": "before", "type": "struct", "optional": True, "fields": _SCHEMA_FIELDS},
        {"field": "after", "type": "struct", "optional": True, "fields": _SCHEMA_FIELDS},
        {"field": "source", "type": "struct", "fields": [{"field": "table", "type": "string"}]},
        {"field": "op", "type": "string"},
        {"field": "ts_ms", "type": "int64", "optional": True},
    ],
}

Stream = list[tuple[bytes, bytes]]


def rows(count: int) -> list[dict[str, Any]]:
    """The reference demo's rows, repeated, each with an id."""
    service = load_service("reference")
    assert service.demo is not None
    sample = [orjson.loads(line)["row"] for line in Path(service.demo.input).read_bytes().splitlines()]
    return [{"id": i, **sample[i % len(sample)]} for i in range(count)]


def _connect(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """A row as the JSON converter with schemas writes it: the decimal as base64 of its unscaled value."""
    if row is None:
        return None
    cents = round(float(row["price"]) * 100)
    return {**row, "price": base64.b64encode(cents.to_bytes(4, "big", signed=True)).decode()}


def _debezium(op: str, before: Any, after: Any, wrapped: bool, ts: int) -> bytes:
    if wrapped:
        before, after = _connect(before), _connect(after)
    payload = {"before": before, "after": after, "source": {"table": "items"}, "op": op, "ts_ms": ts}
    return orjson.dumps({"schema": SCHEMA, "payload": payload} if wrapped else payload)


def workload(case: str, count: int) -> Stream:
    """``(key, value)`` records of one case."""
    key = lambda row: orjson.dumps({"id": row["id"]})  # noqa: E731
    if case == "native":
        return [(key(r), orjson.dumps({"relation": "items", "row": r, "delta": 1})) for r in rows(count)]
    wrapped = case.endswith("wrapped")
    if case.startswith("c"):
        return [(key(r), _debezium("c", None, r, wrapped, i)) for i, r in enumerate(rows(count))]
    live = rows(max(1, count // 50))
    out = [(key(r), _debezium("c", None, r, wrapped, i)) for i, r in enumerate(live)]
    for i in range(count - len(live)):  # N records in all: whole batches (a partial one waits 0.2 s)
        old = live[i % len(live)]
        new = {**old, "qty": old["qty"] % 97 + 1, "price": f"{(i % 9000 + 100) / 100:.2f}"}
        live[i % len(live)] = new
        out.append((key(new), _debezium("u", old, new, wrapped, i)))
    return out


def measure(broker: BrokerProcess, case: str, records: Stream) -> dict[str, Any]:
    service = load_service("reference")
    topic = f"cdc-{case}-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, PARTITIONS)
    producer = Producer(producer_settings(broker.bootstrap, {"compression.type": "lz4", "linger.ms": 20}))
    produce_all(producer, topic, ((k, v, partition_for(k, PARTITIONS)) for k, v in records))
    fmt = "native" if case == "native" else "debezium-json"
    config = build_config(
        service,
        {
            "relations": RELATIONS,
            "inputs": [{"topic": topic, "format": fmt}],
            "output_topic": f"{topic}.out",
            "dlq_topic": f"{topic}.dlq",
        },
    )
    worker = Worker(service, config, KafkaClients(broker.bootstrap), MemoryStore(), group=f"{topic}-g")
    marks: dict[str, float] = {}
    results: dict[str, Any] = {}
    deadline = time.monotonic() + 600

    def first_batch(_records: int) -> None:
        if "first_batch" not in marks:
            marks["first_batch_cpu"], marks["first_batch"] = time.thread_time(), time.perf_counter()

    def caught_up(w: Worker) -> bool:
        if (w.positions().get(0) or 0) >= len(records):
            marks["caught_up"], marks["caught_up_cpu"] = time.perf_counter(), time.thread_time()
            results.update(w.results())
            return True
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker did not catch up: {w.positions()}")
        return False

    worker.hooks.batch_received.append(first_batch)
    with worker_gc():
        worker.run(until=caught_up)
    seconds = marks["caught_up"] - marks["first_batch"]
    cpu = marks["caught_up_cpu"] - marks["first_batch_cpu"]
    [result] = results.values()
    dead = int(
        sum(
            s.value
            for fam in worker.metrics.registry.collect()
            for s in fam.samples
            if s.name == "ivmstream_events_rejected_total"
        )
    )
    return {
        "records": len(records),
        "batch_size": config.batch_size,
        "seconds": seconds,
        "records_per_s": len(records) / seconds,
        # the worker's own thread over the same span (it waits for the Kafka client's threads otherwise)
        "worker_thread_cpu_seconds": cpu,
        "cpu_us_per_record": cpu / len(records) * 1e6,
        "rows": result["count"],
        "rejected": dead,
    }


def decoding_alone(streams: dict[str, Stream], passes: int = 5) -> dict[str, dict[str, float]]:
    """CPU µs per record of decoding alone (no worker), the best of ``passes``: the native codec's
    ``decode_many`` for native events, ``ChangeCodec.decode`` per record for Debezium records, with the
    compiled tier (``c``) and without it (``python``: the Python converters first)."""
    schema = Schema({name: Relation(name, tuple(cols.items())) for name, cols in RELATIONS.items()})
    spec = ChangeSpec("debezium-json")
    out: dict[str, dict[str, float]] = {}
    for case, records in streams.items():
        values = [v for _k, v in records]
        tiers: dict[str, Any] = {}
        if case == "native":
            native = EventCodec(schema)
            tiers["c"] = lambda native=native, values=values: native.decode_many(values)
        else:
            for tier, compiled in (("c", True), ("python", False)):
                codec = ChangeCodec(spec, schema)
                codec.fast = FastDebezium(spec, schema, compiled=compiled)
                tiers[tier] = lambda codec=codec, records=records: [codec.decode(k, v) for k, v in records]
        out[case] = {}
        for _ in range(passes):
            for tier, run in tiers.items():
                started = time.thread_time()
                run()
                took = (time.thread_time() - started) / len(records) * 1e6
                out[case][tier] = min(out[case].get(tier, took), took)
    return out


def bench(broker: BrokerProcess, count: int, repeats: int) -> dict[str, Any]:
    streams = {case: workload(case, count) for case in CASES}
    runs: dict[str, list[dict[str, Any]]] = {case: [] for case in CASES}
    for r in range(repeats):
        order = CASES[r % len(CASES) :] + CASES[: r % len(CASES)]
        for case in order:
            run = measure(broker, case, streams[case])
            if run["rejected"]:
                raise RuntimeError(f"{case}: {run['rejected']} records refused")
            runs[case].append(run)
            print(f"repeat {r + 1}/{repeats} {case}: {run['records_per_s']:,.0f} records/s", file=sys.stderr)

    def per_record(case: str, i: int, field: str) -> float:
        return runs[case][i][field] / runs[case][i]["records"]

    def ratios_of(field: str) -> dict[str, float]:
        def ratio(a: str, b: str) -> float:
            pairs = (per_record(a, i, field) / per_record(b, i, field) for i in range(repeats))
            return statistics.median(pairs)

        return {
            "c_plain_vs_native": ratio("c-plain", "native"),
            "c_wrapped_vs_native": ratio("c-wrapped", "native"),
            "u_plain_vs_c_plain": ratio("u-plain", "c-plain"),
            "u_wrapped_vs_c_wrapped": ratio("u-wrapped", "c-wrapped"),
            "wrapped_vs_plain_c": ratio("c-wrapped", "c-plain"),
        }

    ratios, cpu_ratios = ratios_of("seconds"), ratios_of("worker_thread_cpu_seconds")
    return {
        "records_per_case": count,
        "repeats": repeats,
        "medians_records_per_s": {c: statistics.median(x["records_per_s"] for x in runs[c]) for c in CASES},
        "medians_cpu_us_per_record": {
            c: statistics.median(x["cpu_us_per_record"] for x in runs[c]) for c in CASES
        },
        "ratios": ratios,
        "cpu_ratios": cpu_ratios,
        "within_2x": all(v <= 2.0 for k, v in ratios.items() if k != "wrapped_vs_plain_c"),
        "within_2x_cpu": all(v <= 2.0 for k, v in cpu_ratios.items() if k != "wrapped_vs_plain_c"),
        "runs": runs,
        "decoding_alone_cpu_us": decoding_alone(streams),
    }


def plot(report: dict[str, Any], path: Path) -> None:
    """Median records/s per case, with the goals' ratios."""
    medians = report["medians_records_per_s"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(range(len(CASES)), [medians[c] for c in CASES], color=["grey", "C0", "C0", "C1", "C1"])
    ax.set_xticks(range(len(CASES)), CASES)
    r = report["ratios"]
    ax.set(
        ylabel="records/s through the worker (median)",
        title=f"c vs native {r['c_plain_vs_native']:.2f}x (wrapped {r['c_wrapped_vs_native']:.2f}x), "
        f"u vs c {r['u_plain_vs_c_plain']:.2f}x",
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _against(r: dict[str, float]) -> dict[str, str]:
    return {
        "native": "",
        "c-plain": f"{r['c_plain_vs_native']:.2f}x native",
        "c-wrapped": f"{r['c_wrapped_vs_native']:.2f}x native",
        "u-plain": f"{r['u_plain_vs_c_plain']:.2f}x `c-plain`",
        "u-wrapped": f"{r['u_wrapped_vs_c_wrapped']:.2f}x `c-wrapped`",
    }


def markdown(report: dict[str, Any]) -> str:
    """The docs table of a stored report."""
    medians, wall = report["medians_records_per_s"], _against(report["ratios"])
    load = report.get("machine", {}).get("loadavg_1_5_15") or ["?"]
    start = report.get("load_start")
    loads = f"{load[0]}" if start is None else f"{start[0]:.2f} at the start, {load[0]:.2f} at the end"
    command = report.get("command", "bench/change_data.py")
    if "cpu_ratios" not in report:
        lines = [
            "| case | records/s (median) | time per record |",
            "|---|---:|---|",
            *(f"| `{c}` | {medians[c]:,.0f} | {wall[c]} |" for c in CASES),
        ]
    else:
        cpu, cpu_us = _against(report["cpu_ratios"]), report["medians_cpu_us_per_record"]
        lines = [
            "| case | records/s (median) | wall time per record | worker thread CPU per record | CPU ratio |",
            "|---|---:|---|---:|---|",
            *(f"| `{c}` | {medians[c]:,.0f} | {wall[c]} | {cpu_us[c]:.2f} µs | {cpu[c]} |" for c in CASES),
        ]
    alone = report.get("decoding_alone_cpu_us")
    if alone is not None:
        python = {c: f"{alone[c]['python']:.2f} µs" if "python" in alone[c] else "" for c in CASES}
        lines += [
            "",
            "| case | decoding alone, CPU per record | without the compiled tier |",
            "|---|---:|---:|",
            *(f"| `{c}` | {alone[c]['c']:.2f} µs | {python[c]} |" for c in CASES),
        ]
    lines += [
        "",
        f"{report['records_per_case']:,} records per case, {report['repeats']} repeats, ratios the median of "
        f"the per-repeat ratios; load average {loads} (`{command}`).",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2000 records per case, 1 repeat")
    parser.add_argument("--records", type=int)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--markdown", type=Path, metavar="FILE.json", help="print the docs table of a report")
    args = parser.parse_args()
    if args.markdown is not None:
        print(markdown(json.loads(args.markdown.read_text())))
        return
    count = args.records or (2000 if args.quick else 20000)
    repeats = args.repeats or (1 if args.quick else 5)
    out = args.out or RESULTS / ("change_data_quick.json" if args.quick else "change_data.json")
    load_start = list(os.getloadavg())
    with BrokerProcess() as broker:
        report = bench(broker, count, repeats)
    report["command"] = command_line("bench/change_data.py", None)
    report["load_start"] = load_start
    report["machine"] = machine_info()  # its load average: at the end
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, out.with_suffix(".png"))
    print(json.dumps({"ratios": report["ratios"], "out": shown(out)}, indent=2))


if __name__ == "__main__":
    main()
