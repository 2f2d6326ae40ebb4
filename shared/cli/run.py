"""``ivmstream run``: a service's worker in the foreground, until a signal stops it."""

from __future__ import annotations

import argparse
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from ivmstream.cli.common import (
    REDIS_HELP,
    CliError,
    add_bootstrap_argument,
    add_config_argument,
    add_service_argument,
    add_state_arguments,
    check_broker,
    group_or_default,
    load,
    open_state,
    services_epilog,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run a service's worker",
        description="Consume the service's input topic, keep its state with exactly-once checkpoints, "
        "publish results to its results topic (and Redis, PostgreSQL when given) and refused records to "
        "its dead-letter topic, until SIGTERM or Ctrl-C. The input topic must exist (`ivmstream broker` "
        "creates every service's topics).",
        epilog_fn=services_epilog,
    )
    add_service_argument(p)
    add_bootstrap_argument(p)
    add_config_argument(p)
    add_state_arguments(
        p,
        redis_help=f"publish each key's latest result there (and keep state there with --state-backend "
        f"redis): {REDIS_HELP}",
        group_help="consumer group (default ivmstream.<service>)",
    )
    p.add_argument(
        "--postgres",
        metavar="DSN",
        help="PostgreSQL DSN: results are also upserted into ivmstream_results (numeric ones kept in "
        "ivmstream_result_history); a DSN without a password takes IVMSTREAM_POSTGRES_PASSWORD(_FILE)",
    )
    p.add_argument(
        "--role",
        choices=("worker", "coordinator"),
        default="worker",
        help="with a sharded config (shard_by): worker (default) publishes its partitions' partial "
        "results; coordinator sums them into the global result (its group defaults to "
        "ivmstream.<service>.coordinator)",
    )
    p.add_argument(
        "--metrics-port", type=int, metavar="PORT", help="serve Prometheus metrics (/metrics) on this port"
    )
    p.add_argument(
        "--runtime",
        choices=("confluent-kafka", "faust"),
        default="confluent-kafka",
        help="what consumes the input: confluent-kafka (default) or faust, the worker as a Faust app's "
        "agent with the same exactly-once (docs/faust.md)",
    )
    p.add_argument(
        "--web-port", type=int, help="with --runtime faust: Faust's web server (results) on this port"
    )
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


def cmd_run(args: argparse.Namespace) -> int:
    from ivmstream.metrics import RuntimeMetrics
    from ivmstream.redis_client import connect
    from ivmstream.runtime import Worker
    from ivmstream.runtime.clients import KafkaClients
    from ivmstream.runtime.gc_policy import worker_gc
    from ivmstream.runtime.postgres import sink_for

    declared, declared_config = service, config = load(args.service, args.config)
    if args.role == "coordinator":  # the worker runs it; its name names the group, store and metrics
        from ivmstream.runtime.coordinator import coordinator_of

        service, config, _codec = coordinator_of(declared, declared_config)
    group = group_or_default(args.group, service.name)
    backend = args.state_backend or "rocksdb"
    redis_client = connect(args.redis) if args.redis else None
    postgres = sink_for(args.postgres, config) if args.postgres else None
    check_broker(args.bootstrap, config)
    _require_topics(args.bootstrap, config)
    store = open_state(args, service.name, group)
    metrics = RuntimeMetrics(service.name, runtime=args.runtime)
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
    if args.runtime == "faust":
        return _run_faust(args, service, config, store, group, metrics, redis_client, postgres)
    worker = Worker(
        declared,
        declared_config,
        KafkaClients(args.bootstrap),
        store,
        group=group,
        redis_client=redis_client,
        postgres=postgres,
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


def _run_faust(
    args: argparse.Namespace,
    service: Any,
    config: Any,
    store: Any,
    group: str,
    metrics: Any,
    redis_client: Any,
    postgres: Any,
) -> int:
    if args.role != "worker":
        raise CliError("--role coordinator runs on the default runtime only (--runtime confluent-kafka)")
    from ivmstream.faust.runtime import FaustStopped, run_faust
    from ivmstream.runtime.gc_policy import worker_gc

    logging.getLogger("ivmstream").info(
        "running %s on Faust: %s -> %s, group %s",
        service.name,
        config.input_topic,
        config.output_topic,
        group,
    )
    try:
        with worker_gc() if args.gc == "worker" else contextlib.nullcontext():
            run_faust(
                service,
                config,
                args.bootstrap,
                store,
                group=group,
                metrics=metrics,
                redis_client=redis_client,
                postgres=postgres,
                web_port=args.web_port,
                silent_relation_after=args.silent_relation_after,
            )
    except FaustStopped as exc:
        raise CliError(str(exc)) from None
    return 0


def _require_topics(bootstrap: str, config: Any) -> None:
    """The input topic must exist: one line naming it and how to create it, instead of the consumer's
    error later (a sharded worker checks its broadcast topic itself)."""
    from ivmstream.runtime.kafka import partition_count

    topic = config.input_topic
    if partition_count(bootstrap, topic, overrides=config.kafka.get("consumer", {})) is None:
        raise CliError(
            f"topic {topic} does not exist at {bootstrap}: create it (`ivmstream broker` without --topic "
            f"creates every service's topics; a running one takes 'create {topic} 1' on its stdin; on "
            f"Kafka: kafka-topics.sh --bootstrap-server {bootstrap} --create --topic {topic})"
        )


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
