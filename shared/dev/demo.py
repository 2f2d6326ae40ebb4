"""``ivmstream demo``: the whole stack on the embedded default, end to end, then cleaned up.

Starts the embedded broker, a private redis-server, a private PostgreSQL when one is installed (optional),
the results API (``ivmstream serve``) and one worker process per service that ships a demo workload,
produces each workload, shows live progress, prints the final results and where to read them, and
checks them against an independent offline replay of the same input (and, where a service provides
one, its Spark reconciliation).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ivmstream.config import build_config, schema_of
from ivmstream.dev.broker import BrokerProcess
from ivmstream.dev.demo_results import ResultPlaces, optional_postgres, results_api, show
from ivmstream.dev.redis_server import RedisServer, free_port
from ivmstream.events import FORMATS, read_source
from ivmstream.redis_client import connect
from ivmstream.replay import replay_all
from ivmstream.runtime.output import result_index, result_key
from ivmstream.runtime.postgres import view_name
from ivmstream.runtime.produce import produce_records
from ivmstream.runtime.progress import group_progress
from ivmstream.service import ServiceDefinition, available_services, load_service


@dataclass
class DemoRun:
    service: ServiceDefinition
    config_path: Path
    group: str
    topic: str
    output_topic: str
    metrics_port: int
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None


def say(text: str) -> None:
    print(text, flush=True)


def _services(names: list[str] | None) -> list[ServiceDefinition]:
    chosen = [load_service(n) for n in (names or sorted(available_services()))]
    with_demo = [s for s in chosen if s.demo is not None]
    real = [s for s in with_demo if not s.platform_only]
    # The platform's reference service runs when asked for, or when no real service exists yet.
    return with_demo if names or not real else real


def _start_worker(
    run: DemoRun, bootstrap: str, redis_url: str, workdir: Path, extra: list[str] | None = None
) -> None:
    run.log = workdir / f"{run.service.name}.log"
    with open(run.log, "wb") as out:  # the child keeps its own copy of the descriptor
        run.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ivmstream.cli",
                "--log-level",
                "WARNING",
                "run",
                run.service.name,
                "--bootstrap",
                bootstrap,
                "--config",
                str(run.config_path),
                "--state-dir",
                str(workdir / "state"),
                "--redis",
                redis_url,
                "--group",
                run.group,
                "--metrics-port",
                str(run.metrics_port),
                *(extra or []),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _summary(result: Any, width: int = 110) -> str:
    text = json.dumps(result, separators=(",", ":"), default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


def run_demo(follow: bool = False, services: list[str] | None = None) -> int:
    chosen = _services(services)
    if not chosen:
        say("no service ships a demo workload")
        return 1
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ivmstream-demo-")))
        say("starting the embedded Kafka-wire broker and a local redis-server ...")
        broker = stack.enter_context(BrokerProcess())
        redis_srv = stack.enter_context(RedisServer())
        say(f"  broker {broker.bootstrap}   redis {redis_srv.url}")
        places = ResultPlaces(redis_srv.url, stack.enter_context(optional_postgres(say)))
        stack.enter_context(results_api(places))
        runs: list[DemoRun] = []
        stack.callback(_stop_workers, runs)
        for svc in chosen:
            demo = svc.demo
            assert demo is not None
            config = build_config(svc, dict(demo.config), source=f"{svc.name} demo config")
            broker.create_topic(config.input_topic, demo.partitions, exist_ok=True)
            cfg_path = workdir / f"{svc.name}.json"
            cfg_path.write_bytes(orjson.dumps({**demo.config, "checkpoint_interval": 0.5}))
            run = DemoRun(
                svc, cfg_path, f"demo.{svc.name}", config.input_topic, config.output_topic, free_port()
            )
            _start_worker(run, broker.bootstrap, redis_srv.url, workdir, places.postgres_args)
            runs.append(run)
            say(
                f"  {svc.name}: worker started ({config.input_topic}, {demo.partitions} partitions, "
                f"metrics on :{run.metrics_port})"
            )

        expected: dict[str, Any] = {}
        feeders = []
        for run in runs:
            demo = run.service.demo
            assert demo is not None
            cfg = build_config(run.service, dict(demo.config))
            records = list(
                read_source(
                    demo.input,
                    demo.format,
                    key_field=cfg.key_field,
                    schema=schema_of(run.service, cfg),
                    formats=FORMATS.extended(run.service.formats, owner=run.service.name),
                    options=demo.read_options,
                )
            )
            expected[run.service.name] = replay_all(run.service, cfg, records).result()
            say(f"  {run.service.name}: producing {len(records)} update events from {demo.input.name}")
            feeder = threading.Thread(target=_feed, args=(broker.bootstrap, run.topic, records), daemon=True)
            feeder.start()
            feeders.append(feeder)
        client = connect(redis_srv.url)
        _wait_with_progress(runs, broker.bootstrap, client, feeders)
        ok = True
        say("\nfinal results (from Redis, as `ivmstream results` prints them):")
        for run in runs:
            published = _published(client, run)
            svc_expected = expected[run.service.name]
            keyed = run.service.demo is not None and "key_field" in run.service.demo.config
            got = published if keyed else published.get("")
            for key in sorted(published):
                say(f"  {run.service.name}[{key or '-'}] {_summary(published[key])}")
            match = got == svc_expected
            ok &= match
            say(f"  {run.service.name}: stream vs offline replay: {'MATCH' if match else 'MISMATCH'}")
        show(places, [(view_name(run.output_topic), run.output_topic) for run in runs], say)
        batch = [run for run in runs if run.service.batch is not None]
        if batch:
            say("\nSpark reconciliation (Spark SQL over the log, at the offsets each result reflects) ...")
            ok &= _reconcile(batch, broker.bootstrap, client)
        for run in runs:
            if run.service.batch is None:
                say(f"  {run.service.name}: Spark reconciliation: not available for this service")
        if follow:
            say("\n--follow: services keep running; Ctrl-C to stop")
            with contextlib.suppress(KeyboardInterrupt):
                while all(r.proc is not None and r.proc.poll() is None for r in runs):
                    time.sleep(1.0)
        say("\nstopping workers, broker and redis ...")
    say("demo " + ("passed: every view matches its independent recomputation" if ok else "FAILED"))
    return 0 if ok else 1


def _feed(bootstrap: str, topic: str, records: list, seconds: float = 4.0, steps: int = 8) -> None:
    """Produce in paced steps so the live view has something to show."""
    step = max(1, -(-len(records) // steps))
    for i in range(0, len(records), step):
        report = produce_records(bootstrap, topic, records[i : i + step])
        if report.failures:
            raise RuntimeError(f"producing to {topic} failed: {report.failures[0]}")
        time.sleep(seconds / steps)


def _reconcile(runs: list[DemoRun], bootstrap: str, client: Any) -> bool:
    from ivmstream.spark.jobs import record_verdict
    from ivmstream.spark.runs import run_reconcile
    from ivmstream.spark.session import get_session, stop_session

    spark = get_session("local[2]", app_name="ivmstream-demo")
    ok = True
    try:
        for run in runs:
            config = build_config(run.service, dict(run.service.demo.config if run.service.demo else {}))
            report = run_reconcile(spark, run.service, config, bootstrap, client)
            record_verdict(client, report)
            say("  " + report.summary())
            ok &= report.verdict == "match"
    finally:
        stop_session(spark)
    return ok


def _wait_with_progress(
    runs: list[DemoRun], bootstrap: str, client: Any, feeders: list[threading.Thread], timeout: float = 600.0
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        line = []
        done = not any(f.is_alive() for f in feeders)
        for run in runs:
            if run.proc is not None and run.proc.poll() is not None:
                log = run.log.read_text() if run.log else ""
                raise RuntimeError(
                    f"{run.service.name} worker exited ({run.proc.returncode}): {log.strip()[-500:]}"
                )
            progress = group_progress(bootstrap, run.group, run.topic)
            applied = sum(p.committed for p in progress)
            total = sum(p.high for p in progress)
            done &= applied >= total
            line.append(f"{run.service.name} {applied}/{total} checkpointed")
            live = _published(client, run)
            if live:
                key = sorted(live)[0]
                line.append(f"live {run.service.name}[{key or '-'}] {_summary(live[key], 60)}")
        say("  " + "  ".join(line))
        if done:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the demo workload did not finish in time")
        time.sleep(0.5)


def _published(client: Any, run: DemoRun) -> dict[str, Any]:
    keys = sorted(k.decode() for k in client.smembers(result_index(run.output_topic)))
    return {k: orjson.loads(client.get(result_key(run.output_topic, k)))["result"] for k in keys}


def _stop_workers(runs: list[DemoRun]) -> None:
    for run in runs:
        if run.proc is not None and run.proc.poll() is None:
            run.proc.terminate()
    for run in runs:
        if run.proc is not None:
            try:
                run.proc.wait(30)
            except subprocess.TimeoutExpired:
                run.proc.kill()
