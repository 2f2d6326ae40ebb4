"""The ``ivmstream`` command. Errors a user can cause print one line and exit non-zero."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import os
import sys
import textwrap
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import orjson

from ivmstream.config import ConfigError, build_config, load_config, schema_of
from ivmstream.events import FORMATS, FormatRegistry, Schema, SourceError, read_source
from ivmstream.events.formats import parse_assignments
from ivmstream.secrets import install_log_redaction, redact

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CliError(RuntimeError):
    """A user-facing failure; its message is the whole output."""


def _known_errors() -> tuple[type[BaseException], ...]:
    from ivmstream.redis_client import RedisUnavailable
    from ivmstream.runtime.kafka import BrokerUnavailable
    from ivmstream.runtime.output import DeliveryFailed
    from ivmstream.runtime.rebalance import HistoryTruncated
    from ivmstream.secrets import SecretError
    from ivmstream.state import StateError

    known: tuple[type[BaseException], ...] = (
        CliError,
        ConfigError,
        SourceError,
        BrokerUnavailable,
        RedisUnavailable,
        StateError,
        DeliveryFailed,
        HistoryTruncated,
        SecretError,
        OSError,
    )
    if "ivmstream.spark.jobs" in sys.modules:  # Spark's errors only matter when its commands ran
        from ivmstream.spark.jobs import BatchError
        from ivmstream.spark.kafka_source import KafkaSourceError
        from ivmstream.spark.session import SparkUnavailable
        from ivmstream.spark.snapshot import SnapshotError

        known += (BatchError, KafkaSourceError, SparkUnavailable, SnapshotError)
    return known


def _print_json(obj: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(obj, default=str) + b"\n")
    sys.stdout.flush()


class Progress:
    """A progress line on stderr: redrawn in place on a terminal, a line every few seconds otherwise."""

    def __init__(self, label: str, total: int | None = None, every: float = 2.0) -> None:
        self.label, self.total, self.every = label, total, every
        self.tty = sys.stderr.isatty()
        self.started = self._last = time.monotonic()

    def update(self, n: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < (0.2 if self.tty else self.every):
            return
        self._last = now
        rate = n / max(now - self.started, 1e-9)
        if self.total:
            pct = min(100.0, 100.0 * n / self.total)
            bar = "#" * int(pct / 5)
            text = f"{self.label} [{bar:<20}] {n}/{self.total} ({pct:.0f}%) {rate:,.0f}/s"
        else:
            text = f"{self.label} {n:,} {rate:,.0f}/s"
        sys.stderr.write(("\r" + text) if self.tty else text + "\n")
        sys.stderr.flush()

    def done(self, n: int) -> None:
        self.update(n, force=True)
        if self.tty:
            sys.stderr.write("\n")


# --- commands ----------------------------------------------------------------------------------------


def cmd_broker(args: argparse.Namespace) -> int:
    from ivmstream.dev import broker

    argv = ["--partitions", str(args.partitions)]
    for t in args.topic or []:
        argv += ["--topic", t]
    return broker.main(argv, prog="ivmstream broker")


def _count_lines(path: str) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


# Flags kept from before --read-option: each is an alias of the read option of the same name.
_READ_OPTION_ALIASES = ("book", "brokers", "delimiter")


def _read_options(args: argparse.Namespace) -> dict[str, str]:
    """``--read-option KEY=VALUE`` pairs plus the alias flags; the reader types and checks them."""
    given = parse_assignments(args.read_option or [])
    for key in _READ_OPTION_ALIASES:
        value = getattr(args, key)
        if value is None:
            continue
        if key in given and given[key] != value:
            raise CliError(f"--{key} {value} and --read-option {key}={given[key]} disagree")
        given[key] = value
    return given


def _formats_of(service: Any) -> FormatRegistry:
    """The built-in formats plus the service's own."""
    if not service.formats:
        return FORMATS
    try:
        return FORMATS.extended(service.formats, owner=f"service {service.name}")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _open_inputs(
    args: argparse.Namespace,
    key_field: str | None,
    schema: Schema | None = None,
    formats: FormatRegistry = FORMATS,
) -> tuple[Any, str]:
    """Records of ``--input`` and a label for messages: one file, several files one after another (each
    ``.tbl`` or ``.csv`` table's relation from its name unless ``--relation`` is given), or several
    TPC-H tables interleaved. ``schema`` (the consuming service's, when known) fills in what a file
    leaves out."""
    inputs: list[str] = args.input
    options = _read_options(args)
    if args.format != "tpch" or len(inputs) == 1:
        sources = [
            read_source(
                path,
                args.format,
                relation=args.relation,
                key_field=key_field,
                schema=schema,
                formats=formats,
                options=options,
            )
            for path in inputs
        ]
        return (sources[0] if len(sources) == 1 else itertools.chain.from_iterable(sources)), "+".join(inputs)
    if args.relation:
        raise CliError(
            "--relation names one table; with several tpch inputs each table comes from its file name"
        )
    formats.get_format("tpch").parse_options(options)  # it takes none: any given is an error
    from ivmstream.events.tpch import interleave_tpch

    return (rec for _rel, rec in interleave_tpch(inputs, key_field=key_field)), "+".join(inputs)


def _warn_silent(silent: Sequence[str], declared: Sequence[str], service: str, label: str) -> None:
    """One stderr line naming the declared relations no event arrived for (the view ignored them)."""
    if silent:
        print(
            f"ivmstream: warning: no event for relation(s) {', '.join(silent)} in {label} "
            f"({service} declares {', '.join(declared)})",
            file=sys.stderr,
        )


def _produce_target(args: argparse.Namespace) -> tuple[Any, Any]:
    """``--service``/``--config``: the service the records are for and its config, or (None, None)."""
    if args.service is None:
        if args.config is not None:
            raise CliError("--config needs --service (the service whose config it is)")
        return None, None
    if args.config is not None:
        return _load(args.service, args.config)
    from ivmstream.service import load_service

    service = load_service(args.service)
    return service, build_config(service, {}, source=f"{service.name} defaults")


def cmd_produce(args: argparse.Namespace) -> int:
    from ivmstream.runtime.kafka import check_reachable
    from ivmstream.runtime.produce import produce_records

    service, config = _produce_target(args)
    schema = schema_of(service, config) if service is not None else None
    key_field = args.key_field if args.key_field is not None or config is None else config.key_field
    topic = args.topic if args.topic is not None or config is None else config.input_topic
    if topic is None:
        raise CliError("produce needs --topic (or --service, to use the service's input topic)")
    formats = _formats_of(service) if service is not None else FORMATS
    records, label = _open_inputs(args, key_field, schema, formats)
    check_reachable(args.bootstrap)
    routing = (
        _routing(args.bootstrap, topic, schema, config) if config is not None and config.sharded else None
    )
    total = sum(_count_lines(path) for path in args.input)
    progress = Progress(f"producing to {topic}", total)
    report = produce_records(
        args.bootstrap,
        topic,
        records,
        on_progress=lambda rec, n: progress.update(rec.lineno if len(args.input) == 1 else n),
        on_skip=lambda rec: print(f"{label}:{rec.lineno}: skipped: {rec.error}", file=sys.stderr),
        routing=routing,
    )
    progress.done(progress.total or report.sent)
    if report.failures:
        raise CliError(
            f"{len(report.failures)} of {report.sent} records were not delivered: {report.failures[0]}"
        )
    emitted = ", ".join(
        f"{name if name is not None else '(no relation)'} {n}" for name, n in report.relations.items()
    )
    print(f"relations emitted: {emitted or 'none'}", file=sys.stderr)
    if schema is not None:
        declared = list(schema.relations)
        silent = [r for r in declared if not report.relations.get(r)]
        _warn_silent(silent, declared, service.name, label)
    skipped = len(report.skipped)
    where = topic if routing is None else ", ".join(f"{n} to {t}" for t, n in sorted(report.topics.items()))
    print(
        f"produced {report.sent} records to {where}"
        + (f" ({skipped} unreadable lines skipped)" if skipped else "")
    )
    return 0


def _routing(bootstrap: str, topic: str, schema: Any, config: Any) -> Any:
    """A sharded config's routing over the existing input topic's partitions (one shard each); the
    broadcast topic must exist with one partition if some relation lacks the shard variable."""
    import dataclasses

    from ivmstream.runtime.kafka import partition_count
    from ivmstream.runtime.routing import routing_of

    shards = partition_count(bootstrap, topic)
    if shards is None:
        raise CliError(
            f"the input topic {topic} of a sharded query must exist: its partition count is the number "
            "of shards"
        )
    routing = routing_of(schema.relations.values(), dataclasses.replace(config, input_topic=topic), shards)
    if routing.broadcast:
        found = partition_count(bootstrap, config.broadcast_topic)
        if found != 1:
            raise CliError(
                f"the broadcast topic {config.broadcast_topic} must exist with one partition "
                f"(events of {', '.join(sorted(routing.broadcast))}); it "
                + ("does not exist" if found is None else f"has {found}")
            )
    return routing


def _load(service_name: str, config_path: str):
    from ivmstream.service import load_service

    service = load_service(service_name)
    return service, load_config(service, config_path)


def cmd_run(args: argparse.Namespace) -> int:
    from ivmstream.metrics import RuntimeMetrics
    from ivmstream.redis_client import connect
    from ivmstream.runtime import Worker
    from ivmstream.runtime.clients import KafkaClients
    from ivmstream.runtime.gc_policy import worker_gc
    from ivmstream.runtime.kafka import check_reachable
    from ivmstream.state import open_store

    declared, declared_config = service, config = _load(args.service, args.config)
    if args.role == "coordinator":  # the worker runs it; its name names the group, store and metrics
        from ivmstream.runtime.coordinator import coordinator_of

        service, config, _codec = coordinator_of(declared, declared_config)
    group = args.group or f"ivmstream.{service.name}"
    backend = args.state_backend or ("rocksdb")
    redis_client = connect(args.redis) if args.redis else None
    check_reachable(args.bootstrap, overrides=config.kafka.get("consumer", {}))
    store = open_store(backend, f"{service.name}.{group}", state_dir=args.state_dir, redis_url=args.redis)
    metrics = RuntimeMetrics(service.name)
    if redis_client is not None:
        from ivmstream.verdict import reconcile_key

        metrics.export_reconcile(redis_client, reconcile_key(config.output_topic))
    if args.metrics_port is not None:
        try:
            metrics.serve(args.metrics_port)
        except OSError as exc:
            raise CliError(f"cannot serve metrics on port {args.metrics_port}: {exc.strerror}") from None
    if args.silent_relation_after <= 0:
        raise CliError("--silent-relation-after must be a positive number of input records")
    worker = Worker(
        declared,
        declared_config,
        KafkaClients(args.bootstrap),
        store,
        group=group,
        redis_client=redis_client,
        metrics=metrics,
        role=args.role,
        silent_relation_after=args.silent_relation_after,
    )
    worker.install_signal_handlers()
    logging.getLogger("ivmstream").info(
        "running %s: %s -> %s, group %s, state %s",
        service.name,
        config.input_topic,
        config.output_topic,
        group,
        backend,
    )
    status = _status_printer(worker)
    # this process is the worker's own, so it may set the process-wide GC policy (shared/runtime/gc_policy.py)
    with worker_gc() if args.gc == "worker" else contextlib.nullcontext():
        worker.run(until=status)
    return 0


def _status_printer(worker: Any) -> Callable[[Any], bool]:
    last = [time.monotonic()]

    def status(w: Any) -> bool:
        now = time.monotonic()
        if now - last[0] >= 10.0:
            last[0] = now
            n = w.metrics.events_in._value.get()
            logging.getLogger("ivmstream").info(
                "%s: %d records consumed, %d partitions, %d keys, positions %s",
                w.service.name,
                int(n),
                len(w.partitions),
                sum(len(p.engines) for p in w.partitions.values()),
                w.positions(),
            )
        return False

    return status


def cmd_results(args: argparse.Namespace) -> int:
    from ivmstream.redis_client import connect
    from ivmstream.runtime.output import result_index, result_key
    from ivmstream.service import load_service

    topic = args.topic
    if topic is None:
        if args.config:
            topic = _load(args.service, args.config)[1].output_topic
        else:
            topic = f"{load_service(args.service).name}.results"
    client = connect(args.redis)
    keys = (
        [args.key]
        if args.key is not None
        else sorted(k.decode() for k in client.smembers(result_index(topic)))
    )
    if not keys:
        raise CliError(f"no results published yet for {args.service} (topic {topic})")
    records = {}
    for key in keys:
        raw = client.get(result_key(topic, key))
        if raw is None:
            raise CliError(f"no result published for key {key!r} of {args.service}")
        records[key] = orjson.loads(raw)
    _print_json(records[keys[0]] if len(keys) == 1 else records)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from ivmstream.replay import Rejected, Replay

    service, config = _load(args.service, args.config)
    run = Replay(service, config)
    schema = run.codec.schema
    records, label = _open_inputs(args, config.key_field, schema, _formats_of(service))
    every = args.every
    if every is not None and every <= 0:
        raise CliError("--every must be a positive number of events")
    next_print, printed = every or 0, -1
    for item in run.feed(records, chunk=min(every, 5000) if every else 5000):
        if isinstance(item, Rejected):
            print(f"{label}:{item.lineno}: rejected ({item.code}): {item.detail}", file=sys.stderr)
        elif every and item >= next_print:
            _print_json({"events": run.applied, "rejected": run.rejected, "result": run.result()})
            printed = item
            while next_print <= item:
                next_print += every
    if printed != run.applied:
        _print_json({"events": run.applied, "rejected": run.rejected, "result": run.result()})
    _warn_silent(run.silent_relations(), list(schema.relations), service.name, label)
    return 0


def _spark(master: str | None):
    from ivmstream.spark.session import get_session

    return get_session(master)


def cmd_bootstrap(args: argparse.Namespace) -> int:
    from ivmstream.spark.jobs import refuse_sharded, run_bootstrap
    from ivmstream.state import open_store

    service, config = _load(args.service, args.config)
    refuse_sharded(config)
    if args.state_dir and args.redis:
        raise CliError("give either --state-dir (RocksDB) or --redis (Redis state), not both")
    if args.from_offsets != "latest" and not args.bootstrap:
        raise CliError("--from-offsets needs --bootstrap to resolve the topic's offsets")
    group = args.group or f"ivmstream.{service.name}"
    backend = "redis" if args.redis else "rocksdb"
    store = open_store(
        backend, f"{service.name}.{group}", state_dir=args.state_dir or "state", redis_url=args.redis
    )
    if args.bootstrap:
        from ivmstream.runtime.kafka import check_reachable

        check_reachable(args.bootstrap, overrides=config.kafka.get("consumer", {}))
    print(f"bootstrapping {service.name} from {args.snapshot} with Spark ...", file=sys.stderr, flush=True)
    report = run_bootstrap(
        _spark(args.master),
        service,
        config,
        args.snapshot,
        store,
        bootstrap_servers=args.bootstrap,
        from_offsets=args.from_offsets,
        partitions=args.partitions,
    )
    where = ", ".join(f"{config.input_topic}:{p}@{o}" for p, o in sorted(report.partitions.items()))
    print(
        f"bootstrapped {report.keys} key(s) of {service.name} into {backend} state "
        f"({report.bytes_written} bytes); `ivmstream run` resumes at {where} ({report.seconds:.1f}s)"
    )
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    from ivmstream.redis_client import connect
    from ivmstream.runtime.kafka import check_reachable
    from ivmstream.spark.jobs import record_verdict, refuse_sharded, run_reconcile

    service, config = _load(args.service, args.config)
    refuse_sharded(config)
    client = connect(args.redis) if args.redis else None
    check_reachable(args.bootstrap, overrides=config.kafka.get("consumer", {}))
    print(f"reconciling {service.name} with Spark ...", file=sys.stderr, flush=True)
    report = run_reconcile(
        _spark(args.master),
        service,
        config,
        args.bootstrap,
        client,
        snapshot=args.snapshot,
        from_offsets=args.from_offsets,
    )
    if client is not None:
        record_verdict(client, report)
    if args.report:
        with open(args.report, "wb") as fh:
            fh.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2))
    print(report.summary())
    return 0 if report.verdict != "mismatch" else EXIT_FAILURE


def cmd_demo(args: argparse.Namespace) -> int:
    from ivmstream.dev.demo import run_demo

    return run_demo(follow=args.follow, services=args.service or None)


# --- parser ------------------------------------------------------------------------------------------


def _input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input",
        required=True,
        action="append",
        help="input file; repeatable: read one after another (--format tpch: tables interleaved by size)",
    )
    p.add_argument(
        "--format",
        metavar="FORMAT",
        help=f"input format: {', '.join(FORMATS)} or one of the service's own (default: from the file "
        "suffix; see the list below)",
    )
    p.add_argument(
        "--relation",
        help="relation of a csv or tbl file's rows (tbl default: the file name up to its first dot); "
        "tpch: the table (default: from the file name)",
    )
    p.add_argument(
        "--read-option",
        action="append",
        metavar="KEY=VALUE",
        help="an option of the format's reader (repeatable; listed below)",
    )
    p.add_argument("--delimiter", help="csv: the field separator (--read-option delimiter=C)")
    p.add_argument("--book", help="orderbook: side(s) to emit, auto|bids|asks|both (--read-option book=B)")
    p.add_argument("--brokers", help="orderbook: broker_id = id mod N (--read-option brokers=N)")


def _formats_epilog() -> str:
    listing = textwrap.indent(FORMATS.describe(), "  ")
    return (
        "input formats (--format NAME; options as --read-option KEY=VALUE):\n"
        f"{listing}\n"
        "A service may add formats of its own (see its page in docs/)."
    )


class _OneLineParser(argparse.ArgumentParser):
    """Usage mistakes end in one line and exit 2, like every other error of the command."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"ivmstream: error: {message} (see: {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="ivmstream",
        description="Incremental views over Kafka: run, feed and inspect ivmstream services.",
    )
    parser.add_argument("--log-level", default=os.environ.get("IVMSTREAM_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("broker", help="run the embedded Kafka-wire broker (librdkafka mock cluster)")
    p.add_argument("--partitions", type=int, default=1, help="partitions of topics named without a count")
    p.add_argument(
        "--topic", action="append", metavar="NAME[:PARTITIONS]", help="topic to create (repeatable)"
    )
    p.set_defaults(func=cmd_broker)

    p = sub.add_parser(
        "produce",
        help="publish an input file's updates to a topic",
        epilog=_formats_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    p.add_argument("--topic", help="topic to publish to (default with --service: its input topic)")
    p.add_argument(
        "--key-field",
        help="row column whose value becomes the record key (default with --service: its key_field)",
    )
    p.add_argument(
        "--service",
        help="the service the updates are for: its relations type the input (tbl columns, order-book "
        "sides) and its formats are accepted",
    )
    p.add_argument("--config", help="that service's config (default: the service's defaults)")
    _input_options(p)
    p.set_defaults(func=cmd_produce)

    p = sub.add_parser("run", help="run a service's worker")
    p.add_argument("service")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--config", required=True, help="service config (YAML or JSON)")
    p.add_argument("--state-dir", default="state", help="RocksDB state directory (default ./state)")
    p.add_argument("--state-backend", choices=("rocksdb", "redis", "memory"), help="default rocksdb")
    p.add_argument(
        "--redis", help="Redis URL: results are published there (and state, with --state-backend redis)"
    )
    p.add_argument("--group", help="consumer group (default ivmstream.<service>)")
    p.add_argument(
        "--role",
        choices=("worker", "coordinator"),
        default="worker",
        help="with a sharded config (shard_by): worker (default) publishes its partitions' partial "
        "results; coordinator sums them into the global result (its group defaults to "
        "ivmstream.<service>.coordinator)",
    )
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port")
    p.add_argument(
        "--gc",
        choices=("worker", "default"),
        default="worker",
        help="garbage-collector policy: worker (default; see docs/architecture.md) or Python's default",
    )
    p.add_argument(
        "--silent-relation-after",
        type=int,
        default=100_000,
        metavar="N",
        help="log a relation of the service that received no event in the first N input records "
        "(default 100000; at shutdown either way)",
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("results", help="print the latest published result from Redis")
    p.add_argument("service")
    p.add_argument("--redis", required=True)
    p.add_argument("--key", help="partition key (default: every key)")
    p.add_argument("--config", help="service config, to find a non-default output topic")
    p.add_argument("--topic", help="output topic (default <service>.results)")
    p.set_defaults(func=cmd_results)

    p = sub.add_parser(
        "replay",
        help="run a service's engine offline over a file, without Kafka",
        epilog=_formats_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("service")
    p.add_argument("--config", required=True)
    p.add_argument("--every", type=int, help="also print the state every N events")
    _input_options(p)
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("bootstrap", help="build a service's state from a snapshot with Spark")
    p.add_argument("service")
    p.add_argument("--config", required=True)
    p.add_argument(
        "--snapshot", required=True, help="directory of per-relation tables, or a .jsonl of events"
    )
    p.add_argument("--bootstrap", help="Kafka bootstrap servers, to resolve the offsets to resume from")
    p.add_argument("--from-offsets", default="latest", help="latest (default), earliest or P:O,P:O,...")
    p.add_argument("--partitions", type=int, default=1, help="input partitions, when no --bootstrap is given")
    p.add_argument("--state-dir", help="RocksDB state directory (default ./state)")
    p.add_argument("--redis", help="write Redis state instead of RocksDB")
    p.add_argument("--group", help="consumer group the workers will use (default ivmstream.<service>)")
    p.add_argument("--master", help="Spark master (default local[*])")
    p.set_defaults(func=cmd_bootstrap)

    p = sub.add_parser("reconcile", help="recompute published results with Spark SQL and compare")
    p.add_argument("service")
    p.add_argument("--config", required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--snapshot", help="the snapshot the service was bootstrapped from, if any")
    p.add_argument("--from-offsets", default="earliest", help="where the log starts after the snapshot")
    p.add_argument("--redis", help="read published results from Redis (default: from the results topic)")
    p.add_argument("--report", help="write the JSON report here")
    p.add_argument("--master", help="Spark master (default local[*])")
    p.set_defaults(func=cmd_reconcile)

    p = sub.add_parser("demo", help="the whole stack on the embedded default, with a sample workload")
    p.add_argument("--follow", action="store_true", help="keep running after the workload is done")
    p.add_argument("--service", action="append", help="only these services (repeatable)")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)  # Spark's bridge chatters at INFO
    install_log_redaction()  # every line below is masked for secrets (shared/secrets.py)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except _known_errors() as exc:
        if os.environ.get("IVMSTREAM_DEBUG"):
            return _debug_traceback(exc)
        msg = (
            str(exc)
            if not isinstance(exc, OSError) or not exc.filename
            else f"{exc.filename}: {exc.strerror}"
        )
        print(f"ivmstream: error: {redact(msg)}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as exc:  # last line of defence: one line, not a traceback
        if os.environ.get("IVMSTREAM_DEBUG"):
            return _debug_traceback(exc)
        line = f"ivmstream: error: unexpected {type(exc).__name__}: {exc} (set IVMSTREAM_DEBUG=1 for details)"
        print(redact(line), file=sys.stderr)
        return EXIT_FAILURE


def _debug_traceback(exc: BaseException) -> int:
    """IVMSTREAM_DEBUG: the whole traceback (chained exceptions too), secrets masked."""
    print(redact("".join(traceback.format_exception(exc))), end="", file=sys.stderr)
    return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
