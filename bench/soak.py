"""Soak: a worker's resident memory over a long run whose partition keys keep growing.

The reference service keyed by ``store`` runs as ``ivmstream run`` in a child process (RocksDB state,
default batch size and checkpoint interval) on the embedded broker. The stream never stops bringing
new keys: event i names a key never seen before with probability ``--new-key`` (0.2), else a key seen
before, chosen uniformly; each event inserts an item into its key's bag, or (one in four, when the bag
has one) deletes an earlier insert, so no event is refused. So the number of keys with state grows
linearly through the run (100,000 by its end at the default size) while each key stays small.

A key's events go to one partition (CRC-32 of the key). The events are produced while the worker
consumes, paced to keep the group's lag below ``--max-lag`` (the embedded broker keeps about 5 MiB per
partition and drops the oldest records beyond). Every 0.5 s the worker's VmRSS
(``/proc/<pid>/status``) is sampled with the events its group has committed and the worker's
``ivmstream_resident_engines`` and ``ivmstream_state_keys`` (its metrics port).

Two runs on the same events: ``resident_keys: 1000`` (per partition; the runtime default is 10,000)
and ``resident_keys: null`` (every engine stays in memory); ``--bounded-only`` leaves out the second, for
long runs. RocksDB's memory is the runtime's (``rocksdb_block_cache_mib``, ``rocksdb_write_buffer_mib``:
one block cache and one write budget for the worker's partitions) unless ``--block-cache-mib`` /
``--write-buffer-mib`` set them. Reported per run: the series, the RSS at
the end of warm-up (the first ``--warmup`` of the events) and at the end, the RSS slope after warm-up
(MiB per 100,000 events, least squares), the peak, resident engines and keys at the end, events/s.
The bounded run's slope after warm-up is the figure that says whether memory is flat.

The load average is recorded before and after each run. Writes ``bench/results/soak.json`` and
``soak.png`` (``soak_quick.*`` with ``--quick``). Run:
``.venv/bin/python bench/soak.py`` (about 3 minutes), ``--quick`` for a smoke run;
``--markdown FILE.json`` prints the docs section of a stored report.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from bench.lib.machine import machine_info  # noqa: E402
from bench.lib.plots import plt  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from bench.lib.report import command_line  # noqa: E402

RESULTS = REPO / "bench" / "results"
PARTITIONS = 4
SAMPLE_EVERY = 0.5


def stream(events: int, new_key: float, seed: int) -> Iterator[tuple[bytes, bytes]]:
    """(key, JSON event) pairs: a growing key space, inserts and deletes of earlier inserts."""
    rng = random.Random(seed)
    bags: list[list[dict[str, Any]]] = []
    for i in range(events):
        if not bags or rng.random() < new_key:
            bags.append([])
            k = len(bags) - 1
        else:
            k = rng.randrange(len(bags))
        bag = bags[k]
        if bag and rng.random() < 0.25:
            row = bag.pop(rng.randrange(len(bag)))
            delta = -1
        else:
            row = {
                "item": f"i{i % 97}",
                "qty": rng.randint(1, 9),
                "price": f"{rng.randint(1, 999) / 100:.2f}",
            }
            bag.append(row)
            delta = 1
        key = f"store-{k}"
        yield key.encode(), orjson.dumps({"relation": "items", "row": {**row, "store": key}, "delta": delta})


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def scrape(port: int, names: tuple[str, ...]) -> dict[str, float]:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        for name in names:
            if line.startswith(name + "{") or line.startswith(name + " "):
                out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def committed(bootstrap: str, group: str, topic: str) -> int:
    from ivmstream.runtime.progress import group_progress

    return sum(max(p.committed, 0) for p in group_progress(bootstrap, group, topic))


def run_case(
    broker: Any,
    records: list[tuple[bytes, bytes]],
    resident: int | None,
    max_lag: int,
    tmp: Path,
    rocksdb: dict[str, int],
) -> dict[str, Any]:
    from confluent_kafka import Producer

    from ivmstream.dev.redis_server import free_port
    from ivmstream.runtime.kafka import producer_settings

    bootstrap = broker.bootstrap
    topic = f"soak-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, PARTITIONS)
    group, port = f"{topic}-g", free_port()
    config = tmp / f"{topic}.json"
    config.write_text(
        orjson.dumps(
            {
                "key_field": "store",
                "allow_negative": False,
                "input_topic": topic,
                "output_topic": f"{topic}.out",
                "dlq_topic": f"{topic}.dlq",
                "resident_keys": resident,
                **rocksdb,
            }
        ).decode()
    )
    cmd = [sys.executable, "-m", "ivmstream.cli", "run", "reference", "--bootstrap", bootstrap]
    cmd += ["--config", str(config), "--group", group, "--state-dir", str(tmp / topic)]
    cmd += ["--metrics-port", str(port)]
    log = (tmp / f"{topic}.log").open("wb")
    worker = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    samples: list[dict[str, float]] = []
    load_before = os.getloadavg()
    stop = threading.Event()
    started = time.monotonic()

    def sample() -> None:
        while not stop.wait(SAMPLE_EVERY):
            rss = rss_mib(worker.pid)
            if rss is None:
                return
            seen = scrape(port, ("ivmstream_resident_engines", "ivmstream_state_keys"))
            samples.append(
                {
                    "seconds": time.monotonic() - started,
                    "events": committed(bootstrap, group, topic),
                    "rss_mib": rss,
                    "resident_engines": seen.get("ivmstream_resident_engines", -1.0),
                    "state_keys": seen.get("ivmstream_state_keys", -1.0),
                }
            )

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    producer = Producer(producer_settings(bootstrap, {"compression.type": "lz4"}))
    try:
        for i in range(0, len(records), 5_000):
            while i - committed(bootstrap, group, topic) > max_lag:
                if worker.poll() is not None:
                    raise RuntimeError(f"worker exited {worker.returncode}: see {log.name}")
                time.sleep(0.1)
            for key, value in records[i : i + 5_000]:
                while True:
                    try:
                        producer.produce(topic, value, key, partition=zlib.crc32(key) % PARTITIONS)
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.flush(60)
        deadline = time.monotonic() + 600
        while committed(bootstrap, group, topic) < len(records):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not finish: see {log.name}")
            time.sleep(0.2)
        seconds = time.monotonic() - started
        time.sleep(2 * SAMPLE_EVERY)  # a last sample after the final checkpoint
    finally:
        stop.set()
        sampler.join(5)
        worker.terminate()
        worker.wait(30)
        log.close()
    return {
        "resident_keys": resident,
        "topic": topic,
        "seconds": seconds,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "samples": samples,
    }


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return None if den == 0 else sum((x - mx) * (y - my) for x, y in points) / den


def summarize(run: dict[str, Any], events: int, warmup: float) -> dict[str, Any]:
    samples = run["samples"]
    cut = warmup * events
    after = [(s["events"], s["rss_mib"]) for s in samples if s["events"] >= cut]
    per_event = slope(after)
    at_warmup = next((s["rss_mib"] for s in samples if s["events"] >= cut), None)
    last = samples[-1] if samples else {}
    return {
        "resident_keys": run["resident_keys"],
        "loadavg_1min_before_after": [run["loadavg_before"][0], run["loadavg_after"][0]],
        "events_per_second": events / run["seconds"],
        "rss_at_warmup_mib": at_warmup,
        "rss_end_mib": last.get("rss_mib"),
        "rss_peak_mib": max((s["rss_mib"] for s in samples), default=None),
        "rss_slope_mib_per_100k_events_after_warmup": None if per_event is None else per_event * 100_000,
        "resident_engines_end": last.get("resident_engines"),
        "state_keys_end": last.get("state_keys"),
    }


def plot(report: dict[str, Any], path: Path) -> None:
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    for run in report["runs"]:
        label = f"resident_keys {run['resident_keys']}"
        xs = [s["events"] / 1e3 for s in run["samples"]]
        ax.plot(xs, [s["rss_mib"] for s in run["samples"]], label=label)
        bx.plot(xs, [s["resident_engines"] for s in run["samples"]], label=label)
    ax.axvline(report["options"]["warmup"] * report["events"] / 1e3, color="grey", linestyle=":")
    ax.set(xlabel="events consumed (thousands)", ylabel="worker VmRSS (MiB)", title="worker memory")
    bx.set(xlabel="events consumed (thousands)", ylabel="resident engines", title="engines in memory")
    ax.legend()
    bx.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def rocksdb_size(options: dict[str, Any], key: str) -> str:
    mib = options.get(key)
    return "(unrecorded)" if mib is None else f"{mib} MiB"


def markdown(report: dict[str, Any]) -> str:
    o = report["options"]
    lines = [
        "## Soak: worker memory as keys keep arriving",
        "",
        f"`bench/soak.py` (run `{report['run_id']}`): the reference service keyed by `store` in one "
        f"`ivmstream run` process (RocksDB state, {PARTITIONS} partitions), {report['events']:,} events, "
        f"a new key with probability {o['new_key']} per event, so {report['keys']:,} keys by the end. "
        f"RocksDB: one block cache of {rocksdb_size(o, 'rocksdb_block_cache_mib')} and a write budget of "
        f"{rocksdb_size(o, 'rocksdb_write_buffer_mib')} shared by the worker's partitions. "
        f"RSS slope after the first {o['warmup']:.0%} of the events (least squares).",
        "",
        "| resident_keys | events/s | RSS at warm-up (MiB) | RSS at end (MiB) | slope after warm-up "
        "(MiB per 100k events) | resident engines at end | keys with state | load (1 min) before / after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in report["summary"]:

        def f(v: Any, fmt: str = "{:,.0f}") -> str:
            return "-" if v is None or v < 0 else fmt.format(v)

        load = " / ".join(f"{x:.1f}" for x in s.get("loadavg_1min_before_after") or []) or "-"

        lines.append(
            f"| {s['resident_keys'] if s['resident_keys'] is not None else 'null (all)'} | "
            f"{f(s['events_per_second'])} | {f(s['rss_at_warmup_mib'], '{:,.1f}')} | "
            f"{f(s['rss_end_mib'], '{:,.1f}')} | "
            f"{f(s['rss_slope_mib_per_100k_events_after_warmup'], '{:,.2f}')} | "
            f"{f(s['resident_engines_end'])} | {f(s['state_keys_end'])} | {load} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=500_000)
    p.add_argument("--new-key", type=float, default=0.2)
    p.add_argument("--resident", type=int, default=1_000, help="resident_keys of the bounded run")
    p.add_argument("--warmup", type=float, default=0.2, help="share of the events counted as warm-up")
    p.add_argument("--max-lag", type=int, default=40_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default=None)
    p.add_argument("--markdown", metavar="FILE.json")
    p.add_argument("--quick", action="store_true", help="a smoke run (20,000 events)")
    p.add_argument("--bounded-only", action="store_true", help="leave out the resident_keys: null run")
    p.add_argument("--block-cache-mib", type=int, default=None, help="rocksdb_block_cache_mib")
    p.add_argument("--write-buffer-mib", type=int, default=None, help="rocksdb_write_buffer_mib")
    args = p.parse_args(argv)
    if args.markdown:
        print(markdown(orjson.loads(Path(args.markdown).read_bytes())))
        return 0
    if args.quick:
        args.events, args.resident = 20_000, 50
    out = (
        Path(args.out).with_suffix(".json")
        if args.out
        else RESULTS / ("soak_quick.json" if args.quick else "soak.json")
    )

    from ivmstream.config import RUNTIME_OPTIONS
    from ivmstream.dev.broker import BrokerProcess

    rocksdb = {
        key: value if value is not None else RUNTIME_OPTIONS[key].default
        for key, value in (
            ("rocksdb_block_cache_mib", args.block_cache_mib),
            ("rocksdb_write_buffer_mib", args.write_buffer_mib),
        )
    }
    records = list(stream(args.events, args.new_key, args.seed))
    keys = len({k for k, _ in records})
    progress(f"soak: {len(records):,} events over {keys:,} keys")
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-soak-"))
    runs = []
    started, load_start = time.time(), os.getloadavg()
    try:
        with BrokerProcess() as broker:
            for resident in (args.resident,) if args.bounded_only else (args.resident, None):
                progress(f"  resident_keys {resident}")
                runs.append(run_case(broker, records, resident, args.max_lag, tmp, rocksdb))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report = {
        "benchmark": "soak",
        "run_id": uuid.uuid4().hex[:8],
        "started": started,
        "command": command_line("bench/soak.py", argv),
        "quick": args.quick,
        "options": {
            "new_key": args.new_key,
            "warmup": args.warmup,
            "max_lag": args.max_lag,
            "seed": args.seed,
            "partitions": PARTITIONS,
            **rocksdb,
        },
        "loadavg_start": load_start,
        "events": len(records),
        "keys": keys,
        "runs": runs,
        "summary": [summarize(r, len(records), args.warmup) for r in runs],
        "seconds": time.time() - started,
        "machine": machine_info(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    plot(report, out.with_suffix(".png"))
    print(orjson.dumps(report["summary"], option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
