"""``ivmstream produce``: a file's updates published to a topic, the way a user feeds a service."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from ivmstream.cli.common import (
    BOOTSTRAP_HELP,
    CliError,
    Progress,
    add_config_argument,
    formats_of,
    load,
    service_help,
    services_epilog,
    warn_silent,
)
from ivmstream.cli.inputs import (
    OpenInput,
    add_input_options,
    count_lines,
    formats_epilog,
    input_files,
    open_inputs,
)
from ivmstream.config import schema_of
from ivmstream.events import FORMATS, Schema, SourceRecord, relation_of


def register(sub: Any) -> None:
    p = sub.add_parser(
        "produce",
        help="publish input files' updates to a topic",
        description="Publish each input line's update event to a Kafka topic (a service's input topic "
        "with --service). Lines that make no event, or name a relation the service does not read, are "
        "listed on stderr as FILE:LINE and not sent; any makes the exit status 1 unless --allow-rejects.",
        epilog=formats_epilog(),
        epilog_fn=services_epilog,
    )
    p.add_argument("--bootstrap", required=True, metavar="ADDR", help=BOOTSTRAP_HELP)
    p.add_argument("--topic", help="topic to publish to (default with --service: its input topic)")
    p.add_argument(
        "--key-field",
        help="row column whose value becomes the record key (default with --service: its key_field)",
    )
    p.add_argument(
        "--service",
        metavar="SERVICE",
        help=f"{service_help()}: the updates are for it, so its relations type the input (tbl columns, "
        "order-book sides), name the relation of a csv or tbl file, and refuse lines of other relations; "
        "its formats are accepted",
    )
    add_config_argument(p, "the service's defaults; needs --service")
    add_input_options(p)
    p.set_defaults(func=cmd_produce)


def _produce_target(args: argparse.Namespace) -> tuple[Any, Any]:
    """``--service``/``--config``: the service the records are for and its config, or (None, None)."""
    if args.service is None:
        if args.config is not None:
            raise CliError("--config needs --service (the service whose config it is)")
        return None, None
    return load(args.service, args.config)


def _only_declared(records: Iterable[SourceRecord], schema: Schema, service: str) -> Iterator[SourceRecord]:
    """The records, those of a relation ``service`` does not read turned into refused lines (an event
    the worker would dead-letter is better refused here, with its file and line)."""
    declared = schema.relations
    for rec in records:
        relation = relation_of(rec) if rec.error is None else None
        if relation is not None and relation not in declared:
            rec = dataclasses.replace(
                rec,
                error=f"relation {relation!r} is not one of the relations of {service} "
                f"({', '.join(declared)})",
            )
        yield rec


class _Labelled:
    """The inputs' records one file after another, remembering which file the last one came from."""

    def __init__(self, inputs: list[OpenInput]) -> None:
        self.inputs = inputs
        self.current = inputs[0]

    def __iter__(self) -> Iterator[SourceRecord]:
        for opened in self.inputs:
            self.current = opened
            yield from opened.records

    def where(self, rec: SourceRecord) -> str:
        return self.current.where(rec.relation)


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
    inputs = open_inputs(args, key_field, schema, formats, service.name if service is not None else None)
    labelled = _Labelled(inputs)
    records: Iterable[SourceRecord] = labelled
    if schema is not None:
        records = _only_declared(records, schema, service.name)
    check_reachable(args.bootstrap)
    routing = (
        _routing(args.bootstrap, topic, schema, config) if config is not None and config.sharded else None
    )
    total = sum(count_lines(path) for path in {f.path for f in input_files(args)})
    progress = Progress(f"producing to {topic}", total if len(inputs) == 1 else None)
    report = produce_records(
        args.bootstrap,
        topic,
        records,
        on_progress=lambda rec, sent: progress.update(rec.lineno if len(inputs) == 1 else sent),
        on_skip=lambda rec: print(
            f"{labelled.where(rec)}:{rec.lineno}: refused: {rec.refusal()}", file=sys.stderr
        ),
        routing=routing,
    )
    progress.clear()
    if report.failures:
        raise CliError(
            f"{len(report.failures)} of {report.sent} records were not delivered: {report.failures[0]}"
        )
    emitted = ", ".join(
        f"{name if name is not None else '(no relation)'} {n}" for name, n in report.relations.items()
    )
    print(f"relations emitted: {emitted or 'none'}", file=sys.stderr)
    label = "+".join(opened.label for opened in inputs)
    if schema is not None:
        declared = list(schema.relations)
        silent = [r for r in declared if not report.relations.get(r)]
        warn_silent(silent, declared, service.name, label)
    refused = len(report.skipped)
    where = topic if routing is None else ", ".join(f"{n} to {t}" for t, n in sorted(report.topics.items()))
    print(
        f"produced {report.sent} records to {where}"
        + (f" ({refused} input lines refused)" if refused else "")
    )
    if refused and not args.allow_rejects:
        raise CliError(
            f"{refused} of {report.sent + refused} input lines were refused and not sent, listed "
            "above (--allow-rejects exits 0 anyway)"
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
