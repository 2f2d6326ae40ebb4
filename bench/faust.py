"""The Faust runtime against the default (confluent-kafka) runtime: events/s of a service through its
worker, same workload, same broker.

One run starts its own embedded broker. For each service (``reference``, the reference workload: its
demo sample repeated, keyed by store over 3 partitions, an engine that does almost nothing per event,
so the runtime's own cost shows; ``triangles``: its demo graph stream once, a real view), each
measurement produces the input to a fresh topic before anything is timed, then runs one worker in a
process of its own (``bench/faust_runs``): ``Worker.run`` on the default runtime, the Faust app of
``ivmstream run --runtime faust`` on Faust, each with a RocksDB store, no Redis, the demo config, under
the worker GC policy. The clock runs from the worker's first batch to the checkpoint covering the whole
input. The batch size is the largest divisor of the record count up to the default (2000), so no run
ends on a partial batch held for a consume timeout.

The two runtimes alternate over ``--repeats`` (order flipping each repeat), and the load average is
recorded at every measurement. Reported: the median events/s per runtime, the median of the per-repeat
ratios Faust/default, and CPU per event. ``--profile`` (default, but with ``--quick``) adds one
cProfile'd run per runtime of the first service and tells where the time goes (``bench/faust_profile``).

Usage (from the repo root)::

    .venv/bin/python bench/faust.py            # reference 24000, triangles 3800 records, 5 repeats
    .venv/bin/python bench/faust.py --quick    # 2000 / 1900 records, 1 repeat, no profile

Writes ``bench/results/faust.json`` and ``faust.png`` (``faust_quick.*`` with ``--quick``);
``--markdown FILE.json`` prints the tables of docs/faust.md from a stored report.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# ``python bench/faust.py`` puts bench/ first on the path, where this file would shadow the faust package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
sys.path.insert(0, str(REPO))

import orjson  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

from bench.faust_profile import profile_table, summarize  # noqa: E402
from bench.lib.broker import produce_all  # noqa: E402
from bench.lib.machine import dist_version, load_average, machine_info  # noqa: E402
from bench.lib.plots import plt  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from bench.lib.report import command_line, shown  # noqa: E402
from ivmstream.dev.broker import BrokerProcess  # noqa: E402
from ivmstream.partitioner import partition_for  # noqa: E402
from ivmstream.runtime.kafka import producer_settings  # noqa: E402
from ivmstream.service import load_service  # noqa: E402

RESULTS = REPO / "bench" / "results"
RUNTIMES = ("confluent-kafka", "faust")
# The embedded broker keeps at most 5 MiB per partition; the triangles demo refuses an edge inserted
# twice, so it runs over its sample once.
SERVICES = {"reference": 24000, "triangles": 3800}
QUICK = {"reference": 2000, "triangles": 1900}
DEFAULT_BATCH = 2000

Stream = list[tuple[bytes, bytes]]


def workload(name: str, count: int) -> tuple[dict[str, Any], int, Stream]:
    """The service's demo config, partition count and ``count`` records of its demo sample (repeated)."""
    service = load_service(name)
    assert service.demo is not None
    config = dict(service.demo.config)
    key_field = config["key_field"]
    lines = Path(service.demo.input).read_bytes().splitlines()
    records = []
    for i in range(count):
        line = lines[i % len(lines)]
        records.append((str(orjson.loads(line)["row"][key_field]).encode(), line))
    return config, service.demo.partitions, records


def aligned_batch_size(count: int) -> int:
    """The largest batch size up to the default that divides ``count``: no run ends on a partial batch."""
    return max(d for d in range(1, DEFAULT_BATCH + 1) if count % d == 0)


def measure(
    broker: BrokerProcess,
    name: str,
    runtime: str,
    work: tuple[dict[str, Any], int, Stream],
    workdir: Path,
    profile: Path | None = None,
) -> dict[str, Any]:
    """One run in a child process, on a fresh topic, group and state directory."""
    config, partitions, records = work
    topic = f"faust-{name}-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions)
    producer = Producer(producer_settings(broker.bootstrap, {"compression.type": "lz4", "linger.ms": 20}))
    ends = [0] * partitions
    for key, _value in records:
        ends[partition_for(key, partitions)] += 1
    produce_all(producer, topic, ((k, v, partition_for(k, partitions)) for k, v in records))
    topics = {"input_topic": topic, "output_topic": f"{topic}.out", "dlq_topic": f"{topic}.dlq"}
    full = {**config, **topics, "batch_size": aligned_batch_size(len(records))}
    result = workdir / f"{topic}.json"
    cmd = [
        *(sys.executable, "-m", "bench.faust_runs", "--runtime", runtime, "--service", name),
        *("--bootstrap", broker.bootstrap, "--group", f"{topic}-g", "--config", json.dumps(full)),
        *("--ends", json.dumps(dict(enumerate(ends))), "--state-dir", str(workdir / topic)),
        *("--result", str(result)),
    ]
    if profile is not None:
        cmd += ["--profile", str(profile)]
    load = load_average()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not result.exists():
        raise RuntimeError(f"{name} on {runtime}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    run = json.loads(result.read_text())
    shutil.rmtree(workdir / topic, ignore_errors=True)
    if run["consumed"] != len(records) or run["rejected"]:
        raise RuntimeError(f"{name} on {runtime}: consumed {run['consumed']}, refused {run['rejected']}")
    return {**run, "loadavg_1": load[0]}


def bench_service(
    broker: BrokerProcess, name: str, count: int, repeats: int, workdir: Path
) -> dict[str, Any]:
    work = workload(name, count)
    runs: dict[str, list[dict[str, Any]]] = {r: [] for r in RUNTIMES}
    for r in range(repeats):
        for runtime in RUNTIMES if r % 2 == 0 else RUNTIMES[::-1]:
            run = measure(broker, name, runtime, work, workdir)
            runs[runtime].append(run)
            progress(f"{name} repeat {r + 1}/{repeats} {runtime}: {run['records_per_s']:,.0f} events/s")
    median = {rt: statistics.median(x["records_per_s"] for x in runs[rt]) for rt in RUNTIMES}
    pairs = zip(runs["faust"], runs["confluent-kafka"], strict=True)
    paired = [f["records_per_s"] / d["records_per_s"] for f, d in pairs]
    cpu = {rt: statistics.median(x["cpu_seconds"] / x["records"] * 1e6 for x in runs[rt]) for rt in RUNTIMES}
    return {
        "records": count,
        "batch_size": aligned_batch_size(count),
        "events_per_s_median": median,
        "faust_vs_default_paired_median": statistics.median(paired),
        "cpu_us_per_event_median": cpu,
        "runs": runs,
    }


def profile_runs(broker: BrokerProcess, name: str, count: int, workdir: Path) -> dict[str, Any]:
    """One profiled run per runtime (cProfile over the measured window), split into parts."""
    work = workload(name, count)
    out: dict[str, Any] = {"service": name, "records": count}
    for runtime in RUNTIMES:
        stats = workdir / f"{runtime}.pstats"
        run = measure(broker, name, runtime, work, workdir, profile=stats)
        out[runtime] = summarize(str(stats), run)
        progress(f"profiled {name} on {runtime}: {run['records_per_s']:,.0f} events/s under cProfile")
    return out


def bench(count: dict[str, int], repeats: int, profile: bool) -> dict[str, Any]:
    report: dict[str, Any] = {"repeats": repeats, "load_start": load_average(), "services": {}}
    with tempfile.TemporaryDirectory(prefix="faust-bench-") as tmp, BrokerProcess() as broker:
        for name, n in count.items():
            report["services"][name] = bench_service(broker, name, n, repeats, Path(tmp))
        if profile:
            first = next(iter(count))
            report["profile"] = profile_runs(broker, first, count[first], Path(tmp))
    report["load_end"] = load_average()
    return report


def plot(report: dict[str, Any], path: Path) -> None:
    """Median events/s per service and runtime, with the paired ratio."""
    names = list(report["services"])
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.4
    for i, runtime in enumerate(RUNTIMES):
        rates = [report["services"][n]["events_per_s_median"][runtime] for n in names]
        ax.bar([x + (i - 0.5) * width for x in range(len(names))], rates, width, label=runtime)
    for x, n in enumerate(names):
        s = report["services"][n]
        top = max(s["events_per_s_median"].values())
        ax.annotate(f"Faust {s['faust_vs_default_paired_median']:.2f}x", (x, top), ha="center", va="bottom")
    ax.set_xticks(range(len(names)), names)
    ax.set(ylabel="events/s through the worker (median)", title="Faust runtime against the default runtime")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown(report: dict[str, Any]) -> str:
    """The docs tables of a stored report: throughput, then where the time goes when profiled."""
    m = report.get("machine", {})
    lines = [
        "| service | records | default runtime, events/s | Faust, events/s | Faust / default (paired) "
        "| CPU µs/event, default / Faust |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, s in report["services"].items():
        med, cpu = s["events_per_s_median"], s["cpu_us_per_event_median"]
        lines.append(
            f"| `{name}` | {s['records']:,} | {med['confluent-kafka']:,.0f} | {med['faust']:,.0f} | "
            f"{s['faust_vs_default_paired_median']:.2f}x | "
            f"{cpu['confluent-kafka']:.0f} / {cpu['faust']:.0f} |"
        )
    loads = [r["loadavg_1"] for s in report["services"].values() for rs in s["runs"].values() for r in rs]
    lines += [
        "",
        f"`{report['command']}`: {report['repeats']} interleaved repeats, load average (1 min) "
        f"{min(loads):.2f}-{max(loads):.2f} at the measurements, {m.get('cpu_count')} CPUs; "
        f"faust-streaming {m.get('faust_streaming')}, aiokafka {m.get('aiokafka')}, "
        f"confluent-kafka {m.get('confluent_kafka')}.",
    ]
    if "profile" in report:
        lines += ["", profile_table(report["profile"])]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2000 / 1900 records, 1 repeat, no profile")
    parser.add_argument("--services", nargs="+", choices=sorted(SERVICES))
    parser.add_argument("--records", type=int, help="records per service (default: per service)")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--profile", action=argparse.BooleanOptionalAction, help="default: on unless --quick")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--markdown", type=Path, metavar="FILE.json", help="print the docs tables of a report"
    )
    args = parser.parse_args()
    if args.markdown is not None:
        print(markdown(json.loads(args.markdown.read_text())))
        return
    sizes = QUICK if args.quick else SERVICES
    count = {n: args.records or sizes[n] for n in args.services or SERVICES}
    repeats = args.repeats or (1 if args.quick else 5)
    profile = args.profile if args.profile is not None else not args.quick
    out = args.out or RESULTS / ("faust_quick.json" if args.quick else "faust.json")
    report = bench(count, repeats, profile)
    report["command"] = command_line("bench/faust.py", None)
    report["machine"] = machine_info(
        faust_streaming=dist_version("faust-streaming"), aiokafka=dist_version("aiokafka")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, out.with_suffix(".png"))
    ratios = {n: s["faust_vs_default_paired_median"] for n, s in report["services"].items()}
    print(json.dumps({"faust_vs_default": ratios, "out": shown(out)}, indent=2))


if __name__ == "__main__":
    main()
