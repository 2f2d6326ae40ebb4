"""``ivmstream broker``: the embedded Kafka-wire broker in the foreground, serving every service's topics
unless told which topics to create."""

from __future__ import annotations

import argparse
from typing import Any

from ivmstream.cli.common import service_names

# Each service's topics when no --topic is given: (suffix, partitions; None: --partitions).
SERVICE_TOPICS: tuple[tuple[str, int | None], ...] = (("updates", None), ("results", 1), ("dlq", 1))


def register(sub: Any) -> None:
    p = sub.add_parser(
        "broker",
        help="run the embedded Kafka-wire broker (librdkafka mock cluster)",
        description="Run librdkafka's mock cluster on 127.0.0.1 until SIGTERM or Ctrl-C. The first line "
        "on stdout is its bootstrap address (give it to --bootstrap). Without --topic it creates every "
        "service's topics: <service>.updates with --partitions partitions, <service>.results and "
        "<service>.dlq with 1; a topic named by no one is created on first use with 4 partitions. While "
        "it runs, stdin takes 'create NAME N' (a topic of N partitions; answers 'ok NAME N' or "
        "'error CODE: why') and 'topics' (answers 'ok NAME:N ...'). It keeps everything in memory, at "
        "most 5 MiB per partition (the oldest records are dropped beyond that).",
    )
    p.add_argument(
        "--partitions",
        type=int,
        default=1,
        metavar="N",
        help="partitions of each <service>.updates topic and of a --topic named without a count (default 1)",
    )
    p.add_argument(
        "--topic",
        action="append",
        metavar="NAME[:PARTITIONS]",
        help="create this topic instead of the services' topics (repeatable)",
    )
    p.set_defaults(func=cmd_broker)


def service_topics(partitions: int) -> list[str]:
    """``NAME:PARTITIONS`` of every service's input, results and dead-letter topic."""
    return [
        f"{name}.{suffix}:{count or partitions}"
        for name in service_names()
        for suffix, count in SERVICE_TOPICS
    ]


def cmd_broker(args: argparse.Namespace) -> int:
    from ivmstream.dev import broker

    argv = ["--partitions", str(args.partitions)]
    for t in args.topic or service_topics(args.partitions):
        argv += ["--topic", t]
    return broker.main(argv, prog="ivmstream broker")
