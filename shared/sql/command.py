"""The ``ivmstream sql`` subcommand: explain, replay (and run/produce over Kafka) from one SQL file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# The compiler's modules (sqlglot, the services) load when a verb runs, not when the CLI starts.


def cmd_explain(args: argparse.Namespace) -> int:
    from ivmstream.sql.explain import explain_json, explain_text
    from ivmstream.sql.load import load_script
    from ivmstream.sql.routing import plan_script

    script = load_script(args.file)
    plans = plan_script(script, args.view)
    if args.json:
        for line in explain_json(plans):
            print(line)
    else:
        print(explain_text(plans))
    return 0


def _print(results: list[dict[str, Any]], after: int | None = None) -> None:
    for obj in results:
        out = {**obj, "after": after} if after is not None else obj
        print(json.dumps(out, default=str))
    sys.stdout.flush()


def cmd_replay(args: argparse.Namespace) -> int:
    from ivmstream.sql.inputs import InputChoice, input_overrides
    from ivmstream.sql.load import load_script
    from ivmstream.sql.replay import replay_script
    from ivmstream.sql.routing import plan_script

    script = load_script(args.file)
    plans = plan_script(script, args.view)
    choice = InputChoice(input_overrides(args.input), args.dataset, Path.cwd())
    results = replay_script(
        script, plans, choice, args.every, (lambda res, n: _print(res, n)) if args.every else None
    )
    _print(results)
    return 0


def register(sub: Any) -> None:
    """Register ``ivmstream sql`` and its subcommands on the CLI's subparsers."""
    p = sub.add_parser("sql", help="compile views from one SQL file and explain, replay or run them")
    verbs = p.add_subparsers(dest="sql_command", required=True, metavar="VERB")

    e = verbs.add_parser("explain", help="per view: service, strategy, why, plan and cost")
    e.add_argument("file", help="the SQL file")
    e.add_argument("--view", help="only this view")
    e.add_argument("--json", action="store_true", help="one JSON object per view")
    e.set_defaults(func=cmd_explain)

    r = verbs.add_parser("replay", help="run the views over their FROM FILE inputs; one JSON line per view")
    r.add_argument("file", help="the SQL file")
    r.add_argument("--view", help="only this view")
    r.add_argument("--every", type=int, help="also print every view's rows after every N input events")
    r.add_argument("--input", action="append", metavar="TABLE=PATH", help="read TABLE from PATH (repeatable)")
    r.add_argument(
        "--dataset",
        help="read data set NAME where a FROM FILE path names 'standard' (DBToaster's test convention; "
        "a *_del data set is read in the deletions format)",
    )
    r.set_defaults(func=cmd_replay)
    register_streaming(verbs)
    from ivmstream.sql.batch_command import register_batch

    register_batch(verbs)


def _plans_and_units(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from ivmstream.sql.load import load_script
    from ivmstream.sql.routing import plan_script
    from ivmstream.sql.streaming import stream_units

    script = load_script(args.file)
    plans = plan_script(script, args.view)
    settings = (
        {"checkpoint_interval": args.checkpoint_interval}
        if getattr(args, "checkpoint_interval", None)
        else {}
    )
    return script, plans, stream_units(plans, settings, script.tables)


def cmd_produce(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer

    from ivmstream.sql.inputs import InputChoice, input_overrides, read_events
    from ivmstream.sql.streaming import produce_events, tables_of

    script, _plans, units = _plans_and_units(args)
    choice = InputChoice(input_overrides(args.input), args.dataset, Path.cwd())
    events = read_events(script, tables_of(units), choice)
    producer = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True, "linger.ms": 20})
    failed: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    def send(topic: str, value: bytes) -> None:
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)

    counts = produce_events(units, events, send)
    producer.flush(60)
    if failed:
        from ivmstream.sql.errors import SqlError

        raise SqlError(f"{len(failed)} events were not delivered: {failed[0]}")
    for topic, n in counts.items():
        print(json.dumps({"topic": topic, "events": n}))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import threading

    from ivmstream.runtime import Worker
    from ivmstream.runtime.clients import KafkaClients
    from ivmstream.runtime.merged import slot_topic
    from ivmstream.sql.streaming import group_of
    from ivmstream.state import open_store

    _script, _plans, units = _plans_and_units(args)
    redis_client = None
    if args.redis:
        from ivmstream.redis_client import connect

        redis_client = connect(args.redis)
    workers = []
    for u in units:
        group = group_of(u)
        store = open_store(args.state_backend, group, state_dir=args.state_dir, redis_url=args.redis)
        if u.files and store.load(slot_topic(u.service.name), 0).empty:
            from ivmstream.sql.errors import SqlError

            raise SqlError(
                f"view {u.plan.view.name} reads static tables from files "
                f"({', '.join(t.name for t in u.files)}) beside its topics: load them with "
                "`ivmstream sql bootstrap` first (same --state-backend and --state-dir)",
                u.files[0].where,
            )
        workers.append(
            Worker(
                u.service,
                u.config,
                KafkaClients(args.bootstrap),
                store,
                group=group,
                redis_client=redis_client,
            )
        )
        print(
            json.dumps(
                {
                    "view": u.plan.view.name,
                    "service": u.service.name,
                    "input": [i.topic for i in u.config.inputs] or u.config.input_topic,
                    "output": u.config.output_topic,
                }
            )
        )
    sys.stdout.flush()
    if len(workers) == 1:
        workers[0].install_signal_handlers()
        workers[0].run()
        return 0
    import signal

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # each worker then checkpoints and closes
    threads = [threading.Thread(target=w.run, kwargs={"until": lambda _w: stop.is_set()}) for w in workers]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(0.5)
    except KeyboardInterrupt:
        stop.set()
        for t in threads:
            t.join()
    return 0


def register_streaming(verbs: Any) -> None:
    """``sql produce`` and ``sql run``: the views on the services' workers over Kafka."""
    p = verbs.add_parser(
        "produce", help="publish the views' input events (FROM FILE inputs through each view's intake)"
    )
    p.add_argument("file", help="the SQL file")
    p.add_argument("--bootstrap", required=True, help="Kafka bootstrap address")
    p.add_argument("--view", help="only this view")
    p.add_argument("--input", action="append", metavar="TABLE=PATH", help="read TABLE from PATH (repeatable)")
    p.add_argument("--dataset", help="as for replay")
    p.set_defaults(func=cmd_produce)

    r = verbs.add_parser("run", help="run the views' service workers (one per unit) until stopped")
    r.add_argument("file", help="the SQL file")
    r.add_argument("--bootstrap", required=True, help="Kafka bootstrap address")
    r.add_argument("--view", help="only this view")
    r.add_argument(
        "--state-backend",
        default="rocksdb",
        choices=("rocksdb", "redis", "memory"),
        help="where state and offsets are checkpointed (default rocksdb)",
    )
    r.add_argument("--state-dir", default="state", help="RocksDB state directory")
    r.add_argument("--redis", help="Redis URL: results (and redis state) go there")
    r.add_argument("--checkpoint-interval", type=float, help="seconds between checkpoints")
    r.set_defaults(func=cmd_run)
