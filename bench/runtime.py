"""Runtime overhead benchmark: raw confluent-kafka consumption vs. the ``Worker`` loop.

One run starts its own embedded Kafka-wire broker (``BrokerProcess``) and ``redis-server`` and measures,
on identical pre-produced input (JSON update events over 64 keys and 4 partitions):

1. ``raw``: a plain ``Consumer`` with the runtime's consumer settings and ``consume(2000)`` batches,
   touching every value (``len``): the ceiling any Python consumer loop on this machine can reach;
2. ``runtime-noop``: the ``Worker`` with an engine that does nothing, memory state store, no Redis;
3. ``runtime-rocksdb``: the ``Worker`` with a counting engine, RocksDB checkpoints;
4. ``runtime-redis``: the ``Worker`` with a counting engine, Redis checkpoints and Redis results;
5. ``runtime-noop-gc-default``: case 2 without the worker's GC policy, to show what the policy buys;
6. ``runtime-noop-python``: case 2 decoding with the pure-Python (msgspec) path instead of the compiled
   decoder (``shared/events/_fastjson.c``), to show what the compiled decoder buys.

Every case but the last runs its timed part under ``worker_gc()``, the GC policy ``ivmstream run``
applies to its worker process (``shared/runtime/gc_policy.py``: the start-up heap frozen, young
collections only past 50,000 live new containers rather than 700). The raw consumer runs under the same
policy, so both sides of the ratio are measured in the same kind of process.

plus, on request (``--cases``), a diagnostic pair ``raw-fastfetch`` and ``runtime-noop-fastfetch`` with
``fetch.queue.backoff.ms`` set by ``--fastfetch-backoff-ms``. librdkafka's default (1000 ms) stops
fetching for a whole second whenever its prefetch queue passes ``queued.min.messages``, which throttles
a consumer far below what it can read; the runtime's own settings use 10 ms, so the default cases
compare both sides unthrottled.

Every measurement uses a fresh topic (produced with an idempotent producer before timing) and a fresh
consumer group. The clock starts when the group assigns the partitions and stops when the last record
is consumed (raw) or, for the runtime, when the final checkpoint covering every record is written
(``Worker.run(until=...)`` with a predicate on ``worker.positions()``). Each case runs ``--repeats``
times; the cases are interleaved and their order rotates from one repeat to the next, so drift and a
case's position hit every case alike. Reported: each case's median rate, and for the ratios both the
ratio of medians and the median of the per-repeat ratios (runs of one repeat are seconds apart, so the
paired ratio cancels the machine's slower and faster spells; on a shared VM a CPU-bound loop's speed
varies by +-25% from minute to minute), with a distribution-free 95% confidence interval for the
no-op/raw paired median (``noop_vs_raw_paired_ci95``; 31 repeats by default, so the interval is the
10th to 22nd of the sorted ratios). Each run's JSON also records the cyclic GC's collections per
generation and their total time within the timed part (``gc_collections``, ``gc_seconds``), and the
CPU time the hypervisor took from this VM during it (``steal_s``, from ``/proc/stat``).

Usage (from the repo root)::

    .venv/bin/python bench/runtime.py                 # 200000 events, 31 repeats (~4 min)
    .venv/bin/python bench/runtime.py --quick         # smoke size: 20000 events, 1 repeat
    .venv/bin/python bench/runtime.py --profile       # + cProfile of one extra no-op worker run

Writes ``bench/results/runtime.json`` and ``runtime.png`` (``runtime_quick.*`` with ``--quick``, so a
smoke run never overwrites the real figures), and ``runtime.prof.txt`` with ``--profile``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import logging
import pstats
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from bench.lib.progress import progress  # noqa: E402
from bench.runtime_measure import Measurement, measure_raw, measure_worker, steal_seconds  # noqa: E402
from bench.runtime_report import machine_info, plot, print_summary, ratios, summarize  # noqa: E402
from bench.runtime_report import median_ci as median_ci  # noqa: E402  (tests use bench.runtime.median_ci)
from bench.runtime_workload import (  # noqa: E402
    BATCH,
    CASES,
    COUNT_SERVICE,
    KEYS,
    NOOP_SERVICE,
    PARTITIONS,
    PRODUCE_BATCH,
    RESULTS,
    SESSION_TIMEOUT_MS,
    end_offsets,
    make_records,
    produce,
)
from ivmstream.dev.broker import BrokerProcess  # noqa: E402
from ivmstream.dev.redis_server import RedisServer  # noqa: E402
from ivmstream.runtime.kafka import consumer_settings  # noqa: E402
from ivmstream.state import open_store  # noqa: E402


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--events", type=int, default=None, help="records per topic (default 200000; 20000 with --quick)"
    )
    p.add_argument(
        "--repeats", type=int, default=None, help="measurements per case (default 31; 1 with --quick)"
    )
    p.add_argument("--quick", action="store_true", help="smoke size: 20000 events, 1 repeat")
    p.add_argument(
        "--cases",
        default=",".join(CASES[:6]),
        help=f"comma-separated subset of {','.join(CASES)} (default: the first six)",
    )
    p.add_argument(
        "--checkpoint-interval",
        type=float,
        default=1.0,
        help="runtime checkpoint_interval in s (default 1.0)",
    )
    p.add_argument(
        "--fastfetch-backoff-ms",
        type=int,
        default=10,
        help="fetch.queue.backoff.ms of the diagnostic *-fastfetch cases (default 10; librdkafka: 1000)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="afterwards, cProfile one extra no-op runtime run (not counted) and write the top functions",
    )
    p.add_argument(
        "--out",
        default=None,
        help="output path prefix (default bench/results/runtime, bench/results/runtime_quick with --quick)",
    )
    args = p.parse_args(argv)
    args.events = args.events or (20000 if args.quick else 200000)
    args.repeats = args.repeats or (1 if args.quick else 31)
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        p.error(f"unknown case(s) {', '.join(unknown)} (known: {', '.join(CASES)})")
    if args.events < PARTITIONS or args.repeats < 1 or args.checkpoint_interval <= 0:
        p.error("--events must be >= 4, --repeats >= 1 and --checkpoint-interval > 0")
    args.out = Path(args.out) if args.out else RESULTS / ("runtime_quick" if args.quick else "runtime")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    run_id = uuid.uuid4().hex[:8]
    progress(f"run {run_id}: {args.events} events x {args.repeats} repeat(s), cases {', '.join(args.cases)}")
    records = make_records(args.events)
    broker = BrokerProcess()
    redis_server = RedisServer()
    state_dir = tempfile.mkdtemp(prefix="ivmstream-bench-")
    measurements: list[Measurement] = []
    profile_text: str | None = None
    try:
        broker.start()
        progress(f"embedded broker at {broker.bootstrap}")
        if "runtime-redis" in args.cases:
            redis_server.start()
            progress(f"redis-server at {redis_server.url}")

        def fresh_topic(case: str, repeat: int) -> tuple[str, str, dict[int, int]]:
            topic = f"bench.{run_id}.{case}.{repeat}"
            broker.create_topic(topic, PARTITIONS)
            broker.create_topic(f"{topic}.out", PARTITIONS)
            started = time.perf_counter()
            produce(broker.bootstrap, topic, records, PRODUCE_BATCH)
            ends = end_offsets(broker.bootstrap, topic)
            if sum(ends.values()) != len(records):
                raise RuntimeError(f"{topic} holds {sum(ends.values())} records, produced {len(records)}")
            progress(f"  produced {len(records)} records to {topic} in {time.perf_counter() - started:.2f}s")
            return topic, f"bench-{run_id}-{case}-{repeat}", ends

        fastfetch = {"fetch.queue.backoff.ms": args.fastfetch_backoff_ms}

        def run_case(case: str, repeat: int, profiler: cProfile.Profile | None = None) -> Measurement:
            topic, group, ends = fresh_topic(case, repeat)
            overrides = fastfetch if case.endswith("-fastfetch") else None
            try:
                if case.startswith("raw"):
                    return measure_raw(case, broker.bootstrap, topic, group, ends, repeat, overrides)
                namespace = f"bench.{run_id}.{case}.{repeat}"
                service, redis_url = COUNT_SERVICE, None
                if case == "runtime-rocksdb":
                    store = open_store("rocksdb", namespace, state_dir=state_dir)
                elif case == "runtime-redis":
                    redis_url = redis_server.url
                    store = open_store("redis", namespace, redis_url=redis_url)
                else:  # runtime-noop and its diagnostic variants
                    service, store = NOOP_SERVICE, open_store("memory", namespace)
                return measure_worker(
                    case,
                    service,
                    broker.bootstrap,
                    topic,
                    group,
                    ends,
                    repeat,
                    store,
                    redis_url=redis_url,
                    checkpoint_interval=args.checkpoint_interval,
                    consumer_overrides=overrides,
                    profiler=profiler,
                    gc_policy=case != "runtime-noop-gc-default",
                    compiled_decoder=case != "runtime-noop-python",
                )
            finally:
                gc.collect()  # the worker's consumer/producer sit in reference cycles: free them now

        for repeat in range(args.repeats):
            shift = repeat % len(args.cases)
            for case in args.cases[shift:] + args.cases[:shift]:  # interleaved, order rotating
                progress(f"{case} repeat {repeat + 1}/{args.repeats}")
                steal_before = steal_seconds()
                m = run_case(case, repeat)
                m.extra["steal_s"] = round(steal_seconds() - steal_before, 3)
                measurements.append(m)
                detail = ""
                if not case.startswith("raw"):
                    detail = (
                        f", {m.extra['checkpoints']} checkpoints (mean {m.extra['checkpoint_mean_ms']} ms), "
                        f"{m.extra['process_us_per_record']:.2f} us/record in _process"
                    )
                progress(f"  {case}: {m.rate:,.0f} records/s ({m.records} in {m.seconds:.3f}s{detail})")

        if args.profile:
            # fast fetch, so the profile shows the worker's own costs rather than fetch-backoff stalls
            progress("profiling one extra runtime-noop-fastfetch run under cProfile (not counted)")
            profiler = cProfile.Profile()
            m = run_case("runtime-noop-fastfetch", args.repeats, profiler)
            buf = io.StringIO()
            stats = pstats.Stats(profiler, stream=buf)
            buf.write(
                f"runtime-noop-fastfetch under cProfile (Worker.run, main thread): {m.rate:,.0f} records/s "
                f"(profiler overhead included), "
                f"{m.extra['process_us_per_record']:.2f} us/record in _process\n"
            )
            stats.sort_stats("tottime").print_stats(35)
            stats.sort_stats("cumulative").print_stats(35)
            profile_text = buf.getvalue()
    finally:
        gc.collect()  # destroy any client still connected before its broker goes away
        broker.stop()
        redis_server.stop()
        shutil.rmtree(state_dir, ignore_errors=True)

    cases = summarize(measurements)
    report = {
        "benchmark": "runtime",
        "run_id": run_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(
            [".venv/bin/python", "bench/runtime.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "config": {
            "events": args.events,
            "repeats": args.repeats,
            "partitions": PARTITIONS,
            "keys": KEYS,
            "batch_size": BATCH,
            "checkpoint_interval_s": args.checkpoint_interval,
            "consumer_settings": {
                k: v if isinstance(v, str | int | float | bool) else repr(v)
                for k, v in consumer_settings("<bootstrap>", "<group>", SESSION_TIMEOUT_MS).items()
            },
            "fastfetch_backoff_ms": args.fastfetch_backoff_ms,
            "producer_batch_messages": PRODUCE_BATCH,
            "statistic": "median over repeats",
            "timing": "group assignment -> last record consumed (raw) / final checkpoint written (runtime)",
            "sample_event": orjson.loads(records.values[min(17, len(records) - 1)]),
        },
        "machine": machine_info(),
        "cases": cases,
        "ratios": ratios(cases),
        "goal": {
            "noop_vs_raw_at_least": 0.5,
            "verdict_on": "noop_vs_raw (ratio of medians); noop_vs_raw_paired_ci95 says how sure it is",
        },
    }
    report["goal"]["met"] = (
        report["ratios"]["noop_vs_raw"] >= 0.5 if report["ratios"]["noop_vs_raw"] is not None else None
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    json_path, png_path = args.out.with_suffix(".json"), args.out.with_suffix(".png")
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, png_path)
    if profile_text is not None:
        prof_path = args.out.parent / f"{args.out.name}.prof.txt"
        prof_path.write_text(profile_text)
        progress(f"profile written to {prof_path}")
    progress(f"wrote {json_path} and {png_path}")
    print_summary(report)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, TimeoutError) as exc:  # a failed measurement: one line, not a traceback
        print(f"bench/runtime.py: {exc}", file=sys.stderr)
        sys.exit(1)
