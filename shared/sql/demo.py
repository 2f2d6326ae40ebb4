"""``ivmstream demo --sql FILE``: every view of one SQL file on its service's workers over the embedded
broker, fed by ``sql produce``, checked against ``sql replay`` and reconciled by Spark SQL.

docs/examples/sql/demo.sql holds the demo's five workloads as one file (docs/sql.md).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import orjson

from ivmstream.sql.inputs import InputChoice, read_events
from ivmstream.sql.streaming import StreamUnit, group_of, produce_events, stream_units, tables_of, view_rows


def say(text: str) -> None:
    print(text, flush=True)


def _short(value: Any, width: int = 100) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= width else text[: width - 3] + "..."


def _run_unit(u: StreamUnit, bootstrap: str, total: int, out: dict[str, Any]) -> None:
    from ivmstream.runtime import Worker
    from ivmstream.runtime.clients import KafkaClients
    from ivmstream.state import MemoryStore

    worker = Worker(u.service, u.config, KafkaClients(bootstrap), MemoryStore(), group=group_of(u))
    worker.run(until=lambda w: sum(v or 0 for v in w.positions().values()) >= total)  # type: ignore[misc]
    worker.close()
    out[u.config.output_topic] = True


def run_sql_demo(path: str | Path, *, spark: bool = True, base: Path | None = None) -> int:
    """Produce, run, compare with replay and (``spark``) reconcile every view of ``path``; 0 when every
    view matches."""
    from confluent_kafka import Producer

    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.runtime.dlq import latest_results
    from ivmstream.sql.load import load_script
    from ivmstream.sql.replay import replay_script
    from ivmstream.sql.routing import plan_script

    script = load_script(path, base=base)
    plans = plan_script(script)
    choice = InputChoice({}, None, base)
    for p in plans:
        say(f"  {p.view.name}: {p.service} ({p.strategy})")
    expected = {r["view"]: r for r in replay_script(script, plans, choice)}
    units = stream_units(plans, {"checkpoint_interval": 0.5}, script.tables)
    ok = True
    with BrokerProcess() as broker:
        say(
            f"embedded broker {broker.bootstrap}: producing the tables' events through each view's intake ..."
        )
        for u in units:
            broker.create_topic(u.config.input_topic, 1, exist_ok=True)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})

        def send(topic: str, value: bytes) -> None:
            while True:
                try:
                    producer.produce(topic, value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.1)

        counts = produce_events(units, read_events(script, tables_of(units), choice), send)
        producer.flush(60)
        done: dict[str, Any] = {}
        threads = [
            threading.Thread(
                target=_run_unit, args=(u, broker.bootstrap, counts.get(u.config.input_topic, 0), done)
            )
            for u in units
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        say("\nviews (from each view's results topic), against `sql replay` of the same files:")
        by_view: dict[str, list[StreamUnit]] = {}
        for u in units:
            by_view.setdefault(u.plan.view.name, []).append(u)
        for name, vunits in by_view.items():
            latest = [latest_results(broker.bootstrap, u.config.output_topic) for u in vunits]
            results = [
                max(r.values(), key=lambda rec: sum(rec["offsets"].values()))["result"] for r in latest
            ]
            got = view_rows(vunits, results)
            want = expected[name]
            match = got["rows"] == want["rows"]
            ok &= match
            say(f"  {name} ({got['service']}): {_short(got['rows'])}: {'MATCH' if match else 'MISMATCH'}")
        if spark:
            ok &= _reconcile(script, units, choice, broker.bootstrap)
    say("demo " + ("passed: every view matches" if ok else "FAILED"))
    return 0 if ok else 1


def _reconcile(script: Any, units: list[StreamUnit], choice: InputChoice, bootstrap: str) -> bool:
    from ivmstream.spark.session import get_session, stop_session
    from ivmstream.sql.batch import reconcile_views

    say("\nSpark reconciliation (each view's SQL in Spark SQL over the tables, as far as its results reach):")
    session = get_session("local[2]", app_name="ivmstream-sql-demo")
    try:
        reports = reconcile_views(session, script, units, choice, bootstrap)
    finally:
        stop_session(session)
    for r in reports:
        say(
            f"  {r['view']}: {r['verdict'].upper()}"
            + (f" ({r['differences'][0]})" if r.get("differences") else "")
        )
    sys.stdout.flush()
    return all(r["verdict"] == "match" for r in reports)
