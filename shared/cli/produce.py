"""``ivmstream produce``: a file's updates published to a topic, the way a user feeds a service."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ivmstream.cli.common import CliError, Progress, formats_of, load, warn_silent
from ivmstream.cli.inputs import add_input_options, count_lines, formats_epilog, open_inputs
from ivmstream.config import schema_of
from ivmstream.events import FORMATS


def register(sub: Any) -> None:
    p = sub.add_parser(
        "produce",
        help="publish an input file's updates to a topic",
        epilog=formats_epilog(),
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
    add_input_options(p)
    p.set_defaults(func=cmd_produce)


def _produce_target(args: argparse.Namespace) -> tuple[Any, Any]:
    """``--service``/``--config``: the service the records are for and its config, or (None, None)."""
    if args.service is None:
        if args.config is not None:
            raise CliError("--config needs --service (the service whose config it is)")
        return None, None
    return load(args.service, args.config)


def cmd_produce(args: argparse.Namespace) -> int:
    from ivmstream.runtime.kafka import check_reachable
    from ivmstream.runtime.produce import produce_records

    service, config = _produce_target(args)
    schema = schema_of(service, config) if service is not None else None
    key_field = args.key_field if args.key_field is not None or config is None else config.key_field
    topic = args.topic if args.topic is not None or config is None else config.input_topic
    if topic is None:
        raise CliError("produce needs --topic (or --service, to use the service's input topic)")
    formats = formats_of(service) if service is not None else FORMATS
    records, label = open_inputs(args, key_field, schema, formats)
    check_reachable(args.bootstrap)
    routing = (
        _routing(args.bootstrap, topic, schema, config) if config is not None and config.sharded else None
    )
    total = sum(count_lines(path) for path in args.input)
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
        warn_silent(silent, declared, service.name, label)
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
